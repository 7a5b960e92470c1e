"""Celebrities, the hybrid fan-out's other half: an account at or above the follower threshold is not fanned out
on post but merged into its followers' home pages at read time (home.py). Promotion and demotion are
proportional to the account's followers, so they run as jobs (jobs.py queues them, job_handlers.py runs them):
the celebrity set is accounts.py's, the followers' marks relations.py's, their caches timelines.py's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from cassandra import ConsistencyLevel

from api.db import Database, read_level
from api.network import accounts, posts, relations, timelines
from api.network.relations import FOLLOWER
from api.network.settings import NetworkSettings

_NEVER_POSTED = datetime.fromtimestamp(0, UTC)


def promote(db: Database, network: str, author_id: int, follower_count: int) -> int:
    """Merge an author at read time from now on: mark it on every follower, then add it to the set (fan-out
    stops), then mark followers who arrived meanwhile. Proportional to its followers: a job."""
    marked = relations.mark_celebrity_followed(db, network, relations.ids(db, network, author_id, FOLLOWER),
                                               author_id)
    accounts.add_celebrity(db, network, author_id, follower_count)
    record_post_times(db, network, [author_id])  # after the add: a post fanned out meanwhile is in posts_by_author
    return marked + relations.mark_celebrity_followed(db, network, relations.ids(db, network, author_id, FOLLOWER),
                                                      author_id)


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
    return accounts.record_post_times(db, network, {a: got[0].posted_at if got else _NEVER_POSTED
                                                    for a, got in newest.items()})


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
    ns = ns or db.settings.network
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
    ns = ns or db.settings.network
    wanted = {a: f for a, f, _ in accounts.all_counts(db, network) if ns.is_celebrity(f)}
    current, _threshold = accounts.celebrities(db, network)
    to_promote = sorted(set(wanted) - set(current))
    to_demote = sorted(set(current) - set(wanted))
    if not dry_run:
        for a in to_promote:
            promote(db, network, a, wanted[a])
        for a in to_demote:
            demote(db, ns, network, a)
        kept = sorted(set(wanted) - set(to_promote))
        for a in kept:  # (again: a keyspace migrated to cql/0150 has the set but not yet the flags)
            accounts.add_celebrity(db, network, a, current[a])
        record_post_times(db, network, kept)  # promote recorded the others
        accounts.record_threshold(db, network, ns.hybrid_threshold if ns.hybrid else 0, datetime.now(UTC))
    return {"dry_run": dry_run, "celebrities": len(wanted), "promoted": to_promote, "demoted": to_demote}
