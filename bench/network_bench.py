#!/usr/bin/env python3
"""Follower-network benchmarks against the local node, full-size generated files, in a bench keyspace.

Steps (each timed; a JSON summary is written to --out and a Markdown table printed):
 1. generate full-size raw files (81,306 accounts, 1,768,149 edges, 52,542 posts) and clean them;
 2. load them (runtime loader, --workers processes): writes/s per file;
 3. Q5 fan-out of one post to 10,000 and to 100,000 followers (synthetic authors): seconds, cache writes/s;
    baseline "seed": fan-out targets found with ALLOW FILTERING, one insert per round trip;
 4. Q4 p50/p99 at concurrency 16 through the API served by gunicorn, load from a separate process;
    in-process at concurrency 16: our home() vs a Twissandra-style timeline (ids, then one read per post);
 5. Q2+Q3 recompute over the full graph;
 6. Q6: inverted index vs a Storage-Attached Index on a words set (fetch all matches, rank client-side).

Baseline tables (bench_*) live in the bench keyspace only; ALLOW FILTERING appears only here.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import click

from api.cli.common import progress_bars
from api.config import Settings
from api.db import Database, Statement, set_db
from api.migrations import migrate
from api.network import (
    accounts,
    actions,
    cleaning,
    generator,
    home,
    loader,
    post_search,
    posts,
    relations,
    timelines,
    top100,
)
from api.network.relations import PUT_RELATION
from api.network.settings import NetworkSettings, set_network_settings
from api.network.values import Post

ROOT = Path(__file__).resolve().parents[1]

SCALES = {"full": {"accounts": 81_306, "edges": 1_768_149, "posts": 52_542},
          "medium": {"accounts": 8_000, "edges": 150_000, "posts": 5_000}}
AUTHOR_10K, AUTHOR_100K = 9_000_000_000_001, 9_000_000_000_002
SYNTHETIC_FOLLOWER = 9_100_000_000_000

BASELINE_DDL = [
    # The seed's cache table (username -> posts by time), written one row per round trip.
    """CREATE TABLE IF NOT EXISTS bench_seed_caches_by_users (username text, date_time timestamp, tweet_id bigint,
       author text, content text, PRIMARY KEY ((username), date_time, tweet_id))
       WITH CLUSTERING ORDER BY (date_time DESC, tweet_id DESC)""",
    # Twissandra: the timeline holds post ids only; each post is then read on its own.
    """CREATE TABLE IF NOT EXISTS bench_twissandra_timeline (account_id bigint, posted_at timestamp,
       post_id bigint, PRIMARY KEY ((account_id), posted_at, post_id))
       WITH CLUSTERING ORDER BY (posted_at DESC, post_id DESC)""",
    # Q6 alternative: a SAI index on the set of a post's words.
    """CREATE TABLE IF NOT EXISTS bench_sai_posts (network text, post_id bigint, words set<text>, like_count int,
       content text, PRIMARY KEY ((network, post_id)))""",
    "CREATE CUSTOM INDEX IF NOT EXISTS bench_sai_posts_words ON bench_sai_posts (values(words)) "
    "USING 'StorageAttachedIndex'",
]
# The seed found the accounts that follow the author by filtering on the relation's target across the whole
# relation table. Filtering on a regular column (target_username) makes Cassandra read every row, as theirs did;
# filtering on partition-key parts instead lets it skip partitions by key, which the seed's model could not.
SEED_FIND = Statement("SELECT account_id, rel_type FROM follower_relations_by_account WHERE target_username = ? "
                      "ALLOW FILTERING", name="bench seed ALLOW FILTERING")
SEED_PUT = Statement("INSERT INTO bench_seed_caches_by_users (username, date_time, tweet_id, author, content) "
                     "VALUES (?, ?, ?, ?, ?)")
TWISS_PUT = Statement("INSERT INTO bench_twissandra_timeline (account_id, posted_at, post_id) VALUES (?, ?, ?)")
TWISS_IDS = Statement("SELECT post_id FROM bench_twissandra_timeline WHERE account_id = ? LIMIT 25")
SAI_PUT = Statement("INSERT INTO bench_sai_posts (network, post_id, words, like_count, content) VALUES (?, ?, ?, ?, ?)")
SAI_ONE = Statement("SELECT post_id, like_count, content FROM bench_sai_posts WHERE words CONTAINS ?")
SAI_TWO = Statement("SELECT post_id, like_count, content FROM bench_sai_posts WHERE words CONTAINS ? "
                    "AND words CONTAINS ?")


def say(msg: str) -> None:
    click.echo(f"[{datetime.now(UTC):%H:%M:%S}] {msg}", err=True)


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(p * len(values)))] * 1000, 2) if values else 0.0


def concurrent_latencies(fn, args_list: list, concurrency: int, seconds: float) -> dict:
    """Run fn(*args) from `concurrency` threads for `seconds`; latency percentiles in ms."""
    lat: list[float] = []
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def worker(k: int) -> None:
        mine, i = [], k
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            fn(*args_list[i % len(args_list)])
            mine.append(time.perf_counter() - started)
            i += concurrency
        with lock:
            lat.extend(mine)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return {"requests": len(lat), "rps": round(len(lat) / wall, 1), "p50_ms": pct(lat, 0.5),
            "p99_ms": pct(lat, 0.99)}


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--keyspace", default="chronicle_bench_network", show_default=True)
@click.option("--network", default="bench", show_default=True)
@click.option("--data", type=click.Path(file_okay=False, path_type=Path),
              default=Path(tempfile.gettempdir()) / "chronicle-bench-network", show_default=True)
@click.option("--scale", type=click.Choice(list(SCALES)), default="full", show_default=True)
@click.option("--skip-load", is_flag=True, help="reuse files and rows loaded by an earlier run")
@click.option("--workers", type=int, default=2, show_default=True, help="loader processes per file")
@click.option("--like-rate", type=float, default=0.001, show_default=True)
@click.option("--q4-seconds", type=float, default=20.0, show_default=True)
@click.option("--port", type=int, default=8099, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=ROOT / "bench" / "results" / "network_latest.json", show_default=True)
def main(keyspace: str, network: str, data: Path, scale: str, skip_load: bool, workers: int, like_rate: float,
         q4_seconds: float, port: int, out: Path) -> None:
    """Run the network benchmarks and print their figures."""
    os.environ["CHRONICLE_KEYSPACE"] = keyspace
    settings = dataclasses.replace(Settings.from_env(), keyspace=keyspace, request_timeout=60.0)
    results: dict = {"started": datetime.now(UTC).isoformat(), "keyspace": keyspace, "network": network,
                     "scale": scale, "command": " ".join(sys.argv)}
    admin = Database(settings, keyspace="")
    migrate(admin, keyspace, settings.replication_map(), log=lambda m: None)
    admin.close()
    db = Database(settings)
    set_db(db)
    for ddl in BASELINE_DDL:
        db.execute_raw(ddl, timeout=60)
    set_network_settings(NetworkSettings(hybrid_threshold=0))
    clean = data / "clean"

    # 1-2: generate, clean, load ---------------------------------------------------------------------------------
    if not skip_load:
        t = time.perf_counter()
        edges, posts_csv = generator.generate(data / "raw", seed=4, **SCALES[scale])
        results["generate_s"] = round(time.perf_counter() - t, 1)
        say(f"generated in {results['generate_s']} s")
        t = time.perf_counter()
        rel = cleaning.clean_relations(edges, posts_csv, clean)
        tw = cleaning.clean_posts(posts_csv, clean / "accounts.csv", clean, like_rate=like_rate)
        results["clean_s"] = round(time.perf_counter() - t, 1)
        results["clean_report"] = {"relations": {k: v for k, v in rel.as_dict().items() if k != "author_accounts"},
                                   "posts": tw.as_dict()}
        say(f"cleaned in {results['clean_s']} s: {results['clean_report']}")
        load = {}
        with progress_bars() as bars:
            for kind in loader.KINDS:
                path = clean / f"{kind}.csv"
                rows = loader.count_rows(path)
                t = time.perf_counter()
                writes = loader.load_parallel(settings, kind, network, path, workers=workers,
                                              likes_path=clean / "likes.csv", progress=bars(kind, None))
                s = time.perf_counter() - t
                load[kind] = {"input_rows": rows, "writes": writes, "seconds": round(s, 1),
                              "input_rows_per_s": round(rows / s), "writes_per_s": round(writes / s)}
        results["load"] = load
        say(f"loaded: {load}")

    # 3: fan-out ---------------------------------------------------------------------------------------------------
    ns = NetworkSettings(hybrid_threshold=0)
    set_network_settings(ns)
    fan = {}
    for author, n in ((AUTHOR_10K, 10_000), (AUTHOR_100K, 100_000)):
        base = SYNTHETIC_FOLLOWER + (0 if n == 10_000 else 1_000_000)
        db.execute_many(((PUT_RELATION, (network, author, "follower", base + i, f"bench_{base + i}"))
                         for i in range(n)), concurrency=256)
        if n == 10_000:  # the seed's lookup needs the other direction
            db.execute_many(((PUT_RELATION, (network, base + i, "follows", author, f"bench_author_{n}"))
                             for i in range(n)), concurrency=256)
        db.execute(accounts.PUT_ACCOUNT, (network, author, f"bench_author_{n}", n, 0))
        account = accounts.get_account(db, network, author)
        post = Post(post_id=0, author_id=author, author_username=account.username,
                    posted_at=datetime.now(UTC).replace(microsecond=0), content=f"bench fan-out to {n}",
                    language="en")
        runs = []
        for attempt in range(2):
            post = dataclasses.replace(post, post_id=7_000_000_000_000 + n + attempt)
            actions.write_post(db, network, post)
            t = time.perf_counter()
            written = actions.fan_out(db, network, post, author_followers=n, ns=ns)
            s = time.perf_counter() - t
            runs.append({"writes": written, "seconds": round(s, 2), "writes_per_s": round(written / s)})
        fan[str(n)] = {"runs": runs, "best_writes_per_s": max(r["writes_per_s"] for r in runs)}
        say(f"fan-out to {n}: {runs}")
    # Baseline: the seed's fan-out (ALLOW FILTERING to find followers, then one insert per round trip).
    t = time.perf_counter()
    targets = [r.account_id for r in db.execute(SEED_FIND, ("bench_author_10000",), fetch_size=5000, timeout=600)
               if r.rel_type == "follows"]
    find_s = time.perf_counter() - t
    seed_insert = db.prepared(SEED_PUT)
    now = datetime.now(UTC)
    t = time.perf_counter()
    for target in targets:
        db.session.execute(seed_insert, (str(target), now, 1, "bench_author", "bench seed fan-out"))
    insert_s = time.perf_counter() - t
    fan["seed_baseline_10000"] = {"targets": len(targets), "find_allow_filtering_s": round(find_s, 2),
                                  "sequential_insert_s": round(insert_s, 2),
                                  "total_s": round(find_s + insert_s, 2),
                                  "writes_per_s": round(len(targets) / (find_s + insert_s))}
    say(f"seed baseline: {fan['seed_baseline_10000']}")
    results["fan_out"] = fan

    # 4: Q4 --------------------------------------------------------------------------------------------------------
    top = accounts.top_accounts(db, network, 100)
    sample: list[int] = []
    for a in top[:50]:
        sample.extend(relations.ids(db, network, a["account_id"], relations.FOLLOWER)[:4])
    sample = list(dict.fromkeys(sample))[:200]
    default_ns = NetworkSettings.from_env()
    set_network_settings(default_ns)
    results["q4_accounts"] = len(sample)
    t = time.perf_counter()
    for a in sample:  # build the caches (first read of each account)
        home.home_of(db, network, a, "newest", default_ns)
    results["q4_cache_build_s_per_account"] = round((time.perf_counter() - t) / len(sample), 4)
    # Twissandra timeline: the same posts, ids only.
    for a in sample:
        rows = db.execute(timelines.READ_CACHE, (network, a, 800))
        db.execute_many((TWISS_PUT, (a, r.posted_at, r.post_id)) for r in rows)
    twiss_ids = db.prepared(TWISS_IDS)
    get_post = db.prepared(posts.GET_POST)
    get_account = db.prepared(accounts.GET_ACCOUNT)

    def twissandra(account_id: int) -> list:
        db.session.execute(get_account, (network, account_id))
        ids = [r.post_id for r in db.session.execute(twiss_ids, (account_id,))]
        return [db.session.execute(get_post, (network, p)).one() for p in ids]  # one read per post

    def ours(account_id: int, order: str) -> dict:
        return home.home_of(db, network, account_id, order, default_ns)

    inproc = {
        "ours_newest": concurrent_latencies(ours, [(a, "newest") for a in sample], 16, q4_seconds / 2),
        "ours_likes": concurrent_latencies(ours, [(a, "likes") for a in sample], 16, q4_seconds / 2),
        "twissandra": concurrent_latencies(twissandra, [(a,) for a in sample], 16, q4_seconds / 2),
    }
    inproc["speedup_p99_newest_vs_twissandra"] = round(inproc["twissandra"]["p99_ms"] /
                                                       max(inproc["ours_newest"]["p99_ms"], 0.001), 1)
    inproc["speedup_p50_newest_vs_twissandra"] = round(inproc["twissandra"]["p50_ms"] /
                                                       max(inproc["ours_newest"]["p50_ms"], 0.001), 1)
    results["q4_in_process_c16"] = inproc
    say(f"Q4 in-process: {inproc}")
    db.close()
    results["q4_api_c16"] = api_bench(keyspace, network, sample, port, q4_seconds)
    say(f"Q4 API: {results['q4_api_c16']}")
    db = Database(settings)
    set_db(db)

    # 5: Q2 + Q3 -----------------------------------------------------------------------------------------------------
    t = time.perf_counter()
    snap = top100.compute_rankings(db, network)
    results["q2_q3_recompute_s"] = round(time.perf_counter() - t, 2)
    results["q2_top3"] = snap["accounts"][:3]
    say(f"Q2+Q3 in {results['q2_q3_recompute_s']} s")

    # 6: Q6 inverted index vs SAI --------------------------------------------------------------------------------------
    results["q6"] = q6_bench(db, network, clean)
    say(f"Q6: {results['q6']}")
    db.close()
    results["finished"] = datetime.now(UTC).isoformat()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, default=str))
    click.echo(json.dumps(results, indent=1, default=str))


def api_bench(keyspace: str, network: str, sample: list[int], port: int, seconds: float) -> dict:
    env = {**os.environ, "CHRONICLE_KEYSPACE": keyspace, "CHRONICLE_BIND": f"127.0.0.1:{port}",
           "CHRONICLE_ACCESS_LOG": "/dev/null", "CHRONICLE_LOG_LEVEL": "WARNING"}
    # The bench app is Chronicle's app plus the Twissandra baseline route (bench/network_baseline_app.py).
    server = subprocess.Popen([str(ROOT / ".venv/bin/gunicorn"), "-c", "gunicorn.conf.py",
                               "bench.network_baseline_app:app"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out: dict = {}
    try:
        import urllib.request

        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.3)
        for order in ("newest", "likes", "twissandra"):
            with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
                for a in sample:
                    f.write(f"/bench/twissandra/{network}/{a}\n" if order == "twissandra" else
                            f"/networks/{network}/accounts/{a}/home?order={order}\n")
                paths = f.name
            # Warm every worker's session and prepared statements.
            subprocess.run([sys.executable, str(ROOT / "bench/network_loadgen.py"), "--port", str(port),
                            "--paths-file", paths, "--concurrency", "4", "--seconds", "3"], capture_output=True)
            for c in (1, 16):
                run = subprocess.run([sys.executable, str(ROOT / "bench/network_loadgen.py"), "--port", str(port),
                                      "--paths-file", paths, "--concurrency", str(c), "--seconds",
                                      str(seconds / (4 if c == 1 else 2))], capture_output=True, text=True)
                out[f"{order}_c{c}"] = json.loads(run.stdout or "{}")
            if shutil.which("wrk"):  # a C load generator as a second opinion: no client-side GIL in the numbers
                for c in (1, 16):
                    out[f"{order}_wrk_c{c}"] = run_wrk(port, paths, c, seconds / 2)
            os.unlink(paths)
        for c in (1, 16):
            twiss, ours = out[f"twissandra_c{c}"], out[f"newest_c{c}"]
            out[f"speedup_c{c}"] = {"p50": round(twiss["p50_ms"] / max(ours["p50_ms"], 0.001), 1),
                                    "p99": round(twiss["p99_ms"] / max(ours["p99_ms"], 0.001), 1)}
    finally:
        server.terminate()
        server.wait(timeout=30)
    return out


def run_wrk(port: int, paths: str, connections: int, seconds: float) -> dict:
    run = subprocess.run(["wrk", f"-t{min(2, connections)}", f"-c{connections}", f"-d{int(seconds)}s", "--latency",
                          "-s", str(ROOT / "bench/network_wrk.lua"), f"http://127.0.0.1:{port}"],
                         capture_output=True, text=True, env={**os.environ, "PATHS_FILE": paths})
    out: dict = {}
    for line in run.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("50%", "90%", "99%"):
            value = parts[1]
            ms = float(value[:-2]) if value.endswith("ms") else float(value[:-2]) / 1000 \
                if value.endswith("us") else float(value[:-1]) * 1000
            out[f"p{parts[0][:-1]}_ms"] = round(ms, 2)
        elif line.startswith("Requests/sec:"):
            out["rps"] = float(parts[1])
    return out


def q6_bench(db: Database, network: str, clean: Path) -> dict:
    import csv

    from api.network.common import words_of

    counts = loader.like_counts(clean / "likes.csv")
    rows = []
    with (clean / "posts.csv").open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            pid = int(r["post_id"])
            rows.append((network, pid, words_of(r["content"]), counts.get(pid, 0), r["content"]))
    t = time.perf_counter()
    db.execute_many(((SAI_PUT, r) for r in rows), concurrency=128)
    load_s = time.perf_counter() - t
    time.sleep(5)  # let the index catch up with the memtable
    queries = [["love"], ["the"], ["tour"], ["love", "tour"], ["happy", "birthday"], ["grammy", "the"]]
    sai_one, sai_two = db.prepared(SAI_ONE), db.prepared(SAI_TWO)
    out: dict = {"sai_load_s": round(load_s, 1), "queries": {}}
    for q in queries:
        lat_index, lat_sai = [], []
        for _ in range(5):
            t = time.perf_counter()
            got = [p.post_id for p in post_search.search_posts(db, network, q, 25)]
            lat_index.append(time.perf_counter() - t)
            t = time.perf_counter()
            stmt, params = (sai_one, (q[0],)) if len(q) == 1 else (sai_two, (q[0], q[1]))
            matches = list(db.session.execute(stmt, params, timeout=120))
            ranked = sorted(matches, key=lambda r: (-r.like_count, -r.post_id))[:25]
            lat_sai.append(time.perf_counter() - t)
        out["queries"][" ".join(q)] = {
            "matches": len(matches), "index_p50_ms": round(statistics.median(lat_index) * 1000, 1),
            "sai_p50_ms": round(statistics.median(lat_sai) * 1000, 1),
            "same_answer": got == [r.post_id for r in ranked]}
    return out


if __name__ == "__main__":
    main()
