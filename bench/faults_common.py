"""What every scenario of the fault suite (`bench/faults.py`) needs: the 3-node cluster and its faults, the app
served by gunicorn on it, an HTTP client that records every attempt, phases of a run, an open-loop scheduler
with retries, and the readiness probe.

Faults are real signals to real processes: SIGKILL (a crash: no drain, commit log replayed on start), SIGSTOP /
SIGCONT (a long GC pause: the process holds its sockets but answers nothing), SIGTERM (a graceful stop: the
node drains), and SIGKILL of one gunicorn worker (the master forks a new one). Every node this module paused is
resumed on exit, whatever happens to the run.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import heapq
import hmac
import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from api.config import Settings
from api.node.config import NodeSpec, cluster_specs
from api.node.process import _pid_alive, read_pid, start_cluster, start_node, stop_node
from bench.scale_common import ROOT, Served, _percentile, served
from bench.tagging import _children

CLUSTER_SIZE = 3
REPLICATION = "NetworkTopologyStrategy:datacenter1:3"
SIGNING_SECRET = "faults-signing-secret"
ADMIN_TOKEN = "faults-admin-token"
READ_TOKEN = "faults-read-token"


def log(message: str) -> None:
    print(f"[faults {time.strftime('%H:%M:%S')}] {message}", flush=True)


# ------------------------------------------------------------------------------------------------ cluster

def cluster() -> list[NodeSpec]:
    """The project's loopback cluster: 127.0.0.1-3, native port 9142, state under .chronicle/cluster."""
    return cluster_specs(CLUSTER_SIZE)


def cluster_up(specs: list[NodeSpec]) -> None:
    """Every node running and the ring formed (reuses running nodes; starts stopped or killed ones)."""
    resume_all()
    start_cluster(specs, log=log)


def node_pid(spec: NodeSpec) -> int:
    pid = read_pid(spec)
    if not pid:
        raise RuntimeError(f"{spec.name} is not running")
    return pid


_paused: set[int] = set()
_paused_lock = threading.Lock()


def resume_all() -> None:
    """SIGCONT every node this process paused (never leave a frozen JVM behind)."""
    with _paused_lock:
        for pid in list(_paused):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
            _paused.discard(pid)


atexit.register(resume_all)


def kill_node(spec: NodeSpec) -> int:
    """SIGKILL the node (a crash) and wait until the process is gone; returns its pid."""
    pid = node_pid(spec)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while _pid_alive(pid) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # a node started by this process is our child: reap it
        time.sleep(0.05)
    return pid


class Restart:
    """A node (re)started in a thread of its own: the load and the phases go on while it boots, however long
    that takes on a busy machine. `graceful`: SIGTERM first (the node drains), for a node still running."""

    def __init__(self, spec: NodeSpec, *, graceful: bool = False, timeout: float = 900.0) -> None:
        self.spec, self.graceful, self.timeout = spec, graceful, timeout
        self.seconds: float | None = None
        self.error: str | None = None
        self.done = threading.Event()
        threading.Thread(target=self._run, name=f"restart-{spec.name}", daemon=True).start()

    def _run(self) -> None:
        started = time.monotonic()
        try:
            if self.graceful:
                stop_node(self.spec, log=log)
            start_node(self.spec, timeout=self.timeout, log=log)
            self.seconds = round(time.monotonic() - started, 1)
        except Exception as exc:  # noqa: BLE001 - reported with the scenario's figures
            self.error = f"{type(exc).__name__}: {exc}"[:300]
        finally:
            self.done.set()

    def wait(self, limit: float) -> dict[str, Any]:
        """Wait up to `limit` seconds for CQL; what happened, for the report."""
        self.done.wait(limit)
        if self.seconds is not None:
            return {"restart_s": self.seconds}
        return {"restart_s": None, "restart_error": self.error or f"CQL not answering after {limit:.0f} s"}


def pause_node(spec: NodeSpec) -> int:
    pid = node_pid(spec)
    with _paused_lock:
        _paused.add(pid)
    os.kill(pid, signal.SIGSTOP)
    return pid


def resume_node(pid: int) -> None:
    with _paused_lock:
        _paused.discard(pid)
    os.kill(pid, signal.SIGCONT)


