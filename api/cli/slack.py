"""`chronicle slack file-worker`: fetch Slack files (url_private) of archived messages into object storage."""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Callable
from typing import Any

import click

from api.cli.common import (
    CONTEXT,
    Exit,
    audited,
    cassandra_errors,
    database,
    emit,
    fail,
    fail_on,
    keyspace_option,
    progress_bars,
    progress_option,
    say,
)
from api.cli.workers import done_retried_failed, pass_reporter, worker_session


@click.group("slack", context_settings=CONTEXT)
def slack() -> None:
    """The Slack archive's background work."""


@slack.command("file-worker", context_settings=CONTEXT, short_help="Fetch Slack files into object storage.")
@click.option("--once", is_flag=True, help="Process the files due now, then exit (retries not yet due stay queued).")
@click.option("--interval", default=2.0, show_default=True, help="Seconds to sleep when nothing is due.")
@keyspace_option
@click.option("--fail-on-error", is_flag=True, help="With --once: exit 1 if any file failed permanently.")
@click.option("--max-passes", type=int, default=0, help="Stop after this many passes (0 = no limit).")
def file_worker(once: bool, interval: float, keyspace: str | None, fail_on_error: bool, max_passes: int) -> None:
    """Run the Slack file worker (see docs/slack.md for the CHRONICLE_FILES_* / CHRONICLE_SLACK_* settings).

    Takes files from the `slack_files` work queue (never scans the messages table): each worker holds a share of
    the queue's shards (a lease each), takes due files fairly across workspaces, downloads each with the
    workspace's bot token, stores it at slack/{team}/{channel}/{ts}/{file_id} (local directory, or S3 when
    CHRONICLE_FILES_S3_BUCKET is set) and records the URI on the message. Safe to run several at once; on
    SIGTERM the current batch is finished and the shards are handed back.

    Exit codes: 0 done (--once) or stopped by a signal, 1 some files failed permanently in --once mode
    (with --fail-on-error), 2 bad configuration, 3 Cassandra unreachable.
    """
    from api.slack.files import FileWorker, Stats

    db = database(keyspace)
    slack_settings = db.settings.slack
    if not slack_settings.bot_token and not slack_settings.bot_tokens:
        say("warning: no CHRONICLE_SLACK_BOT_TOKEN(S): every download will fail")
    total = Stats()
    passes = itertools.count(1)
    with worker_session(db, "file") as stopping:
        worker = FileWorker(db, slack_settings)
        store = f"s3://{slack_settings.s3_bucket}" if slack_settings.s3_bucket else slack_settings.files_root
        # Announced once a signal stops it cleanly (a supervisor may send SIGTERM as soon as it sees this).
        say(f"slack file worker {worker.owner}: keyspace={db.keyspace} store={store}")
        # --once: the files due now, then exit; --max-passes bounds either mode.
        on_pass = pass_reporter(total, lambda stats: f"pass {next(passes)}: stored={stats.stored} "
                                f"retried={stats.retried} failed={stats.failed} skipped={stats.skipped}")
        worker.run(interval=interval, stop=stopping, on_pass=on_pass, until_idle=once,
                   max_passes=max(0, max_passes))
    click.echo(f"total: stored={total.stored} retried={total.retried} failed={total.failed} "
               f"skipped={total.skipped}", err=True)
    if fail_on_error and total.failed:
        sys.exit(Exit.FAILED)


# -- history in and out ------------------------------------------------------------------------------------


# A channel name as Slack allows it: lower-case letters (any script), digits, hyphens and underscores, at most
# 80 characters (checked with the value == its lower-case form); a leading # is dropped.
_CHANNEL_NAME = re.compile(r"[\w-]{1,80}")


