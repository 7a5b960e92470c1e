"""Accounts and their counts: network_accounts (one row per account), accounts_by_follower_count (Q2 and the
hybrid threshold) and celebrity_accounts (the accounts merged at read time).

Counts are plain ints derived from the relation rows (counted when loading, re-counted from the relation
partition after a follow/unfollow), never counters: re-running a loader or retrying a request cannot
double-count.
"""

from __future__ import annotations

import heapq
from datetime import UTC, datetime
from typing import Any

from api.db import Database, Statement
from api.network.common import BUCKETS, bucket_of, to_utc
from api.network.settings import NetworkSettings

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


def get_account(db: Database, network: str, account_id: int) -> dict[str, Any] | None:
    row = db.execute(GET_ACCOUNT, (network, account_id)).one()
    if row is None:
        return None
    return {"account_id": row.account_id, "username": row.username,
            "follower_count": row.follower_count or 0, "follows_count": row.follows_count or 0}


def account_row_params(network: str, account_id: int, username: str, followers: int, follows: int
                       ) -> tuple[tuple, tuple]:
    """(network_accounts params, accounts_by_follower_count params) of one account, for the loader."""
    return ((network, account_id, username, followers, follows),
            (network, bucket_of(account_id), followers, account_id, username))


def set_follower_count(db: Database, ns: NetworkSettings, network: str, account: dict[str, Any],
                       new_count: int) -> None:
    """Move an account to its new follower count in every table that holds it (no-op if unchanged)."""
    old = account["follower_count"]
    if new_count == old:
        return
    aid = account["account_id"]
    db.execute(PUT_RANKED, (network, bucket_of(aid), new_count, aid, account["username"]))
    db.execute(DELETE_RANKED, (network, bucket_of(aid), old, aid))
    if ns.is_celebrity(new_count):
        db.execute(PUT_CELEBRITY, (network, aid, new_count))
    elif ns.is_celebrity(old):
        db.execute(DELETE_CELEBRITY, (network, aid))
    db.execute(SET_FOLLOWER_COUNT, (new_count, network, aid))
    account["follower_count"] = new_count


def set_follows_count(db: Database, network: str, account_id: int, new_count: int) -> None:
    db.execute(SET_FOLLOWS_COUNT, (new_count, network, account_id))


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
        checks = [db.execute_async(GET_ACCOUNT, (network, r.account_id)) for r in chunk]
        for r, f in zip(chunk, checks, strict=True):
            real = f.result().one()
            if real is not None and real.follower_count == r.follower_count:
                seen.add(r.account_id)
                out.append({"account_id": r.account_id, "username": r.username,
                            "follower_count": r.follower_count})
        if len(out) >= limit:
            break
    return out[:limit]


def celebrities(db: Database, ns: NetworkSettings, network: str) -> dict[int, int]:
    """Accounts at or above the hybrid threshold -> follower count; rebuilt when the threshold changed."""
    return celebrity_state(db, ns, network)[0]


def celebrity_state(db: Database, ns: NetworkSettings, network: str, pending: Any = None
                    ) -> tuple[dict[int, int], datetime]:
    """(celebrities, since when the threshold in force applies). Home caches built before `since` were built
    for another threshold and are rebuilt. `pending`: the CELEBRITIES read, already sent by the caller."""
    rows = list(pending.result() if pending is not None else db.execute(CELEBRITIES, (network,)))
    stored = rows[0].threshold if rows else None
    if stored != (ns.hybrid_threshold if ns.hybrid else 0) or rows[0].threshold_since is None:
        return rebuild_celebrities(db, ns, network)
    return ({r.account_id: r.follower_count for r in rows if r.account_id is not None},
            to_utc(rows[0].threshold_since))


def rebuild_celebrities(db: Database, ns: NetworkSettings, network: str) -> tuple[dict[int, int], datetime]:
    """Refill celebrity_accounts from accounts_by_follower_count (16 bounded slices, no scan)."""
    found: dict[int, int] = {}
    if ns.hybrid:
        futures = [db.execute_async(ABOVE_IN_BUCKET, (network, b, ns.hybrid_threshold)) for b in range(BUCKETS)]
        for f in futures:
            for r in f.result():
                found[r.account_id] = max(found.get(r.account_id, 0), r.follower_count)
    now = datetime.now(UTC)
    since = now.replace(microsecond=now.microsecond // 1000 * 1000)  # Cassandra keeps milliseconds
    db.execute(CLEAR_CELEBRITIES, (network,))
    db.execute_many(PUT_CELEBRITY, [(network, a, c) for a, c in found.items()])
    db.execute(SET_CELEBRITY_THRESHOLD, (ns.hybrid_threshold if ns.hybrid else 0, since, network))
    return found, since


def heaviest(items: dict[int, int], limit: int) -> list[tuple[int, int]]:
    """(id, count) pairs with the highest counts, ties by lower id."""
    return heapq.nsmallest(limit, items.items(), key=lambda kv: (-kv[1], kv[0]))
