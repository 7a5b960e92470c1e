"""Operations of the follower network that span table families, in one place.

Each table family has one owner module (accounts, relations, posts, search, likes, timelines, rankings) that
holds its statements and reads/writes only its own tables; the owners import nothing from each other. What
must touch several families goes here: creating and deleting a post (posts, term index, followers' caches),
like/unlike (likes, the published counts on the post and its postings), follow/unfollow (relations, counts,
celebrity marks, caches), the Q4 home page (caches, accounts, celebrity merge), Q6 (term index confirmed by the
posts), and the jobs: the Q2/Q3 snapshot, promotion and demotion of celebrities, term top lists, reconcile.
HTTP routes and admin commands call these functions; they are the only callers of more than one owner.

No request does work proportional to an account's followers or a post's likes, except the fan-out of a post
to its author's followers (bounded by the hybrid threshold: celebrities are merged at read time instead). Such
work goes on the network's job queue (jobs.py) and `run_job` does it in `chronicle network worker`.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import structlog
from cassandra import ConsistencyLevel

from api.activity import dirty
from api.db import Database, read_level
from api.network import (
    accounts,
    activity_log,
    jobs,
    likes,
    post_requests,
    posts,
    rankings,
    relations,
    search,
    timelines,
)
from api.network.common import heaviest, new_post_id, now_ms, to_utc
from api.network.relations import FOLLOWER, FOLLOWS
from api.network.settings import NetworkSettings, network_settings
from api.network.timelines import FUTURE_SLACK, CacheState
from api.network.values import Account, Post

log = structlog.get_logger("chronicle.network")

_SLACK = 25  # extra cache rows read so a few skipped rows (deleted posts, unfollowed authors) need no rebuild


class FuturePost(ValueError):
    """A post dated in the future (beyond a few minutes of clock skew)."""


# -- posts (Q5) ------------------------------------------------------------------------------------------------
def create_post(db: Database, network: str, author: Account, content: str, *,
                posted_at: datetime | None = None, language: str | None = None, country: str | None = None,
                latitude: float | None = None, longitude: float | None = None, post_id: int | None = None,
                ns: NetworkSettings | None = None) -> tuple[Post, int]:
    """Q5: write a post, index it, then fan it out to its author's followers' home caches. Returns (post,
    caches written). A post dated more than a few minutes ahead is refused (FuturePost): caches rely on it."""
    post = Post(post_id=post_id or new_post_id(), author_id=author.account_id, posted_at=_post_time(posted_at),
                author_username=author.username, content=content, language=language, country=country,
                latitude=latitude, longitude=longitude)
    return post, _write_post(db, network, post, ns)


class KeyReused(ValueError):
    """An Idempotency-Key that this author already used for a different post."""


def create_post_once(db: Database, network: str, author: Account, content: str, key: str, *,
                     posted_at: datetime | None = None, language: str | None = None, country: str | None = None,
                     latitude: float | None = None, longitude: float | None = None,
                     ns: NetworkSettings | None = None) -> tuple[Post, int, bool]:
    """Q5 for a client that retries: the first request with this (author, key) writes the post; a retry writes
    the same post again until one request has finished, then answers what it answered, so no retry creates a
    second post. Returns (post, caches written, whether this answer replays an earlier request's); every answer
    shows the post as created (no likes yet), as the first answered."""
    fields = {"content": content, "posted_at": posted_at, "language": language, "country": country,
              "latitude": latitude, "longitude": longitude}
    digest = post_requests.request_digest(fields)
    claimed = post_requests.claim(db, network, author.account_id, key, digest, new_post_id(),
                                  _post_time(posted_at))
    if claimed.request_digest != digest:
        raise KeyReused(f"Idempotency-Key {key!r} was used for a different post by account {author.account_id}")
    post = Post(post_id=claimed.post_id, author_id=author.account_id, posted_at=claimed.posted_at,
                author_username=author.username, content=content, language=language, country=country,
                latitude=latitude, longitude=longitude)
    if claimed.fanned_out_to is not None:
        return post, claimed.fanned_out_to, True
    written = post
    if not claimed.first:  # the first request died part way (or is still writing): write the same post again
        written = post.with_likes(likes.count(db, network, post.post_id))  # likes it got meanwhile stay published
    fanned = _write_post(db, network, written, ns, again=not claimed.first)
    post_requests.finish(db, network, author.account_id, key, claimed, fanned)
    return post, fanned, not claimed.first


def _post_time(posted_at: datetime | None) -> datetime:
    now = datetime.now(UTC)
    when = to_utc(posted_at or now).replace(microsecond=0)  # whole seconds: the answer equals the stored post
    if when > now + FUTURE_SLACK:
        raise FuturePost(f"posted_at {when.isoformat()} is in the future")
    return when


def _write_post(db: Database, network: str, post: Post, ns: NetworkSettings | None, *, again: bool = False) -> int:
    """Every write of a new post: the post's rows, its author's activity day, its postings, then the fan-out.
    Returns the caches written. Writing a post `again` (a retried request) repeats only upserts: postings go to
    the buckets the post already records, and the term counters, which are not idempotent, are not moved twice
    (a retry racing its still-running first request may count a term once more, which only shifts a bucket:
    searches drop a post found twice)."""
    db.execute_many(posts.post_writes(network, post))
    _mark_active(db, network, [(post.author_id, _us(post.posted_at))])
    indexed = posts.written_term_buckets(db, network, post.post_id) if again else {}
    if indexed:
        db.execute_many(search.posting_writes(network, post, indexed))
    else:
        buckets, grown = search.index_post(db, network, post)
        db.execute_many([posts.term_buckets_write(network, post.post_id, buckets)]
                        + [w for term in grown for w in jobs.job_writes(network, jobs.TERM_TOP, term)])
    return fan_out(db, network, post, ns=ns)


def fan_out(db: Database, network: str, post: Post, *, ns: NetworkSettings | None = None) -> int:
    """Write the post into the home cache of every follower of its author, unless the author is a celebrity
    (merged at read time)."""
    ns = ns or network_settings()
    if accounts.is_celebrity(db, network, post.author_id):
        # Read after the post's rows were written: a promotion that added the author to the set before this
        # read records its newest post time after the add, so one of the two records this post.
        db.execute(*accounts.post_time_write(network, post.author_id, post.posted_at))
        return 0
    return timelines.add_to_caches(db, ns, network, [post],
                                   relations.ids(db, network, post.author_id, FOLLOWER))


def delete_post(db: Database, network: str, post: Post) -> int:
    """Remove a post: its term postings and its rows (posts_by_id last, so a retried delete still finds it);
    its likes are removed by a job (as many as it has likes). Cached copies are not touched: readers skip posts
    that are gone. Returns the post's like count when it was deleted (the likes the job removes)."""
    buckets = posts.term_buckets(db, network, post.post_id)
    liked = likes.count(db, network, post.post_id)
    db.execute_many(search.delete_writes(network, post, buckets, search.top_states(db, network, buckets))
                    + jobs.job_writes(network, jobs.PURGE_LIKES, post.post_id))
    posts.delete_post_rows(db, network, post)
    _mark_active(db, network, [(post.author_id, _us(post.posted_at))])
    return liked


# -- activity days: what changed an account's day (the dirty worker rebuilds it) -----------------------------------
def _us(when: datetime) -> int:
    return int(to_utc(when).timestamp() * 1_000_000)


def _mark_active(db: Database, network: str, touched: list[tuple[int, int]]) -> None:
    archive = dirty.archive_name("network", network)
    dirty.mark(db, [dirty.live(archive, str(account_id), at) for account_id, at in touched])


def _log_writes(db: Database, network: str, action: str, actor: int, other: int, post_id: int = 0
                ) -> tuple[list[tuple[Any, Any]], list[tuple]]:
    """The writes of one like/unlike/follow/unfollow that changed state (its two log rows, both accounts' days
    marked), to go out with the action's own writes; pass the keys to `dirty.note_marked` once written."""
    at = time.time_ns() // 1000
    archive = dirty.archive_name("network", network)
    marks, keys = dirty.mark_writes(db, [dirty.live(archive, str(actor), at), dirty.live(archive, str(other), at)])
    return activity_log.event_writes(network, action, actor, other, at, post_id) + marks, keys


# -- likes -----------------------------------------------------------------------------------------------------
# A like or unlike is four rounds after the route's one read (the post with its term buckets, and the liker):
# the transaction on the liker's own row; the counter change (its other writes and the top-list states go out
# beside it); the count; its copies. Only the count read waits for the counter; the other writes are awaited at
# the end.
def like(db: Database, network: str, post: Post, user_id: int, buckets: dict[str, int] | None = None) -> int:
    """`user_id` likes `post`; returns the post's like count. Idempotent. `buckets`: the post's term buckets
    when the caller read them with the post."""
    liked_at = datetime.now(UTC)
    applied = likes.claim_like(db, network, post.post_id, user_id, liked_at)
    logged, keys = _log_writes(db, network, "like", user_id, post.author_id, post.post_id) if applied else ([], [])
    count = _publish_likes(db, network, post, buckets,
                           counted=[likes.count_change(network, post.post_id, +1)] if applied else [],
                           beside=likes.like_done_writes(network, post.post_id, user_id, liked_at) + logged)
    dirty.note_marked(keys)
    return count


def unlike(db: Database, network: str, post: Post, user_id: int, buckets: dict[str, int] | None = None) -> int:
    applied = likes.claim_unlike(db, network, post.post_id, user_id)
    logged, keys = _log_writes(db, network, "unlike", user_id, post.author_id, post.post_id) if applied else ([], [])
    count = _publish_likes(db, network, post, buckets,
                           counted=[likes.count_change(network, post.post_id, -1)] if applied else [],
                           beside=likes.unlike_done_writes(network, post.post_id, user_id) + logged)
    dirty.note_marked(keys)
    return count


def _publish_likes(db: Database, network: str, post: Post, buckets: dict[str, int] | None = None, *,
                   counted: list[tuple[Any, Any]] = (), beside: list[tuple[Any, Any]] = ()) -> int:
    """Write a like's counter change (`counted`), read the count, and copy it onto the post's rows and postings
    (and top lists where it reaches the floor); `beside`, the like's other writes, go out with the counter
    change and are awaited last. Each copy is written with the time the count was read: of two racing likes,
    the later read (which includes the other's increment) wins whatever order the writes land in."""
    if buckets is None:
        buckets = posts.term_buckets(db, network, post.post_id)
    tops_f = search.start_top_states(db, network, buckets)
    in_flight = db.start_together(beside) if beside else None
    if counted:
        db.execute_together(counted)
    read_at = time.time_ns() // 1000
    count = likes.count(db, network, post.post_id)
    db.execute_together(posts.like_count_writes(network, post, count, read_at)
                    + search.like_writes(network, post, buckets, count, search.top_states_from(tops_f), read_at))
    if in_flight is not None:
        in_flight.wait()
    return count


# -- follow / unfollow -----------------------------------------------------------------------------------------
# A follow is the transaction on the follower's own row (with the followee's celebrity flag read beside it),
# then one round of writes (the followee-side row, the counters, the exclusion flag, the activity log, the
# celebrity mark when the followee is known as one), then the counts and the celebrity flag read again: three
# rounds after the accounts are read.
@dataclasses.dataclass(frozen=True)
class FollowResult:
    changed: bool  # False when the request repeated a state (nothing was counted)
    follower: Account  # with the counts after the change
    followee: Account
    celebrity_job: bool  # the followee crossed a hybrid line: a job promotes or demotes it


def follow(db: Database, network: str, follower: Account, followee: Account, ns: NetworkSettings | None = None
           ) -> FollowResult:
    """`follower` starts following `followee`. A followee reaching the hybrid threshold is promoted by a job."""
    ns = ns or network_settings()
    a, b = follower.account_id, followee.account_id
    known_celebrity_f = accounts.start_is_celebrity(db, network, b)
    changed = relations.claim_follow(db, network, follower, followee)
    known_celebrity = accounts.is_celebrity_from(known_celebrity_f)
    logged, keys = _log_writes(db, network, "follow", a, b) if changed else ([], [])
    db.execute_together(relations.follow_writes(network, follower, followee)
                    + (accounts.count_writes(network, a, b, +1) if changed else [])
                    + [timelines.excluded_write(network, a, b, False),
                       timelines.ranking_stale_write(network, a, datetime.now(UTC))]
                    + (list(relations.mark_writes(network, [a], b)) if known_celebrity else [])
                    + logged)
    dirty.note_marked(keys)
    # Read after the followee-side row is written: a promotion job that missed this follower in its follower
    # list has already put the followee in the celebrity set, so this read sees it and marks the follower.
    celebrity_f = accounts.start_is_celebrity(db, network, b)
    follower, followee = _with_fresh_counts(db, network, follower, followee)
    if accounts.is_celebrity_from(celebrity_f):
        if not known_celebrity:
            relations.mark_celebrity_followed(db, network, [a], b)
        return FollowResult(changed, follower, followee, False)
    if known_celebrity:  # demoted since the first read: the mark written above goes
        relations.unmark_celebrity_followed(db, network, [a], b)
    if changed:
        _add_author_to_cache(db, ns, network, a, b)
        if ns.is_celebrity(followee.follower_count):
            jobs.enqueue(db, network, jobs.CELEBRITY, b)
            return FollowResult(changed, follower, followee, True)
    return FollowResult(changed, follower, followee, False)


def unfollow(db: Database, network: str, follower: Account, followee: Account, ns: NetworkSettings | None = None
             ) -> FollowResult:
    """`follower` stops following `followee`. A celebrity falling below threshold x (1 - hysteresis) is
    demoted (fanned out again) by a job. The unfollowed author's cached posts stay until they expire; reads
    skip them from now on."""
    ns = ns or network_settings()
    a, b = follower.account_id, followee.account_id
    changed = relations.claim_unfollow(db, network, a, b)
    logged, keys = _log_writes(db, network, "unfollow", a, b) if changed else ([], [])
    db.execute_together(relations.unfollow_writes(network, a, b)
                    + (accounts.count_writes(network, a, b, -1) if changed else [])
                    + [timelines.excluded_write(network, a, b, True),
                       timelines.ranking_stale_write(network, a, datetime.now(UTC))]
                    + list(relations.unmark_writes(network, [a], b))
                    + logged)
    dirty.note_marked(keys)
    celebrity_f = accounts.start_is_celebrity(db, network, b) if changed else None
    follower, followee = _with_fresh_counts(db, network, follower, followee)
    if celebrity_f is not None and followee.follower_count < ns.demote_below and accounts.is_celebrity_from(
            celebrity_f):
        jobs.enqueue(db, network, jobs.CELEBRITY, b)
        return FollowResult(changed, follower, followee, True)
    return FollowResult(changed, follower, followee, False)


def _with_fresh_counts(db: Database, network: str, follower: Account, followee: Account) -> tuple[Account, Account]:
    counts = accounts.fresh_counts(db, network, [follower.account_id, followee.account_id])
    f, g = counts[follower.account_id], counts[followee.account_id]
    return (dataclasses.replace(follower, follower_count=f[0], follows_count=f[1]),
            dataclasses.replace(followee, follower_count=g[0], follows_count=g[1]))


def _add_author_to_cache(db: Database, ns: NetworkSettings, network: str, account_id: int, author_id: int) -> int:
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


# -- celebrities (jobs) ----------------------------------------------------------------------------------------
def promote(db: Database, network: str, author_id: int, follower_count: int) -> int:
    """Merge an author at read time from now on: mark it on every follower, then add it to the set (fan-out
    stops), then mark followers who arrived meanwhile. Proportional to its followers: a job."""
    marked = relations.mark_celebrity_followed(db, network, relations.ids(db, network, author_id, FOLLOWER),
                                               author_id)
    accounts.add_celebrity(db, network, author_id, follower_count)
    record_post_times(db, network, [author_id])  # after the add: a post fanned out meanwhile is in posts_by_author
    return marked + relations.mark_celebrity_followed(db, network, relations.ids(db, network, author_id, FOLLOWER),
                                                      author_id)


_NEVER_POSTED = datetime.fromtimestamp(0, UTC)


def record_post_times(db: Database, network: str, author_ids: list[int]) -> int:
    """Record when each of these celebrities last posted, from its newest post (after its promotion, or after a
    load added posts): Q4 then skips the ones that did not post since a page's window. Returns the rows written."""
    # At LOCAL_QUORUM: a post written (at LOCAL_QUORUM) before this read must be seen, or the time recorded would
    # make Q4 skip it.
    token = read_level.set(ConsistencyLevel.LOCAL_QUORUM)
    try:
        newest = {a: posts.posts_of_author(db, network, a, 1) for a in author_ids}
    finally:
        read_level.reset(token)
    return db.execute_many(accounts.post_time_write(network, a, got[0].posted_at if got else _NEVER_POSTED)
                           for a, got in newest.items())


def demote(db: Database, ns: NetworkSettings, network: str, author_id: int) -> int:
    """Fan an author out again: its newest posts into every follower's cache first, then out of the set (fan-out
    resumes), then the marks go. Proportional to its followers: a job."""
    followers = relations.ids(db, network, author_id, FOLLOWER)
    written = timelines.add_to_caches(db, ns, network, posts.posts_of_author(db, network, author_id, ns.cache_cap),
                                      followers)
    accounts.remove_celebrity(db, network, author_id)
    relations.unmark_celebrity_followed(db, network, relations.ids(db, network, author_id, FOLLOWER), author_id)
    return written


def settle_celebrity(db: Database, network: str, account_id: int, ns: NetworkSettings | None = None
                     ) -> dict[str, Any]:
    """The celebrity job: promote the account if its current follower count is at or above the threshold,
    demote it if it is below threshold x (1 - hysteresis), else leave it as it is (idempotent)."""
    ns = ns or network_settings()
    followers = accounts.fresh_counts(db, network, [account_id])[account_id][0]
    celebrity = accounts.is_celebrity(db, network, account_id)
    if not celebrity and ns.is_celebrity(followers):
        return {"account_id": account_id, "followers": followers, "promoted": True,
                "marked": promote(db, network, account_id, followers)}
    if celebrity and followers < ns.demote_below:
        return {"account_id": account_id, "followers": followers, "demoted": True,
                "cached": demote(db, ns, network, account_id)}
    return {"account_id": account_id, "followers": followers, "unchanged": True}


def apply_threshold(db: Database, network: str, ns: NetworkSettings | None = None, *, dry_run: bool = False
                    ) -> dict[str, Any]:
    """Make the celebrity set match the threshold in force exactly (after a change of the setting, or after a
    load): promote accounts at or above it, demote the others, and record when each celebrity last posted. A
    job (reads every count of the network)."""
    ns = ns or network_settings()
    wanted = {a: f for a, f, _ in accounts.all_counts(db, network) if ns.is_celebrity(f)}
    current, _threshold = accounts.celebrities(db, network)
    to_promote = sorted(set(wanted) - set(current))
    to_demote = sorted(set(current) - set(wanted))
    if not dry_run:
        for a in to_promote:
            promote(db, network, a, wanted[a])
        for a in to_demote:
            demote(db, ns, network, a)
        record_post_times(db, network, sorted(set(wanted) - set(to_promote)))  # promote recorded the others
        accounts.record_threshold(db, network, ns.hybrid_threshold if ns.hybrid else 0, datetime.now(UTC))
    return {"dry_run": dry_run, "celebrities": len(wanted), "promoted": to_promote, "demoted": to_demote}


# -- home caches and Q4 ----------------------------------------------------------------------------------------
def _newest_followed(db: Database, ns: NetworkSettings, network: str, account_id: int) -> tuple[list[Post], bool, int]:
    celebrities = relations.followed_celebrities(db, network, account_id, fresh=True)
    authors = [a for a in relations.ids(db, network, account_id, FOLLOWS) if a not in celebrities]
    newest, complete = posts.newest_posts_of(db, network, authors, ns.cache_cap)
    return newest, complete, len(authors)


def build_cache(db: Database, network: str, account_id: int, ns: NetworkSettings | None = None, *,
                dry_run: bool = False) -> dict[str, Any]:
    """Build one account's home cache from scratch: the newest `cap` posts of the accounts it follows, except
    celebrities. A dry run computes what the cache would hold and writes nothing."""
    ns = ns or network_settings()
    newest, complete, authors = _newest_followed(db, ns, network, account_id)
    summary = {"entries": len(newest), "complete": complete, "followed_authors": authors}
    if dry_run:
        return {"dry_run": True, **summary}
    state = timelines.write_build(db, ns, network, account_id, newest, complete)
    return {"built_at": state.built_at, "cutoff": state.cutoff, **summary}


def home_of(db: Database, network: str, account_id: int, order: str = "newest",
            ns: NetworkSettings | None = None, *, fresh: bool = False) -> dict[str, Any] | None:
    """Q4: the account's counts and the 25 newest, or the 25 most-liked, posts of its home timeline (the
    newest `cap` posts of the accounts it follows); None when the account is unknown.

    By likes, a ranking of the window made less than `likes_rank_max_age` seconds ago is reused (twice that:
    reused while it is ranked again in the background): the page is its best posts by their current like
    counts, without those deleted since. The reader's own follows and a cache rebuild re-rank at once.
    `fresh` ranks now whatever the setting (admin commands).
    """
    ns = ns or network_settings()
    if order == "likes" and ns.likes_rank_max_age > 0 and not fresh:
        served = _home_from_ranking(db, ns, network, account_id)
        if served is not _NOT_RANKED:
            return served
    return _home_computed(db, ns, network, account_id, order)


_NOT_RANKED = object()  # no usable ranking: rank the window now
_RANKING_KEPT = 2  # x page size: post ids a ranking keeps, so posts deleted since still leave a full page


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
    age = ranking.age(datetime.now(UTC))
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


# Re-ranking in the background: one thread per process (created in the process that uses it, so after
# gunicorn's fork), at most one pending ranking per reader.
_rerank_lock = threading.Lock()
_rerank_pool: tuple[int, ThreadPoolExecutor] | None = None
_reranking: dict[tuple[str, str, int], Future] = {}


def _rerank_later(db: Database, ns: NetworkSettings, network: str, account_id: int) -> None:
    global _rerank_pool
    key = (db.keyspace, network, account_id)
    with _rerank_lock:
        if key in _reranking:
            return
        if _rerank_pool is None or _rerank_pool[0] != os.getpid():
            _rerank_pool = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="chronicle-rerank"))

        def rerank() -> None:
            try:
                _home_computed(db, ns, network, account_id, "likes")
            except Exception as e:  # the next read ranks again (or serves this ranking until it is too old)
                log.warning("rerank_failed", network=network, account_id=account_id, error=repr(e))
            finally:
                with _rerank_lock:
                    _reranking.pop(key, None)
        _reranking[key] = _rerank_pool[1].submit(rerank)


