"""`chronicle erase`: erase a person from a Slack workspace, with a ledger row and a proof (docs/retention.md,
"Erasure")."""

from __future__ import annotations

import click

from api import audit
from api.cli.common import CONTEXT, Exit, cassandra_errors, database, emit, fail, fail_on, progress_bars
from api.erasure import ledger
from api.erasure import slack as slack_erasure
from api.errors import NotFound
from api.slack.codec import is_slack_id
from api.slack.files import store_from_settings

_CODES = "Exit codes: 0 erased (proof clean) or nothing to do, 1 failed or the proof found traces, 2 usage " \
         "error, 3 Cassandra unreachable, 4 not found (no request to check), 5 refused by a legal hold."


@click.command("erase", context_settings=CONTEXT, epilog=_CODES,
               short_help="Erase a person from a workspace (--dry-run: count it).")
@click.option("--team", required=True, help="Slack workspace id.")
@click.option("--user", required=True, help="The person's Slack user id.")
@click.option("--dry-run", is_flag=True, help="Count what would be erased or rewritten; change nothing.")
@click.option("--check", is_flag=True, help="Only run the proof again on the person's last request.")
@click.option("--parallel", type=click.IntRange(1, 64), default=slack_erasure.PARALLEL, show_default=True,
              help="Channel-days erased side by side.")
@click.option("--progress/--no-progress", default=True, help="Progress on stderr.")
def erase(team: str, user: str, dry_run: bool, check: bool, parallel: int, progress: bool) -> None:
    """Erase a person: their messages (a thread head others replied to becomes Slack's tombstone), versions, raw
    events, files, search postings, activity, profile; their reactions and mentions out of others' messages;
    channels and stored reports that name them. Resumable: run it again to finish a stopped request. A legal
    hold on the workspace or the person refuses it. Prints the ledger row (JSON) with its proof: every table
    read where a trace would be."""
    if not is_slack_id(team) or not is_slack_id(user):
        fail("--team and --user must be Slack ids (e.g. T0123ABCD, U0123ABCD)", Exit.USAGE)
    with cassandra_errors(), fail_on(NotFound, code=Exit.NOT_FOUND):
        db = database()
        files = store_from_settings(db.settings.slack)
        if dry_run:
            emit(slack_erasure.dry_run(db, team, user, parallel=parallel))
            return
        if check:
            done = slack_erasure.prove(db, team, user, files=files)
        else:
            with progress_bars(progress) as bar:
                advance = bar("channel-days", None)
                done = slack_erasure.erase(db, team, user, requested_by=audit.cli_actor(), files=files,
                                           progress=advance, parallel=parallel)
        emit(done.to_json())
        if done.state == ledger.HELD:
            raise SystemExit(5)
        if done.state != ledger.DONE or not (done.proof or {}).get("clean"):
            raise SystemExit(Exit.FAILED)
