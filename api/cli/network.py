"""`chronicle network ...`: the follower-network archive's admin commands.

  clean-relations  edges file -> accounts.csv + relations.csv      (cleaning_scripts/follower_relations.py)
  clean-posts      posts CSV -> posts.csv + likes.csv               (cleaning_scripts/tweets.py)
  generate         look-alike raw files                             (cleaning_scripts/generate_network.py)
  load             cleaned files -> query tables                    (runtime_scripts/load_network.py)
  query q1..q6     answer Q1-Q6 as JSON                             (runtime_scripts/network_query.py)
  post             Q5: new posts with fan-out                       (runtime_scripts/insert_new_tweets.py)
  init-cache       rebuild one account's home cache                 (runtime_scripts/init_cache_for_user.py)
  rankings         Q2 + Q3 job: append a top-100 snapshot           (runtime_scripts/compute_rankings.py)
  apply-threshold  job: celebrity set for the hybrid threshold in force
  index-terms      job: rebuild Q6 top lists of common terms
  reconcile        job: re-count counters and repair drift
  worker           run the queued jobs (celebrity promotion/demotion, like purges, term top lists)
  drop             delete a whole network (to redo an import)

Every command prints JSON on stdout (progress bars go to stderr). Exit codes: see api/cli/common.py.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import click

from api.cli.common import CONTEXT, Exit, cassandra_errors, database, emit, fail, fail_on, progress_bars, runtime, say
from api.cli.workers import done_retried_failed, pass_reporter, worker_session
from api.network import (
    accounts,
    actions,
    celebrities,
    cleaning,
    generator,
    home,
    job_handlers,
    loader,
    maintenance,
    post_search,
    posts,
    rankings,
    search,
    top100,
)
from api.network.common import parse_iso, valid_network_name
from api.network.values import Account


@click.group("network", context_settings=CONTEXT, short_help="Follower networks: clean, load, query, post, rank.")
def network() -> None:
    """Follower networks: clean and generate raw files, load them, answer Q1-Q6, post, rebuild caches, rank.

    Exit codes: 0 done, 1 failed (bad input file or a write failed), 2 usage error, 3 Cassandra unreachable,
    4 account/post/snapshot not found.
    """


# ------------------------------------------------------------------------------------------- cleaning


@network.command("clean-relations", context_settings=CONTEXT,
                 short_help="Follower edges -> accounts.csv + relations.csv.")
@click.option("--edges", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="space-separated id pairs, one edge a line (twitter_combined.txt)")
@click.option("--edge-order", type=click.Choice(cleaning.EDGE_ORDERS), default=cleaning.DEFAULT_EDGE_ORDER,
              show_default=True, help="how to read `A B`: follower-followee = A follows B (SNAP's documented "
              "reading); followee-follower = B follows A (seed 004's scripts)")
@click.option("--posts", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="the posts CSV, read only for its author names")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="directory for accounts.csv and relations.csv")
@click.option("--quiet", is_flag=True, help="no progress bar")
def clean_relations(edges: Path, edge_order: str, posts: Path, out_dir: Path, quiet: bool) -> None:
    """Clean the follower edges into relation rows with usernames; prints a JSON report of what was dropped.

    Edges file (two ids a line, e.g. SNAP twitter_combined.txt) -> accounts.csv + relations.csv. SNAP
    documents a line `A B` as "A follows B" (--edge-order follower-followee, the default); seed 004's
    scripts read it as "B follows A" (followee-follower). The reading decides who has the followers.
    Streams the edges (duplicates are removed through 32 spill files, so memory grows with accounts, not edges).
    The authors of the posts CSV take the ids with the most followers; every other id gets a deterministic
    generated username. Each distinct edge becomes a "follower" row and a "follows" row.

    Exit codes: 0 done, 1 input unreadable or malformed beyond repair, 2 usage error.
    """
    with fail_on(OSError, ValueError, UnicodeError), progress_bars(not quiet) as bars:
        total = None if quiet else cleaning.count_lines(edges)  # the bar counts lines, as the cleaning reads them
        report = cleaning.clean_relations(edges, posts, out_dir, edge_order=edge_order,
                                          progress=bars("edge lines", total))
    click.echo(json.dumps(report.as_dict(), indent=1))


@network.command("clean-posts", context_settings=CONTEXT, short_help="Posts CSV -> posts.csv + likes.csv.")
@click.option("--posts", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--accounts", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="accounts.csv written by clean-relations (follower_relations.py)")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--like-rate", type=click.FloatRange(0, 1), default=0.001, show_default=True,
              help="likes generated per like counted in number_of_likes")
@click.option("--seed", type=int, default=4, show_default=True, help="seed of the likers drawn per post")
@click.option("--date-order", type=click.Choice(["dmy", "mdy"]), default="dmy", show_default=True,
              help="how to read `04/03/2017`")
@click.option("--authors", type=click.Choice(cleaning.AUTHOR_MODES), default=cleaning.OWN, show_default=True,
              help="own: each post on the account named after its author; spread: over the --top accounts")
@click.option("--top", type=click.IntRange(1), default=100, show_default=True,
              help="with --authors spread (or an author without an account): spread over this many accounts")
@click.option("--quiet", is_flag=True, help="no progress bar")
def clean_posts(posts: Path, accounts: Path, out_dir: Path, like_rate: float, seed: int, date_order: str,
                authors: str, top: int, quiet: bool) -> None:
    """Clean the posts and generate likes; prints a JSON report of what was dropped or repaired.

    Posts CSV (author,content,country,date_time,id,language,latitude,longitude,number_of_likes,number_of_shares)
    -> posts.csv + likes.csv. Repairs ids (scientific-notation and repeated ids get stable hashed ids), converts
    `dd/mm/yyyy HH:MM` to ISO 8601 UTC, puts each post on the account that clean-relations named after its
    author (--authors own; --authors spread spreads them over the --top most-followed accounts instead; the
    original author is kept on every post either way) and writes round(number_of_likes * --like-rate) likes per
    post from distinct accounts. Drops exact duplicate rows and rows whose date cannot be read, and says so in
    its report.

    Exit codes: 0 done, 1 input unreadable or missing columns, 2 usage error.
    """
    with fail_on(OSError, ValueError, UnicodeError), progress_bars(not quiet) as bars:
        total = None if quiet else cleaning.count_raw_posts(posts)  # CSV rows, not lines (content spans lines)
        report = cleaning.clean_posts(posts, accounts, out_dir, like_rate=like_rate, seed=seed,
                                      date_order=date_order, authors=authors, top=top,
                                      progress=bars("posts", total))
    click.echo(json.dumps(report.as_dict(), indent=1))


SCALES = {"small": (400, 4_000, 800), "medium": (8_000, 150_000, 5_000), "full": (81_306, 1_768_149, 52_542)}


@network.command("generate", context_settings=CONTEXT, short_help="Write look-alike raw network files.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--scale", type=click.Choice(list(SCALES)), default="small", show_default=True)
@click.option("--accounts", type=int, help="override the scale's account count")
@click.option("--edges", type=int, help="override the scale's edge count")
@click.option("--posts", type=int, help="override the scale's post count")
@click.option("--seed", type=int, default=4, show_default=True)
@click.option("--edge-order", type=click.Choice(cleaning.EDGE_ORDERS), default=cleaning.DEFAULT_EDGE_ORDER,
              show_default=True, help="column order of the edge lines (clean them with the same --edge-order)")
def generate(out_dir: Path, scale: str, accounts: int | None, edges: int | None, posts: int | None,
             seed: int, edge_order: str) -> None:
    """Generate raw network files of the chosen scale.

    Writes look-alike raw files (twitter_combined.txt, tweets.csv) with the real files' shapes and quirks.
    `--scale full` matches the real data sets (81,306 accounts, 1,768,149 edges, 52,542 posts);
    `--scale small` is for tests. Same seed, same files. Exit codes: 0 done, 2 usage error.
    """
    a, e, p = SCALES[scale]
    edges_path, posts_path = generator.generate(out_dir, accounts=accounts or a, edges=edges or e,
                                                posts=posts or p, seed=seed, edge_order=edge_order)
    click.echo(json.dumps({"edges": str(edges_path), "posts": str(posts_path), "edge_order": edge_order}))


# ------------------------------------------------------------------------------------------- loading


@network.command("load", context_settings=CONTEXT, short_help="Load cleaned files into the query tables.")
@click.option("--network", required=True, help="network id; several networks coexist in one keyspace")
@click.option("--dir", "directory", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True,
              help="output directory of the cleaning scripts")
@click.option("--only", type=click.Choice(loader.KINDS), multiple=True, help="load only these files (repeatable)")
@click.option("--workers", type=click.IntRange(1, 16), default=1, show_default=True,
              help="processes per file (each with its own Cassandra session)")
@click.option("--concurrency", type=click.IntRange(1, 1024), default=128, show_default=True,
              help="writes in flight per process")
@click.option("--dry-run", is_flag=True, help="count the rows that would be loaded, write nothing")
@click.option("--quiet", is_flag=True, help="no progress bars")
def load(network: str, directory: Path, only: tuple[str, ...], workers: int, concurrency: int, dry_run: bool,
         quiet: bool) -> None:
    """Load the cleaned files of DIR as network NETWORK; prints rows written and rows/s per file as JSON.

    Loads accounts.csv, relations.csv, posts.csv and likes.csv into the query tables with concurrent prepared
    writes, progress bars (rows of each file), optionally several processes per file (--workers). Every write
    is an idempotent INSERT of values computed from the files, counts included: re-running, or resuming after a
    crash by simply running again, writes the same rows and counts nothing twice.

    Exit codes: 0 loaded, 1 a file is missing/malformed or a write failed, 2 usage error, 3 Cassandra unreachable.
    """
    kinds = only or loader.KINDS
    for kind in kinds:
        if not (directory / f"{kind}.csv").exists():
            fail(f"{directory / f'{kind}.csv'} is missing", Exit.FAILED)
    if dry_run:
        emit({"network": network, "dry_run": True,
              "rows": {k: loader.count_rows(directory / f"{k}.csv") for k in kinds}})
        return
    report = {}
    with cassandra_errors(), progress_bars(not quiet) as bars:
        for kind in kinds:
            path = directory / f"{kind}.csv"
            # The bar counts rows of the file, as the loader reports them (not table writes: a post is ~15).
            rows = None if quiet else loader.count_rows(path)
            advance = bars(kind, rows)
            started = time.perf_counter()
            with fail_on(ValueError, OSError, prefix=f"{path}: "):
                if workers > 1:
                    written = loader.load_parallel(runtime().settings(), kind, network, path, workers=workers,
                                                   likes_path=directory / "likes.csv", progress=advance,
                                                   concurrency=concurrency)
                else:
                    written = loader.load(database(), kind, network, path, likes_path=directory / "likes.csv",
                                          progress=advance, concurrency=concurrency)
            seconds = time.perf_counter() - started
            report[kind] = {**({"rows": rows} if rows is not None else {}), "writes": written,
                            "seconds": round(seconds, 2),
                            "writes_per_s": round(written / seconds) if seconds else None}
    emit({"network": network, "loaded": report})


# ------------------------------------------------------------------------------------------- queries


@network.group("query", context_settings=CONTEXT, short_help="Answer Q1-Q6 as JSON.")
@click.option("--network", required=True)
@click.pass_context
def query(ctx: click.Context, network: str) -> None:
    """Q1-Q6 for NETWORK, as JSON.

    \b
      q1 posts of an account   q2 top-100 accounts     q3 top-100 followers of those
      q4 home page             q6 search (AND of all words)        (Q5 is `chronicle network post`)

    Exit codes: 0 answered, 2 usage error, 3 Cassandra unreachable, 4 account or snapshot not found.
    """
    ctx.obj = network


def _account(network: str, account_id: int) -> Account:
    account = accounts.get_account(database(), network, account_id)
    if account is None:
        fail(f"account {account_id} not found in network {network}", Exit.NOT_FOUND)
    return account


@query.command(short_help="Q1: the posts of an account, newest first.")
@click.option("--account-id", type=int, required=True)
@click.option("--limit", type=click.IntRange(1), default=1_000_000, show_default=True)
@click.pass_obj
def q1(network: str, account_id: int, limit: int) -> None:
    """The posts of an account, newest first."""
    with cassandra_errors():
        _account(network, account_id)
        emit(posts.posts_of_author(database(), network, account_id, limit))


def _snapshot(network: str, kind: str, at: str | None, history: int | None) -> None:
    with cassandra_errors():
        when: datetime | None = parse_iso(at) if at else None
        found = rankings.snapshots(database(), network, kind, at=when, limit=history or 1)
        if not found:
            fail("no snapshot: run `chronicle network rankings` (compute_rankings.py)", Exit.NOT_FOUND)
        emit(found if history else found[0])


def _snapshot_options(command):
    """--at and --history, shared by the two snapshot queries."""
    command = click.option("--history", type=click.IntRange(1), help="the newest N snapshots instead of one")(command)
    return click.option("--at", help="ISO time: the snapshot in force then (default: latest)")(command)


@query.command(short_help="Q2: the 100 accounts with the most followers.")
@_snapshot_options
@click.pass_obj
def q2(network: str, at: str | None, history: int | None) -> None:
    """The 100 accounts with the most followers (latest snapshot of `chronicle network rankings`)."""
    _snapshot(network, "accounts", at, history)


@query.command(short_help="Q3: the 100 accounts following most of Q2's.")
@_snapshot_options
@click.pass_obj
def q3(network: str, at: str | None, history: int | None) -> None:
    """The 100 accounts following the most of the Q2 accounts."""
    _snapshot(network, "followers", at, history)


@query.command(short_help="Q4: an account's home page.")
@click.option("--account-id", type=int, required=True)
@click.option("--order", type=click.Choice(["newest", "likes"]), default="newest", show_default=True)
@click.pass_obj
def q4(network: str, account_id: int, order: str) -> None:
    """The home page: counts and the 25 newest or most-liked posts of the followed accounts (ranked now: the API
    reuses a ranking by likes for CHRONICLE_NETWORK_LIKES_RANK_MAX_AGE seconds)."""
    with cassandra_errors():
        _account(network, account_id)
        emit(home.home_of(database(), network, account_id, order, fresh=True))


@query.command(short_help="Q6: the 25 most-liked posts with all WORDS.")
@click.argument("words", nargs=-1, required=True)
@click.pass_obj
def q6(network: str, words: tuple[str, ...]) -> None:
    """The 25 most-liked posts containing all WORDS (case-insensitive)."""
    parsed = search.parse_query(" ".join(words))
    if not parsed:
        fail("give at least one word (letters or digits)", Exit.USAGE)
    with cassandra_errors():
        found = post_search.search_posts(database(), network, parsed, database().settings.network.page_size)
        emit({"words": parsed, "posts": found.posts, "exact": found.exact})


# ------------------------------------------------------------------------------------------- writes and jobs


@network.command("post", context_settings=CONTEXT, short_help="Q5: insert posts and fan them out.")
@click.option("--network", required=True)
@click.option("--author-id", type=int, help="author of a single post")
@click.option("--content", help="text of a single post")
@click.option("--posted-at", help="ISO 8601 time of a single post (default: now)")
@click.option("--file", "file_", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="CSV with author_id,content[,posted_at]")
@click.option("--dry-run", is_flag=True, help="validate and count followers, write nothing")
@click.option("--quiet", is_flag=True, help="no progress bar")
def post(network: str, author_id: int | None, content: str | None, posted_at: str | None, file_: Path | None,
         dry_run: bool, quiet: bool) -> None:
    """Insert posts and fan them out; prints each post id with the caches it reached as JSON.

    Q5: write new posts and fan each out to its author's followers' home caches (concurrent prepared writes;
    authors above the hybrid threshold are merged at read time instead). Either one post (--author-id and
    --content) or a CSV file with columns author_id,content[,posted_at].

    Exit codes: 0 written, 1 bad input file, 2 usage error, 3 Cassandra unreachable, 4 unknown author.
    """
    if file_ is None and (author_id is None or not content):
        raise click.UsageError("give --author-id and --content, or --file")
    items: list[tuple[int, str, str | None]] = []
    if file_ is not None:
        try:
            with file_.open(newline="", encoding="utf-8") as handle:
                for row in csv.DictReader(handle):
                    items.append((int(row["author_id"]), row["content"], row.get("posted_at") or None))
        except (KeyError, ValueError) as exc:
            fail(f"{file_}: needs columns author_id,content[,posted_at]: {exc}", Exit.FAILED)
    else:
        items.append((author_id, content, posted_at))
    out = []
    with cassandra_errors(), progress_bars(not quiet and len(items) > 1) as bars:
        db = database()
        advance = bars("posts", len(items))
        for author_id_, text, when in items:
            author = accounts.get_account(db, network, author_id_)
            if author is None:
                fail(f"author {author_id_} not found in network {network}", Exit.NOT_FOUND)
            started = time.perf_counter()
            new_post, fanned = actions.create_post(db, network, author, text, dry_run=dry_run,
                                                   posted_at=parse_iso(when) if when else None)
            seconds = time.perf_counter() - started
            if dry_run:
                out.append({"author_id": author_id_, "would_fan_out_to": fanned})
                continue
            out.append({"post_id": new_post.post_id, "author_id": author_id_, "posted_at": new_post.posted_at,
                        "fanned_out_to": fanned, "seconds": round(seconds, 3)})
            advance(1)
    emit({"network": network, "dry_run": dry_run, "posts": out})


@network.command("init-cache", context_settings=CONTEXT, short_help="Rebuild one account's home-timeline cache.")
@click.option("--network", required=True)
@click.option("--account-id", type=int, required=True)
@click.option("--dry-run", is_flag=True, help="show what the cache would hold, write nothing")
def init_cache(network: str, account_id: int, dry_run: bool) -> None:
    """(Re)build the home cache of ACCOUNT_ID; prints a JSON summary.

    Builds one account's home-timeline cache from scratch: the newest posts (up to the cap, 800) of the
    accounts it follows, except accounts above the hybrid threshold, which are merged at read time.

    Exit codes: 0 built, 2 usage error, 3 Cassandra unreachable, 4 unknown account.
    """
    with cassandra_errors():
        db = database()
        if accounts.get_account(db, network, account_id) is None:
            fail(f"account {account_id} not found in network {network}", Exit.NOT_FOUND)
        emit(home.build_cache(db, network, account_id, dry_run=dry_run))


@network.command("rankings", context_settings=CONTEXT, short_help="Q2+Q3 job: append a top-100 snapshot.")
@click.option("--network", required=True)
@click.option("--every", type=click.IntRange(min=1), help="repeat every N seconds until interrupted")
@click.option("--dry-run", is_flag=True, help="compute and print, append nothing")
@click.option("--summary", is_flag=True, help="print only timings and the first 5 of each list")
def compute_rankings(network: str, every: int | None, dry_run: bool, summary: bool) -> None:
    """Compute Q2/Q3 for NETWORK and append a snapshot; prints it as JSON.

    Q2 + Q3 job: compute the top-100 accounts by followers and the top-100 accounts following the most of
    them, and append one snapshot to both time series. Run it from cron, or with --every to loop.

    Exit codes: 0 done, 2 usage error, 3 Cassandra unreachable.
    """
    with cassandra_errors():
        db = database()
        while True:
            result = top100.compute_rankings(db, network, dry_run=dry_run)
            if summary:
                result = {**result, "accounts": result["accounts"][:5], "followers": result["followers"][:5]}
            emit(result)
            if not every:
                return
            time.sleep(every)


@network.command("apply-threshold", context_settings=CONTEXT,
                 short_help="Job: make the celebrity set match the hybrid threshold in force.")
@click.option("--network", required=True)
@click.option("--dry-run", is_flag=True, help="list who would be promoted and demoted, change nothing")
def apply_threshold(network: str, dry_run: bool) -> None:
    """Promote every account at or above CHRONICLE_NETWORK_HYBRID_THRESHOLD (merged into home pages at read
    time) and demote the others (fanned out again). Run after changing the threshold; loads run it too.

    Exit codes: 0 done, 2 usage error, 3 Cassandra unreachable.
    """
    with cassandra_errors():
        emit(celebrities.apply_threshold(database(), network, dry_run=dry_run))


@network.command("index-terms", context_settings=CONTEXT, short_help="Job: rebuild the Q6 top lists of terms.")
@click.option("--network", required=True)
@click.option("--term", "terms", multiple=True, help="a term to rebuild (repeatable); default: every common "
              "term of the given posts file")
@click.option("--posts-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="a cleaned posts.csv whose common terms are rebuilt")
@click.option("--dry-run", is_flag=True, help="compute floors and sizes, write nothing")
def index_terms(network: str, terms: tuple[str, ...], posts_file: Path | None, dry_run: bool) -> None:
    """Rebuild the top list (most-liked candidates) of common terms (more than 2,000 postings), from all their
    postings and the posts' like counts. A new generation is written, then switched to: readers never wait.

    Exit codes: 0 done, 2 usage error, 3 Cassandra unreachable.
    """
    wanted = list(dict.fromkeys(search.parse_query(" ".join(terms)) if terms else []))
    if posts_file is not None:
        wanted += [t for t in loader.common_terms(posts_file) if t not in wanted]
    if not wanted:
        fail("give --term or --posts-file", Exit.USAGE)
    with cassandra_errors():
        db = database()
        with progress_bars() as bars:
            advance = bars("terms", len(wanted))
            out = []
            for term in wanted:
                out.append(post_search.rebuild_term_top(db, network, term, dry_run=dry_run))
                advance(1)
        emit({"network": network, "dry_run": dry_run, "terms": out})


@network.command("index-shares", context_settings=CONTEXT,
                 short_help="Job: index every share by its original author (for networks loaded before it).")
@click.option("--network", required=True)
@click.option("--dry-run", is_flag=True, help="count the shares, write nothing")
@click.option("--quiet", is_flag=True, help="no progress bar")
def index_shares(network: str, dry_run: bool, quiet: bool) -> None:
    """Write the share index (a post's original author -> the post; cql/0320) of every post that has an original
    author. Posts written since that migration are indexed as they are written; run this once on a network
    loaded before it, so an erasure of an account finds every share of its posts. Reads every account's posts;
    writing a row again changes nothing, so an interrupted run is finished by running it again.

    Exit codes: 0 done, 2 usage error, 3 Cassandra unreachable.
    """
    with cassandra_errors(), progress_bars(not quiet) as bars:
        emit(maintenance.index_shares(database(), network, dry_run=dry_run, progress=bars("accounts", None)))


@network.command("reconcile", context_settings=CONTEXT,
                 short_help="Job: re-count follower/follows (and like) counters and repair drift.")
@click.option("--network", required=True)
@click.option("--account-id", "account_ids", type=int, multiple=True, help="only these accounts (repeatable)")
@click.option("--post-id", "post_ids", type=int, multiple=True, help="also re-count these posts' likes")
@click.option("--dry-run", is_flag=True, help="report drift, repair nothing")
def reconcile(network: str, account_ids: tuple[int, ...], post_ids: tuple[int, ...], dry_run: bool) -> None:
    """Counters are moved only by requests whose transaction changed a relation or like; one that died in
    between leaves a count off by one. This re-counts from the relation partitions (every account with a
    count, or --account-id) and likes_by_post (--post-id), and adds the difference.

    Exit codes: 0 done (drift repaired or none), 2 usage error, 3 Cassandra unreachable.
    """
    with cassandra_errors():
        emit(maintenance.reconcile_counts(database(), network, list(account_ids) or None, list(post_ids),
                                      dry_run=dry_run))


@network.command("worker", context_settings=CONTEXT,
                 short_help="Run queued network jobs (promotions, demotions, like purges, term top lists).")
@click.option("--once", is_flag=True, help="run the jobs due now (and the jobs they queue), then exit")
@click.option("--interval", default=1.0, show_default=True, help="seconds to sleep when nothing is due")
@click.option("--batch-size", default=20, show_default=True, type=click.IntRange(1, 1000))
def worker(once: bool, interval: float, batch_size: int) -> None:
    """Requests queue the work that grows with an account's followers, a post's likes or a term's postings
    (api/network/jobs.py): an account crossing the hybrid threshold is promoted (merged at read time) or
    demoted (fanned out again), a deleted post's likes are removed, a grown term's top list is rebuilt. This
    runs them, for every network. Safe to run several at once (each holds a share of the queue); on SIGTERM
    the current job is finished and the queue handed back. Prints a JSON summary when it stops.

    Exit codes: 0 done (--once) or stopped by a signal, 1 some jobs failed for good, 3 Cassandra unreachable.
    """
    from api.network.jobs import JobWorker, Stats

    db = database()
    total = Stats()
    with worker_session(db, "job") as stopping:
        job_worker = JobWorker(db, job_handlers.run_job, batch_size=batch_size)
        # Announced once a signal stops it cleanly (a supervisor may send SIGTERM as soon as it sees this).
        say(f"network job worker {job_worker.owner}: keyspace={db.keyspace}")
        on_pass = pass_reporter(total, done_retried_failed)
        if once:
            job_worker.drain(until=stopping, on_pass=on_pass)
        else:
            job_worker.run(interval=interval, stop=stopping, on_pass=on_pass)
    emit(total.as_dict())
    if total.failed:
        sys.exit(Exit.FAILED)


@network.command("drop", context_settings=CONTEXT, short_help="Delete a whole network (to redo an import).")
@click.argument("name")
@click.option("--dry-run", is_flag=True, help="count the partitions that would be deleted, delete nothing")
@click.option("--yes", is_flag=True, help="do not ask for confirmation")
def drop(name: str, dry_run: bool, yes: bool) -> None:
    """Delete every row of network NAME in every network table: accounts, relations, posts, likes, the term
    index, home caches, rankings, the activity log and stored activity days, Q5's retry keys (its retention
    policies and runs, holds and erasure ledger are kept: records, not content). Scans the partition keys of each
    table (all networks'), so it takes time on a large keyspace; an interrupted drop is finished by running it
    again. Other networks are not touched.

    Refused while a legal hold covers the network or one of its accounts (release it first).

    Exit codes: 0 done, 2 usage error (bad name, not confirmed), 3 Cassandra unreachable, 5 under a legal hold.
    """
    if not valid_network_name(name):
        fail(f"{name!r} is not a network name (1-64 letters, digits, '_' or '-')", Exit.USAGE)
    if not dry_run and not yes and not click.confirm(f"delete every row of network {name!r}?", err=True):
        fail("not confirmed (use --yes in scripts)", Exit.USAGE)
    with cassandra_errors(), fail_on(maintenance.HeldError, code=Exit.HELD), progress_bars() as bars:
        advances: dict[str, Callable[[int], None]] = {}

        def progress(table: str, n: int) -> None:
            if table not in advances:
                advances[table] = bars(table[:12], None)
            advances[table](n)

        emit(maintenance.drop_network(database(), name, dry_run=dry_run, progress=progress))
