"""Operations of the follower network that span table families, in one place.

Each table family has one owner module (accounts, relations, posts, search, likes, timelines, rankings) that
holds its statements and reads/writes only its own tables; the owners import nothing from each other. What
must touch several families goes here: creating and deleting a post (posts, word index, likes, the home
caches of the author's followers), like/unlike (likes, counts on the post, the word index, cached copies),
follow/unfollow (relations, counts, the celebrity set, caches), the Q4 home page (caches, accounts, the
celebrity merge), Q6 (word index confirmed by the posts) and the Q2/Q3 job (accounts, relations, snapshots).
HTTP routes and admin commands call these functions; they are the only callers of more than one owner.
"""

from __future__ import annotations

import collections
import heapq
import time
from datetime import UTC, datetime
from typing import Any

from cassandra.cluster import ResponseFuture

from api.db import Database
from api.network import accounts, likes, posts, rankings, relations, search, timelines
from api.network.accounts import Celebrities
from api.network.common import heaviest, new_post_id, to_utc
from api.network.relations import FOLLOWER, FOLLOWS
from api.network.settings import NetworkSettings, network_settings
from api.network.timelines import CacheState
from api.network.values import Account, Post

_SLACK = 25  # extra cache rows read so a few ignorable rows do not force a rebuild


# -- the celebrity set -----------------------------------------------------------------------------------------
def celebrities_in_force(db: Database, ns: NetworkSettings, network: str,
                         pending: ResponseFuture | None = None) -> Celebrities:
    """The accounts merged at read time for the threshold in force. When the threshold setting changed since
    the stored set was built, the set is rebuilt first (a write, once per change of the setting)."""
    found = accounts.celebrities_from(pending) if pending is not None else accounts.celebrities(db, network)
    return found if found.is_for(ns) else accounts.rebuild_celebrities(db, ns, network)


def _celebrity_ids(db: Database, ns: NetworkSettings, network: str, *, dry_run: bool) -> set[int]:
    """Celebrity ids for the threshold in force; a dry run computes them without storing anything."""
    found = accounts.celebrities(db, network)
    if found.is_for(ns):
        return set(found.accounts)
    if dry_run:
        return set(accounts.celebrities_above(db, ns, network))
    return set(accounts.rebuild_celebrities(db, ns, network).accounts)


# -- posts (Q5) ------------------------------------------------------------------------------------------------
def write_post(db: Database, network: str, post: Post) -> None:
    """The post's rows in the post tables and the word index (idempotent), written concurrently."""
    db.execute_many(posts.post_writes(network, post) + search.word_writes(network, post))


def create_post(db: Database, network: str, author: Account, content: str, *,
                posted_at: datetime | None = None, language: str | None = None, country: str | None = None,
                latitude: float | None = None, longitude: float | None = None, post_id: int | None = None,
                ns: NetworkSettings | None = None) -> tuple[Post, int]:
    """Q5: write a post, then fan it out to its author's followers' home caches. Returns (post, fanned out)."""
    post = Post(post_id=post_id or new_post_id(), author_id=author.account_id,
                # Whole seconds: the returned post is identical to the stored one (Cassandra keeps ms).
                posted_at=to_utc(posted_at or datetime.now().astimezone()).replace(microsecond=0),
                author_username=author.username, content=content, language=language, country=country,
                latitude=latitude, longitude=longitude)
    write_post(db, network, post)
    return post, fan_out(db, network, post, author_followers=author.follower_count, ns=ns)


def fan_out(db: Database, network: str, post: Post, *, author_followers: int,
            ns: NetworkSettings | None = None) -> int:
    """Write the post into the home cache of every follower of its author. Authors above the hybrid threshold
    are skipped: their posts are merged at read time."""
    ns = ns or network_settings()
    # The celebrity table, not just the count: it also records when the threshold changed, which is what
    # keeps caches built under another threshold from being trusted.
    if ns.is_celebrity(author_followers) or post.author_id in celebrities_in_force(db, ns, network).accounts:
        return 0
    return timelines.add_to_caches(db, ns, network, post, relations.ids(db, network, post.author_id, FOLLOWER))


def delete_post(db: Database, network: str, post: Post) -> int:
    """Remove a post from every home cache, the word index, the likes and the post tables (posts_by_id last,
    so a retried delete still finds it). Returns the number of home caches it was removed from."""
    ns = network_settings()
    removed = timelines.remove_from_caches(db, ns, network, post,
                                           relations.ids(db, network, post.author_id, FOLLOWER))
    search.delete_words(db, network, post)
    likes.delete_likes_of_post(db, network, post.post_id)
    posts.delete_post_rows(db, network, post)
    return removed


# -- likes -----------------------------------------------------------------------------------------------------
def like(db: Database, network: str, post: Post, user_id: int) -> int:
    """`user_id` likes `post`; returns the post's like count. Idempotent."""
    likes.add(db, network, post.post_id, user_id, datetime.now(UTC))
    return _recount_likes(db, network, post)