# ------------------------------------------------------------------------------------------------ gunicorn

def app_env(settings: Settings, logs: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The app's environment for this suite, over what `scale_common.served` sets: the service's default
    consistency levels and timeouts whatever the caller's shell says, the suite's secrets and tokens, INFO logs
    with an access log (what an operator would read after an incident), and no control socket (gunicorn's
    default path in the home directory is shared by every instance on the host: issue 14)."""
    return {"CHRONICLE_READ_CONSISTENCY": "LOCAL_ONE", "CHRONICLE_WRITE_CONSISTENCY": "LOCAL_QUORUM",
            "CHRONICLE_REQUEST_TIMEOUT": "2.0", "CHRONICLE_CONNECT_TIMEOUT": "2.0",
            "CHRONICLE_REPLICATION": REPLICATION, "CHRONICLE_SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "CHRONICLE_SLACK_SIGNING_SECRETS": "", "CHRONICLE_ADMIN_TOKEN": ADMIN_TOKEN,
            "CHRONICLE_API_TOKENS": json.dumps({READ_TOKEN: {"workspaces": ["*"], "private": True}}),
            "CHRONICLE_LOG_LEVEL": "INFO", "CHRONICLE_ACCESS_LOG": str(logs / "access.log"),
            "GUNICORN_CMD_ARGS": "--no-control-socket", "PYTHONUNBUFFERED": "1", **(extra or {})}


def command_env(settings: Settings, logs: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a `chronicle` command run against the suite's keyspace (e.g. the reconcile job)."""
    return {**os.environ, "CHRONICLE_CASSANDRA_HOSTS": ",".join(settings.contact_points),
            "CHRONICLE_CASSANDRA_PORT": str(settings.cassandra_port), "CHRONICLE_KEYSPACE": settings.keyspace,
            "PYTHONPATH": str(ROOT), **app_env(settings, logs, extra)}


@contextlib.contextmanager
def app_served(settings: Settings, logs: Path, *, workers: int, threads: int,
               extra_env: dict[str, str] | None = None) -> Iterator[Served]:
    """gunicorn (gunicorn.conf.py) on the cluster and the keyspace of `settings` (scale_common.served)."""
    with served(settings, logs, workers=workers, threads=threads, env=app_env(settings, logs, extra_env),
                app_log="app.log", ready_timeout=120.0) as server:
        yield server


def worker_pids(server: Served) -> list[int]:
    return sorted(_children(server.master.pid))


def process_serving(server_port: int, client_port: int) -> int | None:
    """The process holding the server end of the loopback connection from `client_port` (ss -p): the gunicorn
    worker serving a request sent on it."""
    found = subprocess.run(["ss", "-Htnp", "state", "established",
                            f"( sport = :{server_port} and dport = :{client_port} )"],
                           capture_output=True, text=True).stdout
    match = re.search(r"pid=(\d+)", found)
    return int(match.group(1)) if match else None


def statement_errors(port: int) -> dict[str, int]:
    """The app's own count of failed Cassandra statements (`/metrics`, every worker): which statements the
    faults hit, by statement name and error."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    except OSError:
        return {}
    finally:
        conn.close()
    out: dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r'chronicle_cassandra_query_errors_total\{(.*)\} ([0-9.e+]+)$', line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
            key = f"{labels.get('statement')}: {labels.get('error')}"
            out[key] = out.get(key, 0) + int(float(match.group(2)))
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def get_status(port: int, path: str, timeout: float = 5.0) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------------ phases

class Phases:
    """Named, consecutive time windows of a run (monotonic clock): attempts are classified by their start."""

    def __init__(self, first: str = "before") -> None:
        self.marks: list[tuple[str, float]] = [(first, time.monotonic())]
        self.order: list[str] = [first]
        self.ended: float | None = None

    def enter(self, name: str) -> None:
        log(f"phase: {name}")
        self.marks.append((name, time.monotonic()))
        if name not in self.order:
            self.order.append(name)

    def end(self) -> None:
        self.ended = time.monotonic()

    def at(self, t: float) -> str:
        name = self.marks[0][0]
        for mark, start in self.marks:
            if start <= t:
                name = mark
            else:
                break
        return name

    def seconds(self) -> dict[str, float]:
        out: Counter = Counter()
        ends = [start for _, start in self.marks[1:]] + [self.ended or time.monotonic()]
        for (name, start), end in zip(self.marks, ends, strict=True):
            out[name] += end - start
        return {name: round(out[name], 1) for name in self.order}


# ------------------------------------------------------------------------------------------------ HTTP

@dataclasses.dataclass(slots=True)
class Attempt:
    """One HTTP request as the client saw it: `status` None when no answer came (`error` says why)."""

    what: str  # e.g. "slack:post", "network:follow"
    started: float  # monotonic
    seconds: float
    status: int | None
    error: str | None  # "timeout" | "connection" (reset, refused, closed without an answer)
    retry: int  # 0 for the first attempt

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def outcome(self) -> str:
        if self.status is None:
            return self.error or "error"
        if 200 <= self.status < 300:
            return "2xx"
        return str(self.status)


class Client:
    """Keep-alive HTTP/1.1 connections, one per thread (http.client: little client CPU beside 3 JVMs). A
    connection idle longer than `idle_reconnect` is replaced before use, so gunicorn closing it (keepalive 5 s)
    never shows as a failed request; no request is ever resent here: retrying is the caller's policy."""

    def __init__(self, port: int, idle_reconnect: float = 2.0) -> None:
        self.port = port
        self.idle_reconnect = idle_reconnect
        self.local = threading.local()

    def _conn(self, timeout: float) -> http.client.HTTPConnection:
        conn = getattr(self.local, "conn", None)
        if conn is not None and (time.monotonic() - self.local.used > self.idle_reconnect
                                 or self.local.timeout != timeout):
            conn.close()
            conn = None
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            self.local.timeout = timeout
        return conn

    def request(self, what: str, method: str, path: str, *, body: bytes | None = None,
                headers: dict[str, str] | None = None, timeout: float = 10.0, retry: int = 0,
                on_sent: Callable[[int], None] | None = None) -> tuple[Attempt, bytes]:
        """One attempt; `on_sent(local port)` is called once the request is on the wire (to find, and kill,
        the server process holding the other end while the request is in flight)."""
        conn = self._conn(timeout)
        started = time.monotonic()
        try:
            conn.request(method, path, body=body, headers=headers or {})
            if on_sent is not None:
                on_sent(conn.sock.getsockname()[1])
            response = conn.getresponse()
            data = response.read()
            status, error = response.status, None
            if response.getheader("Connection", "").lower() == "close":
                conn.close()
                self.local.conn = None
        except TimeoutError:
            status, error, data = None, "timeout", b""
            conn.close()
            self.local.conn = None
        except (OSError, http.client.HTTPException):
            status, error, data = None, "connection", b""
            conn.close()
            self.local.conn = None
        self.local.used = time.monotonic()
        return Attempt(what, started, self.local.used - started, status, error, retry), data


def slack_signature(body: bytes, secret: str = SIGNING_SECRET) -> dict[str, str]:
    """Slack's v0 request signature over a fresh timestamp (a retry is signed again, as Slack does)."""
    ts = str(int(time.time()))
    digest = hmac.new(secret.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}", "Content-Type": "application/json"}


# ------------------------------------------------------------------------------------------------ scheduling

class Scheduler:
    """Open-loop sending: jobs run on a thread pool at their due time, whether or not earlier ones answered.

    `at(due, job)` runs `job(lag)` on the pool once `due` (monotonic) has come; `lag` is how late it started
    (the generator keeping its rate, or not). Retries are scheduled the same way, so a slow answer never
    delays the next event."""

    def __init__(self, threads: int = 256) -> None:
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="faults-send")
        self.heap: list[tuple[float, int, Callable[[float], None]]] = []
        self.cond = threading.Condition()
        self.seq = 0
        self.pending = 0  # jobs scheduled or running
        self.closed = False
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, name="faults-scheduler", daemon=True)
        self.thread.start()

    def at(self, due: float, job: Callable[[float], None]) -> None:
        with self.cond:
            self.seq += 1
            self.pending += 1
            heapq.heappush(self.heap, (due, self.seq, job))
            self.cond.notify()

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.closed and (not self.heap or self.heap[0][0] > time.monotonic()):
                    wait = self.heap[0][0] - time.monotonic() if self.heap else None
                    self.cond.wait(timeout=wait)
                if self.closed:
                    return
                due, _seq, job = heapq.heappop(self.heap)
            self.pool.submit(self._call, job, due)

    def _call(self, job: Callable[[float], None], due: float) -> None:
        try:
            job(time.monotonic() - due)
        except Exception as exc:  # noqa: BLE001 - a harness bug must show in the report, not kill a thread
            self.errors.append(f"{type(exc).__name__}: {exc}"[:300])
        finally:
            with self.cond:
                self.pending -= 1
                self.cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until nothing is scheduled or running (every retry done); False on timeout."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(timeout=min(left, 1.0))
        return True

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        self.thread.join(timeout=5)
        self.pool.shutdown(wait=True, cancel_futures=True)


