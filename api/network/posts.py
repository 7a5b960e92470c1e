"""Posts: posts_by_author (Q1, one partition per author and month), post_months_by_author (which months hold
posts of an author), posts_by_id (one post, and the authoritative like count), and the shares of each original
author's posts (shares_by_original and its month listing: an erasure finds them)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.cluster import ResponseFuture

from api import partitions
from api.db import Database, Params, Statement, without_none
from api.network import periods
from api.network.common import FORMER_NAME, month_of
from api.network.values import Post

TABLES = frozenset({"posts_by_author", "post_months_by_author", "posts_by_id", "shares_by_original",
                    "share_months_by_original"})

_POST_COLS = ("author_username, original_author, content, language, country, latitude, longitude, like_count, "
              "share_count")

PUT_POST_BY_AUTHOR = Statement(
    "INSERT INTO posts_by_author (network, author_id, month, posted_at, post_id, author_username, "
    "original_author, content, language, country, latitude, longitude, like_count, share_count) VALUES "
    "(:network, :author_id, :month, :posted_at, :post_id, :author_username, :original_author, :content, "
    ":language, :country, :latitude, :longitude, :like_count, :share_count)")
PUT_POST_MONTH = Statement(
    "INSERT INTO post_months_by_author (network, author_id, month) VALUES (?, ?, ?)")
PUT_POST_BY_ID = Statement(
    "INSERT INTO posts_by_id (network, post_id, author_id, posted_at, author_username, original_author, "
    "content, language, country, latitude, longitude, like_count, share_count) VALUES "
    "(:network, :post_id, :author_id, :posted_at, :author_username, :original_author, :content, :language, "
    ":country, :latitude, :longitude, :like_count, :share_count)")
GET_POST = Statement(
    f"SELECT post_id, author_id, posted_at, {_POST_COLS} FROM posts_by_id WHERE network = ? AND post_id = ?")
GET_POSTS = Statement(
    f"SELECT post_id, author_id, posted_at, {_POST_COLS} FROM posts_by_id WHERE network = ? AND post_id IN ?",
    name="SELECT posts_by_id (some)")
LIKES_OF_POSTS = Statement(
    "SELECT post_id, author_id, like_count FROM posts_by_id WHERE network = ? AND post_id IN ?",
    name="SELECT posts_by_id (like counts)", tuples=True)  # rows as plain tuples: a home page reads 30 or 800
GET_POST_AND_TERM_BUCKETS = Statement(  # a like needs both: one read
    f"SELECT post_id, author_id, posted_at, {_POST_COLS}, term_buckets FROM posts_by_id WHERE network = ? AND "
    "post_id = ?", name="SELECT posts_by_id (with term buckets)")
GET_TERM_BUCKETS = Statement("SELECT term_buckets FROM posts_by_id WHERE network = ? AND post_id = ?",
                             name="SELECT posts_by_id (term buckets)")
GET_TERM_BUCKETS_WRITTEN = Statement(  # by a retried request, after its first attempt wrote them at LOCAL_QUORUM
    "SELECT term_buckets FROM posts_by_id WHERE network = ? AND post_id = ?",
    name="SELECT posts_by_id (term buckets written)", consistency=ConsistencyLevel.LOCAL_QUORUM)
SET_TERM_BUCKETS = Statement("UPDATE posts_by_id SET term_buckets = ? WHERE network = ? AND post_id = ?")
DELETE_POST_BY_ID = Statement("DELETE FROM posts_by_id WHERE network = ? AND post_id = ?")
DELETE_POST_BY_AUTHOR = Statement(
    "DELETE FROM posts_by_author WHERE network = ? AND author_id = ? AND month = ? AND posted_at = ? "
    "AND post_id = ?")
SET_LIKES_BY_AUTHOR = Statement(  # USING TIMESTAMP: the time the count was read (see search.py)
    "UPDATE posts_by_author USING TIMESTAMP ? SET like_count = ? WHERE network = ? AND author_id = ? AND month = ? "
    "AND posted_at = ? AND post_id = ?")
SET_LIKES_BY_ID = Statement("UPDATE posts_by_id USING TIMESTAMP ? SET like_count = ? WHERE network = ? AND post_id = ?")
POST_MONTHS = Statement("SELECT month FROM post_months_by_author WHERE network = ? AND author_id = ?")
# Erasure of an account (api/erasure/network.py): its partitions whole.
DROP_AUTHOR_MONTH = Statement("DELETE FROM posts_by_author WHERE network = ? AND author_id = ? AND month = ?",
                              name="DELETE posts_by_author (month)")
DROP_AUTHOR_MONTHS = Statement("DELETE FROM post_months_by_author WHERE network = ? AND author_id = ?",
                               name="DELETE post_months_by_author (all)")
COUNT_MONTH = Statement("SELECT COUNT(*) AS n FROM posts_by_author WHERE network = ? AND author_id = ? AND month = ?",
                        name="SELECT posts_by_author (count)")
# Retention of a network (api/retention/network.py): the posts of a month before a time, and one month's listing.
POSTS_OF_MONTH_OLDER = Statement(
    f"SELECT post_id, posted_at, {_POST_COLS} FROM posts_by_author "
    "WHERE network = ? AND author_id = ? AND month = ? AND posted_at < ?", name="SELECT posts_by_author (older)")
DELETE_AUTHOR_MONTH = Statement("DELETE FROM post_months_by_author WHERE network = ? AND author_id = ? AND month = ?")
POSTS_OF_MONTH = Statement(
    f"SELECT post_id, posted_at, {_POST_COLS} FROM posts_by_author "
    "WHERE network = ? AND author_id = ? AND month = ? LIMIT ?")
POSTS_OF_MONTH_BEFORE = Statement(
    f"SELECT post_id, posted_at, {_POST_COLS} FROM posts_by_author "
    "WHERE network = ? AND author_id = ? AND month = ? AND (posted_at, post_id) < (?, ?) LIMIT ?")

# Shares by their original author's name (cql/0320): written with the share, read by an erasure of that author.
PUT_SHARE = Statement("INSERT INTO shares_by_original (network, original_key, month, post_id, author_id, posted_at) "
                      "VALUES (?, ?, ?, ?, ?, ?)")
PUT_SHARE_MONTH = Statement("INSERT INTO share_months_by_original (network, original_key, month) VALUES (?, ?, ?)")
DELETE_SHARE = Statement(
    "DELETE FROM shares_by_original WHERE network = ? AND original_key = ? AND month = ? AND post_id = ?")
SHARE_MONTHS = Statement("SELECT month FROM share_months_by_original WHERE network = ? AND original_key = ?")
SHARE_ROW = Statement("SELECT post_id FROM shares_by_original WHERE network = ? AND original_key = ? AND month = ? "
                      "AND post_id = ?")
SHARES_OF_MONTH = Statement(
    "SELECT post_id, author_id FROM shares_by_original WHERE network = ? AND original_key = ? AND month = ?")
DROP_SHARE_MONTH = Statement("DELETE FROM shares_by_original WHERE network = ? AND original_key = ? AND month = ?",
                             name="DELETE shares_by_original (month)")
DROP_SHARE_MONTHS = Statement("DELETE FROM share_months_by_original WHERE network = ? AND original_key = ?",
                              name="DELETE share_months_by_original (all)")

# Activity days: an author's posts in a time window of one month partition, oldest first.
POSTS_BETWEEN = Statement(
    "SELECT post_id, posted_at FROM posts_by_author WHERE network = ? AND author_id = ? AND month = ? "
    "AND posted_at >= ? AND posted_at < ?", name="SELECT posts_by_author (window)")

# Q4's celebrity merge once the cache bounds the window: every followed celebrity's posts since a time, in one
# request over (celebrity x month) partitions, instead of a month listing and a read per celebrity.
# Q4 by likes: the like counts of a home window, read by the window's author-month partitions (a slice of each)
# when they are few next to its posts; `share_count` tells a whole row from one holding only a like count.
LIKES_OF_AUTHOR_MONTHS = Statement(
    "SELECT post_id, like_count, share_count FROM posts_by_author WHERE network = ? AND author_id IN ? "
    "AND month IN ? AND posted_at >= ? AND posted_at <= ?", name="SELECT posts_by_author (like counts)",
    tuples=True)
RECENT_OF_AUTHORS = Statement(
    f"SELECT author_id, post_id, posted_at, {_POST_COLS} FROM posts_by_author "
    "WHERE network = ? AND author_id IN ? AND month IN ? AND posted_at >= ? PER PARTITION LIMIT ?")
_RECENT_MONTHS = 3  # months a `since` may reach back before the merge lists each author's months instead
_RECENT_AUTHORS = 100  # authors per request (x months: partitions the coordinator reads)

Position = tuple[str, datetime, int]  # (month, posted_at, post_id) of the last post of a Q1 page


def post_writes(network: str, post: Post) -> list[tuple[Statement, Params]]:
    """The rows of one post as (statement, params) pairs, absent fields left unset (no tombstones)."""
    fields = without_none(post.to_json() | {"posted_at": post.posted_at, "network": network})
    month = month_of(post.posted_at)
    return [(PUT_POST_BY_ID, fields), (PUT_POST_BY_AUTHOR, {**fields, "month": month}),
            (PUT_POST_MONTH, (network, post.author_id, month)), *share_writes(network, post),
            *periods.post_writes(network, post.author_id, post.posted_at)]


def share_writes(network: str, post: Post) -> list[tuple[Statement, Params]]:
    """A share's row in its original author's share index and the month's listing row ([] for other posts)."""
    key = _shared_key(post)
    if key is None:
        return []
    month = month_of(post.posted_at)
    return [(PUT_SHARE, (network, key, month, post.post_id, post.author_id, post.posted_at)),
            (PUT_SHARE_MONTH, (network, key, month))]


