"""Q2 / Q3 time series: top100_accounts_by_time and top100_followers_by_time (one partition per network and
month, newest snapshot first) and ranking_months_by_network (which months hold snapshots); and ranking_jobs, the
status of each queued Q2+Q3 job (POST /networks/{n}/rankings answers 202 with its id). Computing a snapshot
reads other tables: that is api/network/top100.py's `compute_rankings`.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.util import max_uuid_from_time, min_uuid_from_time, uuid_from_time

from api import partitions
from api.db import Database, Statement
from api.network.common import iso, month_of, to_utc

TABLES = frozenset({"top100_accounts_by_time", "top100_followers_by_time", "ranking_months_by_network",
                    "ranking_jobs"})
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
# Erasure of an account (api/erasure/network.py): every snapshot, rewritten where it names the account.
ALL_MONTHS = Statement("SELECT month FROM ranking_months_by_network WHERE network = ?",
                       name="SELECT ranking_months_by_network (all)")
ACCOUNTS_OF_MONTH = Statement(
    "SELECT taken_at, accounts_json FROM top100_accounts_by_time WHERE network = ? AND month = ?",
    name="SELECT top100_accounts_by_time (month)")
FOLLOWERS_OF_MONTH = Statement(
    "SELECT taken_at, followers_json FROM top100_followers_by_time WHERE network = ? AND month = ?",
    name="SELECT top100_followers_by_time (month)")
# Retention of a network: snapshots before a time (whole months, and a range of the month the cutoff falls in).
DROP_ACCOUNTS_MONTH = Statement("DELETE FROM top100_accounts_by_time WHERE network = ? AND month = ?",
                                name="DELETE top100_accounts_by_time (month)")
DROP_FOLLOWERS_MONTH = Statement("DELETE FROM top100_followers_by_time WHERE network = ? AND month = ?",
                                 name="DELETE top100_followers_by_time (month)")
DROP_ACCOUNTS_BEFORE = Statement(
    "DELETE FROM top100_accounts_by_time WHERE network = ? AND month = ? AND taken_at < ?",
    name="DELETE top100_accounts_by_time (before)")
DROP_FOLLOWERS_BEFORE = Statement(
    "DELETE FROM top100_followers_by_time WHERE network = ? AND month = ? AND taken_at < ?",
    name="DELETE top100_followers_by_time (before)")
DELETE_MONTH = Statement("DELETE FROM ranking_months_by_network WHERE network = ? AND month = ?")
ACCOUNTS_BEFORE = Statement("SELECT taken_at FROM top100_accounts_by_time WHERE network = ? AND month = ? "
                            "AND taken_at < ?", name="SELECT top100_accounts_by_time (before)")

PUT_JOB = Statement(
    "INSERT INTO ranking_jobs (network, job_id, status, requested_at, attempts) VALUES (?, ?, 'queued', ?, 0)")
JOB = Statement(
    "SELECT status, requested_at, started_at, finished_at, attempts, snapshot_id, seconds, error FROM ranking_jobs "
    "WHERE network = ? AND job_id = ?", consistency=ConsistencyLevel.LOCAL_QUORUM)
JOB_RUNNING = Statement(
    "UPDATE ranking_jobs SET status = 'running', started_at = ?, attempts = ? WHERE network = ? AND job_id = ?")
JOB_DONE = Statement(
    "UPDATE ranking_jobs SET status = 'done', finished_at = ?, snapshot_id = ?, seconds = ? "
    "WHERE network = ? AND job_id = ?")
JOB_FAILED = Statement(
    "UPDATE ranking_jobs SET status = 'failed', finished_at = ?, error = ? WHERE network = ? AND job_id = ?")
JOB_STATES = ("queued", "running", "done", "failed")

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


def new_job(network: str, now: datetime) -> tuple[uuid.UUID, list[tuple[Statement, Any]]]:
    """A new job id (time-based: its own request time) and its 'queued' row, to go out with the queue item."""
    job_id = uuid_from_time(now)
    return job_id, [(PUT_JOB, (network, job_id, now))]


def job_status(db: Database, network: str, job_id: uuid.UUID) -> dict[str, Any] | None:
    """What the status endpoint shows of a job, or None (unknown, or older than 30 days)."""
    row = db.execute(JOB, (network, job_id)).one()
    if row is None or row.status is None:
        return None
    out: dict[str, Any] = {"job_id": str(job_id), "network": network, "status": row.status,
                           "requested_at": to_utc(row.requested_at), "attempts": row.attempts or 0}
    for name in ("started_at", "finished_at"):
        if getattr(row, name) is not None:
            out[name] = to_utc(getattr(row, name))
    if row.snapshot_id is not None:
        out["snapshot_id"] = str(row.snapshot_id)
        out["taken_at"] = _taken_at(row.snapshot_id)
    if row.seconds is not None:
        out["seconds"] = row.seconds
    if row.error is not None:
        out["error"] = row.error
    return out


def job_started(db: Database, network: str, job_id: uuid.UUID, now: datetime) -> dict[str, Any] | None:
    """Mark a job running (one more attempt); returns its status before, None when the row is gone."""
    before = job_status(db, network, job_id)
    if before is not None and before["status"] != "done":
        db.execute(JOB_RUNNING, (now, before["attempts"] + 1, network, job_id))
    return before


def job_done(db: Database, network: str, job_id: uuid.UUID, snapshot_id: str, seconds: float, now: datetime
             ) -> None:
    db.execute(JOB_DONE, (now, uuid.UUID(snapshot_id), seconds, network, job_id))


def job_failed(db: Database, network: str, job_id: uuid.UUID, error: str, now: datetime) -> None:
    db.execute(JOB_FAILED, (now, error[:1000], network, job_id))


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


# -- erasure of an account -----------------------------------------------------------------------------------------
FORMER_ACCOUNT = {"account_id": 0, "username": None}  # an erased account's place in a ranking


def _naming(entries: list[dict[str, Any]], account_id: int, username: str | None) -> bool:
    return any(e.get("account_id") == account_id or (username and e.get("username") == username) for e in entries)


def snapshots_naming(db: Database, network: str, account_id: int, username: str | None
                     ) -> list[tuple[str, str, uuid.UUID, list[dict[str, Any]]]]:
    """(kind, month, taken_at, entries) of every Q2 / Q3 snapshot that names the account (by id or username):
    one partition per month, read whole (a snapshot per ranking job)."""
    found = []
    for month in [r.month for r in db.execute(ALL_MONTHS, (network,))]:
        for kind, statement, column in (("accounts", ACCOUNTS_OF_MONTH, "accounts_json"),
                                        ("followers", FOLLOWERS_OF_MONTH, "followers_json")):
            for row in db.execute(statement, (network, month), fetch_size=500, timeout=60):
                entries = json.loads(getattr(row, column))
                if _naming(entries, account_id, username):
                    found.append((kind, month, row.taken_at, entries))
    return found


def anonymise_writes(network: str, account_id: int, username: str | None,
                     snapshots: list[tuple[str, str, uuid.UUID, list[dict[str, Any]]]]) -> list[tuple[Statement, Any]]:
    """Each snapshot written again with the account's entry as FORMER_ACCOUNT (its place and count kept: the
    ranking of the others does not move)."""
    writes = []
    for kind, month, taken_at, entries in snapshots:
        rewritten = [({**e, **FORMER_ACCOUNT} if e.get("account_id") == account_id
                      or (username and e.get("username") == username) else e) for e in entries]
        statement = PUT_ACCOUNTS_SNAPSHOT if kind == "accounts" else PUT_FOLLOWERS_SNAPSHOT
        writes.append((statement, (network, month, taken_at, json.dumps(rewritten))))
    return writes


def expire_writes(db: Database, network: str, before: datetime) -> tuple[int, list[tuple[Statement, Any]]]:
    """Snapshots taken before `before`: (snapshots dropped, the writes): months wholly before it go with their
    listing row, the month it falls in loses a range."""
    cut = month_of(before)
    months = [r.month for r in db.execute(ALL_MONTHS, (network,)) if r.month <= cut]
    dropped, writes = 0, []
    for month in months:
        if month < cut:
            dropped += len(list(db.execute(ACCOUNTS_OF_MONTH, (network, month), fetch_size=500, timeout=60)))
            writes += [(DROP_ACCOUNTS_MONTH, (network, month)), (DROP_FOLLOWERS_MONTH, (network, month)),
                       (DELETE_MONTH, (network, month))]
        else:
            first_kept = min_uuid_from_time(before.timestamp())  # below every time UUID of that instant
            dropped += len(list(db.execute(ACCOUNTS_BEFORE, (network, month, first_kept))))
            writes += [(DROP_ACCOUNTS_BEFORE, (network, month, first_kept)),
                       (DROP_FOLLOWERS_BEFORE, (network, month, first_kept))]
    return dropped, writes
