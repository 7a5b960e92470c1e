"""Project queues (append-only lanes read from a head) and the lease log.

Owner of tagging_queue and tagging_lease_log. The project's owner (worker.py) appends entries at positions it
reserved; a taker reads the first waiting entries after the head, picks one at random (so concurrent takers
rarely try the same one) and claims the item (items.claim). A claimed entry is marked taken by an overwrite,
so the owner can move the head past it: no read starts on top of a deleted row, because nothing is deleted.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from api.db import Database, Statement

TABLES = frozenset({"tagging_queue", "tagging_lease_log"})

PAGE = 1000  # positions per queue partition
MINUTE_US = 60_000_000
TAG, REVIEW = "tag", "review"

PUT_ENTRY = Statement("INSERT INTO tagging_queue (project, lane, page, pos, seq, ref) VALUES (?, ?, ?, ?, ?, ?)")
MARK_TAKEN = Statement("UPDATE tagging_queue SET taken_by = ? WHERE project = ? AND lane = ? AND page = ? AND pos = ?")
ENTRIES = Statement(
    "SELECT pos, seq, ref, taken_by FROM tagging_queue WHERE project = ? AND lane = ? AND page = ? AND pos >= ? "
    "AND pos < ? LIMIT ?")
PUT_LEASE_END = Statement(
    "INSERT INTO tagging_lease_log (project, minute, at_us, seq, lease_id) VALUES (?, ?, ?, ?, ?)")
LEASE_ENDS = Statement(
    "SELECT at_us, seq, lease_id FROM tagging_lease_log WHERE project = ? AND minute = ? AND at_us > ? "
    "AND at_us <= ?")


@dataclasses.dataclass(frozen=True)
class Entry:
    pos: int
    seq: int
    ref: str | None
    taken_by: str | None


def entry_write(project: str, lane: str, pos: int, seq: int, ref: str) -> tuple[Statement, Any]:
    return PUT_ENTRY, (project, lane, pos // PAGE, pos, seq, ref)


def mark_taken(db: Database, project: str, lane: str, pos: int, by: str) -> None:
    db.execute(MARK_TAKEN, (by, project, lane, pos // PAGE, pos))


def mark_taken_write(project: str, lane: str, pos: int, by: str) -> tuple[Statement, Any]:
    return MARK_TAKEN, (by, project, lane, pos // PAGE, pos)


def entries(db: Database, project: str, lane: str, head: int, tail: int, limit: int) -> list[Entry]:
    """Entries in [head, tail), in order, at most `limit` (one partition per 1,000 positions)."""
    out: list[Entry] = []
    pos = head
    while pos < tail and len(out) < limit:
        page = pos // PAGE
        upper = min(tail, (page + 1) * PAGE)
        out.extend(Entry(r.pos, r.seq, r.ref, r.taken_by)
                   for r in db.execute(ENTRIES, (project, lane, page, pos, upper, limit - len(out))))
        pos = upper
    return out


def lease_end_write(project: str, at_us: int, seq: int, lease_id: int) -> tuple[Statement, Any]:
    return PUT_LEASE_END, (project, at_us // MINUTE_US, at_us, seq, lease_id)


def lease_ends(db: Database, project: str, after_us: int, upto_us: int) -> list[tuple[int, int, int]]:
    """(at_us, seq, lease_id) with after_us < at_us <= upto_us, in time order (one partition per minute, at
    most a day of them per call: a worker that was down longer catches up a day per pass)."""
    first = max(after_us, 0) // MINUTE_US
    last = min(upto_us // MINUTE_US, first + 1440)
    upto_us = min(upto_us, (last + 1) * MINUTE_US - 1)
    futures = [db.execute_async(LEASE_ENDS, (project, minute, after_us, upto_us)) for minute in range(first, last + 1)]
    return [(r.at_us, r.seq, r.lease_id) for f in futures for r in f.result()]
