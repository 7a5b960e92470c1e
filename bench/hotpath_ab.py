"""The request path of two versions of the code, A/B in one sitting (issue 33): the worker CPU a request costs
with the code at an earlier commit and with the code here, served alternately so both see the machine's drift.

    .venv/bin/python -m bench.hotpath_ab --before COMMIT [--targets timeline-304,floor,timeline] [--rounds 2]
                                         [--seconds 8] [--warmup 2] [--page-cache-mb 0]

Reads the hotpath keyspace as it is (load it with `python -m bench.hotpath` first). The code at COMMIT is checked
out in a temporary git worktree (removed after); each round serves the earlier code and then this code (the order
swapped every other round) with gunicorn at the production defaults (3 workers x 8 threads, INFO request log, no
gunicorn access log), and drives each target at c16 (bench/network_loadgen.py, 2 processes) for `--seconds` after
`--warmup`. The requests are bench/hotpath.py's: `timeline` (16 pages of the flat channel), `timeline-304` (the
same pages revalidated with their ETags), `floor` (/healthz). `--page-cache-mb 0` (the default) makes every
timeline page a built one: kept pages would hide the build's cost.

Prints a table (worker CPU ms per request of each phase, medians) and writes the JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from api.app import create_app
from bench.hotpath import ADMIN_TOKEN, TEAM, TOKEN, Target, loadgen, make_targets, write_requests
from bench.network_loadgen import Request
from bench.scale_common import ROOT, local_node, scratch_settings, served, write_result
from bench.tagging import _children

TREES = ("before", "after")


def revalidation(port: int, request: Request) -> Request:
    """`request` (a timeline page's, with the ETag of an earlier build) with the ETag the server on `port` gives
    the page now, checked to be answered 304 when sent with it."""
    headers = {k: v for k, v in request.headers.items() if k != "If-None-Match"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", request.path, headers=headers)
        answer = conn.getresponse()
        answer.read()
        tag = answer.getheader("ETag")
        conn.request("GET", request.path, headers={**headers, "If-None-Match": tag or ""})
        again = conn.getresponse()
        again.read()
    finally:
        conn.close()
    if answer.status != 200 or again.status != 304:
        raise SystemExit(f"{request.path}: {answer.status}, then {again.status} with its ETag (expected 200, 304)")
    return Request("GET", request.path, {**headers, "If-None-Match": tag or ""})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the earlier commit (anything `git worktree add` takes)")
    parser.add_argument("--targets", default="timeline-304,floor,timeline")
    parser.add_argument("--rounds", type=int, default=2, help="rounds; each serves both trees")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--page-cache-mb", default="0", help="CHRONICLE_PAGE_CACHE_MB of both (0: pages built)")
    parser.add_argument("--keyspace", default="chronicle_bench_hotpath")
    args = parser.parse_args(argv)
    targets = args.targets.split(",")
    node = local_node()
    tokens = json.dumps({TOKEN: {"workspaces": [TEAM]}})
    settings = scratch_settings(args.keyspace, node=node, api_tokens=tokens, admin_token=ADMIN_TOKEN,
                                log_level="WARNING", page_cache_bytes=0)
    shape = argparse.Namespace(variants=16, targets=targets, messages=600, flat_messages=600)
    requests = {t.name: t for t in make_targets(shape, {}, create_app(settings).test_client())}
    env = {"CHRONICLE_API_TOKENS": tokens, "CHRONICLE_ADMIN_TOKEN": ADMIN_TOKEN, "CHRONICLE_LOG_LEVEL": "INFO",
           "CHRONICLE_PAGE_CACHE_MB": args.page_cache_mb}
    samples: dict[str, dict[str, list[float]]] = {t: {tree: [] for tree in TREES} for t in targets}
    with tempfile.TemporaryDirectory(prefix="chronicle-ab-") as scratch:
        before = Path(scratch) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", "-f", str(before), args.before], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            roots = {"before": before, "after": ROOT}
            for round_no in range(args.rounds):
                for tree in TREES if round_no % 2 == 0 else TREES[::-1]:
                    logs = Path(scratch) / f"{tree}-{round_no}"
                    with served(settings, logs, env=env, app_log="app.log", root=roots[tree]) as srv:
                        pids = {"gunicorn workers": _children(srv.master.pid)}
                        for name in targets:
                            target = requests[name]
                            if name == "timeline-304":  # a tag covers the code's digest: each tree's own tags
                                target = Target(name, [revalidation(srv.port, r) for r in target.requests])
                            file = write_requests(target, logs / f"requests-{name}.jsonl")
                            loadgen(srv.port, file, args, pids, concurrency=8, seconds=2.0)  # untimed
                            out = loadgen(srv.port, file, args, pids, concurrency=16, processes=2)
                            if out.get("errors"):
                                raise SystemExit(f"{tree} {name}: {out['errors']} errors")
                            cpu = out["cpu_ms_per_request"]["gunicorn workers"]
                            samples[name][tree].append(cpu)
                            print(f"round {round_no} {tree:6} {name:13} {out['rps']:8.1f}/s  worker CPU {cpu:.3f} "
                                  "ms/request", file=sys.stderr, flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, capture_output=True)
    medians = {t: {tree: round(statistics.median(v), 3) for tree, v in s.items()} for t, s in samples.items()}
    result: dict[str, Any] = {"bench": "hotpath_ab", "args": vars(args), "samples": samples, "medians": medians,
                              "change": {t: round(m["after"] / m["before"] - 1, 3) for t, m in medians.items()}}
    lines = ["", f"worker CPU ms per request at c16, {args.before} (before) and this code (after), "
             f"{args.rounds} rounds alternated:", "", "| target | before | after | median before / after | change |",
             "|---|---|---|---|---|"]
    for name in targets:
        lines.append(f"| {name} | {', '.join(f'{v:.3f}' for v in samples[name]['before'])} | "
                     f"{', '.join(f'{v:.3f}' for v in samples[name]['after'])} | {medians[name]['before']} / "
                     f"{medians[name]['after']} | {result['change'][name]:+.1%} |")
    print("\n".join(lines), file=sys.stderr)
    path = write_result("hotpath-ab", result)
    print(f"written {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
