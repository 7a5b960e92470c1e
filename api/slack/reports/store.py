"""Stored reports and report jobs: owner of slack_reports, slack_report_index and slack_report_jobs.

A report is JSON, zstd-compressed, cut into chunks of at most CHUNK_BYTES (Cassandra handles cells of up to
a few MB, but every read of a chunk is held whole in the node's heap and the driver's buffers: 256 KiB keeps a
200k-message report of ~4 MB of JSON (~600 KB compressed) to three modest rows). Writing a report:
  1. its chunks under a new generation (timeuuid), at the write consistency (LOCAL_QUORUM);
  2. the index row, which carries the pointer: `generation` (the new one) and `previous_generation` (the one it
     replaces, kept for a reader that read the old pointer a moment ago), in one write;
  3. the generation before the previous one deleted by range (a tombstone no read crosses: readers ask for one
     generation by key).
A reader reads the index row at LOCAL_QUORUM (so it never sees a pointer before the chunks it names: both are
written at LOCAL_QUORUM, and on RF 3 two quorums overlap), then the chunks of that one generation, also at
LOCAL_QUORUM; a generation that is not whole (replaced twice while the reader was between its two reads) sends
it to the previous generation, then to a fresh pointer. A half-written generation is invisible.

Reports stored before migration 0180 have no pointer in their index row: they are read the old way (the
partition's static `current_generation`, at most three generations) until they are generated again.

Report jobs (slack_report_jobs, one row per job and partition, 14-day TTL): the state of a generation requested
over HTTP, moved by the report worker (jobs.py): queued -> running -> done | failed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from typing import Any

import zstandard
from cassandra import ConsistencyLevel

from api.db import Database, Statement, without_none

TABLES = frozenset({"slack_reports", "slack_report_index", "slack_report_jobs"})
CHUNK_BYTES = 256 * 1024
_LEVEL = 6
_QUORUM = ConsistencyLevel.LOCAL_QUORUM
_POINTER_TRIES = 3  # fresh pointers a reader follows before it calls a report unreadable
JOB_TTL = 14 * 86400

INSERT_CHUNK = Statement(
    "INSERT INTO slack_reports (team_id, report_id, generation, chunk, chunks, data) VALUES (?, ?, ?, ?, ?, ?)",
    consistency=_QUORUM)
DELETE_GENERATION = Statement(
    "DELETE FROM slack_reports WHERE team_id = ? AND report_id = ? AND generation = ?",
    name="DELETE slack_reports (generation)", consistency=_QUORUM)
SELECT_GENERATION = Statement(
    "SELECT chunk, chunks, data FROM slack_reports WHERE team_id = ? AND report_id = ? AND generation = ?",
    name="SELECT slack_reports (generation)", consistency=_QUORUM)
# Reports stored before 0180 (no pointer in the index row): the whole partition, at most three generations.
SELECT_REPORT_LEGACY = Statement(
    "SELECT current_generation, generation, chunk, chunks, data FROM slack_reports "
    "WHERE team_id = ? AND report_id = ?", name="SELECT slack_reports (legacy)", consistency=_QUORUM)
# The pointer: the report's generation, its previous one, and their chunk counts.
SELECT_POINTER = Statement(
    "SELECT generation, chunks, previous_generation, previous_chunks FROM slack_report_index "
    "WHERE team_id = ? AND report_id = ?", name="SELECT slack_report_index (pointer)", consistency=_QUORUM)
UPSERT_INDEX = Statement(
    "INSERT INTO slack_report_index (team_id, report_id, start_day, days, generated_at, messages, size_bytes, "
    "compressed_bytes, generation, chunks, previous_generation, previous_chunks) "
    "VALUES (:team_id, :report_id, :start_day, :days, :generated_at, :messages, :size_bytes, :compressed_bytes, "
    ":generation, :chunks, :previous_generation, :previous_chunks)", consistency=_QUORUM)
SELECT_INDEX = Statement(
    "SELECT report_id, start_day, days, generated_at, messages, size_bytes, compressed_bytes "
    "FROM slack_report_index WHERE team_id = ? AND report_id < ? LIMIT ?")

INSERT_JOB = Statement(
    "INSERT INTO slack_report_jobs (team_id, job_id, report_id, state, options, submitted_at, attempts) "
    "VALUES (?, ?, ?, 'queued', ?, ?, 0) USING TTL ?", consistency=_QUORUM)
UPDATE_JOB = Statement(
    "UPDATE slack_report_jobs USING TTL :ttl SET state = :state, started_at = :started_at, "
    "finished_at = :finished_at, attempts = :attempts, messages = :messages, result = :result, error = :error "
    "WHERE team_id = :team_id AND job_id = :job_id", name="UPDATE slack_report_jobs", consistency=_QUORUM)
SELECT_JOB = Statement(
    "SELECT report_id, state, options, submitted_at, started_at, finished_at, attempts, messages, result, error "
    "FROM slack_report_jobs WHERE team_id = ? AND job_id = ?", consistency=_QUORUM)


class CorruptReport(RuntimeError):
    """A stored report whose chunks do not add up (never written by this module; reported as a server error)."""


@dataclasses.dataclass(frozen=True)
class Saved:
    generation: uuid.UUID
    chunks: int
    size_bytes: int
    compressed_bytes: int


def save(db: Database, team_id: str, report_id: str, document: dict[str, Any], *, start_day: dt.date,
         days: int, messages: int) -> Saved:
    """Store (or replace) a report; readers see the old one until the index row names the new one."""
    raw = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    packed = zstandard.ZstdCompressor(level=_LEVEL).compress(raw)
    size = len(raw)
    del raw  # the compressed copy is what is kept (a 1M-message week is ~40 MB of JSON)
    parts = [packed[i:i + CHUNK_BYTES] for i in range(0, len(packed), CHUNK_BYTES)] or [b""]
    generation = uuid.uuid1()
    before = db.execute(SELECT_POINTER, (team_id, report_id)).one()
    db.execute_many([(INSERT_CHUNK, (team_id, report_id, generation, i, len(parts), part))
                     for i, part in enumerate(parts)])
    previous = before.generation if before is not None else None
    db.execute(UPSERT_INDEX, without_none({
        "team_id": team_id, "report_id": report_id, "start_day": start_day, "days": days,
        "generated_at": dt.datetime.now(dt.UTC).replace(tzinfo=None), "messages": messages,
        "size_bytes": size, "compressed_bytes": len(packed), "generation": generation, "chunks": len(parts),
        "previous_generation": previous, "previous_chunks": before.chunks if previous is not None else None}))
    # The generation two back: no pointer names it any more (a reader that held it re-reads the pointer).
    if before is not None and before.previous_generation is not None:
        db.execute(DELETE_GENERATION, (team_id, report_id, before.previous_generation))
    return Saved(generation, len(parts), size, len(packed))


def _generation(db: Database, team_id: str, report_id: str, generation: uuid.UUID, chunks: int | None
                ) -> dict[str, Any] | None:
    """The document of one generation, or None when it is not whole (dropped by a later save, or `chunks` of
    the pointer not all there)."""
    parts = sorted((r.chunk, r.chunks, r.data) for r in db.execute(SELECT_GENERATION,
                                                                     (team_id, report_id, generation)))
    if not parts or len(parts) != parts[0][1] or (chunks is not None and len(parts) != chunks) \
            or [p[0] for p in parts] != list(range(len(parts))):
        return None
    return json.loads(zstandard.ZstdDecompressor().decompress(b"".join(p[2] or b"" for p in parts)))


def _legacy(db: Database, team_id: str, report_id: str) -> dict[str, Any] | None:
    rows = list(db.execute(SELECT_REPORT_LEGACY, (team_id, report_id)))
    if not rows or rows[0].current_generation is None:
        return None
    current = rows[0].current_generation
    parts = sorted((r.chunk, r.chunks, r.data) for r in rows if r.generation == current)
    if not parts or len(parts) != parts[0][1] or [p[0] for p in parts] != list(range(len(parts))):
        raise CorruptReport(f"report {team_id}/{report_id}: generation {current} has {len(parts)} chunks")
    return json.loads(zstandard.ZstdDecompressor().decompress(b"".join(p[2] or b"" for p in parts)))


def load(db: Database, team_id: str, report_id: str) -> dict[str, Any] | None:
    """The stored report (None when it was never generated): the pointer (one row), then one generation."""
    for _ in range(_POINTER_TRIES):
        pointer = db.execute(SELECT_POINTER, (team_id, report_id)).one()
        if pointer is None:
            return None
        if pointer.generation is None:
            return _legacy(db, team_id, report_id)
        for generation, chunks in ((pointer.generation, pointer.chunks),
                                   (pointer.previous_generation, pointer.previous_chunks)):
            if generation is not None:
                document = _generation(db, team_id, report_id, generation, chunks)
                if document is not None:
                    return document
    raise CorruptReport(f"report {team_id}/{report_id}: no whole generation after {_POINTER_TRIES} pointers")


def listing(db: Database, team_id: str, *, limit: int, before: str = "~") -> tuple[list[dict[str, Any]], str | None]:
    """Stored reports of a workspace, newest period first, those with id < `before`; (entries, next position)."""
    rows = list(db.execute(SELECT_INDEX, (team_id, before, limit + 1)))
    out = [{"report_id": r.report_id, "start": str(r.start_day), "days": r.days,
            "generated_at": r.generated_at.replace(tzinfo=dt.UTC).isoformat(timespec="seconds"),
            "messages": r.messages, "size_bytes": r.size_bytes, "compressed_bytes": r.compressed_bytes}
           for r in rows[:limit]]
    return out, (out[-1]["report_id"] if len(rows) > limit else None)


# -- report jobs ----------------------------------------------------------------------------------------------

def _now(db: Database) -> dt.datetime:
    return dt.datetime.fromtimestamp(db.clock.time(), dt.UTC).replace(tzinfo=None)


def job_write(db: Database, team_id: str, job_id: str, report_id: str, options: dict[str, Any]
              ) -> tuple[Statement, tuple]:
    """The row of a new job (queued), for one round with its work item."""
    return (INSERT_JOB, (team_id, job_id, report_id, json.dumps(options, sort_keys=True), _now(db), JOB_TTL))


def update_job(db: Database, team_id: str, job_id: str, *, state: str, attempts: int, started: bool = False,
               finished: bool = False, messages: int | None = None, result: dict[str, Any] | None = None,
               error: str | None = None) -> None:
    """Move a job to `state` (what is not given is left as it was: nothing is bound as null)."""
    now = _now(db)
    db.execute(UPDATE_JOB, without_none({
        "ttl": JOB_TTL, "team_id": team_id, "job_id": job_id, "state": state, "attempts": attempts,
        "started_at": now if started else None, "finished_at": now if finished else None, "messages": messages,
        "result": json.dumps(result, separators=(",", ":")) if result is not None else None,
        "error": error[:2000] if error is not None else None}))


def job(db: Database, team_id: str, job_id: str) -> dict[str, Any] | None:
    """A job's state as the status endpoint shows it; None for an unknown (or expired) job."""
    row = db.execute(SELECT_JOB, (team_id, job_id)).one()
    if row is None or row.state is None:
        return None

    def when(t: dt.datetime | None) -> str | None:
        return t.replace(tzinfo=dt.UTC).isoformat(timespec="seconds") if t is not None else None

    out = {"team_id": team_id, "job_id": job_id, "report_id": row.report_id, "state": row.state,
           "options": json.loads(row.options) if row.options else {}, "submitted_at": when(row.submitted_at),
           "started_at": when(row.started_at), "finished_at": when(row.finished_at), "attempts": row.attempts or 0,
           "messages": row.messages, "result": json.loads(row.result) if row.result else None, "error": row.error}
    return {k: v for k, v in out.items() if v is not None}


