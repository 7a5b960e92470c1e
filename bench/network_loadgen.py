#!/usr/bin/env python3
"""HTTP load generator, run as its own process so the server's measurements are not taxed by the client's GIL.

Two ways to load the server:

- closed loop (default): `--concurrency` threads, each with a keep-alive connection, each sending its next request
  when the previous answer arrived; latency from send to answer. Requests that start in the `--seconds` window
  after `--warmup` untimed seconds count.
- open loop (`--rate R`): request i is due at t0 + i / R whatever the answers; `--connections` threads each take
  the next due request when free, wait for its time and send it. Latency is measured from the due time, so a
  request that waited for a free connection (the server fell behind) counts its wait: no coordinated omission.
  `late`: requests sent more than `--late-ms` after their due time; `failed`: answers other than 200 (or 304), errors,
  and requests never sent (still waiting 30 s after the window). Requests due in the window count.

Requests: `--paths-file` (one GET path a line, drawn at random: the Q4 benchmark) or `--requests-file` (JSON
lines {"method", "path", "headers", "body"}, taken in order: closed-loop thread k of c sends requests k, k + c,
k + 2c, ... cyclically, so a request bound to one caller, e.g. a tagger's token, is never in flight twice).
`--processes P` forks P processes: the closed loop's threads are split over them, and process p of the open loop
sends the due requests p, p + P, ...

Prints one JSON object: closed loop: requests (answered 200 in the window), errors, statuses, seconds, rps,
p50/p90/p99/max_ms; open loop: offered_rate, due, ok, failed, late, statuses, achieved_rps (200s that arrived in
the window), p50/p90/p99/max_ms (from the due time), service_p50/p99_ms (from the send), max_send_delay_ms.
Both: total_answered (warm-up included: divide server CPU by it), client_cpu_s.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import math
import multiprocessing
import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import click

NEVER_SENT_GRACE = 30.0  # seconds after the window's end a due request may still be sent
NOT_SENT = -1  # the status of a due request that was never sent
ANSWERED = (200, 304)  # a page, or "the copy you hold is current" to a conditional GET


@dataclasses.dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    body: bytes | None = None


def read_requests(paths_file: str | None, requests_file: str | None) -> list[Request]:
    if requests_file:
        with open(requests_file) as handle:
            out = []
            for line in handle:
                if line.strip():
                    spec = json.loads(line)
                    body = spec.get("body")
                    out.append(Request(spec.get("method", "GET"), spec["path"], spec.get("headers") or {},
                                       body.encode() if isinstance(body, str) else None))
            return out
    with open(paths_file or "") as handle:
        return [Request("GET", p.strip()) for p in handle if p.strip()]


class Connection:
    """One keep-alive connection; a failed request closes it and the next one reconnects."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.conn: http.client.HTTPConnection | None = None

    def send(self, request: Request) -> int:
        """The answer's status (its body read), 0 when the request failed."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            self.conn.request(request.method, request.path, body=request.body, headers=request.headers)
            response = self.conn.getresponse()
            response.read()
            return response.status
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = None
            return 0


def percentile(ordered: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of an ascending sequence (0 when empty)."""
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p * len(ordered)) - 1))]


def _ms(ordered: Sequence[float], p: float) -> float:
    return round(percentile(ordered, p) * 1000, 2)


# ------------------------------------------------------------------------------------------------ closed loop

def thread_requests(requests: Sequence[Request], thread: int, threads: int) -> list[Request]:
    """The requests closed-loop thread `thread` of `threads` sends, in order, cyclically: every `threads`-th one
    from its own index (one of them if there are fewer requests than threads)."""
    if len(requests) >= threads:
        return list(requests[thread::threads])
    return [requests[thread % len(requests)]]


