"""Likes and follows as timed events: both sides of each, for activity days. The relation and like tables keep
the current state; this keeps what happened when.

Hot accounts (a post liked 1M times in a day) bound what one rebuild reads: the events are kept per account and
15-minute slot (network_activity_slots), and counted per slot, kind and (for received likes) post
(network_activity_counts). A rebuild reads the day's counts and, of a hot day, a slot's first few rows; what lies
beyond those rows becomes counts (api/network/activity.py), so its work does not grow with the day.

network_activity_log (one partition per account and UTC day, before migration 0140) is only read, for days the
counts table knows nothing of (archived before it).
"""

from __future__ import annotations

from collections.abc import Iterable

from cassandra.cluster import ResponseFuture

from api import partitions
from api.db import Database, Params, Statement
from api.network import periods

TABLES = frozenset({"network_activity_log", "network_activity_slots", "network_activity_counts",
                    "network_activity_days"})

PUT_EVENT = Statement(
    "INSERT INTO network_activity_slots (network, account_id, slot, at, kind, other_id, post_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)")
# The increment is bound (not a literal 1): Database tells counter updates by a bound counter column.
COUNT_EVENT = Statement(
    "UPDATE network_activity_counts SET n = n + ? WHERE network = ? AND account_id = ? AND day = ? AND slot = ? "
    "AND kind = ? AND post_id = ?", idempotent=False)
SELECT_SLOT = Statement(
    "SELECT at, kind, other_id, post_id FROM network_activity_slots WHERE network = ? AND account_id = ? "
    "AND slot = ? AND at >= ? AND at < ? LIMIT ?")
SELECT_COUNTS = Statement(
    "SELECT slot, kind, post_id, n FROM network_activity_counts WHERE network = ? AND account_id = ? AND day = ? "
    "AND slot >= ? AND slot <= ?")
SELECT_LEGACY_DAY = Statement(
    "SELECT at, kind, other_id, post_id FROM network_activity_log WHERE network = ? AND account_id = ? AND day = ? "
    "AND at >= ? AND at < ?", name="SELECT network_activity_log (before 0140)")
PUT_DAY = Statement("INSERT INTO network_activity_days (network, account_id, day) VALUES (?, ?, ?)")
# Erasure of an account (api/erasure/network.py): its days, every row of them, its partitions, and the mirror
# rows other accounts keep of its events (rewritten to name the former-account id, 0).
SELECT_DAYS = Statement("SELECT day FROM network_activity_days WHERE network = ? AND account_id = ?")
SELECT_WHOLE_SLOT = Statement(
    "SELECT at, kind, other_id, post_id FROM network_activity_slots WHERE network = ? AND account_id = ? "
    "AND slot = ?", name="SELECT network_activity_slots (whole slot)")
SELECT_WHOLE_LEGACY_DAY = Statement(
    "SELECT at, kind, other_id, post_id FROM network_activity_log WHERE network = ? AND account_id = ? AND day = ?",
    name="SELECT network_activity_log (whole day)")
DELETE_SLOT = Statement("DELETE FROM network_activity_slots WHERE network = ? AND account_id = ? AND slot = ?")
DELETE_SLOT_ROW = Statement(
    "DELETE FROM network_activity_slots WHERE network = ? AND account_id = ? AND slot = ? AND at = ? AND kind = ? "
    "AND other_id = ? AND post_id = ?", name="DELETE network_activity_slots (one event)")
DELETE_COUNTS_DAY = Statement("DELETE FROM network_activity_counts WHERE network = ? AND account_id = ? AND day = ?")
DELETE_LEGACY_DAY = Statement("DELETE FROM network_activity_log WHERE network = ? AND account_id = ? AND day = ?")
DELETE_LEGACY_ROW = Statement(
    "DELETE FROM network_activity_log WHERE network = ? AND account_id = ? AND day = ? AND at = ? AND kind = ? "
    "AND other_id = ? AND post_id = ?", name="DELETE network_activity_log (one event)")
PUT_LEGACY_ROW = Statement(
    "INSERT INTO network_activity_log (network, account_id, day, at, kind, other_id, post_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)")
