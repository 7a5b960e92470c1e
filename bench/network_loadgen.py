#!/usr/bin/env python3
"""HTTP load generator for the Q4 benchmark: N threads with keep-alive connections, for a bounded time.

Prints JSON: requests, errors, seconds, rps, p50/p90/p99/max in ms. Runs as its own process so the
server's measurements are not taxed by the client's GIL.
"""

from __future__ import annotations

import http.client
import json
import random
import sys
import threading
import time

import click


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", default="127.0.0.1")
@click.option("--port", type=int, required=True)
@click.option("--paths-file", type=click.Path(exists=True, dir_okay=False), required=True,
              help="one request path per line")
@click.option("--concurrency", type=int, default=16, show_default=True)
@click.option("--seconds", type=float, default=20.0, show_default=True)
def main(host: str, port: int, paths_file: str, concurrency: int, seconds: float) -> None:
    """Hammer the paths in PATHS_FILE (random order) and report latency percentiles."""
    with open(paths_file) as handle:
        paths = [p.strip() for p in handle if p.strip()]
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        conn = http.client.HTTPConnection(host, port, timeout=30)
        mine: list[float] = []
        bad = 0
        while time.perf_counter() < deadline:
            path = rng.choice(paths)
            started = time.perf_counter()
            try:
                conn.request("GET", path)
                response = conn.getresponse()
                response.read()
                ok = response.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=30)
            elapsed = time.perf_counter() - started
            if ok:
                mine.append(elapsed)
            else:
                bad += 1
        with lock:
            latencies.extend(mine)
            errors[0] += bad

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    latencies.sort()

    def pct(p: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000, 2) if latencies else 0.0

    json.dump({"requests": len(latencies), "errors": errors[0], "seconds": round(wall, 2),
               "rps": round(len(latencies) / wall, 1), "p50_ms": pct(0.50), "p90_ms": pct(0.90),
               "p99_ms": pct(0.99), "max_ms": pct(1.0) if latencies else 0.0}, sys.stdout)


if __name__ == "__main__":
    main()
