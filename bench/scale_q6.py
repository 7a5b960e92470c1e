"""Q6 top lists over time, celebrity keys, a hot word's counter (issue 30, findings 3, 12, 13).

    python -m bench.scale_q6                      # 6,000 posts, 60 s max age: about 8 minutes here
    python -m bench.scale_q6 --posts 3000 --seconds 2 --max-age 20
    python -m bench.scale_q6 --help

In a scratch keyspace it loads a generated network with the project's loader (which builds the top lists of the
common terms; "common" is shrunk to --rare postings and lists to --top-k posts, so a few thousand posts take the
paths a word in 50M posts takes), then:
1. Q6 answers of common-term queries against the brute-force reference (tests/network/reference.py), with the
   top-list max age (CHRONICLE_NETWORK_TERM_TOP_MAX_AGE, the lists' "TTL") shortened to --max-age;
2. while that age passes: Q4 of a reader following the celebrities (the top accounts, promoted), with the
   celebrities' last post times kept per process (CHRONICLE_NETWORK_CELEBRITY_CACHE_TTL 1 s) and read every
   page (0), with the celebrity_last_posts reads per page; a celebrity's post and a normal author's post; a hot
   word's postings counter with its 16 cells and with one (the old layout), 8 posts at a time. Each pair is
   measured twice in alternating order (this 2-core machine is shared: the order matters as much as the code);
3. after the age passed: the same Q6 answers against the reference (the lists were not rebuilt yet: they must
   still be there), then the rebuild jobs the searches asked for, and the answers again.
It reports the node's tombstone warnings of the whole run (those about this run's keyspace, and the count of
other keyspaces') and the largest partitions of the Q6, count and celebrity tables. One JSON object goes to
stdout and bench/results/scale_q6-<time>.json.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from api.db import Database, set_db
from api.network import (
    accounts,
    actions,
    celebrities,
    cleaning,
    generator,
    home,
    job_handlers,
    loader,
    post_search,
    search,
)
from api.network.jobs import JobWorker
from api.network.settings import NetworkSettings
from api.network.tokens import query_terms
from bench import scale_common as sc
from tests.network.reference import Reference

NET = "q6"
QUERIES = ["the", "a", "to", "and", "the love", "to the", "of"]


def _with(db: Database, **changes: Any) -> None:
    db.settings = dataclasses.replace(db.settings, network=dataclasses.replace(db.settings.network, **changes))


def _q6_round(db: Database, ref: Reference) -> dict[str, Any]:
    out = {}
    for q in QUERIES:
        terms = query_terms(q)
        started = time.perf_counter()
        found = post_search.search_posts(db, NET, terms)
        ms = (time.perf_counter() - started) * 1000
        out[q] = {"equal_to_reference": [p.post_id for p in found.posts] == ref.q6(terms), "exact": found.exact,
                  "rebuild_asked": found.rebuild is not None, "ms": round(ms, 2)}
    return out


def _build(db: Database, tmp: Path, posts: int, seed: int) -> tuple[Reference, dict[str, Any]]:
    started = time.perf_counter()
    edges, raw_posts = generator.generate(tmp / "raw", accounts=max(400, posts // 10), edges=posts, posts=posts,
                                          seed=seed)
    cleaning.clean_relations(edges, raw_posts, tmp / "clean")
    cleaning.clean_posts(raw_posts, tmp / "clean" / "accounts.csv", tmp / "clean", like_rate=0.002, seed=seed)
    loader.load_network(db, NET, tmp / "clean")
    ref = Reference(edges, tmp / "clean")
    common = {t: len(ref.q6([t], 10**9)) for q in QUERIES for t in query_terms(q)
              if len(ref.q6([t], 10**9)) > search.RARE_POSTINGS}
    return ref, {"posts": len(ref.posts), "likes": len(ref.likes), "accounts": len(ref.usernames),
                 "common_terms_checked": common, "load_seconds": round(time.perf_counter() - started, 1)}


def _celebrity_setup(db: Database, ref: Reference, celebs: int) -> tuple[int, list[int], int]:
    ranked = ref.q2(celebs + 1)
    threshold = ranked[celebs - 1][1]
    _with(db, hybrid_threshold=threshold, likes_rank_max_age=0)
    celebrities.apply_threshold(db, NET, db.settings.network)
    stars = [a for a, n in ranked if n >= threshold]
    by_author = Counter(p["author_id"] for p in ref.posts.values())
    # A reader whose cache holds a full page or more (Q4 then asks only the celebrities that posted since its
    # window: what the last post times are for), following as many celebrities as such a reader does.
    full = [u for u in ref.usernames if sum(by_author[a] for a in ref.follows(u) - set(stars)) >= 100]
    reader = max(full or ref.usernames, key=lambda u: (len(ref.follows(u) & set(stars)), u))
    normal = next(a for a, _n in ref.q2(200)[celebs + 5:] if a not in stars)
    # The generated posts are years old (cache rows live 7 days from their post's time): recent posts of the
    # reader's other followees give its cache a full window, as a live reader's has.
    followed = sorted(ref.follows(reader) - set(stars))
    now = datetime.now(UTC).replace(microsecond=0)
    for i in range(60):
        author = followed[i % len(followed)]
        actions.create_post(db, NET, accounts.get_account(db, NET, author), f"recent window post {i}",
                            posted_at=now - timedelta(seconds=60 - i), ns=db.settings.network)
    return reader, stars, normal


def _post_as(db: Database, author_id: int, text: str) -> None:
    actions.create_post(db, NET, accounts.get_account(db, NET, author_id), text,
                        posted_at=datetime.now(UTC), ns=db.settings.network)


def _counting(db: Database, name: str, fn: Any) -> tuple[Any, list[int]]:
    """`fn` wrapped to count the requests of statement `name` it sends."""
    seen = [0, 0]  # calls, requests
    real = db.execute_async

    def counted(statement: Any, params: Any = ()) -> Any:
        if statement.name == name:
            seen[1] += 1
        return real(statement, params)

    def call() -> None:
        db.execute_async = counted
        try:
            fn()
        finally:
            seen[0] += 1
    return call, seen


def _hot_counter(db: Database, seconds: float, shards: int) -> dict[str, Any]:
    """8 posts at a time, each holding the hot word: index_post reads the word's counter and adds to one cell."""
    real = search.COUNT_SHARDS
    search.COUNT_SHARDS = shards
    try:
        from api.network.common import new_post_id
        from api.network.values import Post

        def index_one() -> None:
            post = Post(post_id=new_post_id(), author_id=1, posted_at=datetime.now(UTC), content="hotword")
            search.index_post(db, NET, post)
        return sc.measure(index_one, seconds=seconds, concurrency=8)
    finally:
        search.COUNT_SHARDS = real


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--posts", type=int, default=6_000, show_default=True, help="generated posts")
@click.option("--rare", type=int, default=200, show_default=True,
              help="a term with more postings is common (has a top list; the product's is 2,000)")