def settle_reranking(timeout: float = 30.0) -> int:
    """Wait for the background rankings this process started (tests, benchmarks); returns how many."""
    with _rerank_lock:
        pending = list(_reranking.values())
    for f in pending:
        f.result(timeout=timeout)
    return len(pending)


def _home_computed(db: Database, ns: NetworkSettings, network: str, account_id: int, order: str
                   ) -> dict[str, Any] | None:
    """Q4 ranked now. The cache answers when it is built (else it is built now, a read of the followed authors'
    newest posts); rows of unfollowed authors, of celebrities (merged from their own posts instead) and of
    deleted posts are skipped; a cache left short of a page by them is rebuilt. Like counts come from the
    posts. By likes, the ranking is kept for the next reads."""
    ranked_at = now_ms()
    needed = ns.cache_cap if order == "likes" else ns.page_size
    account_f = accounts.start_get_account(db, network, account_id)
    state_f = timelines.start_state(db, network, account_id)
    celebs_f = relations.start_followed_celebrities(db, network, account_id)
    excluded_f = timelines.start_excluded(db, network, account_id)
    account = accounts.account_from(account_f)
    if account is None:
        return None
    celebrities = {r.celebrity_id for r in celebs_f.result()}
    post_times_f = accounts.start_post_times(db, network, celebrities) if celebrities else []
    skip = timelines.excluded_from(excluded_f) | celebrities
    state = timelines.state_from(state_f)
    rebuilt = False
    if state is None:
        newest, complete, _n = _newest_followed(db, ns, network, account_id)
        state = timelines.write_build(db, ns, network, account_id, newest, complete)
        rows, rebuilt = newest, True
    else:
        rows = _read_cache(db, network, account_id, state, needed, skip, keys_only=order == "likes")
    slim = order == "likes" and not rebuilt  # cached posts without their text: read for the page only
    valid = _valid_rows(rows, state, skip)
    head = heapq.nlargest(ns.cache_cap, valid, key=lambda p: (p.posted_at, p.post_id))[:needed + _SLACK]
    if len(head) >= needed and not rebuilt:
        # A celebrity post older than every cached post read cannot reach the page (or the likes window), so
        # only the celebrities that posted since the oldest of them are read.
        since = head[-1].posted_at
        merged_f = posts.start_recent_posts_of_authors(
            db, network, accounts.posted_since_from(post_times_f, celebrities, since), since, needed,
            datetime.now(UTC))
    else:
        merged_f = posts.start_posts_of_authors(db, network, sorted(celebrities), needed)
    window = _with_like_counts(db, network, head, needed)
    if len(window) < needed and not (state.complete and len(rows) < needed) and not rebuilt:
        newest, complete, _n = _newest_followed(db, ns, network, account_id)
        state = timelines.write_build(db, ns, network, account_id, newest, complete)
        rebuilt, slim = True, False
        merged_f = posts.start_posts_of_authors(db, network, sorted(celebrities), needed)
        current = posts.window_like_counts(db, network, newest)
        window = [p.with_likes(current[p.post_id]) for p in newest if p.post_id in current]
    celebrity_posts = merged_f()
    window = heapq.nlargest(ns.cache_cap, window + celebrity_posts, key=lambda p: (p.posted_at, p.post_id))
    kept_f = None
    if order == "likes":
        if ns.likes_rank_max_age > 0:
            kept_f = timelines.start_put_ranking(db, network, account_id, ranked_at, state,
                                                 [p.post_id for p in _by_likes(window, ns.page_size * _RANKING_KEPT)])
        page = _by_likes(window, ns.page_size)
        if slim:
            bare = {p.post_id for p in page if p.author_id not in celebrities}
            full = posts.posts_by_ids(db, network, bare)
            # Ranked by the count read above (a like since then shows on the next read).
            page = [full[p.post_id].with_likes(p.like_count) if p.post_id in bare else p
                    for p in page if p.post_id not in bare or p.post_id in full]
    else:
        page = window[:ns.page_size]
    if kept_f is not None:
        kept_f.result()
    return {"account": account, "order": order, "posts": page, "cache_rebuilt": rebuilt,
            "merged_celebrities": len(celebrity_posts), **({"ranked_at": ranked_at} if order == "likes" else {})}


