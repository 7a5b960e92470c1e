"""What every `chronicle` command shares: exit codes, JSON output, error handling, rich progress bars.

Exit codes, the same for every command (each command's help says which of them it uses):

  0  done
  1  failed: a bad input file, a write or a migration failed, some files failed (file worker), a node failed
  2  usage error or bad configuration (a --team / --channels value that is not a Slack id or channel name)
  3  Cassandra unreachable, or (node commands) a prerequisite is missing: Java, Maven, disk space, a free port
  4  not found: an account, post or ranking snapshot; a stored report; a Slack workspace or channel that is not
     in the archive (nothing is written)
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import os
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, NoReturn

import click
from cassandra.cluster import NoHostAvailable
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from api.config import Settings
from api.db import Database, installed_db, set_db
from api.node.common import NodeError, PrerequisiteError


class Exit(enum.IntEnum):
    """A command's exit code (the module's docstring says what each means)."""

    OK = 0
    FAILED = 1
    NODE_FAILED = 1
    USAGE = 2
    UNREACHABLE = 3
    PREREQUISITE = 3  # node commands: what they need is missing (Java, Maven, disk, a port)
    NOT_FOUND = 4
    BAD_TOKEN = 5  # `slack backfill`: Slack refused the token
    MISSING_SCOPE = 6  # `slack backfill`: the token lacks a scope
    RATE_LIMITED = 7  # `slack backfill`: rate limited beyond --rate-wait-budget
    HELD = 5  # `erase`, `network drop`: a legal hold covers what the command would delete

EXIT_CODES_DOC = ("Exit codes: 0 done, 1 failed (bad input, a write, a migration or a node failed), "
                  "2 usage error or bad configuration, 3 Cassandra unreachable or a node prerequisite missing "
                  "(Java, Maven, disk space, a free port), 4 not found (an account, post, snapshot, stored "
                  "report, Slack workspace or channel).")
CONTEXT = {"help_option_names": ["-h", "--help"]}
# Options many commands share, written once so their flags and help read the same everywhere.
keyspace_option = click.option("--keyspace", default=None, help="Keyspace [env CHRONICLE_KEYSPACE, chronicle].")
progress_option = click.option("--progress/--no-progress", default=True, help="Progress bars on stderr.")


def _default(value: Any) -> Any:
    if hasattr(value, "to_json"):  # domain values (Post, Account, ...) know their JSON form
        return value.to_json()
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return str(value)


def emit(data: Any) -> None:
    """Print `data` as indented JSON on stdout (datetimes as ISO 8601 UTC)."""
    click.echo(json.dumps(data, default=_default, ensure_ascii=False, indent=1))


def fail(message: str, code: int) -> NoReturn:
    """Print `error: <message>` on stderr and exit with `code`."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@contextlib.contextmanager
def fail_on(*errors: type[BaseException], code: int = Exit.FAILED, prefix: str = "") -> Iterator[None]:
    """Turn the given exceptions into `error: <prefix><exception>` and exit `code`."""
    try:
        yield
    except errors as exc:
        fail(f"{prefix}{exc}", code)


@contextlib.contextmanager
def cassandra_errors(where: str | None = None) -> Iterator[None]:
    """Cassandra unreachable (no host answers) -> exit 3 with the driver's reason."""
    at = f" at {where}" if where else ""
    with fail_on(NoHostAvailable, code=Exit.UNREACHABLE, prefix=f"Cassandra unreachable{at}: "):
        yield


def audited(db: Database, command: str) -> None:
    """Record in the access audit log (api/audit.py) that this command is about to read archive content: who
    runs it, the command and its arguments."""
    from api import audit

    if db.settings.audit:
        params = click.get_current_context().params
        target = " ".join(f"--{k.replace('_', '-')}={v}" for k, v in sorted(params.items()) if v not in (None, False))
        audit.record(db, actor=audit.cli_actor(), via="cli", action=command, target=target, status=0, wait=True)


def yield_cpu(niceness: int) -> int:
    """Run this process (every thread it has, and those it starts) at `niceness` or below (a higher value), so
    that on a machine shared with the API and the node its own work waits for theirs. Linux keeps a niceness per
    thread, so each one's is set (the driver's I/O thread may be running already). Returns the niceness now."""
    if niceness <= 0:
        return os.getpriority(os.PRIO_PROCESS, 0)
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            tid = int(task)
            os.setpriority(os.PRIO_PROCESS, tid, max(niceness, os.getpriority(os.PRIO_PROCESS, tid)))
    return os.getpriority(os.PRIO_PROCESS, 0)


def say(line: str) -> None:
    """A line for the person watching: stderr, so stdout stays the command's JSON."""
    click.echo(line, err=True)


@contextlib.contextmanager
def node_errors() -> Iterator[None]:
    """A node command's failure -> exit 3 when a prerequisite is missing, else exit 1 (the node failed)."""
    try:
        yield
    except NodeError as exc:
        fail(str(exc), Exit.PREREQUISITE if isinstance(exc, PrerequisiteError) else Exit.NODE_FAILED)


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


class Runtime:
    """What a command runs with, built once by the root group and kept as click's context object (`ctx.obj`):
    the settings, read and validated on first use (a bad value exits 2 naming its variable: node commands and
    `--help` never need them), and one Database for the whole command, closed when the command ends."""

    def __init__(self) -> None:
        self._settings: Settings | None = None
        self._db: Database | None = None
        self._owned = False

    def settings(self) -> Settings:
        if self._settings is None:
            with fail_on(ValueError, code=Exit.USAGE, prefix="bad configuration: "):
                self._settings = Settings.from_env()
        return self._settings

    def database(self, keyspace: str | None = None) -> Database:
        """The command's Database on `keyspace` (else CHRONICLE_KEYSPACE), its settings read from the environment.

        Run in a process of its own (nothing installed), the command builds it and installs it, so that everything
        it calls reads one Database. Run in-process by a test, the Database the process installed is used unless
        the option names a keyspace or the environment names the installed one: then everything is read from the
        environment, as the command's own process would."""
        if self._db is None:
            settings = self.settings()
            if keyspace:
                settings = dataclasses.replace(settings, keyspace=keyspace)
            installed = installed_db()
            if installed is not None and not keyspace and settings.keyspace != installed.keyspace:
                self._db = installed
            else:
                self._db, self._owned = Database(settings), True
                if installed is None:
                    set_db(self._db)
        elif keyspace and keyspace != self._db.keyspace:
            raise click.UsageError(f"this command already uses keyspace {self._db.keyspace}, not {keyspace}")
        return self._db

    def close(self) -> None:
        if self._owned and self._db is not None:
            if installed_db() is self._db:
                set_db(None)
            self._db.close()
        self._db, self._owned = None, False


def runtime() -> Runtime:
    """The Runtime of the command being run (a command invoked outside the root group gets one of its own)."""
    ctx = click.get_current_context()
    found = ctx.find_object(Runtime)
    if found is None:
        root = ctx.find_root()
        root.obj = found = Runtime()
        root.call_on_close(found.close)
    return found


def database(keyspace: str | None = None) -> Database:
    """The command's Database (see `Runtime.database`)."""
    return runtime().database(keyspace)
