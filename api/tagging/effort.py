"""The effort log, the keyword vocabulary and who is online.

Owner of tagging_events, tagging_event_minutes, tagging_keywords and tagging_online. An event's key (time,
item, kind) comes from the item's state (the lease start, the submit time, the verification time), so a
retried request rewrites the same row: the log holds each claim, submit and verification once.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Iterable
from typing import Any

from api.db import Database, Statement, without_none

TABLES = frozenset({"tagging_events", "tagging_event_minutes", "tagging_keywords", "tagging_online"})

MINUTE_US = 60_000_000
ONLINE_MINUTES = 5
KINDS = ("claimed", "tagged", "verified", "returned", "disabled", "missing")
MAX_KEYWORD_LENGTH = 64

PUT_EVENT = Statement(
    "INSERT INTO tagging_events (project, minute, at_us, seq, kind, user_id, team, actor, duration_ms, categories, "
    "subcategories, keywords, result) VALUES (:project, :minute, :at_us, :seq, :kind, :user_id, :team, :actor, "
    ":duration_ms, :categories, :subcategories, :keywords, :result)")
PUT_MINUTE = Statement("INSERT INTO tagging_event_minutes (project, minute) VALUES (?, ?)")
MINUTES = Statement("SELECT minute FROM tagging_event_minutes WHERE project = ? AND minute >= ? LIMIT ?")
EVENTS = Statement(
    "SELECT at_us, seq, kind, user_id, team, actor, duration_ms, categories, subcategories, keywords, result "
    "FROM tagging_events WHERE project = ? AND minute = ?")
EVENTS_AFTER = Statement(
    "SELECT at_us, seq, kind, user_id, team, actor, duration_ms, categories, subcategories, keywords, result "
    "FROM tagging_events WHERE project = ? AND minute = ? AND at_us > ? AND at_us <= ?",
    name="SELECT tagging_events (after a time)")
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

    @property
    def key(self) -> tuple[int, int, str]:
        return (self.at_us, self.seq, self.kind)


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


def _event(row: Any) -> Event:
    return Event(row.at_us, row.seq, row.kind, row.user_id, row.team, row.actor, row.duration_ms,
                 tuple(row.categories or ()), tuple(row.subcategories or ()), tuple(row.keywords or ()), row.result)


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
