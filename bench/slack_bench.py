#!/usr/bin/env python3
"""Benchmark the Slack archive served by gunicorn on the local Cassandra node.

1. migrates the keyspace (default chronicle_bench_slack) and starts gunicorn on 127.0.0.1:<port>;
2. ingest: load processes (separate from gunicorn) send signed Events API requests at a fixed offered rate
   (default 500/s, the target) for a bounded time: new messages, edits, reactions over 40 channels; reports achieved
   events/s and p50/p99 latency, then a closed-loop run at concurrency 16 for the maximum rate;
3. timeline: pages of 50 (first pages and cursor pages) at concurrency 16 for a bounded time; p50/p99.

Latency is measured by the client around each HTTP request (so it is an upper bound of handler latency);
the server-side median/p99 from gunicorn's Prometheus histogram is not used because its buckets are coarse.

    .venv/bin/python bench/slack_bench.py --seconds 20 --workers 3 --threads 4
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import multiprocessing as mp
import os
import random
import secrets
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click
import requests

ROOT = Path(__file__).resolve().parents[1]
SECRET = "bench-signing-secret"
TOKEN = "bench-token"
TEAM = "TBENCH"
CHANNELS = [f"CBENCH{i:03d}" for i in range(40)]


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class Client:
    """A keep-alive HTTP/1.1 connection per thread (http.client: far less client CPU than requests, which
    matters when the load generator shares 2 cores with gunicorn and Cassandra)."""

    def __init__(self, base: str) -> None:
        host, _, port = base.removeprefix("http://").partition(":")
        self.host, self.port = host, int(port)
        self.local = threading.local()

    def server_ms(self) -> float:
        return getattr(self.local, "server_ms", float("nan"))

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        conn = getattr(self.local, "conn", None)
        for attempt in range(2):
            if conn is None:
                conn = self.local.conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
            try:
                conn.request(method, path, body=body, headers=headers or {})
                resp = conn.getresponse()
                body = resp.read()
                timing = resp.getheader("Server-Timing") or ""
                self.local.server_ms = float(timing.split("dur=")[1]) if "dur=" in timing else float("nan")
                return resp.status, body
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = self.local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


def signed(body: bytes) -> dict[str, str]:
    ts = str(int(time.time()))
    sig = hmac.new(SECRET.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={sig}", "Content-Type": "application/json"}


class EventSource:
    """Realistic mix: 80% new messages (some thread replies), 10% edits, 10% reactions."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.n = 0
        self.recent: list[tuple[str, str]] = []

    def next(self) -> bytes:
        self.n += 1
        now = time.time()
        ts = f"{int(now)}.{(self.seed * 100_000 + self.n) % 1_000_000:06d}"
        channel = self.rng.choice(CHANNELS)
        roll = self.rng.random()
        if roll < 0.8 or not self.recent:
            event = {"type": "message", "channel": channel, "channel_type": "channel", "user": "U1",
                     "text": f"benchmark message {self.n} " + "lorem ipsum " * self.rng.randint(1, 20),
                     "ts": ts, "event_ts": ts}
            if self.recent and self.rng.random() < 0.2:
                event["thread_ts"] = self.rng.choice(self.recent)[1]
                event["channel"] = channel = self.rng.choice(self.recent)[0]
            self.recent = (self.recent + [(channel, ts)])[-200:]
        elif roll < 0.9:
            ch, orig = self.rng.choice(self.recent)
            event = {"type": "message", "subtype": "message_changed", "channel": ch, "channel_type": "channel",
                     "ts": ts, "event_ts": ts,
                     "message": {"type": "message", "user": "U1", "text": f"edited {self.n}", "ts": orig,
                                 "edited": {"user": "U1", "ts": ts}},
                     "previous_message": {"type": "message", "user": "U1", "text": "before", "ts": orig}}
        else:
            ch, orig = self.rng.choice(self.recent)
            event = {"type": "reaction_added", "user": f"U{self.rng.randint(1, 50)}", "reaction": "thumbsup",
                     "item": {"type": "message", "channel": ch, "ts": orig}, "event_ts": ts}
        env = {"type": "event_callback", "team_id": TEAM, "api_app_id": "ABENCH",
               "event_id": f"Ev{self.seed}x{self.n}", "event_time": int(now), "event": event}
        return json.dumps(env).encode()


