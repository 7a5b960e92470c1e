"""Slack history in and out, measured on the local node (issue 9): export ZIP import and export rates with the
commands' peak memory, and a Web API backfill against the loopback Slack stand-in at a configured rate limit,
killed twice and resumed.

    python -m bench.slack_history [--messages 1000000] [--small 100000] [--parts import,export,backfill]
                                  [--rich-share 0.4]

- import: generates exports of `--small` and `--messages` messages (50 public channels, 2 years, threads,
  reactions, edits, files; tests/fakes/slack_export.py), imports each with `chronicle slack import-export` in a
  child process, and reports messages/s and the child's peak RSS (targets: >= 5,000 messages/s, <= 300 MB
  whatever the size);
- export: `chronicle slack export` of the big import (target >= 10,000 messages/s, memory bounded), a
  field-level diff of every generated message against the exported one (target: 0 fields lost beyond
  docs/slack-messages.md's normalisations), and the exported ZIP re-imported into a second workspace is
  compared with the first, channel by channel. `--rich-share` of the user messages carry Block Kit blocks and
  a link unfurl attachment (issue 27: 40%);
- backfill: `chronicle slack backfill` against FakeSlackWebApi with a rate limit per method; the run is killed
  (SIGKILL) twice and restarted, then an uninterrupted run of the same workspace goes into a second workspace;
  reports requests/s per method against the allowed rate, the time the limit forces, and whether both
  workspaces' tables are identical.

Prints one JSON object and writes it under bench/results/. Each part runs in a scratch keyspace, dropped after.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from api.db import Database
from api.slack import channels, messages, users
from bench.scale_common import ROOT, scratch_keyspace, write_result
from tests.fakes.slack_export import ExportSpec, write_export
from tests.fakes.slack_web_api import DEFAULT_TOKEN, FakeSlackWebApi

CHRONICLE = str(Path(sys.executable).with_name("chronicle"))
_RSS_WRAPPER = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
                "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
                "sys.exit(r.returncode)")


def _env(keyspace: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "CHRONICLE_KEYSPACE": keyspace, "PYTHONPATH": str(ROOT), **extra}


def _measured(args: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Run a command in a child; (seconds, peak RSS in MB of the command, stdout)."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _RSS_WRAPPER, *args], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{args[:3]} exited {done.returncode}: {done.stderr[-2000:]}")
    rss_kb = int(done.stderr.strip().splitlines()[-1])
    return elapsed, rss_kb // 1024, done.stdout


def _note(part: str, figures: dict[str, Any]) -> None:
    """A part's figures on stderr as soon as they are known (a later failure does not lose them)."""
    print(f"{part}: {figures}", file=sys.stderr, flush=True)


def _spec(n: int, seed: int, rich_share: float, days: int = 730) -> ExportSpec:
    return ExportSpec(seed=seed, team_id="TBENCHHIST", messages=n, n_users=200, n_channels=50, n_private=0,
                      n_dms=0, n_mpims=0, days=days, thread_share=0.08, reaction_share=0.15, edit_share=0.05,
                      file_share=0.02, rich_share=rich_share, pretty=False)


def _normalised(m: dict[str, Any]) -> dict[str, Any]:
    """A message as Chronicle's export writes it (docs/slack-messages.md "Normalisations": reactions by emoji,
    users by id, count = users)."""
    out = dict(m)
    if isinstance(out.get("reactions"), list):
        out["reactions"] = sorted(({**r, "users": sorted(r["users"]), "count": len(r["users"])}
                                   for r in out["reactions"]), key=lambda r: r["name"])
    return out


def fields_lost(original: Path, exported: Path) -> dict[str, Any]:
    """Field-level diff of every message of `original` against the same message in `exported` (both ZIPs, day
    files dated in UTC): how many fields are missing or differ, by field name, and messages missing."""
    import json
    import zipfile

    lost: Counter[str] = Counter()
    missing = compared = 0
    with zipfile.ZipFile(original) as a, zipfile.ZipFile(exported) as b:
        names = set(b.namelist())
        for name in a.namelist():
            if "/" not in name or not name.endswith(".json"):
                continue
            want = json.loads(a.read(name))
            got = {m["ts"]: m for m in json.loads(b.read(name))} if name in names else {}
            for m in want:
                compared += 1
                back = got.get(m["ts"])
                if back is None:
                    missing += 1
                    continue
                theirs, ours = _normalised(m), _normalised(back)
                lost.update(k for k, v in theirs.items() if ours.get(k) != v)
    return {"messages_compared": compared, "messages_missing": missing, "fields_lost": sum(lost.values()),
            "fields_lost_by_name": dict(lost.most_common(20))}


