"""Bulk loading of cleaned files (accounts.csv, relations.csv, posts.csv, likes.csv) with concurrent prepared
writes. Rows are idempotent INSERTs of values computed from the files; counters (followers, follows, likes,
term postings) are brought to the files' totals by adding the difference to what they hold, and term postings
go into buckets numbered from the posts' time order, so a re-run, or a run resumed after a crash, leaves the
same rows and counts: nothing is counted twice.

Several processes can share one file (`workers`): worker k takes the rows whose index % workers == k, with
its own Cluster (the GIL caps one process at about one core of driver work).

Progress is reported in rows of the input file (the unit of `count_rows`, so a bar's total and its
increments agree), not in table writes: one post is ~15 writes, one account 2.

An erased account stays erased (api/erasure/guard.py): its account row, its relations (either side), its posts
from before its erasure and the likes it gave or its posts received are not written again (`Erased`); posts keep
their numbering, so every other posting lands in the bucket a first load gave it.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import multiprocessing
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from api.config import Settings
from api.db import Database, Params, Statement
from api.erasure import guard
from api.erasure.network import FORMER_NAME, scrub_mention
from api.network import accounts, celebrities, likes, post_search, posts, relations, search
from api.network.common import parse_iso
from api.network.tokens import index_terms
from api.network.values import Account, Post

Progress = Callable[[int], None]
KINDS = ("accounts", "relations", "posts", "likes")
# Rows per unlogged batch (at most 10 partitions each, see Database.execute_many), kept under Cassandra's 5 KiB
# batch-size warning: relation, account and like rows are ~50 bytes, a post row up to ~600.
BATCH_ROWS = {"accounts": 10, "relations": 50, "posts": 8, "likes": 10}
Writes = Iterator[tuple[Statement, Params]]
RowWrites = Iterator[list[tuple[Statement, Params]]]  # the writes of each input row, row by row


def _noop(_n: int) -> None:
    return None


class Erased:
    """Which rows of a network's files name an account erased from it (none: every check is a dict lookup)."""

    def __init__(self, db: Database | None, network: str) -> None:
        self.db, self.archive = db, f"network:{network}"
        self.active = db is not None and guard.has_requests(db, self.archive)
        self.posts: set[int] = set()  # post ids of erased authors (likes of them are left out too)
        self.names: list[str] = []  # usernames of erased accounts (others' posts that name them are rewritten)

    def account(self, account_id: int) -> bool:
        """An erased account (its own rows and relations carry no time: all of them)."""
        return self.active and guard.erased_at(self.db, self.archive, str(account_id)) is not None

    def post(self, post: Post) -> bool:
        erased = self.active and guard.covers(self.db, self.archive, str(post.author_id),
                                              int(post.posted_at.timestamp() * 1_000_000))
        if erased:
            self.posts.add(post.post_id)
        return erased

    def note_accounts(self, path: Path) -> None:
        """The usernames of the erased accounts of an accounts file."""
        if self.active and path.exists():
            self.names = [name for account_id, name, *_counts in _rows(path) if name and self.account(int(account_id))]

    def rewritten(self, post: Post) -> Post:
        """Another's post as the erasure rewrote it when it names an erased account (the post itself otherwise)."""
        content, original = post.content, post.original_author
        for name in self.names:
            content = scrub_mention(content, name)
            if (original or "").casefold() == name.casefold():
                original = FORMER_NAME
        if (content, original) == (post.content, post.original_author):
            return post
        return dataclasses.replace(post, content=content, original_author=original)

    def note_posts(self, path: Path) -> None:
        """The erased authors' posts of a posts file (before its likes are written)."""
        if self.active and path.exists():
            for post in _posts(path, {}):
                self.post(post)


_NONE = Erased(None, "")


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


def account_writes(network: str, path: Path, worker: int = 0, workers: int = 1, erased: Erased = _NONE
                   ) -> RowWrites:
    for account_id, username, followers, follows in _rows(path, worker, workers):
        if erased.account(int(account_id)):
            continue
        yield accounts.account_writes(network, Account(int(account_id), username, int(followers), int(follows)))


def set_account_counts(db: Database, network: str, path: Path) -> int:
    """Bring every account's counters to the file's counts; returns the accounts changed."""
    erased = Erased(db, network)
    wanted = {int(a): (int(f), int(g)) for a, _name, f, g in _rows(path) if not erased.account(int(a))}
    relations_path = path.with_name("relations.csv")
    if erased.active and relations_path.exists():  # the erasure unfollowed them both ways: so do the counts
        for account_id, _name, rel_type, target_id, _target_name in _rows(relations_path):
            account = int(account_id)
            if account in wanted and erased.account(int(target_id)):
                followers, follows = wanted[account]
                wanted[account] = (followers - (rel_type == relations.FOLLOWER),
                                   follows - (rel_type == relations.FOLLOWS))
    return len(accounts.set_counts(db, network, wanted, every_account=True))


