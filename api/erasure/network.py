"""Erasure of an account from a follower network (docs/retention.md, "Erasure of a network account").

Where the account is, read from its own partitions (nothing scanned): its posts (month listing), the posts it
likes, its followers and follows (any layout), the UTC days of its likes and follows (network_activity_days, and
for events archived before that listing, the days its stored activity covers), and the caches of its followers
and of those who unfollowed it within the cache TTL (the activity of those days says who).

- its posts go with every copy: search postings and top-list rows, the likes on them (both sides) and their
  counter, the copies in readers' home caches (every partition that can still live: the TTL's hour buckets and
  the cache builds listed), the rows by id, then its month partitions;
- its likes are unliked and its relations unfollowed both ways, through the same actions users take (counts,
  like counts on posts and postings, celebrity marks, demotion jobs follow), without logging new events;
- the other side of each of its past likes and follows (the mirror rows in other accounts' activity) is written
  again naming the former-account id 0, and those accounts' days are rebuilt (dirty marks);
- Q2 / Q3 snapshots naming it show the former account (id 0, no username) in its place;
- then what is its own alone: account row, counts, celebrity rows, relation partitions and follower buckets,
  likes list, cache, activity partitions and day listing, stored activity days.

The ledger (erasure_requests, erasure_touched) records each place before it is changed, so the proof reads there
and a stopped request is finished by running it again. A legal hold on the network or the account refuses it.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import structlog

from api.activity import dirty
from api.activity import store as activity_store
from api.db import Database, Params, Statement
from api.erasure import ledger
from api.errors import NotFound
from api.network import (
    accounts,
    actions,
    activity_log,
    likes,
    periods,
    posts,
    rankings,
    relations,
    search,
    timelines,
)
from api.network.common import FORMER_NAME
from api.network.relations import FOLLOWER, FOLLOWS
from api.network.tokens import index_terms
from api.network.values import Account, Post
from api.retention import policies

log = structlog.get_logger("chronicle.erasure")

Write = tuple[Statement, Params]
US = 1_000_000
US_PER_DAY = 86_400 * US
PARALLEL = 8  # readers' caches, posts and relations handled side by side
YEARS_BACK = 40  # stored activity years looked through (as for Slack persons)
_DAYS_PER_READ = 4  # UTC days of activity read together (96 slot partitions each)
_BATCH = 20

# Places in the ledger (erasure_touched's "channel" column for a network request).
POSTS, TERMS, READERS, RELATIONS, LIKED, MIRRORS, MONTHS, DAYS, MENTIONS = (
    "posts", "post-terms", "readers", "relations", "liked", "activity", "months", "days", "mentions")
SHARED, SHARES = "shared", "shares"  # its own shares' index rows; the months of its name's share index


def scrub_mention(text: str | None, username: str) -> str | None:
    """`@name` (any case, not inside a word or an address) as `@former_account`."""
    if not text:
        return text
    return re.sub(rf"(?<![\w@])@{re.escape(username)}(?!\w)", "@" + FORMER_NAME, text, flags=re.IGNORECASE)


def archive_of(network: str) -> str:
    return f"network:{network}"


def _years(now: datetime) -> range:
    return range(now.year - YEARS_BACK + 1, now.year + 2)


class NetworkErasure:
    """One request: `run()` erases; `counts` / `held` say what it did."""

    def __init__(self, db: Database, network: str, account_id: int, request: ledger.Request | None, *,
                 progress: Callable[[int], None] | None = None, parallel: int = PARALLEL) -> None:
        self.db, self.network, self.account_id, self.request = db, network, account_id, request
        self.progress = progress or (lambda _n: None)
        self.parallel = parallel
        self.archive = archive_of(network)
        self.dry_run = request is None
        self.counts: Counter[str] = Counter()
        self.held: Counter[str] = Counter()
        self.now = datetime.now(UTC)
        self.rewritten: set[int] = set()  # others' posts that named it, rewritten (their cached copies go)
        self.share_key: str | None = None  # its name's share index key (the proof reads it)
        self._lock = threading.Lock()

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self.counts[what] += n

    def _record(self, place: str, entries: Iterable[tuple[int, int, str]]) -> None:
        """Ledger rows (day, key, what) for a place, written before the change they announce."""
        if self.request is None:
            return
        entries = list(entries)
        if entries:
            ledger.add_channels(self.db, self.request, [place])
            self.db.execute_many(ledger.touched_writes(self.request, place, entries), batch_size=_BATCH)

    def _map(self, work: Callable[[Any], None], items: Iterable[Any]) -> None:
        """`work` on each item, `parallel` at a time; at most 4 x `parallel` submitted ahead (an account with 10M
        followers is 10M items)."""
        pool = self.db.executor(f"network-erasure-{self.parallel}", self.parallel)
        pending: collections.deque = collections.deque()
        for item in items:
            pending.append(pool.submit(work, item))
            if len(pending) >= 4 * self.parallel:
                pending.popleft().result()
                self.progress(1)
        while pending:
            pending.popleft().result()
            self.progress(1)

    # -- where the account is -----------------------------------------------------------------------------------

    def account(self) -> Account:
        found = accounts.get_account(self.db, self.network, self.account_id)
        return found if found is not None else Account(self.account_id, None)

    def activity_days(self) -> list[int]:
        """UTC days with the account's likes and follows: listed since migration 0280, and around each local day
        its stored activity covers (events archived before the listing)."""
        listed = set(activity_log.days_of(self.db, self.network, self.account_id))
        stored = activity_store.account_days(self.db, self.archive, str(self.account_id), _years(self.now))
        return sorted(listed | {d + k for d in stored for k in (-1, 0, 1)})

    # -- the run --------------------------------------------------------------------------------------------------

    def run(self) -> None:
        me = self.account()
        months, own_posts = posts.all_posts_of(self.db, self.network, self.account_id)
        days = self.activity_days()
        self._record(MONTHS, [(0, i, month) for i, month in enumerate(months)])
        self._record(DAYS, [(day, 0, "day") for day in days])
        events = self._events(days)
        readers = self._readers(events)
        self._record(READERS, [(0, reader, "cache") for reader in readers])
        own_ids = {p.post_id for p in own_posts}
        liked = [p for p in likes.liked_by(self.db, self.network, self.account_id) if p not in own_ids]
        self._map(self._post, own_posts)  # their likes of their own posts go with the posts
        self._map(self._unlike, liked)
        followers = relations.ids(self.db, self.network, self.account_id, FOLLOWER)
        follows = relations.ids(self.db, self.network, self.account_id, FOLLOWS)
        self._record(RELATIONS, [(0, other, rel) for rel, ids in ((FOLLOWER, followers), (FOLLOWS, follows))
                                 for other in ids])
        self._map(lambda other: self._unfollow(other, me, FOLLOWER), followers)
        self._map(lambda other: self._unfollow(other, me, FOLLOWS), follows)
        mention_readers = self._mentions(me)
        self._record(READERS, [(0, reader, "cache") for reader in sorted(mention_readers - readers)])
        self._map(self._cache, sorted(readers | set(followers) | mention_readers))
        self._forget_name(me)
        self._mirrors(events)
        self._rankings(me)
        self._own(months, own_posts, days)

    def _events(self, days: list[int]) -> list[activity_log.Event]:
        found: list[activity_log.Event] = []
        for i in range(0, len(days), _DAYS_PER_READ):
            found += activity_log.events_of_days(self.db, self.network, self.account_id, days[i:i + _DAYS_PER_READ])
        return found

    def _readers(self, events: list[activity_log.Event]) -> set[int]:
        """Accounts whose caches may hold its posts besides its followers: those that unfollowed it within the
        cache TTL."""
        since = int((self.now.timestamp() - self.db.settings.network.cache_ttl - 3600) * US)
        return {other for _day, at, kind, other, _post, _legacy in events
                if kind == "unfollowed_by" and at >= since and other != activity_log.FORMER_ACCOUNT}

    def _post(self, post: Post) -> None:
        buckets = posts.term_buckets(self.db, self.network, post.post_id)
        posted_us = int(post.posted_at.timestamp() * US)
        self._record(POSTS, [(posted_us // US_PER_DAY, post.post_id, f"at:{posted_us}")])
        self._record(TERMS, [(0, post.post_id, f"{bucket}:{term}") for term, bucket in buckets.items()])
        shared = posts.shared_place(post)
        if shared is not None:
            self._record(SHARED, [(0, post.post_id, shared)])
        post_likers = likes.likers(self.db, self.network, post.post_id)
        self._count("posts_erased")
        self._count("likes_of_posts_removed", len(post_likers))
        if self.dry_run:
            return
        # Postings and likes first, the row by id after: a resumed run still finds the post's terms.
        self.db.execute_many(search.erase_post_writes(self.db, self.network, post, buckets)
                             + likes.erase_post_writes(self.network, post.post_id, post_likers)
                             + posts.unshare_writes(self.network, [post]), batch_size=1)
        self.db.execute(*posts.erase_by_id_write(self.network, post.post_id))

    def _unlike(self, post_id: int) -> None:
        self._record(LIKED, [(0, post_id, "like")])
        self._count("likes_removed")
        if self.dry_run:
            return
        post = posts.get_post(self.db, self.network, post_id)
        if post is not None:
            actions.unlike(self.db, self.network, post, self.account_id, quiet=True)
        else:  # a post deleted since: its likes job may not have run yet
            self.db.execute_many(likes.erase_post_writes(self.network, post_id, [self.account_id])[:1])

    def _unfollow(self, other_id: int, me: Account, rel: str) -> None:
        self._count("followers_removed" if rel == FOLLOWER else "follows_removed")
        if self.dry_run:
            return
        other = accounts.get_account(self.db, self.network, other_id) or Account(other_id, None)
        follower, followee = (other, me) if rel == FOLLOWER else (me, other)
        actions.unfollow(self.db, self.network, follower, followee, quiet=True)

    def _cache(self, reader: int) -> None:
        buckets = timelines.cache_buckets(self.db, self.db.settings.network, self.network, reader, self.now)
        copies = timelines.copies_of(self.db, self.network, reader, self.account_id, buckets, self.rewritten)
        self._count("cached_copies_removed", len(copies))
        if not self.dry_run:
            self.db.execute_many(timelines.erase_copies_writes(self.network, reader, self.account_id, copies))

    def _mirrors(self, events: list[activity_log.Event]) -> None:
        """The other side of each past like and follow names the former account; their days are rebuilt."""
        named = [e for e in events if e[3] != activity_log.FORMER_ACCOUNT and e[2] in activity_log.MIRROR_OF]
        self._count("activity_events_rewritten", len(named))
        if self.dry_run or not named:
            return
        self._record(MIRRORS, sorted({(day, other, "mirror") for day, _at, _kind, other, _post, _legacy in named}))
        self.db.execute_many(activity_log.mirror_rewrites(self.network, self.account_id, named))
        dirty.mark(self.db, [dirty.live(self.archive, str(other), at) for _d, at, _k, other, _p, _l in named])

    def _rankings(self, me: Account) -> None:
        found = rankings.snapshots_naming(self.db, self.network, self.account_id, me.username)
        self._count("snapshots_rewritten", len(found))
        if found and not self.dry_run:
            self.db.execute_many(rankings.anonymise_writes(self.network, self.account_id, me.username, found))

    def _mentions(self, me: Account) -> set[int]:
        """Others' posts naming it read "@former_account" instead, with every copy: those with `@name` in their
        text (the `@name` term's postings find them) and the shares of its posts (its name's share index finds
        them, whatever their text; their original author becomes "former_account"). Each is re-indexed under its
        new text (its postings and top-list rows carry the text), its rows written again, and its old copies leave
        the caches of its author's followers (returned: `_cache` reads them). Then its name's share index goes."""
        if not me.username:
            return set()
        mention = next((t for t in index_terms("@" + me.username) if t.startswith("@")), None)
        key = self.share_key = posts.original_key(me.username)
        share_months, shares = posts.shares_of(self.db, self.network, key)
        # The months only: the index's key is a digest of the name, which the ledger does not keep.
        self._record(SHARES, [(0, i, month) for i, month in enumerate(share_months)])
        self._count("shares_found", len(shares))
        named = search.posts_with_term(self.db, self.network, mention) if mention else []
        readers: set[int] = set()
        for post_id in dict.fromkeys([*named, *(post_id for post_id, _author in shares)]):
            post, buckets = posts.post_and_term_buckets(self.db, self.network, post_id)
            if post is None or post.author_id == self.account_id:
                continue
            rewritten = dataclasses.replace(
                post, content=scrub_mention(post.content, me.username),
                original_author=FORMER_NAME if (post.original_author or "").casefold() == me.username.casefold()
                else post.original_author)
            if rewritten == post:
                continue
            posted_us = int(post.posted_at.timestamp() * US)
            self._record(MENTIONS, [(posted_us // US_PER_DAY, post_id, f"at:{posted_us}")])
            self._count("posts_rewritten")
            self.rewritten.add(post_id)
            if not accounts.is_celebrity(self.db, self.network, post.author_id):  # a celebrity's are not cached
                readers.update(relations.ids(self.db, self.network, post.author_id, FOLLOWER))
            if self.dry_run:
                continue
            self.db.execute_many(search.erase_post_writes(self.db, self.network, post, buckets))
            new_buckets, _grown = search.index_post(self.db, self.network, rewritten)
            self.db.execute_many(posts.post_writes(self.network, rewritten)
                                 + [posts.term_buckets_write(self.network, post_id, new_buckets)])
            actions.publish_likes(self.db, self.network, rewritten, new_buckets)
        if not self.dry_run:  # last: a resumed run still finds the shares through it
            self.db.execute_many(posts.drop_shares_writes(self.network, key, share_months))
        return readers

    def _forget_name(self, me: Account) -> None:
        """The terms of its name (`@name`, `name`) leave the index once nothing is posted under them."""
        if me.username and not self.dry_run:
            for term in sorted(index_terms("@" + me.username)):
                self.db.execute_many(search.forget_term_writes(self.db, self.network, term))

    def _own(self, months: list[str], own_posts: list[Post], days: list[int]) -> None:
        if self.dry_run:
            return
        a, network = self.account_id, self.network
        buckets = timelines.cache_buckets(self.db, self.db.settings.network, network, a, self.now)
        writes = (relations.erase_account_writes(self.db, network, a)
                  + likes.erase_account_writes(network, a)
                  + timelines.erase_account_writes(network, a, buckets)
                  + activity_log.erase_account_writes(network, a, days)
                  + activity_store.erase_account_writes(self.archive, str(a), _years(self.now))
                  + [posts.erase_by_id_write(network, p.post_id) for p in own_posts]
                  + posts.erase_author_writes(network, a, months)
                  + periods.erase_account_writes(network, a, map(periods.month_period_of, months), days)
                  + accounts.erase_writes(self.db, network, a))
        self.db.execute_many(writes)
        self.counts["account_erased"] = 1


def erase(db: Database, network: str, account_id: int, *, requested_by: str,
          progress: Callable[[int], None] | None = None, parallel: int = PARALLEL) -> ledger.Request:
    """Erase an account (resuming its unfinished request, if any): the ledger row as it ends, proof included."""
    archive = archive_of(network)
    held = policies.held(db, archive)
    person = str(account_id)
    previous = ledger.find(db, archive, person)
    request = previous if previous is not None and previous.state in (ledger.RUNNING, ledger.FAILED) \
        else ledger.start(db, archive, person, requested_by)
    if held.archive or person in held.users:
        why = "archive" if held.archive else "account"
        return ledger.finish(db, request, ledger.HELD, {}, {f"request ({why} hold)": 1})
    ledger.set_state(db, request, ledger.RUNNING)
    waited = ledger.settle(db, request)  # every process's guard has the request before anything is read
    if waited:
        log.info("erasure_settled", archive=archive, request=str(request.request_id), seconds=round(waited, 1))
    job = NetworkErasure(db, network, account_id, request, progress=progress, parallel=parallel)
    try:
        job.run()
    except Exception:
        ledger.finish(db, request, ledger.FAILED, job.counts, job.held)
        raise
    current = ledger.get(db, archive, request.request_id)
    result = check(db, network, account_id, current, job.share_key)
    ledger.record_proof(db, current, result)
    done = ledger.finish(db, current, ledger.DONE, job.counts, job.held)
    log.info("erasure", archive=archive, request=str(done.request_id), counts=dict(job.counts),
             traces=result["traces"])
    return done


def dry_run(db: Database, network: str, account_id: int) -> dict[str, Any]:
    """What an erasure of the account would change (counts); nothing is written."""
    held = policies.held(db, archive_of(network))
    job = NetworkErasure(db, network, account_id, None)
    job.run()
    refused = "archive" if held.archive else "account" if str(account_id) in held.users else None
    return {"counts": dict(sorted(job.counts.items())), "held": {}, "refused_by_hold": refused}


def prove(db: Database, network: str, account_id: int) -> ledger.Request:
    """Run the proof again on the account's last request (and record it)."""
    request = ledger.find(db, archive_of(network), str(account_id))
    if request is None:
        raise NotFound(f"no erasure request for this account in {archive_of(network)}")
    ledger.record_proof(db, request, check(db, network, account_id, request))
    return ledger.get(db, request.archive, request.request_id)


