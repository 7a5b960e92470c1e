"""`chronicle retention`: retention policies, legal holds and retention runs (docs/retention.md)."""

from __future__ import annotations

import uuid
from datetime import date

import click

from api import audit
from api.cli.common import (
    CONTEXT,
    Exit,
    cassandra_errors,
    database,
    emit,
    fail,
    fail_on,
    progress_bars,
    say,
    yield_cpu,
)
from api.errors import InvalidInput, NotFound
from api.network.common import valid_network_name
from api.retention import network as network_retention
from api.retention import policies
from api.retention import slack as slack_retention
from api.slack.files import store_from_settings

_CODES = "Exit codes: 0 done, 1 failed (a write), 2 usage error (a bad value), 3 Cassandra unreachable, " \
         "4 not found (a hold)."


def team_option(command):
    """--team or --network: whose archive (exactly one)."""
    command = click.option("--network", default=None, help="Follower network name (instead of --team).")(command)
    return click.option("--team", default=None, help="Slack workspace id.")(command)


def _archive(team: str | None, network: str | None = None) -> str:
    if (team is None) == (network is None):
        fail("give --team (a Slack workspace) or --network (a follower network)", Exit.USAGE)
    if network is not None:
        if not valid_network_name(network):
            fail(f"--network: {network!r} is not a network name", Exit.USAGE)
        return network_retention.archive_of(network)
    return f"slack:{team}"


@click.group("retention", context_settings=CONTEXT)
def retention() -> None:
    """Retention: how long a workspace's (or a channel's) messages are kept, legal holds that keep them anyway,
    and the runs that delete what expired from every table."""


@retention.command("set", context_settings=CONTEXT, epilog=_CODES,
                   short_help="Keep a workspace's or channel's messages N days (0: forever).")
@team_option
@click.option("--channel", default=None, help="A channel id (its policy overrides the workspace's).")
@click.option("--keep-days", type=int, required=True, help="Days to keep; 0 keeps forever.")
def set_policy(team: str | None, network: str | None, channel: str | None, keep_days: int) -> None:
    """Set the workspace's policy (or one channel's), or a network's. Takes effect at the next `retention run`."""
    archive = _archive(team, network)
    with cassandra_errors(), fail_on(InvalidInput, code=Exit.USAGE):
        db = database()
        emit(policies.set_policy(db, archive, channel or policies.WHOLE, keep_days, by=audit.cli_actor()))


@retention.command("show", context_settings=CONTEXT, epilog=_CODES,
                   short_help="Policies, holds and the last runs of a workspace.")
@team_option
@click.option("--runs", type=click.IntRange(0, 100), default=5, show_default=True, help="Newest runs shown.")
def show(team: str | None, network: str | None, runs: int) -> None:
    archive = _archive(team, network)
    with cassandra_errors():
        db = database()
        found = slack_retention.plan(db, team) if team else network_retention.plan(db, network)
        emit({"policies": list(policies.policies(db, archive).values()), "holds": policies.holds(db, archive),
              "runs": policies.runs(db, archive, runs) if runs else [], "plan": found.to_json()})


@retention.command("run", context_settings=CONTEXT, epilog=_CODES,
                   short_help="Delete what the policies expire (--dry-run: count it).")
@team_option
@click.option("--dry-run", is_flag=True, help="Count what would go (messages; posts, likes), delete nothing.")
@click.option("--today", default=None, help="The day the policies count back from, YYYY-MM-DD [default: today, "
                                            "UTC].")
@click.option("--parallel", type=click.IntRange(1, 64), default=None,
              help=f"Channel-days (accounts: --network) expired side by side (fewer: gentler on reads) [default: "
                   f"{slack_retention.PARALLEL}; --network: {network_retention.PARALLEL}].")
@click.option("--pace", type=click.FloatRange(min=1, min_open=False), default=None, metavar="MESSAGES",
              help="At most this many messages a second (a workspace; default: as fast as the node answers): a "
                   "run beside production reads leaves the node the rest of its time.")
@click.option("--in-flight", type=click.IntRange(1, 256), default=slack_retention.IN_FLIGHT, show_default=True,
              help="Each channel-day's requests in flight at once (a workspace): the node serves requests about in "
                   "order, so what the run has outstanding is what a read arriving meanwhile waits behind.")