_DELETED_SLACK = 5  # counts read beyond a page's worth, standing in for posts deleted since they were cached


def _with_like_counts(db: Database, network: str, head: list[Post], needed: int) -> list[Post]:
    """The posts of `head` (newest first) that still exist, with their current like counts: read for the first
    `needed` and a few more, and for the rest only when posts deleted since left those short (each count read
    is a partition read: a page by newest shows 25 posts, not the 50 read from the cache)."""
    first = head[:needed + _DELETED_SLACK]
    current = posts.window_like_counts(db, network, first)
    if len(current) < needed and len(head) > len(first):
        current.update(posts.window_like_counts(db, network, head[len(first):]))
    return [p.with_likes(current[p.post_id]) for p in head if p.post_id in current]


def _read_cache(db: Database, network: str, account_id: int, state: CacheState, needed: int,
                skip: set[int], *, keys_only: bool = False) -> list[Post]:
    def enough(rows: list[Post], newest_unread: datetime | None) -> bool:
        valid = sorted((p.posted_at for p in _valid_rows(rows, state, skip)), reverse=True)
        want = needed + _SLACK
        return len(valid) >= want and newest_unread is not None and valid[want - 1] > newest_unread
    return timelines.read(db, network, account_id, state, needed + _SLACK, enough, keys_only=keys_only)


