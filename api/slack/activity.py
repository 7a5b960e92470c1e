"""A Slack user's activity days, read from the archive (cross-table: the activity index, messages, versions,
users). Called by the activity builder (api/activity/service.py) for the reprocess job and the dirty worker.

For each user and UTC window: the index (slack_user_activity) names the (channel, message day) partitions the
user touched; each partition is read once for all users of the call, and every row yields the events of
everyone it concerns:

- its author: the message itself at its ts (`message`, `reply`, `file_share`, `channel_join`,
  `channel_leave`, `channel_rename`), each edit at its time (from the message's text versions), the delete;
- each reactor: `reaction_given` at the reaction's time (the set element's write time); the author:
  `reaction_received` at the same time. A reaction history showed (export import, backfill: no time) was
  written at the import's time: the index names those times, and such a reaction is dated at its message.

Only events of the asked users inside their windows are kept.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, MutableMapping
from typing import Any

from api.activity import dirty
from api.activity import events as ev
from api.db import Database
from api.slack import activity_index, messages, users
from api.slack.timeutil import day_of

_SUBTYPE_KINDS = {"channel_join": ev.JOIN, "channel_leave": ev.LEAVE, "channel_name": ev.RENAME}
_PLAIN = frozenset({None, "thread_broadcast", "file_share", "me_message"})
_IN_FLIGHT = 128


def archive_of(team_id: str) -> str:
    return dirty.archive_name("slack", team_id)


def time_zones(db: Database, team_id: str, user_ids: Iterable[str]) -> dict[str, str | None]:
    return users.time_zones(db, team_id, user_ids)


def all_accounts(db: Database, team_id: str) -> dict[str, str | None]:
    """Every known user of the workspace with their time zone."""
    return {row.user_id: row.tz for row in users.every_user(db, team_id)}


def _posted_kind(row: Any) -> str:
    if row.subtype in _SUBTYPE_KINDS:
        return _SUBTYPE_KINDS[row.subtype]
    if row.thread_ts is not None and row.thread_ts != row.ts:
        return ev.REPLY
    return ev.FILE_SHARE if row.files else ev.MESSAGE


def _file_count(files: str | None) -> int | None:
    if not files:
        return None
    try:
        listed = json.loads(files)
    except ValueError:
        return None
    return len(listed) if isinstance(listed, list) and listed else None


class _Collector:
    """Events of the asked users inside their windows, built straight as dicts (this loop runs for every row
    of every partition a rebuild reads: ev.event's keyword handling would double its cost)."""

    def __init__(self, windows: dict[str, tuple[int, int]]) -> None:
        self.windows = windows
        self.found: dict[str, list[dict[str, Any]]] = {user: [] for user in windows}
        # channel -> the times history wrote reactions at there: such a reaction is dated at its message
        self.history_at: dict[str, set[int]] = {}
        self.stats: MutableMapping[str, int] = {}

    def needs_edits(self, row: Any) -> bool:
        """Whether the row was edited but archived without its edit times (before migration 0071), and they can
        fall in its author's window: they are read from its versions."""
        if row.edited_ts is None or row.edit_times is not None:
            return False
        span = self.windows.get(row.user_id) if row.user_id is not None else None
        return span is not None and row.edited_ts >= span[0] and row.ts < span[1]

    def add_row(self, channel_id: str, row: Any, edit_times: Iterable[int] | None = None) -> None:
        windows, ts = self.windows, row.ts
        author = row.user_id
        span = windows.get(author) if author is not None else None
        if span is not None:
            kept = self.found[author]
            lo, hi = span
            if lo <= ts < hi:
                posted = {"at": ts, "kind": _posted_kind(row), "channel": channel_id, "ts": ts}
                if row.thread_ts is not None and row.thread_ts != ts:
                    posted["thread_ts"] = row.thread_ts
                if row.word_count is not None:
                    posted["words"] = row.word_count
                files = _file_count(row.files) if row.files else None
                if files is not None:
                    posted["files"] = files
                if row.subtype not in _PLAIN:
                    posted["subtype"] = row.subtype
                kept.append(posted)
            for at in row.edit_times or edit_times or ():
                if lo <= at < hi:
                    kept.append({"at": at, "kind": ev.EDIT, "channel": channel_id, "ts": ts})
            if row.deleted and row.deleted_ts is not None and lo <= row.deleted_ts < hi:
                kept.append({"at": row.deleted_ts, "kind": ev.DELETE, "channel": channel_id, "ts": ts})
        if not row.reactions:
            return
        history = self.history_at.get(channel_id, ())
        for (emoji, reactor), at in zip(row.reactions, row.reaction_times or (), strict=False):
            if at in history:  # history showed it without its time: it is dated at its message
                at = ts
            given = windows.get(reactor)
            if given is not None and given[0] <= at < given[1]:
                event = {"at": at, "kind": ev.REACTION_GIVEN, "channel": channel_id, "ts": ts, "emoji": emoji}
                if author is not None:
                    event["user"] = author
                self.found[reactor].append(event)
            if span is not None and span[0] <= at < span[1]:
                self.found[author].append({"at": at, "kind": ev.REACTION_RECEIVED, "channel": channel_id, "ts": ts,
                                           "emoji": emoji, "user": reactor})


def collect(db: Database, team_id: str, windows: dict[str, tuple[int, int]],
            stats: MutableMapping[str, int] | None = None) -> dict[str, list[dict[str, Any]]]:
    """The events of each user in `windows` ({user: (start µs, end µs)}), unordered. `stats` (optional) adds up
    the message rows read."""
    index_reads = {user: activity_index.start_sources(db, team_id, user, day_of(start), day_of(end - 1))
                   for user, (start, end) in windows.items()}
    sources: dict[tuple[str, int], activity_index.Source] = {}
    for futures in index_reads.values():
        for key, found in activity_index.sources_from(futures).items():
            merged = sources.setdefault(key, activity_index.Source())
            merged.history_at.update(found.history_at)
            if found.hours is None or merged.hours is None:
                merged.hours = None
            else:
                merged.hours.update(found.hours)
    collector = _Collector(windows)
    if stats is not None:
        collector.stats = stats
    for (channel_id, _day), source in sources.items():
        if source.history_at:
            collector.history_at.setdefault(channel_id, set()).update(source.history_at)
    edited: deque[tuple[str, Any, Any]] = deque()

    def finish_edited(keep: int) -> None:
        while len(edited) > keep:
            channel_id, row, future = edited.popleft()
            collector.add_row(channel_id, row, (r.version_ts for r in future.result() if r.version_ts > row.ts))

    # _IN_FLIGHT partition reads stay in flight: the node reads the next ones while this thread builds events.
    pending: deque[tuple[str, Any]] = deque()
    for channel_id, day in sorted(sources):
        hours = sources[(channel_id, day)].hours
        # Only the hours holding the messages concerned (a whole day for an index row of before cql/0220).
        for future in messages.start_activity_hours(db, team_id, channel_id, day, hours):
            pending.append((channel_id, future))
            if len(pending) >= _IN_FLIGHT:
                _add_partition(db, team_id, collector, edited, *pending.popleft())
                finish_edited(_IN_FLIGHT)
    while pending:
        _add_partition(db, team_id, collector, edited, *pending.popleft())
        finish_edited(_IN_FLIGHT)
    finish_edited(0)
    return collector.found


def _add_partition(db: Database, team_id: str, collector: _Collector, edited: deque, channel_id: str,
                   future: Any) -> None:
    rows = future.result()
    for row in rows:
        collector.stats["slack_messages"] = collector.stats.get("slack_messages", 0) + 1
        if collector.needs_edits(row):  # its events wait for its versions
            edited.append((channel_id, row, messages.start_version_times(db, team_id, channel_id, row.ts)))
        else:
            collector.add_row(channel_id, row)
