"""Shared bits of the network admin scripts: exit codes, JSON output, rich progress bars."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import click
from cassandra.cluster import NoHostAvailable
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_NOT_FOUND = 0, 1, 2, 3, 4
EXIT_CODES_DOC = ("Exit codes: 0 done, 1 failed (bad input file or a write failed), 2 usage error, "
                  "3 Cassandra unreachable, 4 account/post/snapshot not found.")
CONTEXT = {"help_option_names": ["-h", "--help"]}


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return str(value)


def emit(data: Any) -> None:
    click.echo(json.dumps(data, default=_default, ensure_ascii=False, indent=1))


def fail(message: str, code: int) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@contextlib.contextmanager
def cassandra_errors() -> Iterator[None]:
    try:
        yield
    except NoHostAvailable as exc:
        fail(f"Cassandra unreachable: {exc}", EXIT_UNREACHABLE)


@contextlib.contextmanager
def progress_bars(enabled: bool = True) -> Iterator[Callable[[str, int | None], Callable[[int], None]]]:
    """Yields factory(description, total) -> advance(n); bars go to stderr so stdout stays JSON."""
    progress = Progress(TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                        console=Console(stderr=True), disable=not enabled)

    def factory(description: str, total: int | None) -> Callable[[int], None]:
        task = progress.add_task(description, total=total, rate="")

        def advance(n: int) -> None:
            progress.advance(task, n)
            t = progress.tasks[task]
            if t.elapsed:
                progress.update(task, rate=f"{t.completed / t.elapsed:,.0f}/s")
        return advance

    with progress:
        yield factory
