"""Shared benchmark plumbing: serve the API with gunicorn on a bench keyspace, drive HTTP load from other
processes on loopback for a bounded time, and report throughput and latency percentiles.

Figures come from the real local node; nothing here is a timed assertion.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS_DIR = ROOT / "bench" / "results"

# (worker index, request sequence number) -> (method, path, headers, body)
RequestFactory = Callable[[int, int], tuple[str, str, dict[str, str], bytes | None]]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bench_settings(keyspace: str):
    """Settings for a bench keyspace on the local node (long timeouts: loaders, not requests)."""
    from api.config import Settings

    return dataclasses.replace(Settings.from_env(), keyspace=keyspace, request_timeout=60.0)


def migrate_keyspace(keyspace: str) -> None:
    from api.db import Database
    from api.migrations import migrate

    settings = bench_settings(keyspace)
    admin = Database(settings, keyspace="")
    try:
        migrate(admin, keyspace, settings.replication_map(), log=lambda _m: None)
    finally:
        admin.close()


@contextlib.contextmanager
def served_api(keyspace: str, *, env: dict[str, str] | None = None, workers: int = 3) -> Iterator[str]:
    """gunicorn (the repo's gunicorn.conf.py) serving `keyspace`; yields the base URL once /readyz is 200."""
    migrate_keyspace(keyspace)
    port = free_port()
    server_env = {
        **os.environ,
        "CHRONICLE_KEYSPACE": keyspace,
        "CHRONICLE_BIND": f"127.0.0.1:{port}",
        "CHRONICLE_WORKERS": str(workers),
        "CHRONICLE_LOG_LEVEL": "WARNING",  # one JSON line per request would measure the logger
        "CHRONICLE_ACCESS_LOG": "",
        **(env or {}),
    }
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    server = subprocess.Popen([gunicorn, "-c", "gunicorn.conf.py", "api.wsgi:app"], cwd=ROOT, env=server_env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError):
                if urllib.request.urlopen(base + "/readyz", timeout=2).status == 200:
                    break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"gunicorn did not become ready: {server.stderr.read().decode()[-2000:]}")
            time.sleep(0.3)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


@dataclasses.dataclass
class LoadResult:
    requests: int
    statuses: dict[int, int]
    seconds: float
    latencies_ms: list[float]

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        return percentile(self.latencies_ms, q)

    def summary(self) -> dict[str, object]:
        return {
            "requests": self.requests,
            "seconds": round(self.seconds, 2),
            "per_second": round(self.rate, 1),
            "p50_ms": round(self.percentile(50), 2),
            "p90_ms": round(self.percentile(90), 2),
            "p99_ms": round(self.percentile(99), 2),
            "max_ms": round(max(self.latencies_ms, default=0.0), 2),
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
        }


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (no interpolation: every figure is a latency that was measured)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(round(q / 100 * len(ordered) + 0.5))))
    return ordered[rank - 1]


def _load_process(base: str, factory: RequestFactory, worker_offset: int, threads: int, duration_s: float,
                  out: multiprocessing.Queue) -> None:
    host, port = base.removeprefix("http://").split(":")
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    deadline = time.perf_counter() + duration_s

    def run(worker: int) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        local_lat, local_status, seq = [], Counter(), 0
        while time.perf_counter() < deadline:
            method, path, headers, body = factory(worker, seq)
            seq += 1
            started = time.perf_counter()
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                local_status[response.status] += 1
            except (OSError, http.client.HTTPException):
                local_status[0] += 1
                conn.close()
                conn = http.client.HTTPConnection(host, int(port), timeout=10)
                continue
            local_lat.append((time.perf_counter() - started) * 1000)
        conn.close()
        with lock:
            latencies.extend(local_lat)
            statuses.update(local_status)

    pool = [threading.Thread(target=run, args=(worker_offset + i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    out.put((latencies, dict(statuses)))


def run_load(base: str, factory: RequestFactory, *, concurrency: int, duration_s: float,
             processes: int = 2) -> LoadResult:
    """`concurrency` keep-alive clients spread over `processes` OS processes, for `duration_s` seconds."""
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.Queue = ctx.Queue()
    per_process = [concurrency // processes + (1 if i < concurrency % processes else 0) for i in range(processes)]
    started = time.perf_counter()
    procs, offset = [], 0
    for threads in per_process:
        proc = ctx.Process(target=_load_process, args=(base, factory, offset, threads, duration_s, out))
        proc.start()
        procs.append(proc)
        offset += threads
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    for _ in procs:
        lat, st = out.get(timeout=duration_s + 120)
        latencies.extend(lat)
        statuses.update(st)
    for proc in procs:
        proc.join(timeout=30)
    elapsed = time.perf_counter() - started
    return LoadResult(sum(statuses.values()), dict(statuses), elapsed, latencies)


def record(name: str, figures: dict[str, object]) -> Path:
    """Print the figures and keep them in bench/results/<name>.json (ignored by git)."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    figures = {"benchmark": name, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **figures}
    path.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return path
