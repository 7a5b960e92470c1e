"""Which accounts of a network have content of a period (cql/0330): a post lists its author under its UTC month,
a like or follow both accounts under their UTC day. A retention run reads the periods up to its cutoff and visits
those accounts only (api/retention/network.py), where it once read every account's listings.

Both tables are sharded by account id: `network_periods ((network, shard), kind, period)` says which periods a
shard's accounts have content in, `network_period_accounts ((network, kind, period, shard), account_id)` which
accounts. Writes are idempotent upserts beside the content's own; a run drops the periods it expired. Content
written before cql/0330 is listed by the first run, which reads every account once and then writes a `walk` row
(kind 'walk', period = the day it started) in shard 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from api import partitions
from api.db import Database, Params, Statement

TABLES = frozenset({"network_periods", "network_period_accounts"})

SHARDS = 32
MONTH, DAY, WALK = "month", "day", "walk"
_READS_IN_FLIGHT = 64

PUT_PERIOD = Statement("INSERT INTO network_periods (network, shard, kind, period) VALUES (?, ?, ?, ?)")
PUT_ACCOUNT = Statement(
    "INSERT INTO network_period_accounts (network, kind, period, shard, account_id) VALUES (?, ?, ?, ?, ?)")
PERIODS_THROUGH = Statement(
    "SELECT period FROM network_periods WHERE network = ? AND shard = ? AND kind = ? AND period <= ?")
ACCOUNTS_OF = Statement(
    "SELECT account_id FROM network_period_accounts WHERE network = ? AND kind = ? AND period = ? AND shard = ?")
ACCOUNT_LISTED = Statement(
    "SELECT account_id FROM network_period_accounts WHERE network = ? AND kind = ? AND period = ? AND shard = ? "
    "AND account_id = ?", name="SELECT network_period_accounts (one)")
WALKED = Statement("SELECT period FROM network_periods WHERE network = ? AND shard = 0 AND kind = 'walk' LIMIT 1")
# A run's deletes are timed when it started reading (USING TIMESTAMP): content listed under a period while it ran
# outlives them, and the next run finds it.
DELETE_PERIOD = Statement(
    "DELETE FROM network_periods USING TIMESTAMP ? WHERE network = ? AND shard = ? AND kind = ? AND period = ?")
DROP_ACCOUNTS = Statement(
    "DELETE FROM network_period_accounts USING TIMESTAMP ? WHERE network = ? AND kind = ? AND period = ? "
    "AND shard = ?", name="DELETE network_period_accounts (partition)")
FORGET_ACCOUNT = Statement(
    "DELETE FROM network_period_accounts USING TIMESTAMP ? WHERE network = ? AND kind = ? AND period = ? "
    "AND shard = ? AND account_id = ?", name="DELETE network_period_accounts (one, as of a run)")
DELETE_ACCOUNT = Statement(
    "DELETE FROM network_period_accounts WHERE network = ? AND kind = ? AND period = ? AND shard = ? "
    "AND account_id = ?")

Write = tuple[Statement, Params]


def month_period(at: datetime) -> int:
    """A month as a period number: year * 12 + month - 1."""
    return at.year * 12 + at.month - 1


def month_period_of(month: str) -> int:
    """The period number of a "YYYY-MM" month bucket (posts_by_author's)."""
    year, month = month.split("-")
    return int(year) * 12 + int(month) - 1


def shard_of(account_id: int) -> int:
    return account_id % SHARDS


def listing_writes(network: str, kind: str, account_id: int, periods: Iterable[int]) -> list[Write]:
    """List an account under each of these periods of a kind."""
    shard = shard_of(account_id)
    return [w for period in periods for w in ((PUT_PERIOD, (network, shard, kind, period)),
                                              (PUT_ACCOUNT, (network, kind, period, shard, account_id)))]


def post_writes(network: str, author_id: int, posted_at: datetime) -> list[Write]:
    """A post's author under the post's UTC month."""
    return listing_writes(network, MONTH, author_id, [month_period(posted_at)])


def event_writes(network: str, account_ids: Iterable[int], at_us: int) -> list[Write]:
    """The accounts of a like or follow under its UTC day."""
    day = at_us // 86_400_000_000
    return [w for account_id in account_ids for w in listing_writes(network, DAY, account_id, [day])]


def periods_through(db: Database, network: str, kind: str, last: int) -> list[int]:
    """The periods of a kind up to `last` (inclusive) that list any account: one read per shard."""
    futures = [db.execute_async(PERIODS_THROUGH, (network, shard, kind, last)) for shard in range(SHARDS)]
    return sorted({r.period for f in futures for r in f.result()})


def accounts_of(db: Database, network: str, kind: str, periods: Iterable[int]) -> dict[int, set[int]]:
    """period -> the accounts listed under it (every shard of each period, at most 64 reads in flight)."""
    keys = [(period, shard) for period in periods for shard in range(SHARDS)]
    found: dict[int, set[int]] = {}
    results = db.execute_windows(ACCOUNTS_OF, [(network, kind, p, s) for p, s in keys], _READS_IN_FLIGHT)
    for (period, _shard), rows in zip(keys, results, strict=True):
        found.setdefault(period, set()).update(r.account_id for r in rows)
    return found


def walked(db: Database, network: str) -> bool:
    """Whether a retention run has listed the network's content written before cql/0330."""
    return db.execute(WALKED, (network,)).one() is not None


def walked_write(network: str, day: int) -> Write:
    """The mark a walking run leaves when it has listed every account (`day`: when it started)."""
    return PUT_PERIOD, (network, 0, WALK, day)


def drop_writes(network: str, kind: str, periods: Iterable[int], as_of_us: int) -> list[Write]:
    """Periods a run that started at `as_of_us` expired for every account: their partitions whole, then their
    listing rows, as they were then."""
    return [w for period in periods for shard in range(SHARDS)
            for w in ((DROP_ACCOUNTS, (as_of_us, network, kind, period, shard)),
                      (DELETE_PERIOD, (as_of_us, network, shard, kind, period)))]


def forget_writes(network: str, kind: str, listed: dict[int, set[int]], keep: set[int], as_of_us: int
                  ) -> list[Write]:
    """Periods a run that started at `as_of_us` expired for every account but those in `keep` (under a hold): the
    others' rows only (the periods stay listed for the held ones)."""
    return [(FORGET_ACCOUNT, (as_of_us, network, kind, period, shard_of(a), a))
            for period, account_ids in listed.items() for a in sorted(account_ids - keep)]


def erase_account_writes(network: str, account_id: int, months: Iterable[int], days: Iterable[int]) -> list[Write]:
    """An erased account's rows under its months and days (the periods' rows name no one)."""
    shard = shard_of(account_id)
    return [(DELETE_ACCOUNT, (network, kind, period, shard, account_id))
            for kind, periods in ((MONTH, months), (DAY, days)) for period in periods]


def rows_of(db: Database, network: str, account_id: int, months: Iterable[int], days: Iterable[int]) -> int:
    """The account's rows left under these months and days (the erasure proof)."""
    shard = shard_of(account_id)
    futures = [db.execute_async(ACCOUNT_LISTED, (network, kind, period, shard, account_id))
               for kind, periods in ((MONTH, months), (DAY, days)) for period in periods]
    return sum(1 for f in futures if f.result().one() is not None)


def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: partitions.Progress | None = None) -> dict[str, int]:
    """Delete every partition of this module's tables that belongs to `network` (admin; see api/partitions.py)."""
    return partitions.drop(db, TABLES, "network", network, dry_run=dry_run, progress=progress)
