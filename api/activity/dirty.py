"""Dirty activity days: live ingest marks what it changed, a worker rebuilds it within the configured delay.

A mark is an item of the generic work queue (api/workqueue.py: no deletes, no tombstones, bounded partitions),
queue `activity_days`, one group per archive (`slack:<team>`, `network:<name>`), keyed
`<account>|<first UTC hour>|<hours>`: the account's activity changed somewhere in those hours (live events mark
one hour; history imports mark whole UTC days). The worker turns the hours into the account's local days.

Marks are due on a grid of half the delay: every mark of one account and hour within one grid step is the same
queue row (the same key and due time), and this process writes it once. The worker rebuilds what is due every
quarter of the delay, so a change is in its day within about three quarters of the delay.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import uuid
from collections.abc import Callable, Iterable

import structlog

from api import workqueue
from api.caches import Cache
from api.db import Database, Params, Statement
from api.worker_loop import Counts, run_worker
from api.workqueue import WorkItem

QUEUE = "activity_days"
HOUR_US = 3600 * 1_000_000

log = structlog.get_logger("chronicle.activity")

# Marks this process has written for their grid step (the same queue row again would change nothing).
_MARKED = "activity.marks_written"
_MARKED_MAX = 20_000  # ~8 MB (a Mark and a due time a key)


def _marked(db: Database) -> Cache:
    return db.caches.lru(_MARKED, maxsize=_MARKED_MAX)


@dataclasses.dataclass(frozen=True)
class Mark:
    archive: str
    account: str
    first_hour: int  # hours since 1970-01-01 UTC
    hours: int = 1

    @property
    def key(self) -> str:
        return f"{self.account}|{self.first_hour}|{self.hours}"

    @property
    def span_us(self) -> tuple[int, int]:
        return self.first_hour * HOUR_US, (self.first_hour + self.hours) * HOUR_US

    @classmethod
    def from_item(cls, item: WorkItem) -> Mark:
        account, first_hour, hours = item.key.rsplit("|", 2)
        return cls(item.group, account, int(first_hour), int(hours))


def archive_name(side: str, scope: str) -> str:
    """`slack:<team_id>` or `network:<network>`: the archive an account's days belong to."""
    return f"{side}:{scope}"


def live(archive: str, account: str, at_us: int) -> Mark:
    """The mark of one live event at `at_us`."""
    return Mark(archive, account, at_us // HOUR_US)


def whole_day(archive: str, account: str, at_us: int) -> Mark:
    """The mark of history (backfill, import) at `at_us`: its whole UTC day, so a year of history is at most
    365 marks per account."""
    return Mark(archive, account, at_us // (24 * HOUR_US) * 24, 24)


def _due_us(db: Database, now_us: int) -> int:
    step = int(db.settings.activity.delay_seconds * 1_000_000 / 2)
    return (now_us // step + 1) * step


def mark_writes(db: Database, marks: Iterable[Mark]) -> tuple[list[tuple[Statement, Params]], list[tuple]]:
    """The queue rows of `marks` not yet written by this process for their grid step, and the keys to pass to
    `note_marked` once written."""
    due = _due_us(db, int(db.clock.time() * 1_000_000))
    keys = _marked(db).missing((mark, due) for mark in dict.fromkeys(marks))
    writes: list[tuple[Statement, Params]] = []
    for mark, _due in keys:
        writes += workqueue.enqueue_writes(QUEUE, mark.archive, mark.key, {}, due_at_us=due, clock=db.clock)
    return writes, keys


def note_marked(db: Database, keys: Iterable[tuple]) -> None:
    _marked(db).add_all(keys)


def mark(db: Database, marks: Iterable[Mark]) -> None:
    writes, keys = mark_writes(db, marks)
    db.execute_many(writes)
    note_marked(db, keys)


def backlog(db: Database) -> dict:
    return workqueue.backlog(db, QUEUE)


# (db, archive, [marks]) -> days rebuilt
Rebuild = Callable[[Database, str, list[Mark]], int]


@dataclasses.dataclass
class Stats(Counts):
    marks: int = 0
    days: int = 0
    retried: int = 0
    PASSIVE = ('days',)


class DirtyWorker:
    """Takes due marks, rebuilds their days archive by archive, and gives the marks back. A failed rebuild is
    retried later (a new mark), so nothing is lost; rebuilding is idempotent, so a repeated mark does no harm."""

    def __init__(self, db: Database, rebuild: Rebuild, *, owner: str | None = None, batch: int | None = None,
                 retry_seconds: float = 10.0) -> None:
        self.db, self.rebuild = db, rebuild
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.batch = batch or db.settings.activity.batch
        self.retry_seconds = retry_seconds

    def run_once(self) -> Stats:
        stats = Stats()
        items = workqueue.take(self.db, QUEUE, self.owner, self.batch)
        by_archive: dict[str, list[WorkItem]] = {}
        for item in items:
            by_archive.setdefault(item.group, []).append(item)
        for archive, group in by_archive.items():
            try:
                stats.days += self.rebuild(self.db, archive, [Mark.from_item(i) for i in group])
            except Exception as exc:  # noqa: BLE001 - one archive's failure must not stop the others
                due = int((self.db.clock.time() + self.retry_seconds) * 1_000_000)
                for item in group:
                    workqueue.retry(self.db, item, self.owner, due_at_us=due, error=repr(exc)[:500])
                stats.retried += len(group)
                log.warning("activity_rebuild_retry", archive=archive, marks=len(group), error=repr(exc))
                continue
            for item in group:
                workqueue.done(self.db, item, self.owner)
            stats.marks += len(group)
        return stats

    def drain(self, *, max_passes: int = 1000) -> Stats:
        """Passes until one finds nothing due, then hand the shards back."""
        total = Stats()
        try:
            for _ in range(max_passes):
                stats = self.run_once()
                total.marks += stats.marks
                total.days += stats.days
                total.retried += stats.retried
                if stats.marks + stats.retried == 0:
                    break
        finally:
            self.stop()
        return total

    def run(self, *, stop: Callable[[], bool] = lambda: False, on_pass: Callable[[Stats], None] | None = None,
            interval: float | None = None) -> None:
        """Rebuild due marks until `stop()`; when nothing is due, sleep a quarter of the delay (so a change is in
        its day within about three quarters of the delay)."""
        pause = interval if interval is not None else self.db.settings.activity.delay_seconds / 4
        run_worker(self.run_once, idle=lambda stats: stats.marks + stats.retried == 0, clock=self.db.clock,
                   interval=pause, stop=stop, on_pass=on_pass, finish=self.stop)

    def stop(self) -> None:
        workqueue.stop(self.db, QUEUE, self.owner)