def original_key(name: str) -> str:
    """The share index's key of an original author's name: a digest of its case-folded form (names compare
    without case, as mentions do; the key itself names no one)."""
    return hashlib.blake2b(name.casefold().encode(), digest_size=16).hexdigest()


def _shared_key(post: Post) -> str | None:
    """The share index's key of a post whose original author is another account's name (None: no original
    author, the post's own author (a loaded file names every post's author), or one erased: it names no one)."""
    name = post.original_author
    if not name or name.casefold() in (FORMER_NAME, (post.author_username or "").casefold()):
        return None
    return original_key(name)


def unshare_writes(network: str, gone: Iterable[Post]) -> list[tuple[Statement, Params]]:
    """The share index rows of posts that are deleted, expire or are erased (their months' listing rows stay: an
    erasure reading an emptied month reads nothing)."""
    return [(DELETE_SHARE, (network, key, month_of(p.posted_at), p.post_id))
            for p in gone if (key := _shared_key(p)) is not None]


def shares_of(db: Database, network: str, key: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The months listed for an original author's key and the (post_id, author_id) of every share in them (an
    erasure's read: bounded by the shares of one account's posts, a month a partition)."""
    months = [r.month for r in db.execute(SHARE_MONTHS, (network, key))]
    futures = [db.execute_async(SHARES_OF_MONTH, (network, key, month)) for month in months]
    return months, [(r.post_id, r.author_id) for f in futures for r in f.result()]


def drop_shares_writes(network: str, key: str, months: Iterable[str]) -> list[tuple[Statement, Params]]:
    """An original author's share index, whole: its month partitions, then their listing."""
    return [*((DROP_SHARE_MONTH, (network, key, month)) for month in months), (DROP_SHARE_MONTHS, (network, key))]