def paced(rate: float, seconds: float, start: float | None = None) -> Iterator[float]:
    """Due times of an open-loop source: `rate` per second for `seconds` from `start` (now)."""
    start = time.monotonic() if start is None else start
    n = int(rate * seconds)
    for i in range(n):
        yield start + i / rate


# ------------------------------------------------------------------------------------------------ figures

def latency(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    ms = 1000.0
    return {"n": len(ordered), "p50_ms": round(_percentile(ordered, 0.50) * ms, 1),
            "p99_ms": round(_percentile(ordered, 0.99) * ms, 1),
            "max_ms": round((ordered[-1] if ordered else 0.0) * ms, 1)}


def by_phase(attempts: list[Attempt], phases: Phases, *, what_prefix: str = "") -> dict[str, dict[str, Any]]:
    """Per phase: attempts, retries among them, outcomes (2xx, 503, 500, timeout, connection, ...) and the
    latency of every attempt (failed ones too: a timeout counts at the time the client waited)."""
    groups: dict[str, list[Attempt]] = {name: [] for name in phases.order}
    for a in attempts:
        if a.what.startswith(what_prefix):
            groups.setdefault(phases.at(a.started), []).append(a)
    out = {}
    for name, group in groups.items():
        out[name] = {"attempts": len(group), "retries": sum(1 for a in group if a.retry),
                     "outcomes": dict(Counter(a.outcome for a in group).most_common()),
                     **latency([a.seconds for a in group])}
    return out


def outcome_totals(attempts: list[Attempt], what_prefix: str = "") -> dict[str, int]:
    """Attempts by outcome: status_500 is exactly 500; other_5xx any other 5xx but 503 (both are targets 0)."""
    counts = Counter(a.outcome for a in attempts if a.what.startswith(what_prefix))
    return {"attempts": sum(counts.values()), "ok_2xx": counts.get("2xx", 0), "status_500": counts.get("500", 0),
            "status_503": counts.get("503", 0),
            "other_5xx": sum(v for k, v in counts.items() if k.startswith("5") and k not in ("500", "503")),
            "other_4xx": sum(v for k, v in counts.items() if k.startswith("4")),
            "timeouts": counts.get("timeout", 0), "connection_errors": counts.get("connection", 0)}


class ReadinessProbe:
    """GET /readyz once a second during a run: how often readiness would have pulled the instance out."""

    def __init__(self, port: int, phases: Phases, interval: float = 1.0) -> None:
        self.port, self.phases, self.interval = port, phases, interval
        self.results: list[tuple[float, str]] = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="faults-readyz", daemon=True)

    def __enter__(self) -> ReadinessProbe:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.thread.join(timeout=10)

    def _run(self) -> None:
        while not self.stop_event.is_set():
            started = time.monotonic()
            try:
                outcome = str(get_status(self.port, "/readyz", timeout=5.0))
            except TimeoutError:
                outcome = "timeout"
            except OSError:
                outcome = "connection"
            self.results.append((started, outcome))
            self.stop_event.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def summary(self) -> dict[str, dict[str, int]]:
        out: dict[str, Counter] = {name: Counter() for name in self.phases.order}
        for started, outcome in self.results:
            out.setdefault(self.phases.at(started), Counter())[outcome] += 1
        return {name: dict(c) for name, c in out.items()}
