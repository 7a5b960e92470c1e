"""Issue 30 finding 4: a celebrity with a million followers, a tenth of them purged in one id range, and Q2+Q3 as
a queued job. Prints (and saves under bench/results/) one JSON object with the figures and a verdict.

    python -m bench.scale_followers                     # 1,000,000 followers, 99 other top accounts
    python -m bench.scale_followers --followers 200000  # smaller

What it does, on a scratch keyspace of its own (dropped afterwards unless --keep):
1. writes the celebrity's followers straight into its buckets (the layout its count wants: 32 buckets of ~31k at
   1M) and 99 other accounts' followers (legacy partitions below the line, buckets above), drawn from the same
   id pool, with their counts;
2. purges 10% of the celebrity's followers whose ids are consecutive (bots created together), from every set
   that holds them, as unfollows write it (one row tombstone each);
3. times POST /networks/{n}/rankings through the Flask app (it only queues the job: 202 with the job id);
4. runs `chronicle network worker --once` as a child process (the job, and the follower-buckets jobs it queues)
   and takes its peak RSS; compares the snapshot with Q2/Q3 computed here by brute force;
5. with --move, splits the celebrity into twice the buckets (relations.move_followers) and counts it after;
6. reads the node's system.log for tombstone warnings since step 3, and the largest partition of each follower
   table (nodetool flush + sstablepartitions).

Targets: request <= 50 ms, job RSS <= 500 MB, 0 tombstone warnings, no partition above 100k rows / 100 MB, Q2
and Q3 equal to the brute force. Exit 1 when one is missed.
"""

from __future__ import annotations

import heapq
import os
import random
import resource
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import click

from api.db import Database, set_db
from api.network import accounts, relations
from api.network.settings import NetworkSettings, set_network_settings
from api.network.values import Account
from api.node.common import NodeError
from bench import scale_common as sc

ADMIN_TOKEN = "scale-admin-token"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
NETWORK = "celebrity"
CELEBRITY = 1
BASE = 10**9  # follower ids: BASE + i
TARGETS = {"request_ms": 50, "job_rss_mb": 500, "tombstone_warnings": 0, "max_partition_rows": 100_000,
           "max_partition_mb": 100}
TABLES = ["follower_relations_by_account", "follower_buckets"]


def _write_followers(db: Database, account: int, followers: list[int], buckets: int) -> int:
    if buckets:
        db.execute_many(relations.set_layout_writes(NETWORK, account, buckets))
        # Sorted by bucket: a batch is one partition's rows (one mutation).
        followers = sorted(followers, key=lambda f: relations.bucket_of(relations.slot_of(f), buckets))
    return db.execute_many((relations.follower_write(NETWORK, account, buckets, f, f"user{f}") for f in followers),
                           batch_size=50, partitions_per_batch=1, concurrency=64)