def shared_place(post: Post) -> str | None:
    """Where a post's share index row is ("month:key"; None: it has none): an erasure's ledger records it."""
    key = _shared_key(post)
    return None if key is None else f"{month_of(post.posted_at)}:{key}"


def share_row_left(db: Database, network: str, place: str, post_id: int) -> int:
    """1 when the share index row `shared_place` named is still there (the erasure proof), else 0."""
    month, _, key = place.partition(":")
    return int(db.execute(SHARE_ROW, (network, key, month, post_id)).one() is not None)


def share_rows(db: Database, network: str, key: str, months: Iterable[str]) -> dict[str, int]:
    """Rows left in an original author's share index (the erasure proof): its listing and the months recorded."""
    listed, found = shares_of(db, network, key)
    recorded = set(months) - set(listed)
    futures = [db.execute_async(SHARES_OF_MONTH, (network, key, month)) for month in sorted(recorded)]
    return {"share_months_by_original": len(listed),
            "shares_by_original": len(found) + sum(len(list(f.result())) for f in futures)}


def start_get_post(db: Database, network: str, post_id: int) -> ResponseFuture:
    return db.execute_async(GET_POST, (network, post_id))


def get_post(db: Database, network: str, post_id: int) -> Post | None:
    row = start_get_post(db, network, post_id).result().one()
    return Post.from_row(row) if _is_post(row) else None


