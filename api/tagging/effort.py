"""The effort log, the keyword vocabulary and who is online.

Owner of tagging_events, tagging_event_minutes, tagging_late_events, tagging_keywords and tagging_online. An
event's key (time, item, kind) comes from the item's state (the lease start, the submit time, the verification
time), so a retried request rewrites the same row: the log holds each claim, submit and verification once.

The owner reads the log after a checkpoint that trails now by a few seconds. An event acknowledged later than
`LATE_AFTER_US` after its own time (a write that waited on a paused node, a retry long after) may land behind
that checkpoint: `log` then also writes a notice keyed by its own arrival, which the owner reads after a
checkpoint of its own, and counts the event unless it is marked counted already (cql/0260).
"""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Iterable
from typing import Any

from cassandra import OperationTimedOut

from api.db import Database, Statement, without_none
from api.tagging import stamps

TABLES = frozenset({"tagging_events", "tagging_event_minutes", "tagging_late_events", "tagging_keywords",
                    "tagging_online"})

MINUTE_US = 60_000_000
ONLINE_MINUTES = 5
KINDS = ("claimed", "tagged", "verified", "returned", "disabled", "missing")
MAX_KEYWORD_LENGTH = 64
# An event acknowledged this long after its own time gets a notice: the owner's checkpoint trails now by 5 s
# (worker.SETTLE_US), and the 2 s between cover clock differences between the hosts.
LATE_AFTER_US = 3_000_000
_NOTICE_TRIES = 10
_NOTICE_MINUTES = 60  # minutes of notices one pass reads at most (an owner back from a long stop catches up)
_COLS = "at_us, seq, kind, user_id, team, actor, duration_ms, categories, subcategories, keywords, result, counted"

PUT_EVENT = Statement(
    "INSERT INTO tagging_events (project, minute, at_us, seq, kind, user_id, team, actor, duration_ms, categories, "
    "subcategories, keywords, result) VALUES (:project, :minute, :at_us, :seq, :kind, :user_id, :team, :actor, "
    ":duration_ms, :categories, :subcategories, :keywords, :result)")
PUT_MINUTE = Statement("INSERT INTO tagging_event_minutes (project, minute) VALUES (?, ?)")
MINUTES = Statement("SELECT minute FROM tagging_event_minutes WHERE project = ? AND minute >= ? LIMIT ?")
EVENTS = Statement(f"SELECT {_COLS} FROM tagging_events WHERE project = ? AND minute = ?")
EVENTS_AFTER = Statement(
    f"SELECT {_COLS} FROM tagging_events WHERE project = ? AND minute = ? AND at_us > ? AND at_us <= ?",
    name="SELECT tagging_events (after a time)")
EVENT = Statement(
    f"SELECT {_COLS} FROM tagging_events WHERE project = ? AND minute = ? AND at_us = ? AND seq = ? AND kind = ?",
    name="SELECT tagging_events (one)")
MARK_COUNTED = Statement(
    "UPDATE tagging_events SET counted = true WHERE project = ? AND minute = ? AND at_us = ? AND seq = ? AND kind = ?")
PUT_NOTICE = Statement(
    "INSERT INTO tagging_late_events (project, minute, arrival_us, at_us, seq, kind) VALUES (?, ?, ?, ?, ?, ?)")
NOTICES = Statement(
    "SELECT arrival_us, at_us, seq, kind FROM tagging_late_events WHERE project = ? AND minute = ? "
    "AND arrival_us > ? AND arrival_us <= ?")
PUT_KEYWORD = Statement("INSERT INTO tagging_keywords (project, prefix, keyword) VALUES (?, ?, ?)")
KEYWORDS = Statement(
    "SELECT keyword FROM tagging_keywords WHERE project = ? AND prefix = ? AND keyword >= ? LIMIT ?")
SEEN = Statement("INSERT INTO tagging_online (project, minute, user_id, seen_us) VALUES (?, ?, ?, ?)")
ONLINE = Statement("SELECT user_id, seen_us FROM tagging_online WHERE project = ? AND minute IN ?")