def closed_loop(host: str, port: int, requests: Sequence[Request], *, threads: range, total_threads: int,
                start: float, warmup: float, seconds: float, sticky: bool) -> list[tuple[float, float, int]]:
    """Threads `threads` (global indices) until start + warmup + seconds: (started, elapsed, status) per request."""
    end = start + warmup + seconds
    out: list[list[tuple[float, float, int]]] = [[] for _ in threads]

    def run(k: int, thread: int) -> None:
        conn = Connection(host, port)
        mine = thread_requests(requests, thread, total_threads) if sticky else []
        rng = random.Random(thread)
        i = 0
        time.sleep(max(0.0, start - time.perf_counter()))
        while True:
            started = time.perf_counter()
            if started >= end:
                return
            request = mine[i % len(mine)] if sticky else rng.choice(requests)
            i += 1
            status = conn.send(request)
            out[k].append((started, time.perf_counter() - started, status))

    workers = [threading.Thread(target=run, args=(k, t), daemon=True) for k, t in enumerate(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return [r for rs in out for r in rs]


def closed_figures(records: Sequence[tuple[float, float, int]], window_start: float, seconds: float
                   ) -> dict[str, Any]:
    timed = [r for r in records if window_start <= r[0] < window_start + seconds]
    ok = sorted(r[1] for r in timed if r[2] in ANSWERED)
    return {"mode": "closed", "requests": len(ok), "errors": len(timed) - len(ok),
            "statuses": dict(Counter(str(r[2]) for r in timed)), "seconds": round(seconds, 2),
            "rps": round(len(ok) / seconds, 1) if seconds > 0 else 0.0, "p50_ms": _ms(ok, 0.50),
            "p90_ms": _ms(ok, 0.90), "p99_ms": _ms(ok, 0.99), "max_ms": round(ok[-1] * 1000, 2) if ok else 0.0,
            "total_answered": sum(1 for r in records if r[2] > 0)}


# ------------------------------------------------------------------------------------------------ open loop

def due_at(i: int, start: float, rate: float) -> float:
    """When request i of a fixed-rate schedule is due."""
    return start + i / rate


def open_loop(send: Callable[[int], int], *, rate: float, count: int, start: float, connections: int,
              process: int = 0, processes: int = 1, give_up_at: float = math.inf,
              clock: Callable[[], float] = time.perf_counter, sleep: Callable[[float], None] = time.sleep
              ) -> list[tuple[float, float, float, int]]:
    """Send the due requests i = process, process + processes, ... < count of a `rate` per second schedule from
    `start`, over `connections` threads (`send(i)` sends request i on the calling thread's connection and returns
    its status). A free thread takes the next request in order, waits for its due time if that is still ahead,
    and sends it; if every thread is busy when a request falls due, it waits for the first free one. Returns
    (due, sent, answered, status) per request; a request still unsent at `give_up_at` is (due, nan, nan,
    NOT_SENT)."""
    indices = iter(range(process, count, processes))
    lock = threading.Lock()
    out: list[tuple[float, float, float, int]] = []

    def run() -> None:
        while True:
            with lock:
                i = next(indices, None)
            if i is None:
                return
            due = due_at(i, start, rate)
            ahead = due - clock()
            if ahead > 0:
                sleep(ahead)
            sent = clock()
            if sent > give_up_at:
                record = (due, math.nan, math.nan, NOT_SENT)
            else:
                status = send(i)
                record = (due, sent, clock(), status)
            with lock:
                out.append(record)

    threads = [threading.Thread(target=run, daemon=True) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def open_figures(records: Sequence[tuple[float, float, float, int]], *, rate: float, window_start: float,
                 seconds: float, late_s: float) -> dict[str, Any]:
    """Figures of the requests due in [window_start, window_start + seconds): latency from the due time (what a
    user who asked at that time waits), service time from the send, late and failed counts."""
    timed = [r for r in records if window_start <= r[0] < window_start + seconds]
    ok = [r for r in timed if r[3] in ANSWERED]
    waited = sorted(r[2] - r[0] for r in ok)
    service = sorted(r[2] - r[1] for r in ok)
    sent = [r for r in timed if r[3] != NOT_SENT]
    return {"mode": "open", "offered_rate": rate, "seconds": round(seconds, 2), "due": len(timed), "ok": len(ok),
            "failed": len(timed) - len(ok), "late": sum(1 for r in sent if r[1] - r[0] > late_s),
            "statuses": dict(Counter(str(r[3]) for r in timed)),
            # Throughput: 200s that arrived within the window (whenever they were due).
            "achieved_rps": round(sum(1 for r in records if r[3] in ANSWERED and window_start <= r[2] < window_start
                                      + seconds) / seconds, 1) if seconds > 0 else 0.0,
            "p50_ms": _ms(waited, 0.50), "p90_ms": _ms(waited, 0.90), "p99_ms": _ms(waited, 0.99),
            "max_ms": round(waited[-1] * 1000, 2) if waited else 0.0,
            "service_p50_ms": _ms(service, 0.50), "service_p99_ms": _ms(service, 0.99),
            "max_send_delay_ms": round(max((r[1] - r[0] for r in sent), default=0.0) * 1000, 2),
            "total_answered": sum(1 for r in records if r[3] > 0)}


# ------------------------------------------------------------------------------------------------ processes

def _split(total: int, parts: int) -> list[range]:
    """`total` thread indices in `parts` contiguous ranges of nearly equal size."""
    bounds = [total * p // parts for p in range(parts + 1)]
    return [range(bounds[p], bounds[p + 1]) for p in range(parts)]


def _child(job: Callable[[], list], sender: Any) -> None:
    before = os.times()
    records = job()
    after = os.times()
    sender.send((records, after.user + after.system - before.user - before.system))
    sender.close()


def run_processes(jobs: list[Callable[[], list]]) -> tuple[list, float]:
    """Each job in a forked process; their records joined, and the client CPU seconds they used."""
    if len(jobs) == 1:
        before = os.times()
        records = jobs[0]()
        after = os.times()
        return records, after.user + after.system - before.user - before.system
    ctx = multiprocessing.get_context("fork")
    pipes, procs = [], []
    for job in jobs:
        receiver, sender = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(job, sender), daemon=True)
        proc.start()
        sender.close()
        pipes.append(receiver)
        procs.append(proc)
    records: list = []
    cpu = 0.0
    for receiver, proc in zip(pipes, procs, strict=True):
        got, used = receiver.recv()
        records.extend(got)
        cpu += used
        proc.join()
    return records, cpu


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", default="127.0.0.1")
@click.option("--port", type=int, required=True)
@click.option("--paths-file", type=click.Path(exists=True, dir_okay=False),
              help="one GET path per line, drawn at random")
@click.option("--requests-file", type=click.Path(exists=True, dir_okay=False),
              help='JSON lines {"method", "path", "headers", "body"}, taken in order (see above)')
@click.option("--concurrency", type=int, default=16, show_default=True, help="closed loop: threads")
@click.option("--seconds", type=float, default=20.0, show_default=True, help="the measured window")
@click.option("--warmup", type=float, default=0.0, show_default=True, help="untimed seconds before the window")
@click.option("--rate", type=float, default=0.0, help="open loop: requests per second offered (0: closed loop)")
@click.option("--connections", type=int, default=64, show_default=True, help="open loop: threads")
@click.option("--late-ms", type=float, default=10.0, show_default=True,
              help="open loop: a request sent more than this after its due time is late")
@click.option("--processes", type=int, default=1, show_default=True, help="forked load processes")
def main(host: str, port: int, paths_file: str | None, requests_file: str | None, concurrency: int, seconds: float,
         warmup: float, rate: float, connections: int, late_ms: float, processes: int) -> None:
    """Load the server with the requests of PATHS_FILE or REQUESTS_FILE and report latency percentiles."""
    if bool(paths_file) == bool(requests_file):
        raise click.UsageError("give one of --paths-file and --requests-file")
    requests = read_requests(paths_file, requests_file)
    if not requests:
        raise click.UsageError("no requests")
    start = time.perf_counter() + 0.5  # every process forked and connected by then
    window_start = start + warmup
    if rate > 0:
        count = int(rate * (warmup + seconds))
        give_up = window_start + seconds + NEVER_SENT_GRACE
        procs = max(1, min(processes, connections))
        per_process = _split(connections, procs)

        def job(p: int) -> Callable[[], list]:
            def run() -> list:
                local = threading.local()

                def send(i: int) -> int:
                    if not hasattr(local, "conn"):
                        local.conn = Connection(host, port)
                    return local.conn.send(requests[i % len(requests)])

                return open_loop(send, rate=rate, count=count, start=start, connections=len(per_process[p]),
                                 process=p, processes=procs, give_up_at=give_up)
            return run

        records, cpu = run_processes([job(p) for p in range(procs)])
        out = open_figures(records, rate=rate, window_start=window_start, seconds=seconds, late_s=late_ms / 1000)
    else:
        procs = max(1, min(processes, concurrency))

        def closed_job(threads: range) -> Callable[[], list]:
            return lambda: closed_loop(host, port, requests, threads=threads, total_threads=concurrency, start=start,
                                       warmup=warmup, seconds=seconds, sticky=bool(requests_file))

        records, cpu = run_processes([closed_job(r) for r in _split(concurrency, procs)])
        out = closed_figures(records, window_start, seconds)
        out["concurrency"] = concurrency
    out["client_cpu_s"] = round(cpu, 3)
    out["processes"] = procs
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
