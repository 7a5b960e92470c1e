"""Report generation time against the size of the week, on the local node (issue 10).

    python -m bench.slack_report [--sizes 20000,200000,1000000] [--channels 300] [--users 5000] [--runs 2]

For each size N: generates a Slack export of 2 x N messages over 14 days (the week reported and the week before
it, 300 public channels, 5,000 users, threads, reactions, edits, mentions; tests/fakes/slack_export.py), imports
it with `chronicle slack import-export` into a scratch keyspace, then times `chronicle slack report` of the
second week (which reads both) in a child process, `--runs` times: wall time, peak RSS, rows read and the
in-process split between reading and computing. Target: <= 10 s at 200,000 messages a week. Then the same
report as the HTTP route makes it (issue 30): a job queued with `service.submit` (what POST /reports does: the
time it takes is the request's), and `chronicle slack report-worker --once` in a child process (wall time, peak
RSS, the job's final state).

Prints one JSON object and writes it under bench/results/.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.scale_common import scratch_keyspace, write_result
from bench.slack_history import CHRONICLE, _env, _measured, _note
from tests.fakes.slack_export import ExportSpec, write_export

TEAM = "TBENCHREPORT"
FIRST_DAY = datetime(2026, 2, 22, tzinfo=UTC)  # a Sunday: the previous week, then the week reported
REPORTED = "2026-03-01"


def bench_size(n: int, n_channels: int, n_users: int, runs: int, workdir: Path) -> dict[str, Any]:
    spec = ExportSpec(seed=n, team_id=TEAM, messages=2 * n, n_users=n_users, n_channels=n_channels, n_private=0,
                      n_dms=0, n_mpims=0, days=14, start=FIRST_DAY, thread_share=0.08, reaction_share=0.2,
                      edit_share=0.05, file_share=0.0, mention_share=0.15, pretty=False)
    path = workdir / f"report-{n}.zip"
    started = time.perf_counter()
    summary = write_export(path, spec)
    out: dict[str, Any] = {"week_messages": n, "generated_messages": summary.messages,
                           "generate_seconds": round(time.perf_counter() - started, 1)}
    with scratch_keyspace("rep", request_timeout=60.0) as db:
        seconds, rss, _ = _measured([CHRONICLE, "slack", "import-export", str(path), "--no-progress"],
                                    _env(db.keyspace))
        out["import_seconds"] = round(seconds, 1)
        timings = []
        for _ in range(runs):
            out_file = workdir / "report.json"
            seconds, rss, _ = _measured([CHRONICLE, "slack", "report", "--team", TEAM, "--start", REPORTED,
                                         "--out", str(out_file)], _env(db.keyspace))
            doc = json.loads(out_file.read_text())
            timings.append({"wall_seconds": round(seconds, 2), "in_process_seconds": doc["stats"]["seconds"],
                            "compute_seconds": doc["stats"]["compute_seconds"], "rows_read": doc["stats"]["rows_read"],
                            "peak_rss_mb": rss, "counted_messages": doc["totals"]["messages"]["value"],
                            "previous_messages": doc["totals"]["messages"]["previous"],
                            "stored_chunks": doc["stats"]["stored_chunks"]})
        out["runs"] = timings
        from api.slack.reports import service
        from api.slack.reports.period import Period

        started = time.perf_counter()
        job = service.submit(db, TEAM, Period.parse_id(f"{REPORTED}-7"))
        submit_ms = (time.perf_counter() - started) * 1000
        seconds, rss, _ = _measured([CHRONICLE, "slack", "report-worker", "--once"], _env(db.keyspace))
        state = service.job(db, TEAM, job["job_id"]) or {}
        out["job"] = {"submit_ms": round(submit_ms, 1), "worker_wall_seconds": round(seconds, 2),
                      "worker_peak_rss_mb": rss, "state": state.get("state"), "messages": state.get("messages")}
    path.unlink()
    _note(f"report_{n}", out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="20000,200000,1000000", help="messages per week, comma-separated")
    parser.add_argument("--channels", type=int, default=300)
    parser.add_argument("--users", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"channels": args.channels, "users": args.users, "sizes": []}
    with tempfile.TemporaryDirectory(prefix="chronicle-report-bench-") as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            result["sizes"].append(bench_size(n, args.channels, args.users, args.runs, Path(tmp)))
    write_result("slack_report", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
