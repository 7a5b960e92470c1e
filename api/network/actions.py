"""What a user does in a follower network, each a write across table families: post (Q5) and delete a post,
like and unlike, follow and unfollow.

Each table family has one owner module (accounts, relations, posts, search, likes, timelines, rankings) that
holds its statements and reads/writes only its own tables; the owners import nothing from each other. An action
calls several: a post is its rows (posts), its postings (search), its fan-out to followers' caches (timelines);
a like is the liker's claim and counter (likes) and the count published on the post and its postings; a follow
is the relation (relations), the counts (accounts), the follower's cache (home.py). Each also writes the activity
log and marks both accounts' activity days. HTTP routes and admin commands call these functions.

No action does work proportional to an account's followers or a post's likes, except the fan-out of a post to
its author's followers (bounded by the hybrid threshold: celebrities are merged at read time instead). Such work
goes on the network's job queue (jobs.py); job_handlers.py does it in `chronicle network worker`.
"""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime
from typing import Any

from api.activity import dirty
from api.db import Database
from api.network import (
    accounts,
    activity_log,
    home,
    jobs,
    likes,
    post_requests,
    posts,
    relations,
    search,
    timelines,
)
from api.network.common import new_post_id, to_utc
from api.network.relations import FOLLOWER
from api.network.settings import NetworkSettings
from api.network.timelines import FUTURE_SLACK
from api.network.values import Account, Post


class FuturePost(ValueError):
    """A post dated in the future (beyond a few minutes of clock skew)."""


# -- posts (Q5) ------------------------------------------------------------------------------------------------
def create_post(db: Database, network: str, author: Account, content: str, *,
                posted_at: datetime | None = None, language: str | None = None, country: str | None = None,
                latitude: float | None = None, longitude: float | None = None, post_id: int | None = None,
                ns: NetworkSettings | None = None, dry_run: bool = False) -> tuple[Post, int]:
    """Q5: write a post, index it, then fan it out to its author's followers' home caches. Returns (post,
    caches written). A post dated more than a few minutes ahead is refused (FuturePost): caches rely on it.
    `dry_run`: the same checks, nothing written; the count is the caches the fan-out would write."""
    post = Post(post_id=post_id or new_post_id(), author_id=author.account_id, posted_at=_post_time(posted_at),
                author_username=author.username, content=content, language=language, country=country,
                latitude=latitude, longitude=longitude)
    if dry_run:
        celebrity = accounts.is_celebrity(db, network, author.account_id)
        return post, 0 if celebrity else relations.count(db, network, author.account_id, FOLLOWER)
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
        top_jobs = [w for term in grown for w in jobs.job_writes(network, jobs.TERM_TOP, term, clock=db.clock)]
        db.execute_many([posts.term_buckets_write(network, post.post_id, buckets), *top_jobs])
    return fan_out(db, network, post, ns=ns)


def fan_out(db: Database, network: str, post: Post, *, ns: NetworkSettings | None = None) -> int:
    """Write the post into the home cache of every follower of its author, unless the author is a celebrity
    (merged at read time)."""
    ns = ns or db.settings.network
    if accounts.is_celebrity(db, network, post.author_id):
        # Read after the post's rows were written: a promotion that added the author to the set before this
        # read records its newest post time after the add, so one of the two records this post.
        accounts.record_post_times(db, network, {post.author_id: post.posted_at})
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
                    + jobs.job_writes(network, jobs.PURGE_LIKES, post.post_id, clock=db.clock))
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
    count = publish_likes(db, network, post, buckets,
                           counted=[likes.count_change(network, post.post_id, +1)] if applied else [],
                           beside=likes.like_done_writes(network, post.post_id, user_id, liked_at) + logged)
    dirty.note_marked(db, keys)
    return count


def unlike(db: Database, network: str, post: Post, user_id: int, buckets: dict[str, int] | None = None, *,
           quiet: bool = False) -> int:
    """`quiet`: no activity event (an erasure's unlike: the event would name the erased account)."""
    applied = likes.claim_unlike(db, network, post.post_id, user_id)
    logged, keys = _log_writes(db, network, "unlike", user_id, post.author_id, post.post_id) \
        if applied and not quiet else ([], [])
    count = publish_likes(db, network, post, buckets,
                           counted=[likes.count_change(network, post.post_id, -1)] if applied else [],
                           beside=likes.unlike_done_writes(network, post.post_id, user_id) + logged)
    dirty.note_marked(db, keys)
    return count


def publish_likes(db: Database, network: str, post: Post, buckets: dict[str, int] | None = None, *,
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
    ns = ns or db.settings.network
    a, b = follower.account_id, followee.account_id
    known_celebrity_f = accounts.start_is_celebrity(db, network, b)
    changed = relations.claim_follow(db, network, follower, followee)
    known_celebrity = accounts.is_celebrity_from(known_celebrity_f)
    logged, keys = _log_writes(db, network, "follow", a, b) if changed else ([], [])
    db.execute_together(relations.follow_writes(db, network, follower, followee)
                    + (accounts.count_writes(network, a, b, +1) if changed else [])
                    + [timelines.excluded_write(network, a, b, False),
                       timelines.ranking_stale_write(network, a, home.ranking_now(db))]
                    + (list(relations.mark_writes(network, [a], b)) if known_celebrity else [])
                    + logged)
    dirty.note_marked(db, keys)
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
        home.add_followee_posts(db, ns, network, a, b)
        if ns.is_celebrity(followee.follower_count):
            jobs.enqueue(db, network, jobs.CELEBRITY, b)
            return FollowResult(changed, follower, followee, True)
    return FollowResult(changed, follower, followee, False)


def unfollow(db: Database, network: str, follower: Account, followee: Account, ns: NetworkSettings | None = None,
             *, quiet: bool = False) -> FollowResult:
    """`follower` stops following `followee`. A celebrity falling below threshold x (1 - hysteresis) is
    demoted (fanned out again) by a job. The unfollowed author's cached posts stay until they expire; reads
    skip them from now on. `quiet`: no activity event (an erasure's unfollow)."""
    ns = ns or db.settings.network
    a, b = follower.account_id, followee.account_id
    changed = relations.claim_unfollow(db, network, a, b)
    logged, keys = _log_writes(db, network, "unfollow", a, b) if changed and not quiet else ([], [])
    db.execute_together(relations.unfollow_writes(db, network, a, b)
                    + (accounts.count_writes(network, a, b, -1) if changed else [])
                    + [timelines.excluded_write(network, a, b, True),
                       timelines.ranking_stale_write(network, a, home.ranking_now(db))]
                    + list(relations.unmark_writes(network, [a], b))
                    + logged)
    dirty.note_marked(db, keys)
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
