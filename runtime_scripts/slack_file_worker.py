#!/usr/bin/env python3
"""Fetch Slack files (url_private) of archived messages into object storage.

Reads the slack_files_pending shards (never the messages table), claims each file with an LWT lease, downloads
it with the workspace's bot token, stores it at slack/{team}/{channel}/{ts}/{file_id} (local directory, or S3
when CHRONICLE_FILES_S3_BUCKET is set) and records the URI on the message. Safe to run several at once.

Exit codes: 0 done (--once) or stopped by a signal, 1 some files failed permanently in --once mode
(with --fail-on-error), 2 bad configuration, 3 Cassandra unreachable.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import click  # noqa: E402
from cassandra.cluster import NoHostAvailable  # noqa: E402

from api.config import Settings  # noqa: E402
from api.db import Database  # noqa: E402
from api.observability import configure_logging  # noqa: E402
from api.slack.files import FileWorker, Stats  # noqa: E402
from api.slack.settings import SlackSettings  # noqa: E402


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--once", is_flag=True, help="One pass over the pending files, then exit.")
@click.option("--interval", default=2.0, show_default=True, help="Seconds to sleep when nothing is due.")
@click.option("--keyspace", envvar="CHRONICLE_KEYSPACE", default="chronicle", show_default=True)
@click.option("--fail-on-error", is_flag=True, help="With --once: exit 1 if any file failed permanently.")
@click.option("--max-passes", type=int, default=0, help="Stop after this many passes (0 = no limit).")
def main(once: bool, interval: float, keyspace: str, fail_on_error: bool, max_passes: int) -> None:
    """Run the Slack file worker (see docs/slack.md for the CHRONICLE_FILES_* / CHRONICLE_SLACK_* settings)."""
    settings = dataclasses.replace(Settings.from_env(), keyspace=keyspace)
    configure_logging(settings.log_level)
    try:
        slack = SlackSettings.from_env()
    except ValueError as exc:
        click.echo(f"error: bad configuration: {exc}", err=True)
        sys.exit(2)
    if not slack.bot_token and not slack.bot_tokens:
        click.echo("warning: no CHRONICLE_SLACK_BOT_TOKEN(S): every download will fail", err=True)
    db = Database(settings)
    try:
        db.session  # noqa: B018 - connect now, to fail fast with exit code 3
    except NoHostAvailable as exc:
        click.echo(f"error: Cassandra unreachable: {exc}", err=True)
        sys.exit(3)
    worker = FileWorker(db, slack)
    store = f"s3://{slack.s3_bucket}" if slack.s3_bucket else slack.files_root
    click.echo(f"slack file worker {worker.owner}: keyspace={keyspace} store={store}", err=True)
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
        for field in ("stored", "retried", "failed", "skipped"):
            setattr(total, field, getattr(total, field) + getattr(stats, field))
        if stats.total():
            click.echo(f"pass {passes['n']}: stored={stats.stored} retried={stats.retried} "
                       f"failed={stats.failed} skipped={stats.skipped}", err=True)

    def should_stop() -> bool:
        return stopping["flag"] or (max_passes > 0 and passes["n"] >= max_passes)

    try:
        if once:
            on_pass(worker.run_once())
        else:
            worker.run(interval=interval, stop=should_stop, on_pass=on_pass)
    except NoHostAvailable as exc:
        click.echo(f"error: Cassandra unreachable: {exc}", err=True)
        sys.exit(3)
    finally:
        db.close()
    click.echo(f"total: stored={total.stored} retried={total.retried} failed={total.failed} "
               f"skipped={total.skipped}", err=True)
    if fail_on_error and total.failed:
        sys.exit(1)


if __name__ == "__main__":
    logging.getLogger("cassandra").setLevel(logging.WARNING)
    main()
