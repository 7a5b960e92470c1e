"""A Slack user's activity days, read from the archive (cross-table: the activity index, messages, versions,
users). Called by the activity builder (api/activity/build.py) for the reprocess job and the dirty worker.

For each user and UTC window: the index (slack_user_activity) names the (channel, message day) partitions the
user touched; each partition is read once for all users of the call, and every row yields the events of
everyone it concerns:

- its author: the message itself at its ts (`message`, `reply`, `file_share`, `channel_join`,
  `channel_leave`, `channel_rename`), each edit at its time (from the message's text versions), the delete;
- each reactor: `reaction_given` at the reaction's time (the set element's write time); the author:
  `reaction_received` at the same time.

Only events of the asked users inside their windows are kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
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


def _row_events(channel_id: str, row: Any, edit_times: list[int]) -> Iterable[tuple[str, dict[str, Any]]]:
    """(account, event) for everything one message row records."""
    author = row.user_id
    address = {"channel": channel_id, "ts": row.ts}
    if author is not None:
        yield author, ev.event(row.ts, _posted_kind(row), **address,
                               thread_ts=row.thread_ts if row.thread_ts not in (None, row.ts) else None,
                               words=row.word_count, files=_file_count(row.files),
                               subtype=row.subtype if row.subtype not in _PLAIN else None)
        for at in edit_times:
            yield author, ev.event(at, ev.EDIT, **address)
        if row.deleted and row.deleted_ts is not None:
            yield author, ev.event(row.deleted_ts, ev.DELETE, **address)
    for (emoji, reactor), at in zip(row.reactions or (), row.reaction_times or (), strict=False):
        yield reactor, ev.event(at, ev.REACTION_GIVEN, **address, emoji=emoji, user=author)
        if author is not None:
            yield author, ev.event(at, ev.REACTION_RECEIVED, **address, emoji=emoji, user=reactor)


def collect(db: Database, team_id: str, windows: dict[str, tuple[int, int]]) -> dict[str, list[dict[str, Any]]]:
    """The events of each user in `windows` ({user: (start µs, end µs)}), unordered."""
    index_reads = {user: activity_index.start_sources(db, team_id, user, day_of(start), day_of(end - 1))
                   for user, (start, end) in windows.items()}
    sources: set[tuple[str, int]] = set()
    for futures in index_reads.values():
        sources |= activity_index.sources_from(futures)
    found: dict[str, list[dict[str, Any]]] = {user: [] for user in windows}

    def keep(account: str | None, event: dict[str, Any]) -> None:
        span = windows.get(account) if account is not None else None
        if span is not None and span[0] <= event["at"] < span[1]:
            found[account].append(event)

    ordered = sorted(sources)
    for i in range(0, len(ordered), _IN_FLIGHT):
        chunk = ordered[i:i + _IN_FLIGHT]
        reads = [(channel_id, messages.start_activity_day(db, team_id, channel_id, day)) for channel_id, day in chunk]
        edited: list[tuple[str, Any, Any]] = []
        for channel_id, future in reads:
            for row in future.result():
                span = windows.get(row.user_id)
                if row.edited_ts is not None and span is not None and row.edited_ts >= span[0] and row.ts < span[1]:
                    edited.append((channel_id, row, messages.start_version_times(db, team_id, channel_id, row.ts)))
                    continue
                for account, event in _row_events(channel_id, row, []):
                    keep(account, event)
        for channel_id, row, future in edited:
            times = sorted(r.version_ts for r in future.result() if r.version_ts > row.ts)
            for account, event in _row_events(channel_id, row, times):
                keep(account, event)
    return found