def _team_id(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--team: a Slack workspace id (upper-case letters and digits), else a usage error (exit 2)."""
    from api.slack.codec import is_slack_id

    if value is not None and not is_slack_id(value):
        raise click.BadParameter(f"{value[:80]!r} is not a Slack workspace id (upper-case letters and digits, "
                                 "e.g. T024BE7LD)", param=param)
    return value


def _enterprise_id(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--enterprise: an Enterprise Grid org id (E...), else a usage error (exit 2)."""
    if value is not None and not re.fullmatch(r"E[A-Z0-9]{2,20}", value):
        raise click.BadParameter(f"{value[:80]!r} is not an Enterprise Grid org id (E...)", param=param)
    return value


def _channel_list(value: str | None, param: click.Parameter, *, names: bool) -> list[str] | None:
    from api.slack.codec import is_slack_id

    if value is None:
        return None
    out = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        if is_slack_id(item):
            out.append(item)
        elif names and _CHANNEL_NAME.fullmatch(item.removeprefix("#")) and item == item.lower():
            out.append(item.removeprefix("#"))
        else:
            what = "a Slack channel id (upper-case letters and digits, e.g. C024BE91L)" + (
                " nor a channel name (lower-case, no spaces or dots)" if names else "")
            raise click.BadParameter(f"{item[:80]!r} is not {what}", param=param)
    if not out:
        raise click.BadParameter("names no channel", param=param)
    return out


def _channel_ids(_ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
    """--channels of commands that take ids only: each a Slack channel id, else a usage error (exit 2)."""
    return _channel_list(value, param, names=False)


def _channel_refs(_ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
    """--channels of commands that take ids or names: each a Slack channel id or name, else exit 2."""
    return _channel_list(value, param, names=True)


def _indexed_channels(db: Any, team_id: str, wanted: list[str] | None) -> list[str]:
    """The channel ids to work on: `wanted`, each in the workspace's channel index or with stored days, else
    every indexed one. Exit 4 when the workspace was never archived or a wanted id is none of its channels."""
    from api.slack import channels as channel_table
    from api.slack import messages

    indexed = [r.channel_id for r in channel_table.every_indexed(db, team_id)]
    if wanted is None:
        if not indexed:
            fail(f"workspace {team_id} is not in the archive (nothing of it was ever stored)", Exit.NOT_FOUND)
        return indexed
    missing = sorted(c for c in set(wanted) - set(indexed)  # an unindexed channel with messages still counts
                     if next(iter(messages.all_days(db, team_id, c)), None) is None)
    if missing:
        fail(f"no channel {', '.join(missing)} in workspace {team_id}'s archive", Exit.NOT_FOUND)
    return wanted


def _per_channel_options(*, dry_run: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The options of a command run by `_per_channel`: --team, --channels (ids), --dry-run (its help says what it
    counts), --keyspace, --progress."""

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        for option in reversed((
                click.option("--team", "team_id", required=True, callback=_team_id, help="Workspace id."),
                click.option("--channels", default=None, callback=_channel_ids,
                             help="Comma-separated channel ids (default: every channel of the index)."),
                click.option("--dry-run", is_flag=True, help=dry_run), keyspace_option, progress_option)):
            command = option(command)
        return command

    return decorate


def _per_channel(team_id: str, channels: list[str] | None, keyspace: str | None, progress: bool, dry_run: bool,
                 counted: tuple[str, ...], work: Callable[[Any, str, Callable[[int], None]], dict[str, int]], *,
                 item_bar: str | None = None) -> None:
    """Run `work(db, channel_id, advance)` on each wanted channel of the workspace (exit 4 on an unknown one),
    with a channels bar (and an `item_bar` that `advance` moves), and print the `counted` totals."""
    db = database(keyspace)
    totals = dict.fromkeys(counted, 0)
    with cassandra_errors(), progress_bars(progress) as bar:
        wanted = _indexed_channels(db, team_id, channels)
        next_channel = bar("channels", len(wanted))
        advance = bar(item_bar, None) if item_bar else (lambda _n: None)
        for channel_id in wanted:
            for key, count in work(db, channel_id, advance).items():
                totals[key] += count
            next_channel(1)
    emit({"team_id": team_id, "channels": len(wanted), **totals, "dry_run": dry_run})


def _zone(value: str | None) -> str | None:
    """--tz: an IANA zone name (else usage error, exit 2)."""
    if value is None:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise click.BadParameter(f"{value[:80]!r} is not an IANA time zone (e.g. America/Los_Angeles)") from None
    return value


def _epoch(value: str | None, option: str) -> int | None:
    """YYYY-MM-DD (UTC midnight) or a Slack ts, as µs."""
    if value is None:
        return None
    import datetime as dt

    from api.slack.timeutil import BadTimestamp, ts_to_us
    try:
        return int(dt.datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=dt.UTC).timestamp()) * 1_000_000
    except ValueError:
        pass
    try:
        return ts_to_us(value)
    except BadTimestamp:
        fail(f"{option}: {value!r} is neither YYYY-MM-DD nor a Slack ts", Exit.USAGE)


@slack.command("backfill", context_settings=CONTEXT, short_help="Fetch a workspace's history via the Web API.")
@click.option("--team", "team_id", required=True, callback=_team_id,
              help="Workspace id (its bot token: CHRONICLE_SLACK_BOT_TOKENS T=xoxb-... or CHRONICLE_SLACK_BOT_TOKEN).")
@click.option("--channels", default=None, callback=_channel_refs,
              help="Comma-separated channel ids or names (default: every channel).")
@click.option("--refetch-days", type=click.IntRange(0), default=7, show_default=True,
              help="Start this many days before each channel's cursor (edits, deletes, reactions, replies).")
@click.option("--max-age-days", type=click.IntRange(0), default=21, show_default=True,
              help="Never fetch further back than this many days (0 = everything).")
@click.option("--include-private", is_flag=True, help="Also private channels the bot is a member of.")
@click.option("--enterprise", "enterprise_id", default=None, callback=_enterprise_id,
              help="Enterprise Grid org id (E...): the org-wide install's token serves the workspace.")
@click.option("--rate-wait-budget", type=float, default=900.0, show_default=True,
              help="Seconds of rate-limit waiting (Retry-After) allowed before giving up (exit 7).")
@click.option("--dry-run", is_flag=True, help="Fetch and count; write nothing (cursors do not move).")
@keyspace_option
@progress_option
def backfill(team_id: str, channels: list[str] | None, refetch_days: int, max_age_days: int, include_private: bool,
             enterprise_id: str | None, rate_wait_budget: float, dry_run: bool, keyspace: str | None,
             progress: bool) -> None:
    """Backfill a workspace's history through Slack's Web API into the archive (docs/slack-history.md).

    users.list, conversations.list, conversations.members (a member count per run), conversations.history per
    channel from its cursor (minus --refetch-days, within --max-age-days) and conversations.replies for every
    thread. Resumable: kill it at any moment and run it again; nothing is lost or stored twice. Prints a JSON
    report.

    --team must be a Slack workspace id and each --channels value a channel id or name (else exit 2). A workspace
    of an Enterprise Grid org installed org-wide is served by the org's token: name the org with --enterprise
    (once its events have arrived, the archive knows the org and --enterprise may be left out).

    Exit codes: 0 done, 1 Slack answered an error, 2 usage error or no token, 3 Cassandra unreachable,
    5 the token was refused, 6 the token lacks a scope, 7 rate limited beyond --rate-wait-budget.
    """
    from api.slack.backfill import Backfill, BackfillError, Options

    db = database(keyspace)
    slack_settings = db.settings.slack
    from api.slack.installations import NoToken, bot_token, refreshing, remember_org

    with cassandra_errors(), fail_on(NoToken, code=Exit.USAGE):
        if enterprise_id:
            remember_org(db, team_id, enterprise_id)
        token = bot_token(db, team_id)  # the installed (rotated) token, else CHRONICLE_SLACK_BOT_TOKEN(S)
    wanted = frozenset(channels) if channels else None
    options = Options(refetch_days=refetch_days, max_age_days=max_age_days, include_private=include_private,
                      channels=wanted, dry_run=dry_run, rate_wait_budget=rate_wait_budget)
    codes = {"bad_token": Exit.BAD_TOKEN, "missing_scope": Exit.MISSING_SCOPE, "rate_limited": Exit.RATE_LIMITED}
    with cassandra_errors(), progress_bars(progress) as bar:
        bars: dict[str, Any] = {"messages": bar("messages", None)}

        def on_progress(kind: str, value: Any) -> None:
            if kind == "channels":
                bars["channels"] = bar("channels", value)
            elif kind == "channel_start":
                bars["current"] = bar(f"#{value}"[:24], None)  # one bar per channel, as it starts
            elif kind == "channel":
                bars["channels"](value)
            else:
                bars["messages"](value)
                bars["current"](value)

        try:
            runner = Backfill(db, team_id, token, options, base_url=slack_settings.api_url, progress=on_progress)
            refreshing(runner.client, db, team_id)  # a token rotated (or revoked) during the run is seen
            with fail_on(NoToken, code=Exit.BAD_TOKEN):
                report = runner.run()
        except BackfillError as exc:
            fail(str(exc), codes.get(exc.kind, Exit.FAILED))
    emit(report.to_json())


@slack.command("import-export", context_settings=CONTEXT, short_help="Import a Slack export ZIP.")
@click.argument("zip_path", type=click.Path(exists=True, dir_okay=False))
@click.option("--team", "team_id", default=None, callback=_team_id,
              help="Workspace id (default: the team_id in users.json); must be one users.json names (exit 4 if "
                   "not), so an export is never filed under the wrong workspace.")
@click.option("--as-copy", is_flag=True,
              help="With --team: import the export as a copy under that workspace id even though users.json "
                   "names another (a test or staging copy of a workspace).")
@click.option("--include-private", is_flag=True, help="Also import private channels (groups.json).")
@click.option("--observed-at", default=None,
              help="When the export was made (YYYY-MM-DD or a Slack ts; default: the newest entry time in the ZIP).")
@click.option("--max-bytes", type=int, default=64 * 1024**3, show_default=True,
              help="Refuse archives larger than this uncompressed (ZIP bombs).")
@click.option("--max-entries", type=int, default=5_000_000, show_default=True,
              help="Refuse archives with more entries.")
@click.option("--dry-run", is_flag=True, help="Read and check everything, report counts per channel, write nothing.")
@keyspace_option
@progress_option
def import_export(zip_path: str, team_id: str | None, as_copy: bool, include_private: bool, observed_at: str | None,
                  max_bytes: int, max_entries: int, dry_run: bool, keyspace: str | None, progress: bool) -> None:
    """Import a Slack export ZIP (Slack's own export, slackdump's export) into the archive.

    Streams one day file at a time (memory bounded whatever the ZIP size); resumable (a re-run skips the day
    files already stored, and what it redoes is idempotent); files are queued for the file worker like live
    file_share events. Prints a JSON report: counts per channel and what was skipped, with reasons.

    The workspace is the team_id users.json names (the most common one in an org export); --team, when given,
    must be a Slack workspace id (else exit 2) and one of the workspaces users.json names: an export whose
    users.json names other workspaces is refused with exit 4 before anything is written (an export whose
    users.json names none is imported under --team). --as-copy files it under --team all the same.

    Exit codes: 0 imported (some items may be skipped: see the report), 1 nothing could be imported (not a
    ZIP, over the limits, no workspace), 2 usage error, 3 Cassandra unreachable, 4 --team is not the export's
    workspace.
    """
    from api.slack.zip_import import BadArchive, Limits, WrongWorkspace
    from api.slack.zip_import import import_export as run_import

    limits = Limits(max_total_bytes=max_bytes, max_entries=max_entries)
    at = _epoch(observed_at, "--observed-at")
    db = None if dry_run else database(keyspace)
    with cassandra_errors(), progress_bars(progress) as bar:
        bars: dict[str, Any] = {}

        def on_day_files(total: int) -> None:
            bars["files"] = bar("day files", total)
            bars["messages"] = bar("messages", None)

        def on_progress(_channel: str, n: int) -> None:
            bars["files"](1)
            bars["messages"](n)

        try:
            report = run_import(db, zip_path, team_id=team_id, include_private=include_private,
                                dry_run=dry_run, observed_at=at, limits=limits, progress=on_progress,
                                on_day_files=on_day_files, strict_team=not as_copy)
        except BadArchive as exc:
            fail(f"{zip_path}: {exc}", Exit.FAILED)
        except WrongWorkspace as exc:
            fail(f"{zip_path}: {exc}", Exit.NOT_FOUND)
    emit(report.to_json())
    if not report.imported_anything:
        fail("nothing could be imported (see the report's skipped reasons)", Exit.FAILED)


@slack.command("export", context_settings=CONTEXT, short_help="Export a workspace's archive as a Slack export ZIP.")
@click.option("--team", "team_id", required=True, callback=_team_id, help="Workspace id.")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False, writable=True),
              help="The ZIP file to write.")
@click.option("--from", "since", default=None, help="First day (YYYY-MM-DD, UTC) or Slack ts (inclusive).")
@click.option("--to", "until", default=None, help="End day (YYYY-MM-DD, UTC) or Slack ts (exclusive).")
@click.option("--channels", default=None, callback=_channel_refs,
              help="Comma-separated channel ids or names (default: every channel).")
@click.option("--include-deleted", is_flag=True, help="Also deleted messages (marked \"deleted\": true) and deleted "
                                                      "channels.")
@click.option("--tz", default=None, callback=lambda _c, _p, v: _zone(v),
              help="IANA zone the day files are dated in [default: the workspace's: its primary owner's zone, "
                   "else most people's, else UTC], as Slack's own export dates them.")
@keyspace_option
@progress_option
def export(team_id: str, out_path: str, since: str | None, until: str | None, channels: list[str] | None,
           include_deleted: bool, tz: str | None, keyspace: str | None, progress: bool) -> None:
    """Write the workspace's archive in Slack's export layout (users.json, channels.json, groups.json, one folder
    of YYYY-MM-DD.json day files per channel), streaming one day file at a time. Edited messages carry their
    current text; deleted ones are left out unless --include-deleted.

    --team must be a Slack workspace id and each --channels value a channel id or name (else exit 2). A workspace
    Chronicle never archived, or a --channels value naming none of its channels, is exit 4 with nothing written.
    The ZIP is written beside --out as <out>.partial and renamed when complete: a failed export leaves no file
    (and an existing --out as it was).

    Exit codes: 0 written, 1 failed, 2 usage error, 3 Cassandra unreachable, 4 unknown workspace or channel.
    """
    from api.slack.zip_export import NotFound
    from api.slack.zip_export import export as run_export

    lo, hi = _epoch(since, "--from"), _epoch(until, "--to")
    db = database(keyspace)
    audited(db, "chronicle slack export")
    with cassandra_errors(), progress_bars(progress) as bar:
        bars: dict[str, Any] = {"messages": bar("messages", None)}

        def on_channels(total: int) -> None:
            bars["channels"] = bar("channels", total)

        def on_progress(_folder: str, n: int) -> None:
            bars["messages"](n)

        with fail_on(NotFound, code=Exit.NOT_FOUND):
            report = run_export(db, team_id, out_path, since=lo, until=hi, channel_filter=channels,
                                include_deleted=include_deleted, progress=on_progress, on_channels=on_channels,
                                tz=tz)
    emit(report.to_json())


@slack.command("report", context_settings=CONTEXT, short_help="Generate, store, print and post an activity report.")
@click.option("--team", "team_id", required=True, callback=_team_id, help="Workspace id.")
@click.option("--start", default=None, help="First day (YYYY-MM-DD, UTC) [default: the latest Sunday-start week "
                                            "that has ended].")
@click.option("--days", type=click.IntRange(1, 31), default=7, show_default=True, help="Length of the period.")
@click.option("--include-private", is_flag=True, help="Count private channels too.")
@click.option("--stored", is_flag=True, help="Print the stored report; do not generate (exit 4 when none).")
@click.option("--format", "output_format", type=click.Choice(["json", "html", "blocks"]), default="json",
              show_default=True, help="What to print: the document, the HTML page, or the Slack blocks.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the output to this file instead of stdout.")
@click.option("--post", is_flag=True, help="Post it to Slack with the workspace's bot token (chat.postMessage).")
@click.option("--channel", default=None, help="Channel of the workspace post [env CHRONICLE_SLACK_REPORT_CHANNEL].")
@click.option("--per-channel", is_flag=True, help="With --post: each channel's report to #<channel>-stats.")
@click.option("--dm-users", default=None, help="With --post: comma-separated user ids that opted in to a DM "
                                               "[env CHRONICLE_SLACK_REPORT_DM_USERS].")
@click.option("--anonymise", is_flag=True, help="Replace users and channels with stable fakes (output and post).")
@keyspace_option
def report(team_id: str, start: str | None, days: int, include_private: bool, stored: bool, output_format: str,
           out_path: str | None, post: bool, channel: str | None, per_channel: bool, dm_users: str | None,
           anonymise: bool, keyspace: str | None) -> None:
    """Compute the activity report of a period (default: last week), compared with the period before, store it
    (replacing a stored one atomically) and print it; optionally post it to Slack. Which messages count and
    every figure: docs/slack-reports.md. --team must be a Slack workspace id (else exit 2); a workspace Chronicle
    never archived is exit 4, with nothing stored, printed or posted.

    Exit codes: 0 done, 1 failed (Slack refused the post), 2 usage error, 3 Cassandra unreachable,
    4 unknown workspace, or --stored and no stored report.
    """
    import datetime as dt
    import json

    from api.slack.reports import blocks, render, service
    from api.slack.reports.anonymise import anonymise as anonymised_copy
    from api.slack.reports.period import BadPeriod, Period, last_full_week

    with fail_on(ValueError, BadPeriod, code=Exit.USAGE, prefix="bad --start: "):
        period = Period(dt.date.fromisoformat(start), days) if start else \
            Period(last_full_week(dt.datetime.now(dt.UTC).date()).start, days)
    db = database(keyspace)
    audited(db, "chronicle slack report")
    with cassandra_errors():
        if stored:
            document = service.get(db, team_id, period.report_id)
            if document is None:
                fail(f"no stored report {period.report_id} for workspace {team_id}", Exit.NOT_FOUND)
        else:
            with fail_on(service.UnknownWorkspace, code=Exit.NOT_FOUND):
                document = service.generate(db, team_id, period, include_private=include_private)
    shown = anonymised_copy(document) if anonymise else document
    if output_format == "html":
        text = render.html(shown)
    elif output_format == "blocks":
        text = json.dumps([{"blocks": part} for part in blocks.split(blocks.workspace_blocks(shown))], indent=1)
    else:
        text = json.dumps(shown, ensure_ascii=False)
    if out_path:
        with open(out_path, "w", encoding="utf-8") as out:
            out.write(text)
    else:
        click.echo(text)
    if post:
        users = tuple(u.strip() for u in dm_users.split(",") if u.strip()) if dm_users is not None else None
        with fail_on(blocks.PostError, code=Exit.FAILED):
            delivery = service.post(document, db.settings.slack, channel=channel, per_channel=per_channel,
                                    dm_users=users, anonymised=anonymise, db=db)
        click.echo(json.dumps({"posted": delivery.posted, "skipped": delivery.skipped}), err=True)


@slack.command("report-worker", context_settings=CONTEXT,
               short_help="Run queued report generations (POST /slack/teams/{team}/reports).")
@click.option("--once", is_flag=True, help="Run the jobs due now, then exit.")
@click.option("--interval", default=2.0, show_default=True, help="Seconds to sleep when nothing is due.")
@keyspace_option
@click.option("--max-passes", type=int, default=0, help="Stop after this many passes (0 = no limit).")
def report_worker(once: bool, interval: float, keyspace: str | None, max_passes: int) -> None:
    """Run the report generations that POST /slack/teams/{team}/reports queued (queue `slack_reports`, one job
    at a time: a generation holds a period's figures in memory), storing each report and posting it when asked;
    the job's state is at GET /slack/teams/{team}/reports/jobs/{job_id}. Safe to run several at once (each holds
    a share of the queue); on SIGTERM the current job is finished and the queue handed back. Prints a JSON
    summary when it stops.

    Exit codes: 0 done (--once) or stopped by a signal, 1 some jobs failed for good, 2 bad configuration,
    3 Cassandra unreachable.
    """
    from api.slack.reports import service
    from api.slack.reports.jobs import ReportWorker, Stats

    db = database(keyspace)
    total = Stats()
    with worker_session(db, "report") as stopping:
        worker = ReportWorker(db, service.run_job)
        # Announced once a signal stops it cleanly (a supervisor may send SIGTERM as soon as it sees this).
        say(f"slack report worker {worker.owner}: keyspace={db.keyspace}")
        worker.run(interval=interval, stop=stopping, on_pass=pass_reporter(total, done_retried_failed),
                   until_idle=once, max_passes=max(0, max_passes))
    emit(total.as_dict())
    if total.failed:
        sys.exit(Exit.FAILED)


@slack.command("analytics-rebuild", context_settings=CONTEXT,
               short_help="Compute per-message analytics of messages archived before they existed.")
@_per_channel_options(dry_run="Read and count what would be written; write nothing.")
def analytics_rebuild(team_id: str, channels: list[str] | None, dry_run: bool, keyspace: str | None,
                      progress: bool) -> None:
    """Word counts, mentions and thread replies for messages stored before schema 0060 (docs/slack-reports.md),
    from the stored text, at the text's own write time: a newer edit always wins, and a re-run (or a run killed
    and started again) writes the same values again, so it resumes by simply running again. --team and each
    --channels value must be Slack ids (else exit 2), of a workspace and channels in the archive (else exit 4).

    Exit codes: 0 done, 2 usage error, 3 Cassandra unreachable, 4 unknown workspace or channel.
    """
    from api.slack import messages

    def rebuild(db: Any, channel_id: str, _progress: Callable[[int], None]) -> dict[str, int]:
        days = written = 0
        for day in messages.all_days(db, team_id, channel_id):
            writes = messages.analytics_writes(db, team_id, channel_id, day)
            days += 1
            if not dry_run:
                db.execute_many(writes)
            written += len(writes)
        return {"days": days, "writes": written}

    _per_channel(team_id, channels, keyspace, progress, dry_run, ("days", "writes"), rebuild)


@slack.command("index-search", context_settings=CONTEXT,
               short_help="Index messages archived before search existed.")
@_per_channel_options(dry_run="Read and count the messages and postings; write nothing.")
@click.option("--restart", is_flag=True, help="Index every day again instead of resuming where the last run stopped.")
@click.option("--filters-only", is_flag=True,
              help="Channels this command never indexed (archived at ingest since schema 0180, words and flags "
                   "indexed): write only their author and channel postings with the terms filters of schema 0310. "
                   "A channel it indexed follows its recorded version (with --restart: indexed again whole).")
def index_search(team_id: str, channels: list[str] | None, restart: bool, filters_only: bool, dry_run: bool,
                 keyspace: str | None, progress: bool) -> None:
    """Write the search postings (docs/slack-search.md) of every stored message of a workspace, channel by
    channel, newest day first. New messages are indexed at ingest; this is for archives stored before schema
    0090, and brings channels an earlier version indexed up to date (0180's flags, 0310's filters). An archive
    indexed at ingest since 0180 needs only the filters: --filters-only. Progress is recorded after each day
    (table slack_search_backfill), so a stopped run resumes at the day it reached; postings are insert-only, so
    indexing a day twice changes nothing. --team and each --channels value must be Slack ids (else exit 2), of
    a workspace and channels in the archive (else exit 4).

    Exit codes: 0 done, 2 usage error, 3 Cassandra unreachable, 4 unknown workspace or channel.
    """
    from api.slack import search

    def index(db: Any, channel_id: str, advance: Callable[[int], None]) -> dict[str, int]:
        found, written = search.index_channel(db, team_id, channel_id, dry_run=dry_run, restart=restart,
                                              filters_only=filters_only, progress=advance)
        return {"messages": found, "rows": written}

    _per_channel(team_id, channels, keyspace, progress, dry_run, ("messages", "rows"), index, item_bar="messages")


@slack.command("relayout", context_settings=CONTEXT,
               short_help="Move raw events out of message rows and split hot days (keyspaces before cql/0190).")
@_per_channel_options(dry_run="Read and count what would be copied and split; write nothing.")
def relayout(team_id: str, channels: list[str] | None, dry_run: bool, keyspace: str | None, progress: bool) -> None:
    """Bring a workspace's messages stored before schema 0190 to its layout (docs/slack-messages.md, "Partition
    sizes"): each message's raw event copied into slack_message_raw at its own write time, and each day whose
    partition holds more than CHRONICLE_SLACK_HOT_DAY_MESSAGES messages (and that ended a day ago) split into
    hour buckets, every cell copied at its own write time, the old partition then dropped. Each finished
    channel-day is marked, so a stopped run resumes at the days not yet done; a day done twice gets the same
    cells again. --team and each --channels value must be Slack ids (else exit 2), of a workspace and channels
    in the archive (else exit 4).

    Exit codes: 0 done, 2 usage error, 3 Cassandra unreachable, 4 unknown workspace or channel.
    """
    from api.slack import messages

    _per_channel(team_id, channels, keyspace, progress, dry_run, ("days", "rows", "raw", "copied", "split"),
                 lambda db, channel_id, _progress: messages.relayout_channel(db, team_id, channel_id, dry_run=dry_run))

