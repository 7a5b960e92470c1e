"""Home timelines (Q4, Q5): home_timeline_buckets (the caches fed by fan-out), home_cache_state (whether a
cache is built, from when, and from which post time on it is complete) and home_excluded_authors (authors an
account unfollowed, whose cached rows it must skip) and home_likes_rankings (a reader's window as last ranked by
likes, reused for a few seconds).

Layout: a fan-out row goes into the bucket of the hour it is written (a post is never dated in the future, so
a bucket holds posts no newer than its hour's end); a build writes its rows into a bucket of its own, keyed by
the negative build second. A reader reads the build bucket and the hour buckets from the build's hour to now,
newest first, and stops once older buckets cannot hold anything newer than what it has. Nothing is deleted:
rows expire (TTL), a rebuild writes a new build bucket, unfollowed authors and deleted posts are skipped on read.
Which posts belong in a cache, and when to rebuild it, is decided in api/network/home.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.query import UNSET_VALUE

from api import partitions
from api.db import Database, Params, Statement
from api.network.common import now_to_the_millisecond, to_utc
from api.network.settings import NetworkSettings
from api.network.values import Post

TABLES = frozenset({"home_timeline_buckets", "home_cache_state", "home_excluded_authors", "home_likes_rankings",
                    "home_cache_builds"})
FUTURE_SLACK = timedelta(minutes=5)  # how far in the future a post may be dated (see actions.create_post)
STATE_TTL = 24 * 3600  # a cache is rebuilt at least daily: a read walks at most 25 hour buckets

PUT_ROW = Statement(
    "INSERT INTO home_timeline_buckets (network, account_id, bucket, posted_at, post_id, author_id, "
    "author_username, original_author, content, language, country, latitude, longitude, share_count) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?")
# Rows as plain tuples (a home page decodes 50 or more; by likes 800 keys): `_post` reads them by position, in
# the order of these columns.
READ_BUCKET = Statement(
    "SELECT posted_at, post_id, author_id, author_username, original_author, content, language, country, "
    "latitude, longitude, share_count FROM home_timeline_buckets WHERE network = ? AND account_id = ? "
    "AND bucket = ? LIMIT ?", tuples=True)
READ_BUCKET_KEYS = Statement(
    "SELECT posted_at, post_id, author_id FROM home_timeline_buckets WHERE network = ? AND account_id = ? "
    "AND bucket = ? LIMIT ?", name="SELECT home_timeline_buckets (keys)", tuples=True)
GET_STATE = Statement(
    "SELECT built_at, cutoff, complete FROM home_cache_state WHERE network = ? AND account_id = ?")
GET_STATE_FRESH = Statement(
    "SELECT built_at, cutoff, complete FROM home_cache_state WHERE network = ? AND account_id = ?",
    name="SELECT home_cache_state (fresh)", consistency=ConsistencyLevel.LOCAL_QUORUM)
PUT_STATE = Statement(
    "INSERT INTO home_cache_state (network, account_id, built_at, cutoff, complete) VALUES (?, ?, ?, ?, ?) "
    "USING TTL ?")
DELETE_STATE = Statement("DELETE FROM home_cache_state WHERE network = ? AND account_id = ?")
EXCLUDE_AUTHOR = Statement(
    "INSERT INTO home_excluded_authors (network, account_id, author_id, excluded) VALUES (?, ?, ?, ?)")
EXCLUDED_AUTHORS = Statement(
    "SELECT author_id, excluded FROM home_excluded_authors WHERE network = ? AND account_id = ?")
GET_RANKING = Statement(
    "SELECT ranked_at, cache_built_at, post_ids, stale_since FROM home_likes_rankings "
    "WHERE network = ? AND account_id = ?")
PUT_RANKING = Statement(
    "INSERT INTO home_likes_rankings (network, account_id, ranked_at, cache_built_at, post_ids) "
    "VALUES (?, ?, ?, ?, ?)")
MARK_RANKING_STALE = Statement(
    "UPDATE home_likes_rankings SET stale_since = ? WHERE network = ? AND account_id = ?")
PUT_BUILD = Statement("INSERT INTO home_cache_builds (network, account_id, bucket) VALUES (?, ?, ?) USING TTL ?")
# Erasure of an account (api/erasure/network.py): copies of its posts in readers' caches, and its own cache.
BUILDS = Statement("SELECT bucket FROM home_cache_builds WHERE network = ? AND account_id = ?")
DELETE_ROW = Statement(
    "DELETE FROM home_timeline_buckets WHERE network = ? AND account_id = ? AND bucket = ? AND posted_at = ? "
    "AND post_id = ?")
DROP_BUCKET = Statement("DELETE FROM home_timeline_buckets WHERE network = ? AND account_id = ? AND bucket = ?",
                        name="DELETE home_timeline_buckets (partition)")
DELETE_EXCLUDED = Statement(
    "DELETE FROM home_excluded_authors WHERE network = ? AND account_id = ? AND author_id = ?")
DROP_EXCLUDED = Statement("DELETE FROM home_excluded_authors WHERE network = ? AND account_id = ?",
                          name="DELETE home_excluded_authors (all)")
DELETE_RANKING = Statement("DELETE FROM home_likes_rankings WHERE network = ? AND account_id = ?")
DROP_BUILDS = Statement("DELETE FROM home_cache_builds WHERE network = ? AND account_id = ?")


@dataclasses.dataclass(frozen=True)
class CacheState:
    """A built cache holds every post newer than or as new as `cutoff` (every post when `complete`) of the
    non-celebrity accounts its owner follows, in the build bucket and the hour buckets since `built_at`."""

    built_at: datetime
    cutoff: datetime | None
    complete: bool

    @classmethod
    def from_row(cls, row: Any) -> CacheState:
        return cls(to_utc(row.built_at), to_utc(row.cutoff) if row.cutoff is not None else None, bool(row.complete))

    def valid_from(self) -> datetime | None:
        """The oldest post time the cache is sure to hold; None when it holds everything."""
        return None if self.complete else self.cutoff

    @property
    def build_bucket(self) -> int:
        return -int(self.built_at.timestamp())


@dataclasses.dataclass(frozen=True)
class Ranking:
    """A reader's home window as ranked by likes at `ranked_at` (best first), from the cache build
    `cache_built_at`; `stale_since`: when the reader's follows last changed."""

    ranked_at: datetime
    cache_built_at: datetime
    post_ids: list[int]
    stale_since: datetime | None

    def usable(self, state: CacheState) -> bool:
        """Ranked from this cache build, and after the reader's last follow or unfollow."""
        return (self.cache_built_at == state.built_at
                and (self.stale_since is None or self.stale_since < self.ranked_at))

    def age(self, now: datetime) -> float:
        return (now - self.ranked_at).total_seconds()


