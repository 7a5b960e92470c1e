"""Accounts and their counts: network_accounts (one row per account), accounts_by_follower_count (Q2 and the
hybrid threshold) and celebrity_accounts (the accounts merged into home pages at read time).

Counts are plain ints derived from the relation rows (counted when loading, re-counted from the relation
partition after a follow/unfollow), never counters: re-running a loader or retrying a request cannot
double-count.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from cassandra.cluster import ResponseFuture

from api.db import Database, Params, Statement
from api.network.common import BUCKETS, bucket_of, to_utc
from api.network.settings import NetworkSettings
from api.network.values import Account

TABLES = frozenset({"network_accounts", "accounts_by_follower_count", "celebrity_accounts"})

GET_ACCOUNT = Statement(
    "SELECT account_id, username, follower_count, follows_count FROM network_accounts "
    "WHERE network = ? AND account_id = ?")
PUT_ACCOUNT = Statement(
    "INSERT INTO network_accounts (network, account_id, username, follower_count, follows_count) "
    "VALUES (?, ?, ?, ?, ?)")
SET_FOLLOWER_COUNT = Statement(
    "UPDATE network_accounts SET follower_count = ? WHERE network = ? AND account_id = ?")
SET_FOLLOWS_COUNT = Statement(
    "UPDATE network_accounts SET follows_count = ? WHERE network = ? AND account_id = ?")
PUT_RANKED = Statement(
    "INSERT INTO accounts_by_follower_count (network, bucket, follower_count, account_id, username) "
    "VALUES (?, ?, ?, ?, ?)")
DELETE_RANKED = Statement(
    "DELETE FROM accounts_by_follower_count WHERE network = ? AND bucket = ? AND follower_count = ? "
    "AND account_id = ?")
TOP_OF_BUCKET = Statement(
    "SELECT follower_count, account_id, username FROM accounts_by_follower_count "
    "WHERE network = ? AND bucket = ? LIMIT ?")
ABOVE_IN_BUCKET = Statement(
    "SELECT follower_count, account_id FROM accounts_by_follower_count "
    "WHERE network = ? AND bucket = ? AND follower_count >= ?")
CELEBRITIES = Statement(
    "SELECT threshold, threshold_since, account_id, follower_count FROM celebrity_accounts WHERE network = ?")
PUT_CELEBRITY = Statement(
    "INSERT INTO celebrity_accounts (network, account_id, follower_count) VALUES (?, ?, ?)")
DELETE_CELEBRITY = Statement("DELETE FROM celebrity_accounts WHERE network = ? AND account_id = ?")
SET_CELEBRITY_THRESHOLD = Statement(
    "UPDATE celebrity_accounts SET threshold = ?, threshold_since = ? WHERE network = ?")
CLEAR_CELEBRITIES = Statement("DELETE FROM celebrity_accounts WHERE network = ?")


@dataclasses.dataclass(frozen=True)
class Celebrities:
    """The accounts merged at read time (id -> follower count), for which threshold, built since when."""

    accounts: dict[int, int]
    threshold: int | None
    since: datetime | None

    def is_for(self, ns: NetworkSettings) -> bool:
        """Built for the threshold in force (a stored set for another threshold must be rebuilt first)."""
        return self.threshold == threshold_of(ns) and self.since is not None


def threshold_of(ns: NetworkSettings) -> int:
    return ns.hybrid_threshold if ns.hybrid else 0


# -- one account -----------------------------------------------------------------------------------------------
def start_get_account(db: Database, network: str, account_id: int) -> ResponseFuture:
    """Send the read of one account; `account_from` turns its result into an Account (or None)."""
    return db.execute_async(GET_ACCOUNT, (network, account_id))


def account_from(future: ResponseFuture) -> Account | None:
    row = future.result().one()
    return Account.from_row(row) if row is not None else None


def get_account(db: Database, network: str, account_id: int) -> Account | None:
    return account_from(start_get_account(db, network, account_id))


def account_writes(network: str, account: Account) -> list[tuple[Statement, Params]]:
    """The rows of one account as (statement, params) pairs: the loader's bulk path."""
    return [(PUT_ACCOUNT, (network, account.account_id, account.username, account.follower_count,
                           account.follows_count)),
            (PUT_RANKED, (network, bucket_of(account.account_id), account.follower_count, account.account_id,
                          account.username))]