def _valid_rows(rows: list[Post], state: CacheState, skip: set[int]) -> list[Post]:
    """Rows a page may show: not by an author skipped (unfollowed, or a celebrity merged at read time), not
    older than what the cache is sure to hold; each post once."""
    since = state.valid_from()
    seen: dict[int, Post] = {}
    for p in rows:
        if p.author_id not in skip and (since is None or p.posted_at >= since):
            seen.setdefault(p.post_id, p)
    return list(seen.values())


# -- Q6 --------------------------------------------------------------------------------------------------------
_REBUILD_ASKED_EVERY = 60.0  # seconds: a process asks at most this often per term (searches may be frequent)
_rebuild_asked: dict[tuple[str, str, str], float] = {}


def search_posts(db: Database, network: str, terms: list[str], limit: int = 25) -> search.Found:
    """Q6: the `limit` most-liked posts holding every term, confirmed against the posts. A search whose driving
    term has no top list, or an outgrown one, queues its rebuild."""
    found = search.search(db, network, terms, lambda ids: posts.like_counts(db, network, ids), limit)
    if found.rebuild is not None:
        key, now = (db.keyspace, network, found.rebuild), time.monotonic()
        if now - _rebuild_asked.get(key, -_REBUILD_ASKED_EVERY) >= _REBUILD_ASKED_EVERY:
            _rebuild_asked[key] = now
            jobs.enqueue(db, network, jobs.TERM_TOP, found.rebuild)
    return found


