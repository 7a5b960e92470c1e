"""An account's activity days in a follower network, read from the archive (cross-table: posts, the activity
log, account counts). Called by the activity builder (api/activity/service.py).

Events: the account's posts (posts_by_author, at their time; a deleted post is gone from the archive and from
its day at the next rebuild), and its likes and follows in both directions (api/network/activity_log.py). Days
are cut in the network's time zone (CHRONICLE_NETWORK_TIME_ZONE).

Bounded work for hot accounts: the day's counts (network_activity_counts) are read first; they say which
15-minute slots hold events and how many. A UTC day of at most `events.DAY_EVENTS` events is read whole, slot by
slot; a hotter one, the first `events.SLOT_SHARE` rows of each slot (what `events.capped` keeps of a hot day), and
the rest comes back as one counted event per (slot, kind, post): `{"at": <slot start>, "kind": k, "count": n}`
(with `post` for received likes). A rebuild therefore reads at most DAY_EVENTS + 96 x SLOT_SHARE log rows and the
day's counts per UTC day, whether the day holds 1,000 events or 1,000,000.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import MutableMapping
from datetime import UTC, datetime
from typing import Any

from api.activity import dirty
from api.activity import events as ev
from api.db import Database
from api.network import accounts, activity_log, posts
from api.network.common import to_utc
from api.network.settings import network_settings

US = 1_000_000


def archive_of(network: str) -> str:
    return dirty.archive_name("network", network)


def time_zone() -> str:
    return network_settings().time_zone


def all_accounts(db: Database, network: str) -> list[str]:
    """Every account with a follower count (all accounts of a loaded or generated network)."""
    return [str(account_id) for account_id, _followers, _follows in accounts.all_counts(db, network)]


def _us(when: datetime) -> int:
    return int(to_utc(when).timestamp() * US)


def collect(db: Database, network: str, windows: dict[str, tuple[int, int]],
            stats: MutableMapping[str, int] | None = None) -> dict[str, list[dict[str, Any]]]:
    """The events of each account in `windows` ({account id: (start µs, end µs)}), unordered; of a hot UTC day,
    the first SLOT_SHARE of each slot and counted events for the rest. `stats` (optional) adds up the rows read,
    by table."""
    stats = stats if stats is not None else {}
    starts = {}
    for account, (start, end) in windows.items():
        account_id = int(account)
        start_at, end_at = datetime.fromtimestamp(start / US, UTC), datetime.fromtimestamp(end / US, UTC)
        starts[account] = (posts.start_posts_between(db, network, account_id, start_at, end_at),
                           activity_log.start_counts(db, network, account_id, start, end))
    # The counts say which slots hold events: their rows are read next, all accounts' reads in flight together.
    second = {}
    for account, (_post_reads, count_reads) in starts.items():
        account_id, (start, end) = int(account), windows[account]
        counted: Counter[tuple[int, str, int]] = Counter()
        legacy, slot_reads = [], []
        for day, future in count_reads:
            rows = list(future.result())
            stats["network_activity_counts"] = stats.get("network_activity_counts", 0) + len(rows)
            if not rows:  # nothing counted that day: archived before migration 0140, or no event
                legacy.append(activity_log.start_legacy_day(db, network, account_id, day, start, end))
                continue
            per_slot: Counter[int] = Counter()
            for row in rows:
                counted[(row.slot, row.kind, row.post_id)] += row.n
                per_slot[row.slot] += max(row.n, 0)
            # A day that stays whole (ev.capped) is read whole (a little more than counted: a count lags its rows
            # only after a failed write); a hot day, SLOT_SHARE rows of each slot: what ev.capped keeps.
            whole = sum(per_slot.values()) <= ev.DAY_EVENTS
            for slot, n in sorted(per_slot.items()):
                if n > 0:
                    slot_reads += activity_log.start_slots(db, network, account_id, [slot], start, end,
                                                           limit=n + ev.SLOT_SHARE if whole else ev.SLOT_SHARE)
        second[account] = (counted, slot_reads, legacy)
    found: dict[str, list[dict[str, Any]]] = {}
    for account, (post_reads, _count_reads) in starts.items():
        counted, slot_reads, legacy = second[account]
        day: list[dict[str, Any]] = []
        for future in post_reads:
            day.extend(ev.event(_us(row.posted_at), ev.POST, post=row.post_id) for row in future.result())
        for table, futures in (("network_activity_slots", slot_reads), ("network_activity_log", legacy)):
            for future in futures:
                for row in future.result():
                    stats[table] = stats.get(table, 0) + 1
                    day.append(ev.event(row.at, row.kind, user=str(row.other_id), post=row.post_id or None))
                    key = (activity_log.slot_of(row.at), row.kind, activity_log.count_key(row.kind, row.post_id))
                    if key in counted:
                        counted[key] -= 1
        start, end = windows[account]
        for (slot, kind, post_id), n in sorted(counted.items()):
            at = slot * activity_log.SLOT_US
            if n > 0 and start <= at < end:
                day.append(ev.event(at, kind, post=post_id or None, count=n))
        found[account] = day
    return found
