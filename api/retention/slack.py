"""A Slack workspace's retention run (docs/retention.md): every channel's days older than its policy leave every
table that holds a copy of them, oldest first, a channel-day at a time, unless a hold keeps them.

For each expiring channel-day (its listing row names its partitions: the day's own and its hour buckets):

1. its rows are read once (`messages.expiring_rows`): they say where the copies are;
2. the copies outside the message rows go first: stored files (object store), search postings, the activity
   index and the authors' posts index, text versions, thread reply lists, raw events;
3. then the message partitions, whole (one partition tombstone each);
4. the day leaves the channel's listing last, as part of a range tombstone over the run of days done, so a run that
   stops anywhere is finished by the next one (every delete is idempotent, and an unlisted day has nothing left).

Days before `whole_before` (the oldest cutoff of all channels, when every channel has a finite policy and no hold
is in force) are gone in every channel: their search (term, day) partitions and the authors' posts hours are
dropped whole, index rows and stored activity days by one range per partition, stored reports of those weeks
dropped; no row tombstone. Days after it in a channel with a shorter policy lose their copies row by row
(bounded by the day's messages) and their activity days are rebuilt by the dirty worker (whole-day marks).

Holds: the archive (nothing goes), a channel (none of its days), a user (a day holding one of their messages
stays whole). The run's report counts what went and what each hold kept.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import structlog

from api.activity import dirty
from api.activity import store as activity_store
from api.db import Database, Params, Statement
from api.retention import policies
from api.slack import activity_index, channels, messages, search_index
from api.slack.files import ObjectStore, object_key
from api.slack.reports import store as report_store
from api.slack.timeutil import day_of

log = structlog.get_logger("chronicle.retention")

Write = tuple[Statement, Params]
DAYS_A_READ = 64  # listed days read at a time (oldest first)
UNLISTED_MAX = 200_000  # terms remembered as unlisted (~20 MB)
# Single-partition deletes go out as unlogged batches of up to 10 partitions (Cassandra's warn threshold); a whole
# day's search partitions go by IN lists instead (search_index.expire_day_terms_writes).
_BATCH = 10
# Channel-days of one UTC day expired side by side (the default): at 50,000-60,000 messages a day, 2 was about as
# fast as 4 and 8 and the gentlest on timeline reads beside it (docs/retention.md "Figures").
PARALLEL = 2
# Each channel-day's requests in flight at once. The node serves requests about in the order they arrive: a run
# with 100 IN-list deletes of 200 partitions outstanding puts ~20,000 partition deletes ahead of every read that
# arrives meanwhile; with a few outstanding, a read waits behind a few (docs/retention.md "Requests in flight").
IN_FLIGHT = 4
DAY_US = 86_400_000_000
EPOCH = date(1970, 1, 1)


@dataclasses.dataclass
class Plan:
    """What one run does: each channel's cutoff (UTC day: days before it go), the day before which the whole
    workspace goes, and the holds in force."""

    team_id: str
    today: int
    cutoffs: dict[str, int]  # channel -> first day kept (channels kept forever are absent)
    whole_before: int | None
    held: policies.Held
    kept_forever: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"today": str(EPOCH + timedelta(self.today)),
                "whole_before": str(EPOCH + timedelta(self.whole_before)) if self.whole_before else None,
                "channels": {c: str(EPOCH + timedelta(d)) for c, d in sorted(self.cutoffs.items())},
                "kept_forever": sorted(self.kept_forever)}


def plan(db: Database, team_id: str, *, today: date | None = None) -> Plan:
    archive = f"slack:{team_id}"
    found = policies.policies(db, archive)
    held = policies.held(db, archive)
    today_day = (today - EPOCH).days if today else day_of(int(db.clock.time() * 1_000_000))
    channel_ids = [row.channel_id for row in channels.every_indexed(db, team_id)]
    keeps = {c: policies.keep_days_of(found, c) for c in channel_ids}
    cutoffs = {c: today_day - keep for c, keep in keeps.items() if keep > 0}
    forever = [c for c, keep in keeps.items() if keep == 0]
    whole = None
    if cutoffs and not forever and not held.any:
        whole = min(cutoffs.values())
    return Plan(team_id, today_day, cutoffs, whole, held, forever)


@dataclasses.dataclass
class _UserExpiry:
    """The UTC years in which a run already dropped a user's index rows and activity days before the cutoff."""

    years: set[int] = dataclasses.field(default_factory=set)


