"""Accounts and their counts: network_accounts (one row per account: its name), network_account_counts
(follower and follows counters, 1,024 buckets per network), the celebrities (the authors merged into home pages at
read time instead of fanned out): celebrity_accounts (the set, listed by jobs, and the threshold applied),
celebrity_flags (one partition per account: what every post reads) and celebrity_last_posts (when each celebrity
last posted, in 16 shards per network: what every Q4 page reads, kept a second per process).

Counts are counters moved by +1/-1 only by a follow or unfollow whose lightweight transaction changed the
relation (see relations.py), so a repeated or retried request never counts twice; bulk loads and the reconcile
job set a counter to a target by adding the difference to what it holds. No request reads a whole follower
partition to count it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, NamedTuple

from cassandra import ConsistencyLevel
from cassandra.cluster import ResponseFuture

from api import partitions
from api.caches import Cache
from api.db import Database, Params, Statement
from api.network.common import to_utc
from api.network.values import Account

TABLES = frozenset({"network_accounts", "network_account_counts", "celebrity_accounts", "celebrity_flags",
                    "celebrity_last_posts"})
COUNT_BUCKETS = 1024  # 10M accounts per network: ~9,800 rows per partition (64 buckets held 156k)
# Counts written before cql/0150 are in buckets 0-63 (account_id % 64); counters cannot be moved, so the new buckets
# are 64-1087 and a network that has rows in the old ones reads both rows of an account (one request) and sums.
LEGACY_COUNT_BUCKETS = 64


class _Counts(NamedTuple):
    followers: int
    follows: int


GET_ACCOUNT = Statement("SELECT account_id, username FROM network_accounts WHERE network = ? AND account_id = ?")
PUT_ACCOUNT = Statement("INSERT INTO network_accounts (network, account_id, username) VALUES (?, ?, ?)")
GET_COUNTS = Statement(
    "SELECT followers, follows FROM network_account_counts WHERE network = ? AND bucket IN ? AND account_id = ?")
# After its own increment a request reads at LOCAL_QUORUM: with writes at LOCAL_QUORUM it sees them on RF 3.
GET_COUNTS_FRESH = Statement(
    "SELECT followers, follows FROM network_account_counts WHERE network = ? AND bucket IN ? AND account_id = ?",
    name="SELECT network_account_counts (fresh)", consistency=ConsistencyLevel.LOCAL_QUORUM)
HAS_LEGACY_COUNTS = Statement(  # once per network and process
    "SELECT account_id FROM network_account_counts WHERE network = ? AND bucket IN ? LIMIT 1",
    name="SELECT network_account_counts (old buckets)", consistency=ConsistencyLevel.LOCAL_QUORUM)
ADD_FOLLOWERS = Statement(
    "UPDATE network_account_counts SET followers = followers + ? WHERE network = ? AND bucket = ? "
    "AND account_id = ?", idempotent=False)
ADD_FOLLOWS = Statement(
    "UPDATE network_account_counts SET follows = follows + ? WHERE network = ? AND bucket = ? AND account_id = ?",
    idempotent=False)
COUNTS_OF_BUCKET = Statement(
    "SELECT account_id, followers, follows FROM network_account_counts WHERE network = ? AND bucket = ?",
    consistency=ConsistencyLevel.LOCAL_QUORUM)
CELEBRITIES = Statement(
    "SELECT threshold, account_id, follower_count FROM celebrity_accounts WHERE network = ?",
    consistency=ConsistencyLevel.LOCAL_QUORUM)
# Every post asks whether its author is a celebrity: one partition per account spreads that over the cluster.
# Not cached: a stale answer would lose a post for good (fanned out to no one, or merged by no one).
IS_CELEBRITY = Statement(
    "SELECT account_id FROM celebrity_flags WHERE network = ? AND account_id = ?",
    consistency=ConsistencyLevel.LOCAL_QUORUM)
PUT_CELEBRITY = Statement("INSERT INTO celebrity_accounts (network, account_id, follower_count) VALUES (?, ?, ?)")
PUT_CELEBRITY_FLAG = Statement("INSERT INTO celebrity_flags (network, account_id, follower_count) VALUES (?, ?, ?)")
DELETE_CELEBRITY = Statement("DELETE FROM celebrity_accounts WHERE network = ? AND account_id = ?")
DELETE_CELEBRITY_FLAG = Statement("DELETE FROM celebrity_flags WHERE network = ? AND account_id = ?")
# Write time = post time: of two posts' writes, the newer post's time stays whatever order they land in.
PUT_POST_TIME = Statement(
    "INSERT INTO celebrity_last_posts (network, shard, account_id, posted_at) VALUES (?, ?, ?, ?) USING TIMESTAMP ?")
GET_POST_TIMES = Statement(  # the shards of some celebrities, one request
    "SELECT account_id, posted_at FROM celebrity_last_posts WHERE network = ? AND shard IN ? AND account_id IN ?")
# A post time is written at the post's time, which may be ahead of this host's clock (a client's posted_at): the
# delete of a demotion is stamped after it, or the row would outlive the demotion.
GET_POST_TIME_WRITTEN = Statement("SELECT WRITETIME(posted_at) AS written FROM celebrity_last_posts "
                                  "WHERE network = ? AND shard = ? AND account_id = ?")
DELETE_POST_TIME = Statement(
    "DELETE FROM celebrity_last_posts USING TIMESTAMP ? WHERE network = ? AND shard = ? AND account_id = ?")
POST_TIME_SHARDS = 16  # partitions of a network's last post times (account_id % 16)
_POST_TIMES_PER_READ = 100  # celebrities per read
_POST_TIMES_KEPT = 100_000  # celebrities whose last post time a process keeps
SET_THRESHOLD = Statement("UPDATE celebrity_accounts SET threshold = ?, threshold_since = ? WHERE network = ?")
# Erasure of an account (api/erasure/network.py).
DELETE_ACCOUNT = Statement("DELETE FROM network_accounts WHERE network = ? AND account_id = ?")
DELETE_COUNTS = Statement("DELETE FROM network_account_counts WHERE network = ? AND bucket = ? AND account_id = ?")


def bucket_of(account_id: int) -> int:
    """The bucket an account's counts are added to (never one of the buckets before cql/0150)."""
    return LEGACY_COUNT_BUCKETS + account_id % COUNT_BUCKETS


