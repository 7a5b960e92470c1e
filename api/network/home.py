"""Q4, the home timeline: which posts a reader's home page shows, read from its cache and merged with the
celebrities it follows, and the cache's (re)builds.

The cache rows themselves are timelines.py's (hour buckets, build state, unfollowed authors, kept rankings);
this module decides what belongs in a cache and what a page shows: rows of unfollowed authors, of celebrities
(merged from their own posts at read time instead) and of deleted posts are skipped, and a cache left short of a
page by them is rebuilt. By likes, a page may be served from the reader's last ranking while it is young, and
ranked again on a background thread when it ages (`settle_reranking` waits for those).
"""

from __future__ import annotations

import dataclasses
import heapq
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import structlog

from api.caches import Cache
from api.db import Database
from api.network import accounts, posts, relations, timelines
from api.network.relations import FOLLOWS
from api.network.settings import NetworkSettings
from api.network.timelines import CacheState
from api.network.values import Account, Post

log = structlog.get_logger("chronicle.network")

_SPARE_ROWS = 25  # extra cache rows read so a few skipped rows (deleted posts, unfollowed authors) need no rebuild
_DELETED_SPARE = 5  # counts read beyond a page's worth, standing in for posts deleted since they were cached
_RANKING_KEPT = 2  # x page size: post ids a ranking keeps, so posts deleted since still leave a full page