DELETE_DAYS = Statement("DELETE FROM network_activity_days WHERE network = ? AND account_id = ?")
DELETE_DAY = Statement("DELETE FROM network_activity_days WHERE network = ? AND account_id = ? AND day = ?")

US = 1_000_000
US_PER_DAY = 86_400 * US
SLOT_SECONDS = 900  # every zone offset in use is a multiple of 15 minutes: a slot lies in one local day
SLOT_US = SLOT_SECONDS * US
SLOTS_PER_DAY = 86_400 // SLOT_SECONDS
SLOT_EVENTS = 10  # rows of a slot read by default (the collector asks for what it needs: events.SLOT_SHARE)
# Kinds counted per post (the account's own posts: bounded by what it posted); others per kind only.
PER_POST = frozenset({"like_received", "unlike_received"})
# Each action and its mirror on the other account: (kind of the actor, kind of the other).
MIRRORS = {"like": ("like_given", "like_received"), "unlike": ("unlike_given", "unlike_received"),
           "follow": ("follow", "followed_by"), "unfollow": ("unfollow", "unfollowed_by")}
MIRROR_OF = {**{mine: theirs for mine, theirs in MIRRORS.values()},
             **{theirs: mine for mine, theirs in MIRRORS.values()}}
FORMER_ACCOUNT = 0  # the id an erased account's events show on the other side (no account has it)


def slot_of(at_us: int) -> int:
    return at_us // SLOT_US


def count_key(kind: str, post_id: int | None) -> int:
    """The post a count of `kind` is kept under (0: per kind only)."""
    return (post_id or 0) if kind in PER_POST else 0


def event_writes(network: str, action: str, actor: int, other: int, at_us: int, post_id: int = 0
                 ) -> list[tuple[Statement, Params]]:
    """The rows of one like/unlike/follow/unfollow at `at_us` that changed state: the actor's and the other
    account's event, both counts (counters: written once, by the caller whose transaction applied), and both
    accounts' day listings (their own, and the network's for retention: api/network/periods.py)."""
    mine, theirs = MIRRORS[action]
    slot, day = slot_of(at_us), at_us // US_PER_DAY
    return [(PUT_EVENT, (network, actor, slot, at_us, mine, other, post_id)),
            (PUT_EVENT, (network, other, slot, at_us, theirs, actor, post_id)),
            (COUNT_EVENT, (1, network, actor, day, slot, mine, count_key(mine, post_id))),
            (COUNT_EVENT, (1, network, other, day, slot, theirs, count_key(theirs, post_id))),
            (PUT_DAY, (network, actor, day)), (PUT_DAY, (network, other, day)),
            *periods.event_writes(network, (actor, other), at_us)]


