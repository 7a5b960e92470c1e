"""What the node's CPU does between requests: single-row reads at fixed rates, the node's CPU per read and the
share of Cassandra's shared-pool threads, with the node started at each timer slack asked (docs/node.md).

    .venv/bin/python -m bench.node_spin [--rates 250,1000,4000] [--seconds 8] [--slack-us 250,0] [--rounds 2]

Each round restarts the local node once per `--slack-us` value (in that order; the data is kept), reads for
`--warmup` seconds untimed (the JIT), then at each rate for `--seconds`: a paced open loop of one prepared read of
one row of a probe table, latency from when each read was sent. CPU comes from /proc: the node's process, and its
threads by name (the shared pool renames its workers after the stage they serve: `Native-Transport-Requests`,
`ReadStage`, ...). The node is restarted at the configured slack at the end. Prints a table; writes JSON under
bench/results/.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

from api.db import Database, Statement
from api.node.process import read_pid, start_node, stop_node
from bench.scale_common import local_node, scratch_settings, write_result

KEYSPACE = "chronicle_bench_nodespin"  # one probe table; dropped at the end
_TICK = os.sysconf("SC_CLK_TCK")
SHARED_POOL = ("Native-Transport-Requests", "ReadStage", "MutationStage", "RequestResponseStage")


def thread_cpu(pid: int) -> dict[str, tuple[str, float]]:
    """Each thread of `pid`: its name without its number, and its CPU seconds."""
    out: dict[str, tuple[str, float]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip().rstrip("0123456789:-_#")
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[task.name] = (name, (int(fields[11]) + int(fields[12])) / _TICK)
    return out


def cpu_used(before: dict[str, tuple[str, float]], after: dict[str, tuple[str, float]]) -> tuple[float, float]:
    """(the node's CPU seconds, those of the shared pool's workers) between two looks. By thread, not by name: a
    worker takes the name of the stage it serves next."""
    total = pool = 0.0
    for tid, (name, seconds) in after.items():
        old_name, old_seconds = before.get(tid, (name, 0.0))
        used = seconds - old_seconds
        total += used
        if name.startswith(SHARED_POOL) or old_name.startswith(SHARED_POOL):
            pool += used
    return total, pool


def paced_reads(db: Database, read: Statement, key: int, rate: float, seconds: float) -> list[float]:
    """Latencies (s) of reads sent at `rate` a second for `seconds`."""
    latencies: list[float] = []
    futures = []
    started = time.perf_counter()
    sent = 0
    while (now := time.perf_counter()) - started < seconds:
        due = started + sent / rate
        if now < due:
            time.sleep(due - now)
        at = time.perf_counter()
        future = db.execute_async(read, (key,))
        future.add_callback(lambda _rows, at=at: latencies.append(time.perf_counter() - at))
        futures.append(future)
        sent += 1
    for future in futures:
        future.result()
    return latencies


def measure(db: Database, read: Statement, pid: int, rates: list[float], seconds: float) -> list[dict[str, Any]]:
    rows = []
    for rate in rates:
        before, wall = thread_cpu(pid), time.perf_counter()
        latencies = sorted(paced_reads(db, read, 1, rate, seconds))
        after, wall = thread_cpu(pid), time.perf_counter() - wall
        total, pool = cpu_used(before, after)
        rows.append({"rate": rate, "reads": len(latencies), "node_cores": round(total / wall, 3),
                     "shared_pool_cores": round(pool / wall, 3),
                     "node_cpu_ms_per_read": round(total / len(latencies) * 1000, 3),
                     "p50_ms": round(latencies[len(latencies) // 2] * 1000, 3),
                     "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 3)})
    return rows


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="250,1000,4000", help="reads a second, comma-separated")
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per rate")
    parser.add_argument("--warmup", type=float, default=30.0, help="untimed seconds of reads after each start")
    parser.add_argument("--slack-us", default="250,0", help="timer slacks to start the node with (0: the kernel's)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds; each starts the node at every slack")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",") if r]
    slacks = [int(s) for s in args.slack_us.split(",") if s]
    node = local_node()
    results: list[dict[str, Any]] = []
    settings = scratch_settings(KEYSPACE, node=node, request_timeout=60.0)
    try:
        for round_no in range(args.rounds):
            for slack in slacks:
                stop_node(node, log=log)
                start_node(dataclasses.replace(node, timer_slack_us=slack), log=log)
                pid = read_pid(node)
                admin = Database(settings, keyspace="")
                try:
                    admin.execute_raw(f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = "
                                      "{'class': 'SimpleStrategy', 'replication_factor': 1}", timeout=60)
                    admin.execute_raw(f"CREATE TABLE IF NOT EXISTS {KEYSPACE}.probe (k int PRIMARY KEY, v int) "
                                      "WITH comment = 'Q: bench.node_spin probe reads'", timeout=60)
                    admin.execute_raw(f"INSERT INTO {KEYSPACE}.probe (k, v) VALUES (1, 1)")
                finally:
                    admin.close()
                db = Database(settings)
                try:
                    read = Statement("SELECT v FROM probe WHERE k = ?")
                    paced_reads(db, read, 1, 1000.0, args.warmup)
                    for row in measure(db, read, pid, rates, args.seconds):
                        row.update({"round": round_no, "slack_us": slack,
                                    "process_slack_ns": int(Path(f"/proc/{pid}/timerslack_ns").read_text())})
                        results.append(row)
                        log(f"round {round_no} slack {slack:>5} us  {row['rate']:>6.0f}/s  node "
                            f"{row['node_cores']:.2f} cores ({row['shared_pool_cores']:.2f} shared pool), "
                            f"{row['node_cpu_ms_per_read']:.3f} ms/read  p50 {row['p50_ms']:.2f} "
                            f"p99 {row['p99_ms']:.2f} ms")
                finally:
                    db.close()
    finally:
        stop_node(node, log=log)
        start_node(node, log=log)  # the configured slack again
        admin = Database(settings, keyspace="")
        try:
            admin.execute_raw(f"DROP KEYSPACE IF EXISTS {KEYSPACE}", timeout=60)
        finally:
            admin.close()
    write_result("node-spin", {"bench": "node_spin", "args": vars(args), "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