def unlike(db: Database, network: str, post: Post, user_id: int) -> int:
    likes.remove(db, network, post.post_id, user_id)
    return _recount_likes(db, network, post)


def _recount_likes(db: Database, network: str, post: Post) -> int:
    """Count the post's likes and carry a changed count into the caches, the word index and the post rows
    (posts_by_id last: it is what search confirms against)."""
    count = likes.count(db, network, post.post_id)
    if count != post.like_count:
        ns = network_settings()
        if post.author_id not in celebrities_in_force(db, ns, network).accounts:  # celebrity posts: not cached
            timelines.set_cached_likes(db, ns, network, post, count,
                                       relations.ids(db, network, post.author_id, FOLLOWER))
        search.move_like_count(db, network, post, count)
        posts.set_like_count(db, network, post, count)
    return count


# -- follow / unfollow -----------------------------------------------------------------------------------------
def follow(db: Database, network: str, follower: Account, followee: Account) -> tuple[bool, Account, Account]:
    """`follower` starts following `followee`. Returns (changed, follower, followee) with the new counts;
    changed is False when it already did. Rows and counts are (re)written even then: a retry repairs a
    half-done follow."""
    existed = relations.follows(db, network, follower.account_id, followee.account_id)
    relations.add(db, network, follower, followee)
    follower, followee = _recount_follows(db, network, follower, followee)
    ns = network_settings()
    if not existed and followee.account_id not in celebrities_in_force(db, ns, network).accounts:
        _add_author_to_cache(db, ns, network, follower.account_id, followee.account_id)
    return not existed, follower, followee


def unfollow(db: Database, network: str, follower: Account, followee: Account
             ) -> tuple[bool, Account, Account]:
    """`follower` stops following `followee`; (changed, follower, followee) as for `follow`."""
    existed = relations.follows(db, network, follower.account_id, followee.account_id)
    relations.remove(db, network, follower.account_id, followee.account_id)
    follower, followee = _recount_follows(db, network, follower, followee)
    # The unfollowed author's posts must leave the cache and older posts of others come back in: rebuild.
    if existed:
        timelines.drop_state(db, network, follower.account_id)
    return existed, follower, followee


def _recount_follows(db: Database, network: str, follower: Account, followee: Account) -> tuple[Account, Account]:
    ns = network_settings()
    before = followee.follower_count
    followee = accounts.set_follower_count(db, ns, network, followee,
                                           relations.count(db, network, followee.account_id, FOLLOWER))
    follower = accounts.set_follows_count(db, network, follower,
                                          relations.count(db, network, follower.account_id, FOLLOWS))
    if ns.is_celebrity(before) and not ns.is_celebrity(followee.follower_count):
        _stop_merging(db, ns, network, followee)
    return follower, followee


def _stop_merging(db: Database, ns: NetworkSettings, network: str, author: Account) -> None:
    """An author fell below the hybrid threshold: its followers' caches lack its posts, so fan them out now
    (rows older than a cache's cutoff are ignored by reads, so adding the newest `cap` is enough)."""
    if author.account_id in celebrities_in_force(db, ns, network).accounts:
        return
    followers = relations.ids(db, network, author.account_id, FOLLOWER)
    for post in posts.posts_of_author(db, network, author.account_id, ns.cache_cap):
        timelines.add_to_caches(db, ns, network, post, followers)


def _add_author_to_cache(db: Database, ns: NetworkSettings, network: str, account_id: int, author_id: int) -> int:
    """After a follow: put the new followee's recent posts into the follower's cache, if it has one."""
    state = timelines.get_state(db, network, account_id)
    if state is None:
        return 0  # no cache yet: it is built, complete, on the first read
    recent = posts.posts_of_author(db, network, author_id, ns.cache_cap)
    if state.complete and len(recent) >= ns.cache_cap:
        # The followee may have older posts than the ones added: the cache is no longer complete.
        timelines.drop_state(db, network, account_id)
        return 0
    since = state.valid_from()
    return timelines.add_posts(db, ns, network, account_id,
                               [p for p in recent if since is None or p.posted_at >= since])


# -- home caches and Q4 ----------------------------------------------------------------------------------------
def build_cache(db: Database, network: str, account_id: int, ns: NetworkSettings | None = None, *,
                dry_run: bool = False) -> dict[str, Any]:
    """Build one account's home cache from scratch: the newest `cap` posts of the accounts it follows, except
    those above the hybrid threshold. A dry run computes what the cache would hold and writes nothing."""
    ns = ns or network_settings()
    celebrity_ids = _celebrity_ids(db, ns, network, dry_run=dry_run)
    authors = [a for a in relations.ids(db, network, account_id, FOLLOWS) if a not in celebrity_ids]
    newest, complete = posts.newest_posts_of(db, network, authors, ns.cache_cap)
    summary = {"entries": len(newest), "complete": complete, "followed_authors": len(authors)}
    if dry_run:
        return {"dry_run": True, **summary}
    state = timelines.replace_cache(db, ns, network, account_id, newest, complete)
    return {"built_at": state.built_at, "cutoff": state.cutoff, "threshold": state.threshold, "cap": state.cap,
            **summary}