def rebuild_term_top(db: Database, network: str, term: str, *, dry_run: bool = False) -> dict[str, Any]:
    """Rebuild one common term's top list (an admin command, and the loader after a load)."""
    return search.rebuild_top(db, network, term, lambda ids: posts.like_counts(db, network, ids), dry_run=dry_run)


def refresh_term_top(db: Database, network: str, term: str) -> dict[str, Any]:
    """The term-top job: rebuild the list only when it is missing or outgrown (a duplicate job does nothing)."""
    postings = search.term_counts(db, network, [term])[term]
    if not search.needs_top(postings, search.top_states(db, network, [term]).get(term)):
        return {"term": term, "postings": postings, "unchanged": True}
    return rebuild_term_top(db, network, term)


# -- the job worker's dispatch ---------------------------------------------------------------------------------
def run_job(db: Database, network: str, kind: str, subject: str) -> dict[str, Any]:
    """Run one queued network job (jobs.py lists the kinds)."""
    if kind == jobs.CELEBRITY:
        return settle_celebrity(db, network, int(subject))
    if kind == jobs.PURGE_LIKES:
        return {"post_id": int(subject), "likes_removed": likes.delete_likes_of_post(db, network, int(subject))}
    if kind == jobs.TERM_TOP:
        return refresh_term_top(db, network, subject)
    raise ValueError(f"unknown network job kind {kind!r}")


