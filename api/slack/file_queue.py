"""The pending-file queue: files of archived messages waiting for the file worker, and the workers' leases.

Owner of slack_files_pending and slack_file_leases. Ingest enqueues (the rows go out in the same write round
as the message, see ingest.py); the worker (files.py) reads a shard, claims a file with an LWT lease
(INSERT ... IF NOT EXISTS USING TTL) so two workers never fetch it both, and removes the row when done.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from api.db import Database, Params, Statement, without_none
from api.slack.timeutil import day_of

TABLES = frozenset({"slack_files_pending", "slack_file_leases"})

FILE_SHARDS = 16  # fixed: the worker reads these 16 partitions of slack_files_pending

# Written at the event's time: the worker's later DELETE (at wall-clock time) wins over any redelivery.
INSERT_PENDING = Statement(
    "INSERT INTO slack_files_pending (shard, team_id, channel_id, ts, file_id, day, url_private, mimetype, name) "
    "VALUES (:shard, :team_id, :channel_id, :ts, :file_id, :day, :url_private, :mimetype, :name) "
    "USING TIMESTAMP :wt")
SELECT_PENDING = Statement(
    "SELECT shard, team_id, channel_id, ts, file_id, url_private, mimetype, name, attempts, next_attempt_at "
    "FROM slack_files_pending WHERE shard = ? LIMIT ?")
DELETE_PENDING = Statement(
    "DELETE FROM slack_files_pending WHERE shard = ? AND team_id = ? AND channel_id = ? AND ts = ? AND file_id = ?")
RETRY_LATER = Statement(
    "UPDATE slack_files_pending SET attempts = ?, next_attempt_at = ?, last_error = ? "
    "WHERE shard = ? AND team_id = ? AND channel_id = ? AND ts = ? AND file_id = ?")
CLAIM = Statement(
    "INSERT INTO slack_file_leases (team_id, channel_id, ts, file_id, owner) VALUES (?, ?, ?, ?, ?) "
    "IF NOT EXISTS USING TTL ?", idempotent=False)
RELEASE = Statement(
    "DELETE FROM slack_file_leases WHERE team_id = ? AND channel_id = ? AND ts = ? AND file_id = ? IF owner = ?",
    idempotent=False)


@dataclasses.dataclass(frozen=True, slots=True)
class PendingFile:
    """One queued file: the message it belongs to, where to fetch it, and its retry state."""

    shard: int
    team_id: str
    channel_id: str
    ts: int  # the message's ts (µs)
    file_id: str
    url_private: str
    mimetype: str | None
    name: str | None
    attempts: int
    next_attempt_at: int | None  # epoch µs; None = due now

    @classmethod
    def from_row(cls, row: Any) -> PendingFile:
        return cls(shard=row.shard, team_id=row.team_id, channel_id=row.channel_id, ts=row.ts,
                   file_id=row.file_id, url_private=row.url_private, mimetype=row.mimetype, name=row.name,
                   attempts=row.attempts or 0, next_attempt_at=row.next_attempt_at)

    def _key(self) -> tuple[int, str, str, int, str]:
        return (self.shard, self.team_id, self.channel_id, self.ts, self.file_id)

    def _lease_key(self) -> tuple[str, str, int, str]:
        return (self.team_id, self.channel_id, self.ts, self.file_id)


def file_shard(team_id: str, channel_id: str, ts: int) -> int:
    # A stable hash (not Python's salted hash()) so every process picks the same shard.
    return (sum(team_id.encode()) * 31 + sum(channel_id.encode()) + ts) % FILE_SHARDS


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def enqueue_writes(team_id: str, channel_id: str, ts: int, files: Iterable[dict], *, at: int
                   ) -> list[tuple[Statement, Params]]:
    """The queue rows for a message's files (written at event time `at`); the caller sends them with the
    message's own rows. External files (no url_private, or is_external) stay links: nothing to fetch."""
    shard, day = file_shard(team_id, channel_id, ts), day_of(ts)
    return [(INSERT_PENDING, without_none({
        "shard": shard, "team_id": team_id, "channel_id": channel_id, "ts": ts, "day": day, "file_id": f["id"],
        "url_private": f["url_private"], "mimetype": _str(f.get("mimetype")), "name": _str(f.get("name")),
        "wt": at}))
        for f in files
        if isinstance(f.get("url_private"), str) and f["url_private"] and not f.get("is_external")]


def pending(db: Database, shard: int, limit: int) -> list[PendingFile]:
    """Up to `limit` queued files of one shard (due or not: the worker checks next_attempt_at)."""
    return [PendingFile.from_row(row) for row in db.execute(SELECT_PENDING, (shard, limit))]


def claim(db: Database, file: PendingFile, owner: str, lease_seconds: int) -> bool:
    """Take the lease on `file` for `lease_seconds`; False when another worker holds it."""
    return bool(db.execute(CLAIM, (*file._lease_key(), owner, lease_seconds)).was_applied)


def release(db: Database, file: PendingFile, owner: str) -> None:
    db.execute(RELEASE, (*file._lease_key(), owner))


def retry_later(db: Database, file: PendingFile, *, attempts: int, next_attempt_at: int, error: str) -> None:
    db.execute(RETRY_LATER, (attempts, next_attempt_at, error, *file._key()))


def remove(db: Database, file: PendingFile) -> None:
    """Done with `file` (stored, failed for good, or stored by someone else): off the queue."""
    db.execute(DELETE_PENDING, file._key())
