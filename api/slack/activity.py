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

import bisect
import dataclasses
import json
from collections import Counter, deque
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any

from api.activity import dirty
from api.activity import events as ev
from api.db import Database
from api.slack import activity_index, messages, users
from api.slack.timeutil import day_of

_PLAIN = frozenset({None, "thread_broadcast", "file_share", "me_message"})
_IN_FLIGHT = 128
HOUR_US = 3_600_000_000
DAY_US = 86_400_000_000


def archive_of(team_id: str) -> str:
    return dirty.archive_name("slack", team_id)


def time_zones(db: Database, team_id: str, user_ids: Iterable[str]) -> dict[str, str | None]:
    return users.time_zones(db, team_id, user_ids)


def all_accounts(db: Database, team_id: str) -> dict[str, str | None]:
    """Every known user of the workspace with their time zone."""
    return {row.user_id: row.tz for row in users.every_user(db, team_id)}


def _posted_kind(row: Any) -> str:
    kind = activity_index.base_kind(row.subtype, row.thread_ts, row.ts)
    return ev.FILE_SHARE if kind == ev.MESSAGE and row.files else kind


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

    def __init__(self, windows: dict[str, tuple[int, int]], old_days: dict[str, set[int]]) -> None:
        self.windows = windows
        # UTC days read the old way per user: their posts come from the message rows (else the posts index)
        self.old_days = old_days
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
            if lo <= ts < hi and ts // DAY_US in self.old_days[author]:
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
            stats: MutableMapping[str, int] | None = None, *, cuts: dict[str, list[int]] | None = None
            ) -> dict[str, list[dict[str, Any]]]:
    """The events of each user in `windows` ({user: (start µs, end µs)}), unordered. `cuts` ({user: the starts
    of their local days in the window, µs}) decide which days are hot (each UTC day its own day when absent).
    `stats` (optional) adds up the rows read, by table."""
    index_reads = {user: activity_index.start_sources(db, team_id, user, day_of(start), day_of(end - 1))
                   for user, (start, end) in windows.items()}
    sources: dict[tuple[str, int], activity_index.Source] = {}
    old_days: dict[str, set[int]] = {}
    post_hours: dict[str, set[int]] = {}
    for user, futures in index_reads.items():
        found = activity_index.sources_from(futures)
        old_days[user] = found.old_days
        post_hours[user] = set()
        for key, source in found.by_partition.items():
            merged = sources.setdefault(key, activity_index.Source())
            merged.history_at.update(source.history_at)
            # The user's posts of a day read the old way come from the message rows, else from the posts index.
            own = source.post_hours if key[1] in found.old_days else set()
            post_hours[user].update(key[1] * 24 + hour for hour in source.post_hours if key[1] not in found.old_days)
            if source.hours is None or merged.hours is None:
                merged.hours = None
            else:
                merged.hours.update(source.hours, own)
    collector = _Collector(windows, old_days)
    if stats is not None:
        collector.stats = stats
    post_reads = _start_posts(db, team_id, windows, post_hours, cuts or {}, collector.stats)
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
        if hours is not None and not hours:
            continue  # only the user's posts there: they come from the posts index
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
    for user, events in _finish_posts(db, team_id, post_reads, collector.stats).items():
        collector.found[user].extend(events)
    return collector.found


def _post_event(row: Any) -> dict[str, Any]:
    """A post as its author's event, from its row in the posts index: the same event as from its message row."""
    kind = ev.FILE_SHARE if row.base_kind == ev.MESSAGE and row.is_file else row.base_kind
    posted: dict[str, Any] = {"at": row.ts, "kind": kind, "channel": row.channel_id, "ts": row.ts}
    if row.thread_ts is not None:
        posted["thread_ts"] = row.thread_ts
    if row.words is not None:
        posted["words"] = row.words
    if row.files:
        posted["files"] = row.files
    if row.subtype not in _PLAIN:
        posted["subtype"] = row.subtype
    return posted


@dataclasses.dataclass
class _PostReads:
    """One user's posts being read: the hours read whole (every post of a quiet local day) and, per slot of a
    hot local day, the first posts of its earliest groups and the counts by (kind, channel)."""

    window: tuple[int, int]
    quiet_slot: Callable[[int], bool]
    whole_hours: list[Any] = dataclasses.field(default_factory=list)
    firsts: dict[int, list[Any]] = dataclasses.field(default_factory=dict)
    counted: Counter[tuple[int, str, str]] = dataclasses.field(default_factory=Counter)