def _ingest_worker(args: tuple) -> dict:
    """One load process: `rate` events/s (open loop, paced) or closed loop when rate == 0."""
    base, seconds, rate, threads, seed = args
    source = EventSource(seed)
    client = Client(base)
    lock = threading.Lock()
    latencies: list[float] = []
    server: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds

    def send(body: bytes) -> None:
        nonlocal errors
        headers = signed(body)
        started = time.perf_counter()
        try:
            status, _ = client.request("POST", "/slack/events", body, headers)
            ok = status == 200
            server.append(client.server_ms() / 1000)
        except (OSError, http.client.HTTPException):
            ok = False
        latencies.append(time.perf_counter() - started)
        if not ok:
            errors += 1

    with ThreadPoolExecutor(threads) as pool:
        if rate:
            interval, next_at, futures = 1.0 / rate, time.monotonic(), []
            while next_at < deadline:
                delay = next_at - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                with lock:
                    body = source.next()
                futures.append(pool.submit(send, body))
                next_at += interval
            for f in futures:
                f.result()
        else:
            def loop() -> None:
                while time.monotonic() < deadline:
                    with lock:
                        body = source.next()
                    send(body)
            for f in [pool.submit(loop) for _ in range(threads)]:
                f.result()
    return {"latencies": latencies, "server": server, "errors": errors}


def _timeline_worker(args: tuple) -> dict:
    base, seconds, threads, seed = args
    rng = random.Random(seed)
    client = Client(base)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    latencies: list[float] = []
    server: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds

    def loop() -> None:
        nonlocal errors
        cursor = None
        while time.monotonic() < deadline:
            channel = rng.choice(CHANNELS)
            query = "limit=50"
            if cursor and rng.random() < 0.5:
                next_cursor, channel = cursor
                query += f"&cursor={next_cursor}"
            started = time.perf_counter()
            try:
                status, raw = client.request("GET", f"/slack/teams/{TEAM}/channels/{channel}/messages?{query}",
                                             headers=headers)
                ok = status == 200
                body = json.loads(raw) if ok else {}
                server.append(client.server_ms() / 1000)
            except (OSError, http.client.HTTPException):
                ok, body = False, {}
            latencies.append(time.perf_counter() - started)
            if not ok or len(body.get("messages", [])) == 0:
                errors += 0 if ok else 1
            cursor = (body.get("next_cursor"), channel) if body.get("next_cursor") else None

    with ThreadPoolExecutor(threads) as pool:
        for f in [pool.submit(loop) for _ in range(threads)]:
            f.result()
    return {"latencies": latencies, "server": server, "errors": errors}


def run_phase(worker, arglist: list[tuple]) -> tuple[dict, int, float]:
    started = time.monotonic()
    with mp.get_context("spawn").Pool(len(arglist)) as pool:
        results = pool.map(worker, arglist)
    elapsed = time.monotonic() - started
    lat = {"client": [x for r in results for x in r["latencies"]],
           "server": [x for r in results for x in r["server"] if x == x]}
    return lat, sum(r["errors"] for r in results), elapsed


def report(name: str, lat: dict, errors: int, seconds: float) -> dict:
    """One JSON line: rate, handler (server-side) p50/p99, and client-measured p50/p99."""
    client, server = lat["client"], lat["server"]
    out = {"phase": name, "requests": len(client), "errors": errors,
           "per_second": round(len(client) / seconds, 1),
           "handler_p50_ms": round(percentile(server, 50) * 1000, 2),
           "handler_p99_ms": round(percentile(server, 99) * 1000, 2),
           "client_p50_ms": round(percentile(client, 50) * 1000, 2),
           "client_p99_ms": round(percentile(client, 99) * 1000, 2)}
    click.echo(json.dumps(out))
    return out


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--seconds", default=20, show_default=True, help="Duration of each phase.")
@click.option("--rate", default=500, show_default=True, help="Offered ingest rate (events/s) for the paced phase.")
@click.option("--port", default=8099, show_default=True)
@click.option("--keyspace", default="chronicle_bench_slack", show_default=True,
              help="dropped and re-created at the start of each run")
