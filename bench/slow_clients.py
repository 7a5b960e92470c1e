"""Slow clients against the served API (issue 14, section 3): do connections that send their request a byte a second
stop other clients from being served within their normal latency?

    .venv/bin/python -m bench.slow_clients [--worker-class gthread,api.server_worker.ServerWorker]
        [--modes header,body,linger] [--slow 50] [--byte-interval 1.0] [--probe-clients 4] [--probe-interval 0.05]
        [--probe-seconds 10] [--probe-timeout 5] [--settle 3] [--workers 3] [--threads 8]
        [--head-timeout S] [--body-timeout S] [--via-nginx] [--overhead N]

For each worker class (`gthread`: gunicorn's own, as gunicorn.conf.py has it today; `api.server_worker.ServerWorker`:
the project's) and each mode, a fresh gunicorn (gunicorn.conf.py, `-k <class>`, `--no-control-socket`, passed in
GUNICORN_CMD_ARGS) serves the app on the local node's keyspace (CHRONICLE_KEYSPACE, `chronicle` by default, with
the sample data: `chronicle sample load`). Then:

1. before: `--probe-clients` normal clients, each sending a request every `--probe-interval` s for `--probe-seconds`
   on a new connection each (accept, parse, app, close: every stage a slow client could block), alternating
   GET /healthz (no database) and GET /networks/sample/accounts/<top account>/posts?limit=20 (a Cassandra read);
2. the crowd: `--slow` connections from a separate process (its own GIL), every one sending one byte every
   `--byte-interval` s, reconnecting as soon as the server closes one (an attacker keeps the pressure on):
   - `header`: a request head that never ends (request line, then `X-Slow-N: N` lines: the classic slowloris);
   - `body`: a complete head of POST /slack/events (Slack's public endpoint; current timestamp, a signature to
     check, Content-Length 65536), then the body a byte at a time;
   - `linger`: a whole GET /healthz with `Connection: close` at once; the answer is left unread and the socket
     open for 5-15 s (gunicorn's gthread worker lingers on a closing connection on its main loop, up to 2 s);
3. during: after `--settle` s, the same normal clients again while the crowd trickles;
4. after: the crowd gone, the normal clients alone again.

Verdict per mode and path: served within normal latency when no normal request failed (error, non-200, or over
`--probe-timeout`) and the p99 during <= 2 x the normal p99 + 20 ms, the normal p99 being the higher of before's
and after's (on this 2-core machine, shared with the node and other work, it moves from one phase to the next).
The crowd's outcome: answers by status (408 expected from the project's worker), connections closed without an
answer, and the time from connect to the answer or close. Per phase, the CPU share of the gunicorn workers (what
the crowd costs the server beside the normal clients) and the machine's 1-minute load average at its start.

`--via-nginx`: nginx (Debian's nginx-light; `apt-get install -y nginx-light`) in front, configured with the sample
configuration of docs/deployment.md (its placeholders replaced: upstream address, listen port, temp paths); normal
clients and the crowd both go through it.

`--overhead N`: no crowd; what the worker class costs a normal request: 8 clients (a separate process), each N
GET /healthz on one kept-alive connection, closed loop; requests/s and the workers' CPU per request.

Results: one JSON object in bench/results/slow_clients-<UTC time>.json (`slow_clients_overhead-...` for
`--overhead`), also printed.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import random
import re
import selectors
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from api.config import Settings
from api.db import Database
from api.migrations import schema_state
from bench.scale_common import ROOT, _percentile, free_port, served, write_result
from bench.tagging import _children, cpu_seconds

PROJECT_WORKER = "api.server_worker.ServerWorker"
MODES = ("header", "body", "linger")
LINGER_HOLD = 10.0
OVERHEAD_CLIENTS = 8
BODY_LENGTH = 65536
TOLERANCE_FACTOR, TOLERANCE_MS = 2.0, 20.0
DEPLOYMENT_DOC = ROOT / "docs" / "deployment.md"


def log(message: str) -> None:
    print(f"[slow_clients {time.strftime('%H:%M:%S')}] {message}", flush=True)


# ------------------------------------------------------------------------------------------------ the crowd

def _head_bytes(mode: str, port: int) -> tuple[bytes, Iterator[bytes]]:
    """(sent at once, then trickled a byte at a time)."""
    host = f"Host: 127.0.0.1:{port}\r\nUser-Agent: slow-client\r\n".encode()
    if mode == "header":
        def endless_head() -> Iterator[bytes]:
            yield b"GET /healthz HTTP/1.1\r\n" + host
            n = 0
            while True:
                n += 1
                yield f"X-Slow-{n}: {n}\r\n".encode()
        return b"", endless_head()
    if mode == "body":
        head = (b"POST /slack/events HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\n"
                + f"X-Slack-Request-Timestamp: {int(time.time())}\r\n".encode()
                + b"X-Slack-Signature: v0=" + b"0" * 64 + b"\r\n"
                + f"Content-Length: {BODY_LENGTH}\r\n\r\n".encode())
        return head, iter([b'{"type": "event_callback", "pad": "' + b"x" * BODY_LENGTH])
    if mode == "linger":
        return b"GET /healthz HTTP/1.1\r\n" + host + b"Connection: close\r\n\r\n", iter(())
    raise ValueError(mode)


class _Slow:
    def __init__(self, sock: socket.socket, opened: float, trickle: Iterator[bytes]) -> None:
        self.sock, self.opened = sock, opened
        self.trickle, self.piece = trickle, b""
        self.answer = b""
        self.eof_at: float | None = None
        self.polled = True
        self.hold = LINGER_HOLD * random.uniform(0.5, 1.5)  # spread: no burst of reconnections


def crowd(port: int, mode: str, count: int, byte_interval: float, stop: Any, results: Any) -> None:
    """`count` slow connections until `stop` is set; puts a summary on `results`. Runs in its own process."""
    sel = selectors.DefaultSelector()
    conns: set[_Slow] = set()
    statuses: Counter[str] = Counter()
    lifetimes: list[float] = []
    opened = connect_errors = bytes_sent = 0

    def open_one() -> None:
        nonlocal opened, connect_errors
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            first, trickle = _head_bytes(mode, port)
            if first:
                sock.sendall(first)
        except OSError:
            connect_errors += 1
            return
        sock.setblocking(False)
        conn = _Slow(sock, time.monotonic(), trickle)
        conns.add(conn)
        sel.register(sock, selectors.EVENT_READ, conn)
        opened += 1

    def finish(conn: _Slow) -> None:
        if conn.polled:
            sel.unregister(conn.sock)
        conn.sock.close()
        conns.discard(conn)
        match = re.match(rb"HTTP/1\.[01] (\d{3})", conn.answer)
        statuses[match.group(1).decode() if match else "closed without an answer"] += 1
        lifetimes.append((conn.eof_at or time.monotonic()) - conn.opened)

    for _ in range(count):
        open_one()
    next_tick = time.monotonic()
    while not stop.is_set():
        for key, _events in sel.select(timeout=max(0.0, next_tick - time.monotonic())):
            conn = key.data
            try:
                data = conn.sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data:
                conn.answer += data[: max(0, 64 - len(conn.answer))]
                continue
            conn.eof_at = conn.eof_at or time.monotonic()
            if mode != "linger":
                finish(conn)
            else:  # the server half-closed: keep our side open (LINGER_HOLD), stop polling
                sel.unregister(conn.sock)
                conn.polled = False
        now = time.monotonic()
        if now < next_tick:
            continue
        next_tick = now + byte_interval
        for conn in list(conns):
            if mode == "linger":
                if now - conn.opened >= conn.hold:
                    finish(conn)
                continue
            if not conn.piece:
                conn.piece = next(conn.trickle, b"")
            if conn.piece:
                try:
                    conn.sock.send(conn.piece[:1])
                    bytes_sent += 1
                    conn.piece = conn.piece[1:]
                except OSError:
                    conn.eof_at = conn.eof_at or now
                    finish(conn)
        for _ in range(count - len(conns)):  # the server closed some: open new ones
            open_one()
    still_open = len(conns)
    for conn in list(conns):
        conn.sock.close()
    ordered = sorted(lifetimes)
    results.put({"mode": mode, "connections": count, "byte_interval_s": byte_interval, "opened": opened,
                 "connect_errors": connect_errors, "bytes_trickled": bytes_sent, "still_open_at_end": still_open,
                 "ended": dict(statuses),
                 "seconds_to_end": {"n": len(ordered), "p50": round(_percentile(ordered, 0.5), 1),
                                    "max": round(ordered[-1], 1) if ordered else None}})


# ------------------------------------------------------------------------------------------------ normal clients

def probe(port: int, paths: list[str], clients: int, interval: float, seconds: float, timeout: float
          ) -> dict[str, Any]:
    """`clients` threads, each a request every `interval` s on a new connection, cycling over `paths`."""
    lock = threading.Lock()
    latencies: dict[str, list[float]] = {path: [] for path in paths}
    failures: dict[str, Counter[str]] = {path: Counter() for path in paths}
    end = time.monotonic() + seconds

    def client(offset: int) -> None:
        n = offset
        due = time.monotonic() + interval * offset / clients
        while due < end:
            time.sleep(max(0.0, due - time.monotonic()))
            path = paths[n % len(paths)]
            n += 1
            start = time.monotonic()
            outcome = ""
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
                try:
                    conn.request("GET", path)
                    response = conn.getresponse()
                    response.read()
                    if response.status != 200:
                        outcome = f"status {response.status}"
                finally:
                    conn.close()
            except TimeoutError:
                outcome = f"over {timeout:g} s"
            except (OSError, http.client.HTTPException) as exc:
                outcome = type(exc).__name__
            elapsed = time.monotonic() - start
            with lock:
                latencies[path].append(elapsed)
                if outcome:
                    failures[path][outcome] += 1
            due = max(due + interval, time.monotonic())

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out = {}
    for path in paths:
        ordered = sorted(latencies[path])
        out[path] = {"n": len(ordered), "p50_ms": round(_percentile(ordered, 0.5) * 1000, 2),
                     "p99_ms": round(_percentile(ordered, 0.99) * 1000, 2),
                     "max_ms": round((ordered[-1] if ordered else 0.0) * 1000, 2), "failed": dict(failures[path])}
    return out


def verdict(before: dict[str, Any], during: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Normal latency is measured twice, without the crowd before and after it: on a machine shared with other
    work its p99 moves, and the higher of the two is the normal one."""
    out = {}
    for path in before:
        now = during[path]
        bound = TOLERANCE_FACTOR * max(before[path]["p99_ms"], after[path]["p99_ms"]) + TOLERANCE_MS
        out[path] = {"p99_bound_ms": round(bound, 2), "failed": sum(now["failed"].values()),
                     "within": not now["failed"] and now["n"] > 0 and now["p99_ms"] <= bound}
    return out


