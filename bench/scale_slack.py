#!/usr/bin/env python3
"""Scale suite, Slack part: a file backlog of 200,000 pending files drained by two worker processes.

1. drops and migrates its own keyspace (default chronicle_scale_slack) on the local node;
2. loads the backlog with the project's own ingest rows (`ingest.message_rows`: message row, day listing, one
   work-queue item per file) through `Database.execute_many`: one file per message, spread over several
   workspaces and channels; a chosen 10% of the files (every tenth) fail twice (HTTP 500) before succeeding;
3. serves the files from the loopback fake file host (tests/fakes/slack_file_host.py) in this process;
4. starts TWO `chronicle slack file-worker` processes (the real command, real leases) and waits until every file
   has been served once with its bytes, then stops them with SIGTERM (they hand their shards back);
5. verifies: every file fetched successfully exactly once (the host's counts), every message records its file
   (Cassandra, read at LOCAL_QUORUM), every file on disk, the queue's backlog empty;
6. prints one JSON object (files/s, fetch counts, elapsed, worker errors) and writes it to
   bench/results/scale_slack-<timestamp>.json.

Standalone on purpose: the partition sizes and node-log scan of bench/scale_common.py can be added to the report
later (`--keep-keyspace` leaves the keyspace for nodetool) without changing how these figures are measured.

    python -m bench.scale_slack                      # full size: 200,000 files, 4 workspaces, 2 workers
    python -m bench.scale_slack --files 5000         # a quick run
(run as a module from the repository root: it uses the loopback file host of tests/fakes/)
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import click

from api.config import Settings
from api.db import Database
from api.migrations import migrate
from api.slack import file_queue, ingest, messages
from api.slack.messages import NewMessage
from api.slack.timeutil import day_of, us_to_ts
from tests.fakes.slack_file_host import FakeSlackFileHost

ROOT = Path(__file__).resolve().parents[1]

TOKEN = "xoxb-scale-bench"
BASE_TS = 1_763_000_000 * 1_000_000  # 2025-11-13: the messages' times (the queue's due times are "now")


@dataclasses.dataclass(frozen=True)
class File:
    team: str
    channel: str
    ts: int
    file_id: str
    flaky: bool

    def path(self) -> str:
        return f"/flaky/{self.file_id}" if self.flaky else f"/files/{self.file_id}"


def backlog_files(n: int, workspaces: int, channels: int) -> list[File]:
    """One file per message; every tenth file is flaky (fails twice)."""
    out = []
    for i in range(n):
        w = i % workspaces
        out.append(File(team=f"TSCALE{w}", channel=f"CSCALE{w}X{i % channels}", ts=BASE_TS + i * 1000,
                        file_id=f"F{i:07d}", flaky=i % 10 == 3))
    return out


def load(db: Database, files: list[File], base_url: str) -> float:
    started = time.perf_counter()

    def rows():
        for f in files:
            url = f"{base_url}{f.path()}" + ("?fail=2" if f.flaky else "")
            msg = NewMessage(team_id=f.team, channel_id=f.channel, ts=f.ts, msg_ts=us_to_ts(f.ts), user="U1",
                             text="", subtype="file_share",
                             files=[{"id": f.file_id, "name": f"{f.file_id}.txt", "mimetype": "text/plain",
                                     "url_private": url}])
            yield from ingest.message_rows(db, msg, write_ts=f.ts, original=True)

    done = {"n": 0, "next": 0}

    def progress(k: int) -> None:
        done["n"] += k
        if done["n"] >= done["next"]:
            print(f"  loaded {done['n']:,} rows", file=sys.stderr)
            done["next"] += 200_000

    db.execute_many(rows(), concurrency=256, progress=progress)
    return time.perf_counter() - started


def start_worker(i: int, keyspace: str, settings: Settings, root: Path, args: dict, log: Path
                 ) -> subprocess.Popen:
    env = {**os.environ, "CHRONICLE_KEYSPACE": keyspace, "CHRONICLE_CASSANDRA_PORT": str(settings.cassandra_port),
           "CHRONICLE_SLACK_BOT_TOKEN": TOKEN, "CHRONICLE_FILES_ROOT": str(root), "CHRONICLE_LOG_LEVEL": "WARNING",
           "CHRONICLE_FILES_BACKOFF_SECONDS": str(args["backoff"]), "CHRONICLE_FILES_BATCH": str(args["batch"]),
           "CHRONICLE_FILES_CONCURRENCY": str(args["concurrency"]), "CHRONICLE_FILES_TIMEOUT": "10",
           "CHRONICLE_SLACK_FILE_HOSTS": args["file_host"],
           "PYTHONPATH": str(ROOT)}
    with log.open("w") as sink:  # a file, not a pipe: a full pipe would stall the worker
        return subprocess.Popen([sys.executable, "-m", "api.cli", "slack", "file-worker", "--interval", "0.2"],
                                env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=sink)


def node_cpu_seconds() -> float | None:
    """CPU time (user + system) of the local Cassandra process so far, from /proc (None when not found)."""
    for stat in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"CassandraDaemon" in stat.read_bytes():
                fields = (stat.parent / "stat").read_text().rsplit(")", 1)[1].split()
                return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            continue
    return None


def verify_recorded(db: Database, files: list[File]) -> int:
    """Messages that do not record their file as stored (read at LOCAL_QUORUM, 256 in flight)."""
    from cassandra.concurrent import execute_concurrent_with_args

    prepared = db.prepared(messages.SELECT_FILES_STORED)
    params = [(f.team, f.channel, day_of(f.ts), f.ts) for f in files]
    missing = 0
    results = execute_concurrent_with_args(db.session, prepared, params, concurrency=256, results_generator=True)
    for f, (ok, result) in zip(files, results, strict=True):
        row = result.one() if ok else None
        if row is None or not row.files_stored or f.file_id not in row.files_stored:
            missing += 1
    return missing


@click.command()
@click.option("--files", "n_files", default=200_000, show_default=True, help="Pending files in the backlog.")
@click.option("--workspaces", default=4, show_default=True)
@click.option("--channels", default=25, show_default=True, help="Channels per workspace.")
@click.option("--workers", default=2, show_default=True, help="Worker processes.")
@click.option("--concurrency", default=16, show_default=True, help="Download threads per worker.")
@click.option("--batch", default=200, show_default=True, help="Files per take.")
@click.option("--backoff", default=0.5, show_default=True, help="First retry delay (s).")
@click.option("--max-seconds", default=1800, show_default=True, help="Give up draining after this long.")
@click.option("--keyspace", default="chronicle_scale_slack", show_default=True)
@click.option("--keep-keyspace", is_flag=True, help="Leave the keyspace for inspection (nodetool, cqlsh).")
def main(n_files: int, workspaces: int, channels: int, workers: int, concurrency: int, batch: int, backoff: float,
         max_seconds: int, keyspace: str, keep_keyspace: bool) -> None:
    settings = dataclasses.replace(Settings.from_env(), keyspace=keyspace, request_timeout=30.0)
    admin = Database(settings, keyspace="")
    admin.execute_raw(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
    migrate(admin, keyspace, settings.replication_map(), log=lambda m: None)
    db = Database(settings)
    root = Path(tempfile.mkdtemp(prefix="chronicle-scale-slack-"))
    files = backlog_files(n_files, workspaces, channels)
    report: dict = {"benchmark": "scale_slack", "started": datetime.now(UTC).isoformat(timespec="seconds"),
                    "files": n_files, "workspaces": workspaces, "flaky_files": sum(f.flaky for f in files),
                    "workers": workers, "threads_per_worker": concurrency, "batch": batch, "keyspace": keyspace}
    procs: list[subprocess.Popen] = []
    try:
        with FakeSlackFileHost(token=TOKEN) as host:
            print(f"loading {n_files:,} pending files into {keyspace} ...", file=sys.stderr)
            report["load_seconds"] = round(load(db, files, host.base_url), 1)
            before = file_queue.backlog(db)
            report["backlog_before"] = {"total": before["total"], "capped_groups": before["capped"]}
            print(f"loaded in {report['load_seconds']} s; starting {workers} workers", file=sys.stderr)
            args = {"backoff": backoff, "batch": batch, "concurrency": concurrency, "file_host": host.file_host}
            started = time.time()
            node_cpu_before = node_cpu_seconds()
            children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            logs = [Path(tempfile.mkstemp(prefix=f"scale-slack-worker{i}-", suffix=".log")[1])
                    for i in range(workers)]
            procs = [start_worker(i, keyspace, settings, root, args, logs[i]) for i in range(workers)]
            wanted = {f.path() for f in files}
            timeline = []
            while True:
                time.sleep(1.0)
                with host._lock:
                    served = len(host.served)
                timeline.append((round(time.time() - started, 1), served))
                if len(timeline) % 10 == 0:
                    print(f"  {timeline[-1][0]:>7} s: {served:,} files served", file=sys.stderr)
                if served >= len(wanted) or time.time() - started > max_seconds:
                    break
                if any(p.poll() is not None for p in procs):
                    break  # a worker died: stop and report
            finished = host.last_served
            drain = finished - started
            report["drain_seconds"] = round(drain, 1)
            report["files_per_s"] = round(len(host.served) / drain, 1) if drain > 0 else None
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            node_cpu_after = node_cpu_seconds()
            for p in procs:
                p.wait(timeout=120)
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            report["worker_cpu_seconds"] = round(children.ru_utime + children.ru_stime - children_before.ru_utime
                                                 - children_before.ru_stime, 1)
            if node_cpu_before is not None and node_cpu_after is not None:
                report["node_cpu_seconds"] = round(node_cpu_after - node_cpu_before, 1)
            report["load_average_1m_at_end"] = os.getloadavg()[0]
            worker_logs = [log.read_text() for log in logs]
            hits = {path: host.hits[path] for path in wanted}
            served_counts = Counter(host.served[path] for path in wanted)
            fetches = Counter(hits.values())
            report["fetch_counts"] = {f"{k} fetch(es)": v for k, v in sorted(fetches.items())}
            report["fetch_counts_flaky"] = dict(Counter(hits[f.path()] for f in files if f.flaky))
            report["fetch_counts_plain"] = dict(Counter(hits[f.path()] for f in files if not f.flaky))
            report["served_with_bytes"] = {f"{k}x": v for k, v in sorted(served_counts.items())}
            report["progress"] = timeline[:: max(1, len(timeline) // 20)]
        report["worker_exit_codes"] = [p.returncode for p in procs]
        totals = [re.findall(r"total: (.*)", log)[-1:] for log in worker_logs]
        report["worker_totals"] = [t[0] if t else None for t in totals]
        errors = [line for log in worker_logs for line in log.splitlines()
                  if "Traceback" in line or "Error" in line or '"level": "error"' in line]
        report["worker_errors"] = errors[:20]
        report["worker_error_lines"] = len(errors)
        on_disk = sum(len(names) for _, _, names in os.walk(root))
        report["files_on_disk"] = on_disk
        report["messages_without_their_file"] = verify_recorded(db, files)
        time.sleep(file_queue.workqueue.SETTLE_US / 1e6 + 2)  # the checkpoints' last step waits SETTLE_US
        # One more pass so the last checkpoints are written, then the queue must be empty.
        after_env = subprocess.run(
            [sys.executable, "-m", "api.cli", "slack", "file-worker", "--once"],
            env={**os.environ, "CHRONICLE_KEYSPACE": keyspace, "CHRONICLE_SLACK_BOT_TOKEN": TOKEN,
                 "CHRONICLE_CASSANDRA_PORT": str(settings.cassandra_port),
                 "CHRONICLE_FILES_ROOT": str(root), "CHRONICLE_LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT)},
            cwd=ROOT, capture_output=True, text=True, timeout=300)
        report["final_pass"] = (re.findall(r"total: (.*)", after_env.stderr) or [after_env.stderr[-300:]])[-1]
        report["backlog_after"] = file_queue.backlog(db)["total"]
        report["stored_exactly_once"] = (set(served_counts) == {1} and on_disk == n_files
                                         and report["messages_without_their_file"] == 0)
        report["target_files_per_s"] = 200
        report["target_met"] = bool(report["stored_exactly_once"] and (report["files_per_s"] or 0) >= 200)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        shutil.rmtree(root, ignore_errors=True)
        db.close()
        if not keep_keyspace:
            admin.execute_raw(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
        admin.close()
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"scale_slack-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report))
    print(f"written to {path.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