def _rebuild(db: Database, ns: NetworkSettings, network: str, account_id: int, celebrity_ids: set[int],
             limit: int) -> tuple[CacheState, list[Post | None]]:
    """Rebuild the cache; returns the state written and its newest `limit` rows (no read-back)."""
    authors = [a for a in relations.ids(db, network, account_id, FOLLOWS) if a not in celebrity_ids]
    newest, complete = posts.newest_posts_of(db, network, authors, ns.cache_cap)
    state = timelines.replace_cache(db, ns, network, account_id, newest, complete)
    return state, list(newest[:limit])


def home_of(db: Database, network: str, account_id: int, order: str = "newest",
            ns: NetworkSettings | None = None) -> dict[str, Any] | None:
    """Q4: the account's counts and the 25 newest, or the 25 most-liked, posts of its home timeline (the
    newest `cap` posts of the accounts it follows); None when the account is unknown.

    The cache answers when it is valid; a missing or outdated cache (another threshold or cap, or built
    before the threshold last changed) or one left short of a page by deletes and unfollows is rebuilt, so
    answers equal "the newest `cap` posts of the followed accounts" at all times. Posts of followed
    celebrities are merged in from posts_by_author.
    """
    ns = ns or network_settings()
    needed = ns.cache_cap if order == "likes" else ns.page_size
    limit = needed + _SLACK
    # All first reads are in flight together: one round trip of latency, not four.
    account_f = accounts.start_get_account(db, network, account_id)
    state_f = timelines.start_state(db, network, account_id)
    rows_f = timelines.start_read(db, network, account_id, limit)
    celebs_f = accounts.start_celebrities(db, network)
    account = accounts.account_from(account_f)
    if account is None:
        return None
    celebs = celebrities_in_force(db, ns, network, celebs_f)
    celebrity_ids = set(celebs.accounts)
    state = timelines.state_from(state_f)
    rows = timelines.rows_from(rows_f)
    rebuilt = False
    if not _state_ok(state, ns, celebs):
        state, rows = _rebuild(db, ns, network, account_id, celebrity_ids, limit)
        rebuilt = True
    valid = _valid_rows(rows, state, celebrity_ids)
    if len(valid) < needed and not (state.complete and len(rows) < limit) and not rebuilt:
        # Deletes, unfollows or stray rows left the cache short of a page: rebuild it exactly.
        state, rows = _rebuild(db, ns, network, account_id, celebrity_ids, limit)
        rebuilt = True
        valid = _valid_rows(rows, state, celebrity_ids)
    merged = list(valid)
    for celeb in relations.followed_among(db, network, account_id, sorted(celebrity_ids)):
        merged += posts.posts_of_author(db, network, celeb, needed)
    window = heapq.nlargest(ns.cache_cap, merged, key=lambda p: (p.posted_at, p.post_id))
    if order == "likes":
        page = heapq.nsmallest(ns.page_size, window, key=lambda p: (-p.like_count, -p.post_id))
    else:
        page = window[:ns.page_size]
    return {"account": account, "order": order, "posts": page, "cache_rebuilt": rebuilt,
            "merged_celebrities": len(merged) - len(valid)}


def _state_ok(state: CacheState | None, ns: NetworkSettings, celebs: Celebrities) -> bool:
    """Built for the threshold and cap in force, and after the threshold last changed."""
    return (state is not None and state.threshold == accounts.threshold_of(ns) and state.cap == ns.cache_cap
            and celebs.since is not None and state.built_at >= celebs.since)


def _valid_rows(rows: list[Post | None], state: CacheState, celebrity_ids: set[int]) -> list[Post]:
    """Rows a page may show: not a stray like update, not by an author now merged at read time, and not
    older than what the cache is sure to hold."""
    since = state.valid_from()
    return [p for p in rows
            if p is not None and p.author_id not in celebrity_ids and (since is None or p.posted_at >= since)]


# -- Q6 --------------------------------------------------------------------------------------------------------
def search_posts(db: Database, network: str, words: list[str], limit: int = 25) -> list[Post]:
    """Q6: the `limit` most-liked posts containing every word, confirmed against posts_by_id."""
    return search.search(db, network, words, lambda ids: posts.like_counts(db, network, ids), limit)


# -- Q2 / Q3 ---------------------------------------------------------------------------------------------------
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
    top = accounts.top_accounts(db, network, limit)
    followers = top_followers(db, network, top, limit)
    taken = {"dry_run": True} if dry_run else rankings.store_snapshot(db, network, top, followers)
    return {**taken, "accounts": top, "followers": followers, "seconds": round(time.perf_counter() - started, 3)}
