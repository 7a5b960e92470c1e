"""Bulk loading of cleaned files (accounts.csv, relations.csv, posts.csv, likes.csv) with concurrent prepared
writes. Every write is an idempotent INSERT of values computed from the files (counts included), so a
re-run, or a run resumed after a crash, leaves the same rows: nothing is counted twice.

Several processes can share one file (`workers`): worker k takes the rows whose index % workers == k, with
its own Cluster (the GIL caps one process at about one core of driver work).
"""

from __future__ import annotations

import collections
import csv
import multiprocessing
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from cassandra.concurrent import execute_concurrent
from cassandra.query import UNSET_VALUE, BatchStatement, BatchType

from api.config import Settings
from api.db import Database, Statement
from api.network import accounts, posts, relations
from api.network.common import month_of, parse_iso
from api.network.settings import network_settings

Progress = Callable[[int], None]
PUT_LIKE_BY_POST = Statement("INSERT INTO likes_by_post (network, post_id, user_id) VALUES (?, ?, ?)")
PUT_LIKE_BY_USER = Statement("INSERT INTO likes_by_user (network, user_id, post_id) VALUES (?, ?, ?)")
KINDS = ("accounts", "relations", "posts", "likes")
STATEMENTS = (accounts.PUT_ACCOUNT, accounts.PUT_RANKED, relations.PUT_RELATION, posts.PUT_POST_BY_ID,
              posts.PUT_POST_BY_AUTHOR, posts.PUT_POST_MONTH, posts.PUT_WORD, PUT_LIKE_BY_POST, PUT_LIKE_BY_USER)


def _noop(_n: int) -> None:
    return None


