"""Follower relations, both directions as in the seed: follower_relations_by_account holds, per account, the
accounts following it (rel_type `follower`) and the accounts it follows (rel_type `follows`); and
followed_celebrities, the celebrities among the accounts an account follows (Q4 merges their posts at read time).

A follow or unfollow changes the relation with a lightweight transaction on the follower's own `follows` row
(INSERT IF NOT EXISTS / DELETE IF EXISTS): its Paxos round sits in the follower's partition, never in a
celebrity's, and only the request whose transaction applied moves the counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cassandra import ConsistencyLevel

from api import partitions
from api.db import Database, Params, Statement, was_applied
from api.network.values import Account

TABLES = frozenset({"follower_relations_by_account", "followed_celebrities"})
FOLLOWER, FOLLOWS = "follower", "follows"

PUT_RELATION = Statement(
    "INSERT INTO follower_relations_by_account (network, account_id, rel_type, target_id, target_username) "
    "VALUES (?, ?, ?, ?, ?)")
DELETE_RELATION = Statement(
    "DELETE FROM follower_relations_by_account WHERE network = ? AND account_id = ? AND rel_type = ? "
    "AND target_id = ?")
FOLLOW_IF_NEW = Statement(
    "INSERT INTO follower_relations_by_account (network, account_id, rel_type, target_id, target_username) "
    "VALUES (?, ?, 'follows', ?, ?) IF NOT EXISTS", name="INSERT follower_relations_by_account IF NOT EXISTS",
    idempotent=False)
UNFOLLOW_IF_EXISTS = Statement(
    "DELETE FROM follower_relations_by_account WHERE network = ? AND account_id = ? AND rel_type = 'follows' "
    "AND target_id = ? IF EXISTS", name="DELETE follower_relations_by_account IF EXISTS", idempotent=False)
PUT_FOLLOWED_CELEBRITY = Statement(
    "INSERT INTO followed_celebrities (network, account_id, celebrity_id) VALUES (?, ?, ?)")
DELETE_FOLLOWED_CELEBRITY = Statement(
    "DELETE FROM followed_celebrities WHERE network = ? AND account_id = ? AND celebrity_id = ?")
FOLLOWED_CELEBRITIES = Statement(
    "SELECT celebrity_id FROM followed_celebrities WHERE network = ? AND account_id = ?")
FOLLOWED_CELEBRITIES_FRESH = Statement(
    "SELECT celebrity_id FROM followed_celebrities WHERE network = ? AND account_id = ?",
    name="SELECT followed_celebrities (fresh)", consistency=ConsistencyLevel.LOCAL_QUORUM)
COUNT_RELATIONS = Statement(
    "SELECT COUNT(*) AS n FROM follower_relations_by_account WHERE network = ? AND account_id = ? "
    "AND rel_type = ?")
LIST_RELATIONS = Statement(
    "SELECT target_id, target_username FROM follower_relations_by_account WHERE network = ? AND account_id = ? "
    "AND rel_type = ?")
HAS_RELATION = Statement(
    "SELECT target_id FROM follower_relations_by_account WHERE network = ? AND account_id = ? AND rel_type = ? "
    "AND target_id = ?")

_PAGE = 5000  # rows per page when a whole relation partition is read


def relation_write(network: str, account_id: int, rel_type: str, target_id: int, target_username: str | None
                   ) -> tuple[Statement, Params]:
    """One relation row as a (statement, params) pair: the loader's bulk path."""
    return PUT_RELATION, (network, account_id, rel_type, target_id, target_username)


def claim_follow(db: Database, network: str, follower: Account, followee: Account) -> bool:
    """The follower's own `follows` row, by lightweight transaction: True when this call created the relation
    (only then may the caller move the counts). `follow_writes` completes it."""
    return was_applied(db.execute(FOLLOW_IF_NEW, (network, follower.account_id, followee.account_id,
                                                  followee.username)))


