"""Follower relations, both directions as in the seed: follower_relations_by_account holds, per account, the
accounts following it (rel_type `follower`) and the accounts it follows (rel_type `follows`); and
followed_celebrities, the celebrities among the accounts an account follows (Q4 merges their posts at read time).

A follow or unfollow changes the relation with a lightweight transaction on the follower's own `follows` row
(INSERT IF NOT EXISTS / DELETE IF EXISTS): its Paxos round sits in the follower's partition, never in a
celebrity's, and only the request whose transaction applied moves the counts.

Large follower sets (docs/network.md, "Follower buckets"): the followers of an account above the bucketing line
live in follower_buckets, `n` partitions (a power of two) of one hash-slot range each, ordered by slot (a 20-bit
hash of the follower id); follower_layouts says where an account's followers are (no row: the legacy partition
of follower_relations_by_account). Every read of a bucketed set pages by slot ranges of bounded width (a page is
planned for ~800 of a bucket's rows, at most 1/128 of it), never by live-row count: since the slot is a hash, a
page steps over its share of the bucket's rows and tombstones whatever id range was deleted.
`move_followers` changes the layout (up at the line, a split when the buckets fill, down below the line minus
the hysteresis) while the set stays readable and writable: writers write both layouts during a move, readers
read the old one until the flip, the copy is written at the time dual writing began (a later unfollow wins).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import time
from collections.abc import Iterable, Iterator

from cassandra import ConsistencyLevel

from api import partitions
from api.clock import Clock
from api.db import Database, Params, Statement, was_applied, without_none
from api.network.settings import network_settings
from api.network.values import Account

TABLES = frozenset({"follower_relations_by_account", "followed_celebrities", "follower_buckets",
                    "follower_layouts"})
FOLLOWER, FOLLOWS = "follower", "follows"

PUT_RELATION = Statement(
    "INSERT INTO follower_relations_by_account (network, account_id, rel_type, target_id, target_username) "
    "VALUES (?, ?, ?, ?, ?)")
DELETE_RELATION = Statement(
    "DELETE FROM follower_relations_by_account WHERE network = ? AND account_id = ? AND rel_type = ? "
    "AND target_id = ?")
FOLLOW_IF_NEW = Statement(
    "INSERT INTO follower_relations_by_account (network, account_id, rel_type, target_id, target_username) "
    "VALUES (?, ?, 'follows', ?, ?) IF NOT EXISTS", name="INSERT follower_relations_by_account IF NOT EXISTS",
    idempotent=False)
UNFOLLOW_IF_EXISTS = Statement(
    "DELETE FROM follower_relations_by_account WHERE network = ? AND account_id = ? AND rel_type = 'follows' "
    "AND target_id = ? IF EXISTS", name="DELETE follower_relations_by_account IF EXISTS", idempotent=False)
PUT_FOLLOWED_CELEBRITY = Statement(
    "INSERT INTO followed_celebrities (network, account_id, celebrity_id) VALUES (?, ?, ?)")
DELETE_FOLLOWED_CELEBRITY = Statement(
    "DELETE FROM followed_celebrities WHERE network = ? AND account_id = ? AND celebrity_id = ?")
FOLLOWED_CELEBRITIES = Statement(
    "SELECT celebrity_id FROM followed_celebrities WHERE network = ? AND account_id = ?")
FOLLOWED_CELEBRITIES_FRESH = Statement(
    "SELECT celebrity_id FROM followed_celebrities WHERE network = ? AND account_id = ?",
    name="SELECT followed_celebrities (fresh)", consistency=ConsistencyLevel.LOCAL_QUORUM)
COUNT_RELATIONS = Statement(
    "SELECT COUNT(*) AS n FROM follower_relations_by_account WHERE network = ? AND account_id = ? "
    "AND rel_type = ?")
LIST_RELATIONS = Statement(
    "SELECT target_id, target_username FROM follower_relations_by_account WHERE network = ? AND account_id = ? "
    "AND rel_type = ?")
LIST_RELATIONS_FRESH = Statement(
    "SELECT target_id, target_username FROM follower_relations_by_account WHERE network = ? AND account_id = ? "
    "AND rel_type = ?", name="SELECT follower_relations_by_account (fresh)",
    consistency=ConsistencyLevel.LOCAL_QUORUM)
HAS_RELATION = Statement(
    "SELECT target_id FROM follower_relations_by_account WHERE network = ? AND account_id = ? AND rel_type = ? "
    "AND target_id = ?")
# A move's copy into the legacy partition, at the time dual writing began (see move_followers); every key
# column a bind marker, so the driver knows the partition (batches of one partition).
COPY_RELATION = Statement(
    "INSERT INTO follower_relations_by_account (network, account_id, rel_type, target_id, target_username) "
    "VALUES (:network, :account_id, :rel_type, :target_id, :target_username) USING TIMESTAMP :ts",
    name="INSERT follower_relations_by_account (move)")
DROP_LEGACY_FOLLOWERS = Statement(
    "DELETE FROM follower_relations_by_account WHERE network = ? AND account_id = ? AND rel_type = 'follower'",
    name="DELETE follower_relations_by_account (moved away)")

# Bucketed followers (cql/0160).
PUT_BUCKETED = Statement(
    "INSERT INTO follower_buckets (network, account_id, buckets, bucket, slot, follower_id, follower_username) "
    "VALUES (:network, :account_id, :buckets, :bucket, :slot, :follower_id, :follower_username)")
COPY_BUCKETED = Statement(
    "INSERT INTO follower_buckets (network, account_id, buckets, bucket, slot, follower_id, follower_username) "
    "VALUES (:network, :account_id, :buckets, :bucket, :slot, :follower_id, :follower_username) "
    "USING TIMESTAMP :ts", name="INSERT follower_buckets (move)")
DELETE_BUCKETED = Statement(
    "DELETE FROM follower_buckets WHERE network = ? AND account_id = ? AND buckets = ? AND bucket = ? AND slot = ? "
    "AND follower_id = ?")
BUCKET_PAGE = Statement(
    "SELECT follower_id, follower_username FROM follower_buckets WHERE network = ? AND account_id = ? "
    "AND buckets = ? AND bucket = ? AND slot >= ? AND slot < ?")
BUCKET_PAGE_FRESH = Statement(
    "SELECT follower_id, follower_username FROM follower_buckets WHERE network = ? AND account_id = ? "
    "AND buckets = ? AND bucket = ? AND slot >= ? AND slot < ?", name="SELECT follower_buckets (fresh)",
    consistency=ConsistencyLevel.LOCAL_QUORUM)
COUNT_BUCKET_PAGE = Statement(
    "SELECT COUNT(*) AS n FROM follower_buckets WHERE network = ? AND account_id = ? AND buckets = ? "
    "AND bucket = ? AND slot >= ? AND slot < ?", name="SELECT follower_buckets (count)")
HAS_BUCKETED = Statement(
    "SELECT follower_id FROM follower_buckets WHERE network = ? AND account_id = ? AND buckets = ? AND bucket = ? "
    "AND slot = ? AND follower_id = ?", name="SELECT follower_buckets (one)")
DROP_BUCKET = Statement(
    "DELETE FROM follower_buckets WHERE network = ? AND account_id = ? AND buckets = ? AND bucket = ?",
    name="DELETE follower_buckets (moved away)")
# The layout is read at LOCAL_QUORUM: a move writes it at LOCAL_QUORUM and then waits for writers to settle.
LAYOUT = Statement("SELECT buckets, target, since_us FROM follower_layouts WHERE network = ? AND account_id = ?",
                   consistency=ConsistencyLevel.LOCAL_QUORUM)
PUT_LAYOUT = Statement(
    "INSERT INTO follower_layouts (network, account_id, buckets, target, since_us) VALUES (?, ?, ?, ?, ?)")
# Erasure of an account (api/erasure/network.py): its partitions whole.
DROP_RELATIONS = Statement(
    "DELETE FROM follower_relations_by_account WHERE network = ? AND account_id = ? AND rel_type = ?",
    name="DELETE follower_relations_by_account (one side)")
DROP_FOLLOWED_CELEBRITIES = Statement("DELETE FROM followed_celebrities WHERE network = ? AND account_id = ?",
                                      name="DELETE followed_celebrities (all)")
DROP_LAYOUT = Statement("DELETE FROM follower_layouts WHERE network = ? AND account_id = ?")

_PAGE = 5000  # rows per page when a whole legacy relation partition is read
SLOT_BITS = 20
SLOTS = 1 << SLOT_BITS  # slot = the top 20 bits of a 64-bit mix of the follower id
PAGES_PER_BUCKET = 128  # a read steps over at most ~1/128 of a bucket's rows (live or deleted) per request
PAGE_ROWS = 800  # rows a slot page is planned for: under the node's tombstone warning (1,000) if all were deleted
MAX_BUCKETS = 4096  # 4096 buckets x 100k rows: 400M followers
_WINDOW = 32  # slot pages in flight per reader
_MASK = (1 << 64) - 1


def slot_of(follower_id: int) -> int:
    """The follower's slot: a stable 64-bit mix (splitmix64's finaliser) of its id, top SLOT_BITS bits.
    Consecutive ids land far apart, so deleting an id range touches every bucket and page a little."""
    z = (follower_id + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return (z ^ (z >> 31)) >> (64 - SLOT_BITS)


def bucket_of(slot: int, buckets: int) -> int:
    """The bucket of a slot in a layout of `buckets` (a power of two): contiguous slot ranges."""
    return slot * buckets >> SLOT_BITS


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where an account's followers live: `buckets` = 0 is the legacy partition, n > 0 is n buckets; a move to
    `target` is under way while they differ (dual writes since `since_us`)."""

    buckets: int = 0
    target: int = 0
    since_us: int = 0

    @property
    def moving(self) -> bool:
        return self.target != self.buckets

    def written(self) -> tuple[int, ...]:
        """The layouts a follow or unfollow writes: both during a move."""
        return (self.buckets, self.target) if self.moving else (self.buckets,)


