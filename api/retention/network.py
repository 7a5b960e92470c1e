"""A follower network's retention run (docs/retention.md, "Follower networks"): posts older than the network's
policy leave every table that holds a copy, account by account, unless a hold keeps them.

For each account with content of the expired period (api/network/periods.py: the authors of the months up to the
cutoff's, the accounts with likes or follows up to the cutoff's day; the first run of a network, whose content may
predate those listings, reads every account with a count instead, bucket by bucket as the Q2 job does, and lists
what it finds):

1. its expired posts (the month buckets wholly before the cutoff, and the rows of the month it falls in) are read
   once: they say where the copies are;
2. each post's copies go first (search postings, the rows of its terms' current and previous top lists, the likes
   on both sides and its counter, its row in its original author's share index), then its row by id, so a run
   stopped anywhere finds the rest again;
3. then the account's whole expired months (one partition tombstone each, and their listing rows) and the expired
   rows of the month the cutoff falls in;
4. its likes and follows of the expired UTC days (slot partitions, counts, the log kept before cql/0140, listing
   rows; each event's other side is in the other account's partitions of the same day, which its own turn drops)
   and its stored activity days before the cutoff (one range per local year).

Last, the listings of the periods it expired go (whole partitions; with an account hold, every other account's rows).

Home caches are not read: their rows live 7 days (the cache TTL) and readers skip posts that are gone. Q2 / Q3
snapshots taken before the cutoff go too (whole months, then a range). Holds: the network (nothing goes) or an
account (its posts and activity stay; the run's report counts them).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import structlog

from api.activity import store as activity_store
from api.db import Database, Params, Statement
from api.network import accounts, activity_log, likes, periods, posts, rankings, search
from api.network.common import month_of
from api.retention import policies

log = structlog.get_logger("chronicle.retention")

Write = tuple[Statement, Params]
PARALLEL = 8  # accounts expired side by side
EPOCH = date(1970, 1, 1)
YEARS_BACK = 40  # stored activity years looked through


def archive_of(network: str) -> str:
    return f"network:{network}"


@dataclasses.dataclass
class Plan:
    """What one run does: the first UTC day kept (None: the network keeps everything) and the holds in force."""

    network: str
    today: int
    cutoff: int | None
    held: policies.Held

    def to_json(self) -> dict[str, Any]:
        return {"today": str(EPOCH + timedelta(self.today)),
                "cutoff": str(EPOCH + timedelta(self.cutoff)) if self.cutoff is not None else None,
                "held_accounts": sorted(self.held.users), "network_held": self.held.archive}


def plan(db: Database, network: str, *, today: date | None = None) -> Plan:
    archive = archive_of(network)
    keep = policies.keep_days_of(policies.policies(db, archive))
    today_day = ((today or datetime.fromtimestamp(db.clock.time(), UTC).date()) - EPOCH).days
    return Plan(network, today_day, today_day - keep if keep else None, policies.held(db, archive))


class _Run:
    def __init__(self, db: Database, network: str, found: Plan, *, dry_run: bool,
                 progress: Callable[[int], None], parallel: int, walk: bool) -> None:
        self.db, self.network, self.plan, self.dry_run = db, network, found, dry_run
        self.progress, self.parallel = progress, parallel
        self.walk = walk  # every account read, and what is kept listed (the network's first run)
        # Write time (the driver's clock, not the run's), before any read: what is listed after it outlives the
        # listings' deletes (periods.DROP_ACCOUNTS).
        self.started_us = time.time_ns() // 1000
        self.archive = archive_of(network)
        assert found.cutoff is not None
        self.cutoff_day = found.cutoff
        self.before = datetime.combine(EPOCH + timedelta(found.cutoff), datetime.min.time(), UTC)
        self.counts: Counter[str] = Counter()
        self.held: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _add(self, counts: Counter[str], held: Counter[str] | None = None) -> None:
        with self._lock:
            self.counts.update(counts)
            self.held.update(held or {})

    def account(self, account_id: int) -> None:
        held = str(account_id) in self.plan.held.users
        months = posts.author_months(self.db, self.network, account_id)
        if self.walk and not self.dry_run:
            listed, stored = self._days(account_id, self._listing_years())
            self._list(account_id, held, months, {*listed, *stored})
        elif not held:
            listed, stored = self._days(account_id, self._years())
        if held:
            _whole, expired = posts.expiring(self.db, self.network, account_id, self.before, months)
            self._add(Counter(), Counter({"accounts (account hold)": 1, "posts (account hold)": len(expired)}))
            return
        counts: Counter[str] = Counter({"accounts_read": 1})
        whole, expired = posts.expiring(self.db, self.network, account_id, self.before, months)
        for post in expired:
            buckets = posts.term_buckets(self.db, self.network, post.post_id)
            post_likers = likes.likers(self.db, self.network, post.post_id)
            counts["posts"] += 1
            counts["likes"] += len(post_likers)
            counts["postings"] += len(buckets)
            if not self.dry_run:
                self.db.execute_many(search.erase_post_writes(self.db, self.network, post, buckets)
                                     + likes.erase_post_writes(self.network, post.post_id, post_likers)
                                     + posts.unshare_writes(self.network, [post]))
                self.db.execute(*posts.erase_by_id_write(self.network, post.post_id))
        days = self._expired_days(listed, stored)
        counts["activity_utc_days"] += len(days)
        counts["post_months_dropped"] += len(whole)
        if not self.dry_run:
            whole_set = set(whole)
            self.db.execute_many(
                posts.expire_writes(self.network, account_id, whole,
                                    [p for p in expired if month_of(p.posted_at) not in whole_set])
                + activity_log.expire_days_writes(self.network, account_id, days)
                + activity_store.expire_before_writes(self.archive, str(account_id), self._years(),
                                                      EPOCH + timedelta(self.cutoff_day)))
        self._add(counts)

    def _list(self, account_id: int, held: bool, months: list[str], days: set[int]) -> None:
        """A walking run lists an account's periods that outlive it (all of them under a hold): its post months
        and its event days (listed since cql/0280, and its stored activity days)."""
        cut = periods.month_period(self.before)
        self.db.execute_many(
            periods.listing_writes(self.network, periods.MONTH, account_id,
                                   [m for m in map(periods.month_period_of, months) if held or m > cut])
            + periods.listing_writes(self.network, periods.DAY, account_id,
                                     sorted(d for d in days if held or d >= self.cutoff_day)))

    def _years(self) -> range:
        last = (EPOCH + timedelta(self.cutoff_day)).year
        return range(last - YEARS_BACK + 1, last + 1)

    def _listing_years(self) -> range:
        """A walk's stored activity years: up to a year past today (what outlives the run is listed too)."""
        return range(self._years().start, (EPOCH + timedelta(self.plan.today)).year + 2)

    def _days(self, account_id: int, years: range) -> tuple[list[int], list[int]]:
        """The account's UTC days with events (listed since cql/0280) and its stored local days of these years."""
        return (activity_log.days_of(self.db, self.network, account_id),
                activity_store.account_days(self.db, self.archive, str(account_id), years))

    def _expired_days(self, listed: list[int], stored: list[int]) -> list[int]:
        """Expired UTC days with the account's events: listed, and around its stored local days."""
        return sorted({d for d in listed if d < self.cutoff_day}
                      | {d + k for d in stored for k in (-1, 0, 1) if d + k < self.cutoff_day})

    def _accounts(self) -> Iterator[int]:
        """Every account with a count (a walk), or the accounts listed under the months up to the cutoff's and the
        days up to the cutoff (a stored activity day may lie a day before its event's UTC day)."""
        if self.walk:
            for account_id, _followers, _follows in accounts.all_counts(self.db, self.network):
                yield account_id
            return
        months = periods.periods_through(self.db, self.network, periods.MONTH, periods.month_period(self.before))
        days = periods.periods_through(self.db, self.network, periods.DAY, self.cutoff_day)
        listed = [periods.accounts_of(self.db, self.network, periods.MONTH, months),
                  periods.accounts_of(self.db, self.network, periods.DAY, days)]
        yield from sorted({a for found in listed for ids in found.values() for a in ids})

    def _unlist(self) -> None:
        """The periods wholly expired leave the listings (an account hold keeps that account's rows listed)."""
        cut_month = periods.month_period(self.before)
        expired = {periods.MONTH: [m for m in periods.periods_through(self.db, self.network, periods.MONTH, cut_month)
                                   if m < cut_month],
                   periods.DAY: [d for d in periods.periods_through(self.db, self.network, periods.DAY,
                                                                    self.cutoff_day) if d < self.cutoff_day]}
        held = {int(a) for a in self.plan.held.users if a.isdigit()}
        writes: list[Write] = []
        for kind, gone in expired.items():
            if not held:
                writes += periods.drop_writes(self.network, kind, gone, self.started_us)
            else:
                writes += periods.forget_writes(self.network, kind, periods.accounts_of(self.db, self.network, kind,
                                                                                        gone), held, self.started_us)
        self.counts["periods_unlisted"] += sum(len(gone) for gone in expired.values())
        self.db.execute_many(writes)

    def run(self) -> None:
        started_day = (datetime.fromtimestamp(self.db.clock.time(), UTC).date() - EPOCH).days
        pool = self.db.executor(f"network-retention-{self.parallel}", self.parallel)
        pending = []
        for account_id in self._accounts():
            pending.append(pool.submit(self.account, account_id))
            if len(pending) >= 4 * self.parallel:  # bounded: accounts come a count bucket at a time
                for future in pending:
                    future.result()
                    self.progress(1)
                pending = []
        for future in pending:
            future.result()
            self.progress(1)
        dropped, writes = rankings.expire_writes(self.db, self.network, self.before)
        self.counts["snapshots"] += dropped
        if not self.dry_run:
            self.db.execute_many(writes)
            self._unlist()
            if self.walk:  # last: a walk stopped before here is walked again
                self.db.execute(*periods.walked_write(self.network, started_day))