def _rows(path: Path, worker: int = 0, workers: int = 1) -> Iterator[list[str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        next(reader, None)
        for i, row in enumerate(reader):
            if i % workers == worker:
                yield row


def count_rows(path: Path) -> int:
    with path.open(newline="", encoding="utf-8") as handle:
        return max(0, sum(1 for _ in csv.reader(handle)) - 1)


def run_writes(db: Database, writes: Iterable[tuple[Statement, Any]], *, concurrency: int = 128,
               progress: Progress = _noop, every: int = 500) -> int:
    """Execute (statement, params) pairs with `concurrency` in flight; progress(n) every `every` writes."""
    # Prepared here, on this thread: the generator below is also pulled on the driver's I/O thread, where a
    # blocking prepare would deadlock.
    prepared = {id(stmt): db.prepared(stmt) for stmt in STATEMENTS}
    rows = [0]

    def pairs() -> Iterator[tuple]:
        for stmt, params in writes:
            ps = prepared[id(stmt)]
            if isinstance(params, Rows):
                batch = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=ps.consistency_level)
                for p in params:
                    batch.add(ps, p)
                rows[0] += len(params)
                yield batch, None
            else:
                rows[0] += 1
                yield ps, params

    reported = 0
    for _ in execute_concurrent(db.session, pairs(), concurrency=concurrency, raise_on_first_error=True,
                                results_generator=True):
        if rows[0] - reported >= every:
            progress(rows[0] - reported)
            reported = rows[0]
    progress(rows[0] - reported)
    return rows[0]


def _u(value: str) -> Any:
    return value if value != "" else UNSET_VALUE


def account_writes(network: str, path: Path, worker: int = 0, workers: int = 1) -> Iterator[tuple]:
    for account_id, username, followers, follows in _rows(path, worker, workers):
        by_id, ranked = accounts.account_row_params(network, int(account_id), username, int(followers),
                                                    int(follows))
        yield accounts.PUT_ACCOUNT, by_id
        yield accounts.PUT_RANKED, ranked


class Rows(list):
    """Parameter sets of one partition, written as one unlogged single-partition batch."""


RELATION_BATCH = 50  # ~50 bytes a row: well under the 5 KiB batch warning


def relation_writes(network: str, path: Path, worker: int = 0, workers: int = 1) -> Iterator[tuple]:
    """relations.csv is grouped by partition: consecutive rows of one (account, rel_type) go out as a batch.
    Workers split the file by partition, not by row, so a group stays whole."""
    group: Rows = Rows()
    key = None
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        next(reader, None)
        for account_id, _name, rel_type, target_id, target_name in reader:
            account = int(account_id)
            if (account + len(rel_type)) % workers != worker:
                continue
            if (account, rel_type) != key or len(group) >= RELATION_BATCH:
                if group:
                    yield relations.PUT_RELATION, group
                group, key = Rows(), (account, rel_type)
            group.append((network, account, rel_type, int(target_id), target_name))
    if group:
        yield relations.PUT_RELATION, group


def like_counts(likes_path: Path | None) -> dict[int, int]:
    counts: collections.Counter = collections.Counter()
    if likes_path is not None and likes_path.exists():
        for post_id, _user in _rows(likes_path):
            counts[int(post_id)] += 1
    return dict(counts)


def post_writes(network: str, path: Path, counts: dict[int, int], worker: int = 0, workers: int = 1
                ) -> Iterator[tuple]:
    for row in _rows(path, worker, workers):
        (post_id, author_id, author_username, original_author, _orig_id, posted_at, content, language, country,
         lat, lon, _orig_likes, shares) = row
        post = {"post_id": int(post_id), "author_id": int(author_id), "author_username": author_username,
                "original_author": original_author or None, "posted_at": parse_iso(posted_at),
                "content": content, "language": language or None, "country": country or None,
                "latitude": float(lat) if lat else None, "longitude": float(lon) if lon else None,
                "like_count": counts.get(int(post_id), 0), "share_count": int(shares or 0)}
        params = {k: v for k, v in post.items() if v is not None}
        params["network"] = network
        yield posts.PUT_POST_BY_ID, params
        yield posts.PUT_POST_BY_AUTHOR, {**params, "month": month_of(post["posted_at"])}
        yield posts.PUT_POST_MONTH, (network, post["author_id"], month_of(post["posted_at"]))
        for word_params in posts.word_rows(network, post):
            yield posts.PUT_WORD, tuple(UNSET_VALUE if v is None else v for v in word_params)


def like_writes(network: str, path: Path, worker: int = 0, workers: int = 1) -> Iterator[tuple]:
    for post_id, user_id in _rows(path, worker, workers):
        yield PUT_LIKE_BY_POST, (network, int(post_id), int(user_id))
        yield PUT_LIKE_BY_USER, (network, int(user_id), int(post_id))


def writes_for(kind: str, network: str, path: Path, likes_path: Path | None = None, worker: int = 0,
               workers: int = 1) -> Iterator[tuple]:
    if kind == "accounts":
        return account_writes(network, path, worker, workers)
    if kind == "relations":
        return relation_writes(network, path, worker, workers)
    if kind == "posts":
        return post_writes(network, path, like_counts(likes_path), worker, workers)
    if kind == "likes":
        return like_writes(network, path, worker, workers)
    raise ValueError(kind)


def load(db: Database, kind: str, network: str, path: Path, *, likes_path: Path | None = None,
         progress: Progress = _noop, concurrency: int = 128) -> int:
    """Load one cleaned file in this process; returns the number of rows written (all tables)."""
    written = run_writes(db, writes_for(kind, network, path, likes_path), concurrency=concurrency,
                         progress=progress)
    if kind == "accounts":
        accounts.rebuild_celebrities(db, network_settings(), network)
    return written


def _worker(args: tuple) -> int:
    settings, kind, network, path, likes_path, worker, workers, concurrency, queue = args
    db = Database(settings)
    try:
        return run_writes(db, writes_for(kind, network, path, likes_path, worker, workers),
                          concurrency=concurrency, progress=queue.put)
    finally:
        db.close()


def load_parallel(settings: Settings, kind: str, network: str, path: Path, *, workers: int,
                  likes_path: Path | None = None, progress: Progress = _noop, concurrency: int = 128) -> int:
    """Load one cleaned file with `workers` processes (spawned, each with its own Cluster)."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        queue = manager.Queue()
        with ctx.Pool(workers) as pool:
            result = pool.map_async(_worker, [(settings, kind, network, path, likes_path, k, workers, concurrency,
                                               queue) for k in range(workers)])
            while not result.ready():
                time.sleep(0.2)
                while not queue.empty():
                    progress(queue.get())
            while not queue.empty():
                progress(queue.get())
            total = sum(result.get())
    if kind == "accounts":
        db = Database(settings)
        try:
            accounts.rebuild_celebrities(db, network_settings(), network)
        finally:
            db.close()
    return total


def load_network(db: Database, network: str, directory: Path, *, progress_factory: Callable[[str, int], Progress]
                 | None = None, concurrency: int = 128) -> dict[str, int]:
    """Load accounts, relations, posts and likes from `directory` (the cleaning scripts' output)."""
    out: dict[str, int] = {}
    for kind in KINDS:
        path = directory / f"{kind}.csv"
        progress = progress_factory(kind, count_rows(path)) if progress_factory else _noop
        out[kind] = load(db, kind, network, path, likes_path=directory / "likes.csv", progress=progress,
                         concurrency=concurrency)
    return out