@dataclasses.dataclass(frozen=True)
class Event:
    at_us: int
    seq: int
    kind: str
    user: str | None = None
    team: str | None = None
    actor: str | None = None
    duration_ms: int | None = None
    categories: tuple[str, ...] = ()
    subcategories: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    result: str | None = None
    counted: bool = dataclasses.field(default=False, compare=False)  # marked counted by the owner

    @property
    def key(self) -> tuple[int, int, str]:
        return (self.at_us, self.seq, self.kind)


Key = tuple[int, int, str]  # an event's (at_us, seq, kind)


@dataclasses.dataclass(frozen=True)
class Notice:
    """An event written late, by the time its notice arrived."""

    arrival_us: int
    event: Key

    @property
    def key(self) -> tuple[int, int, int, str]:
        return (self.arrival_us, *self.event)


_MINUTES_MAX = 100_000  # (project, minute) pairs remembered as listed


def event_writes(db: Database, project: str, event: Event) -> list[tuple[Statement, Any]]:
    """The event's row, plus its minute in the listing the first time this process (this Database) writes to
    that minute: the listing row is idempotent, so a forgotten minute only costs one more write."""
    minute = event.at_us // MINUTE_US
    writes: list[tuple[Statement, Any]] = [(PUT_EVENT, without_none({
        "project": project, "minute": minute, "at_us": event.at_us, "seq": event.seq, "kind": event.kind,
        "user_id": event.user, "team": event.team, "actor": event.actor, "duration_ms": event.duration_ms,
        "categories": list(event.categories) or None, "subcategories": list(event.subcategories) or None,
        "keywords": list(event.keywords) or None, "result": event.result}))]
    listed = db.caches.lru("tagging.event_minutes", maxsize=_MINUTES_MAX)
    if (project, minute) not in listed:
        listed.set((project, minute), True)
        writes.insert(0, (PUT_MINUTE, (project, minute)))  # listed before (or with) its first event
    return writes