# ------------------------------------------------------------------------------------------------ servers

def preflight(settings: Settings) -> None:
    """The keyspace must be ready for /readyz (scale_common.served waits for it) before any server starts."""
    db = Database(settings)
    try:
        applied, latest = schema_state(db, settings.keyspace)
    finally:
        db.close()
    if applied != latest:
        raise SystemExit(f"keyspace {settings.keyspace}: schema at {applied}, latest is {latest}: "
                         "run `chronicle migrate`")


def top_account_path(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/networks/sample/rankings/top-accounts")
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    accounts = json.loads(body).get("accounts") if response.status == 200 else None
    if not accounts:
        raise SystemExit(f"no sample network in this keyspace ({response.status}): run `chronicle sample load`")
    return f"/networks/sample/accounts/{accounts[0]['account_id']}/posts?limit=20"


def nginx_config(upstream_port: int, listen_port: int, prefix: Path) -> str:
    """The sample configuration of docs/deployment.md, made runnable: its placeholders replaced, inside an http
    block of a stand-alone nginx.conf whose files all live under `prefix`."""
    text = DEPLOYMENT_DOC.read_text()
    found = re.search(r"```nginx\n(.*?)```", text, re.S)
    if not found:
        raise SystemExit(f"no ```nginx block in {DEPLOYMENT_DOC}")
    site = found.group(1).replace("127.0.0.1:8080", f"127.0.0.1:{upstream_port}")
    site = site.replace("listen 80;", f"listen 127.0.0.1:{listen_port};")
    temp = "".join(f"    {name}_temp_path {prefix / name};\n" for name in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                           "scgi"))
    return (f"daemon off;\nworker_processes 1;\npid {prefix / 'nginx.pid'};\nerror_log {prefix / 'error.log'} warn;\n"
            "events { worker_connections 4096; }\n"
            f"http {{\n    access_log {prefix / 'access.log'};\n{temp}" + site + "}\n")


