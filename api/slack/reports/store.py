"""Stored reports: owner of slack_reports and slack_report_index.

A report is JSON, zstd-compressed, cut into chunks of at most CHUNK_BYTES (Cassandra handles cells of up to
a few MB, but every read of a chunk is held whole in the node's heap and the driver's buffers: 256 KiB keeps a
200k-message report of ~4 MB of JSON (~600 KB compressed) to three modest rows). Writing a report:
  1. its chunks under a new generation (timeuuid),
  2. the partition's static `current_generation` set to it (one cell: the swap),
  3. the generation two back deleted by range (the one just replaced stays for a reader that saw the old
     pointer a moment ago), then the index row.
A reader reads the partition once and decodes the chunks of `current_generation`: the old report or the new
one, whole. A half-written generation is invisible (the pointer moves only after every chunk is written).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from typing import Any

import zstandard

from api.db import Database, Statement

TABLES = frozenset({"slack_reports", "slack_report_index"})
CHUNK_BYTES = 256 * 1024
_LEVEL = 6

INSERT_CHUNK = Statement(
    "INSERT INTO slack_reports (team_id, report_id, generation, chunk, chunks, data) VALUES (?, ?, ?, ?, ?, ?)")
SET_CURRENT = Statement(
    "UPDATE slack_reports SET current_generation = ? WHERE team_id = ? AND report_id = ?",
    name="SWAP slack_reports")
DELETE_GENERATION = Statement(
    "DELETE FROM slack_reports WHERE team_id = ? AND report_id = ? AND generation = ?",
    name="DELETE slack_reports (generation)")
# The generations a report has (at most three; read before a save, without their data).
SELECT_GENERATIONS_OF = Statement(
    "SELECT generation FROM slack_reports WHERE team_id = ? AND report_id = ? GROUP BY generation",
    name="SELECT slack_reports (generations)")
SELECT_REPORT = Statement(
    "SELECT current_generation, generation, chunk, chunks, data FROM slack_reports "
    "WHERE team_id = ? AND report_id = ?")
UPSERT_INDEX = Statement(
    "INSERT INTO slack_report_index (team_id, report_id, start_day, days, generated_at, messages, size_bytes, "
    "compressed_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
SELECT_INDEX = Statement(
    "SELECT report_id, start_day, days, generated_at, messages, size_bytes, compressed_bytes "
    "FROM slack_report_index WHERE team_id = ? AND report_id < ? LIMIT ?")


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
    """Store (or replace) a report; readers see the old one until the swap, the new one after it."""
    raw = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    packed = zstandard.ZstdCompressor(level=_LEVEL).compress(raw)
    parts = [packed[i:i + CHUNK_BYTES] for i in range(0, len(packed), CHUNK_BYTES)] or [b""]
    generation = uuid.uuid1()
    older = [r.generation for r in db.execute(SELECT_GENERATIONS_OF, (team_id, report_id))
             if r.generation is not None]
    db.execute_many([(INSERT_CHUNK, (team_id, report_id, generation, i, len(parts), part))
                     for i, part in enumerate(parts)])
    db.execute(SET_CURRENT, (generation, team_id, report_id))
    # Keep the generation just replaced (a reader may hold its pointer); drop the ones before it.
    for old in sorted(set(older), key=lambda g: g.time, reverse=True)[1:]:
        db.execute(DELETE_GENERATION, (team_id, report_id, old))
    db.execute(UPSERT_INDEX, (team_id, report_id, start_day, days,
                              dt.datetime.now(dt.UTC).replace(tzinfo=None), messages, len(raw), len(packed)))
    return Saved(generation, len(parts), len(raw), len(packed))


def load(db: Database, team_id: str, report_id: str) -> dict[str, Any] | None:
    """The current generation of a stored report; None when it was never generated. One partition read."""
    rows = list(db.execute(SELECT_REPORT, (team_id, report_id)))
    if not rows or rows[0].current_generation is None:
        return None
    current = rows[0].current_generation
    parts = sorted((r.chunk, r.chunks, r.data) for r in rows if r.generation == current)
    if not parts or len(parts) != parts[0][1] or [p[0] for p in parts] != list(range(len(parts))):
        raise CorruptReport(f"report {team_id}/{report_id}: generation {current} has {len(parts)} chunks")
    packed = b"".join(p[2] or b"" for p in parts)
    return json.loads(zstandard.ZstdDecompressor().decompress(packed))


def listing(db: Database, team_id: str, *, limit: int, before: str = "~") -> tuple[list[dict[str, Any]], str | None]:
    """Stored reports of a workspace, newest period first, those with id < `before`; (entries, next position)."""
    rows = list(db.execute(SELECT_INDEX, (team_id, before, limit + 1)))
    out = [{"report_id": r.report_id, "start": str(r.start_day), "days": r.days,
            "generated_at": r.generated_at.replace(tzinfo=dt.UTC).isoformat(timespec="seconds"),
            "messages": r.messages, "size_bytes": r.size_bytes, "compressed_bytes": r.compressed_bytes}
           for r in rows[:limit]]
    return out, (out[-1]["report_id"] if len(rows) > limit else None)
