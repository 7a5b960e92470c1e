"""Home timelines (Q4, Q5): home_timeline_by_account, the caches fed by fan-out on write, and
home_cache_state, which says whether a cache is built and from which post time on it is complete.

Which posts belong in a cache, and when to rebuild it, is decided in api/network/actions.py; this module
reads and writes the two tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from cassandra.cluster import ResponseFuture
from cassandra.query import UNSET_VALUE

from api.db import Database, Params, Statement
from api.network.common import to_utc
from api.network.settings import NetworkSettings
from api.network.values import Post

TABLES = frozenset({"home_timeline_by_account", "home_cache_state"})

PUT_CACHE = Statement(
    "INSERT INTO home_timeline_by_account (network, account_id, posted_at, post_id, author_id, author_username, "
    "content, language, like_count, share_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?")
SET_CACHE_LIKES = Statement(
    "UPDATE home_timeline_by_account USING TTL ? SET like_count = ? WHERE network = ? AND account_id = ? "
    "AND posted_at = ? AND post_id = ?")
DELETE_CACHE_ROW = Statement(
    "DELETE FROM home_timeline_by_account WHERE network = ? AND account_id = ? AND posted_at = ? AND post_id = ?")
DELETE_CACHE = Statement("DELETE FROM home_timeline_by_account WHERE network = ? AND account_id = ?")
READ_CACHE = Statement(
    "SELECT posted_at, post_id, author_id, author_username, content, language, like_count, share_count "
    "FROM home_timeline_by_account WHERE network = ? AND account_id = ? LIMIT ?")
GET_STATE = Statement(
    "SELECT built_at, cutoff, complete, threshold, cap FROM home_cache_state WHERE network = ? AND account_id = ?")
PUT_STATE = Statement(
    "INSERT INTO home_cache_state (network, account_id, built_at, cutoff, complete, threshold, cap) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) USING TTL ?")
DELETE_STATE = Statement("DELETE FROM home_cache_state WHERE network = ? AND account_id = ?")


@dataclasses.dataclass(frozen=True)
class CacheState:
    """A built cache holds every post newer than or as new as `cutoff` (every post when `complete`) of the
    accounts its owner follows, for the hybrid `threshold` and `cap` in force when it was built."""

    built_at: datetime
    cutoff: datetime | None
    complete: bool
    threshold: int
    cap: int

    @classmethod
    def from_row(cls, row: Any) -> CacheState:
        return cls(to_utc(row.built_at), to_utc(row.cutoff) if row.cutoff is not None else None,
                   bool(row.complete), row.threshold or 0, row.cap)

    def valid_from(self) -> datetime | None:
        """The oldest post time the cache is sure to hold; None when it holds everything."""
        return None if self.complete else self.cutoff


def _u(value: Any) -> Any:
    return UNSET_VALUE if value is None else value


def _cache_params(network: str, owner: int, post: Post, ttl: int) -> tuple:
    return (network, owner, post.posted_at, post.post_id, post.author_id, _u(post.author_username),
            _u(post.content), _u(post.language), post.like_count, post.share_count, ttl)


def _fan(db: Database, ns: NetworkSettings, writes: Iterable[tuple[Statement, Params]]) -> int:
    """Many cache writes, batched by replica (rows of one follower's partition are one local mutation)."""
    if ns.fanout_batch <= 1:
        return db.execute_many(writes, concurrency=ns.fanout_concurrency)
    return db.execute_many(writes, concurrency=max(1, ns.fanout_concurrency // 4), batch_size=ns.fanout_batch)


def add_to_caches(db: Database, ns: NetworkSettings, network: str, post: Post, owners: list[int]) -> int:
    """Q5 fan-out: write the post into the cache of every owner; returns the caches written."""
    return _fan(db, ns, ((PUT_CACHE, _cache_params(network, o, post, ns.cache_ttl)) for o in owners))


def remove_from_caches(db: Database, ns: NetworkSettings, network: str, post: Post, owners: list[int]) -> int:
    return _fan(db, ns, ((DELETE_CACHE_ROW, (network, o, post.posted_at, post.post_id)) for o in owners))


def set_cached_likes(db: Database, ns: NetworkSettings, network: str, post: Post, count: int,
                     owners: list[int]) -> int:
    """Carry a new like count into the owners' caches (a cache not holding the post gets a row without an
    author, which reads ignore)."""
    return _fan(db, ns, ((SET_CACHE_LIKES, (ns.cache_ttl, count, network, o, post.posted_at, post.post_id))
                         for o in owners))


def add_posts(db: Database, ns: NetworkSettings, network: str, account_id: int, posts: list[Post]) -> int:
    """Put posts into one account's cache (after a follow)."""
    return db.execute_many(((PUT_CACHE, _cache_params(network, account_id, p, ns.cache_ttl)) for p in posts),
                           concurrency=ns.fanout_concurrency)


def replace_cache(db: Database, ns: NetworkSettings, network: str, account_id: int, posts: list[Post],
                  complete: bool) -> CacheState:
    """Replace one account's cache with `posts` (its newest, newest first) and record its state; returns the
    state written, so the caller need not read it back."""
    cutoff = None if complete or not posts else posts[-1].posted_at
    db.execute(DELETE_CACHE, (network, account_id))
    _fan(db, ns, ((PUT_CACHE, _cache_params(network, account_id, p, ns.cache_ttl)) for p in posts))
    now = datetime.now(UTC)
    threshold = ns.hybrid_threshold if ns.hybrid else 0
    state = CacheState(now.replace(microsecond=now.microsecond // 1000 * 1000), cutoff, complete, threshold,
                       ns.cache_cap)
    # The state expires a little before the rows it describes: a cache is never read with rows missing.
    db.execute(PUT_STATE, (network, account_id, state.built_at, _u(cutoff), complete, threshold, ns.cache_cap,
                           max(60, ns.cache_ttl - 300)))
    return state


def drop_state(db: Database, network: str, account_id: int) -> None:
    """Forget that a cache is built: the next read rebuilds it."""
    db.execute(DELETE_STATE, (network, account_id))


def get_state(db: Database, network: str, account_id: int) -> CacheState | None:
    return state_from(start_state(db, network, account_id))


def start_state(db: Database, network: str, account_id: int) -> ResponseFuture:
    return db.execute_async(GET_STATE, (network, account_id))


def state_from(future: ResponseFuture) -> CacheState | None:
    row = future.result().one()
    return CacheState.from_row(row) if row is not None else None


def start_read(db: Database, network: str, account_id: int, limit: int) -> ResponseFuture:
    """Send the read of the newest `limit` cache rows; `rows_from` turns them into posts."""
    return db.execute_async(READ_CACHE, (network, account_id, limit))


def rows_from(future: ResponseFuture) -> list[Post | None]:
    """Cached posts, newest first; None for a row without an author (a like update that reached a cache not
    holding the post)."""
    return [Post.from_row(r) if r.author_id is not None else None for r in future.result()]