def run(db: Database, network: str, *, dry_run: bool = False, today: date | None = None,
        progress: Callable[[int], None] | None = None, parallel: int = PARALLEL, walk: bool = False
        ) -> tuple[policies.Run, Plan]:
    """One retention run of a network (its report is kept in retention_runs); `dry_run` counts, deletes nothing.
    The network's first run reads every account (content written before cql/0330 is listed nowhere else) and lists
    what outlives it; the next ones read the listed accounts. `walk` reads every account again (e.g. after
    processes older than cql/0330 wrote to the network)."""
    archive = archive_of(network)
    found = plan(db, network, today=today)
    report = policies.start_run(db, archive, dry_run=dry_run)
    if found.cutoff is None:
        return policies.finish_run(db, archive, report, counts={}, held_counts={}), found
    if found.held.archive:
        return policies.finish_run(db, archive, report, counts={}, held_counts={"network (archive hold)": 1}), found
    job = _Run(db, network, found, dry_run=dry_run, progress=progress or (lambda _n: None), parallel=parallel,
               walk=walk or not periods.walked(db, network))
    try:
        job.run()
    except Exception:
        policies.finish_run(db, archive, report, counts=job.counts, held_counts=job.held, state="failed")
        raise
    done = policies.finish_run(db, archive, report, counts=job.counts, held_counts=job.held)
    log.info("retention_run", archive=archive, dry_run=dry_run, counts=dict(job.counts), held=dict(job.held))
    return done, found