def log(db: Database, project: str, events: Iterable[Event], also: Iterable[tuple[Statement, Any]] = ()) -> None:
    """Write a request's effort events (one, or a few) and `also`, in one round of writes. An event
    acknowledged more than LATE_AFTER_US after its own time also gets a notice, rewritten with a new arrival
    time until one is acknowledged within LATE_AFTER_US of its own (so the owner's notice checkpoint cannot
    pass it either)."""
    events = list(events)
    # A request's few rows (the event, its minute, the entry's mark or the keywords) in one unlogged batch: the
    # driver's cost per request is more than the node's per row (Database.execute_together).
    db.execute_together([*(w for e in events for w in event_writes(db, project, e)), *also])
    late = [e for e in events if stamps.now_us(db) - e.at_us > LATE_AFTER_US]
    for _ in range(_NOTICE_TRIES if late else 0):
        arrival = stamps.now_us(db)
        db.execute_many((PUT_NOTICE, (project, arrival // MINUTE_US, arrival, *e.key)) for e in late)
        if stamps.now_us(db) - arrival <= LATE_AFTER_US:
            return
    if late:  # the request fails (503) and its retry logs again
        raise OperationTimedOut({"tagging_late_events": f"no notice acknowledged within {LATE_AFTER_US} us"})


def notices_between(db: Database, project: str, after_us: int, upto_us: int) -> tuple[list[Notice], int]:
    """Notices with after_us < arrival_us <= upto_us, at most _NOTICE_MINUTES minutes of them; and the time up
    to which they were read (upto_us, or the end of the last minute read)."""
    first = max(after_us, 0) // MINUTE_US
    last = min(upto_us // MINUTE_US, first + _NOTICE_MINUTES - 1)
    upto_us = min(upto_us, (last + 1) * MINUTE_US - 1)
    futures = [db.execute_async(NOTICES, (project, m, after_us, upto_us)) for m in range(first, last + 1)]
    return [Notice(r.arrival_us, (r.at_us, r.seq, r.kind)) for f in futures for r in f.result()], upto_us


def events_by_key(db: Database, project: str, keys: Iterable[Key]) -> list[Event]:
    """The logged events of these keys (absent ones left out), in key order."""
    ordered = sorted(set(keys))
    futures = [db.execute_async(EVENT, (project, k[0] // MINUTE_US, *k)) for k in ordered]
    return [_event(r) for f in futures for r in f.result() if r.kind is not None]


def is_logged(db: Database, project: str, key: Key) -> bool:
    """Whether the event of this key is in the log."""
    row = db.execute(EVENT, (project, key[0] // MINUTE_US, *key)).one()
    return row is not None and row.kind is not None


def mark_counted(db: Database, project: str, keys: Iterable[Key]) -> None:
    """Mark events counted (the owner, after the commit that counted them): a notice for them changes nothing."""
    db.execute_many((MARK_COUNTED, (project, k[0] // MINUTE_US, *k)) for k in keys)


def _event(row: Any) -> Event:
    return Event(row.at_us, row.seq, row.kind, row.user_id, row.team, row.actor, row.duration_ms,
                 tuple(row.categories or ()), tuple(row.subcategories or ()), tuple(row.keywords or ()), row.result,
                 bool(row.counted))


def events_of_minutes(db: Database, project: str, minutes: Iterable[int]) -> list[Event]:
    """Every event of the given minutes, in (time, item, kind) order."""
    futures = [db.execute_async(EVENTS, (project, m)) for m in sorted(set(minutes))]
    return [_event(r) for f in futures for r in f.result()]


def events_between(db: Database, project: str, after_us: int, upto_us: int) -> list[Event]:
    """Events with after_us < at_us <= upto_us, in (time, item, kind) order (one partition per minute; over
    an hour, only the minutes the listing names)."""
    first, last = max(after_us, 0) // MINUTE_US, upto_us // MINUTE_US
    minutes = range(first, last + 1) if last - first <= 60 else \
        [m for m in event_minutes(db, project, first) if m <= last]
    futures = [db.execute_async(EVENTS_AFTER, (project, minute, after_us, upto_us)) for minute in minutes]
    return [_event(r) for f in futures for r in f.result()]


def event_minutes(db: Database, project: str, first: int = 0) -> list[int]:
    """Every listed minute of a project from `first` on, oldest first (10,000 per read)."""
    out: list[int] = []
    while True:
        rows = [r.minute for r in db.execute(MINUTES, (project, first, 10_000))]
        out.extend(rows)
        if len(rows) < 10_000:
            return out
        first = rows[-1] + 1


def normalise_keyword(text: str) -> str:
    """NFKC, case-folded, inner whitespace collapsed to one space, trimmed."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(folded.split())


def _prefix(keyword: str) -> str:
    return keyword[:2]


def keyword_writes(project: str, keywords: Iterable[str]) -> list[tuple[Statement, Any]]:
    return [(PUT_KEYWORD, (project, _prefix(k), k)) for k in keywords]


def complete(db: Database, project: str, prefix: str, limit: int) -> list[str]:
    """Vocabulary keywords starting with `prefix` (normalised, at least two characters), in order: one range
    of one partition, since the keywords sharing a prefix are contiguous."""
    wanted = normalise_keyword(prefix)
    if len(wanted) < 2:
        return []
    rows = db.execute(KEYWORDS, (project, _prefix(wanted), wanted, limit))
    return [r.keyword for r in rows if r.keyword.startswith(wanted)]


def seen_write(project: str, user: str, now_us: int) -> tuple[Statement, Any]:
    return SEEN, (project, now_us // MINUTE_US, user, now_us)


def online(db: Database, project: str, now_us: int) -> int:
    """People active in the last five minutes."""
    minute = now_us // MINUTE_US
    rows = db.execute(ONLINE, (project, list(range(minute - ONLINE_MINUTES, minute + 1))))
    return len({r.user_id for r in rows if r.seen_us > now_us - ONLINE_MINUTES * MINUTE_US})
