"""Tagging figures (issue 12): submits/s and next/submit latency with 200 simulated taggers against gunicorn,
and the time of one queue top-up of 1,000 items.

    .venv/bin/python -m bench.tagging [--taggers 200] [--processes 4] [--seconds 40] [--warmup 5]
                                      [--cycle 1.0] [--items 20000] [--teams 4] [--workers 3] [--threads 8]
                                      [--tick 1] [--topups 5] [--skip-saturation] [--keep]

What it does, in one scratch keyspace (dropped after unless `--keep`):

1. Archive and project. `--items` network posts of 10 authors are written straight into the archive
   (api.network.posts.post_writes), and one project is made of them (api.tagging.service.create_project:
   queue 1,000, lease 600 s, one item held at a time) with `--teams` teams, each with a quota equal to the item
   count (present, so every claim does the quota's compare-and-set, but never reached), and `--taggers`
   taggers spread over the teams, each with their own token.
2. Load. gunicorn (gunicorn.conf.py, `--workers` x `--threads`) on the scratch keyspace and
   `chronicle tagging worker` (tick `--tick` s) beside it, as in production. The taggers run in `--processes`
   forked processes of taggers/processes threads, each with its own keep-alive connection (http.client, the
   cheapest client: the load generator shares the 2 cores with the server and the node). A tagger's cycle:
   POST next, wait until half its cycle is over ("thinking"), POST submit with 1-2 categories, 0-2
   subcategories and 0-3 keywords, wait for the next cycle. Two phases:
   - paced: `--cycle` s per tagger (1.0: 200 taggers offer 200 submits/s, the target), cycles staggered;
     a tagger that falls behind starts its next cycle at once (then it is a closed loop);
   - saturation (unless `--skip-saturation`): no thinking, no pacing: the most the server does.
   Each phase runs `--warmup` s untimed, then `--seconds` s measured: requests that START in the window count.
   Figures: submits/s = submits answered 200 in the window / seconds; next and submit p50/p99/max (each
   request's wall time seen by the client, so the client's own queueing is included); answers other than 200
   (a null item from next is counted with its reason; its latency counts as a next's); CPU seconds used in
   the window by the node, the gunicorn workers, the tagging worker and the load generator, per submit; driver
   rounds and lightweight transactions per submit, by statement (the servers' Prometheus counts over the window).
3. Queue top-up. gunicorn and the tagging worker stopped, `--topups` fresh projects of 2,000 items each; for
   each, api.tagging.worker.run_once on its empty queue of size 1,000 (time; the pass must report 1,000 queued),
   then one more run_once on the full queue (the cost of an idle pass, which the worker repeats every tick).
   Target: <= 1 s.

Targets: >= 200 submits/s sustained, next and submit p99 <= 50 ms, top-up <= 1 s. Prints a table on stderr
and one JSON object on stdout, written under bench/results/ (bench/scale_common.write_result).

    .venv/bin/python -m bench.tagging --faulted-run [--faulted-items 5000] [--faulted-taggers 50] [--keep]

runs instead the tagging load test's scenario at full size (tests/tagging/test_tagging_load.py,
`killed_worker_run`; the test runs it at 1,500 items): `--faulted-taggers` taggers through `--faulted-items` items
in 3 teams (one quota below its share), lease 3 s, 5% of items abandoned and submitted late, 2% skipped, 1% with an
unknown category first, 5% submitted twice, one gunicorn worker SIGKILLed at 30%; every check of the test (no
item lost or doubled, quotas never passed, statistics equal the log, reconcile clean) must hold. Figures: the
run's seconds and items/s, and its counts (leases, retries, 409s, quota refusals), in `tagging-faulted-*.json`.

    .venv/bin/python -m bench.tagging --restart-run [--restart-items 400] [--restart-taggers 20]

runs the load test's node-restart scenario (`node_restart_run`): a Cassandra node of the run's own
(127.0.0.11:9343) is stopped and started at 30% while the taggers work; every check above must hold, and some
requests must have been retried. Figures: the seconds the node was away, the run's counts, in
`tagging-restart-*.json`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from api.config import Settings
from api.db import Database, Statement
from api.network import posts
from api.network.values import Post
from api.node.process import read_pid
from api.observability import configure_logging
from api.tagging import control, items, service, worker
from bench.scale_common import BIN, _percentile, local_node, scratch_keyspace, served, write_result

CATEGORIES = ["news", "opinion", "question", "announcement", "other"]
SUBCATEGORIES = ["positive", "negative", "neutral", "sarcastic"]
KEYWORDS = ["cassandra", "compaction", "tombstones", "gossip", "repair", "lwt", "paxos", "hints", "sstable",
            "memtable", "bloom filter", "queue", "latency", "throughput"]
AUTHORS = 10
TOPUP_ITEMS = 2000
ADMIN_TOKEN = "bench-tagging-admin"


def _note(part: str, figures: Any) -> None:
    print(f"{part}: {figures}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ set-up

def archive(db: Database, network: str, count: int) -> list[int]:
    """`count` posts of AUTHORS authors written straight into the archive; returns the author ids."""
    authors = [8_000_000 + a for a in range(AUTHORS)]  # ids per network: another network reuses them
    start = datetime(2025, 1, 1, tzinfo=UTC)

    def writes() -> Iterator[Any]:
        for i in range(count):
            author = authors[i % AUTHORS]
            at = (start + timedelta(minutes=7 * i)).replace(microsecond=0)
            yield from posts.post_writes(network, Post(author * 1_000_000 + i, author, at, f"author{author}",
                                                       content=f"post {i}: " + " ".join(KEYWORDS[i % 7:i % 7 + 4]),
                                                       language="en"))

    db.execute_many(writes())
    return authors


def make_project(db: Database, project: str, network: str, authors: list[int], *, teams: int, quota: int | None,
                 taggers: int) -> tuple[int, list[str]]:
    """The project and its taggers' tokens; returns (items, tokens)."""
    names = [f"team{t}" for t in range(teams)]
    made = service.create_project(db, project, project, {"kind": "network", "network": network, "authors": authors},
                                  CATEGORIES, SUBCATEGORIES, queue_size=1000, lease_seconds=600, max_held=1,
                                  teams={n: quota for n in names})
    tokens = [service.add_member(db, project, f"tagger{i:03d}", names[i % teams], "tagger") for i in range(taggers)]
    return made.total_items, tokens