def follow_writes(network: str, follower: Account, followee: Account) -> list[tuple[Statement, Params]]:
    """The followee-side row of a follow, written whether or not this call's transaction applied, so a retry
    completes a half-done follow."""
    return [relation_write(network, followee.account_id, FOLLOWER, follower.account_id, follower.username)]


def claim_unfollow(db: Database, network: str, follower_id: int, followee_id: int) -> bool:
    """Delete the follower's own `follows` row by lightweight transaction: True when this call ended the
    relation. `unfollow_writes` completes it."""
    return was_applied(db.execute(UNFOLLOW_IF_EXISTS, (network, follower_id, followee_id)))


def unfollow_writes(network: str, follower_id: int, followee_id: int) -> list[tuple[Statement, Params]]:
    return [(DELETE_RELATION, (network, followee_id, FOLLOWER, follower_id))]


def follows(db: Database, network: str, follower_id: int, followee_id: int) -> bool:
    return db.execute(HAS_RELATION, (network, follower_id, FOLLOWS, followee_id)).one() is not None


def count(db: Database, network: str, account_id: int, rel_type: str) -> int:
    return db.execute(COUNT_RELATIONS, (network, account_id, rel_type), timeout=30).one().n


def listing(db: Database, network: str, account_id: int, rel_type: str, limit: int) -> list[dict]:
    """Up to `limit` related accounts as {account_id, username}."""
    rows = db.execute(LIST_RELATIONS, (network, account_id, rel_type), fetch_size=min(limit, _PAGE))
    out = []
    for r in rows:
        out.append({"account_id": r.target_id, "username": r.target_username})
        if len(out) >= limit:
            break
    return out


def ids(db: Database, network: str, account_id: int, rel_type: str) -> list[int]:
    """Every related account id (the whole partition, read `_PAGE` rows per page)."""
    rows = db.execute(LIST_RELATIONS, (network, account_id, rel_type), fetch_size=_PAGE, timeout=60)
    return [row.target_id for row in rows]


def followed_celebrities(db: Database, network: str, account_id: int, *, fresh: bool = False) -> set[int]:
    """The celebrities the account follows (`fresh`: read at LOCAL_QUORUM, after this process's own writes)."""
    stmt = FOLLOWED_CELEBRITIES_FRESH if fresh else FOLLOWED_CELEBRITIES
    return {r.celebrity_id for r in db.execute(stmt, (network, account_id))}


def start_followed_celebrities(db: Database, network: str, account_id: int):
    return db.execute_async(FOLLOWED_CELEBRITIES, (network, account_id))


def mark_writes(network: str, followers: Iterable[int], celebrity_id: int) -> Iterator[tuple[Statement, Params]]:
    return ((PUT_FOLLOWED_CELEBRITY, (network, f, celebrity_id)) for f in followers)


def unmark_writes(network: str, followers: Iterable[int], celebrity_id: int) -> Iterator[tuple[Statement, Params]]:
    return ((DELETE_FOLLOWED_CELEBRITY, (network, f, celebrity_id)) for f in followers)


def mark_celebrity_followed(db: Database, network: str, followers: Iterable[int], celebrity_id: int) -> int:
    return db.execute_many(mark_writes(network, followers, celebrity_id))


def unmark_celebrity_followed(db: Database, network: str, followers: Iterable[int], celebrity_id: int) -> int:
    return db.execute_many(unmark_writes(network, followers, celebrity_id))


def each_follower(db: Database, network: str, account_ids: list[int]) -> Iterator[tuple[int, str | None]]:
    """(follower id, follower name) of every follower of each account; the partitions are read concurrently,
    page by page."""
    futures = [db.execute_async(LIST_RELATIONS, (network, a, FOLLOWER)) for a in account_ids]
    for future in futures:
        result = future.result()
        while True:
            for r in result.current_rows:
                yield r.target_id, r.target_username
            if not result.has_more_pages:
                break
            result.fetch_next_page()


def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: partitions.Progress | None = None) -> dict[str, int]:
    """Delete every partition of this module's tables that belongs to `network` (admin; see api/partitions.py)."""
    return partitions.drop(db, TABLES, "network", network, dry_run=dry_run, progress=progress)