LEGACY = Layout()


def layout(db: Database, network: str, account_id: int) -> Layout:
    row = db.execute(LAYOUT, (network, account_id)).one()
    return LEGACY if row is None else Layout(row.buckets or 0, row.target or 0, row.since_us or 0)


def layouts(db: Database, network: str, account_ids: Iterable[int]) -> dict[int, Layout]:
    """The layouts of several accounts, read together."""
    futures = {a: db.execute_async(LAYOUT, (network, a)) for a in account_ids}
    out = {}
    for a, f in futures.items():
        row = f.result().one()
        out[a] = LEGACY if row is None else Layout(row.buckets or 0, row.target or 0, row.since_us or 0)
    return out


def wanted_buckets(followers: int, current: int, *, line: int, hysteresis: float, bucket_rows: int) -> int:
    """The layout an account with `followers` should have: legacy (0) below `line` (and, once bucketed, below
    line x (1 - hysteresis): no flapping); else a power of two giving at most `bucket_rows` per bucket, kept
    until the buckets hold twice that (a split is a copy of the whole set)."""
    if followers < (line if current == 0 else int(line * (1 - hysteresis))):
        return 0
    if current and followers <= current * 2 * bucket_rows:
        return current
    need = max(1, math.ceil(followers / bucket_rows))
    return min(MAX_BUCKETS, 1 << (need - 1).bit_length())


