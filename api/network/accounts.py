"""Accounts and their counts: network_accounts (one row per account: its name), network_account_counts
(follower and follows counters, 64 buckets per network), celebrity_accounts (the authors merged into home
pages at read time instead of fanned out) and celebrity_post_times (when each celebrity last posted).

Counts are counters moved by +1/-1 only by a follow or unfollow whose lightweight transaction changed the
relation (see relations.py), so a repeated or retried request never counts twice; bulk loads and the reconcile
job set a counter to a target by adding the difference to what it holds. No request reads a whole follower
partition to count it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime

from cassandra import ConsistencyLevel
from cassandra.cluster import ResponseFuture

from api import partitions
from api.db import Database, Params, Statement
from api.network.common import to_utc
from api.network.values import Account

TABLES = frozenset({"network_accounts", "network_account_counts", "celebrity_accounts", "celebrity_post_times"})
COUNT_BUCKETS = 64  # 6.4M accounts per network at 100k rows per partition

GET_ACCOUNT = Statement("SELECT account_id, username FROM network_accounts WHERE network = ? AND account_id = ?")
PUT_ACCOUNT = Statement("INSERT INTO network_accounts (network, account_id, username) VALUES (?, ?, ?)")
GET_COUNTS = Statement(
    "SELECT followers, follows FROM network_account_counts WHERE network = ? AND bucket = ? AND account_id = ?")
# After its own increment a request reads at LOCAL_QUORUM: with writes at LOCAL_QUORUM it sees them on RF 3.
GET_COUNTS_FRESH = Statement(
    "SELECT followers, follows FROM network_account_counts WHERE network = ? AND bucket = ? AND account_id = ?",
    name="SELECT network_account_counts (fresh)", consistency=ConsistencyLevel.LOCAL_QUORUM)
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
IS_CELEBRITY = Statement(
    "SELECT account_id FROM celebrity_accounts WHERE network = ? AND account_id = ?",
    consistency=ConsistencyLevel.LOCAL_QUORUM)
PUT_CELEBRITY = Statement("INSERT INTO celebrity_accounts (network, account_id, follower_count) VALUES (?, ?, ?)")
DELETE_CELEBRITY = Statement("DELETE FROM celebrity_accounts WHERE network = ? AND account_id = ?")
# Write time = post time: of two posts' writes, the newer post's time stays whatever order they land in.
PUT_POST_TIME = Statement(
    "INSERT INTO celebrity_post_times (network, account_id, posted_at) VALUES (?, ?, ?) USING TIMESTAMP ?")
GET_POST_TIMES = Statement(
    "SELECT account_id, posted_at FROM celebrity_post_times WHERE network = ? AND account_id IN ?")
DELETE_POST_TIME = Statement("DELETE FROM celebrity_post_times WHERE network = ? AND account_id = ?")
_POST_TIMES_PER_READ = 100  # celebrities per read (rows of one partition)
SET_THRESHOLD = Statement("UPDATE celebrity_accounts SET threshold = ?, threshold_since = ? WHERE network = ?")


def bucket_of(account_id: int) -> int:
    return account_id % COUNT_BUCKETS


# -- one account -----------------------------------------------------------------------------------------------
def start_get_account(db: Database, network: str, account_id: int, *, counts: bool = True
                      ) -> tuple[ResponseFuture, ResponseFuture | None]:
    """Send the reads of one account (name, and counts unless the caller has no use for them: an action that
    reads them fresh after its own change); `account_from` turns them into an Account (or None)."""
    return (db.execute_async(GET_ACCOUNT, (network, account_id)),
            db.execute_async(GET_COUNTS, (network, bucket_of(account_id), account_id)) if counts else None)


def account_from(futures: tuple[ResponseFuture, ResponseFuture | None]) -> Account | None:
    row = futures[0].result().one()
    counts = futures[1].result().one() if futures[1] is not None else None
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
    return {a: db.execute_async(GET_COUNTS_FRESH, (network, bucket_of(a), a)) for a in dict.fromkeys(account_ids)}


def fresh_counts_from(futures: dict[int, ResponseFuture]) -> dict[int, tuple[int, int]]:
    out = {}
    for account_id, future in futures.items():
        row = future.result().one()
        out[account_id] = (row.followers or 0, row.follows or 0) if row is not None else (0, 0)
    return out


def all_counts(db: Database, network: str) -> Iterator[tuple[int, int, int]]:
    """(account_id, followers, follows) of every account with a count: a job's read, bucket by bucket."""
    for bucket in range(COUNT_BUCKETS):
        for r in db.execute(COUNTS_OF_BUCKET, (network, bucket), fetch_size=5000, timeout=60):
            yield r.account_id, r.followers or 0, r.follows or 0