# -- Q2 / Q3 ---------------------------------------------------------------------------------------------------
def top_accounts(db: Database, network: str, limit: int = 100) -> list[dict[str, Any]]:
    """Q2: the `limit` accounts with the most followers (ties: lower id first), from every count (a job)."""
    counts = {a: f for a, f, _ in accounts.all_counts(db, network) if f > 0}
    top = heaviest(counts, limit)
    names = {a: accounts.start_get_account(db, network, a) for a, _ in top}
    out = []
    for a, n in top:
        found = accounts.account_from(names[a])
        out.append({"account_id": a, "username": found.username if found else None, "follower_count": n})
    return out


def top_followers(db: Database, network: str, top: list[dict[str, Any]], limit: int = 100
                  ) -> list[dict[str, Any]]:
    """Q3: the accounts following the most of `top` (ties: lower id first)."""
    counts: collections.Counter = collections.Counter()
    names: dict[int, str | None] = {}
    for follower_id, name in relations.each_follower(db, network, [a["account_id"] for a in top]):
        counts[follower_id] += 1
        names[follower_id] = name
    return [{"account_id": a, "username": names[a], "follows_top": n} for a, n in heaviest(counts, limit)]


def compute_rankings(db: Database, network: str, limit: int = 100, *, dry_run: bool = False) -> dict[str, Any]:
    """Compute Q2 and Q3 now and append both to the time series (a dry run appends nothing)."""
    started = time.perf_counter()
    top = top_accounts(db, network, limit)
    followers = top_followers(db, network, top, limit)
    taken = {"dry_run": True} if dry_run else rankings.store_snapshot(db, network, top, followers)
    return {**taken, "accounts": top, "followers": followers, "seconds": round(time.perf_counter() - started, 3)}