def relation_write(network: str, account_id: int, rel_type: str, target_id: int, target_username: str | None
                   ) -> tuple[Statement, Params]:
    """One relation row of the legacy layout as a (statement, params) pair: the loader's bulk path (a loaded
    account above the line is moved into buckets by its `follower-buckets` job)."""
    return PUT_RELATION, (network, account_id, rel_type, target_id, target_username)


def follower_write(network: str, account_id: int, buckets: int, follower_id: int, username: str | None
                   ) -> tuple[Statement, Params]:
    """The row saying `follower_id` follows `account_id`, in the layout of `buckets` (0: legacy)."""
    if buckets == 0:
        return relation_write(network, account_id, FOLLOWER, follower_id, username)
    slot = slot_of(follower_id)
    return PUT_BUCKETED, without_none({
        "network": network, "account_id": account_id, "buckets": buckets, "bucket": bucket_of(slot, buckets),
        "slot": slot, "follower_id": follower_id, "follower_username": username})


def follower_delete(network: str, account_id: int, buckets: int, follower_id: int) -> tuple[Statement, Params]:
    if buckets == 0:
        return DELETE_RELATION, (network, account_id, FOLLOWER, follower_id)
    slot = slot_of(follower_id)
    return DELETE_BUCKETED, (network, account_id, buckets, bucket_of(slot, buckets), slot, follower_id)