def build(db: Database, ns: NetworkSettings, followers: int, others: int, other_followers: int, rng: random.Random
          ) -> tuple[dict[int, set[int]], dict[str, Any]]:
    """The sets written, then purged: {account: follower ids} as the reference sees them."""
    started = time.perf_counter()
    line = ns.hybrid_threshold if ns.hybrid else ns.follower_bucket_rows
    pool = BASE + int(followers * 1.2)
    sets: dict[int, set[int]] = {CELEBRITY: set(range(BASE, BASE + followers))}
    for i in range(others):
        size = other_followers + 97 * (others - i)  # distinct sizes: Q2 has no ties to argue about
        sets[2 + i] = set(rng.sample(range(BASE, pool), size))
    layouts = {}
    written = 0
    for account, members in sets.items():
        layouts[account] = relations.wanted_buckets(len(members), 0, line=line, hysteresis=ns.hybrid_hysteresis,
                                                    bucket_rows=ns.follower_bucket_rows)
        written += _write_followers(db, account, list(members), layouts[account])
    db.execute_many(w for a in sets for w in accounts.account_writes(NETWORK, Account(a, f"top{a}", 0, 0)))
    built = time.perf_counter() - started
    # The purge: 10% of the celebrity's followers, consecutive ids, from every set holding them.
    started = time.perf_counter()
    purged = range(BASE + followers // 2, BASE + followers // 2 + followers // 10)
    deletes = 0
    for account, members in sets.items():
        gone = [f for f in purged if f in members]
        deletes += db.execute_many((relations.follower_delete(NETWORK, account, layouts[account], f) for f in gone),
                                   concurrency=64)
        members.difference_update(gone)
    accounts.set_counts(db, NETWORK, {a: (len(m), 0) for a, m in sets.items()})
    return sets, {"rows_written": written, "rows_purged": deletes, "build_seconds": round(built, 1),
                  "purge_seconds": round(time.perf_counter() - started, 1),
                  "layouts": {"celebrity": layouts[CELEBRITY],
                              "others_bucketed": sum(1 for a in sets if a != CELEBRITY and layouts[a])}}


def reference(sets: dict[int, set[int]]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    q2 = heapq.nsmallest(100, ((a, len(m)) for a, m in sets.items() if m), key=lambda kv: (-kv[1], kv[0]))
    counts: Counter = Counter()
    for a, _ in q2:
        counts.update(sets[a])
    q3 = heapq.nsmallest(100, counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return q2, q3


def _worker_env(db: Database, ns: NetworkSettings) -> dict[str, str]:
    return {**os.environ, "CHRONICLE_KEYSPACE": db.keyspace, "CHRONICLE_REPLICATION": db.settings.replication,
            "CHRONICLE_NETWORK_HYBRID_THRESHOLD": str(ns.hybrid_threshold),
            "CHRONICLE_NETWORK_FOLLOWER_BUCKET_ROWS": str(ns.follower_bucket_rows),
            "CHRONICLE_NETWORK_FOLLOWER_MOVE_SETTLE": str(ns.follower_move_settle)}


def measure(db: Database, ns: NetworkSettings, sets: dict[int, set[int]], out: dict[str, Any],
            partitions: bool, move: bool = False) -> None:
    from api.app import create_app

    node = sc.local_node()
    offset = sc.log_offset(node)
    client = create_app(db.settings, database=db).test_client()
    client.get(f"/networks/{NETWORK}/rankings/top-accounts")  # the app's first request: imports, prepares
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        r = client.post(f"/networks/{NETWORK}/rankings", headers=ADMIN)
        timings.append((time.perf_counter() - started) * 1000)
        assert r.status_code == 202, r.get_data(as_text=True)
    job = r.json
    out["request_ms"] = {"each": [round(t, 1) for t in timings], "max": round(max(timings), 1)}
    # The worker, in a child process of its own: its peak RSS is the job's.
    started = time.perf_counter()
    proc = subprocess.run([str(sc.BIN / "chronicle"), "network", "worker", "--once"], env=_worker_env(db, ns),
                          capture_output=True, text=True, timeout=3600)
    out["worker_seconds"] = round(time.perf_counter() - started, 1)
    out["job_rss_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    out["worker_summary"] = proc.stdout.strip()[-500:]
    if proc.returncode != 0:
        out["worker_stderr"] = proc.stderr[-2000:]
    status = client.get(job["status_url"]).json
    out["job"] = {k: status.get(k) for k in ("status", "attempts", "seconds", "snapshot_id", "error")}
    q2, q3 = reference(sets)
    got = {kind: client.get(f"/networks/{NETWORK}/rankings/top-{kind}").json for kind in ("accounts", "followers")}
    out["q2_equal"] = [(a["account_id"], a["follower_count"]) for a in got["accounts"]["accounts"]] == q2
    out["q3_equal"] = [(a["account_id"], a["follows_top"]) for a in got["followers"]["followers"]] == q3
    if move:
        # A split while the set stays readable: the celebrity's followers into twice the buckets (the copy is
        # the job's cost), then counted in the new layout.
        current = relations.layout(db, NETWORK, CELEBRITY).buckets
        started = time.perf_counter()
        moved = relations.move_followers(db, NETWORK, CELEBRITY, 2 * max(1, current), settle=1.0, clock=db.clock)
        out["split"] = {**moved, "seconds": round(time.perf_counter() - started, 1),
                        "count_after": relations.count(db, NETWORK, CELEBRITY, relations.FOLLOWER),
                        "count_wanted": len(sets[CELEBRITY])}
    out["tombstone_warnings"] = sc.tombstone_warnings(node, offset)
    if partitions:
        for attempt in range(3):  # nodetool may answer "not initialized" while the node is busy: try again
            try:
                found = sc.largest_partitions(node, db.keyspace, TABLES, min_rows=10_000)
                break
            except NodeError as exc:
                out["partition_scan_error"] = str(exc)[:500]
                time.sleep(10 * (attempt + 1))
        else:
            return
        out["partitions"] = found
        out["max_partition_rows"] = max((t.get("max_rows") or 0) for t in found.values())
        out["max_partition_mb"] = round(max((t.get("max_partition_bytes") or 0) for t in found.values()) / 2**20, 1)


def verdict(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    v = {"request_ms": {"value": out["request_ms"]["max"], "ok": out["request_ms"]["max"] <= TARGETS["request_ms"]},
         "job_rss_mb": {"value": out["job_rss_mb"], "ok": out["job_rss_mb"] <= TARGETS["job_rss_mb"]},
         "tombstone_warnings": {"value": len(out["tombstone_warnings"]), "ok": not out["tombstone_warnings"]},
         "job_done": {"value": out["job"]["status"], "ok": out["job"]["status"] == "done"},
         "q2_q3_equal_reference": {"value": [out["q2_equal"], out["q3_equal"]],
                                   "ok": out["q2_equal"] and out["q3_equal"]}}
    if "split" in out:
        v["split_keeps_every_follower"] = {"value": out["split"]["count_after"],
                                           "ok": out["split"]["count_after"] == out["split"]["count_wanted"]}
    if "partition_scan_error" in out and "partitions" not in out:
        v["partition_scan"] = {"value": out["partition_scan_error"][:200], "ok": False}
    if "max_partition_rows" in out:
        v["max_partition_rows"] = {"value": out["max_partition_rows"],
                                   "ok": out["max_partition_rows"] <= TARGETS["max_partition_rows"]}
        v["max_partition_mb"] = {"value": out["max_partition_mb"],
                                 "ok": out["max_partition_mb"] <= TARGETS["max_partition_mb"]}
    return v


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--followers", default=1_000_000, show_default=True, type=click.IntRange(1000),
              help="followers of the celebrity (10% of them purged, consecutive ids)")
@click.option("--others", default=99, show_default=True, type=click.IntRange(0, 1000),
              help="other accounts in the top 100")
@click.option("--other-followers", default=3000, show_default=True, type=click.IntRange(1),
              help="followers of the smallest other account (each next one has 97 more)")
@click.option("--keep", is_flag=True, help="keep the scratch keyspace")
@click.option("--no-partition-scan", is_flag=True, help="skip nodetool flush + sstablepartitions")
@click.option("--move", is_flag=True, help="also split the celebrity into twice the buckets and time the move")
@click.option("--seed", default=30, show_default=True)
def main(followers: int, others: int, other_followers: int, keep: bool, no_partition_scan: bool, move: bool,
         seed: int) -> None:
    """A 1M-follower celebrity with 10% purged in one id range, and Q2+Q3 as a queued job (issue 30, 4)."""
    ns = NetworkSettings(hybrid_threshold=10_000, follower_move_settle=1.0)
    set_network_settings(ns)
    out: dict[str, Any] = {"command": " ".join(["python -m bench.scale_followers", *sys.argv[1:]]),
                           "started": datetime.now(UTC).isoformat(), "followers": followers, "others": others,
                           "other_followers": other_followers, "targets": TARGETS}
    with sc.scratch_keyspace("fol", keep=keep, request_timeout=60.0, admin_token=ADMIN_TOKEN) as db:
        set_db(db)
        set_network_settings(ns)
        try:
            sets, built = build(db, ns, followers, others, other_followers, random.Random(seed))
            out.update(built)
            measure(db, ns, sets, out, partitions=not no_partition_scan, move=move)
        finally:
            set_db(None)
        if keep:
            out["kept"] = db.keyspace
    out["verdict"] = verdict(out)
    sc.write_result("scale_followers", out)
    sys.exit(0 if all(v["ok"] for v in out["verdict"].values()) else 1)


if __name__ == "__main__":
    main()