def relation_writes(network: str, path: Path, worker: int = 0, workers: int = 1, erased: Erased = _NONE
                    ) -> RowWrites:
    """Workers split relations.csv by partition, not by row, so the rows of one partition stay together
    (they go out in unlogged batches)."""
    for account_id, _name, rel_type, target_id, target_name in _rows(path):
        account = int(account_id)
        if (account + len(rel_type)) % workers == worker and not (erased.account(account)
                                                                 or erased.account(int(target_id))):
            yield [relations.relation_write(network, account, rel_type, int(target_id), target_name)]


def like_counts(likes_path: Path | None, erased: Erased = _NONE) -> dict[int, int]:
    counts: collections.Counter = collections.Counter()
    if likes_path is not None and likes_path.exists():
        for post_id, user in _rows(likes_path):
            if not erased.account(int(user)):
                counts[int(post_id)] += 1
    return dict(counts)


def _posts(path: Path, counts: dict[int, int]) -> list[Post]:
    """Every post of the file, oldest first (the order term postings are numbered in)."""
    out = []
    for row in _rows(path):
        (post_id, author_id, author_username, original_author, _orig_id, posted_at, content, language, country,
         lat, lon, _orig_likes, shares) = row
        out.append(Post(post_id=int(post_id), author_id=int(author_id), posted_at=parse_iso(posted_at),
                        author_username=author_username, original_author=original_author or None, content=content,
                        language=language or None, country=country or None, latitude=float(lat) if lat else None,
                        longitude=float(lon) if lon else None, like_count=counts.get(int(post_id), 0),
                        share_count=int(shares or 0)))
    out.sort(key=lambda p: (p.posted_at, p.post_id))
    return out


def post_writes(network: str, path: Path, counts: dict[int, int], worker: int = 0, workers: int = 1,
                erased: Erased = _NONE) -> RowWrites:
    """Post rows and term postings; posting n of a term (in time order) goes into bucket n // 50,000 (an erased
    author's post keeps its numbers, unwritten)."""
    numbered: collections.Counter = collections.Counter()
    for i, post in enumerate(_posts(path, counts)):
        buckets = {}
        for term in sorted(index_terms(post.content)):
            buckets[term] = search.bucket_of(numbered[term])
            numbered[term] += 1
        if i % workers != worker or erased.post(post):
            continue
        shown = erased.rewritten(post)
        if shown is not post:  # names an erased account: the erasure's rewrite stands, or a new one is indexed
            if erased.db is not None and posts.get_post(erased.db, network, post.post_id) is None:
                shown_buckets, _grown = search.index_post(erased.db, network, shown)
                yield [*posts.post_writes(network, shown), posts.term_buckets_write(network, post.post_id,
                                                                                     shown_buckets)]
            continue
        yield [*posts.post_writes(network, post), *search.posting_writes(network, post, buckets),
               posts.term_buckets_write(network, post.post_id, buckets)]


def common_terms(path: Path) -> list[str]:
    """Terms of a posts file with more postings than a rare term may have (the ones with top lists)."""
    totals: collections.Counter = collections.Counter()
    for post in _posts(path, {}):
        totals.update(index_terms(post.content))
    return sorted(t for t, n in totals.items() if n > search.RARE_POSTINGS)


def finish_posts(db: Database, network: str, path: Path, counts: dict[int, int]) -> dict[str, int]:
    """After the post rows: term and like counters to the file's totals, the top lists of common terms, then
    when each celebrity last posted (the file may hold newer posts of theirs)."""
    totals: collections.Counter = collections.Counter()
    erased = Erased(db, network)
    erased.note_accounts(path.with_name("accounts.csv"))
    for post in _posts(path, {}):
        if not erased.post(post):
            totals.update(index_terms(erased.rewritten(post).content))
    terms = sorted(totals)
    current: dict[str, int] = {}
    for i in range(0, len(terms), 1000):
        current.update(search.term_counts(db, network, terms[i:i + 1000]))
    db.execute_many(search.count_writes(network, {t: totals[t] - current.get(t, 0) for t in terms}))
    liked = sorted(counts)
    deltas = []
    for i in range(0, len(liked), 1000):
        chunk = liked[i:i + 1000]
        have = {p: likes.count(db, network, p) for p in chunk}
        deltas.extend((p, counts[p] - have[p]) for p in chunk)
    db.execute_many(likes.set_count_writes(network, deltas))
    common = [t for t in terms if totals[t] > search.RARE_POSTINGS]
    for term in common:
        post_search.rebuild_term_top(db, network, term)
    celebrities.record_post_times(db, network, sorted(accounts.celebrities(db, network)[0]))
    return {"terms": len(terms), "common_terms": len(common)}


