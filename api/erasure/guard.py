"""Erased stays erased: what an archive held of a person when their erasure was asked for is not written again by
any route that writes history (live events delivered again, the Web API's history, an export imported later).

Without this, a write timed after the erasure's deletes brings a trace back at once (an export observed later
adds the person's reactions at its own time; search postings and thread lists are written at the current time),
and any re-import brings everything back once compaction has purged the erasure's tombstones (gc_grace_seconds).

Owner of no table: reads an archive's erasure requests (ledger.py) and holds (api/retention/policies.py), at most
once per `ledger.GUARD_REFRESH` seconds per process (a request started or finished in this process: at once). A
person is covered by their newest request that erased (running, done or failed; a request a hold refused erased
nothing), and a write about them dated at or before that request's time is left out: their messages, edits and
reactions, and their profile as of then. What they do after the request is new and archived as anyone's (a new request
erases it). Nothing is left out that a hold covers (the archive, the person, the message's channel), as the
erasure itself keeps it. Others' messages of then that name them are written as the erasure rewrote them (a
mention reads as a neutral name), and channel objects (history's listings) lose every erased person they name.

The ledger names no one (subjects are keyed hashes): an id is checked by hashing it, as `ledger.find` does.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator
from typing import Any

from api.db import Database
from api.erasure import ledger, scrub
from api.retention import policies
from api.slack.codec import is_user_id

_SUBJECTS = "erasure.guard_subjects"  # (archive, person) -> subject


@dataclasses.dataclass(frozen=True)
class _Archive:
    erased: dict[str, int]  # subject -> requested_at (µs) of their newest request that erased
    held: policies.Held


def _load(db: Database, archive: str) -> _Archive:
    erased: dict[str, int] = {}
    for request in ledger.requests(db, archive, limit=ledger.MAX_REQUESTS):  # newest first
        if request.state != ledger.HELD:
            erased.setdefault(request.subject, int(request.requested_at.timestamp() * 1_000_000))
    return _Archive(erased, policies.held(db, archive) if erased else policies.Held())


def _state(db: Database, archive: str) -> _Archive:
    cache = db.caches.ttl(ledger.GUARD_CACHE, maxsize=4096, ttl=ledger.GUARD_REFRESH)
    return cache.get_or_load(archive, lambda: _load(db, archive))


def has_requests(db: Database, archive: str) -> bool:
    """Whether anyone was erased from the archive (nothing else to check when not)."""
    return bool(_state(db, archive).erased)


def erased_at(db: Database, archive: str, person: str) -> int | None:
    """The time (µs) of the newest request that erased `person` from `archive`, or None."""
    state = _state(db, archive)
    if not state.erased:  # most archives: no hash computed at all
        return None
    subject = db.caches.lru(_SUBJECTS, maxsize=100_000).get_or_load(
        (archive, person), lambda: ledger.subject_of(db, archive, person))
    return state.erased.get(subject)


def covers(db: Database, archive: str, person: str | None, at: int, *, channel: str | None = None) -> bool:
    """Whether a write about `person` dated `at` (µs) (in `channel`) is one their erasure took away."""
    if not person:
        return False
    erased = erased_at(db, archive, person)
    if erased is None or at > erased:
        return False
    held = _state(db, archive).held
    return not (held.archive or person in held.users or channel in held.channels)


def covered_among(db: Database, archive: str, people: Iterable[str | None], at: int, *,
                  channel: str | None = None) -> set[str]:
    """Those of `people` whom `covers` leaves out for a write dated `at`."""
    return {p for p in set(people) if p and covers(db, archive, p, at, channel=channel)}


_ID_INSIDE = re.compile(r"(?<![A-Z0-9])[UW][A-Z0-9]{2,}(?![A-Z0-9])")  # an id in a text (<@U123|ann>)


def _ids(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _ids(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _ids(item)
    elif isinstance(value, str):
        yield from (found for found in _ID_INSIDE.findall(value) if is_user_id(found))


def erased_named(db: Database, archive: str, value: Any, at: int, *, channel: str | None = None) -> set[str]:
    """The people `covers` leaves out for a write dated `at` whom texts or Slack JSON name by id (a mention, a
    thread's author, a reaction's users)."""
    if not _state(db, archive).erased:
        return set()
    return covered_among(db, archive, set(_ids(value)), at, channel=channel)


def without_erased(db: Database, archive: str, value: Any) -> tuple[Any, set[str]]:
    """Slack JSON (a channel as history lists it) without every erased person it names by id (members, creator,
    who set the topic), whenever their erasure was; and whom it named."""
    if value is None or not _state(db, archive).erased:
        return value, set()
    named = {p for p in set(_ids(value)) if erased_at(db, archive, p) is not None}
    for person in sorted(named):
        value = scrub.json_value(value, person)
    return value, named