def post_and_term_buckets(db: Database, network: str, post_id: int) -> tuple[Post | None, dict[str, int]]:
    """A post (None when there is none) and its term -> posting bucket map, in one read."""
    row = db.execute_async(GET_POST_AND_TERM_BUCKETS, (network, post_id)).result().one()
    if not _is_post(row):
        return None, {}
    return Post.from_row(row), dict(row.term_buckets or {})


def _is_post(row: Any) -> bool:
    """A whole post row. A like publishes its count with an UPDATE, which on a replica that missed the post's
    insert (down when it was written, not yet repaired) makes a row holding only `like_count`: no post."""
    return row is not None and row.author_id is not None and row.posted_at is not None


def _written(rows: Iterable[Any]) -> Iterator[Any]:
    """posts_by_author rows of posts written whole. A like's count update (SET_LIKES_BY_AUTHOR) on a replica
    that missed the post's insert, or after the post was deleted, makes a row holding only `like_count` under
    the post's key: every post has content, such a row has none."""
    return (r for r in rows if r.content is not None)


_IN_CHUNK = 100  # post ids per IN read: the coordinator reads them in parallel, one round trip each chunk


def posts_by_ids(db: Database, network: str, post_ids: Iterable[int]) -> dict[int, Post]:
    """The posts that exist among these ids (at most a page's worth: one IN read per 100)."""
    ids = list(dict.fromkeys(post_ids))
    futures = [db.execute_async(GET_POSTS, (network, ids[i:i + _IN_CHUNK])) for i in range(0, len(ids), _IN_CHUNK)]
    return {r.post_id: Post.from_row(r) for f in futures for r in f.result() if _is_post(r)}


def like_counts(db: Database, network: str, post_ids: Iterable[int]) -> dict[int, int]:
    """The like count of each post that exists, as published on the post by the last like (deleted posts, and
    rows left by a like that raced a delete, are absent). Chunks of 100 ids are read concurrently."""
    ids = list(dict.fromkeys(post_ids))
    futures = [db.execute_async(LIKES_OF_POSTS, (network, ids[i:i + _IN_CHUNK]))
               for i in range(0, len(ids), _IN_CHUNK)]
    return {post_id: like_count or 0 for f in futures for post_id, author_id, like_count in f.result()
            if author_id is not None}


_SLICE_GAIN = 4  # posts per author-month partition above which a window's counts are read by partition
_AUTHORS_PER_READ = 50  # x the window's months: the partitions one LIKES_OF_AUTHOR_MONTHS read touches


def window_like_counts(db: Database, network: str, window: Iterable[Post]) -> dict[int, int]:
    """`like_counts` of a home window (Q4 by likes ranks up to 800 posts): when its posts sit in few author-month
    partitions (a reader following few prolific authors), one slice of each partition over the window's time
    span, as published on posts_by_author, instead of one posts_by_id partition per post; else `like_counts`.
    The same counts either way: a like publishes both rows with the same write time."""
    posts = list(window)
    # (year, month) pairs, not month_of's strings: this runs over every post of an 800-post window.
    groups = {(p.author_id, p.posted_at.year, p.posted_at.month) for p in posts}
    if not posts or len(groups) * _SLICE_GAIN > len(posts):
        return like_counts(db, network, (p.post_id for p in posts))
    wanted = {p.post_id for p in posts}
    authors = sorted({a for a, _y, _m in groups})
    months = sorted({f"{y:04d}-{m:02d}" for _a, y, m in groups})  # as month_of writes them
    first, last = min(p.posted_at for p in posts), max(p.posted_at for p in posts)
    futures = [db.execute_async(LIKES_OF_AUTHOR_MONTHS, (network, authors[i:i + _AUTHORS_PER_READ], months,
                                                         first, last))
               for i in range(0, len(authors), _AUTHORS_PER_READ)]
    return {post_id: like_count or 0 for f in futures for post_id, like_count, share_count in f.result()
            if post_id in wanted and share_count is not None}


