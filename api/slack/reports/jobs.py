"""Report generation as a queued job (POST /slack/teams/{team}/reports answers 202 at once).

Queue `slack_reports` on the generic work queue (api/workqueue.py), one group per workspace (one workspace's
reports never hold up another's), one item per job keyed by its id. The job's state lives in
slack_report_jobs (store.py): queued when the request enqueued it (the row and the item in one round), running,
then done (with the messages counted and the delivery of a post) or failed (with the reason, after
`max_attempts`). `chronicle slack report-worker` runs them (`ReportWorker`, api/worker_loop.run_worker), one
job at a time per worker: a generation holds a week's pairs in memory, so a worker never runs two at once.

A job is idempotent: generating a period again stores the same figures (readers see the old or the new report
whole). A job already done (a redelivery after a crash between `done` in the table and `done` on the queue)
is not run again, so a report is posted to Slack at most once per job in that case. This module owns no
table: it translates between report jobs and work items, and runs the worker loop.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import uuid
from collections.abc import Callable
from typing import Any

import structlog

from api import workqueue
from api.db import Database
from api.slack.reports import store
from api.worker_loop import Counts, run_worker
from api.workqueue import WorkItem

QUEUE = "slack_reports"
log = structlog.get_logger("chronicle.slack.reports.jobs")

# (db, team_id, payload) -> (messages counted, result to store with the job)
Runner = Callable[[Database, str, dict[str, Any]], tuple[int, dict[str, Any]]]


def new_job_id() -> str:
    return uuid.uuid4().hex


def submit(db: Database, team_id: str, report_id: str, options: dict[str, Any]) -> str:
    """Queue one generation: the job's row (queued) and its work item in one round; returns the job id."""
    job_id = new_job_id()
    payload = {"job_id": job_id, "report_id": report_id, "options": options}
    db.execute_many([store.job_write(db, team_id, job_id, report_id, options),
                     *workqueue.enqueue_writes(QUEUE, team_id, job_id, payload, clock=db.clock)])
    return job_id


@dataclasses.dataclass
class Stats(Counts):
    done: int = 0
    retried: int = 0
    failed: int = 0
    skipped: int = 0  # items of jobs already finished (handed out again after a crash, or within the settle time)


def _idle(stats: Stats) -> bool:
    return stats.total() == 0


class ReportWorker:
    """Takes report jobs from the shards it holds and runs them one at a time (`run_job(db, team, payload)`).

    A job that raises is retried with exponential backoff (a new queue item due later) up to `max_attempts`,
    then marked failed with the reason. Retry times and idle sleeps are read from `db.clock`."""

    def __init__(self, db: Database, run_job: Runner, *, owner: str | None = None, max_attempts: int = 3,
                 backoff_seconds: float = 30.0) -> None:
        self.db, self.run_job = db, run_job
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.max_attempts, self.backoff_seconds = max_attempts, backoff_seconds

    def run_once(self) -> Stats:
        stats = Stats()
        for item in workqueue.take(self.db, QUEUE, self.owner, 1):
            self._run(item, stats)
        return stats

    def _run(self, item: WorkItem, stats: Stats) -> None:
        team_id, job_id = item.group, item.payload.get("job_id")
        attempts = item.attempts + 1
        if not isinstance(job_id, str) or not isinstance(item.payload.get("report_id"), str):
            workqueue.done(self.db, item, self.owner)
            stats.failed += 1
            log.error("report_job_malformed", team=team_id, key=item.key)
            return
        state = store.job(self.db, team_id, job_id)
        if state is not None and state["state"] in ("done", "failed"):
            workqueue.done(self.db, item, self.owner)  # finished before a crash left the item on the queue
            stats.skipped += 1
            return
        store.update_job(self.db, team_id, job_id, state="running", attempts=attempts, started=True)
        try:
            messages, result = self.run_job(self.db, team_id, item.payload)
        except Exception as exc:  # noqa: BLE001 - a job's failure must not stop the worker
            error = f"{type(exc).__name__}: {exc}"
            if attempts < self.max_attempts and not isinstance(exc, LookupError):
                delay = self.backoff_seconds * 2 ** (attempts - 1)
                store.update_job(self.db, team_id, job_id, state="queued", attempts=attempts, error=error)
                workqueue.retry(self.db, item, self.owner,
                                due_at_us=int((self.db.clock.time() + delay) * 1_000_000), error=error[:500])
                stats.retried += 1
                log.info("report_job_retry", team=team_id, job=job_id, attempts=attempts, error=error)
                return
            store.update_job(self.db, team_id, job_id, state="failed", attempts=attempts, finished=True,
                             error=error)
            workqueue.done(self.db, item, self.owner)
            stats.failed += 1
            log.error("report_job_failed", team=team_id, job=job_id, attempts=attempts, error=error)
            return
        store.update_job(self.db, team_id, job_id, state="done", attempts=attempts, finished=True,
                         messages=messages, result=result)
        workqueue.done(self.db, item, self.owner)
        stats.done += 1
        log.info("report_job_done", team=team_id, job=job_id, report=item.payload["report_id"], messages=messages)

    def run(self, *, interval: float = 2.0, stop: Callable[[], bool] = lambda: False,
            on_pass: Callable[[Stats], None] | None = None, until_idle: bool = False, max_passes: int = 0) -> None:
        """Run passes until `stop()` holds (or, `until_idle`, until one finds nothing due); then hand the shards
        back."""
        run_worker(self.run_once, idle=_idle, clock=self.db.clock, interval=interval, stop=stop, on_pass=on_pass,
                   until_idle=until_idle, max_passes=max_passes, finish=self.stop)

    def stop(self) -> None:
        workqueue.stop(self.db, QUEUE, self.owner)