def _get(port: int, path: str, token: str | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------------ CPU

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


# ------------------------------------------------------------------------------------------------ load

class Connection:
    """One tagger's keep-alive connection; reconnects after an error."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.conn: http.client.HTTPConnection | None = None

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            self.conn.request("POST", path, body=json.dumps(body), headers=self.headers)
            response = self.conn.getresponse()
            data = response.read()
            return response.status, json.loads(data) if data else None
        except (OSError, http.client.HTTPException, ValueError):
            self.conn.close()
            self.conn = None
            return 0, None


def _tagger(port: int, project: str, token: str, seed: int, plan: dict[str, float], out: list[tuple]) -> None:
    """One tagger until the window ends (its current cycle is finished, so no item stays held)."""
    rng = random.Random(seed)
    conn = Connection(port, token)
    prefix = f"/tagging/projects/{project}"
    cycle = plan["cycle"]
    next_start = plan["start"] + rng.random() * cycle
    while True:
        if cycle:
            pause = next_start - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        started = time.monotonic()
        if started >= plan["end"]:
            return
        status, body = conn.post(prefix + "/next", {})
        item = (body or {}).get("item") if status == 200 else None
        answer: int | str = status if status != 200 or item else f"null ({(body or {}).get('reason')})"
        out.append(("next", started, time.monotonic() - started, answer))
        if item is None:
            time.sleep(0.05 + rng.random() * 0.1)
        else:
            if cycle:
                think = started + cycle / 2 - time.monotonic()
                if think > 0:
                    time.sleep(think)
            payload = {"lease_id": item["lease_id"], "categories": rng.sample(CATEGORIES, rng.randint(1, 2)),
                       "subcategories": rng.sample(SUBCATEGORIES, rng.randint(0, 2)),
                       "keywords": rng.sample(KEYWORDS, rng.randint(0, 3))}
            at = time.monotonic()
            status, _ = conn.post(f"{prefix}/items/{item['seq']}/submit", payload)
            out.append(("submit", at, time.monotonic() - at, status))
        next_start = max(next_start + cycle, time.monotonic()) if cycle else 0.0


def _load_process(port: int, project: str, tokens: list[str], seed: int, plan: dict[str, float], sender: Any
                  ) -> None:
    before = os.times()
    records: list[list[tuple]] = [[] for _ in tokens]
    threads = [threading.Thread(target=_tagger, args=(port, project, t, seed * 1000 + i, plan, records[i]),
                                daemon=True) for i, t in enumerate(tokens)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = os.times()
    sender.send(([r for rs in records for r in rs], after.user + after.system - before.user - before.system))
    sender.close()


def _latency(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    ms = 1000.0
    if not ordered:
        return {"count": 0}
    return {"count": len(ordered), "p50_ms": round(_percentile(ordered, 0.50) * ms, 1),
            "p99_ms": round(_percentile(ordered, 0.99) * ms, 1), "max_ms": round(ordered[-1] * ms, 1),
            "mean_ms": round(statistics.fmean(ordered) * ms, 1)}


def run_phase(name: str, port: int, project: str, tokens: list[str], args: argparse.Namespace, cycle: float,
              pids: dict[str, list[int]]) -> dict[str, Any]:
    """All taggers in forked processes for warm-up + window; figures of the requests started in the window."""
    ctx = multiprocessing.get_context("fork")
    start = time.monotonic() + 2.0
    window_start = start + args.warmup
    window_end = window_start + args.seconds
    plan = {"start": start, "end": window_end, "cycle": cycle}
    shares = [tokens[i::args.processes] for i in range(args.processes)]
    procs, pipes = [], []
    for i, share in enumerate(shares):
        receiver, sender = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_load_process, args=(port, project, share, i + 1, plan, sender), daemon=True)
        proc.start()
        sender.close()
        procs.append(proc)
        pipes.append(receiver)
    time.sleep(max(0.0, window_start - time.monotonic()))
    cpu_before = {k: sum(cpu_seconds(p) for p in v) for k, v in pids.items()}
    rounds_before = statement_rounds(port)
    time.sleep(max(0.0, window_end - time.monotonic()))
    cpu_after = {k: sum(cpu_seconds(p) for p in v) for k, v in pids.items()}
    rounds_after = statement_rounds(port)
    records: list[tuple] = []
    client_cpu = 0.0
    for receiver, proc in zip(pipes, procs, strict=True):
        if not receiver.poll(180):
            raise RuntimeError(f"{name}: a load process did not report")
        got, cpu = receiver.recv()
        records.extend(got)
        client_cpu += cpu
        proc.join(timeout=30)
    timed = [r for r in records if window_start <= r[1] < window_end]
    statuses = Counter(f"{kind} {status}" for kind, _, _, status in timed)
    submits_ok = sum(1 for kind, _, _, status in timed if kind == "submit" and status == 200)
    cpu = {k: round(cpu_after[k] - cpu_before[k], 1) for k in pids}
    # The load generator's CPU is measured over its whole life (warm-up included): scaled to the window.
    cpu["load generator (scaled)"] = round(client_cpu * args.seconds / (args.seconds + args.warmup + 2), 1)
    result = {
        "phase": name, "cycle_s": cycle, "taggers": len(tokens), "seconds": args.seconds,
        "submits_per_s": round(submits_ok / args.seconds, 1),
        "next": _latency([r[2] for r in timed if r[0] == "next" and (r[3] == 200 or isinstance(r[3], str))]),
        "submit": _latency([r[2] for r in timed if r[0] == "submit" and r[3] == 200]),
        "answers": dict(sorted(statuses.items())),
        "cpu_seconds": cpu,
        "cpu_ms_per_submit": {k: round(v * 1000 / submits_ok, 1) for k, v in cpu.items()} if submits_ok else {},
        **_rounds_per_submit(rounds_before, rounds_after, submits_ok),
    }
    _note(name, result)
    return result


_COUNT_LINE = re.compile(r'^chronicle_cassandra_query_seconds_count\{statement="([^"]*)"\} ([0-9.e+]+)$', re.M)


def statement_rounds(port: int) -> Counter[str]:
    """Driver rounds so far per statement name, summed over the gunicorn workers and the tagging worker (they
    share Prometheus' directory): each execute, and each round of writes sent together, counts one."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        body = conn.getresponse().read().decode()
    finally:
        conn.close()
    return Counter({name: float(count) for name, count in _COUNT_LINE.findall(body)})


# Every lightweight transaction of tagging, by the name its metrics carry.
TRANSACTIONS = frozenset(v.name for module in (items, control) for v in vars(module).values()
                         if isinstance(v, Statement) and v.conditional)


def _rounds_per_submit(before: Counter[str], after: Counter[str], submits: int) -> dict[str, Any]:
    """The window's driver rounds and lightweight transactions per submitted item, by statement (a round of
    writes sent together counts once under each statement it carried, so the total overstates rounds a little)."""
    if not submits:
        return {}
    per = {name: round((after[name] - before[name]) / submits, 2) for name in after if after[name] > before[name]}
    txns = {name: n for name, n in per.items() if name in TRANSACTIONS}
    return {"rounds_per_submit": round(sum(per.values()), 2), "transactions_per_submit": round(sum(txns.values()), 2),
            "transactions_by_statement": dict(sorted(txns.items(), key=lambda kv: -kv[1])),
            "rounds_by_statement": dict(sorted(per.items(), key=lambda kv: -kv[1]))}


# ------------------------------------------------------------------------------------------------ top-up

def bench_topups(db: Database, network: str, authors: list[int], rounds: int) -> dict[str, Any]:
    """run_once on fresh projects of TOPUP_ITEMS items with an empty queue of 1,000; then an idle pass."""
    fills, idles = [], []
    for r in range(rounds):
        project = f"topup{r}-{random.randrange(16 ** 6):06x}"
        service.create_project(db, project, project, {"kind": "network", "network": network, "authors": authors},
                               CATEGORIES, SUBCATEGORIES, queue_size=1000, teams={"t": None})
        started = time.perf_counter()
        done = worker.run_once(db, project)
        fills.append(time.perf_counter() - started)
        if done.get("queued") != 1000:
            raise RuntimeError(f"the top-up of {project} queued {done}, not 1,000 items")
        started = time.perf_counter()
        worker.run_once(db, project)
        idles.append(time.perf_counter() - started)
    result = {"projects": rounds, "queue_size": 1000, "items_per_project": TOPUP_ITEMS,
              "fill_seconds": [round(x, 3) for x in fills], "fill_median_s": round(statistics.median(fills), 3),
              "fill_max_s": round(max(fills), 3), "idle_pass_median_s": round(statistics.median(idles), 3)}
    _note("topup", result)
    return result


# ------------------------------------------------------------------------------------------------ main

def run(args: argparse.Namespace) -> dict[str, Any]:
    node = local_node()
    result: dict[str, Any] = {"bench": "tagging", "args": vars(args), "cpus": os.cpu_count()}
    started = time.perf_counter()
    with scratch_keyspace("tagbench", keep=args.keep, request_timeout=30.0) as db:
        result["keyspace"] = db.keyspace
        network = "tagbench"
        t0 = time.perf_counter()
        authors = archive(db, network, args.items)
        project = "bench"
        items, tokens = make_project(db, project, network, authors, teams=args.teams, quota=args.items,
                                     taggers=args.taggers)
        result["setup"] = {"items": items, "taggers": len(tokens), "teams": args.teams,
                           "seconds": round(time.perf_counter() - t0, 1)}
        _note("setup", result["setup"])
        logs = Path(os.environ.get("TMPDIR", "/tmp")) / f"chronicle-bench-tagging-{os.getpid()}"
        env = {"CHRONICLE_ADMIN_TOKEN": ADMIN_TOKEN, "CHRONICLE_TAGGING_TICK": str(args.tick)}
        with served(db.settings, logs, workers=args.workers, threads=args.threads, env=env,
                    beside={"tagging-worker": [str(BIN / "chronicle"), "tagging", "worker"]}) as srv:
            port, master, tagging_worker = srv.port, srv.master, srv.beside["tagging-worker"]
            time.sleep(3)  # the worker's first pass fills the queue
            pids = {"cassandra": [read_pid(node) or 0], "gunicorn workers": _children(master.pid),
                    "tagging worker": [tagging_worker.pid]}
            phases = [run_phase("paced", port, project, tokens, args, args.cycle, pids)]
            if not args.skip_saturation:
                phases.append(run_phase("saturation", port, project, tokens, args, 0.0, pids))
            result["phases"] = phases
            status, stats = _get(port, f"/tagging/projects/{project}/stats", ADMIN_TOKEN)
            result["stats_project"] = stats.get("project") if status == 200 else {"status": status}
        result["topup"] = None
        if args.topups:
            small = "tagbenchtopup"  # a network of TOPUP_ITEMS posts: each top-up project lists them all
            result["topup"] = bench_topups(db, small, archive(db, small, TOPUP_ITEMS), args.topups)
    result["seconds"] = round(time.perf_counter() - started, 1)
    paced = result["phases"][0]
    result["figures"] = {
        f"{p['phase']}_submits_per_s": p["submits_per_s"] for p in result["phases"]
    } | {
        f"{p['phase']}_next_p50_p99_ms": [p["next"].get("p50_ms"), p["next"].get("p99_ms")] for p in result["phases"]
    } | {
        f"{p['phase']}_submit_p50_p99_ms": [p["submit"].get("p50_ms"), p["submit"].get("p99_ms")]
        for p in result["phases"]
    }
    best = max(p["submits_per_s"] for p in result["phases"])
    result["verdict"] = {
        "submits_>=_200_per_s": best >= 200,
        "next_p99_<=_50ms (paced)": (paced["next"].get("p99_ms") or 1e9) <= 50,
        "submit_p99_<=_50ms (paced)": (paced["submit"].get("p99_ms") or 1e9) <= 50,
        # Issue 33's targets: 140 submits/s with 200 paced taggers; the submit p99 below saturation (a run with
        # fewer taggers than the machine serves, e.g. --taggers 100 --skip-saturation).
        "submits_>=_140_per_s (paced, issue 33)": paced["submits_per_s"] >= 140,
        "submit_p99_<=_100ms (paced, issue 33)": (paced["submit"].get("p99_ms") or 1e9) <= 100,
    }
    if result["topup"]:
        result["figures"]["topup_1000_median_s"] = result["topup"]["fill_median_s"]
        result["verdict"]["topup_1000_<=_1s"] = result["topup"]["fill_max_s"] <= 1.0
    _table(result)
    return result


def _scenario(name: str, args: argparse.Namespace, run: Callable[[Path], dict[str, Any]],
              figures: tuple[str, ...]) -> dict[str, Any]:
    """One of the load test's scenarios, run by `run(logs)` (it raises if a check fails), as a bench result: its
    summary, seconds, and the `figures` named (with the run's seconds)."""
    result: dict[str, Any] = {"bench": f"tagging-{name}", "args": vars(args), "cpus": os.cpu_count()}
    started = time.perf_counter()
    summary = run(Path(os.environ.get("TMPDIR", "/tmp")) / f"chronicle-bench-tagging-{name}-{os.getpid()}")
    result["summary"] = summary
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["figures"] = {"run_seconds": summary["seconds"], **{key: summary[key] for key in figures}}
    result["verdict"] = {"every_check_of_the_load_test_held": True}  # the scenario raised otherwise
    _note(f"{name} run", result["figures"])
    return result


def faulted_run(args: argparse.Namespace) -> dict[str, Any]:
    """The load test's faulted scenario at full size (see the module docstring); raises if a check fails."""
    from tests.tagging.test_tagging_load import killed_worker_run

    def run(logs: Path) -> dict[str, Any]:
        with scratch_keyspace("tagfault", keep=args.keep, request_timeout=30.0) as db:
            summary = killed_worker_run(db, db.settings, logs, items_wanted=args.faulted_items,
                                        taggers=args.faulted_taggers, seconds=900)
            return {**summary, "keyspace": db.keyspace}

    return _scenario("faulted", args, run, ("items_per_s", "leases"))


def restart_run(args: argparse.Namespace) -> dict[str, Any]:
    """The load test's node-restart scenario (see the module docstring); raises if a check fails."""
    from tests.tagging.test_tagging_load import node_restart_run

    return _scenario("restart", args, lambda logs: node_restart_run(
        Settings.from_env(), logs, items_wanted=args.restart_items, taggers=args.restart_taggers),
        ("node_away_s", "leases"))


def _table(result: dict[str, Any]) -> None:
    lines = ["", "| phase | taggers | submits/s | next p50 / p99 ms | submit p50 / p99 ms | other answers |",
             "|---|---|---|---|---|---|"]
    for p in result["phases"]:
        other = {k: v for k, v in p["answers"].items() if not k.endswith(" 200")}
        lines.append(f"| {p['phase']} (cycle {p['cycle_s']} s) | {p['taggers']} | {p['submits_per_s']} | "
                     f"{p['next'].get('p50_ms')} / {p['next'].get('p99_ms')} | "
                     f"{p['submit'].get('p50_ms')} / {p['submit'].get('p99_ms')} | {other or '-'} |")
    if result["topup"]:
        t = result["topup"]
        lines.append(f"\nqueue top-up of 1,000 items (run_once, {t['projects']} projects): median "
                     f"{t['fill_median_s']} s, max {t['fill_max_s']} s; idle pass {t['idle_pass_median_s']} s")
    for p in result["phases"]:
        lines.append(f"CPU ms per submit ({p['phase']}): {p['cpu_ms_per_submit']}")
        lines.append(f"per submit ({p['phase']}): {p.get('transactions_per_submit')} transactions "
                     f"{p.get('transactions_by_statement')}, {p.get('rounds_per_submit')} statement rounds")
    lines.append(f"verdict: {result['verdict']}")
    print("\n".join(lines), file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--taggers", type=int, default=200, help="simulated taggers")
    parser.add_argument("--processes", type=int, default=4, help="load-generator processes (taggers split evenly)")
    parser.add_argument("--seconds", type=float, default=40.0, help="measured seconds per phase")
    parser.add_argument("--warmup", type=float, default=5.0, help="untimed seconds before each window")
    parser.add_argument("--cycle", type=float, default=1.0, help="seconds per tagger cycle in the paced phase")
    parser.add_argument("--items", type=int, default=20_000, help="items of the project (enough for both phases)")
    parser.add_argument("--teams", type=int, default=4, help="teams the taggers are spread over")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=8, help="threads per gunicorn worker")
    parser.add_argument("--tick", type=float, default=1.0, help="CHRONICLE_TAGGING_TICK of the tagging worker")
    parser.add_argument("--topups", type=int, default=5, help="fresh projects for the top-up timing (0: skip)")
    parser.add_argument("--skip-saturation", action="store_true", help="only the paced phase")
    parser.add_argument("--keep", action="store_true", help="keep the scratch keyspace")
    parser.add_argument("--faulted-run", action="store_true",
                        help="only the load test's faulted scenario at full size (see above)")
    parser.add_argument("--faulted-items", type=int, default=5000, help="items of the faulted run")
    parser.add_argument("--faulted-taggers", type=int, default=50, help="taggers of the faulted run")
    parser.add_argument("--restart-run", action="store_true",
                        help="only the load test's node-restart scenario (see above)")
    parser.add_argument("--restart-items", type=int, default=400, help="items of the restart run")
    parser.add_argument("--restart-taggers", type=int, default=20, help="taggers of the restart run")
    args = parser.parse_args(argv)
    if args.restart_run:
        configure_logging("WARNING", stream=sys.stderr)
        write_result("tagging-restart", restart_run(args))
        return 0
    if args.faulted_run:
        configure_logging("WARNING", stream=sys.stderr)
        write_result("tagging-faulted", faulted_run(args))
        return 0
    if args.taggers < args.processes:
        parser.error("--taggers must be at least --processes")
    configure_logging("WARNING", stream=sys.stderr)
    write_result("tagging", run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