def term_buckets(db: Database, network: str, post_id: int) -> dict[str, int]:
    """term -> posting bucket of a post (where a like finds its postings)."""
    return term_buckets_from(start_term_buckets(db, network, post_id))


def written_term_buckets(db: Database, network: str, post_id: int) -> dict[str, int]:
    """term -> posting bucket, as an earlier request wrote them (read at LOCAL_QUORUM, which sees that write)."""
    return term_buckets_from(db.execute_async(GET_TERM_BUCKETS_WRITTEN, (network, post_id)))


def start_term_buckets(db: Database, network: str, post_id: int) -> ResponseFuture:
    return db.execute_async(GET_TERM_BUCKETS, (network, post_id))


def term_buckets_from(future: ResponseFuture) -> dict[str, int]:
    row = future.result().one()
    return dict(row.term_buckets or {}) if row is not None else {}


def term_buckets_write(network: str, post_id: int, buckets: dict[str, int]) -> tuple[Statement, Params]:
    return SET_TERM_BUCKETS, (buckets, network, post_id)


def author_months(db: Database, network: str, author_id: int) -> list[str]:
    return [r.month for r in db.execute(POST_MONTHS, (network, author_id))]


def posts_of_author(db: Database, network: str, author_id: int, limit: int, *,
                    before: Position | None = None, months: list[str] | None = None) -> list[Post]:
    """Q1: up to `limit` posts of an author, newest first, optionally strictly before (month, time, id).

    Month partitions are read newest first, a few at a time concurrently (a sparse author has a handful of
    posts per month), until `limit` posts are in hand.
    """
    if months is None:
        months = author_months(db, network, author_id)
    months = [m for m in months if before is None or m <= before[0]]
    out: list[Post] = []
    batch = 2
    i = 0
    while i < len(months) and len(out) < limit:
        chunk = months[i:i + batch]
        futures = []
        for month in chunk:
            if before is not None and month == before[0]:
                futures.append(db.execute_async(POSTS_OF_MONTH_BEFORE, (network, author_id, month, before[1],
                                                                        before[2], limit)))
            else:
                futures.append(db.execute_async(POSTS_OF_MONTH, (network, author_id, month, limit)))
        for f in futures:
            out.extend(Post.from_row(r, author_id) for r in _written(f.result()))
        i += len(chunk)
        batch = min(batch * 2, 16)
    return out[:limit]


def start_posts_of_authors(db: Database, network: str, author_ids: Iterable[int], limit: int
                           ) -> Callable[[], list[Post]]:
    """Send the month listings of several authors now; the returned callable reads the newest month of every
    author in one concurrent round, then older months only for authors still short of `limit` posts. Returns
    every author's newest `limit` posts (unordered across authors)."""
    months_f = {a: db.execute_async(POST_MONTHS, (network, a)) for a in dict.fromkeys(author_ids)}

    def finish() -> list[Post]:
        months = {a: [r.month for r in f.result()] for a, f in months_f.items()}
        return _newest_of_each(db, network, {a: m for a, m in months.items() if m}, limit)
    return finish


def _newest_of_each(db: Database, network: str, months: dict[int, list[str]], limit: int) -> list[Post]:
    """Every author's newest `limit` posts, given each author's months (newest first). All authors' reads of a
    round are in flight together: the newest month first, then 2, 4, 8, 16 older months at a time for the
    authors still short (a sparse author has a handful of posts per month)."""
    got: dict[int, list[Post]] = {a: [] for a in months}
    done = dict.fromkeys(months, 0)  # months read so far, per author
    batch = 1
    while True:
        short = [a for a in months if len(got[a]) < limit and done[a] < len(months[a])]
        if not short:
            return [p for a in got for p in got[a][:limit]]
        futures = [(a, db.execute_async(POSTS_OF_MONTH, (network, a, m, limit - len(got[a]))))
                   for a in short for m in months[a][done[a]:done[a] + batch]]
        for a, future in futures:
            got[a].extend(Post.from_row(r, a) for r in _written(future.result()))
        for a in short:
            done[a] += batch
        batch = min(batch * 2, 16)