def set_layout_writes(network: str, account_id: int, buckets: int) -> list[tuple[Statement, Params]]:
    """Declare a layout for an account that has no followers yet (a bulk load writing straight into buckets)."""
    return [(PUT_LAYOUT, (network, account_id, buckets, buckets, 0))]


def claim_follow(db: Database, network: str, follower: Account, followee: Account) -> bool:
    """The follower's own `follows` row, by lightweight transaction: True when this call created the relation
    (only then may the caller move the counts). `follow_writes` completes it."""
    return was_applied(db.execute(FOLLOW_IF_NEW, (network, follower.account_id, followee.account_id,
                                                  followee.username)))


def follow_writes(db: Database, network: str, follower: Account, followee: Account
                  ) -> list[tuple[Statement, Params]]:
    """The followee-side row of a follow (in every layout the followee's followers are written to: two during
    a move), written whether or not this call's transaction applied, so a retry completes a half-done follow."""
    return [follower_write(network, followee.account_id, n, follower.account_id, follower.username)
            for n in layout(db, network, followee.account_id).written()]


def claim_unfollow(db: Database, network: str, follower_id: int, followee_id: int) -> bool:
    """Delete the follower's own `follows` row by lightweight transaction: True when this call ended the
    relation. `unfollow_writes` completes it."""
    return was_applied(db.execute(UNFOLLOW_IF_EXISTS, (network, follower_id, followee_id)))


def unfollow_writes(db: Database, network: str, follower_id: int, followee_id: int
                    ) -> list[tuple[Statement, Params]]:
    return [follower_delete(network, followee_id, n, follower_id)
            for n in layout(db, network, followee_id).written()]


def follows(db: Database, network: str, follower_id: int, followee_id: int) -> bool:
    return db.execute(HAS_RELATION, (network, follower_id, FOLLOWS, followee_id)).one() is not None


# -- reading a follower set ----------------------------------------------------------------------------------------
def pages_per_bucket(bucket_rows: int) -> int:
    """Slot pages per bucket: a bucket holds up to 2 x `bucket_rows` rows before it is split, so a page covers
    about PAGE_ROWS of them (live or deleted), at most PAGES_PER_BUCKET pages."""
    return min(PAGES_PER_BUCKET, 1 << max(0, math.ceil(2 * bucket_rows / PAGE_ROWS) - 1).bit_length())


