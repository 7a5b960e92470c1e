"""Stored activity days (activity_days) and the progress of rebuild runs (activity_rebuild_progress).

A day is written whole, in one statement, and read back through `codec.decode`: the only way events leave
the table.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime
from typing import Any

from api import partitions
from api.activity import codec, events
from api.db import Database, Params, Statement

TABLES = frozenset({"activity_days", "activity_rebuild_progress"})

_DAY_COLUMNS = "day, events, codec, codec_params, format, event_count, raw_size, time_zone, built_at, kind_counts"
# What `summary` reads: the counts kept beside the blob (the blob only for days built before migration 0140).
_COUNT_COLUMNS = "day, format, event_count, kind_counts, codec, time_zone, built_at"

PUT_DAY = Statement(
    "INSERT INTO activity_days (archive, account, year, day, events, codec, codec_params, format, event_count, "
    "raw_size, time_zone, built_at, kind_counts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?")
SELECT_RANGE = Statement(
    f"SELECT {_DAY_COLUMNS} FROM activity_days WHERE archive = ? AND account = ? AND year = ? "
    "AND day >= ? AND day <= ?", name="SELECT activity_days (range)")
SELECT_DATES = Statement(
    f"SELECT {_DAY_COLUMNS} FROM activity_days WHERE archive = ? AND account = ? AND year = ? AND day IN ?",
    name="SELECT activity_days (dates)")
SELECT_RANGE_COUNTS = Statement(
    f"SELECT {_COUNT_COLUMNS} FROM activity_days WHERE archive = ? AND account = ? AND year = ? "
    "AND day >= ? AND day <= ?", name="SELECT activity_days (range, counts)")
SELECT_DATES_COUNTS = Statement(
    f"SELECT {_COUNT_COLUMNS} FROM activity_days WHERE archive = ? AND account = ? AND year = ? AND day IN ?",
    name="SELECT activity_days (dates, counts)")
SELECT_BLOBS = Statement(
    f"SELECT {_DAY_COLUMNS} FROM activity_days WHERE archive = ? AND account = ? AND year = ? AND day IN ?",
    name="SELECT activity_days (dates without counts)")
SELECT_STORED_DAYS = Statement(
    "SELECT day FROM activity_days WHERE archive = ? AND account = ? AND year = ? AND day >= ? AND day <= ?",
    name="SELECT activity_days (which days)")
PUT_PROGRESS = Statement(
    "INSERT INTO activity_rebuild_progress (archive, run_id, chunk, accounts, days_written, done_at) "
    "VALUES (?, ?, ?, ?, ?, ?)")
SELECT_PROGRESS = Statement(
    "SELECT chunk, accounts, days_written FROM activity_rebuild_progress WHERE archive = ? AND run_id = ?")

MAX_DAYS = 31  # days one read may ask for


@dataclasses.dataclass(frozen=True)
class StoredDay:
    day: date
    events: list[dict[str, Any]]
    event_count: int
    codec: int
    raw_size: int
    stored_size: int
    time_zone: str | None
    built_at: datetime | None
    kind_counts: dict[str, int] | None = None  # events per kind (None: built before migration 0140)


def day_write(archive: str, account: str, day: date, day_events: Sequence[dict[str, Any]], *, time_zone: str,
              built_at_us: int, use: codec.Codec = codec.CURRENT) -> tuple[Statement, Params]:
    """The one write of a whole day, at `built_at_us` (when the build's reads started)."""
    blob = codec.encode(day_events, use)
    params = {"layout": codec.COLUMNAR_LAYOUT} if use == codec.Codec.COLUMNAR else None
    built = datetime.fromtimestamp(built_at_us / 1e6, UTC)
    return (PUT_DAY, (archive, account, day.year, day, blob, int(use), params, events.format_of(day_events),
                      events.total(day_events), len(codec.to_json(day_events)), time_zone, built,
                      events.counts_by_kind(day_events), built_at_us))


def days_by_year(days: Iterable[date]) -> dict[int, list[date]]:
    by_year: dict[int, list[date]] = {}
    for d in sorted(set(days)):
        by_year.setdefault(d.year, []).append(d)
    return by_year


def read_days(db: Database, archive: str, account: str, days: Sequence[date], *, contiguous: bool,
              counts_only: bool = False) -> dict[date, StoredDay]:
    """The stored days among `days` (at most MAX_DAYS), decoded: one read per local year touched (one or two).
    A range (`contiguous`) reads a slice of the partition; a list of dates reads them by key. `counts_only`:
    the per-kind counts without the events (`events` empty), decoded only for days stored without counts."""
    if len(set(days)) > MAX_DAYS:
        raise ValueError(f"at most {MAX_DAYS} days per read")
    futures = []
    for year, wanted in days_by_year(days).items():
        if contiguous:
            futures.append(db.execute_async(SELECT_RANGE_COUNTS if counts_only else SELECT_RANGE,
                                            (archive, account, year, wanted[0], wanted[-1])))
        else:
            futures.append(db.execute_async(SELECT_DATES_COUNTS if counts_only else SELECT_DATES,
                                            (archive, account, year, wanted)))
    out: dict[date, StoredDay] = {}
    uncounted: list[date] = []
    for future in futures:
        for row in future.result():
            day = _as_date(row.day)
            if row.format is not None and row.format > events.FORMAT_VERSION:
                raise codec.UnknownCodec(f"activity day {day} has event format {row.format}; this version reads "
                                         f"up to {events.FORMAT_VERSION}")
            if counts_only:
                if row.kind_counts is None:
                    uncounted.append(day)
                    continue
                out[day] = StoredDay(day=day, events=[], event_count=row.event_count or 0, codec=row.codec,
                                     raw_size=0, stored_size=0, time_zone=row.time_zone, built_at=row.built_at,
                                     kind_counts=dict(row.kind_counts))
                continue
            out[day] = StoredDay(day=day, events=_decoded(db, row), event_count=row.event_count or 0,
                                 codec=row.codec, raw_size=row.raw_size or 0, stored_size=len(row.events or b""),
                                 time_zone=row.time_zone, built_at=row.built_at,
                                 kind_counts=dict(row.kind_counts) if row.kind_counts is not None else None)
    if uncounted:  # built before migration 0140: counted from the events
        for year, wanted in days_by_year(uncounted).items():
            for row in db.execute(SELECT_BLOBS, (archive, account, year, wanted)):
                day_events = codec.decode(row.events, row.codec)
                out[_as_date(row.day)] = StoredDay(
                    day=_as_date(row.day), events=[], event_count=events.total(day_events), codec=row.codec,
                    raw_size=row.raw_size or 0, stored_size=len(row.events or b""), time_zone=row.time_zone,
                    built_at=row.built_at, kind_counts=events.counts_by_kind(day_events))
    return out


# Hot days (format 2: with counted events) decoded, by their bytes: a hot account's days are read again and again
# (its page, its dashboards), and decoding ~300 events is most of a read's CPU. Keyed by the blob itself (a few
# KB), so a rebuilt day is a new key; 256 days of ~300 events: ~25 MB at most.
_HOT_DECODED = "activity.hot_days_decoded"
_HOT_DECODED_MAX = 256


def _decoded(db: Database, row: Any) -> list[dict[str, Any]]:
    if row.format != events.FORMAT_VERSION or row.events is None:
        return codec.decode(row.events, row.codec)
    cache = db.caches.lru(_HOT_DECODED, maxsize=_HOT_DECODED_MAX)
    # A new list each time (the events themselves are shared: nothing modifies a read day's events).
    return list(cache.get_or_load((row.codec, row.events), lambda: codec.decode(row.events, row.codec)))


def stored_days_of(db: Database, archive: str, accounts: Sequence[str], first: date, last: date
                   ) -> dict[str, set[date]]:
    """Which days of [first, last] have a stored row, per account (a rebuild overwrites those that became
    empty): every read in flight at once."""
    futures = [(account, db.execute_async(SELECT_STORED_DAYS, (archive, account, year, max(first, date(year, 1, 1)),
                                                                min(last, date(year, 12, 31)))))
               for account in accounts for year in range(first.year, last.year + 1)]
    found: dict[str, set[date]] = {account: set() for account in accounts}
    for account, future in futures:
        found[account].update(_as_date(row.day) for row in future.result())
    return found


def _as_date(value: Any) -> date:
    return value if isinstance(value, date) else value.date()  # the driver's cassandra.util.Date


# -- rebuild runs ----------------------------------------------------------------------------------------------

def finished_chunks(db: Database, archive: str, run_id: str) -> dict[int, int]:
    """chunk -> days written, for the chunks of a run already finished."""
    return {row.chunk: row.days_written for row in db.execute(SELECT_PROGRESS, (archive, run_id))}


def record_chunk(db: Database, archive: str, run_id: str, chunk: int, accounts: int, days_written: int) -> None:
    db.execute(PUT_PROGRESS, (archive, run_id, chunk, accounts, days_written, datetime.now(UTC)))


def now_us() -> int:
    return time.time_ns() // 1000


# Retention (api/retention/): the days of an account before a date, one range tombstone per local year.
DELETE_BEFORE = Statement("DELETE FROM activity_days WHERE archive = ? AND account = ? AND year = ? AND day < ?",
                          name="DELETE activity_days (before)")


def expire_before_writes(archive: str, account: str, years: Iterable[int], before: date) -> list[tuple[Statement,
                                                                                                     Params]]:
    """Drop the account's stored days before `before` in these local years (where its expired days were)."""
    return [(DELETE_BEFORE, (archive, account, year, before)) for year in sorted(set(years)) if year <= before.year]


# Above every write time: a rebuild of a mark still queued for the erased account (which finds no event) writes
# an empty day under their key, later than the erasure; this deletion shadows it (as the profile's, users.py).
ERASE_ACCOUNT_YEAR = Statement(
    "DELETE FROM activity_days USING TIMESTAMP ? WHERE archive = ? AND account = ? AND year = ?",
    name="DELETE activity_days (account year)")
ABOVE_EVERY_WRITE = 2**62


def erase_account_writes(archive: str, account: str, years: Iterable[int]) -> list[tuple[Statement, tuple]]:
    """An erased person's stored days: each year's partition whole, above every write time (nothing stores a day
    under their key again)."""
    return [(ERASE_ACCOUNT_YEAR, (ABOVE_EVERY_WRITE, archive, account, year)) for year in sorted(set(years))]


_ANY_DAY = Statement("SELECT day FROM activity_days WHERE archive = ? AND account = ? AND year = ? LIMIT 1",
                     name="SELECT activity_days (any)")


_DAYS_OF_YEAR = Statement("SELECT day FROM activity_days WHERE archive = ? AND account = ? AND year = ?",
                          name="SELECT activity_days (days of a year)")


def account_days(db: Database, archive: str, account: str, years: Iterable[int]) -> list[int]:
    """The local days (days since 1970-01-01) stored for the account in these years (an erasure's search for
    activity archived before its own day listings)."""
    futures = [db.execute_async(_DAYS_OF_YEAR, (archive, account, year)) for year in years]
    return sorted(row.day.days_from_epoch for future in futures for row in future.result())


def account_years_stored(db: Database, archive: str, account: str, years: Iterable[int]) -> int:
    """How many of these years still hold a stored day of the account (the erasure proof)."""
    futures = [db.execute_async(_ANY_DAY, (archive, account, year)) for year in years]
    return sum(1 for future in futures if list(future.result()))


def drop_archive(db: Database, archive: str, *, dry_run: bool = False,
                 progress: partitions.Progress | None = None) -> dict[str, int]:
    """Delete every stored day and rebuild record of `archive` (a network dropped whole; admin, see
    api/partitions.py)."""
    return partitions.drop(db, TABLES, "archive", archive, dry_run=dry_run, progress=progress)