class Run:
    """One run over a workspace; `counts` / `held` say what went (or would) and what holds kept."""

    def __init__(self, db: Database, the_plan: Plan, *, dry_run: bool, files: ObjectStore | None,
                 progress: Callable[[str, int], None] | None = None, parallel: int = PARALLEL,
                 pace: float | None = None, in_flight: int = IN_FLIGHT) -> None:
        self.db, self.plan, self.dry_run, self.files = db, the_plan, dry_run, files
        self.parallel = parallel
        self.in_flight = in_flight
        # At most `pace` messages a second (None: as fast as the node answers): a run beside production reads
        # leaves the node the rest of its time.
        self.pace = pace
        self._paced = 0
        self._started = db.clock.monotonic()
        self.progress = progress or (lambda _channel, _days: None)
        self.counts: Counter[str] = Counter()
        self.held: Counter[str] = Counter()
        self.whole_users: dict[str, _UserExpiry] = {}
        self.archive = dirty.archive_name("slack", the_plan.team_id)
        # Whole days: the (term, day) partitions dropped on the current day, and terms whose listing lost the days
        # before the cutoff (bounded: forgetting one costs a redundant range delete).
        self._dropped: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._unlisted: set[str] = set()

    # -- the run ------------------------------------------------------------------------------------------------

    def run(self) -> None:
        self._started = self.db.clock.monotonic()
        whole = self.plan.whole_before
        if whole is not None:
            self._whole_days(whole)
        for channel_id, cutoff in sorted(self.plan.cutoffs.items()):
            self.channel(channel_id, cutoff, from_day=whole or 0)
        if whole is not None:
            self._whole_days_end(whole)

    def _whole_days(self, before: int) -> None:
        """Days every channel lets go, day by day across the channels (each channel's listing read forward, merged
        by day): a common word's (term, day) partition is dropped once, by the first channel-day holding it."""
        streams = [self._tagged(channel_id, before) for channel_id in sorted(self.plan.cutoffs)]
        ranges: dict[str, list[int]] = {}
        pool = self.db.executor(f"retention-{self.parallel}", self.parallel)
        merged = heapq.merge(*streams, key=lambda pair: (pair[1].day, pair[0]))
        for _day, group in itertools.groupby(merged, key=lambda pair: pair[1].day):
            # A day's channel-days side by side (their reads and deletes overlap), the next day after them.
            self._dropped = set()
            days = list(group)
            for future in [pool.submit(self.day, channel_id, listed) for channel_id, listed in days]:
                future.result()
            for channel_id, listed in days:
                ranges.setdefault(channel_id, [listed.day, listed.day])[1] = listed.day
            self.progress("", len(days))
        for channel_id, (first, last) in sorted(ranges.items()):
            self._unlist(channel_id, first, last)

    def _tagged(self, channel_id: str, before: int) -> Iterator[tuple[str, Any]]:
        for listed in self._listed(channel_id, before):
            yield channel_id, listed

    def channel(self, channel_id: str, cutoff: int, *, from_day: int = 0) -> None:
        held = self.plan.held
        if held.archive or channel_id in held.channels:
            why = "archive" if held.archive else "channel"
            for listed in self._listed(channel_id, cutoff, from_day):
                self.held[f"channel_days ({why} hold)"] += 1
                self.held[f"messages ({why} hold)"] += messages.count_rows(
                    self.db, self.plan.team_id, channel_id, messages.parts_of_listed(listed))
            return
        run_first: int | None = None
        run_last = 0
        for listed in self._listed(channel_id, cutoff, from_day):
            if self.day(channel_id, listed):
                run_first = listed.day if run_first is None else run_first
                run_last = listed.day
            elif run_first is not None:  # a held day cuts the listing's range
                self._unlist(channel_id, run_first, run_last)
                run_first = None
            self.progress(channel_id, 1)
        if run_first is not None:
            self._unlist(channel_id, run_first, run_last)

    def _listed(self, channel_id: str, cutoff: int, from_day: int = 0) -> Iterator[Any]:
        next_day = from_day
        while True:
            found = messages.days_before(self.db, self.plan.team_id, channel_id, next_day, cutoff, DAYS_A_READ)
            yield from found
            if len(found) < DAYS_A_READ:
                return
            next_day = found[-1].day + 1

    def _unlist(self, channel_id: str, first: int, last: int) -> None:
        if not self.dry_run:
            self.db.execute(*messages.unlist_days_write(self.plan.team_id, channel_id, first, last))

    def day(self, channel_id: str, listed: Any) -> bool:
        """Expire one channel-day; False when a user hold keeps it."""
        team_id = self.plan.team_id
        parts = messages.parts_of_listed(listed)
        if self.dry_run and not self.plan.held.users:
            counted = messages.count_rows(self.db, team_id, channel_id, parts)
            with self._lock:
                self.counts["channel_days"] += 1
                self.counts["messages"] += counted
            return True
        rows = messages.expiring_rows(self.db, team_id, channel_id, parts, in_flight=self.in_flight)
        if self.plan.held.users and any(row.user_id in self.plan.held.users for row in rows):
            with self._lock:
                self.held["channel_days (user hold)"] += 1
                self.held["messages (user hold)"] += len(rows)
            return False
        stored = [(row.ts, file_id) for row in rows for file_id in (row.files_stored or {})]
        with self._lock:
            self.counts["channel_days"] += 1
            self.counts["messages"] += len(rows)
            self.counts["files"] += len(stored)
        if self.dry_run:
            return True
        self._pace(len(rows))
        for ts, file_id in stored:  # first: a file must not outlive the row that names it
            if self.files is not None:
                self.files.delete(object_key(team_id, channel_id, ts, file_id))
        whole = self.plan.whole_before is not None and listed.day < self.plan.whole_before
        derived = self._postings(channel_id, listed.day, rows, whole)
        with self._lock:  # the run's shared set of users met on whole days
            derived += self._activity(channel_id, listed.day, rows, whole)
        # IN-list deletes go alone (Statement.many_partitions)
        self.db.execute_many(derived, batch_size=_BATCH, concurrency=self.in_flight)
        self.db.execute_many(messages.expire_day_writes(team_id, channel_id, parts, rows), batch_size=_BATCH,
                             concurrency=self.in_flight)
        dropped: Counter[str] = Counter()
        for statement, params in derived:
            if statement is search_index.DELETE_TERMS_DAY_POSTINGS:
                dropped["posting_partitions_dropped"] += len(params[1])
            elif statement is search_index.DELETE_TERM_DAY_POSTINGS:
                dropped["posting_partitions_dropped"] += 1
            elif statement is search_index.DELETE_POSTING:
                dropped["postings_deleted"] += 1
        with self._lock:
            self.counts.update(dropped)
        return True

    def _pace(self, messages_next: int) -> None:
        """Wait until the run's average, with the next `messages_next`, is back under `pace` a second."""
        if not self.pace:
            return
        with self._lock:
            self._paced += messages_next
            due = self._started + self._paced / self.pace
        wait = due - self.db.clock.monotonic()
        if wait > 0:
            self.db.clock.sleep(wait)

    # -- copies ---------------------------------------------------------------------------------------------------

    def _postings(self, channel_id: str, day: int, rows: list[Any], whole: bool) -> list[Write]:
        if whole and self.plan.whole_before is not None:  # every row of a channel-day is of its UTC day
            terms: set[str] = set()
            for row in rows:
                terms |= search_index.every_term(channel_id, row.user_id, self._texts(channel_id, row))
            with self._lock:  # the run's shared sets: term-days dropped, terms unlisted
                if len(self._unlisted) > UNLISTED_MAX:
                    self._unlisted.clear()
                return search_index.expire_day_terms_writes(self.plan.team_id, day, terms,
                                                            whole_before=self.plan.whole_before,
                                                            dropped=self._dropped, unlisted=self._unlisted)
        postings = []
        for row in rows:
            postings += [(term, row.ts)
                         for term in search_index.every_term(channel_id, row.user_id, self._texts(channel_id, row))]
        return search_index.expire_posting_writes(self.db, self.plan.team_id, channel_id, postings,
                                                  whole_before=None, in_flight=self.in_flight)

    def _texts(self, channel_id: str, row: Any) -> list[str | None]:
        texts = [messages.searchable_text(row), row.original_text]
        if row.edited_ts is not None or row.edit_times:
            texts += messages.version_texts(self.db, self.plan.team_id, channel_id, row.ts)
        return texts

    def _activity(self, channel_id: str, msg_day: int, rows: list[Any], whole: bool) -> list[Write]:
        """The activity index rows and posts naming this channel-day; whole days' go by range at the end. The
        users' activity days are rebuilt (whole-day marks) or, for whole days, dropped at the end."""
        touched: set[tuple[str, int, int]] = set()
        posts: set[tuple[str, int, str]] = set()
        for row in rows:
            if row.user_id is not None:
                touched.add((row.user_id, msg_day, msg_day))
                for at in [*(row.edit_times or ()), *([row.deleted_ts] if row.deleted_ts else [])]:
                    touched.add((row.user_id, day_of(at), msg_day))
                posts.add((row.user_id, row.ts, activity_index.base_kind(row.subtype, row.thread_ts, row.ts)))
            for (_emoji, reactor), at in zip(row.reactions or (), row.reaction_times or (), strict=False):
                touched.add((reactor, day_of(at), msg_day))
                touched.add((reactor, msg_day, msg_day))  # history's reactions are indexed at their message
                if row.user_id is not None:
                    touched.add((row.user_id, day_of(at), msg_day))
        if whole and self.plan.whole_before is not None:
            return self._whole_activity(touched, posts, self.plan.whole_before)
        marks, _keys = dirty.mark_writes(self.db, {dirty.whole_day(self.archive, user, day * DAY_US)
                                                   for user, day, _m in touched})
        return [*activity_index.expire_touch_writes(self.plan.team_id, channel_id, touched),
                *activity_index.expire_post_writes(self.plan.team_id, channel_id, posts), *marks]

    def _whole_activity(self, touched: set[tuple[str, int, int]], posts: set[tuple[str, int, str]], before: int
                        ) -> list[Write]:
        """A whole day's activity copies, with the day's other deletes (a run stopped after them leaves nothing
        of the day for the next one to find): the authors' posts hours dropped whole; and, the first time the
        run meets a user in a UTC year, their index rows and stored activity days before the cutoff by one range
        per partition (the same ranges every time: once a run is enough), and the two local days before the cutoff
        marked (rebuilt from what remains)."""
        team_id = self.plan.team_id
        hours: dict[str, set[int]] = {}
        for user_id, ts, _kind in posts:
            hours.setdefault(user_id, set()).add(ts // activity_index.HOUR_US)
        years: dict[str, set[int]] = {}
        for user_id, day, _msg_day in touched:
            year = activity_index.year_of_day(day)
            if year not in self.whole_users.setdefault(user_id, _UserExpiry()).years:
                years.setdefault(user_id, set()).add(year)
                self.whole_users[user_id].years.add(year)
        keep_from = EPOCH + timedelta(before - 2)
        writes: list[Write] = []
        for user_id in sorted(set(hours) | set(years)):
            found = years.get(user_id, set())
            writes += activity_index.expire_whole_writes(team_id, user_id, hours.get(user_id, ()), found, before)
            writes += activity_store.expire_before_writes(self.archive, user_id, {y for year in found
                                                                                for y in (year, year + 1)}, keep_from)
        marks, _keys = dirty.mark_writes(self.db, {dirty.whole_day(self.archive, user, day * DAY_US)
                                                   for user in years for day in (before - 2, before - 1)})
        return writes + marks

    def _whole_days_end(self, before: int) -> None:
        """Every message before `before` is gone: the stored reports of weeks before it are dropped."""
        team_id = self.plan.team_id
        reports = report_store.reports_ending_before(self.db, team_id, EPOCH + timedelta(before))
        self.counts["reports"] += len(reports)
        if self.whole_users:
            self.counts["activity_accounts"] += len(self.whole_users)
        if not self.dry_run:
            self.db.execute_many(report_store.expire_report_writes(team_id, reports), batch_size=_BATCH,
                                 concurrency=self.in_flight)


def run(db: Database, team_id: str, *, dry_run: bool, files: ObjectStore | None, today: date | None = None,
        progress: Callable[[str, int], None] | None = None, parallel: int = PARALLEL, pace: float | None = None,
        in_flight: int = IN_FLIGHT) -> tuple[policies.Run, Plan]:
    """Plan and run retention on one workspace, recorded in retention_runs (a failed run is recorded as such).
    `parallel`: channel-days expired side by side (fewer leaves the node more room for reads meanwhile); `pace`:
    at most that many messages a second; `in_flight`: each channel-day's requests in flight at once."""
    the_plan = plan(db, team_id, today=today)
    archive = f"slack:{team_id}"
    record = policies.start_run(db, archive, dry_run=dry_run)
    job = Run(db, the_plan, dry_run=dry_run, files=files, progress=progress, parallel=parallel, pace=pace,
              in_flight=in_flight)
    started = datetime.now(UTC)
    try:
        job.run()
    except Exception:
        policies.finish_run(db, archive, record, counts=job.counts, held_counts=job.held, state="failed")
        raise
    done = policies.finish_run(db, archive, record, counts=job.counts, held_counts=job.held)
    log.info("retention_run", archive=archive, dry_run=dry_run, counts=dict(job.counts), held=dict(job.held),
             seconds=round((datetime.now(UTC) - started).total_seconds(), 1))
    return done, the_plan