def set_follower_count(db: Database, ns: NetworkSettings, network: str, account: Account, new_count: int
                       ) -> Account:
    """Move an account to its new follower count in every table that holds it; returns the updated account."""
    old = account.follower_count
    if new_count == old:
        return account
    aid = account.account_id
    db.execute(PUT_RANKED, (network, bucket_of(aid), new_count, aid, account.username))
    db.execute(DELETE_RANKED, (network, bucket_of(aid), old, aid))
    if ns.is_celebrity(new_count):
        db.execute(PUT_CELEBRITY, (network, aid, new_count))
    elif ns.is_celebrity(old):
        db.execute(DELETE_CELEBRITY, (network, aid))
    db.execute(SET_FOLLOWER_COUNT, (new_count, network, aid))
    return dataclasses.replace(account, follower_count=new_count)


def set_follows_count(db: Database, network: str, account: Account, new_count: int) -> Account:
    db.execute(SET_FOLLOWS_COUNT, (new_count, network, account.account_id))
    return dataclasses.replace(account, follows_count=new_count)


# -- Q2 --------------------------------------------------------------------------------------------------------
def top_accounts(db: Database, network: str, limit: int = 100) -> list[dict[str, Any]]:
    """Q2: the `limit` accounts with the most followers (ties: lower id first), merged from the buckets.

    Rows of accounts_by_follower_count are checked against network_accounts, so an entry left behind by two
    racing follows is ignored instead of ranked.
    """
    futures = [db.execute_async(TOP_OF_BUCKET, (network, b, limit * 2)) for b in range(BUCKETS)]
    rows = [r for f in futures for r in f.result()]
    rows.sort(key=lambda r: (-r.follower_count, r.account_id))
    out: list[dict[str, Any]] = []
    seen: set[int] = set()
    for start in range(0, len(rows), limit):
        chunk = [r for r in rows[start:start + limit] if r.account_id not in seen]
        checks = [start_get_account(db, network, r.account_id) for r in chunk]
        for r, f in zip(chunk, checks, strict=True):
            real = account_from(f)
            if real is not None and real.follower_count == r.follower_count:
                seen.add(r.account_id)
                out.append({"account_id": r.account_id, "username": r.username,
                            "follower_count": r.follower_count})
        if len(out) >= limit:
            break
    return out[:limit]


# -- celebrities -----------------------------------------------------------------------------------------------
def start_celebrities(db: Database, network: str) -> ResponseFuture:
    """Send the read of the celebrity set; `celebrities_from` turns its result into Celebrities."""
    return db.execute_async(CELEBRITIES, (network,))


def celebrities_from(future: ResponseFuture) -> Celebrities:
    rows = list(future.result())
    if not rows:
        return Celebrities({}, None, None)
    since = rows[0].threshold_since
    return Celebrities({r.account_id: r.follower_count for r in rows if r.account_id is not None},
                       rows[0].threshold, to_utc(since) if since is not None else None)


def celebrities(db: Database, network: str) -> Celebrities:
    """The stored celebrity set, as it is (a lookup: it never writes)."""
    return celebrities_from(start_celebrities(db, network))


def celebrities_above(db: Database, ns: NetworkSettings, network: str) -> dict[int, int]:
    """Accounts at or above the hybrid threshold -> follower count, from the ranked buckets (no write)."""
    found: dict[int, int] = {}
    if ns.hybrid:
        futures = [db.execute_async(ABOVE_IN_BUCKET, (network, b, ns.hybrid_threshold)) for b in range(BUCKETS)]
        for f in futures:
            for r in f.result():
                found[r.account_id] = max(found.get(r.account_id, 0), r.follower_count)
    return found


def rebuild_celebrities(db: Database, ns: NetworkSettings, network: str) -> Celebrities:
    """Refill celebrity_accounts for the threshold in force from accounts_by_follower_count (16 bounded
    slices, no scan). Home caches built before the returned `since` were built for another threshold."""
    found = celebrities_above(db, ns, network)
    now = datetime.now(UTC)
    since = now.replace(microsecond=now.microsecond // 1000 * 1000)  # Cassandra keeps milliseconds
    db.execute(CLEAR_CELEBRITIES, (network,))
    db.execute_many((PUT_CELEBRITY, (network, a, c)) for a, c in found.items())
    db.execute(SET_CELEBRITY_THRESHOLD, (threshold_of(ns), since, network))
    return Celebrities(found, threshold_of(ns), since)