# -- retention (api/retention/): stored reports of periods that are gone -----------------------------------------

SELECT_PERIODS = Statement("SELECT report_id, start_day, days FROM slack_report_index WHERE team_id = ?",
                           name="SELECT slack_report_index (periods)")
DELETE_REPORT = Statement("DELETE FROM slack_reports WHERE team_id = ? AND report_id = ?",
                          name="DELETE slack_reports (report)")
DELETE_INDEX_ROW = Statement("DELETE FROM slack_report_index WHERE team_id = ? AND report_id = ?",
                             name="DELETE slack_report_index (one)")


def reports_ending_before(db: Database, team_id: str, before: dt.date) -> list[str]:
    """The stored reports whose whole period lies before `before` (52 a year: one partition read)."""
    return [r.report_id for r in db.execute(SELECT_PERIODS, (team_id,))
            if r.start_day.date() + dt.timedelta(days=r.days) <= before]


def expire_report_writes(team_id: str, report_ids: list[str]) -> list[tuple[Statement, tuple]]:
    """A report's chunks (its partition) and its row of the index."""
    return [w for report_id in report_ids for w in ((DELETE_REPORT, (team_id, report_id)),
                                                     (DELETE_INDEX_ROW, (team_id, report_id)))]


CLEAR_PREVIOUS = Statement(
    "DELETE previous_generation, previous_chunks FROM slack_report_index WHERE team_id = ? AND report_id = ?",
    name="DELETE slack_report_index (previous)", consistency=_QUORUM)


def generations(db: Database, team_id: str, report_id: str) -> list[dict[str, Any]]:
    """Every stored generation of a report the pointer names (current and previous), whole ones only."""
    pointer = db.execute(SELECT_POINTER, (team_id, report_id)).one()
    if pointer is None or pointer.generation is None:
        legacy = _legacy(db, team_id, report_id) if pointer is not None else None
        return [legacy] if legacy is not None else []
    found = [_generation(db, team_id, report_id, g, c) for g, c in (
        (pointer.generation, pointer.chunks), (pointer.previous_generation, pointer.previous_chunks)) if g]
    return [d for d in found if d is not None]


def drop_previous(db: Database, team_id: str, report_id: str) -> None:
    """Drop the generation before the current one now (an erasure: it names the person), and its pointer."""
    pointer = db.execute(SELECT_POINTER, (team_id, report_id)).one()
    if pointer is not None and pointer.previous_generation is not None:
        db.execute(DELETE_GENERATION, (team_id, report_id, pointer.previous_generation))
        db.execute(CLEAR_PREVIOUS, (team_id, report_id))
