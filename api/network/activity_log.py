"""Likes and follows as timed events (network_activity_log): both sides of each, one partition per account and
UTC day. The relation and like tables keep the current state; this keeps what happened when, for activity days.
"""

from __future__ import annotations

from cassandra.cluster import ResponseFuture

from api.db import Database, Params, Statement

TABLES = frozenset({"network_activity_log"})

PUT_EVENT = Statement(
    "INSERT INTO network_activity_log (network, account_id, day, at, kind, other_id, post_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)")
SELECT_DAY = Statement(
    "SELECT at, kind, other_id, post_id FROM network_activity_log WHERE network = ? AND account_id = ? AND day = ? "
    "AND at >= ? AND at < ?")

US_PER_DAY = 86_400 * 1_000_000
# Each action and its mirror on the other account: (kind of the actor, kind of the other).
MIRRORS = {"like": ("like_given", "like_received"), "unlike": ("unlike_given", "unlike_received"),
           "follow": ("follow", "followed_by"), "unfollow": ("unfollow", "unfollowed_by")}


def event_writes(network: str, action: str, actor: int, other: int, at_us: int, post_id: int = 0
                 ) -> list[tuple[Statement, Params]]:
    """The rows of one like/unlike/follow/unfollow at `at_us`: the actor's and the other account's."""
    mine, theirs = MIRRORS[action]
    day = at_us // US_PER_DAY
    return [(PUT_EVENT, (network, actor, day, at_us, mine, other, post_id)),
            (PUT_EVENT, (network, other, day, at_us, theirs, actor, post_id))]


def start_events(db: Database, network: str, account_id: int, start_us: int, end_us: int) -> list[ResponseFuture]:
    """Reads of the account's events in [start_us, end_us): one per UTC day touched."""
    first, last = start_us // US_PER_DAY, (end_us - 1) // US_PER_DAY
    return [db.execute_async(SELECT_DAY, (network, account_id, day, start_us, end_us))
            for day in range(first, last + 1)]