def like_writes(network: str, path: Path, worker: int = 0, workers: int = 1, erased: Erased = _NONE
                ) -> RowWrites:
    for post_id, user_id in _rows(path, worker, workers):
        if int(post_id) in erased.posts or erased.account(int(user_id)):
            continue
        yield likes.like_writes(network, int(post_id), int(user_id))


def writes_for(kind: str, network: str, path: Path, likes_path: Path | None = None, worker: int = 0,
               workers: int = 1, erased: Erased = _NONE) -> RowWrites:
    if kind == "accounts":
        return account_writes(network, path, worker, workers, erased)
    if kind == "relations":
        return relation_writes(network, path, worker, workers, erased)
    if kind == "posts":
        erased.note_accounts(path.with_name("accounts.csv"))
        return post_writes(network, path, like_counts(likes_path, erased), worker, workers, erased)
    if kind == "likes":
        erased.note_posts(path.with_name("posts.csv"))
        return like_writes(network, path, worker, workers, erased)
    raise ValueError(kind)


class _RowProgress:
    """Turns `execute_many`'s completed writes into completed input rows for `progress`.

    Each row's writes are counted before the first of them is handed out, so the end of every row is known
    before its writes complete (counting only at the next row would leave the last row of a slice unreported
    when nothing follows it); `finish` reports whatever is left, so the increments add up to the rows read.
    """

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.ends: collections.deque[int] = collections.deque()  # cumulative write count at each row's end
        self.handed = self.done = self.rows = self.reported = 0

    def writes(self, rows: RowWrites) -> Writes:
        for row in rows:
            self.handed += len(row)
            self.ends.append(self.handed)
            self.rows += 1
            yield from row

    def __call__(self, completed: int) -> None:
        self.done += completed
        finished = 0
        while self.ends and self.ends[0] <= self.done:
            self.ends.popleft()
            finished += 1
        if finished:
            self.reported += finished
            self.progress(finished)

    def finish(self) -> None:
        if self.rows > self.reported:
            self.progress(self.rows - self.reported)
            self.reported = self.rows


def _write(db: Database, kind: str, rows: RowWrites, concurrency: int, progress: Progress) -> int:
    batch_size = BATCH_ROWS[kind]
    tracker = _RowProgress(progress)
    written = db.execute_many(tracker.writes(rows), concurrency=concurrency, batch_size=batch_size,
                              progress=tracker)
    tracker.finish()
    return written


def finish(db: Database, kind: str, network: str, path: Path, likes_path: Path | None = None) -> None:
    """What a kind needs after its rows: counters to the files' totals, top lists, the celebrity set."""
    if kind == "accounts":
        set_account_counts(db, network, path)
    elif kind == "relations":
        celebrities.apply_threshold(db, network)
    elif kind == "posts":
        finish_posts(db, network, path, like_counts(likes_path, Erased(db, network)))


def load(db: Database, kind: str, network: str, path: Path, *, likes_path: Path | None = None,
         progress: Progress = _noop, concurrency: int = 128) -> int:
    """Load one cleaned file in this process; returns the number of rows written (all tables). `progress` is
    called with the number of input rows done (they add up to `count_rows(path)`)."""
    written = _write(db, kind, writes_for(kind, network, path, likes_path, erased=Erased(db, network)), concurrency,
                     progress)
    finish(db, kind, network, path, likes_path)
    return written


def _worker(args: tuple) -> int:
    settings, kind, network, path, likes_path, worker, workers, concurrency, queue = args
    db = Database(settings)
    try:
        return _write(db, kind, writes_for(kind, network, path, likes_path, worker, workers, Erased(db, network)),
                      concurrency, queue.put)
    finally:
        db.close()


def load_parallel(settings: Settings, kind: str, network: str, path: Path, *, workers: int,
                  likes_path: Path | None = None, progress: Progress = _noop, concurrency: int = 128) -> int:
    """Load one cleaned file with `workers` processes (spawned, each with its own Cluster); `progress` as in
    `load`, summed over the workers."""
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
    db = Database(settings)
    try:
        finish(db, kind, network, path, likes_path)
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