def _has_legacy_counts(db: Database, network: str) -> bool:
    """Whether the network has counts in the buckets used before cql/0150. Kept for the process's life: nothing
    writes those buckets any more (and reading them for a network that has none would only cost a read)."""
    return db.caches.lru("network.legacy_count_buckets", maxsize=10_000).get_or_load(
        network, lambda: db.execute(HAS_LEGACY_COUNTS, (network, list(range(LEGACY_COUNT_BUCKETS)))).one()
        is not None)


def _buckets_of(db: Database, network: str, account_id: int) -> list[int]:
    if _has_legacy_counts(db, network):
        return [account_id % LEGACY_COUNT_BUCKETS, bucket_of(account_id)]
    return [bucket_of(account_id)]


def _summed(rows: Iterable[Any]) -> _Counts | None:
    """An account's counts from its rows (two for a network counted before cql/0150), None when it has none."""
    rows = list(rows)
    if not rows:
        return None
    return _Counts(sum(r.followers or 0 for r in rows), sum(r.follows or 0 for r in rows))


# -- one account -----------------------------------------------------------------------------------------------
def start_get_account(db: Database, network: str, account_id: int, *, counts: bool = True
                      ) -> tuple[ResponseFuture, ResponseFuture | None]:
    """Send the reads of one account (name, and counts unless the caller has no use for them: an action that
    reads them fresh after its own change); `account_from` turns them into an Account (or None)."""
    return (db.execute_async(GET_ACCOUNT, (network, account_id)),
            db.execute_async(GET_COUNTS, (network, _buckets_of(db, network, account_id), account_id))
            if counts else None)


def account_from(futures: tuple[ResponseFuture, ResponseFuture | None]) -> Account | None:
    row = futures[0].result().one()
    counts = _summed(futures[1].result()) if futures[1] is not None else None
    return Account.from_row(row, counts) if row is not None else None


