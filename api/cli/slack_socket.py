"""`chronicle slack socket-mode`: receive Slack events over Socket Mode (api/slack/socket_mode.py)."""

from __future__ import annotations

import click

from api.cli.common import CONTEXT, Exit, database, emit, fail, keyspace_option, say
from api.cli.workers import pass_reporter, worker_session


@click.command("socket-mode", context_settings=CONTEXT, short_help="Receive Slack events over Socket Mode.")
@click.option("--interval", default=0.1, show_default=True,
              help="Seconds between two checks of the connection (a dead one is replaced at the next check).")
@keyspace_option
@click.option("--max-passes", type=int, default=0, help="Stop after this many checks (0 = no limit).")
def socket_mode(interval: float, keyspace: str | None, max_passes: int) -> None:
    """Open a Socket Mode connection with the app-level token (CHRONICLE_SLACK_APP_TOKEN, xapp-..., scope
    connections:write; apps.connections.open at CHRONICLE_SLACK_API_URL) and store every event it delivers
    exactly as the Events endpoint does, acknowledging each envelope once its rows are written. Reconnects when
    Slack asks (disconnect) and when the socket drops; unacknowledged envelopes are delivered again by Slack and
    converge. `bash bootstrap.sh serve` starts it when CHRONICLE_SLACK_SOCKET_MODE is on. On SIGTERM it stops
    taking envelopes, lets those being stored finish and be acknowledged, then closes. Prints a JSON summary.

    Exit codes: 0 stopped by a signal (or --max-passes), 2 no app token / bad configuration, 3 Cassandra
    unreachable, 5 Slack refused the app token (invalid_auth, not_allowed_token_type, ...).
    """
    from api.slack.socket_mode import SocketModeError, SocketModeIngest, Stats
    from api.worker_loop import run_worker
    db = database(keyspace)
    if not db.settings.slack.app_token:
        fail("no app-level token: set CHRONICLE_SLACK_APP_TOKEN=xapp-... (docs/slack.md, Socket Mode)", Exit.USAGE)
    total = Stats()
    with worker_session(db, "envelope") as stopping:
        receiver = SocketModeIngest(db, db.settings)
        try:
            receiver.start()
        except SocketModeError as exc:
            fail(str(exc), Exit.BAD_TOKEN)
        on_pass = pass_reporter(total, lambda stats: " ".join(f"{k}={v}" for k, v in stats.as_dict().items() if v))
        # Announced once a signal stops it cleanly (a supervisor may send SIGTERM as soon as it sees this).
        say(f"slack socket mode: keyspace={db.keyspace} connected={receiver.is_connected()}")
        # Every pass is a check: the envelopes are stored on slack-sdk's threads, so the loop always sleeps.
        run_worker(receiver.check, idle=lambda _stats: True, clock=db.clock, interval=interval, stop=stopping,
                   on_pass=on_pass, max_passes=max(0, max_passes),
                   finish=lambda: (receiver.close(), on_pass(receiver.check())))
    emit(total.as_dict())
