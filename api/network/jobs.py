"""Background jobs of the follower network, on the generic work queue (api/workqueue.py).

Queue `network_jobs`, one group per network (one network's backlog never starves another's), one item per job
keyed `<kind>:<subject>`. Requests enqueue work that is proportional to an account's followers, a post's likes
or a term's postings, and return at once; `chronicle network worker` runs the jobs (job_handlers.run_job).

Kinds (every job re-reads the state it acts on, so a duplicate, late or repeated item does no harm):
- `celebrity:<account_id>`: bring the account's celebrity mark in line with its current follower count
  (promote at or above the threshold, demote below threshold x (1 - hysteresis), otherwise nothing). Queued by
  a follow or unfollow that crosses a line.
- `purge-likes:<post_id>`: remove the likes of a deleted post.
- `term-top:<term>`: rebuild a common term's top list when it has none or has outgrown it. Queued when a term's
  postings pass a power of two above the rare limit, and by a search that could not answer exactly.
- `rankings:<job id>`: compute Q2+Q3 and append a snapshot; its status row (rankings.py, ranking_jobs) says
  queued, running, done (with the snapshot id) or failed. Queued by POST /networks/{n}/rankings (202).
- `follower-buckets:<account_id>`: move the account's followers into the layout its follower count wants
  (relations.move_followers: into buckets above the line, split when they fill, back below the line minus
  the hysteresis). Queued by the rankings job for top accounts whose layout is behind; the celebrity job
  settles the layout too.

This module owns no table: it translates between network jobs and work items, and runs the worker loop.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import structlog

from api import workqueue
from api.clock import SYSTEM, Clock
from api.db import Database, Params, Statement
from api.worker_loop import Counts, run_worker
from api.workqueue import WorkItem

QUEUE = "network_jobs"
CELEBRITY, PURGE_LIKES, TERM_TOP = "celebrity", "purge-likes", "term-top"
RANKINGS, FOLLOWER_BUCKETS = "rankings", "follower-buckets"
KINDS = (CELEBRITY, PURGE_LIKES, TERM_TOP, RANKINGS, FOLLOWER_BUCKETS)

log = structlog.get_logger("chronicle.network.jobs")

# (db, network, kind, subject) -> a summary of what the job did
Handler = Callable[[Database, str, str, str], dict[str, Any]]


def job_writes(network: str, kind: str, subject: int | str, *, clock: Clock = SYSTEM
               ) -> list[tuple[Statement, Params]]:
    """The queue rows of one job, for `execute_many` together with the caller's own rows (`clock`: the
    `db.clock` they are written with; it dates the job)."""
    if kind not in KINDS:
        raise ValueError(f"unknown network job kind {kind!r}")
    return workqueue.enqueue_writes(QUEUE, network, f"{kind}:{subject}", {"kind": kind, "subject": str(subject)},
                                    clock=clock)


def enqueue(db: Database, network: str, kind: str, subject: int | str) -> None:
    db.execute_many(job_writes(network, kind, subject, clock=db.clock))


def backlog(db: Database) -> dict:
    """Jobs not yet finished per network (bounded count; see workqueue.backlog)."""
    return workqueue.backlog(db, QUEUE)


@dataclasses.dataclass
class Stats(Counts):
    done: int = 0
    retried: int = 0
    failed: int = 0
    kinds: Counter = dataclasses.field(default_factory=Counter)


def _idle(stats: Stats) -> bool:
    return stats.total() == 0


class JobWorker:
    """Takes network jobs from the shards it holds and runs them one after another.

    A job that raises is retried with exponential backoff (a new queue item due later) up to `max_attempts`,
    then logged as failed and given up: the admin commands (`apply-threshold`, `index-terms`, `reconcile`)
    repair what a given-up job left. Retry times and idle sleeps are read from `clock` (default: `db.clock`)."""

    def __init__(self, db: Database, handle: Handler, *, owner: str | None = None, batch_size: int = 20,
                 max_attempts: int = 5, backoff_seconds: float = 5.0, backoff_max_seconds: float = 300.0,
                 clock: Clock | None = None) -> None:
        self.db, self.handle = db, handle
        self.clock = db.clock if clock is None else clock
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.batch_size, self.max_attempts = batch_size, max_attempts
        self.backoff_seconds, self.backoff_max_seconds = backoff_seconds, backoff_max_seconds

    def run_once(self, stop: Callable[[], bool] = lambda: False) -> Stats:
        """One batch of due jobs, run one after another; when `stop()` starts to hold, the jobs not begun are put
        back on the queue (the checkpoint stays before them), so a signal waits for one job, not a batch."""
        stats = Stats()
        batch = workqueue.take(self.db, QUEUE, self.owner, self.batch_size)
        for i, item in enumerate(batch):
            if stop():
                workqueue.put_back(self.db, batch[i:], self.owner)
                break
            self._run(item, stats)
        return stats

    def _run(self, item: WorkItem, stats: Stats) -> None:
        kind, subject = item.payload.get("kind"), item.payload.get("subject")
        try:
            if kind not in KINDS or not isinstance(subject, str):
                raise ValueError(f"malformed job {item.key!r}: {item.payload!r}")
            summary = self.handle(self.db, item.group, kind, subject)
        except Exception as exc:  # noqa: BLE001 - a job's failure must not stop the worker
            attempts = item.attempts + 1
            if attempts < self.max_attempts and not isinstance(exc, ValueError):
                delay = min(self.backoff_seconds * 2 ** (attempts - 1), self.backoff_max_seconds)
                workqueue.retry(self.db, item, self.owner, due_at_us=int((self.clock.time() + delay) * 1_000_000),
                                error=repr(exc)[:500])
                stats.retried += 1
                log.info("network_job_retry", network=item.group, job=item.key, attempts=attempts, delay_s=delay,
                         error=repr(exc))
                return
            workqueue.done(self.db, item, self.owner)
            stats.failed += 1
            log.error("network_job_failed", network=item.group, job=item.key, attempts=attempts, error=repr(exc))
            return
        workqueue.done(self.db, item, self.owner)
        stats.done += 1
        stats.kinds[kind] += 1
        log.info("network_job_done", network=item.group, job=item.key, **summary)

    def drain(self, *, max_passes: int = 1000, stop: bool = True, until: Callable[[], bool] = lambda: False,
              on_pass: Callable[[Stats], None] | None = None) -> Stats:
        """Run passes until one finds nothing due (jobs queued by jobs included) or `until()` holds (a signal);
        then hand the shards back unless `stop` is False (the worker goes on later and remembers what it
        finished)."""
        total = Stats()

        def count(stats: Stats) -> None:
            total.add(stats)
            if on_pass is not None:
                on_pass(stats)

        run_worker(lambda: self.run_once(until), idle=_idle, clock=self.clock, stop=until, on_pass=count,
                   until_idle=True, max_passes=max_passes, finish=self.stop if stop else None)
        return total

    def run(self, *, interval: float = 1.0, stop: Callable[[], bool] = lambda: False,
            on_pass: Callable[[Stats], None] | None = None) -> None:
        """Run passes until `stop()` holds, sleeping `interval` (of the clock) after a pass with nothing due;
        then hand the shards back."""
        run_worker(lambda: self.run_once(stop), idle=_idle, clock=self.clock, interval=interval, stop=stop,
                   on_pass=on_pass, finish=self.stop)

    def stop(self) -> None:
        """Checkpoints written, shards handed back to the other workers."""
        workqueue.stop(self.db, QUEUE, self.owner)