def get_account(db: Database, network: str, account_id: int) -> Account | None:
    return account_from(start_get_account(db, network, account_id))


def account_writes(network: str, account: Account) -> list[tuple[Statement, Params]]:
    """The row of one account (its name); counts are set with `set_counts`."""
    return [(PUT_ACCOUNT, (network, account.account_id, account.username))]


def add_counts(db: Database, network: str, follower_id: int, followee_id: int, delta: int) -> None:
    db.execute_many(count_writes(network, follower_id, followee_id, delta))


def count_writes(network: str, follower_id: int, followee_id: int, delta: int) -> list[tuple[Statement, Params]]:
    """One follow (+1) or unfollow (-1): the followee's followers and the follower's follows, together."""
    return [(ADD_FOLLOWERS, (delta, network, bucket_of(followee_id), followee_id)),
            (ADD_FOLLOWS, (delta, network, bucket_of(follower_id), follower_id))]


def fresh_counts(db: Database, network: str, account_ids: Iterable[int]) -> dict[int, tuple[int, int]]:
    """(followers, follows) of each account, read at LOCAL_QUORUM (after the caller's own increments)."""
    return fresh_counts_from(start_fresh_counts(db, network, account_ids))


def start_fresh_counts(db: Database, network: str, account_ids: Iterable[int]) -> dict[int, ResponseFuture]:
    return {a: db.execute_async(GET_COUNTS_FRESH, (network, _buckets_of(db, network, a), a))
            for a in dict.fromkeys(account_ids)}


def fresh_counts_from(futures: dict[int, ResponseFuture]) -> dict[int, tuple[int, int]]:
    out = {}
    for account_id, future in futures.items():
        row = _summed(future.result())
        out[account_id] = (row.followers, row.follows) if row is not None else (0, 0)
    return out


def all_counts(db: Database, network: str) -> Iterator[tuple[int, int, int]]:
    """(account_id, followers, follows) of every account with a count: a job's read, bucket by bucket. A network
    counted before cql/0150 is read an old bucket at a time with the 16 new ones of the same accounts, summed
    (memory: one old bucket's accounts)."""
    if not _has_legacy_counts(db, network):
        for r in _rows_of_buckets(db, network, range(LEGACY_COUNT_BUCKETS, LEGACY_COUNT_BUCKETS + COUNT_BUCKETS)):
            yield r.account_id, r.followers or 0, r.follows or 0
        return
    for old in range(LEGACY_COUNT_BUCKETS):
        sums: dict[int, list[int]] = {}
        new = range(LEGACY_COUNT_BUCKETS + old, LEGACY_COUNT_BUCKETS + COUNT_BUCKETS, LEGACY_COUNT_BUCKETS)
        for r in _rows_of_buckets(db, network, [old, *new]):
            got = sums.setdefault(r.account_id, [0, 0])
            got[0] += r.followers or 0
            got[1] += r.follows or 0
        for account_id, (followers, follows) in sums.items():
            yield account_id, followers, follows


_BUCKETS_IN_FLIGHT = 16  # a job's bucket reads sent together (1,024 one after the other took a second)


def _rows_of_buckets(db: Database, network: str, buckets: Iterable[int]) -> Iterator[Any]:
    """Every row of these count buckets, 16 buckets' first pages in flight at a time (later pages as iterated)."""
    buckets = list(buckets)
    for i in range(0, len(buckets), _BUCKETS_IN_FLIGHT):
        futures = [db.execute_async(COUNTS_OF_BUCKET, (network, b)) for b in buckets[i:i + _BUCKETS_IN_FLIGHT]]
        for future in futures:
            yield from future.result()