@click.option("--top-k", type=int, default=50, show_default=True, help="posts a rebuilt list keeps (product: 500)")
@click.option("--max-age", type=float, default=60.0, show_default=True,
              help="seconds a top list serves before a search asks for its rebuild (the lists' 'TTL')")
@click.option("--seconds", type=float, default=8.0, show_default=True, help="measured seconds per operation")
@click.option("--celebrities", "celebs", type=int, default=20, show_default=True)
@click.option("--keep", is_flag=True, help="keep the scratch keyspace")
@click.option("--no-partition-scan", "no_scan", is_flag=True, help="skip sstablepartitions (nodetool figures only)")
@click.option("--seed", type=int, default=11, show_default=True)
def main(posts: int, rare: int, top_k: int, max_age: float, seconds: float, celebs: int, keep: bool, no_scan: bool,
         seed: int) -> None:
    """Q6 answers before and after the top lists' max age, Q4/post latency with the celebrity keys, a hot word."""
    node, scan = sc.local_node(), not no_scan
    out: dict[str, Any] = {"started": datetime.now(UTC), "posts": posts, "rare": rare, "top_k": top_k,
                           "max_age": max_age, "seconds": seconds}
    search.RARE_POSTINGS, search.TOP_K = rare, top_k
    with sc.scratch_keyspace("q6", keep=keep, request_timeout=30.0) as db, \
            tempfile.TemporaryDirectory(prefix="chronicle-q6-") as tmp:
        set_db(db)
        db.settings = dataclasses.replace(db.settings, network=NetworkSettings(term_top_max_age=max_age))
        offset = sc.log_offset(node)
        ref, out["network"] = _build(db, Path(tmp), posts, seed)
        out["keyspace"] = db.keyspace
        built = time.time()
        out["q6_before"] = _q6_round(db, ref)

        # While the lists age: Q4 and posts with the celebrity keys, then the hot word's counter.
        reader, stars, normal = _celebrity_setup(db, ref, celebs)
        out["celebrities"] = {"count": len(stars), "reader_follows": len(ref.follows(reader) & set(stars))}
        for rnd, ttls in enumerate(((0.0, 1.0), (1.0, 0.0))):
            for ttl in ttls:
                _with(db, celebrity_cache_ttl=ttl)
                db.caches.clear()
                page, seen = _counting(db, "SELECT celebrity_last_posts",
                                       lambda: home.home_of(db, NET, reader, "newest", db.settings.network))
                got = sc.measure(page, seconds=seconds, concurrency=4)
                del db.execute_async  # (the wrapper set by the calls)
                got["post_time_reads_per_page"] = round(seen[1] / max(seen[0], 1), 3)
                out[f"q4_newest_cache_{ttl:g}s_round{rnd + 1}"] = got
        _with(db, celebrity_cache_ttl=1.0)
        for rnd in (1, 2):
            out[f"post_by_celebrity_round{rnd}"] = sc.measure(lambda: _post_as(db, stars[0], "celebrity says hello"),
                                                              seconds=seconds, concurrency=2)
            out[f"post_by_normal_author_round{rnd}"] = sc.measure(lambda: _post_as(db, normal, "normal says hello"),
                                                                  seconds=seconds, concurrency=2)
        for rnd, order in enumerate(((1, search.COUNT_SHARDS), (search.COUNT_SHARDS, 1))):
            for cells in order:
                out[f"hot_word_index_{cells}_cells_round{rnd + 1}"] = _hot_counter(db, seconds, cells)
        # The posts made above hold "hello"/"says"/"celebrity": the reference learns them for the checks.
        wait = built + max_age + 1 - time.time()
        if wait > 0:
            time.sleep(wait)
        out["waited_past_max_age_s"] = round(time.time() - built, 1)
        out["q6_after_max_age"] = _q6_round(db, ref)
        out["rebuild_jobs"] = JobWorker(db, job_handlers.run_job).drain().as_dict()
        out["q6_after_rebuild"] = _q6_round(db, ref)
        warnings = sc.tombstone_warnings(node, offset)
        out["tombstone_warnings"] = [w for w in warnings if db.keyspace in w]
        out["tombstone_warnings_other_keyspaces"] = len(warnings) - len(out["tombstone_warnings"])
        try:
            out["partitions"] = sc.largest_partitions(node, db.keyspace, sorted(search.TABLES | accounts.TABLES),
                                                      scan=scan)
        except Exception as e:  # (nodetool over JMX: the figures above stand without it)
            out["partitions"] = {"error": repr(e)[:500]}
    rounds = ("q6_before", "q6_after_max_age", "q6_after_rebuild")
    out["verdict"] = {
        "q6_equal_to_reference": all(v["equal_to_reference"] for r in rounds for v in out[r].values()),
        "tombstone_warnings": len(out["tombstone_warnings"]),
        "q4_p50_ms_cache_1s_vs_0s": [(out[f"q4_newest_cache_1s_round{r}"]["p50_ms"],
                                      out[f"q4_newest_cache_0s_round{r}"]["p50_ms"]) for r in (1, 2)],
        "post_time_reads_per_page_1s_vs_0s": (out["q4_newest_cache_1s_round2"]["post_time_reads_per_page"],
                                              out["q4_newest_cache_0s_round2"]["post_time_reads_per_page"]),
        "hot_word_p50_p99_ms_16_vs_1_cell": [
            ((out[f"hot_word_index_16_cells_round{r}"]["p50_ms"], out[f"hot_word_index_16_cells_round{r}"]["p99_ms"]),
             (out[f"hot_word_index_1_cells_round{r}"]["p50_ms"], out[f"hot_word_index_1_cells_round{r}"]["p99_ms"]))
            for r in (1, 2)],
    }
    sc.write_result("scale_q6", out)


if __name__ == "__main__":
    main()