@contextlib.contextmanager
def nginx_in_front(upstream_port: int) -> Iterator[int]:
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(binary).exists():
        raise SystemExit("--via-nginx: nginx is not installed (apt-get install -y nginx-light)")
    prefix = Path(tempfile.mkdtemp(prefix="chronicle-nginx-"))
    prefix.chmod(0o755)
    port = free_port()
    conf = prefix / "nginx.conf"
    conf.write_text(nginx_config(upstream_port, port, prefix))
    subprocess.run([binary, "-t", "-p", str(prefix), "-c", str(conf)], check=True, capture_output=True)
    proc = subprocess.Popen([binary, "-p", str(prefix), "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"nginx did not start; see {prefix / 'error.log'}")
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(prefix, ignore_errors=True)


def workers_cpu(master_pid: int) -> float:
    return sum(cpu_seconds(pid) for pid in _children(master_pid))


# ------------------------------------------------------------------------------------------------ a run

def measured(port: int, paths: list[str], args: argparse.Namespace, master_pid: int) -> dict[str, Any]:
    """One phase of normal clients, with what the gunicorn workers spent and how busy the machine was."""
    load, cpu, wall = os.getloadavg()[0], workers_cpu(master_pid), time.monotonic()
    by_path = probe(port, paths, args.probe_clients, args.probe_interval, args.probe_seconds, args.probe_timeout)
    cpu_share = (workers_cpu(master_pid) - cpu) / (time.monotonic() - wall)
    return {"paths": by_path, "workers_cpu_share": round(cpu_share, 3), "load_average_1m": round(load, 2)}


def run_mode(args: argparse.Namespace, worker_class: str, mode: str, logs: Path) -> dict[str, Any]:
    env = {"GUNICORN_CMD_ARGS": f"--no-control-socket --worker-class {worker_class}"}
    if args.head_timeout is not None:
        env["CHRONICLE_REQUEST_HEAD_TIMEOUT"] = str(args.head_timeout)
    if args.body_timeout is not None:
        env["CHRONICLE_REQUEST_BODY_TIMEOUT"] = str(args.body_timeout)
    settings = Settings.from_env()
    name = f"{worker_class} {mode}"
    with served(settings, logs / f"{worker_class}-{mode}", workers=args.workers, threads=args.threads,
                env=env) as server, contextlib.ExitStack() as stack:
        port = stack.enter_context(nginx_in_front(server.port)) if args.via_nginx else server.port
        paths = ["/healthz", top_account_path(port)]
        probe(port, paths, args.probe_clients, args.probe_interval, 2.0, args.probe_timeout)  # warm-up, untimed
        log(f"{name}: before, normal clients alone for {args.probe_seconds:g} s")
        before = measured(port, paths, args, server.master.pid)
        stop, results = multiprocessing.Event(), multiprocessing.Queue()
        slow = multiprocessing.Process(target=crowd, args=(port, mode, args.slow, args.byte_interval, stop, results),
                                       daemon=True)
        slow.start()
        time.sleep(args.settle)
        log(f"{name}: during, normal clients beside {args.slow} slow ones for {args.probe_seconds:g} s")
        during = measured(port, paths, args, server.master.pid)
        stop.set()
        crowd_summary = results.get(timeout=60)
        slow.join(timeout=10)
        log(f"{name}: after, normal clients alone again for {args.probe_seconds:g} s")
        after = measured(port, paths, args, server.master.pid)
    judged = verdict(before["paths"], during["paths"], after["paths"])
    summary = {"worker_class": worker_class, "mode": mode, "via_nginx": args.via_nginx,
               "served_within_normal_latency": all(v["within"] for v in judged.values()),
               "verdict": judged, "before": before, "during": during, "after": after, "crowd": crowd_summary}
    log(f"{name}: within normal latency: {summary['served_within_normal_latency']}; "
        + "; ".join(f"{p.split('?')[0]} p99 {before['paths'][p]['p99_ms']} / {during['paths'][p]['p99_ms']} / "
                    f"{after['paths'][p]['p99_ms']} ms, {judged[p]['failed']} failed" for p in paths)
        + f"; crowd ended {crowd_summary['ended']}")
    return summary


def keepalive_load(port: int, clients: int, requests: int) -> None:
    """`clients` threads, `requests` GET /healthz each on one kept-alive connection (in its own process)."""
    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for _ in range(requests):
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"/healthz answered {response.status}")
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_overhead(args: argparse.Namespace, worker_class: str, logs: Path) -> dict[str, Any]:
    """What the worker class costs a normal request: no crowd, OVERHEAD_CLIENTS kept-alive clients, closed loop."""
    env = {"GUNICORN_CMD_ARGS": f"--no-control-socket --worker-class {worker_class}"}
    with served(Settings.from_env(), logs / f"{worker_class}-overhead", workers=args.workers, threads=args.threads,
                env=env) as server:
        load = partial(multiprocessing.Process, target=keepalive_load)
        warm = load(args=(server.port, OVERHEAD_CLIENTS, 100))
        warm.start()
        warm.join()
        cpu, wall = workers_cpu(server.master.pid), time.monotonic()
        timed = load(args=(server.port, OVERHEAD_CLIENTS, args.overhead))
        timed.start()
        timed.join()
        wall, cpu = time.monotonic() - wall, workers_cpu(server.master.pid) - cpu
    total = OVERHEAD_CLIENTS * args.overhead
    out = {"worker_class": worker_class, "clients": OVERHEAD_CLIENTS, "requests": total,
           "requests_per_s": round(total / wall), "worker_cpu_us_per_request": round(cpu / total * 1e6),
           "load_average_1m": round(os.getloadavg()[0], 2), "failed": timed.exitcode != 0}
    log(f"{worker_class}: {out['requests_per_s']} requests/s, {out['worker_cpu_us_per_request']} us of worker CPU "
        "per request")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--worker-class", default=f"gthread,{PROJECT_WORKER}",
                        help="comma-separated gunicorn worker classes, each measured in turn")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--slow", type=int, default=50, help="slow connections held open")
    parser.add_argument("--byte-interval", type=float, default=1.0, help="seconds between two bytes of a slow one")
    parser.add_argument("--probe-clients", type=int, default=4)
    parser.add_argument("--probe-interval", type=float, default=0.05, help="seconds between a client's requests")
    parser.add_argument("--probe-seconds", type=float, default=10.0)
    parser.add_argument("--probe-timeout", type=float, default=5.0, help="a normal request slower than this failed")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds of crowd before measuring")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--head-timeout", type=float, help="CHRONICLE_REQUEST_HEAD_TIMEOUT for the project worker")
    parser.add_argument("--body-timeout", type=float, help="CHRONICLE_REQUEST_BODY_TIMEOUT for the project worker")
    parser.add_argument("--via-nginx", action="store_true", help="put nginx (docs/deployment.md) in front")
    parser.add_argument("--overhead", type=int, metavar="N",
                        help="no crowd: N kept-alive GET /healthz per client from 8 clients, per worker class")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if set(modes) - set(MODES):
        parser.error(f"--modes: unknown {sorted(set(modes) - set(MODES))}")
    preflight(Settings.from_env())
    logs = Path(tempfile.mkdtemp(prefix="chronicle-slow-clients-"))
    if args.overhead:
        runs = [run_overhead(args, worker_class, logs) for worker_class in args.worker_class.split(",")]
        write_result("slow_clients_overhead", {"settings": vars(args), "logs": str(logs), "runs": runs})
        return
    runs = [run_mode(args, worker_class, mode, logs)
            for worker_class in args.worker_class.split(",") for mode in modes]
    write_result("slow_clients", {
        "settings": vars(args),
        "tolerance": f"no failed request and p99 during <= {TOLERANCE_FACTOR:g} x p99 before + {TOLERANCE_MS:g} ms",
        "logs": str(logs), "runs": runs})


if __name__ == "__main__":
    main()