def months_since(since: datetime, now: datetime) -> list[str]:
    """The month buckets from `since`'s to `now`'s, newest first."""
    out, y, m = [], now.year, now.month
    while (y, m) >= (since.year, since.month):
        out.append(f"{y:04d}-{m:02d}")
        y, m = (y, m - 1) if m > 1 else (y - 1, 12)
    return out


def start_recent_posts_of_authors(db: Database, network: str, author_ids: Iterable[int], since: datetime,
                                  limit: int, now: datetime) -> Callable[[], list[Post]]:
    """Every author's newest `limit` posts posted at or after `since` (unordered across authors). One request
    per 100 authors when `since` lies in the last few months; else the month listings of
    `start_posts_of_authors`, filtered."""
    authors = list(dict.fromkeys(author_ids))
    months = months_since(since, now)
    if len(months) > _RECENT_MONTHS:
        finish_all = start_posts_of_authors(db, network, authors, limit)
        return lambda: [p for p in finish_all() if p.posted_at >= since]
    futures = [db.execute_async(RECENT_OF_AUTHORS, (network, authors[i:i + _RECENT_AUTHORS], months, since, limit))
               for i in range(0, len(authors), _RECENT_AUTHORS)]

    def finish() -> list[Post]:
        by_author: dict[int, list[Post]] = {}
        for future in futures:
            for r in _written(future.result()):
                by_author.setdefault(r.author_id, []).append(Post.from_row(r))
        # PER PARTITION LIMIT applies per month: keep each author's newest `limit` over its months.
        return [p for got in by_author.values()
                for p in (got if len(got) <= limit else
                          sorted(got, key=lambda p: (p.posted_at, p.post_id), reverse=True)[:limit])]
    return finish


def position_of(post: Post) -> Position:
    return month_of(post.posted_at), post.posted_at, post.post_id


def newest_posts_of(db: Database, network: str, authors: list[int], cap: int) -> tuple[list[Post], bool]:
    """The newest `cap` posts (plus any tied with the last one) over several authors, and whether that is
    all of their posts. Month buckets are read newest month first, all authors of a month concurrently, and
    reading stops once `cap` posts are in hand: older months hold only older posts."""
    month_futures = [(a, db.execute_async(POST_MONTHS, (network, a))) for a in authors]
    by_month: dict[str, list[int]] = {}
    for author, future in month_futures:
        for row in future.result():
            by_month.setdefault(row.month, []).append(author)
    collected: list[Post] = []
    months = sorted(by_month, reverse=True)
    complete = True
    for i, month in enumerate(months):
        futures = [(a, db.execute_async(POSTS_OF_MONTH, (network, a, month, 100_000))) for a in by_month[month]]
        for author, future in futures:
            collected.extend(Post.from_row(r, author) for r in _written(future.result()))
        if len(collected) >= cap and i + 1 < len(months):
            complete = False
            break
    collected.sort(key=lambda p: (p.posted_at, p.post_id), reverse=True)
    if len(collected) > cap:
        complete = False
        last = collected[cap - 1].posted_at
        collected = [p for p in collected if p.posted_at >= last]
    return collected, complete


def delete_post_rows(db: Database, network: str, post: Post) -> None:
    """posts_by_author first, posts_by_id last: a retried delete still finds the post by id."""
    db.execute(DELETE_POST_BY_AUTHOR, (network, post.author_id, month_of(post.posted_at), post.posted_at,
                                       post.post_id))
    db.execute_many(unshare_writes(network, [post]))
    db.execute(DELETE_POST_BY_ID, (network, post.post_id))


def like_count_writes(network: str, post: Post, new_count: int, read_at: int) -> list[tuple[Statement, Params]]:
    """Publish a post's like count (read from its counter at `read_at`, microseconds, which becomes the write
    time) on its rows in posts_by_author and posts_by_id."""
    return [(SET_LIKES_BY_AUTHOR, (read_at, new_count, network, post.author_id, month_of(post.posted_at),
                                   post.posted_at, post.post_id)),
            (SET_LIKES_BY_ID, (read_at, new_count, network, post.post_id))]