def set_counts(db: Database, network: str, wanted: dict[int, tuple[int, int]], *,
               current: dict[int, tuple[int, int]] | None = None, dry_run: bool = False,
               every_account: bool = False) -> dict[int, tuple[int, int]]:
    """Bring the counters of the given accounts to `wanted` (followers, follows) by adding the difference to what
    they hold (`current`: read bucket by bucket when not given). Returns {account: (followers delta, follows
    delta)} of the accounts changed. Bulk loads and the reconcile job use it; run it while no request moves
    the same counts (a concurrent follow in between is what the next reconcile run repairs). `every_account` (a
    load): an account without a row gets one even at 0 followers and 0 follows (an increment by 0 makes it),
    so jobs that go through every account (`all_counts`: retention, activity rebuilds) find it."""
    if current is None:
        current = {a: (f, g) for a, f, g in all_counts(db, network)}
    changes = {}
    for account_id, (followers, follows) in wanted.items():
        have = current.get(account_id, (0, 0))
        if (followers, follows) != have:
            changes[account_id] = (followers - have[0], follows - have[1])
    unlisted = [a for a in wanted if a not in current and a not in changes] if every_account else []
    if not dry_run:
        db.execute_many(
            [(stmt, (delta, network, bucket_of(a), a))
             for a, (d_followers, d_follows) in changes.items()
             for stmt, delta in ((ADD_FOLLOWERS, d_followers), (ADD_FOLLOWS, d_follows)) if delta]
            + [(ADD_FOLLOWERS, (0, network, bucket_of(a), a)) for a in unlisted])
    return changes


# -- celebrities -----------------------------------------------------------------------------------------------
def is_celebrity(db: Database, network: str, account_id: int) -> bool:
    return is_celebrity_from(start_is_celebrity(db, network, account_id))


def start_is_celebrity(db: Database, network: str, account_id: int) -> ResponseFuture:
    return db.execute_async(IS_CELEBRITY, (network, account_id))


def is_celebrity_from(future: ResponseFuture) -> bool:
    return future.result().one() is not None


def celebrities(db: Database, network: str) -> tuple[dict[int, int], int | None]:
    """The stored celebrity set (id -> follower count when it was promoted) and the threshold last applied by
    `chronicle network apply-threshold`; a job's read (the set is small: authors above the threshold)."""
    rows = list(db.execute(CELEBRITIES, (network,)))
    threshold = rows[0].threshold if rows else None
    return {r.account_id: r.follower_count or 0 for r in rows if r.account_id is not None}, threshold


def add_celebrity(db: Database, network: str, account_id: int, follower_count: int) -> None:
    db.execute_many([(PUT_CELEBRITY, (network, account_id, follower_count)),
                     (PUT_CELEBRITY_FLAG, (network, account_id, follower_count))])


def remove_celebrity(db: Database, network: str, account_id: int) -> None:
    found = db.execute(GET_POST_TIME_WRITTEN, (network, _shard(account_id), account_id)).one()
    stamp = max(int(time.time() * 1_000_000), (found.written or 0) + 1 if found is not None else 0)
    db.execute_many([(DELETE_CELEBRITY_FLAG, (network, account_id)), (DELETE_CELEBRITY, (network, account_id)),
                     (DELETE_POST_TIME, (stamp, network, _shard(account_id), account_id))])
    _post_times(db).pop((network, account_id))


def _shard(account_id: int) -> int:
    return account_id % POST_TIME_SHARDS


def _post_times(db: Database) -> Cache:
    """(network, celebrity) -> when it last posted, as this process read or wrote it lately. A page served in
    another process may miss a celebrity's post for this long; this process's own posts are written through."""
    ttl = db.settings.network.celebrity_cache_ttl
    return db.caches.ttl(f"network.celebrity_last_posts.{ttl:g}", maxsize=_POST_TIMES_KEPT, ttl=max(ttl, 1e-6))


def record_post_times(db: Database, network: str, times: dict[int, datetime]) -> int:
    """Record when these celebrities posted (a post of one; a promotion, a load: their newest posts). A time is
    kept only if newer than the one recorded. Returns the rows written."""
    written = db.execute_many(
        (PUT_POST_TIME, (network, _shard(a), a, at, int(to_utc(at).timestamp() * 1_000_000)))
        for a, at in times.items())
    cache = _post_times(db)
    for a, at in times.items():
        known = cache.get((network, a))
        if known is None or to_utc(at) > known:
            cache.set((network, a), to_utc(at))
    return written