# -- the proof ------------------------------------------------------------------------------------------------------
def check(db: Database, network: str, account_id: int, request: ledger.Request, share_key: str | None = None
          ) -> dict[str, Any]:
    """Every table where a trace of the account would be, read there: its own partitions, and the places the
    ledger recorded (its posts' rows, postings and likes, readers' caches, relations' other sides, liked posts,
    other accounts' activity days), and every Q2 / Q3 snapshot. ({} traces when clean.) Its name's share index
    is read with `share_key` (the erasure's own proof knows it; the ledger keeps no name): a later proof finds
    the shares it rewrote through the ledger (each names "former_account" now)."""
    a = account_id
    now = datetime.now(UTC)
    places = {place: ledger.touched(db, request, place) for place in sorted(request.channels)}
    traces: Counter[str] = Counter()
    traces.update(accounts.account_rows(db, network, a))
    traces.update(relations.account_rows(db, network, a))
    traces["likes_by_user"] += likes.rows_of(db, network, user_id=a)
    traces["home_timeline_buckets"] += timelines.account_rows(
        db, network, a, timelines.cache_buckets(db, db.settings.network, network, a, now))
    months = [what for _d, _i, what in places.get(MONTHS, [])]
    post_ids = [post_id for _d, post_id, _w in places.get(POSTS, [])]
    traces.update(posts.rows_of_author(db, network, a, months, post_ids))
    days = [day for day, _k, _w in places.get(DAYS, [])]
    traces["network_period_accounts"] += periods.rows_of(db, network, a, map(periods.month_period_of, months), days)
    traces["network_activity_days"] += len(activity_log.days_of(db, network, a))
    traces["network_activity_slots"] += len(activity_log.events_of_days(db, network, a, days))
    traces["activity_days"] += activity_store.account_years_stored(db, archive_of(network), str(a), _years(now))
    terms: dict[int, dict[str, int]] = {}
    for _d, post_id, what in places.get(TERMS, []):
        bucket, _, term = what.partition(":")
        terms.setdefault(post_id, {})[term] = int(bucket)
    for _day, post_id, what in places.get(POSTS, []):
        at = datetime.fromtimestamp(int(what.partition(":")[2]) / US, UTC)
        traces.update(search.post_rows(db, network, Post(post_id, a, at), terms.get(post_id, {})))
        traces["likes_by_post"] += likes.rows_of(db, network, post_id=post_id)
    rewritten = {post_id for _d, post_id, _w in places.get(MENTIONS, [])}
    for _d, reader, _w in places.get(READERS, []):
        traces["home_timeline_buckets"] += timelines.rows_naming(
            db, network, reader, a, timelines.cache_buckets(db, db.settings.network, network, reader, now),
            lambda copy: copy.post_id in rewritten and not _rewritten(copy))
    for _d, post_id, place in places.get(SHARED, []):
        traces["shares_by_original"] += posts.share_row_left(db, network, place, post_id)
    if share_key is not None:
        traces.update(posts.share_rows(db, network, share_key, [m for _d, _i, m in places.get(SHARES, [])]))
    for _d, other, _w in places.get(RELATIONS, []):
        traces["follower_relations_by_account"] += relations.rows_naming(db, network, other, a)
    for _d, post_id, _w in places.get(LIKED, []):
        traces["likes_by_post"] += int(a in likes.likers(db, network, post_id))
    for day, other, _w in places.get(MIRRORS, []):
        traces["network_activity_slots"] += activity_log.naming(db, network, other, a, [day])
    traces["top100_snapshots"] += len(rankings.snapshots_naming(db, network, a, None))
    for post_id in rewritten:  # the proof has no name to look for (the ledger keeps none): the neutral one is there
        post = posts.get_post(db, network, post_id)
        traces["posts_by_id"] += int(post is not None and not _rewritten(post))
    found = {table: n for table, n in sorted(traces.items()) if n}
    return {"traces": found, "clean": not found, "places": {p: len(e) for p, e in places.items()},
            "tables": sorted(traces)}


def _rewritten(post: Post) -> bool:
    """A post the erasure rewrote shows the neutral name where it named the account: in its text (a mention) or as
    its original author (a share)."""
    return FORMER_NAME in (post.content or "") or post.original_author == FORMER_NAME
