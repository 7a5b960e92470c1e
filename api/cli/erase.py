"""`chronicle erase`: erase a person from a Slack workspace or an account from a follower network, with a ledger
row and a proof (docs/retention.md, "Erasure")."""

from __future__ import annotations

import click

from api import audit
from api.cli.common import CONTEXT, Exit, cassandra_errors, database, emit, fail, fail_on, progress_bars
from api.erasure import ledger
from api.erasure import network as network_erasure
from api.erasure import slack as slack_erasure
from api.errors import NotFound
from api.slack.codec import is_slack_id
from api.slack.files import store_from_settings

_CODES = "Exit codes: 0 erased (proof clean) or nothing to do, 1 failed or the proof found traces, 2 usage " \
         "error, 3 Cassandra unreachable, 4 not found (no request to check), 5 refused by a legal hold."


@click.command("erase", context_settings=CONTEXT, epilog=_CODES,
               short_help="Erase a person or a network account (--dry-run: count it).")
@click.option("--team", help="Slack workspace id (with --user).")
@click.option("--user", help="The person's Slack user id.")
@click.option("--network", help="Follower network name (with --account).")
@click.option("--account", type=click.IntRange(0), help="The network account's id.")
@click.option("--dry-run", is_flag=True, help="Count what would be erased or rewritten; change nothing.")
@click.option("--check", is_flag=True, help="Only run the proof again on the last request.")
@click.option("--parallel", type=click.IntRange(1, 64), default=slack_erasure.PARALLEL, show_default=True,
              help="Channel-days (Slack) or posts, readers and relations (network) handled side by side.")
@click.option("--processes", type=click.IntRange(1, 32), default=1, show_default=True,
              help="Slack: processes the channel-days are shared out over (each with --parallel threads).")
@click.option("--progress/--no-progress", default=True, help="Progress on stderr.")
def erase(team: str | None, user: str | None, network: str | None, account: int | None, dry_run: bool, check: bool,
          parallel: int, processes: int, progress: bool) -> None:
    """Erase a Slack person (--team, --user): their messages (a thread head others replied to becomes Slack's
    tombstone), versions, raw events, files, search postings, activity, profile; their reactions and mentions
    out of others' messages; channels and stored reports that name them. Or a network account (--network,
    --account): posts with every copy (postings, likes, readers' caches), likes and follows both ways, activity
    (others' show the former account), profile; snapshots show the former account. Resumable: run it again to
    finish a stopped request. A legal hold refuses it. Prints the ledger row (JSON) with its proof: every table
    read where a trace would be."""
    slack = team is not None or user is not None
    if slack == (network is not None or account is not None):
        fail("give either --team and --user, or --network and --account", Exit.USAGE)
    if slack and (not team or not user or not is_slack_id(team) or not is_slack_id(user)):
        fail("--team and --user must be Slack ids (e.g. T0123ABCD, U0123ABCD)", Exit.USAGE)
    if not slack and (not network or account is None):
        fail("--network and --account go together", Exit.USAGE)
    with cassandra_errors(), fail_on(NotFound, code=Exit.NOT_FOUND):
        db = database()
        files = store_from_settings(db.settings.slack) if slack else None
        if dry_run:
            emit(slack_erasure.dry_run(db, team, user, parallel=parallel) if slack
                 else network_erasure.dry_run(db, network, account))
            return
        if check:
            done = slack_erasure.prove(db, team, user, files=files) if slack \
                else network_erasure.prove(db, network, account)
        else:
            with progress_bars(progress) as bar:
                if slack:
                    done = slack_erasure.erase(db, team, user, requested_by=audit.cli_actor(), files=files,
                                               progress=bar("channel-days", None), parallel=parallel,
                                               processes=processes)
                else:
                    done = network_erasure.erase(db, network, account, requested_by=audit.cli_actor(),
                                                 progress=bar("posts, likes, relations, caches", None),
                                                 parallel=parallel)
        emit(done.to_json())
        if done.state == ledger.HELD:
            raise SystemExit(Exit.HELD)
        if done.state != ledger.DONE or not (done.proof or {}).get("clean"):
            raise SystemExit(Exit.FAILED)