def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: partitions.Progress | None = None) -> dict[str, int]:
    """Delete every partition of this module's tables that belongs to `network` (admin; see api/partitions.py)."""
    return partitions.drop(db, TABLES, "network", network, dry_run=dry_run, progress=progress)


def start_posts_between(db: Database, network: str, author_id: int, start: datetime, end: datetime
                        ) -> list[ResponseFuture]:
    """Reads of (post_id, posted_at) of an author's posts in [start, end): one per month partition touched."""
    return [db.execute_async(POSTS_BETWEEN, (network, author_id, month, start, end))
            for month in months_between(start, end)]


def months_between(start: datetime, end: datetime) -> list[str]:
    """The month buckets that overlap [start, end)."""
    months, year, month = [], start.year, start.month
    last = end - timedelta(microseconds=1)
    while (year, month) <= (last.year, last.month):
        months.append(f"{year:04d}-{month:02d}")
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return months


# -- erasure of an account -----------------------------------------------------------------------------------------
def all_posts_of(db: Database, network: str, author_id: int) -> tuple[list[str], list[Post]]:
    """Every month bucket of an author and every post in them (paged: bounded by what one account posted)."""
    months = author_months(db, network, author_id)
    futures = [db.execute_async(POSTS_OF_MONTH, (network, author_id, month, 2**31 - 1)) for month in months]
    return months, [Post.from_row(r, author_id) for f in futures for r in _written(f.result())]


def erase_by_id_write(network: str, post_id: int) -> tuple[Statement, Params]:
    """A post's row by id (its other copies are the owners' of those tables: postings, likes, caches)."""
    return DELETE_POST_BY_ID, (network, post_id)


def erase_author_writes(network: str, author_id: int, months: Iterable[str]) -> list[tuple[Statement, Params]]:
    """The author's month partitions, then their listing."""
    return [*((DROP_AUTHOR_MONTH, (network, author_id, month)) for month in months),
            (DROP_AUTHOR_MONTHS, (network, author_id))]


def rows_of_author(db: Database, network: str, author_id: int, months: Iterable[str], post_ids: Iterable[int]
                   ) -> dict[str, int]:
    """Rows left of an author's posts (the erasure proof): month listing, month partitions, posts by id."""
    by_id = [db.execute_async(GET_POST, (network, post_id)) for post_id in post_ids]
    return {"post_months_by_author": len(author_months(db, network, author_id)),
            "posts_by_author": sum(db.execute(COUNT_MONTH, (network, author_id, m)).one().n for m in months),
            "posts_by_id": sum(1 for f in by_id if _is_post(f.result().one()))}


# -- retention of a network ------------------------------------------------------------------------------------------
def expiring(db: Database, network: str, author_id: int, before: datetime, listed: list[str] | None = None
             ) -> tuple[list[str], list[Post]]:
    """An author's posts older than `before`: the month buckets wholly before it, and every expired post (those of
    the whole months and of the month `before` falls in). `listed`: its month listing, when already read."""
    cut = month_of(before)
    months = [m for m in (author_months(db, network, author_id) if listed is None else listed) if m <= cut]
    futures = [db.execute_async(POSTS_OF_MONTH if m < cut else POSTS_OF_MONTH_OLDER,
                                (network, author_id, m, 2**31 - 1) if m < cut else (network, author_id, m, before))
               for m in months]
    return [m for m in months if m < cut], [Post.from_row(r, author_id) for f in futures for r in _written(f.result())]


def expire_writes(network: str, author_id: int, whole_months: Iterable[str], partial: Iterable[Post]
                  ) -> list[tuple[Statement, Params]]:
    """Expired posts out of an author's listing: whole months (partition and listing row), and the expired rows of
    the month the cutoff falls in (their rows by id are `erase_by_id_write`)."""
    writes: list[tuple[Statement, Params]] = []
    for month in whole_months:
        writes += [(DROP_AUTHOR_MONTH, (network, author_id, month)), (DELETE_AUTHOR_MONTH, (network, author_id, month))]
    return writes + [(DELETE_POST_BY_AUTHOR, (network, author_id, month_of(p.posted_at), p.posted_at, p.post_id))
                     for p in partial]