def _page_ranges(buckets: int, lo: int = 0, hi: int = SLOTS) -> Iterator[tuple[int, int, int]]:
    """(bucket, first slot, end slot) of every page of [lo, hi): at most 1/pages_per_bucket of a bucket each."""
    width = SLOTS // buckets
    step = max(1, width // pages_per_bucket(network_settings().follower_bucket_rows))
    for b in range(lo // width, min(buckets, -(-hi // width))):
        first, end = max(lo, b * width), min(hi, (b + 1) * width)
        for a in range(first, end, step):
            yield b, a, min(a + step, end)


def _paged(db: Database, statement: Statement, network: str, account_id: int, buckets: int,
           lo: int = 0, hi: int = SLOTS, window: int = _WINDOW) -> Iterator[list]:
    """The rows of each slot page of [lo, hi), in slot order, `window` pages in flight."""
    ranges = _page_ranges(buckets, lo, hi)
    pending: collections.deque = collections.deque()

    def send() -> None:
        for b, a, z in ranges:
            pending.append(db.execute_async(statement, (network, account_id, buckets, b, a, z)))
            return

    for _ in range(window):
        send()
    while pending:
        result = pending.popleft().result()
        send()
        rows = list(result.current_rows)
        while result.has_more_pages:  # a page is small by design; the driver's own paging is the fallback
            result.fetch_next_page()
            rows.extend(result.current_rows)
        yield rows


def _legacy_rows(db: Database, network: str, account_id: int, rel_type: str, *, fresh: bool = False
                 ) -> Iterator[tuple[int, str | None]]:
    statement = LIST_RELATIONS_FRESH if fresh else LIST_RELATIONS
    for r in db.execute(statement, (network, account_id, rel_type), fetch_size=_PAGE, timeout=60):
        yield r.target_id, r.target_username


def _follower_rows(db: Database, network: str, account_id: int, buckets: int, lo: int = 0, hi: int = SLOTS, *,
                   fresh: bool = False, window: int = _WINDOW) -> Iterator[tuple[int, str | None]]:
    """(follower id, name) of the followers in the layout of `buckets` (slot range [lo, hi) of a bucketed one;
    a legacy partition is read whole and filtered)."""
    if buckets == 0:
        for f, name in _legacy_rows(db, network, account_id, FOLLOWER, fresh=fresh):
            if lo == 0 and hi == SLOTS or lo <= slot_of(f) < hi:
                yield f, name
        return
    statement = BUCKET_PAGE_FRESH if fresh else BUCKET_PAGE
    for rows in _paged(db, statement, network, account_id, buckets, lo, hi, window):
        for r in rows:
            yield r.follower_id, r.follower_username


def count(db: Database, network: str, account_id: int, rel_type: str) -> int:
    if rel_type == FOLLOWER:
        buckets = layout(db, network, account_id).buckets
        if buckets:
            return sum(rows[0].n for rows in _paged(db, COUNT_BUCKET_PAGE, network, account_id, buckets))
    return db.execute(COUNT_RELATIONS, (network, account_id, rel_type), timeout=30).one().n


def has_follower(db: Database, network: str, account_id: int, follower_id: int) -> bool:
    """Whether `follower_id` follows `account_id`, read from the followee's side (whatever its layout)."""
    buckets = layout(db, network, account_id).buckets
    if buckets == 0:
        return db.execute(HAS_RELATION, (network, account_id, FOLLOWER, follower_id)).one() is not None
    slot = slot_of(follower_id)
    return db.execute(HAS_BUCKETED, (network, account_id, buckets, bucket_of(slot, buckets), slot, follower_id)
                      ).one() is not None


def listing(db: Database, network: str, account_id: int, rel_type: str, limit: int) -> list[dict]:
    """Up to `limit` related accounts as {account_id, username} (followers of a bucketed account: in slot
    order)."""
    buckets = layout(db, network, account_id).buckets if rel_type == FOLLOWER else 0
    if buckets:
        rows: Iterable[tuple[int, str | None]] = _follower_rows(db, network, account_id, buckets, window=4)
    else:
        rows = ((r.target_id, r.target_username) for r in db.execute(
            LIST_RELATIONS, (network, account_id, rel_type), fetch_size=min(limit, _PAGE)))
    out = []
    for target_id, name in rows:
        out.append({"account_id": target_id, "username": name})
        if len(out) >= limit:
            break
    return out


def ids(db: Database, network: str, account_id: int, rel_type: str) -> list[int]:
    """Every related account id (the whole set: the legacy partition `_PAGE` rows per page, or every slot page
    of the buckets)."""
    if rel_type == FOLLOWER:
        buckets = layout(db, network, account_id).buckets
        if buckets:
            return [f for f, _ in _follower_rows(db, network, account_id, buckets)]
    rows = db.execute(LIST_RELATIONS, (network, account_id, rel_type), fetch_size=_PAGE, timeout=60)
    return [row.target_id for row in rows]


def each_follower(db: Database, network: str, account_ids: list[int], *, slots: tuple[int, int] = (0, SLOTS),
                  known: dict[int, Layout] | None = None) -> Iterator[tuple[int, str | None]]:
    """(follower id, follower name) of every follower of each account, account after account, only those whose
    slot is in `slots` (a bucketed account reads just those slot pages; a legacy one is read whole and filtered).
    `known`: layouts already read."""
    found = known if known is not None else layouts(db, network, account_ids)
    for a in account_ids:
        yield from _follower_rows(db, network, a, found[a].buckets, *slots)


# -- moving a follower set between layouts -------------------------------------------------------------------------
def move_followers(db: Database, network: str, account_id: int, to: int, *, settle: float, clock: Clock
                   ) -> dict[str, int]:
    """Move the followers of an account into the layout of `to` buckets (0: the legacy partition). Readable and
    writable throughout; a job (a copy of the whole set). Safe to re-run after a crash (it resumes the move).

    1. The layout row says `target` = `to`, dual writing from `since_us` (now); wait `settle` seconds, so that
       every follow or unfollow that read the old layout has landed (requests time out well within it).
    2. Copy every row of the old layout into the new one USING TIMESTAMP since_us: an unfollow after since_us
       (written to both) wins over the copy whatever order they land in; a follow since then is in both.
    3. Flip: `buckets` = `to` (readers switch); wait `settle` (readers of the old layout finish), then delete
       the old layout's partitions (one partition tombstone each: nobody reads them any more).
    """
    current = layout(db, network, account_id)
    if not current.moving and current.buckets == to:
        return {"moved": 0, "buckets": to}
    if current.moving and current.target != to:
        # An interrupted move elsewhere: stop writing its target, then clear it (a later move to that size
        # must not find rows it no longer keeps up to date).
        db.execute(PUT_LAYOUT, (network, account_id, current.buckets, current.buckets, 0))
        clock.sleep(settle)
        _drop_layout(db, network, account_id, current.target)
        current = Layout(current.buckets, current.buckets, 0)
    since_us = current.since_us if current.moving else time.time_ns() // 1000  # write timestamps: real time
    if not current.moving:
        db.execute(PUT_LAYOUT, (network, account_id, current.buckets, to, since_us))
        clock.sleep(settle)
    # Rows come in slot order, so neighbours share a target partition: one-partition batches (one mutation each).
    copied = db.execute_many(
        (_copy_write(network, account_id, to, f, name, since_us)
         for f, name in _follower_rows(db, network, account_id, current.buckets, fresh=True)),
        batch_size=50, partitions_per_batch=1)
    db.execute(PUT_LAYOUT, (network, account_id, to, to, since_us))
    clock.sleep(settle)
    _drop_layout(db, network, account_id, current.buckets)
    return {"moved": copied, "buckets": to, "from_buckets": current.buckets}


def _copy_write(network: str, account_id: int, buckets: int, follower_id: int, username: str | None,
                ts: int) -> tuple[Statement, Params]:
    if buckets == 0:
        return COPY_RELATION, without_none({"network": network, "account_id": account_id, "rel_type": FOLLOWER,
                                            "target_id": follower_id, "target_username": username, "ts": ts})
    slot = slot_of(follower_id)
    return COPY_BUCKETED, without_none({
        "network": network, "account_id": account_id, "buckets": buckets, "bucket": bucket_of(slot, buckets),
        "slot": slot, "follower_id": follower_id, "follower_username": username, "ts": ts})


def _drop_layout(db: Database, network: str, account_id: int, buckets: int) -> None:
    """One partition tombstone per partition of a layout nobody reads or writes any more."""
    if buckets == 0:
        db.execute(DROP_LEGACY_FOLLOWERS, (network, account_id))
    else:
        db.execute_many((DROP_BUCKET, (network, account_id, buckets, b)) for b in range(buckets))


# -- followed celebrities ------------------------------------------------------------------------------------------
def followed_celebrities(db: Database, network: str, account_id: int, *, fresh: bool = False) -> set[int]:
    """The celebrities the account follows (`fresh`: read at LOCAL_QUORUM, after this process's own writes)."""
    stmt = FOLLOWED_CELEBRITIES_FRESH if fresh else FOLLOWED_CELEBRITIES
    return {r.celebrity_id for r in db.execute(stmt, (network, account_id))}


def start_followed_celebrities(db: Database, network: str, account_id: int):
    return db.execute_async(FOLLOWED_CELEBRITIES, (network, account_id))


def mark_writes(network: str, followers: Iterable[int], celebrity_id: int) -> Iterator[tuple[Statement, Params]]:
    return ((PUT_FOLLOWED_CELEBRITY, (network, f, celebrity_id)) for f in followers)


def unmark_writes(network: str, followers: Iterable[int], celebrity_id: int) -> Iterator[tuple[Statement, Params]]:
    return ((DELETE_FOLLOWED_CELEBRITY, (network, f, celebrity_id)) for f in followers)


def mark_celebrity_followed(db: Database, network: str, followers: Iterable[int], celebrity_id: int) -> int:
    return db.execute_many(mark_writes(network, followers, celebrity_id))


def unmark_celebrity_followed(db: Database, network: str, followers: Iterable[int], celebrity_id: int) -> int:
    return db.execute_many(unmark_writes(network, followers, celebrity_id))


def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: partitions.Progress | None = None) -> dict[str, int]:
    """Delete every partition of this module's tables that belongs to `network` (admin; see api/partitions.py)."""
    return partitions.drop(db, TABLES, "network", network, dry_run=dry_run, progress=progress)


# -- erasure of an account -----------------------------------------------------------------------------------------
def erase_account_writes(db: Database, network: str, account_id: int) -> list[tuple[Statement, Params]]:
    """The account's own partitions: both relation lists, its follower buckets (every layout it has or is moving
    to), the celebrities it follows, its layout. The other side of each relation is the caller's (unfollows)."""
    found = layout(db, network, account_id)
    writes: list[tuple[Statement, Params]] = [(DROP_BUCKET, (network, account_id, n, bucket))
                                              for n in set(found.written()) if n for bucket in range(n)]
    return writes + [(DROP_RELATIONS, (network, account_id, FOLLOWER)),
                     (DROP_RELATIONS, (network, account_id, FOLLOWS)),
                     (DROP_FOLLOWED_CELEBRITIES, (network, account_id)), (DROP_LAYOUT, (network, account_id))]


def account_rows(db: Database, network: str, account_id: int) -> dict[str, int]:
    """Rows keyed by the account in this module's tables (the erasure proof)."""
    found = layout(db, network, account_id)
    bucketed = sum(rows[0].n for n in set(found.written()) if n
                   for rows in _paged(db, COUNT_BUCKET_PAGE, network, account_id, n))
    return {"follower_relations_by_account": sum(
                db.execute(COUNT_RELATIONS, (network, account_id, t), timeout=30).one().n for t in (FOLLOWER, FOLLOWS)),
            "follower_buckets": bucketed,
            "followed_celebrities": len(followed_celebrities(db, network, account_id, fresh=True)),
            "follower_layouts": int(db.execute(LAYOUT, (network, account_id)).one() is not None)}


def rows_naming(db: Database, network: str, account_id: int, named: int) -> int:
    """Rows of `account_id`'s relations that name `named` (either side, any layout; the erasure proof)."""
    return (sum(db.execute(HAS_RELATION, (network, account_id, t, named)).one() is not None
                for t in (FOLLOWER, FOLLOWS))
            + int(has_follower(db, network, account_id, named))
            + int(named in followed_celebrities(db, network, account_id, fresh=True)))