def ranking_now(db: Database) -> datetime:
    """Now on the database's clock, to the millisecond (as stored): the time rankings are made, aged and made
    stale by (a ranking's `ranked_at`, its age, a follow's stale mark), so a test clock moves all three."""
    now = datetime.fromtimestamp(db.clock.time(), UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


# -- cache builds ------------------------------------------------------------------------------------------------
def _newest_followed(db: Database, ns: NetworkSettings, network: str, account_id: int) -> tuple[list[Post], bool, int]:
    celebrities = relations.followed_celebrities(db, network, account_id, fresh=True)
    authors = [a for a in relations.ids(db, network, account_id, FOLLOWS) if a not in celebrities]
    newest, complete = posts.newest_posts_of(db, network, authors, ns.cache_cap)
    return newest, complete, len(authors)


def _build_now(db: Database, ns: NetworkSettings, network: str, account_id: int) -> tuple[list[Post], CacheState]:
    """Build the reader's cache from its followed authors' newest posts; returns those posts and the new state."""
    newest, complete, _authors = _newest_followed(db, ns, network, account_id)
    return newest, timelines.write_build(db, ns, network, account_id, newest, complete)


def build_cache(db: Database, network: str, account_id: int, ns: NetworkSettings | None = None, *,
                dry_run: bool = False) -> dict[str, Any]:
    """Build one account's home cache from scratch: the newest `cap` posts of the accounts it follows, except
    celebrities. A dry run computes what the cache would hold and writes nothing."""
    ns = ns or db.settings.network
    newest, complete, authors = _newest_followed(db, ns, network, account_id)
    summary = {"entries": len(newest), "complete": complete, "followed_authors": authors}
    if dry_run:
        return {"dry_run": True, **summary}
    state = timelines.write_build(db, ns, network, account_id, newest, complete)
    return {"built_at": state.built_at, "cutoff": state.cutoff, **summary}


def add_followee_posts(db: Database, ns: NetworkSettings, network: str, account_id: int, author_id: int) -> int:
    """After a follow: put the new followee's recent posts into the follower's cache, if it has one."""
    state = timelines.get_state(db, network, account_id, fresh=True)
    if state is None:
        return 0  # no cache yet: it is built, complete, on the first read
    recent = posts.posts_of_author(db, network, author_id, ns.cache_cap)
    if state.complete and len(recent) >= ns.cache_cap:
        # The followee may have older posts than the ones added: the cache is no longer complete.
        timelines.drop_state(db, network, account_id)
        return 0
    since = state.valid_from()
    return timelines.add_to_caches(db, ns, network, [p for p in recent if since is None or p.posted_at >= since],
                                   [account_id])


# -- Q4 ----------------------------------------------------------------------------------------------------------
def home_of(db: Database, network: str, account_id: int, order: str = "newest",
            ns: NetworkSettings | None = None, *, fresh: bool = False) -> dict[str, Any] | None:
    """Q4: the account's counts and the 25 newest, or the 25 most-liked, posts of its home timeline (the
    newest `cap` posts of the accounts it follows); None when the account is unknown.

    By likes, a ranking of the window made less than `likes_rank_max_age` seconds ago is reused (twice that:
    reused while it is ranked again in the background): the page is its best posts by their current like
    counts, without those deleted since. The reader's own follows and a cache rebuild re-rank at once.
    `fresh` ranks now whatever the setting (admin commands).
    """
    ns = ns or db.settings.network
    if order == "likes" and ns.likes_rank_max_age > 0 and not fresh:
        served = _home_from_ranking(db, ns, network, account_id)
        if served is not _NOT_RANKED:
            return served
    return _home_computed(db, ns, network, account_id, order)


_NOT_RANKED = object()  # no usable ranking: rank the window now


def _home_from_ranking(db: Database, ns: NetworkSettings, network: str, account_id: int) -> Any:
    """Q4 by likes from the reader's last ranking, or _NOT_RANKED when there is none it may use."""
    account_f = accounts.start_get_account(db, network, account_id)
    state_f = timelines.start_state(db, network, account_id)
    ranking_f = timelines.start_ranking(db, network, account_id)
    account = accounts.account_from(account_f)
    if account is None:
        return None
    state, ranking = timelines.state_from(state_f), timelines.ranking_from(ranking_f)
    if state is None or ranking is None or not ranking.usable(state):
        return _NOT_RANKED
    age = ranking.age(ranking_now(db))
    if not -1 <= age < 2 * ns.likes_rank_max_age:  # (a second of clock skew between workers is tolerated)
        return _NOT_RANKED
    found = posts.posts_by_ids(db, network, ranking.post_ids)
    ranked = [found[i] for i in ranking.post_ids if i in found]
    if len(ranked) < min(ns.page_size, len(ranking.post_ids)):
        return _NOT_RANKED  # deleted posts left the page short: rank again
    if age >= ns.likes_rank_max_age:
        _rerank_later(db, ns, network, account_id)
    return {"account": account, "order": "likes", "posts": _by_likes(ranked, ns.page_size), "cache_rebuilt": False,
            "ranked_at": ranking.ranked_at}


def _by_likes(candidates: list[Post], n: int) -> list[Post]:
    return heapq.nsmallest(n, candidates, key=lambda p: (-p.like_count, -p.post_id))


def _newest(candidates: list[Post], n: int) -> list[Post]:
    return heapq.nlargest(n, candidates, key=lambda p: (p.posted_at, p.post_id))


@dataclasses.dataclass(frozen=True)
class _Reader:
    """What Q4 reads about the reader before its window."""

    account: Account
    state: CacheState | None  # None: no cache yet
    celebrities: set[int]  # followed celebrities: merged from their own posts
    skip: set[int]  # authors whose cached rows a page skips: the unfollowed ones and the celebrities
    post_times: accounts.PostTimes | None  # the celebrities' last post times (known, or being read)


@dataclasses.dataclass(frozen=True)
class _Window:
    """The reader's window before the celebrities are merged."""

    posts: list[Post]  # cached (or rebuilt) posts that still exist, with their current like counts
    celebrity_posts: Callable[[], list[Post]]  # the followed celebrities' posts, being read
    state: CacheState  # the cache's state (a new one when it was rebuilt)
    rebuilt: bool
    slim: bool  # posts read without their text (by likes, from the cache): the page's are read at the end


def _home_computed(db: Database, ns: NetworkSettings, network: str, account_id: int, order: str
                   ) -> dict[str, Any] | None:
    """Q4 ranked now, in four steps: read the reader (account, cache state, followed celebrities, unfollowed
    authors); read its window from the cache, or rebuild the cache; merge the celebrities' posts; cut the page
    (by likes, also keep the ranking for the next reads). Like counts come from the posts."""
    ranked_at = ranking_now(db)
    needed = ns.cache_cap if order == "likes" else ns.page_size
    reader = _read_reader(db, network, account_id)
    if reader is None:
        return None
    window = _read_window(db, ns, network, account_id, reader, needed, keys_only=order == "likes")
    celebrity_posts = window.celebrity_posts()
    merged = _newest(window.posts + celebrity_posts, ns.cache_cap)
    if order == "likes":
        page = _likes_page(db, ns, network, account_id, ranked_at, window, merged, reader.celebrities)
    else:
        page = merged[:ns.page_size]
    return {"account": reader.account, "order": order, "posts": page, "cache_rebuilt": window.rebuilt,
            "merged_celebrities": len(celebrity_posts), **({"ranked_at": ranked_at} if order == "likes" else {})}


def _read_reader(db: Database, network: str, account_id: int) -> _Reader | None:
    """Step 1: the reader's account, cache state, followed celebrities and unfollowed authors, read together;
    None when the account is unknown."""
    account_f = accounts.start_get_account(db, network, account_id)
    state_f = timelines.start_state(db, network, account_id)
    celebs_f = relations.start_followed_celebrities(db, network, account_id)
    excluded_f = timelines.start_excluded(db, network, account_id)
    account = accounts.account_from(account_f)
    if account is None:
        return None
    celebrities = {r.celebrity_id for r in celebs_f.result()}
    post_times = accounts.start_post_times(db, network, celebrities) if celebrities else None
    return _Reader(account, timelines.state_from(state_f), celebrities,
                   timelines.excluded_from(excluded_f) | celebrities, post_times)


def _read_window(db: Database, ns: NetworkSettings, network: str, account_id: int, reader: _Reader, needed: int,
                 *, keys_only: bool) -> _Window:
    """Step 2: the newest `needed` posts (and a few more) of the reader's cache that a page may show, with the
    celebrities' posts requested beside them. No cache yet: it is built now. A cache left short of `needed` by
    skipped rows (and not simply holding fewer posts) is rebuilt."""
    if reader.state is None:
        newest, state = _build_now(db, ns, network, account_id)
        head = _head(newest, state, reader.skip, ns, needed)
        celebrity_posts = _start_celebrity_posts(db, network, reader, needed)
        return _Window(_with_like_counts(db, network, head, needed), celebrity_posts, state, rebuilt=True,
                       slim=False)
    rows = _read_cache(db, network, account_id, reader.state, needed, reader.skip, keys_only=keys_only)
    head = _head(rows, reader.state, reader.skip, ns, needed)
    # A celebrity post older than every post of a full head cannot reach the page (or the likes window).
    since = head[-1].posted_at if len(head) >= needed else None
    celebrity_posts = _start_celebrity_posts(db, network, reader, needed, since)
    window = _with_like_counts(db, network, head, needed)
    if len(window) >= needed or (reader.state.complete and len(rows) < needed):
        return _Window(window, celebrity_posts, reader.state, rebuilt=False, slim=keys_only)
    newest, state = _build_now(db, ns, network, account_id)
    celebrity_posts = _start_celebrity_posts(db, network, reader, needed)
    current = posts.window_like_counts(db, network, newest)
    return _Window([p.with_likes(current[p.post_id]) for p in newest if p.post_id in current], celebrity_posts,
                   state, rebuilt=True, slim=False)


def _head(rows: list[Post], state: CacheState, skip: set[int], ns: NetworkSettings, needed: int) -> list[Post]:
    """The newest rows a page may show, `needed` and a few more (newest first)."""
    return _newest(_valid_rows(rows, state, skip), ns.cache_cap)[:needed + _SPARE_ROWS]


def _start_celebrity_posts(db: Database, network: str, reader: _Reader, needed: int,
                           since: datetime | None = None) -> Callable[[], list[Post]]:
    """Request the followed celebrities' newest `needed` posts; with `since`, only those posted at or after it,
    of the celebrities whose last post time says they posted since."""
    if since is None:
        return posts.start_posts_of_authors(db, network, sorted(reader.celebrities), needed)
    return posts.start_recent_posts_of_authors(
        db, network, accounts.posted_since_from(db, network, reader.post_times, reader.celebrities, since), since,
        needed, datetime.now(UTC))


def _likes_page(db: Database, ns: NetworkSettings, network: str, account_id: int, ranked_at: datetime,
                window: _Window, merged: list[Post], celebrities: set[int]) -> list[Post]:
    """Step 4 by likes: the page, best first, and the ranking kept for the next reads (when they reuse one)."""
    kept_f = None
    if ns.likes_rank_max_age > 0:
        kept_f = timelines.start_put_ranking(db, network, account_id, ranked_at, window.state,
                                             [p.post_id for p in _by_likes(merged, ns.page_size * _RANKING_KEPT)])
    page = _by_likes(merged, ns.page_size)
    if window.slim:
        bare = {p.post_id for p in page if p.author_id not in celebrities}
        full = posts.posts_by_ids(db, network, bare)
        # Ranked by the count read above (a like since then shows on the next read).
        page = [full[p.post_id].with_likes(p.like_count) if p.post_id in bare else p
                for p in page if p.post_id not in bare or p.post_id in full]
    if kept_f is not None:
        kept_f.result()
    return page


def _with_like_counts(db: Database, network: str, head: list[Post], needed: int) -> list[Post]:
    """The posts of `head` (newest first) that still exist, with their current like counts: read for the first
    `needed` and a few more, and for the rest only when posts deleted since left those short (each count read
    is a partition read: a page by newest shows 25 posts, not the 50 read from the cache)."""
    first = head[:needed + _DELETED_SPARE]
    current = posts.window_like_counts(db, network, first)
    if len(current) < needed and len(head) > len(first):
        current.update(posts.window_like_counts(db, network, head[len(first):]))
    return [p.with_likes(current[p.post_id]) for p in head if p.post_id in current]


def _read_cache(db: Database, network: str, account_id: int, state: CacheState, needed: int,
                skip: set[int], *, keys_only: bool = False) -> list[Post]:
    def enough(rows: list[Post], newest_unread: datetime | None) -> bool:
        valid = sorted((p.posted_at for p in _valid_rows(rows, state, skip)), reverse=True)
        want = needed + _SPARE_ROWS
        return len(valid) >= want and newest_unread is not None and valid[want - 1] > newest_unread
    return timelines.read(db, network, account_id, state, needed + _SPARE_ROWS, enough, keys_only=keys_only)


def _valid_rows(rows: list[Post], state: CacheState, skip: set[int]) -> list[Post]:
    """Rows a page may show: not by an author skipped (unfollowed, or a celebrity merged at read time), not
    older than what the cache is sure to hold; each post once."""
    since = state.valid_from()
    seen: dict[int, Post] = {}
    for p in rows:
        if p.author_id not in skip and (since is None or p.posted_at >= since):
            seen.setdefault(p.post_id, p)
    return list(seen.values())


# -- ranking again in the background -----------------------------------------------------------------------------
# One thread per Database (`db.executor`), created on the first stale ranking: rankings run one at a time, in
# order, so `settle_reranking` can wait for all of them by queuing a no-op behind them.
_RERANK_POOL = "network-rerank"
_rerank_lock = threading.Lock()  # the check-and-set of a reader's pending ranking, and its pop
_RERANKS_WAITING = 1_000  # rankings queued at most; beyond, a read serves the kept ranking (twice the age: ranks)


def _reranking(db: Database) -> Cache:
    """The readers with a ranking queued or running, (network, account id) -> True: one at a time per reader."""
    return db.caches.lru("network.reranking", maxsize=_RERANKS_WAITING)


def _rerank_later(db: Database, ns: NetworkSettings, network: str, account_id: int) -> None:
    key, pending = (network, account_id), _reranking(db)
    with _rerank_lock:
        if key in pending or len(pending) >= _RERANKS_WAITING:
            return

        def rerank() -> None:
            try:
                _home_computed(db, ns, network, account_id, "likes")
            except Exception as e:  # the next read ranks again (or serves this ranking until it is too old)
                log.warning("rerank_failed", network=network, account_id=account_id, error=repr(e))
            finally:
                with _rerank_lock:  # so the pop comes after the set below
                    pending.pop(key)
        db.executor(_RERANK_POOL, 1).submit(rerank)
        pending.set(key, True)


def settle_reranking(db: Database, timeout: float = 30.0) -> int:
    """Wait for the background rankings of `db` that are queued or running (tests, benchmarks); returns how many
    there were."""
    waiting = len(_reranking(db))
    # One thread, in order: once a no-op queued now has run, what was queued before is done.
    db.executor(_RERANK_POOL, 1).submit(lambda: None).result(timeout=timeout)
    return waiting
