"""Socket Mode under forced reconnects (issue 31): events sent through the loopback Socket Mode stand-in
(tests/fakes/slack_socket_mode.py) to `chronicle slack socket-mode` (a child process, as in production:
slack-sdk's client, api/slack/socket_mode.py) while the connection is replaced `--reconnects` times, cycling
through Slack's three `disconnect` reasons and two dropped sockets (FIN without a close frame, reset); then the
archive itself is compared with the events sent.

    python -m bench.socket_mode [--events 10000] [--reconnects 20] [--rate 100] [--channels 20]
                                [--keyspace KS]

Reports: events lost (sent, not in the archive), rows not sent, rows listed twice, texts that differ (all read
back from the archive); deliveries, redeliveries and envelopes stored more than once (converged: same rows);
envelopes Slack would have given up on; ack latency (stand-in's send of the frame to its ack) p50/p99/max;
the gap each forced reconnect left without a connection. Targets: 0 lost or duplicated, ack p99 <= 50 ms.
The events are paced at `--rate` a second (Slack's own limit is 30,000 an hour per workspace, ~8/s); during a
gap the stand-in queues them, as Slack does. Runs in a scratch keyspace (dropped after) unless --keyspace names
a migrated one. Prints one JSON object and writes it under bench/results/.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from api.db import Database
from api.slack import messages
from api.slack.timeutil import ts_to_us
from bench.scale_common import ROOT, scratch_keyspace, scratch_settings, write_result
from tests.fakes.slack_socket_mode import FakeSlackSocketMode
from tests.fakes.slack_web_api import FakeSlackWebApi

APP_TOKEN = "xapp-1-A0BENCH-1-bench"
BASE = 1_767_225_600  # 2026-01-01
FORCED = ("disconnect:refresh_requested", "drop:eof", "disconnect:warning", "drop:reset",
          "disconnect:link_disabled")


def _payload(team: str, i: int, channels: int) -> dict[str, Any]:
    ts = f"{BASE + i * 13}.{i % 1_000_000:06d}"
    event = {"type": "message", "channel": f"CBENCH{i % channels:03d}", "channel_type": "channel",
             "user": f"U{i % 97:04d}", "text": f"socket mode bench message {i}", "ts": ts, "event_ts": ts}
    return {"type": "event_callback", "team_id": team, "api_app_id": "A0BENCH", "event_id": f"EvB{i:08d}",
            "event_time": BASE + i * 13, "event": event}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _archive_check(db: Database, team: str, sent: list[dict[str, Any]], channels: int) -> dict[str, int]:
    expected = {(p["event"]["channel"], ts_to_us(p["event"]["ts"])): p["event"]["text"] for p in sent}
    listed: list[tuple[str, int]] = []
    for c in range(channels):
        channel = f"CBENCH{c:03d}"
        listed += [(channel, row.ts) for row in messages.stored_between(db, team, channel, BASE * 1_000_000, 2**62)]
    found = set(listed)
    wrong_text = 0
    for channel, ts in found & set(expected):
        message = messages.find(db, team, [channel], ts, include_deleted=True)
        wrong_text += message is None or message.text != expected[(channel, ts)]
    return {"sent": len(expected), "archived": len(found), "lost": len(set(expected) - found),
            "not_sent": len(found - set(expected)), "listed_twice": len(listed) - len(found),
            "wrong_text": wrong_text}


def run(db: Database, *, events: int, reconnects: int, rate: float, channels: int) -> dict[str, Any]:
    team = f"TB{secrets.token_hex(5).upper()}"  # a workspace of its own: no earlier run's rows can hide a loss
    sent = [_payload(team, i, channels) for i in range(events)]
    every = events // (reconnects + 1)
    with FakeSlackWebApi() as web, FakeSlackSocketMode() as fake, tempfile.TemporaryFile("w+") as errors:
        web.tokens[APP_TOKEN] = {"connections:write"}
        web.socket_mode = fake
        env = {**os.environ, "CHRONICLE_KEYSPACE": db.keyspace, "CHRONICLE_SLACK_APP_TOKEN": APP_TOKEN,
               "CHRONICLE_SLACK_API_URL": web.base_url, "CHRONICLE_ENV": "development", "PYTHONPATH": str(ROOT)}
        child = subprocess.Popen([str(Path(sys.executable).with_name("chronicle")), "slack", "socket-mode"],
                                 env=env, stdout=subprocess.PIPE, stderr=errors, text=True)
        fake.wait_connected(timeout=60)
        started = time.monotonic()
        forced = 0
        for i, payload in enumerate(sent):
            if i and i % every == 0 and forced < reconnects:
                kind, _, how = FORCED[forced % len(FORCED)].partition(":")
                try:
                    fake.disconnect(how) if kind == "disconnect" else fake.drop(how)
                    forced += 1
                except AssertionError:  # no open connection at this instant (still reconnecting): next event
                    pass
            fake.send_event(payload)
            delay = started + (i + 1) / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        sending = time.monotonic() - started
        fake.wait_all_acked(timeout=600)
        elapsed = time.monotonic() - started
        child.send_signal(signal.SIGTERM)
        try:
            out, _ = child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()  # never leave it behind
            raise
        total = json.loads(out)
        errors.seek(0)
        error_lines = [line for line in errors if '"error"' in line or "Traceback" in line]
        with fake.lock:
            latencies = list(fake.ack_latencies)
            deliveries = list(fake.deliveries)
            acks = dict(fake.acks)
            hellos, forced_at = list(fake.hellos), list(fake.forced)
            acked_at = list(fake.acked_at)
            given_up = len(fake.given_up)
            connections = fake.connections
    # Where the slow acks are: each ack over 50 ms, by the time since the last forced reconnect before its send.
    slow_after: list[float] = []
    slow_by_kind: dict[str, int] = {}
    for sent_at, _acked_at in [(a, b) for a, b in acked_at if b - a > 0.05]:
        before = [(at, what) for at, what in forced_at if at <= sent_at]
        last = max(before) if before else (float("-inf"), "none")
        slow_after.append(sent_at - last[0])
        kind = last[1] if sent_at - last[0] <= 1.0 else "none"
        slow_by_kind[kind] = slow_by_kind.get(kind, 0) + 1
    gaps = []
    for at, _what in forced_at:
        later = [h for h in hellos if h > at]
        gaps.append(round(min(later) - at, 3) if later else None)
    return {
        "events": events, "rate_per_s": rate, "channels": channels, "forced_reconnects": len(forced_at),
        "forced_kinds": [what for _at, what in forced_at], "connections": connections,
        "client_reconnects": total["reconnects"], "command_exit": child.returncode,
        "command_error_lines": len(error_lines), "sending_s": round(sending, 1), "all_acked_s": round(elapsed, 1),
        "team": team, "archive": _archive_check(db, team, sent, channels),
        "deliveries": len(deliveries), "redeliveries": sum(1 for _e, retry, _c in deliveries if retry),
        "acked_more_than_once": sum(1 for n in acks.values() if n > 1), "given_up": given_up,
        "client": total,
        "stored_again_converged": total["stored"] - events,
        "ack_latency_ms": {"p50": round(_percentile(latencies, 0.5) * 1000, 2),
                           "p99": round(_percentile(latencies, 0.99) * 1000, 2),
                           "max": round(max(latencies) * 1000, 2) if latencies else 0.0,
                           "mean": round(statistics.fmean(latencies) * 1000, 2) if latencies else 0.0},
        "acks_over_50ms": {"count": len(slow_after),
                           "within_1s_of_a_forced_reconnect": sum(1 for t in slow_after if t <= 1.0),
                           "by_reconnect_kind": slow_by_kind},
        "reconnect_gap_s": {"each": gaps, "max": max((g for g in gaps if g is not None), default=None)},
        "ping_interval_s": db.settings.slack.socket_ping_interval,
        "concurrency": db.settings.slack.socket_concurrency,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--reconnects", type=int, default=20)
    parser.add_argument("--rate", type=float, default=100.0, help="events sent per second")
    parser.add_argument("--channels", type=int, default=20)
    parser.add_argument("--keyspace", default=None, help="a migrated keyspace to use (kept); default: a scratch one")
    args = parser.parse_args()
    options = {"events": args.events, "reconnects": args.reconnects, "rate": args.rate, "channels": args.channels}
    if args.keyspace:
        db = Database(dataclasses.replace(scratch_settings(args.keyspace), request_timeout=10.0))
        try:
            result = run(db, **options)
        finally:
            db.close()
    else:
        with scratch_keyspace("sockmode", request_timeout=10.0) as db:
            result = run(db, **options)
    result["targets_met"] = (result["archive"]["lost"] == 0 and result["archive"]["not_sent"] == 0
                             and result["archive"]["listed_twice"] == 0 and result["archive"]["wrong_text"] == 0
                             and result["given_up"] == 0 and result["ack_latency_ms"]["p99"] <= 50)
    write_result("socket_mode", result)


if __name__ == "__main__":
    main()
