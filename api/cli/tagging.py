"""`chronicle tagging`: tagging projects (docs/tagging.md): make a project, add teams and people (tokens),
keep queues filled, check the figures against the effort log."""

from __future__ import annotations

import json
import signal
import threading
from typing import Any

import click

from api.cli.common import CONTEXT, Exit, cassandra_errors, database, emit, fail, progress_bars
from api.config import tagging_tick
from api.tagging import projects, reconcile, service, worker

_CODES = ("Exit codes: 0 done, 1 failed (a write failed; reconcile: figures differ from the effort log), "
          "2 usage error, 3 Cassandra unreachable, 4 no such project.")


@click.group("tagging", context_settings=CONTEXT)
def tagging() -> None:
    """Tagging projects over archived messages and posts: queues with leases, team quotas, QA, figures."""


def _refused(exc: service.Refused) -> None:
    fail(exc.message, Exit.NOT_FOUND if exc.status == 404 else Exit.USAGE)


def _names(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


@tagging.command("create-project", context_settings=CONTEXT, short_help="Make a project from an archive source.",
                 epilog=_CODES)
@click.option("--project", required=True, help="Project id (1-64 letters, digits, '_' or '-').")
@click.option("--name", default=None, help="Display name [default: the id].")
@click.option("--source", required=True,
              help='JSON: {"kind": "slack", "team": "T1", "channels": ["C1"], "from": "2026-01-01", '
                   '"to": "2026-01-31"} or {"kind": "network", "network": "n", "authors": [1, 2]} or '
                   '{"kind": "network", "network": "n", "query": "words"}.')
@click.option("--categories", required=True, help="Comma-separated category list (fixed).")
@click.option("--subcategories", default="", help="Comma-separated subcategory list (fixed).")
@click.option("--team", "teams", multiple=True, help="A team, NAME or NAME:QUOTA (repeatable).")
@click.option("--queue-size", type=click.IntRange(1, 100_000), default=projects.DEFAULT_QUEUE_SIZE,
              show_default=True)
@click.option("--lease-seconds", type=click.IntRange(5, 86_400), default=projects.DEFAULT_LEASE_SECONDS,
              show_default=True)
@click.option("--max-held", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Items one tagger may hold at once.")
@click.option("--dry-run", is_flag=True, help="List the items the source names; write nothing.")
def create_project(project: str, name: str | None, source: str, categories: str, subcategories: str,
                   teams: tuple[str, ...], queue_size: int, lease_seconds: int, max_held: int, dry_run: bool) -> None:
    """List the items the source names in the archive and make the project (its items, teams, queue
    bookkeeping). The queue is filled by `fill-queues` or the worker. Prints the project as JSON."""
    import re

    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", project):
        fail("--project: 1-64 letters, digits, '_' or '-'", Exit.USAGE)
    try:
        parsed = json.loads(source)
    except json.JSONDecodeError as exc:
        fail(f"--source is not JSON: {exc}", Exit.USAGE)
    quotas: dict[str, int | None] = {}
    for team in teams:
        team_name, _, quota = team.partition(":")
        if not team_name or (quota and not quota.isdigit()):
            fail(f"--team {team!r}: NAME or NAME:QUOTA", Exit.USAGE)
        quotas[team_name] = int(quota) if quota else None
    if not _names(categories):
        fail("--categories: at least one category", Exit.USAGE)
    with cassandra_errors():
        db = database()
        if dry_run:
            try:
                stored = service.sources.validate(parsed)
            except service.sources.SourceError as exc:
                fail(str(exc), Exit.USAGE)
            emit({"project": project, "source": stored, "items": sum(1 for _ in service.sources.refs(db, stored)),
                  "dry_run": True})
            return
        with progress_bars() as bar:
            advance = bar("items", None)
            try:
                made = service.create_project(db, project, name or project, parsed, _names(categories),
                                              _names(subcategories), queue_size=queue_size,
                                              lease_seconds=lease_seconds, max_held=max_held, teams=quotas,
                                              progress=advance)
            except service.Refused as exc:
                _refused(exc)
        emit({**made.to_json(), "teams": quotas})


@tagging.command("add-team", context_settings=CONTEXT, short_help="Add a team (or change its quota).",
                 epilog=_CODES)
@click.option("--project", required=True)
@click.option("--team", required=True)
@click.option("--quota", type=click.IntRange(0, None), default=None, help="Items the team may hold and finish.")
def add_team(project: str, team: str, quota: int | None) -> None:
    """Add a team to a project, or set its quota."""
    with cassandra_errors():
        db = database()
        if projects.get(db, project) is None:
            fail(f"no project {project}", Exit.NOT_FOUND)
        projects.put_team(db, project, team, quota)
        service.items.make_usage(db, project, team)
        emit({"project": project, "team": team, "quota": quota})


@tagging.command("add-user", context_settings=CONTEXT, short_help="Add a person; prints their token once.",
                 epilog=_CODES)
@click.option("--project", required=True)
@click.option("--user", required=True, help="The person's id (shown in statistics).")
@click.option("--team", required=True)
@click.option("--role", type=click.Choice(projects.ROLES), default="tagger", show_default=True)
def add_user(project: str, user: str, team: str, role: str) -> None:
    """Add a tagger, QA reviewer or project admin and print their personal token. It is shown only now (only
    its hash is stored); running this again for the same person issues a new token and revokes the old one."""
    with cassandra_errors():
        try:
            token = service.add_member(database(), project, user, team, role)
        except service.Refused as exc:
            _refused(exc)
        emit({"project": project, "user": user, "team": team, "role": role, "token": token})


@tagging.command("fill-queues", context_settings=CONTEXT, short_help="One owner pass: top up the queues.",
                 epilog=_CODES)
@click.option("--project", default=None, help="One project [default: every project].")
def fill_queues(project: str | None) -> None:
    """Return expired and skipped items to the queue, top each queue up to its size from the project's New
    items, and bring the figures up to date. A project that a running worker holds is skipped (the worker
    keeps it filled). Prints what each project got."""
    with cassandra_errors():
        db = database()
        names = [project] if project else projects.every(db)
        if project and projects.get(db, project) is None:
            fail(f"no project {project}", Exit.NOT_FOUND)
        emit([worker.run_once(db, name) for name in names])


@tagging.command("worker", context_settings=CONTEXT, short_help="Keep every project's queue filled (loop).",
                 epilog=_CODES)
def run_worker() -> None:
    """Own each project no other worker owns (a lease), and pass over it every CHRONICLE_TAGGING_TICK
    seconds (default 1): expired leases back to the queue, queues topped up, figures updated. Stops on
    SIGTERM/SIGINT after the current pass and hands its projects back."""
    tick = tagging_tick()
    stop = threading.Event()

    def _stop(signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    with cassandra_errors():
        db = database()
        db.session  # noqa: B018 - connect now: exit 3 at once when Cassandra is unreachable
        click.echo(f"tagging worker: keyspace={db.keyspace} tick={tick}s", err=True)
        worker.run(db, stop, tick=tick)
    emit({"stopped": True})


@tagging.command("reconcile", context_settings=CONTEXT, short_help="Check the figures against the effort log.",
                 epilog=_CODES)
@click.option("--project", required=True)
@click.option("--repair", is_flag=True, help="Write missing events and the right figures.")
def reconcile_command(project: str, repair: bool) -> None:
    """Recompute every figure from the effort log (and the log from the item states) and print the
    differences. Exit 1 when they differ and --repair was not given."""
    with cassandra_errors():
        db = database()
        with progress_bars() as bar:
            try:
                report = reconcile.reconcile(db, project, repair=repair, progress=bar("items", None))
            except LookupError as exc:
                fail(str(exc), Exit.NOT_FOUND)
        emit(report)
        if (report["differences"] or report["missing_events"] or report["team_usage"]) and not report["repaired"]:
            raise SystemExit(Exit.FAILED)


@tagging.command("stats", context_settings=CONTEXT, short_help="Print a project's figures.", epilog=_CODES)
@click.option("--project", required=True)
def stats(project: str) -> None:
    """The statistics the dashboard shows, as JSON."""
    with cassandra_errors():
        try:
            emit(service.stats(database(), project))
        except service.Refused as exc:
            _refused(exc)