def channel_state(db: Database, team: str, *, include_deleted: bool = True) -> dict[str, Any]:
    """Every message of every channel (as the API shows it) and the users, for comparisons."""
    out: dict[str, Any] = {"users": sorted((u["user_id"], u.get("name"), u.get("tz"), str(u.get("first_post")))
                                           for u in _all_users(db, team))}
    after = ""
    while True:
        entries, nxt = channels.index_page(db, team, limit=1000, after=after, include_deleted=True)
        for entry in entries:
            cid, rows, upper = entry["channel_id"], [], messages.MAX_US
            while True:
                page, nxt_pos = messages.timeline(db, team, [cid], limit=1000, upper=upper,
                                                  include_deleted=include_deleted)
                rows.extend(m.to_json() for m in page)
                if nxt_pos is None:
                    break
                upper = nxt_pos
            out[cid] = (entry["name"], rows)
        if nxt is None:
            return out
        after = nxt


def _all_users(db: Database, team: str) -> list[dict[str, Any]]:
    found, position = [], (0, "")
    while position is not None:
        page, position = users.page(db, team, limit=1000, bucket=position[0], after=position[1])
        found.extend(page)
    return found


def bench_import_export(n_big: int, n_small: int, workdir: Path, do_export: bool, rich_share: float, days: int = 730
                        ) -> dict[str, Any]:
    out: dict[str, Any] = {"rich_share": rich_share}
    for label, n in (("small", n_small), ("big", n_big)):
        path = workdir / f"export-{n}.zip"
        started = time.perf_counter()
        summary = write_export(path, _spec(n, seed=n, rich_share=rich_share, days=days))
        out[f"generated_{label}"] = {"messages": summary.messages, "threads": summary.threads,
                                     "replies": summary.replies, "files": summary.files,
                                     "zip_mb": round(summary.zip_bytes / 1e6, 1), "day_files": summary.day_files,
                                     "seconds": round(time.perf_counter() - started, 1)}
        with scratch_keyspace("hist", request_timeout=60.0) as db:
            seconds, rss, _ = _measured([CHRONICLE, "slack", "import-export", str(path), "--no-progress"],
                                        _env(db.keyspace))
            out[f"import_{label}"] = {"messages": summary.messages, "seconds": round(seconds, 1),
                                      "messages_per_s": round(summary.messages / seconds),
                                      "peak_rss_mb": rss}
            _note(f"import_{label}", out[f"import_{label}"])
            if label != "big" or not do_export:
                continue
            exported = workdir / "exported.zip"
            seconds, rss, _ = _measured([CHRONICLE, "slack", "export", "--team", "TBENCHHIST", "--out",
                                         str(exported), "--tz", "UTC", "--no-progress"], _env(db.keyspace))
            out["export_big"] = {"messages": summary.messages, "seconds": round(seconds, 1),
                                 "messages_per_s": round(summary.messages / seconds), "peak_rss_mb": rss,
                                 "zip_mb": round(exported.stat().st_size / 1e6, 1)}
            _note("export_big", out["export_big"])
            out["round_trip_fields"] = fields_lost(path, exported)
            _note("round_trip_fields", out["round_trip_fields"])
            _measured([CHRONICLE, "slack", "import-export", str(exported), "--team", "TBENCHBACK", "--as-copy",
                       "--no-progress"],
                      _env(db.keyspace))
            first, again = channel_state(db, "TBENCHHIST"), channel_state(db, "TBENCHBACK")
            out["round_trip_equal"] = first == again
            out["round_trip_channels"] = len(first) - 1
    return out


def _fill(fake: FakeSlackWebApi, channel_count: int, per_channel: int, seed: int = 5) -> int:
    rng = random.Random(seed)
    for i in range(50):
        fake.add_user(f"UB{i:04d}", f"user{i}", updated=1_690_000_000 + i)
    total = 0
    for c in range(channel_count):
        cid = f"CB{c:04d}"
        fake.add_channel(cid, f"channel-{c}", created=1_690_000_000)
        fake.set_members(cid, [f"UB{i:04d}" for i in rng.sample(range(50), 20)])
        for m in range(per_channel):
            ts = fake.post(cid, f"UB{rng.randrange(50):04d}", f"message {m} of {cid}")
            total += 1
            if rng.random() < 0.03:
                for r in range(rng.randint(2, 6)):
                    fake.post(cid, f"UB{rng.randrange(50):04d}", f"reply {r}", thread_ts=ts)
                    total += 1
            if rng.random() < 0.1:
                fake.react(cid, ts, rng.choice(["wave", "eyes", "tada"]), f"UB{rng.randrange(50):04d}")
    return total