def start_counts(db: Database, network: str, account_id: int, start_us: int, end_us: int
                 ) -> list[tuple[int, ResponseFuture]]:
    """Reads of the counts of the slots overlapping [start_us, end_us): (UTC day, future) per day touched."""
    first, last = slot_of(start_us), slot_of(end_us - 1)
    return [(day, db.execute_async(SELECT_COUNTS, (network, account_id, day, max(first, day * SLOTS_PER_DAY),
                                                   min(last, (day + 1) * SLOTS_PER_DAY - 1))))
            for day in range(start_us // US_PER_DAY, (end_us - 1) // US_PER_DAY + 1)]


def start_slots(db: Database, network: str, account_id: int, slots: Iterable[int], start_us: int, end_us: int,
                limit: int = SLOT_EVENTS) -> list[ResponseFuture]:
    """Reads of the first `limit` events of each slot (inside [start_us, end_us))."""
    return [db.execute_async(SELECT_SLOT, (network, account_id, slot, start_us, end_us, limit)) for slot in slots]


def start_legacy_day(db: Database, network: str, account_id: int, day: int, start_us: int, end_us: int
                     ) -> ResponseFuture:
    """The read of one UTC day of network_activity_log (archived before migration 0140)."""
    return db.execute_async(SELECT_LEGACY_DAY, (network, account_id, day, start_us, end_us))


# -- erasure of an account -----------------------------------------------------------------------------------------
Event = tuple[int, int, str, int, int, bool]  # (UTC day, at, kind, other id, post id, in the legacy log)


def days_of(db: Database, network: str, account_id: int) -> list[int]:
    """The UTC days listed as holding the account's events (written since migration 0280)."""
    return [row.day for row in db.execute(SELECT_DAYS, (network, account_id))]


def events_of_days(db: Database, network: str, account_id: int, days: Iterable[int]) -> list[Event]:
    """Every event row of the account on these UTC days: each slot's partition and the legacy day's, whole."""
    days = sorted(set(days))
    slot_reads = [(day, db.execute_async(SELECT_WHOLE_SLOT, (network, account_id, slot)))
                  for day in days for slot in range(day * SLOTS_PER_DAY, (day + 1) * SLOTS_PER_DAY)]
    legacy_reads = [(day, db.execute_async(SELECT_WHOLE_LEGACY_DAY, (network, account_id, day))) for day in days]
    return [(day, row.at, row.kind, row.other_id, row.post_id, legacy)
            for legacy, reads in ((False, slot_reads), (True, legacy_reads))
            for day, future in reads for row in future.result()]


def mirror_rewrites(network: str, account_id: int, events: Iterable[Event]) -> list[tuple[Statement, Params]]:
    """The other side of each event stops naming the account: its row is written again naming FORMER_ACCOUNT
    (the other account's counts do not change), in whichever table (slots or the legacy log) the event is."""
    writes: list[tuple[Statement, Params]] = []
    for day, at, kind, other, post_id, legacy in events:
        theirs = MIRROR_OF.get(kind)
        if theirs is None or other == FORMER_ACCOUNT:
            continue
        if legacy:  # archived before migration 0140: both sides are in the legacy log
            writes += [(DELETE_LEGACY_ROW, (network, other, day, at, theirs, account_id, post_id)),
                       (PUT_LEGACY_ROW, (network, other, day, at, theirs, FORMER_ACCOUNT, post_id))]
        else:
            slot = slot_of(at)
            writes += [(DELETE_SLOT_ROW, (network, other, slot, at, theirs, account_id, post_id)),
                       (PUT_EVENT, (network, other, slot, at, theirs, FORMER_ACCOUNT, post_id))]
    return writes


def erase_account_writes(network: str, account_id: int, days: Iterable[int]) -> list[tuple[Statement, Params]]:
    """The account's own partitions of these days (slots, counts, legacy log) and its day listing."""
    writes: list[tuple[Statement, Params]] = []
    for day in sorted(set(days)):
        writes += [(DELETE_SLOT, (network, account_id, slot))
                   for slot in range(day * SLOTS_PER_DAY, (day + 1) * SLOTS_PER_DAY)]
        writes += [(DELETE_COUNTS_DAY, (network, account_id, day)), (DELETE_LEGACY_DAY, (network, account_id, day))]
    return [*writes, (DELETE_DAYS, (network, account_id))]


def naming(db: Database, network: str, account_id: int, named: int, days: Iterable[int]) -> int:
    """Rows of `account_id`'s events on these days that name `named` (the proof)."""
    return sum(1 for event in events_of_days(db, network, account_id, days) if event[3] == named)


def expire_days_writes(network: str, account_id: int, days: Iterable[int]) -> list[tuple[Statement, Params]]:
    """Retention: the account's partitions of these UTC days (slots, counts, legacy log) and their listing rows (the
    other side of each event is in the other account's partitions of the same day: its own run deletes it)."""
    writes = erase_account_writes(network, account_id, days)[:-1]
    return writes + [(DELETE_DAY, (network, account_id, day)) for day in sorted(set(days))]


def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: partitions.Progress | None = None) -> dict[str, int]:
    """Delete every partition of this module's tables that belongs to `network` (admin; see api/partitions.py)."""
    return partitions.drop(db, TABLES, "network", network, dry_run=dry_run, progress=progress)
