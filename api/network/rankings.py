"""Q2 / Q3 time series: top100_accounts_by_time and top100_followers_by_time (one partition per network and
month, newest snapshot first) and ranking_months_by_network (which months hold snapshots). Computing a
snapshot reads other tables: that is api/network/top100.py's `compute_rankings`.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from cassandra.util import max_uuid_from_time, uuid_from_time

from api import partitions
from api.db import Database, Statement
from api.network.common import iso, month_of, to_utc

TABLES = frozenset({"top100_accounts_by_time", "top100_followers_by_time", "ranking_months_by_network"})
KINDS = ("accounts", "followers")

PUT_ACCOUNTS_SNAPSHOT = Statement(
    "INSERT INTO top100_accounts_by_time (network, month, taken_at, accounts_json) VALUES (?, ?, ?, ?)")
PUT_FOLLOWERS_SNAPSHOT = Statement(
    "INSERT INTO top100_followers_by_time (network, month, taken_at, followers_json) VALUES (?, ?, ?, ?)")
PUT_MONTH = Statement("INSERT INTO ranking_months_by_network (network, month) VALUES (?, ?)")
MONTHS_UNTIL = Statement("SELECT month FROM ranking_months_by_network WHERE network = ? AND month <= ?")
ACCOUNTS_AT = Statement(
    "SELECT taken_at, accounts_json FROM top100_accounts_by_time WHERE network = ? AND month = ? "
    "AND taken_at <= ? LIMIT ?")
FOLLOWERS_AT = Statement(
    "SELECT taken_at, followers_json FROM top100_followers_by_time WHERE network = ? AND month = ? "
    "AND taken_at <= ? LIMIT ?")

_READS = {"accounts": (ACCOUNTS_AT, "accounts_json"), "followers": (FOLLOWERS_AT, "followers_json")}


def store_snapshot(db: Database, network: str, top: list[dict[str, Any]], followers: list[dict[str, Any]]
                   ) -> dict[str, Any]:
    """Append one Q2 and one Q3 snapshot taken now; returns {taken_at, snapshot_id}."""
    taken = datetime.now(UTC)
    taken_id = uuid_from_time(taken)
    month = month_of(taken)
    db.execute(PUT_MONTH, (network, month))
    db.execute(PUT_ACCOUNTS_SNAPSHOT, (network, month, taken_id, json.dumps(top)))
    db.execute(PUT_FOLLOWERS_SNAPSHOT, (network, month, taken_id, json.dumps(followers)))
    return {"taken_at": _taken_at(taken_id), "snapshot_id": str(taken_id)}


def _taken_at(taken_id: uuid.UUID) -> datetime:
    return to_utc(datetime.fromtimestamp((taken_id.time - 0x01B21DD213814000) / 1e7, UTC))


def snapshots(db: Database, network: str, kind: str, *, at: datetime | None = None, limit: int = 1
              ) -> list[dict[str, Any]]:
    """The newest `limit` snapshots of one kind (accounts or followers) taken at or before `at` (default:
    now), newest first."""
    statement, column = _READS[kind]
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


def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: partitions.Progress | None = None) -> dict[str, int]:
    """Delete every partition of this module's tables that belongs to `network` (admin; see api/partitions.py)."""
    return partitions.drop(db, TABLES, "network", network, dry_run=dry_run, progress=progress)