@dataclasses.dataclass(frozen=True)
class PostTimes:
    """The last post times of some celebrities: those this process knows, and the reads of the others."""

    known: dict[int, datetime]
    futures: list[ResponseFuture]


def start_post_times(db: Database, network: str, account_ids: Iterable[int]) -> PostTimes:
    """Send the reads of when these celebrities last posted (those this process does not know from the last
    second); `posted_since_from` answers from them."""
    cache, known, unknown = _post_times(db), {}, []
    for a in sorted(set(account_ids)):
        at = cache.get((network, a)) if db.settings.network.celebrity_cache_ttl > 0 else None
        if at is None:
            unknown.append(a)
        else:
            known[a] = at
    futures = []
    for i in range(0, len(unknown), _POST_TIMES_PER_READ):
        chunk = unknown[i:i + _POST_TIMES_PER_READ]
        futures.append(db.execute_async(GET_POST_TIMES, (network, sorted({_shard(a) for a in chunk}), chunk)))
    return PostTimes(known, futures)


def posted_since_from(db: Database, network: str, times: PostTimes | None, account_ids: Iterable[int],
                      since: datetime) -> list[int]:
    """The celebrities among `account_ids` that may have posted at or after `since`: those recorded as posting
    then or later, and those with no record (a load or a promotion not finished: their posts are read)."""
    if times is None:  # no celebrities
        return []
    last = dict(times.known)
    read = {r.account_id: to_utc(r.posted_at) for f in times.futures for r in f.result()}
    if read and db.settings.network.celebrity_cache_ttl > 0:
        cache = _post_times(db)
        for a, at in read.items():
            known = cache.get((network, a))
            if known is None or at > known:
                cache.set((network, a), at)
    last.update(read)
    return sorted(a for a in set(account_ids) if a not in last or last[a] >= since)


def record_threshold(db: Database, network: str, threshold: int, since) -> None:
    db.execute(SET_THRESHOLD, (threshold, since, network))


def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: partitions.Progress | None = None) -> dict[str, int]:
    """Delete every partition of this module's tables that belongs to `network` (admin; see api/partitions.py)."""
    return partitions.drop(db, TABLES, "network", network, dry_run=dry_run, progress=progress)


# -- erasure of an account -----------------------------------------------------------------------------------------
def erase_writes(db: Database, network: str, account_id: int) -> list[tuple[Statement, Params]]:
    """The account's row, its counts (every bucket they can be in) and its celebrity rows; the last post time is
    deleted after its write time (a post time may be ahead of this host's clock)."""
    found = db.execute(GET_POST_TIME_WRITTEN, (network, _shard(account_id), account_id)).one()
    stamp = max(int(time.time() * 1_000_000), (found.written or 0) + 1 if found is not None else 0)
    return [(DELETE_ACCOUNT, (network, account_id)),
            *((DELETE_COUNTS, (network, bucket, account_id))
              for bucket in (account_id % LEGACY_COUNT_BUCKETS, bucket_of(account_id))),
            (DELETE_CELEBRITY_FLAG, (network, account_id)), (DELETE_CELEBRITY, (network, account_id)),
            (DELETE_POST_TIME, (stamp, network, _shard(account_id), account_id))]


def account_rows(db: Database, network: str, account_id: int) -> dict[str, int]:
    """Rows keyed by the account in this module's tables (the erasure proof)."""
    buckets = [account_id % LEGACY_COUNT_BUCKETS, bucket_of(account_id)]
    return {"network_accounts": len(list(db.execute(GET_ACCOUNT, (network, account_id)))),
            "network_account_counts": len(list(db.execute(GET_COUNTS, (network, buckets, account_id)))),
            "celebrity_flags": len(list(db.execute(IS_CELEBRITY, (network, account_id)))),
            "celebrity_accounts": sum(1 for r in db.execute(CELEBRITIES, (network,)) if r.account_id == account_id),
            "celebrity_last_posts": len(list(db.execute(GET_POST_TIMES, (network, [_shard(account_id)],
                                                                            [account_id]))))}