@click.option("--workers", default=int(os.environ.get("CHRONICLE_WORKERS", "3")), show_default=True,
              help="gunicorn workers")
@click.option("--threads", default=4, show_default=True,
              help="gunicorn threads per worker (4 measured better tails than gunicorn.conf.py's 8 here)")
@click.option("--load-procs", default=2, show_default=True, help="load generator processes")
def main(seconds: int, rate: int, port: int, keyspace: str, workers: int, threads: int, load_procs: int) -> None:
    """Run the ingest and timeline benchmarks against gunicorn; prints one JSON line per phase."""
    env = {**os.environ, "CHRONICLE_KEYSPACE": keyspace, "CHRONICLE_BIND": f"127.0.0.1:{port}",
           "CHRONICLE_SLACK_SIGNING_SECRET": SECRET, "CHRONICLE_SLACK_KEEP_RAW": "false",
           "CHRONICLE_API_TOKENS": json.dumps({TOKEN: {"workspaces": [TEAM], "private": True}}),
           "CHRONICLE_LOG_LEVEL": "WARNING", "CHRONICLE_ACCESS_LOG": "/dev/null", "CHRONICLE_WORKERS": str(workers),
           "CHRONICLE_THREADS": str(threads),
           # The service refuses to start outside development without secrets of its own (docs/deployment.md).
           "CHRONICLE_CURSOR_SECRET": secrets.token_hex(32), "CHRONICLE_ADMIN_TOKEN": secrets.token_hex(32)}
    # A fresh keyspace of its own each run: comparable figures, and no stale schema from an earlier run.
    drop = f"DROP KEYSPACE IF EXISTS {keyspace}"
    subprocess.run([sys.executable, "-c", "from api.config import Settings; from api.db import Database;"
                    f"Database(Settings.from_env(), keyspace='').execute_raw({drop!r}, timeout=120)"],
                   env=env, check=True, cwd=ROOT)
    subprocess.run([sys.executable, str(ROOT / "runtime_scripts/migrate.py")], env=env, check=True, cwd=ROOT)
    server = subprocess.Popen([str(ROOT / ".venv/bin/gunicorn"), "-c", "gunicorn.conf.py", "api.wsgi:app"],
                              env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if requests.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.2)
        else:
            raise click.ClickException("gunicorn did not become ready")
        # Warm up every worker's Cassandra session and prepared statements, and the JVM.
        run_phase(_ingest_worker, [(base, 8, 0, 8, 900 + i) for i in range(load_procs)])
        results = []
        lat, err, el = run_phase(_ingest_worker, [(base, seconds, 0, 8, 100 + i) for i in range(load_procs)])
        results.append(report("ingest closed-loop c=16", lat, err, el))
        per_proc = rate / load_procs
        lat, err, el = run_phase(_ingest_worker, [(base, seconds, per_proc, 16, i) for i in range(load_procs)])
        results.append(report(f"ingest paced {rate}/s", lat, err, el))
        lat, err, el = run_phase(_timeline_worker, [(base, seconds, 8, 200 + i) for i in range(load_procs)])
        results.append(report("timeline limit=50 c=16", lat, err, el))
        # The same read below saturation, for context: 2 processes x 2 threads.
        lat, err, el = run_phase(_timeline_worker, [(base, seconds, 2, 300 + i) for i in range(load_procs)])
        results.append(report("timeline limit=50 c=4", lat, err, el))
        out = ROOT / "bench" / "results"
        out.mkdir(exist_ok=True)
        (out / "slack_bench.json").write_text(json.dumps(results, indent=2))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


if __name__ == "__main__":
    main()