@click.option("--nice", type=click.IntRange(0, 19), default=10, show_default=True,
              help="Run at this niceness (0: as started): on a machine it shares with the API and the node, the "
                   "run's own work then waits for theirs, and reads beside it keep their latency.")
@click.option("--walk", is_flag=True,
              help="A network: read every account, as its first run does, and list what outlives the run (after "
                   "processes older than cql/0330 wrote to it); later runs read only the listed accounts.")
@click.option("--progress/--no-progress", default=True, help="Progress on stderr.")
def run(team: str | None, network: str | None, dry_run: bool, today: str | None, parallel: int | None,
        pace: float | None, in_flight: int, nice: int, walk: bool, progress: bool) -> None:
    """Delete every channel-day older than its policy from every table that holds a copy (messages, versions,
    threads, raw events, search postings, activity, files, reports), oldest first, unless a hold keeps it; or, with
    --network, every post older than the network's policy (postings, top lists, likes, activity, snapshots).
    Resumable: a run stopped anywhere is finished by the next one. Prints the run's report (JSON); it is also
    kept in retention_runs (`retention show`)."""
    _archive(team, network)
    try:
        day = date.fromisoformat(today) if today else None
    except ValueError:
        fail(f"--today: {today!r} is not a date (YYYY-MM-DD)", Exit.USAGE)
    yield_cpu(nice)
    with cassandra_errors():
        db = database()
        if network is not None:
            with progress_bars(progress) as bar:
                report, found = network_retention.run(db, network, dry_run=dry_run, today=day,
                                                      progress=bar("accounts", None),
                                                      parallel=parallel or network_retention.PARALLEL,
                                                      walk=walk)
            if found.cutoff is None:
                say("no policy expires anything in this network")
            emit({**report.to_json(), "plan": found.to_json()})
            return
        with progress_bars(progress) as bar:
            advance = bar("channel-days", None)
            report, plan = slack_retention.run(db, team, dry_run=dry_run, files=store_from_settings(
                db.settings.slack), today=day, progress=lambda _channel, days: advance(days),
                parallel=parallel or slack_retention.PARALLEL, pace=pace, in_flight=in_flight)
        if not plan.cutoffs:
            say("no policy expires anything in this workspace")
        emit({**report.to_json(), "plan": plan.to_json()})


@retention.group("hold", context_settings=CONTEXT)
def hold() -> None:
    """Legal holds: content they cover survives retention (and erasure) runs until released."""


@hold.command("create", context_settings=CONTEXT, epilog=_CODES, short_help="Place a hold.")
@team_option
@click.option("--scope", type=click.Choice(["archive", "channel", "user", "account"]), required=True,
              help="archive, channel or user (Slack); archive or account (network).")
@click.option("--target", default="", help="The channel, user or account id (none for the archive).")
@click.option("--reason", required=True, help="Why (kept with the hold).")
def hold_create(team: str | None, network: str | None, scope: str, target: str, reason: str) -> None:
    archive = _archive(team, network)
    with cassandra_errors(), fail_on(InvalidInput, code=Exit.USAGE):
        emit(policies.create_hold(database(), archive, scope, target, reason, by=audit.cli_actor(), via="cli"))


@hold.command("list", context_settings=CONTEXT, epilog=_CODES, short_help="Holds of a workspace.")
@team_option
@click.option("--active", is_flag=True, help="Only holds in force.")
def hold_list(team: str | None, network: str | None, active: bool) -> None:
    archive = _archive(team, network)
    with cassandra_errors():
        emit(policies.holds(database(), archive, active_only=active))


@hold.command("release", context_settings=CONTEXT, epilog=_CODES, short_help="Release a hold.")
@team_option
@click.option("--id", "hold_id", required=True, help="The hold's id (`hold list`).")
def hold_release(team: str | None, network: str | None, hold_id: str) -> None:
    archive = _archive(team, network)
    try:
        parsed = uuid.UUID(hold_id)
    except ValueError:
        fail(f"--id: {hold_id!r} is not a hold id", Exit.USAGE)
    with cassandra_errors(), fail_on(NotFound, code=Exit.NOT_FOUND):
        emit(policies.release_hold(database(), archive, parsed, by=audit.cli_actor(), via="cli"))