def set_counts(db: Database, network: str, wanted: dict[int, tuple[int, int]], *,
               current: dict[int, tuple[int, int]] | None = None, dry_run: bool = False) -> dict[int, tuple[int, int]]:
    """Bring the counters of the given accounts to `wanted` (followers, follows) by adding the difference to what
    they hold (`current`: read bucket by bucket when not given). Returns {account: (followers delta, follows
    delta)} of the accounts changed. Bulk loads and the reconcile job use it; run it while no request moves
    the same counts (a concurrent follow in between is what the next reconcile run repairs)."""
    if current is None:
        current = {a: (f, g) for a, f, g in all_counts(db, network)}
    changes = {}
    for account_id, (followers, follows) in wanted.items():
        have = current.get(account_id, (0, 0))
        if (followers, follows) != have:
            changes[account_id] = (followers - have[0], follows - have[1])
    if not dry_run:
        db.execute_many(
            (stmt, (delta, network, bucket_of(a), a))
            for a, (d_followers, d_follows) in changes.items()
            for stmt, delta in ((ADD_FOLLOWERS, d_followers), (ADD_FOLLOWS, d_follows)) if delta)
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
    db.execute(PUT_CELEBRITY, (network, account_id, follower_count))


def remove_celebrity(db: Database, network: str, account_id: int) -> None:
    db.execute_many([(DELETE_CELEBRITY, (network, account_id)), (DELETE_POST_TIME, (network, account_id))])


def post_time_write(network: str, account_id: int, posted_at: datetime) -> tuple[Statement, Params]:
    """Record that celebrity `account_id` posted at `posted_at` (kept only if newer than what is recorded)."""
    return PUT_POST_TIME, (network, account_id, posted_at, int(posted_at.timestamp() * 1_000_000))


def start_post_times(db: Database, network: str, account_ids: Iterable[int]) -> list[ResponseFuture]:
    """Send the reads of when these celebrities last posted; `posted_since_from` answers from them."""
    ids = sorted(set(account_ids))
    return [db.execute_async(GET_POST_TIMES, (network, ids[i:i + _POST_TIMES_PER_READ]))
            for i in range(0, len(ids), _POST_TIMES_PER_READ)]


def posted_since_from(futures: list[ResponseFuture], account_ids: Iterable[int], since: datetime) -> list[int]:
    """The celebrities among `account_ids` that may have posted at or after `since`: those recorded as posting
    then or later, and those with no record (a load or a promotion not finished: their posts are read)."""
    last = {r.account_id: r.posted_at for f in futures for r in f.result()}
    return sorted(a for a in set(account_ids) if a not in last or to_utc(last[a]) >= since)


def record_threshold(db: Database, network: str, threshold: int, since) -> None:
    db.execute(SET_THRESHOLD, (threshold, since, network))


def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: partitions.Progress | None = None) -> dict[str, int]:
    """Delete every partition of this module's tables that belongs to `network` (admin; see api/partitions.py)."""
    return partitions.drop(db, TABLES, "network", network, dry_run=dry_run, progress=progress)
