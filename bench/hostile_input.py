"""Hostile input at scale: the generators of tests/test_hostile_input.py with a bigger budget.

    .venv/bin/python -m bench.hostile_input [--requests 20000] [--rounds 2] [--keep]

A scratch keyspace on the local node (started if needed) gets the sample workspace, the sample network and a
tagging project; the app runs in-process (Flask's test client, no HTTP), with the test suite's tokens and
secrets. First every fixed hostile case goes to every route of the URL map (`--rounds` times, the credentials
rotating differently each round), then hypothesis draws requests until `--requests` were sent in all. Every
answer must be below 500 and no log record may be at ERROR level; the result (requests, statuses, 5xx, ERROR
records, time) goes to bench/results/hostile_input-<time>.json. Exit status 1 when anything reached a 5xx.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.node.process import start_node
from bench.scale_common import local_node, scratch_keyspace, write_result
from tests.helpers import ADMIN_TOKEN, TEST_API_TOKENS
from tests.test_hostile_input import ErrorLog, Tally, hostile_request, send, sweep, world_for


def run(requests: int, rounds: int, keep: bool) -> int:
    start_node(local_node())
    overrides = dict(cursor_secret=b"bench-cursor-secret", slack_signing_secret="bench-signing-secret",
                     slack_signing_secrets={}, api_tokens=json.dumps(TEST_API_TOKENS), admin_token=ADMIN_TOKEN,
                     request_timeout=10.0, log_level="WARNING")
    errors = ErrorLog()
    logging.getLogger().addHandler(errors)
    tally = Tally()
    started = time.perf_counter()
    with scratch_keyspace("hostile", keep=keep, **overrides) as db:
        from api.app import create_app

        app = create_app(db.settings, database=db)
        app.config["TESTING"] = True
        world = world_for(app, db, db.settings)
        client = app.test_client(use_cookies=False)
        swept = 0
        for round_no in range(rounds):
            world.credentials = world.credentials[round_no:] + world.credentials[:round_no]  # another pairing
            for case in sweep(world):
                send(client, case, tally, errors)
                swept += 1
        left = max(0, requests - tally.sent)

        @settings(max_examples=max(1, left), deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(data=st.data())
        def drawn(data: st.DataObject) -> None:
            send(client, data.draw(hostile_request(world)), tally, errors)

        if left:
            drawn()
    elapsed = time.perf_counter() - started
    result = {
        "requests": tally.sent, "swept": swept, "drawn": tally.sent - swept, "rounds": rounds,
        "routes": len(world.targets), "statuses": {str(k): v for k, v in sorted(tally.statuses.items())},
        "server_errors": len(tally.server_errors), "error_log_records": len(tally.error_logs),
        "server_error_examples": tally.server_errors[:20], "error_log_examples": tally.error_logs[:20],
        "seconds": round(elapsed, 1), "requests_per_second": round(tally.sent / elapsed, 1),
    }
    write_result("hostile_input", result)
    return 1 if tally.server_errors or tally.error_logs else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000, help="requests in all (sweep + drawn)")
    parser.add_argument("--rounds", type=int, default=2, help="times the fixed cases are swept")
    parser.add_argument("--keep", action="store_true", help="keep the scratch keyspace")
    args = parser.parse_args(argv)
    # The run's own secrets (below), not the environment's: the app starts in development mode like the suite's.
    os.environ.setdefault("CHRONICLE_ENV", "development")
    return run(args.requests, args.rounds, args.keep)


if __name__ == "__main__":
    sys.exit(main())