def hour_bucket(at: datetime) -> int:
    return int(at.timestamp()) // 3600


def _u(value: Any) -> Any:
    return UNSET_VALUE if value is None else value


def _row(network: str, owner: int, bucket: int, post: Post, ttl: int) -> tuple[Statement, Params]:
    return PUT_ROW, (network, owner, bucket, post.posted_at, post.post_id, post.author_id, _u(post.author_username),
                     _u(post.original_author), _u(post.content), _u(post.language), _u(post.country),
                     _u(post.latitude), _u(post.longitude), post.share_count, ttl)


def _fan(db: Database, ns: NetworkSettings, writes: Iterable[tuple[Statement, Params]]) -> int:
    """Many cache writes, batched by replica (rows of one follower's partition are one local mutation)."""
    if ns.fanout_batch <= 1:
        return db.execute_many(writes, concurrency=ns.fanout_concurrency)
    return db.execute_many(writes, concurrency=max(1, ns.fanout_concurrency // 4), batch_size=ns.fanout_batch)


def add_to_caches(db: Database, ns: NetworkSettings, network: str, posts: list[Post], owners: Iterable[int]) -> int:
    """Q5 fan-out: write posts into the current hour bucket of every owner's cache; returns the rows written."""
    bucket = hour_bucket(datetime.now(UTC))
    return _fan(db, ns, (_row(network, o, bucket, p, ns.cache_ttl) for o in owners for p in posts))


def write_build(db: Database, ns: NetworkSettings, network: str, account_id: int, posts: list[Post],
                complete: bool) -> CacheState:
    """Write a new build of one account's cache (its newest posts, newest first) and record its state; returns
    the state written, so the caller need not read it back."""
    now = now_to_the_millisecond()  # as stored: a build's identity (rankings)
    state = CacheState(now, None if complete or not posts else posts[-1].posted_at, complete)
    _fan(db, ns, (_row(network, account_id, state.build_bucket, p, ns.cache_ttl) for p in posts))
    db.execute(PUT_BUILD, (network, account_id, state.build_bucket, ns.cache_ttl))
    db.execute(PUT_STATE, (network, account_id, state.built_at, _u(state.cutoff), complete,
                           min(STATE_TTL, max(60, ns.cache_ttl - 300))))
    return state


def drop_state(db: Database, network: str, account_id: int) -> None:
    """Forget that a cache is built: the next read rebuilds it."""
    db.execute(DELETE_STATE, (network, account_id))


def start_state(db: Database, network: str, account_id: int):
    return db.execute_async(GET_STATE, (network, account_id))


def state_from(future) -> CacheState | None:
    row = future.result().one()
    return CacheState.from_row(row) if row is not None else None


def get_state(db: Database, network: str, account_id: int, *, fresh: bool = False) -> CacheState | None:
    row = db.execute(GET_STATE_FRESH if fresh else GET_STATE, (network, account_id)).one()
    return CacheState.from_row(row) if row is not None else None


def start_ranking(db: Database, network: str, account_id: int):
    return db.execute_async(GET_RANKING, (network, account_id))


def ranking_from(future) -> Ranking | None:
    row = future.result().one()
    if row is None or row.post_ids is None or row.ranked_at is None or row.cache_built_at is None:
        return None  # no ranking, or only a stale mark left by a follow
    return Ranking(to_utc(row.ranked_at), to_utc(row.cache_built_at), list(row.post_ids),
                   to_utc(row.stale_since) if row.stale_since is not None else None)


def start_put_ranking(db: Database, network: str, account_id: int, ranked_at: datetime, state: CacheState,
                      post_ids: list[int]):
    """Keep a ranking of the reader's window (best first); `ranked_at`: when its reads started."""
    return db.execute_async(PUT_RANKING, (network, account_id, ranked_at, state.built_at, post_ids))


def ranking_stale_write(network: str, account_id: int, at: datetime) -> tuple[Statement, Params]:
    """The reader's follows changed at `at`: a ranking made before then is not reused."""
    return MARK_RANKING_STALE, (at, network, account_id)


def excluded_write(network: str, account_id: int, author_id: int, excluded: bool) -> tuple[Statement, Params]:
    """Whether Q4 skips the author's cached posts (true after an unfollow; they expire with their bucket)."""
    return EXCLUDE_AUTHOR, (network, account_id, author_id, excluded)


def start_excluded(db: Database, network: str, account_id: int):
    return db.execute_async(EXCLUDED_AUTHORS, (network, account_id))


def excluded_from(future) -> set[int]:
    return {r.author_id for r in future.result() if r.excluded}


def _post(row: tuple[Any, ...]) -> Post:
    """A Post from a READ_BUCKET row, or only its id, author and time from a READ_BUCKET_KEYS row (tuples)."""
    if len(row) == 3:
        return Post(row[1], row[2], to_utc(row[0]))
    return Post(row[1], row[2], to_utc(row[0]), row[3], row[4], row[5], row[6], row[7], row[8], row[9], 0,
                row[10] or 0)


def read(db: Database, network: str, account_id: int, state: CacheState, limit: int,
         enough: Callable[[list[Post], datetime | None], bool], *, keys_only: bool = False) -> list[Post]:
    """Cached rows, newest buckets first, `limit` per bucket: the build bucket and the hour buckets since the
    build, in rounds of growing size, until `enough(rows, newest_unread)` (newest_unread: the newest post time
    an unread bucket may hold; None when every bucket has been read). `keys_only`: posts with only their id,
    author and time (a page by likes ranks 800 of them and shows 25: their text is read for those only)."""
    hours = list(range(hour_bucket(datetime.now(UTC)), hour_bucket(state.built_at) - 1, -1))
    statement = READ_BUCKET_KEYS if keys_only else READ_BUCKET
    futures = [db.execute_async(statement, (network, account_id, state.build_bucket, limit))]
    rows: list[Post] = []
    i, step = 0, 3
    while True:
        chunk = hours[i:i + step]
        i += len(chunk)
        futures += [db.execute_async(statement, (network, account_id, h, limit)) for h in chunk]
        for f in futures:
            rows.extend(map(_post, f.result()))
        futures = []
        newest_unread = (datetime.fromtimestamp((hours[i] + 1) * 3600, UTC) + FUTURE_SLACK
                         if i < len(hours) else None)
        if newest_unread is None or enough(rows, newest_unread):
            return rows
        step *= 3


def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: partitions.Progress | None = None) -> dict[str, int]:
    """Delete every partition of this module's tables that belongs to `network` (admin; see api/partitions.py)."""
    return partitions.drop(db, TABLES, "network", network, dry_run=dry_run, progress=progress)


# -- erasure of an account -----------------------------------------------------------------------------------------
_CACHE_ROWS = 100_000  # rows of one cache partition read at most (a cache holds cache_cap posts per build)


def cache_buckets(db: Database, ns: NetworkSettings, network: str, reader: int, now: datetime) -> list[int]:
    """Every partition of a reader's cache whose rows may still live: the hour buckets of the cache TTL (fan-out
    writes go to the hour they are written in) and the builds listed."""
    newest = hour_bucket(now) + 1
    hours = range(newest - ns.cache_ttl // 3600 - 2, newest + 1)
    return [*hours, *(r.bucket for r in db.execute(BUILDS, (network, reader)))]


def copies_of(db: Database, network: str, reader: int, author: int, buckets: Iterable[int],
              post_ids: Collection[int] = ()) -> list[tuple[int, datetime, int]]:
    """(bucket, posted_at, post id) of the author's posts (and of `post_ids`) in a reader's cache partitions."""
    futures = [(b, db.execute_async(READ_BUCKET_KEYS, (network, reader, b, _CACHE_ROWS))) for b in buckets]
    return [(b, posted_at, post_id) for b, f in futures for posted_at, post_id, author_id in f.result()
            if author_id == author or post_id in post_ids]


def erase_copies_writes(network: str, reader: int, author: int, copies: Iterable[tuple[int, datetime, int]]
                        ) -> list[tuple[Statement, Params]]:
    """A reader's cache without the author: its copies, the exclusion naming it, the likes ranking (its post
    ids: ranked again on the next read)."""
    return [*((DELETE_ROW, (network, reader, b, at, post_id)) for b, at, post_id in copies),
            (DELETE_EXCLUDED, (network, reader, author)), (DELETE_RANKING, (network, reader))]


def erase_account_writes(network: str, account_id: int, buckets: Iterable[int]) -> list[tuple[Statement, Params]]:
    """The account's own cache: every partition, its state, exclusions, ranking and builds listing."""
    return [*((DROP_BUCKET, (network, account_id, b)) for b in buckets),
            (DELETE_STATE, (network, account_id)), (DROP_EXCLUDED, (network, account_id)),
            (DELETE_RANKING, (network, account_id)), (DROP_BUILDS, (network, account_id))]


def rows_naming(db: Database, network: str, reader: int, author: int, buckets: Iterable[int],
                stale: Callable[[Post], bool] = lambda _post: False) -> int:
    """The reader's cached copies of the author's posts, the copies `stale` says are out of date, and its
    exclusion of the author (the erasure proof)."""
    futures = [db.execute_async(READ_BUCKET, (network, reader, b, _CACHE_ROWS)) for b in buckets]
    copies = [_post(r) for f in futures for r in f.result()]
    excluded = db.execute(EXCLUDED_AUTHORS, (network, reader))
    return (sum(1 for p in copies if p.author_id == author or stale(p))
            + sum(1 for r in excluded if r.author_id == author))


def account_rows(db: Database, network: str, account_id: int, buckets: Iterable[int]) -> int:
    """Rows left of the account's own cache (the erasure proof)."""
    futures = [db.execute_async(READ_BUCKET_KEYS, (network, account_id, b, 1)) for b in buckets]
    return (sum(len(list(f.result())) for f in futures)
            + sum(len(list(db.execute(s, (network, account_id)))) for s in (GET_STATE, EXCLUDED_AUTHORS, GET_RANKING,
                                                                            BUILDS)))
