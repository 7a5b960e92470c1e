"""An account's activity days in a follower network, read from the archive (cross-table: posts, the activity
log, account counts). Called by the activity builder (api/activity/service.py).

Events: the account's posts (posts_by_author, at their time; a deleted post is gone from the archive and from
its day at the next rebuild), and its likes and follows in both directions (network_activity_log). Days are cut
in the network's time zone (CHRONICLE_NETWORK_TIME_ZONE).
"""

from __future__ import annotations

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


def collect(db: Database, network: str, windows: dict[str, tuple[int, int]]) -> dict[str, list[dict[str, Any]]]:
    """The events of each account in `windows` ({account id: (start µs, end µs)}), unordered."""
    reads = {}
    for account, (start, end) in windows.items():
        account_id = int(account)
        start_at, end_at = datetime.fromtimestamp(start / US, UTC), datetime.fromtimestamp(end / US, UTC)
        reads[account] = (posts.start_posts_between(db, network, account_id, start_at, end_at),
                          activity_log.start_events(db, network, account_id, start, end))
    found: dict[str, list[dict[str, Any]]] = {}
    for account, (post_reads, log_reads) in reads.items():
        day: list[dict[str, Any]] = []
        for future in post_reads:
            day.extend(ev.event(_us(row.posted_at), ev.POST, post=row.post_id) for row in future.result())
        for future in log_reads:
            day.extend(ev.event(row.at, row.kind, user=str(row.other_id), post=row.post_id or None)
                       for row in future.result())
        found[account] = day
    return found