# -- reconcile (a job) -----------------------------------------------------------------------------------------
def reconcile_counts(db: Database, network: str, account_ids: list[int] | None = None, post_ids: list[int] = (),
                     *, dry_run: bool = False) -> dict[str, Any]:
    """Re-count follower/follows counts from the relation partitions (every account with a count, or the ones
    given) and like counts of the given posts from likes_by_post, and repair the counters that drifted."""
    current = {a: (f, g) for a, f, g in accounts.all_counts(db, network)}
    ids = sorted(current) if account_ids is None else list(account_ids)
    wanted = {a: (relations.count(db, network, a, FOLLOWER), relations.count(db, network, a, FOLLOWS)) for a in ids}
    changed = accounts.set_counts(db, network, wanted, current=current, dry_run=dry_run)
    post_changes = {}
    for post_id in post_ids:
        true = likes.recount(db, network, post_id)
        delta = true - likes.count(db, network, post_id)
        if delta:
            post_changes[post_id] = delta
            if not dry_run:
                likes.set_count(db, network, post_id, true)
                post = posts.get_post(db, network, post_id)
                if post is not None:
                    _publish_likes(db, network, post)
    return {"dry_run": dry_run, "accounts_checked": len(ids), "accounts_repaired": changed,
            "posts_repaired": post_changes}



# -- drop (admin) ----------------------------------------------------------------------------------------------
def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: Callable[[str, int], None] | None = None) -> dict[str, Any]:
    """Delete everything `network` holds, table family by table family (accounts first, so the API stops
    finding the network at once). Scans every partition key of each table: an admin job. Re-running an
    interrupted drop finishes it."""
    started = time.perf_counter()
    found: dict[str, int] = {}
    for owner in (accounts, relations, posts, likes, search, timelines, rankings):
        found.update(owner.drop_network(db, network, dry_run=dry_run, progress=progress))
    return {"network": network, "dry_run": dry_run, "partitions": found, "total": sum(found.values()),
            "seconds": round(time.perf_counter() - started, 3)}
