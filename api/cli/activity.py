"""`chronicle activity`: per-account, per-day activity (docs/activity.md): rebuild a range, run the dirty
worker, print days."""

from __future__ import annotations

import os
import sys
from datetime import date
from typing import Any

import click

from api.activity import calendar, codec, dirty, service
from api.activity.service import Archive
from api.cli.common import CONTEXT, Exit, cassandra_errors, database, emit, fail, progress_bars, say
from api.cli.workers import pass_reporter, worker_session

_CODES = "Exit codes: 0 done, 1 failed (a write, or a stored day this version cannot decode), 2 usage error, " \
         "3 Cassandra unreachable."


@click.group("activity", context_settings=CONTEXT)
def activity() -> None:
    """Per-account, per-day activity: one compressed row per account and local day (Slack users, network
    accounts), rebuilt whole from the archive."""


def _archive(team: str | None, network: str | None) -> Archive:
    if bool(team) == bool(network):
        fail("give exactly one of --team or --network", Exit.USAGE)
    return Archive.slack(team) if team else Archive.network(network)


def _date(value: str, what: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        fail(f"{what}: {value!r} is not a date (YYYY-MM-DD)", Exit.USAGE)


@activity.command("rebuild", context_settings=CONTEXT, short_help="Rebuild the activity days of a date range.",
                  epilog=_CODES)
@click.option("--team", default=None, help="Slack workspace id.")
@click.option("--network", default=None, help="Follower network name.")
@click.option("--from", "first", required=True, help="First local day, YYYY-MM-DD.")
@click.option("--to", "last", required=True, help="Last local day, YYYY-MM-DD (inclusive).")
@click.option("--accounts", default=None, help="Comma-separated user/account ids [default: every account].")
@click.option("--dry-run", is_flag=True, help="Read and encode everything, write nothing; print what would be "
                                              "written.")
@click.option("--restart", is_flag=True, help="Ignore the progress of an earlier run with the same arguments.")
@click.option("--jobs", type=click.IntRange(1, 64), default=os.cpu_count() or 1, show_default="the CPUs",
              help="Processes rebuilding units side by side.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def rebuild(team: str | None, network: str | None, first: str, last: str, accounts: str | None, dry_run: bool,
            restart: bool, jobs: int, quiet: bool) -> None:
    """Rebuild the days [--from, --to] of every account (or --accounts) from the archive tables, each day
    overwritten in one write. Resumable: a run killed midway, started again with the same arguments, skips the
    units (31 days x 500 accounts) it finished. Prints a JSON summary."""
    archive = _archive(team, network)
    lo, hi = _date(first, "--from"), _date(last, "--to")
    wanted = [a.strip() for a in accounts.split(",") if a.strip()] if accounts else None
    if network and wanted and not all(a.isdigit() for a in wanted):
        fail("--accounts: network account ids are numbers", Exit.USAGE)
    with cassandra_errors():
        db = database()
        try:
            plan = service.plan_rebuild(db, archive, lo, hi, wanted, restart=restart)
        except ValueError as exc:
            fail(str(exc), Exit.USAGE)
        total = service.Built()
        skipped = 0
        with progress_bars(not quiet) as bar:
            advance = bar("account-days", len(plan.accounts) * ((hi - lo).days + 1))
            pending = []
            for unit in plan.units:
                if unit[0] in plan.finished:
                    skipped += 1
                    advance(len(unit[1]) * len(unit[2]))
                else:
                    pending.append(unit)

            def finished(unit: tuple[int, list[date], list[str]], built: service.Built) -> None:
                total.add(built)
                advance(len(unit[1]) * len(unit[2]))

            service.run_units(db, plan, pending, jobs=jobs, dry_run=dry_run, done=finished)
    summary: dict[str, Any] = {"archive": archive.name, "from": lo.isoformat(), "to": hi.isoformat(),
                               "run_id": plan.run_id, "dry_run": dry_run, "units": len(plan.units),
                               "units_skipped": skipped, **total.as_dict(),
                               "accounts": len(plan.accounts)}
    emit(summary)


@activity.command("worker", context_settings=CONTEXT, short_help="Rebuild the days live ingest changed.",
                  epilog=_CODES)
@click.option("--once", is_flag=True, help="Rebuild what is due now, then exit.")
def worker(once: bool) -> None:
    """Live ingest marks the (account, hour) it changed; this rebuilds the local days those hours fall in, within
    CHRONICLE_ACTIVITY_DELAY seconds (default 60). Safe to run several at once (each holds a share of the
    queue); on SIGTERM the current pass is finished and the queue handed back. Prints a JSON summary."""
    db = database()
    with worker_session(db, "pass") as stopping:
        runner = dirty.DirtyWorker(db, service.rebuild_marks)
        say(f"activity worker {runner.owner}: keyspace={db.keyspace}")
        if once:
            total = runner.drain()
        else:
            total = dirty.Stats()
            runner.run(stop=stopping, on_pass=pass_reporter(
                total, lambda stats: f"marks={stats.marks} days={stats.days} retried={stats.retried}"))
    emit(total.as_dict())


@activity.command("show", context_settings=CONTEXT, short_help="Print stored days of one account.",
                  epilog=_CODES)
@click.option("--team", default=None, help="Slack workspace id.")
@click.option("--network", default=None, help="Follower network name.")
@click.option("--account", required=True, help="User or account id.")
@click.option("--from", "first", required=True, help="First local day, YYYY-MM-DD.")
@click.option("--to", "last", default=None, help="Last local day (inclusive, at most 31 days) [default: --from].")
@click.option("--summary", is_flag=True, help="Counts per event kind instead of the events.")
def show(team: str | None, network: str | None, account: str, first: str, last: str | None, summary: bool) -> None:
    """Print the stored days, decoded by the same function the API uses (private channels included: this is an
    admin's view)."""
    archive = _archive(team, network)
    lo = _date(first, "--from")
    hi = _date(last, "--to") if last else lo
    days = calendar.date_range(lo, hi) if hi >= lo else []
    if not days or len(days) > 31:
        fail("--from..--to must be 1 to 31 days", Exit.USAGE)
    with cassandra_errors():
        try:
            emit({"archive": archive.name, "account": account,
                  "days": service.read(database(), archive, account, days, contiguous=True, summary=summary)})
        except codec.UnknownCodec as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(Exit.FAILED)
