"""Q2 / Q3 and their time series.

Q2 merges the heads of the 16 accounts_by_follower_count buckets (per-account count rows, no scan). Q3 reads
the follower partition of each of the Q2 accounts and counts, per follower, how many of them it follows.
A run appends one snapshot to top100_accounts_by_time and top100_followers_by_time (month partitions).
"""

from __future__ import annotations

import collections
import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from cassandra.util import max_uuid_from_time, uuid_from_time

from api.db import Database, Statement
from api.network import accounts
from api.network.common import iso, month_of, to_utc

FOLLOWERS = Statement(
    "SELECT target_id, target_username FROM follower_relations_by_account WHERE network = ? AND account_id = ? "
    "AND rel_type = 'follower'", name="SELECT follower_relations_by_account (rankings)")
PUT_ACCOUNTS_SNAPSHOT = Statement(
    "INSERT INTO top100_accounts_by_time (network, month, taken_at, accounts_json) VALUES (?, ?, ?, ?)")
PUT_FOLLOWERS_SNAPSHOT = Statement(
    "INSERT INTO top100_followers_by_time (network, month, taken_at, followers_json) VALUES (?, ?, ?, ?)")
PUT_MONTH = Statement("INSERT INTO ranking_months_by_network (network, month) VALUES (?, ?)")
MONTHS = Statement("SELECT month FROM ranking_months_by_network WHERE network = ?")
MONTHS_UNTIL = Statement("SELECT month FROM ranking_months_by_network WHERE network = ? AND month <= ?")
ACCOUNTS_AT = Statement(
    "SELECT taken_at, accounts_json FROM top100_accounts_by_time WHERE network = ? AND month = ? "
    "AND taken_at <= ? LIMIT ?")
FOLLOWERS_AT = Statement(
    "SELECT taken_at, followers_json FROM top100_followers_by_time WHERE network = ? AND month = ? "
    "AND taken_at <= ? LIMIT ?")

KINDS = {"accounts": (ACCOUNTS_AT, "accounts_json"), "followers": (FOLLOWERS_AT, "followers_json")}


def top_followers(db: Database, network: str, top: list[dict[str, Any]], limit: int = 100
                  ) -> list[dict[str, Any]]:
    """Q3: the accounts following the most of `top` (ties: lower id first)."""
    counts: collections.Counter = collections.Counter()
    names: dict[int, str] = {}
    futures = [db.execute_async(FOLLOWERS, (network, a["account_id"])) for a in top]
    for future in futures:
        result = future.result()
        while True:
            for r in result.current_rows:
                counts[r.target_id] += 1
                names[r.target_id] = r.target_username
            if not result.has_more_pages:
                break
            result.fetch_next_page()
    return [{"account_id": a, "username": names[a], "follows_top": n}
            for a, n in accounts.heaviest(counts, limit)]


def compute(db: Database, network: str, limit: int = 100) -> dict[str, Any]:
    """Compute Q2 and Q3 now and append both to the time series; returns the snapshot."""
    started = time.perf_counter()
    top = accounts.top_accounts(db, network, limit)
    followers = top_followers(db, network, top, limit)
    taken = datetime.now(UTC)
    taken_id = uuid_from_time(taken)
    month = month_of(taken)
    db.execute(PUT_MONTH, (network, month))
    db.execute(PUT_ACCOUNTS_SNAPSHOT, (network, month, taken_id, json.dumps(top)))
    db.execute(PUT_FOLLOWERS_SNAPSHOT, (network, month, taken_id, json.dumps(followers)))
    return {"taken_at": _taken_at(taken_id), "snapshot_id": str(taken_id), "accounts": top,
            "followers": followers, "seconds": round(time.perf_counter() - started, 3)}


def _taken_at(taken_id: uuid.UUID) -> datetime:
    return to_utc(datetime.fromtimestamp((taken_id.time - 0x01B21DD213814000) / 1e7, UTC))


def snapshots(db: Database, network: str, kind: str, *, at: datetime | None = None, limit: int = 1
              ) -> list[dict[str, Any]]:
    """The newest `limit` snapshots of one kind taken at or before `at` (default: now), newest first."""
    statement, column = KINDS[kind]
    at = to_utc(at or datetime.now(UTC))
    if at.year < 1971:
        return []  # before any snapshot could exist (and before time-based UUIDs can be formed)
    bound = max_uuid_from_time(min(at.timestamp(), 2**40))
    out: list[dict[str, Any]] = []
    for row in db.execute(MONTHS_UNTIL, (network, month_of(at))):
        for r in db.execute(statement, (network, row.month, bound, limit - len(out))):
            out.append({"taken_at": iso(_taken_at(r.taken_at)), "snapshot_id": str(r.taken_at),
                        kind: json.loads(getattr(r, column))})
        if len(out) >= limit:
            break
    return out
