"""Follower relations, both directions as in the seed: follower_relations_by_account holds, per account, the
accounts following it (rel_type `follower`) and the accounts it follows (rel_type `follows`)."""

from __future__ import annotations

from collections.abc import Iterator

from api.db import Database, Params, Statement
from api.network.values import Account

TABLES = frozenset({"follower_relations_by_account"})
FOLLOWER, FOLLOWS = "follower", "follows"

PUT_RELATION = Statement(
    "INSERT INTO follower_relations_by_account (network, account_id, rel_type, target_id, target_username) "
    "VALUES (?, ?, ?, ?, ?)")
DELETE_RELATION = Statement(
    "DELETE FROM follower_relations_by_account WHERE network = ? AND account_id = ? AND rel_type = ? "
    "AND target_id = ?")
COUNT_RELATIONS = Statement(
    "SELECT COUNT(*) AS n FROM follower_relations_by_account WHERE network = ? AND account_id = ? "
    "AND rel_type = ?")
LIST_RELATIONS = Statement(
    "SELECT target_id, target_username FROM follower_relations_by_account WHERE network = ? AND account_id = ? "
    "AND rel_type = ?")
HAS_RELATION = Statement(
    "SELECT target_id FROM follower_relations_by_account WHERE network = ? AND account_id = ? AND rel_type = ? "
    "AND target_id = ?")
FOLLOWS_AMONG = Statement(
    "SELECT target_id FROM follower_relations_by_account WHERE network = ? AND account_id = ? "
    "AND rel_type = 'follows' AND target_id IN ?")

_PAGE = 5000  # rows per page when a whole relation partition is read


def relation_write(network: str, account_id: int, rel_type: str, target_id: int, target_username: str | None
                   ) -> tuple[Statement, Params]:
    """One relation row as a (statement, params) pair: the loader's bulk path."""
    return PUT_RELATION, (network, account_id, rel_type, target_id, target_username)


def add(db: Database, network: str, follower: Account, followee: Account) -> None:
    """Both rows of `follower` follows `followee` (idempotent)."""
    db.execute_many([
        relation_write(network, followee.account_id, FOLLOWER, follower.account_id, follower.username),
        relation_write(network, follower.account_id, FOLLOWS, followee.account_id, followee.username)])


def remove(db: Database, network: str, follower_id: int, followee_id: int) -> None:
    db.execute_many([(DELETE_RELATION, (network, follower_id, FOLLOWS, followee_id)),
                     (DELETE_RELATION, (network, followee_id, FOLLOWER, follower_id))])


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


def followed_among(db: Database, network: str, account_id: int, candidates: list[int]) -> list[int]:
    """Which of `candidates` the account follows: one IN read for up to 100, else its follows partition."""
    if not candidates:
        return []
    if len(candidates) <= 100:
        return [r.target_id for r in db.execute(FOLLOWS_AMONG, (network, account_id, candidates))]
    wanted = set(candidates)
    return [a for a in ids(db, network, account_id, FOLLOWS) if a in wanted]


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