def bench_backfill(channel_count: int, per_channel: int, per_second: int, window: float) -> dict[str, Any]:
    with FakeSlackWebApi(team_id="TBACKKILL") as fake, scratch_keyspace("hist", request_timeout=60.0) as db:
        total = _fill(fake, channel_count, per_channel)
        # A per-method limit (Slack's tiers are per method): `per_second` a second over a sliding `window` (the
        # fake's `rate_per_minute` is the number accepted per `window_seconds`).
        fake.rate_per_minute = {m: int(per_second * window) for m in (
            "conversations.history", "conversations.replies", "conversations.list", "conversations.members",
            "users.list", "auth.test")}
        fake.window_seconds = window
        args = [CHRONICLE, "slack", "backfill", "--team", "TBACKKILL", "--max-age-days", "0", "--no-progress"]
        env = _env(db.keyspace, CHRONICLE_SLACK_API_URL=fake.base_url,
                   CHRONICLE_SLACK_BOT_TOKENS=f"TBACKKILL={DEFAULT_TOKEN},TBACKCLEAN={DEFAULT_TOKEN}")
        # The uninterrupted run first: it tells how long a run takes, so the kills land mid-run.
        fake.team_id = "TBACKCLEAN"
        started = time.perf_counter()
        clean = subprocess.run([*args[:4], "TBACKCLEAN", *args[5:]], env=env, capture_output=True, text=True)
        clean_seconds = time.perf_counter() - started
        if clean.returncode != 0:
            raise RuntimeError(clean.stderr[-2000:])
        requests = Counter(m for _, m, status in fake.requests if status == 200)
        limited = sum(1 for _, _, status in fake.requests if status == 429)
        # Time the limit forces: per method, N requests at R per window need (ceil(N / (R * W)) - 1) * W.
        forced = max((math.ceil(n / (per_second * window)) - 1) * window for n in requests.values())
        fake.team_id = "TBACKKILL"
        fake.reset_counters()
        kills, segments = 0, []
        for fraction in (0.3, 0.35):
            proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            t0 = time.perf_counter()
            try:
                proc.wait(timeout=clean_seconds * fraction)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
            segments.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        final = subprocess.run(args, env=env, capture_output=True, text=True)
        segments.append(time.perf_counter() - t0)
        if final.returncode != 0:
            raise RuntimeError(final.stderr[-2000:])
        equal = channel_state(db, "TBACKKILL") == channel_state(db, "TBACKCLEAN")
        return {
            "workspace": {"channels": channel_count, "messages_with_replies": total, "users": 50},
            "allowed_per_method_per_s": per_second, "window_s": window,
            "clean_run": {"seconds": round(clean_seconds, 1), "requests": dict(requests),
                          "requests_429": limited,
                          "requests_per_s_by_method": {m: round(n / clean_seconds, 2) for m, n in requests.items()},
                          "forced_minimum_s": forced,
                          "seconds_over_forced": round(clean_seconds - forced, 1)},
            "killed_run": {"kills": kills, "segments_s": [round(s, 1) for s in segments],
                           "requests_after_kills": dict(Counter(m for _, m, s in fake.requests if s == 200))},
            "tables_identical_to_uninterrupted": equal,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--parts", default="import,export,backfill")
    parser.add_argument("--rich-share", type=float, default=0.4,
                        help="import/export: share of user messages with Block Kit blocks and an attachment")
    parser.add_argument("--days", type=int, default=730, help="import/export: days the export spans (1825: 5 years)")
    parser.add_argument("--channels", type=int, default=8, help="backfill: channels")
    parser.add_argument("--per-channel", type=int, default=600, help="backfill: top-level messages a channel")
    parser.add_argument("--rate", type=int, default=10, help="backfill: allowed requests a second per method")
    parser.add_argument("--window", type=float, default=5.0, help="backfill: the rate window in seconds")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    result: dict[str, Any] = {"bench": "slack_history", "args": vars(args)}
    with tempfile.TemporaryDirectory(prefix="chronicle-hist-") as tmp:
        if parts & {"import", "export"}:
            result["import_export"] = bench_import_export(args.messages, args.small, Path(tmp), "export" in parts,
                                                          args.rich_share, args.days)
    if "backfill" in parts:
        result["backfill"] = bench_backfill(args.channels, args.per_channel, args.rate, args.window)
    ie = result.get("import_export", {})
    result["verdict"] = {k: v for k, v in {
        "import_>=_5000_msgs_per_s": ie.get("import_big", {}).get("messages_per_s", 0) >= 5000 if ie else None,
        "import_rss_<=_300MB": max(ie.get("import_big", {}).get("peak_rss_mb", 0),
                                   ie.get("import_small", {}).get("peak_rss_mb", 0)) <= 300 if ie else None,
        "export_>=_10000_msgs_per_s": ie["export_big"]["messages_per_s"] >= 10000 if "export_big" in ie else None,
        "round_trip_equal": ie.get("round_trip_equal"),
        "round_trip_0_fields_lost": (ie["round_trip_fields"]["fields_lost"] == 0
                                     and ie["round_trip_fields"]["messages_missing"] == 0)
        if "round_trip_fields" in ie else None,
        "backfill_resumed_identical": result.get("backfill", {}).get("tables_identical_to_uninterrupted"),
    }.items() if v is not None}
    write_result("slack_history", result)


if __name__ == "__main__":
    main()
