"""Tagging at enterprise scale (issue 30, findings 6-9): a big project, a big vocabulary, taggers whose
abandoned leases expire and free quota, QA verifying, and the figures checked against a recount of the log.

    .venv/bin/python -m bench.scale_tagging [--items 1000000] [--keywords 100000] [--taggers 100] [--seconds 60]
                                            [--lease-seconds 4] [--abandon 0.1] [--verify 0.3] [--quota 0]
                                            [--teams 2] [--no-partitions] [--keep]
                                            [--cluster [--lag-node 2 --lag-at 10 --lag-for 15]]

What it does, in one scratch keyspace (dropped after unless `--keep`):

1. Set-up. `--items` network posts written straight into the archive, one project made of them
   (api.tagging.service.create_project: queue 1,000, lease `--lease-seconds`, one item held) with `--teams`
   teams of `--quota` each (0: a quota the run reaches, about a third of what the taggers can finish), and a
   vocabulary of `--keywords` distinct keywords already used (counts 1..1000, Zipf-like, written through the
   owner's repair path as a history would have left them: tagging_keyword_uses plus the top-5).
2. Load, in this process: `--taggers` threads (one person each, spread over the teams) call the same service
   functions HTTP calls (next, submit, skip) for `--seconds` s; a fraction `--abandon` of the items taken is
   left to expire (the lease runs out, the owner returns it and gives the unit back), 2% are skipped; submits
   carry 3 keywords drawn from the vocabulary (Zipf-like, so the top-5 moves) and sometimes a new one. QA
   threads verify a fraction `--verify` of the tagged items. The project owner (api.tagging.worker.run) runs on
   a Database of its own, as `chronicle tagging worker` does in its own process: its quota give-backs are not
   seen by the taggers' caches (finding 8).
3. Drain: the taggers stop, abandoned leases expire, then one tagger per team takes and submits until refused:
   the final usage must equal the quota (every unit given back by an expiry is reused).
4. Checks: stats (project, team and user figures; top-5 categories) equal a recount of the effort log; the
   keyword top-5 equals a brute-force top-5 over every stored count; reconcile finds no difference; each
   team's usage equals its quota; with `--partitions` (default) the largest partition of the tagging tables
   as the node reports it (nodetool flush + sstablepartitions), against the 100 MB / 100k-row bound.

`--cluster` runs it on the 3-node loopback cluster (RF 3, the service's consistency levels) and `--lag-for S`
pauses one node (SIGSTOP) for S seconds during the load: it misses writes and catches up from hints after, so
reads at LOCAL_ONE may meet it behind; the checks above must still hold (findings 6 and 7).

Prints a markdown table on stderr and the JSON on stdout (written under bench/results/, scale-tagging-*.json).
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
import sys
import threading
import time
from collections import Counter
from typing import Any

from cassandra import ConsistencyLevel

from api.db import Database, read_level
from api.node.config import cluster_specs
from api.node.process import start_cluster
from api.tagging import control, effort, figures, reconcile, service, worker
from api.tagging.projects import Member
from bench.faults_common import pause_node, resume_node
from bench.scale_common import _percentile, largest_partitions, local_node, scratch_keyspace, write_result
from bench.tagging import CATEGORIES, SUBCATEGORIES, archive

TABLES = ["tagging_control", "tagging_keyword_uses", "tagging_events", "tagging_queue", "tagging_item_state",
          "tagging_keywords", "tagging_lease_log"]


def _note(part: str, figures_: Any) -> None:
    print(f"{part}: {figures_}", file=sys.stderr, flush=True)


def _zipf_index(rng: random.Random, n: int) -> int:
    return min(n - 1, int(rng.paretovariate(1.1)) - 1)


def _vocabulary(n: int) -> list[str]:
    return [f"kw{i:07d}" for i in range(n)]


def seed_vocabulary(db: Database, project: str, words: list[str]) -> dict[str, int]:
    """Counts for every keyword, as a history would have left them (the repair path: counts at the repair's
    version, the top-5 in the control partition)."""
    counts = {w: max(1, 1000 // (i + 1)) for i, w in enumerate(words)}
    seen = control.positions(db, project)
    assert seen is not None
    top = heapq.nsmallest(figures.TOP, counts.items(), key=lambda nc: (-nc[1], nc[0]))
    assert control.repair(db, project, seen, {("keyword", w): {"uses": n} for w, n in counts.items()},
                          {"keywords": top})
    return counts


class Load:
    def __init__(self, db: Database, project: str, words: list[str], args: argparse.Namespace) -> None:
        self.db, self.project, self.words, self.args = db, project, words, args
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = {"next": [], "refused next": [], "submit": []}
        self.counts: Counter = Counter()
        self.tagged: list[int] = []

    def _timed(self, kind: str, fn: Any, *a: Any) -> Any:
        started = time.perf_counter()
        out = fn(*a)
        with self.lock:
            self.latency[kind].append(time.perf_counter() - started)
        return out

    def tagger(self, member: Member, seed: int) -> None:
        rng = random.Random(seed)
        while not self.stop.is_set():
            try:
                t = time.perf_counter()
                got = service.next_item(self.db, member)
                item = got["item"]
                with self.lock:
                    self.latency["next" if item is not None else "refused next"].append(time.perf_counter() - t)
                if item is None:
                    self.counts["refused: " + (got["reason"] or "").split(":")[0][:40]] += 1
                    self.stop.wait(0.2)
                    continue
                roll = rng.random()
                if roll < self.args.abandon:  # walk away: the lease expires, the owner returns the item
                    self.counts["abandoned"] += 1
                    self.stop.wait(self.args.lease_seconds + 0.5)
                    continue
                if roll < self.args.abandon + 0.02:
                    service.skip(self.db, member, item["seq"], item["lease_id"])
                    self.counts["skipped"] += 1
                    continue
                words = [self.words[_zipf_index(rng, len(self.words))] for _ in range(3)]
                if rng.random() < 0.05:
                    words.append(f"new{seed}x{rng.randrange(10**6)}")
                self._timed("submit", service.submit, self.db, member, item["seq"], item["lease_id"],
                            [rng.choice(CATEGORIES)], [rng.choice(SUBCATEGORIES)], words)
                with self.lock:
                    self.counts["submitted"] += 1
                    self.tagged.append(item["seq"])
            except service.Refused as exc:
                self.counts[f"refused {exc.status}"] += 1
            except Exception as exc:  # noqa: BLE001 - counted and shown: a bench keeps going
                self.counts[f"error {type(exc).__name__}"] += 1
                self.stop.wait(0.5)

    def reviewer(self, member: Member, seed: int) -> None:
        rng = random.Random(seed)
        while not self.stop.is_set():
            with self.lock:
                pick = self.tagged.pop(rng.randrange(len(self.tagged))) if self.tagged else None
            if pick is None or rng.random() > self.args.verify:
                self.stop.wait(0.05)
                continue
            try:
                service.verify(self.db, member, pick, rng.choice(["Correct", "Incorrect"]), "")
                self.counts["verified"] += 1
            except service.Refused:
                self.counts["verify refused"] += 1


def _lat(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    if not ordered:
        return {"n": 0}
    return {"n": len(ordered), "p50_ms": round(_percentile(ordered, 0.50) * 1000, 1),
            "p99_ms": round(_percentile(ordered, 0.99) * 1000, 1)}


def _drain(db: Database, project: str, team_members: dict[str, Member], rounds: int = 100_000) -> dict[str, Any]:
    """One tagger per team takes and submits until refused: what the team can still use of its quota."""
    out = {}
    for team, member in team_members.items():
        done = 0
        reason = None
        for _ in range(rounds):
            got = service.next_item(db, member)
            if got["item"] is None:
                reason = got["reason"]
                break
            service.submit(db, member, got["item"]["seq"], got["item"]["lease_id"], ["news"], [], [])
            done += 1
        out[team] = {"submitted_in_drain": done, "refused_with": reason}
    return out


def _recount(db: Database, project: str) -> dict[str, Any]:
    logged = effort.events_of_minutes(db, project, effort.event_minutes(db, project))
    kinds = Counter(e.kind for e in logged)
    results = Counter(e.result for e in logged if e.kind == "verified")
    by_user: dict[str, Counter] = {}
    for e in logged:
        if e.user and e.kind in ("tagged", "verified"):
            by_user.setdefault(e.user, Counter())["finished" if e.kind == "tagged" else
                                                 ("correct" if e.result == "Correct" else "incorrect")] += 1
    cats = Counter(c for e in logged if e.kind == "tagged" for c in e.categories)
    words = Counter(k for e in logged if e.kind == "tagged" for k in e.keywords)
    return {"kinds": kinds, "results": results, "by_user": by_user, "categories": cats, "keywords": words}


def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"bench": "scale_tagging", "args": vars(args)}
    started = time.perf_counter()
    node, replication, specs = None, "SimpleStrategy:1", []
    if args.cluster:  # the project's 3-node loopback cluster, RF 3 (started if it is not running)
        specs = cluster_specs(3)
        start_cluster(specs)
        node, replication = specs[0], "NetworkTopologyStrategy:datacenter1:3"
        result["cluster"] = [s.name for s in specs]
    with scratch_keyspace("tagscale", keep=args.keep, request_timeout=120.0, node=node,
                          replication=replication) as db:
        result["keyspace"] = db.keyspace
        t0 = time.perf_counter()
        authors = archive(db, "tagscale", args.items)
        quota = args.quota or max(10, int(args.taggers * args.seconds * 0.05 / args.teams))
        teams = {f"team{t}": quota for t in range(args.teams)}
        project = "scale"
        service.create_project(db, project, project, {"kind": "network", "network": "tagscale", "authors": authors},
                               CATEGORIES, SUBCATEGORIES, queue_size=1000, lease_seconds=args.lease_seconds,
                               max_held=1, teams=teams)
        names = list(teams)
        taggers = [Member(project, f"t{i:03d}", names[i % len(names)], "tagger") for i in range(args.taggers)]
        qa = [Member(project, f"qa{i}", names[0], "qa") for i in range(2)]
        for m in taggers + qa:
            service.add_member(db, project, m.user, m.team, m.role)
        words = _vocabulary(args.keywords)
        seeded = seed_vocabulary(db, project, words)
        result["setup"] = {"items": args.items, "keywords": len(words), "quota_per_team": quota,
                           "seconds": round(time.perf_counter() - t0, 1)}
        _note("setup", result["setup"])

        owner_db = Database(db.settings)  # the worker's own Database: its caches are not the taggers'
        stop_worker = threading.Event()
        passes: list[float] = []
        real_step = worker.ProjectOwner.step

        def timed_step(self: worker.ProjectOwner) -> dict[str, int]:
            t = time.perf_counter()
            try:
                return real_step(self)
            finally:
                passes.append(time.perf_counter() - t)

        worker.ProjectOwner.step = timed_step  # type: ignore[method-assign]  # the bench's own process only
        owner = threading.Thread(target=worker.run, args=(owner_db, stop_worker), kwargs={"tick": 1.0})
        owner.start()
        time.sleep(3)  # the first pass fills the queue
        load = Load(db, project, words, args)
        threads = [threading.Thread(target=load.tagger, args=(m, i)) for i, m in enumerate(taggers)]
        threads += [threading.Thread(target=load.reviewer, args=(m, 10_000 + i)) for i, m in enumerate(qa)]
        t1 = time.perf_counter()
        for t in threads:
            t.start()
        lag = threading.Thread(target=_lag, args=(specs, args, result)) if args.lag_for else None
        if lag is not None:
            lag.start()
        time.sleep(args.seconds)
        if lag is not None:
            lag.join()
        load.stop.set()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t1
        result["load"] = {"seconds": round(elapsed, 1), "submits_per_s": round(load.counts["submitted"] / elapsed, 1),
                          "next": _lat(load.latency["next"]), "refused_next": _lat(load.latency["refused next"]),
                          "submit": _lat(load.latency["submit"]),
                          "counts": dict(load.counts)}
        _note("load", result["load"])
        time.sleep(args.lease_seconds + worker.SETTLE_US / 1e6 + 3)  # abandoned leases expire and return
        # The drain only when the quota binds (a quota above what is left would take one submit per unit).
        binding = any(k.startswith("refused: team") for k in load.counts)
        result["drain"] = _drain(db, project, {m.team: m for m in reversed(taggers)}) if binding else None
        # The owner counts the last events: its checkpoint trails by SETTLE_US, and a pass can take seconds on a
        # cluster with a node just back (two of the slowest passes seen, at least).
        time.sleep(worker.SETTLE_US / 1e6 + 2.5 + 2 * max(passes, default=0.0))
        stop_worker.set()
        owner.join()
        owner_db.close()
        worker.ProjectOwner.step = real_step  # type: ignore[method-assign]
        result["worker_pass_s"] = {"passes": len(passes), "median": round(statistics.median(passes), 3),
                                   "max": round(max(passes), 3)}

        # Checks against the log, read at QUORUM: right after a paused node resumed, a LOCAL_ONE read may still
        # meet it behind (hints replaying) and the checks would compare a stale log with the figures.
        read_level.set(ConsistencyLevel.QUORUM if args.cluster else None)
        stats = service.stats(db, project)
        log = _recount(db, project)
        used = {t["team"]: t["used"] for t in stats["teams"]}
        all_counts = control.all_keyword_uses(db, project)
        brute_top = heapq.nsmallest(figures.TOP, all_counts.items(), key=lambda nc: (-nc[1], nc[0]))
        expected_counts = Counter(seeded)
        expected_counts.update(log["keywords"])
        users = {u["user"]: u for u in stats["users"]}
        checks = {
            # Only where the run reached the quota (else final used < quota says nothing).
            "quota_fully_used (final used = quota)": all(n == quota for n in used.values()) if binding else True,
            "qa_figures_equal_log": (stats["project"]["verified"], stats["project"]["correct"],
                                     stats["project"]["incorrect"]) == (log["kinds"]["verified"],
                                                                        log["results"]["Correct"],
                                                                        log["results"]["Incorrect"]),
            "tagged_equals_log": stats["project"]["tagged"] == log["kinds"]["tagged"],
            "users_equal_log": all(users.get(u, {}).get(k, 0) == n for u, c in log["by_user"].items()
                                   for k, n in c.items()),
            "top_categories_equal_log": [(t["name"], t["count"]) for t in stats["top"]["categories"]] ==
            heapq.nsmallest(figures.TOP, log["categories"].items(), key=lambda nc: (-nc[1], nc[0])),
            "keyword_counts_equal_seed_plus_log": all_counts == dict(expected_counts),
            "top_keywords_equal_brute_force": [(t["name"], t["count"]) for t in stats["top"]["keywords"]] ==
            brute_top,
        }
        found = reconcile.reconcile(db, project)
        result["reconcile"] = {"differences": {d: v for d, v in found["differences"].items()
                                               if not d.startswith("keyword/")},
                               "missing_events": found["missing_events"], "team_usage": found["team_usage"]}
        keyword_diffs = [k for k in found["differences"] if k.startswith("keyword/")]  # the seed has no events
        checks["reconcile_clean (keyword seed aside)"] = (len(found["differences"]) == len(keyword_diffs)
                                                          and found["missing_events"] == 0
                                                          and not found["team_usage"])
        result["final"] = {"used": used, "quota": quota, "stats_project": stats["project"],
                           "distinct_keywords": len(all_counts), "top_keywords": stats["top"]["keywords"]}
        result["checks"] = checks
        result["rows"] = partition_rows(db, project)
        result["checks"]["control_and_keyword_partitions_<=_100k_rows"] = (
            result["rows"]["tagging_control"] <= 100_000 and result["rows"]["tagging_keyword_uses_max"] <= 100_000)
        if args.partitions and not args.cluster:
            try:
                parts = largest_partitions(local_node(), db.keyspace, TABLES, min_rows=1000)
            except Exception as exc:  # noqa: BLE001 - nodetool unavailable: the CQL row counts above remain
                result["largest_partitions"] = {"error": str(exc).splitlines()[0][:200]}
            else:
                result["largest_partitions"] = {t: {k: v for k, v in p.items() if k in (
                    "max_partition_bytes", "max_rows", "partitions")} for t, p in parts.items()}
                result["checks"]["partitions_<=_100MB_and_100k_rows"] = all(
                    (p.get("max_partition_bytes") or 0) <= 100 * 2**20 and (p.get("max_rows") or 0) <= 100_000
                    for p in parts.values())
    result["seconds"] = round(time.perf_counter() - started, 1)
    _table(result)
    return result


def _lag(specs: list[Any], args: argparse.Namespace, result: dict[str, Any]) -> None:
    """One node of the cluster SIGSTOPped (a long pause: it misses writes, then catches up from hints) `--lag-at`
    seconds into the load for `--lag-for` seconds."""
    time.sleep(args.lag_at)
    spec = specs[args.lag_node - 1]
    pid = pause_node(spec)
    try:
        time.sleep(args.lag_for)
    finally:
        resume_node(pid)
    result["lagging_node"] = {"node": spec.name, "at_s": args.lag_at, "for_s": args.lag_for}
    _note("lag", result["lagging_node"])


def partition_rows(db: Database, project: str) -> dict[str, int]:
    """Rows of the project's control partition and of its largest keyword-count bucket, counted with CQL."""
    def count(cql: str, *params: Any) -> int:
        return db.execute_raw(cql.format(ks=db.keyspace), params, timeout=120).one()[0]

    buckets = [count("SELECT COUNT(*) FROM {ks}.tagging_keyword_uses WHERE project = %s AND bucket = %s", project, b)
               for b in range(control.KEYWORD_BUCKETS)]
    return {"tagging_control": count("SELECT COUNT(*) FROM {ks}.tagging_control WHERE project = %s", project),
            "tagging_keyword_uses_max": max(buckets), "tagging_keyword_uses_total": sum(buckets)}


