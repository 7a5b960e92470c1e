"""`chronicle slack file-worker`: fetch Slack files (url_private) of archived messages into object storage."""

from __future__ import annotations

import dataclasses
import logging
import signal
import sys

import click

from api.cli.common import CONTEXT, EXIT_FAILED, EXIT_USAGE, cassandra_errors, fail_on
from api.config import Settings


@click.group("slack", context_settings=CONTEXT)
def slack() -> None:
    """The Slack archive's background work."""


@slack.command("file-worker", context_settings=CONTEXT, short_help="Fetch Slack files into object storage.")
@click.option("--once", is_flag=True, help="Process the files due now, then exit (retries not yet due stay queued).")
@click.option("--interval", default=2.0, show_default=True, help="Seconds to sleep when nothing is due.")
@click.option("--keyspace", default=None, help="Keyspace [env CHRONICLE_KEYSPACE, chronicle].")
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
    from api.db import Database
    from api.observability import configure_logging
    from api.slack.files import FileWorker, Stats
    from api.slack.settings import SlackSettings

    with fail_on(ValueError, code=EXIT_USAGE, prefix="bad configuration: "):
        settings = Settings.from_env()
        settings = dataclasses.replace(settings, keyspace=keyspace or settings.keyspace)
        slack_settings = SlackSettings.from_env()
    configure_logging(settings.log_level)
    logging.getLogger("cassandra").setLevel(logging.WARNING)
    if not slack_settings.bot_token and not slack_settings.bot_tokens:
        click.echo("warning: no CHRONICLE_SLACK_BOT_TOKEN(S): every download will fail", err=True)
    db = Database(settings)
    try:
        with cassandra_errors():
            db.session  # noqa: B018 - connect now, to fail fast with exit code 3
            worker = FileWorker(db, slack_settings)
            store = (f"s3://{slack_settings.s3_bucket}" if slack_settings.s3_bucket
                     else slack_settings.files_root)
            click.echo(f"slack file worker {worker.owner}: keyspace={settings.keyspace} store={store}", err=True)
            total = Stats()
            stopping = {"flag": False}

            def _stop(signum, _frame) -> None:
                stopping["flag"] = True
                click.echo(f"signal {signum}: finishing the current file, then stopping", err=True)

            signal.signal(signal.SIGTERM, _stop)
            signal.signal(signal.SIGINT, _stop)
            passes = {"n": 0}

            def on_pass(stats: Stats) -> None:
                passes["n"] += 1
                total.add(stats)
                if stats.total():
                    click.echo(f"pass {passes['n']}: stored={stats.stored} retried={stats.retried} "
                               f"failed={stats.failed} skipped={stats.skipped}", err=True)

            def should_stop() -> bool:
                return stopping["flag"] or (max_passes > 0 and passes["n"] >= max_passes)

            if once:
                try:
                    while not stopping["flag"]:
                        stats = worker.run_once()
                        on_pass(stats)
                        if stats.total() + stats.skipped == 0:
                            break
                finally:
                    worker.stop()
            else:
                worker.run(interval=interval, stop=should_stop, on_pass=on_pass)
    finally:
        db.close()
    click.echo(f"total: stored={total.stored} retried={total.retried} failed={total.failed} "
               f"skipped={total.skipped}", err=True)
    if fail_on_error and total.failed:
        sys.exit(EXIT_FAILED)