def _start_posts(db: Database, team_id: str, windows: dict[str, tuple[int, int]], post_hours: dict[str, set[int]],
                 cuts: dict[str, list[int]], stats: MutableMapping[str, int]) -> dict[str, _PostReads]:
    """Count each user's posts of their hours (the node counts; a few rows come back), then start the reads of
    what `events.capped` keeps: every post of a local day of at most DAY_EVENTS posts, the first SLOT_SHARE of
    each slot of a hotter one (the rest counted)."""
    count_reads = {}
    for user, hours in post_hours.items():
        lo, hi = windows[user]
        wanted = sorted(h for h in hours if lo // HOUR_US <= h <= (hi - 1) // HOUR_US)
        count_reads[user] = [(hour, activity_index.start_post_counts(db, team_id, user, hour)) for hour in wanted]
    started: dict[str, _PostReads] = {}
    for user, reads in count_reads.items():
        lo, hi = windows[user]
        starts = cuts.get(user) or []
        def day_of_slot(slot: int, starts: list[int] = starts) -> int:
            at = slot * ev.SLOT_US
            return bisect.bisect_right(starts, at) if starts else at // DAY_US
        groups: dict[int, list[Any]] = {}
        per_day: Counter[int] = Counter()
        hour_of: dict[int, int] = {}
        for hour, future in reads:
            for row in future.result():
                stats["slack_user_posts (counted groups)"] = stats.get("slack_user_posts (counted groups)", 0) + 1
                if lo <= row.slot * ev.SLOT_US < hi:
                    groups.setdefault(row.slot, []).append(row)
                    per_day[day_of_slot(row.slot)] += row.n
                    hour_of[row.slot] = hour
        quiet_days = {day for day, n in per_day.items() if n <= ev.DAY_EVENTS}
        reads_of = _PostReads((lo, hi), lambda slot, q=quiet_days, d=day_of_slot: d(slot) in q)
        for hour in sorted({hour_of[slot] for slot in groups if reads_of.quiet_slot(slot)}):
            reads_of.whole_hours.append(activity_index.start_hour_posts(db, team_id, user, hour))
        for slot, slot_groups in groups.items():
            if reads_of.quiet_slot(slot):
                continue
            for row in slot_groups:
                files = row.file_n or 0
                if row.base_kind == ev.MESSAGE and files:
                    reads_of.counted[(slot, ev.FILE_SHARE, row.channel_id)] += files
                reads_of.counted[(slot, row.base_kind, row.channel_id)] += row.n - (
                    files if row.base_kind == ev.MESSAGE else 0)
            # The slot's first posts are among the first SLOT_SHARE of its SLOT_SHARE earliest groups.
            earliest = sorted(slot_groups, key=lambda r: r.first_ts)[:ev.SLOT_SHARE]
            reads_of.firsts[slot] = [activity_index.start_first_posts(
                db, team_id, user, hour_of[slot], slot, r.base_kind, r.channel_id, ev.SLOT_SHARE) for r in earliest]
        started[user] = reads_of
    return started


def _finish_posts(db: Database, team_id: str, started: dict[str, _PostReads], stats: MutableMapping[str, int]
                  ) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for user, reads in started.items():
        lo, hi = reads.window
        events: list[dict[str, Any]] = []
        for future in reads.whole_hours:
            for row in future.result():
                stats["slack_user_posts"] = stats.get("slack_user_posts", 0) + 1
                if lo <= row.ts < hi and reads.quiet_slot(row.slot):
                    events.append(_post_event(row))
        counted = Counter(reads.counted)
        for slot, futures in reads.firsts.items():
            rows = sorted((row for future in futures for row in future.result()), key=lambda r: r.ts)
            stats["slack_user_posts"] = stats.get("slack_user_posts", 0) + len(rows)
            for row in rows[:ev.SLOT_SHARE]:
                posted = _post_event(row)
                counted[(slot, posted["kind"], row.channel_id)] -= 1
                events.append(posted)
        for (slot, kind, channel_id), n in sorted(counted.items()):
            if n > 0:
                events.append({"at": slot * ev.SLOT_US, "kind": kind, "channel": channel_id, "count": n})
        found[user] = events
    return found


def _add_partition(db: Database, team_id: str, collector: _Collector, edited: deque, channel_id: str,
                   future: Any) -> None:
    rows = future.result()
    for row in rows:
        collector.stats["slack_messages"] = collector.stats.get("slack_messages", 0) + 1
        if collector.needs_edits(row):  # its events wait for its versions
            edited.append((channel_id, row, messages.start_version_times(db, team_id, channel_id, row.ts)))
        else:
            collector.add_row(channel_id, row)
