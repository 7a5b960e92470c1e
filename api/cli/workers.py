"""What every worker command (`network worker`, `slack file-worker`, `slack report-worker`) shares: connect first,
stop cleanly on a signal, say the passes that did work on stderr."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from api.cli.common import cassandra_errors, say
from api.db import Database
from api.worker_loop import StopOnSignal


@contextlib.contextmanager
def worker_session(db: Database, unit: str) -> Iterator[Callable[[], bool]]:
    """A worker command's frame: connect first (exit 3 at once when Cassandra is unreachable), then yield the
    `stop()` predicate that SIGTERM or SIGINT sets (the worker finishes its current `unit`, then stops)."""
    with cassandra_errors():
        db.session  # noqa: B018 - connect now, to fail fast with exit code 3
        with StopOnSignal(unit, say=say).installed() as stopping:
            yield stopping


def pass_reporter(total: Any, line: Callable[[Any], str]) -> Callable[[Any], None]:
    """A worker's `on_pass`: each pass's stats added to `total`, and a stderr line for a pass that did work."""

    def on_pass(stats: Any) -> None:
        total.add(stats)
        if stats.total():
            say(line(stats))

    return on_pass


def done_retried_failed(stats: Any) -> str:
    """A job worker's pass line."""
    return f"done={stats.done} retried={stats.retried} failed={stats.failed}"