def _table(result: dict[str, Any]) -> None:
    load = result["load"]
    lines = ["| figure | value |", "|---|---|",
             f"| size | {result['setup']['items']:,} items, {result['setup']['keywords']:,} keywords, "
             f"{result['args']['taggers']} taggers, {load['seconds']} s |",
             f"| submits/s | {load['submits_per_s']} |",
             f"| next p50 / p99 | {load['next'].get('p50_ms')} / {load['next'].get('p99_ms')} ms |",
             f"| submit p50 / p99 | {load['submit'].get('p50_ms')} / {load['submit'].get('p99_ms')} ms |",
             f"| worker pass median / max | {result['worker_pass_s']['median']} / {result['worker_pass_s']['max']} s |",
             f"| final used / quota | {result['final']['used']} / {result['final']['quota']} |"]
    lines += [f"| {name} | {'yes' if ok else 'NO'} |" for name, ok in result["checks"].items()]
    lines.append(f"| rows (CQL count) | {result['rows']} |")
    for table, p in (result.get("largest_partitions") or {}).items():
        lines.append(f"| largest {table} | {p} |")
    print("\n".join(lines), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--keywords", type=int, default=100_000)
    parser.add_argument("--taggers", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--lease-seconds", type=int, default=4)
    parser.add_argument("--abandon", type=float, default=0.1, help="fraction of items left to expire")
    parser.add_argument("--verify", type=float, default=0.3, help="fraction of tagged items QA verifies")
    parser.add_argument("--quota", type=int, default=0, help="per team; 0: one the run reaches")
    parser.add_argument("--teams", type=int, default=2)
    parser.add_argument("--no-partitions", dest="partitions", action="store_false",
                        help="skip the nodetool flush + sstablepartitions scan")
    parser.add_argument("--keep", action="store_true", help="keep the scratch keyspace")
    parser.add_argument("--cluster", action="store_true",
                        help="on the 3-node loopback cluster (RF 3; started if needed) instead of the local node")
    parser.add_argument("--lag-node", type=int, default=2, choices=(1, 2, 3), help="--cluster: the node paused")
    parser.add_argument("--lag-at", type=float, default=10.0, help="--cluster: seconds into the load it pauses")
    parser.add_argument("--lag-for", type=float, default=0.0,
                        help="--cluster: seconds it stays paused (0: no lagging node)")
    args = parser.parse_args(argv)
    result = run(args)
    write_result("scale-tagging", result)
    print(json.dumps(result, default=str))
    return 0 if all(result["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
