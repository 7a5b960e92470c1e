"""The Socket Mode inbox (cql/0210): envelopes recorded before they are acknowledged, and how far each receiver
archived what it recorded, so a receiver that dies between the ack and the archive loses nothing.

A receiver records an envelope (one row, LOCAL_QUORUM), acknowledges it, then archives it from memory. Every second
it writes its progress row: every envelope it recorded before `through_us` is archived. When it stops it writes
the row once more, `closed`. A receiver that starts replays the unfinished range of every receiver that stopped
(`closed`) or died (no progress for DEAD_AFTER_S): the envelopes recorded from its `through_us` up to its last
progress plus REPLAY_MARGIN_S (it recorded nothing later than that: it wrote progress every second until it
died), read minute by minute and shard by shard, and stores them again. Replaying more than was lost is harmless:
every archive row is written at its event time, so the ingest converges.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

from cassandra import ConsistencyLevel

from api.db import Database, Params, Statement

TABLES = frozenset({"slack_event_inbox", "slack_event_receivers"})

SHARDS = 16
MINUTE_US = 60_000_000
DEAD_AFTER_S = 120  # a receiver silent this long (no progress row written) is dead
REPLAY_MARGIN_S = 120  # a dead receiver recorded nothing later than its last progress plus this
RECEIVER_TTL_S = 8 * 86_400
INBOX_TTL_S = 7 * 86_400  # the table's default_time_to_live: the longest a dead receiver's range can wait

_QUORUM = ConsistencyLevel.LOCAL_QUORUM
RECORD = Statement(
    "INSERT INTO slack_event_inbox (minute, shard, received_us, envelope_id, payload) VALUES (?, ?, ?, ?, ?)",
    consistency=_QUORUM)
RECEIVED_BETWEEN = Statement(
    "SELECT received_us, envelope_id, payload FROM slack_event_inbox WHERE minute = ? AND shard = ? "
    "AND received_us >= ? AND received_us <= ?", consistency=_QUORUM)
PROGRESS = Statement(
    "INSERT INTO slack_event_receivers (scope, receiver, through_us, updated_us, closed, finished) "
    "VALUES ('all', ?, ?, ?, ?, ?) USING TTL ?", consistency=_QUORUM)
RECEIVERS = Statement(
    "SELECT receiver, through_us, updated_us, closed, finished FROM slack_event_receivers WHERE scope = 'all' "
    "LIMIT 10000", consistency=_QUORUM)
FINISH = Statement(
    "UPDATE slack_event_receivers USING TTL ? SET finished = true WHERE scope = 'all' AND receiver = ?",
    consistency=_QUORUM)


def shard_of(envelope_id: str) -> int:
    return zlib.crc32(envelope_id.encode()) % SHARDS


def record_write(received_us: int, envelope_id: str, payload: str) -> tuple[Statement, Params]:
    return RECORD, (received_us // MINUTE_US, shard_of(envelope_id), received_us, envelope_id, payload)


def record(db: Database, received_us: int, envelope_id: str, payload: str) -> None:
    """Record one envelope (raises the driver's error when the write failed: then it must not be acked)."""
    statement, params = record_write(received_us, envelope_id, payload)
    db.execute(statement, params)


def save_progress(db: Database, receiver: str, through_us: int, updated_us: int, *, closed: bool = False,
                  finished: bool = False) -> None:
    db.execute(PROGRESS, (receiver, through_us, updated_us, closed, finished, RECEIVER_TTL_S))


def unfinished_ranges(db: Database, now_us: int) -> list[tuple[str, int, int]]:
    """(receiver, first µs, last µs) of every receiver that stopped or died with envelopes perhaps not archived:
    closed and not finished, or silent for DEAD_AFTER_S. A range never reaches back past the inbox's TTL."""
    ranges = []
    for row in db.execute(RECEIVERS):
        if row.finished or row.through_us is None or row.updated_us is None:
            continue
        if row.closed:
            last = row.updated_us
        elif now_us - row.updated_us > DEAD_AFTER_S * 1_000_000:
            last = row.updated_us + REPLAY_MARGIN_S * 1_000_000
        else:
            continue  # alive: its own business
        first = max(row.through_us, now_us - INBOX_TTL_S * 1_000_000)
        ranges.append((row.receiver, first, min(last, now_us)))
    return ranges


def envelopes_between(db: Database, first_us: int, last_us: int) -> Iterator[tuple[int, str, str]]:
    """(received_us, envelope id, payload) of every envelope recorded in [first_us, last_us], minute by minute
    (each minute's shards read together), in time order within a minute."""
    for minute in range(first_us // MINUTE_US, last_us // MINUTE_US + 1):
        futures = [db.execute_async(RECEIVED_BETWEEN, (minute, shard, first_us, last_us)) for shard in range(SHARDS)]
        rows: list[Any] = []
        for future in futures:
            rows.extend(future.result())
        for row in sorted(rows, key=lambda r: (r.received_us, r.envelope_id)):
            yield row.received_us, row.envelope_id, row.payload


def finish(db: Database, receiver: str) -> None:
    """Nothing of `receiver`'s range is left to replay."""
    db.execute(FINISH, (RECEIVER_TTL_S, receiver))
