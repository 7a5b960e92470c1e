"""A generic work queue on Cassandra whose reads never cross deleted rows (docs/architecture.md, "Work queue").

Owner of work_items, work_buckets, work_groups, work_checkpoints, work_shards and work_workers. Any feature
enqueues with `enqueue_writes` (sent together with its own rows) or `enqueue`; a worker loops on `take`, then
calls `done` or `retry` for each item it got.

Layout. An item lives in partition (queue, group, shard, bucket): shard = crc32(key) % SHARDS, bucket = its due
time in 10-minute buckets; rows are ordered by (due_us, key, attempt). Nothing is ever deleted: a finished item
stays where it is and the reader of its shard moves a per-group checkpoint past it, so every read starts after
finished rows, never on top of tombstones. Rows expire by TTL (14 days) long after the checkpoint passed them.
A retry is a new row (attempt + 1) in the bucket of its own due time: a retry that is not yet due sits ahead of
the reader and blocks nothing behind it.

Ownership. Each shard of a queue has one owner at a time: a lightweight-transaction lease with a TTL
(work_shards, LOCAL_SERIAL), renewed while the owner works. Workers announce themselves (work_workers) and each
holds about SHARDS / workers shards; a worker hands a shard over only when none of its items is in flight,
after writing its checkpoints. Two workers therefore never process one item at the same time.

Fairness. A take reads every (owned shard, active group) pair, an equal share of `limit` from each, starting
at a rotating offset: a group with 200,000 items waiting gets the same share as a group with one new item.

Time. Every decision by time (due times, retry times, when a lease is renewed or stops being used, heartbeats,
rescans, checkpoint pacing) reads the clock of the Database it is given (`db.clock`, api/clock.py), so tests
advance a manual clock instead of sleeping. Two expiries are the node's, on purpose: the TTLs of a shard lease
(work_shards) and of a worker's heartbeat (work_workers) count down on Cassandra's clock, which every worker
shares whatever its own clock says, so host clock skew can never make two workers hold one shard. A lease
holder renews by its own monotonic clock well before the TTL runs out (at half of it) and stops handing out
a shard's items at a quarter. Cassandra write timestamps stay the driver's, except horizon_us (see
UPDATE_HORIZON): its timestamp is the value it stores, so any clock, behind or ahead, keeps it a maximum.

Delivery is at least once. A worker killed mid-batch loses nothing: the next owner re-reads every item after
the last written checkpoint, which may include items already finished (the checkpoint is written at most once
a second, and never closer than SETTLE_US to now). Processing must therefore be idempotent (check whether the
work is already done, as the Slack file worker checks the message's files_stored).
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import zlib
from collections.abc import Callable
from typing import Any

from cassandra import ConsistencyLevel

from api.clock import SYSTEM, Clock
from api.db import Database, Params, Statement, outcome_unknown, transact

TABLES = frozenset({"work_items", "work_buckets", "work_groups", "work_checkpoints", "work_shards",
                    "work_workers"})

SHARDS = 16
BUCKET_US = 600 * 1_000_000  # 10 minutes of due time per partition
# A checkpoint never comes closer than this to now: an enqueue whose write was still in flight (at most the
# request timeout, plus clock skew between hosts) lands behind the reader's position but after the checkpoint,
# and the periodic rescan from the checkpoint finds it.
SETTLE_US = 10 * 1_000_000
RESCAN_SECONDS = 2.0  # how often a reader goes back from its in-memory position to the checkpoint
LEASE_SECONDS = 60  # a shard owner's lease; renewed when half of it is left
HEARTBEAT_SECONDS = 2.0
WORKER_TTL_SECONDS = 10  # a worker silent this long no longer counts when shards are shared out
CHECKPOINT_EVERY_SECONDS = 1.0
BACKLOG_CAP = 10_000  # rows counted per group by `backlog` (bounded read)
_BUCKETS_PER_READ = 8

# Reads see what other processes wrote at LOCAL_QUORUM (enqueuers, the previous owner of a shard).
_READ = ConsistencyLevel.LOCAL_QUORUM

INSERT_ITEM = Statement(
    "INSERT INTO work_items (queue, grp, shard, bucket, due_us, key, attempt, payload, enqueued_us, last_error) "
    "VALUES (:queue, :grp, :shard, :bucket, :due_us, :key, :attempt, :payload, :enqueued_us, :last_error)")
INSERT_BUCKET = Statement("INSERT INTO work_buckets (queue, grp, shard, bucket) VALUES (?, ?, ?, ?)")
# USING TIMESTAMP <due>: Cassandra keeps the cell with the highest timestamp, so horizon_us is the maximum due
# time ever enqueued for the group, whatever the order the writes arrive in. The timestamp is the value itself,
# and nothing else writes or deletes this cell, so a clock behind or ahead of the node's cannot shadow a write.
UPDATE_HORIZON = Statement(
    "UPDATE work_groups USING TIMESTAMP ? SET horizon_us = ? WHERE queue = ? AND grp = ?")
SELECT_GROUPS = Statement("SELECT grp, horizon_us FROM work_groups WHERE queue = ? LIMIT 100000",
                          consistency=_READ)
SELECT_BUCKETS = Statement(
    "SELECT bucket FROM work_buckets WHERE queue = ? AND grp = ? AND shard = ? AND bucket >= ? AND bucket <= ? "
    "LIMIT ?", consistency=_READ)
SELECT_ITEMS = Statement(
    "SELECT bucket, due_us, key, attempt, payload, last_error FROM work_items "
    "WHERE queue = ? AND grp = ? AND shard = ? AND bucket = ? AND (due_us, key, attempt) > (?, ?, ?) "
    "AND due_us <= ? LIMIT ?", consistency=_READ)
COUNT_ITEMS = Statement(
    "SELECT due_us FROM work_items WHERE queue = ? AND grp = ? AND shard = ? AND bucket = ? "
    "AND (due_us, key, attempt) > (?, ?, ?) LIMIT ?", name="SELECT work_items (backlog)", consistency=_READ)
SELECT_CHECKPOINTS = Statement(
    "SELECT grp, due_us, key, attempt FROM work_checkpoints WHERE queue = ? AND shard = ?", consistency=_READ)
WRITE_CHECKPOINT = Statement(
    "INSERT INTO work_checkpoints (queue, shard, grp, due_us, key, attempt) VALUES (?, ?, ?, ?, ?, ?)")
ACQUIRE = Statement(
    "INSERT INTO work_shards (queue, shard, owner) VALUES (?, ?, ?) IF NOT EXISTS USING TTL ?", idempotent=False)
RENEW = Statement(
    "UPDATE work_shards USING TTL ? SET owner = ? WHERE queue = ? AND shard = ? IF owner = ?", idempotent=False)
RELEASE = Statement("DELETE FROM work_shards WHERE queue = ? AND shard = ? IF owner = ?", idempotent=False)
# After a lease transaction whose outcome is unknown: a serial read finishes any Paxos round in flight, then
# tells who holds the shard.
SHARD_OWNER_SERIAL = Statement("SELECT owner FROM work_shards WHERE queue = ? AND shard = ?",
                               name="SELECT work_shards (serial)", consistency=ConsistencyLevel.LOCAL_SERIAL)
SELECT_OWNERS = Statement("SELECT shard, owner FROM work_shards WHERE queue = ? AND shard IN ?", consistency=_READ)
HEARTBEAT = Statement("INSERT INTO work_workers (queue, owner, seen_us) VALUES (?, ?, ?) USING TTL ?")
# A worker that stops says so at once (one row; the only other delete here is a shard lease's).
REMOVE_WORKER = Statement("DELETE FROM work_workers WHERE queue = ? AND owner = ?")
SELECT_WORKERS = Statement("SELECT owner FROM work_workers WHERE queue = ? LIMIT 1000", consistency=_READ)

Pos = tuple[int, str, int]  # (due_us, key, attempt): a place in a (group, shard) stream
START: Pos = (0, "", -1)  # before every item (attempt is never negative)


@dataclasses.dataclass(frozen=True)
class WorkItem:
    """One item handed to a worker by `take`; give it back with `done` or `retry`."""

    queue: str
    group: str
    key: str
    payload: dict
    attempts: int  # earlier failed attempts (0 on the first try)
    shard: int = 0
    due_us: int = 0
    last_error: str | None = None

    @property
    def pos(self) -> Pos:
        return (self.due_us, self.key, self.attempts)


def shard_of(key: str) -> int:
    """A stable hash (not Python's salted hash()), so every process puts a key in the same shard."""
    return zlib.crc32(key.encode()) % SHARDS


def now_us(clock: Clock = SYSTEM) -> int:
    """`clock`'s wall time in epoch microseconds (due times, checkpoints, heartbeats)."""
    return int(clock.time() * 1_000_000)


# -- enqueue ----------------------------------------------------------------------------------------------

def enqueue_writes(queue: str, group: str, key: str, payload: dict, *, due_at_us: int | None = None,
                   clock: Clock = SYSTEM, _attempt: int = 0, _error: str | None = None
                   ) -> list[tuple[Statement, Params]]:
    """The rows of one item (item, its bucket in the listing, the group's horizon), for `execute_many` together
    with the caller's own rows. An item is never due before it is written (by `clock`: pass the `db.clock` the
    rows are written with): a due time in the past is now. If the writes fail, enqueue again (a second copy is
    harmless: processing is idempotent)."""
    now = now_us(clock)
    due = max(due_at_us or now, now)
    shard, bucket = shard_of(key), due // BUCKET_US
    item = {"queue": queue, "grp": group, "shard": shard, "bucket": bucket, "due_us": due, "key": key,
            "attempt": _attempt, "payload": json.dumps(payload, separators=(",", ":")), "enqueued_us": now}
    if _error is not None:
        item["last_error"] = _error[:1000]
    return [(INSERT_ITEM, item), (INSERT_BUCKET, (queue, group, shard, bucket)),
            (UPDATE_HORIZON, (due, due, queue, group))]


def enqueue(db: Database, queue: str, group: str, key: str, payload: dict, *, due_at_us: int | None = None
            ) -> None:
    """Put one item on `queue` for `group`, due at `due_at_us` (epoch µs; default now)."""
    db.execute_many(enqueue_writes(queue, group, key, payload, due_at_us=due_at_us, clock=db.clock))


# -- the reading side: one consumer per (database, queue, owner) in this process ----------------------------

@dataclasses.dataclass
class _Pair:
    """What the owner of a shard knows of one group in it."""

    cp: Pos  # everything at or before it is finished (persisted in work_checkpoints)
    cursor: Pos  # read up to here in this process (>= cp)
    open: dict[Pos, bool] = dataclasses.field(default_factory=dict)  # read past cp: finished?
    returned: set[Pos] = dataclasses.field(default_factory=set)  # open, unfinished, put back: hand out again
    written: Pos | None = None
    written_at: float = 0.0
    rescan_at: float = 0.0

    def advance(self, now_us: int) -> None:
        """Move the checkpoint over the finished prefix (never closer than SETTLE_US to now)."""
        limit: Pos = (now_us - SETTLE_US, "", -1)
        unfinished = [p for p, finished in self.open.items() if not finished]
        frontier = min(unfinished) if unfinished else self.cursor
        finished_before = [p for p, finished in self.open.items() if finished and p < frontier]
        target = max(finished_before) if unfinished and finished_before else (self.cp if unfinished else frontier)
        new = max(self.cp, min(target, limit))
        if new != self.cp:
            self.cp = new
            for p in [p for p in self.open if p <= new]:
                del self.open[p]


@dataclasses.dataclass
class _Shard:
    lease_until: float  # on the consumer's monotonic clock
    pairs: dict[str, _Pair]

    def busy(self) -> bool:
        return any(not finished for pair in self.pairs.values() for finished in pair.open.values())


class _Consumer:
    def __init__(self, db: Database, queue: str, owner: str) -> None:
        self.db, self.queue, self.owner = db, queue, owner
        self.clock = db.clock
        self.lock = threading.RLock()
        self.shards: dict[int, _Shard] = {}
        self.next_heartbeat = 0.0
        self.next_balance = 0.0
        self.workers = 1
        self.turn = 0

    # -- leases -------------------------------------------------------------------------------------------
    def maintain(self, *, force: bool = False) -> None:
        mono = self.clock.monotonic()
        if force or mono >= self.next_heartbeat:
            self.db.execute(HEARTBEAT, (self.queue, self.owner, now_us(self.clock), WORKER_TTL_SECONDS))
            live = {r.owner for r in self.db.execute(SELECT_WORKERS, (self.queue,))}
            self.workers = max(1, len(live | {self.owner}))
            self.next_heartbeat = mono + HEARTBEAT_SECONDS
        for shard, state in list(self.shards.items()):
            if state.lease_until - mono < LEASE_SECONDS / 2:
                started = self.clock.monotonic()
                if self._lease_cas(RENEW, (LEASE_SECONDS, self.owner, self.queue, shard, self.owner), shard):
                    state.lease_until = started + LEASE_SECONDS
                else:
                    del self.shards[shard]  # lost it (expired and taken): the new owner re-reads
        if not force and mono < self.next_balance and self.shards:
            return
        self.next_balance = mono + HEARTBEAT_SECONDS
        target = math.ceil(SHARDS / self.workers)
        for shard in sorted(self.shards, reverse=True):
            if len(self.shards) <= target:
                break
            if not self.shards[shard].busy():
                self.release(shard)
        if len(self.shards) >= target:
            return
        owners = {r.shard: r.owner for r in self.db.execute(SELECT_OWNERS, (self.queue, list(range(SHARDS))))}
        free = [s for s in range(SHARDS) if s not in owners and s not in self.shards]
        start = zlib.crc32(self.owner.encode()) % SHARDS  # workers start their search at different shards
        free.sort(key=lambda s: (s - start) % SHARDS)
        for shard in free:
            if len(self.shards) >= target:
                break
            started = self.clock.monotonic()
            if self._lease_cas(ACQUIRE, (self.queue, shard, self.owner, LEASE_SECONDS), shard):
                pairs = {r.grp: _Pair(cp=(r.due_us, r.key, r.attempt), cursor=(r.due_us, r.key, r.attempt))
                         for r in self.db.execute(SELECT_CHECKPOINTS, (self.queue, shard))}
                for pair in pairs.values():
                    pair.written = pair.cp
                self.shards[shard] = _Shard(lease_until=started + LEASE_SECONDS, pairs=pairs)

    def _lease_cas(self, statement: Statement, params: Params, shard: int) -> bool:
        """Run a lease transaction: whether this worker holds the shard after it. On a cluster under load a
        transaction can end with its outcome unknown (a timeout, or a proposal accepted by too few replicas):
        then the lease row is read serially, and the answer is whoever it names (if that read fails too, the
        shard is treated as not held: a lease this worker may hold still expires on its own)."""
        def settle() -> bool:
            try:
                row = self.db.execute(SHARD_OWNER_SERIAL, (self.queue, shard)).one()
            except Exception:  # noqa: BLE001 - unknown stays unknown: not held
                return False
            return row is not None and row.owner == self.owner

        return transact(self.db, statement, params, settle)

    def release(self, shard: int) -> None:
        state = self.shards.pop(shard)
        self.flush(state, shard, force=True)
        try:
            self.db.execute(RELEASE, (self.queue, shard, self.owner))
        except Exception as exc:
            if not outcome_unknown(exc):
                raise
            # Outcome unknown: if the lease is still ours it expires within LEASE_SECONDS.

    def stop(self) -> None:
        for shard in list(self.shards):
            self.release(shard)
        self.db.execute(REMOVE_WORKER, (self.queue, self.owner))

    # -- checkpoints --------------------------------------------------------------------------------------
    def flush(self, state: _Shard, shard: int, *, force: bool = False) -> None:
        mono = self.clock.monotonic()
        writes = []
        for grp, pair in state.pairs.items():
            if pair.cp != pair.written and (force or mono - pair.written_at >= CHECKPOINT_EVERY_SECONDS):
                writes.append((WRITE_CHECKPOINT, (self.queue, shard, grp, *pair.cp)))
                pair.written, pair.written_at = pair.cp, mono
        if writes:
            self.db.execute_many(writes)

    def owns(self, shard: int) -> bool:
        state = self.shards.get(shard)
        # Stop handing out a shard's items well before its lease could run out.
        return state is not None and state.lease_until - self.clock.monotonic() > LEASE_SECONDS / 4

    # -- take ---------------------------------------------------------------------------------------------
    def take(self, limit: int) -> list[WorkItem]:
        self.maintain()
        now = now_us(self.clock)
        mono = self.clock.monotonic()
        horizons = {r.grp: r.horizon_us for r in self.db.execute(SELECT_GROUPS, (self.queue,))}
        candidates: list[tuple[int, str, _Pair]] = []
        for shard in sorted(self.shards):
            if not self.owns(shard):
                continue
            state = self.shards[shard]
            for grp, horizon in horizons.items():
                pair = state.pairs.get(grp)
                if pair is None:
                    pair = state.pairs[grp] = _Pair(cp=START, cursor=START)
                if mono >= pair.rescan_at:  # back to the checkpoint: finds writes that landed late
                    pair.cursor, pair.rescan_at = pair.cp, mono + RESCAN_SECONDS
                if horizon is None or horizon < pair.cursor[0]:
                    continue  # nothing enqueued for this group after the cursor
                candidates.append((shard, grp, pair))
        if not candidates:
            self._flush_all()
            return []
        self.turn = (self.turn + 1) % len(candidates)
        candidates = candidates[self.turn:] + candidates[:self.turn]
        share = max(1, math.ceil(limit / len(candidates)))
        listings = [self.db.execute_async(SELECT_BUCKETS, (self.queue, grp, shard, pair.cursor[0] // BUCKET_US,
                                                           now // BUCKET_US, _BUCKETS_PER_READ))
                    for shard, grp, pair in candidates]
        buckets = [[r.bucket for r in listing.result()] for listing in listings]
        # The first bucket of every pair is read in one concurrent round; a pair whose first bucket runs out
        # before its share is filled goes on to its next buckets afterwards.
        first = [self._start_read(shard, grp, pair, listed[0], share, now) if listed else None
                 for (shard, grp, pair), listed in zip(candidates, buckets, strict=True)]
        out: list[WorkItem] = []
        for (shard, grp, pair), listed, future in zip(candidates, buckets, first, strict=True):
            if future is None:
                pair.cursor = max(pair.cursor, (now, "", -1))  # no bucket holds anything up to now
            elif len(out) < limit:
                out.extend(self._read(shard, grp, pair, listed, min(share, limit - len(out)), now, future))
            pair.advance(now)
        self._flush_all()
        return out

    def _start_read(self, shard: int, grp: str, pair: _Pair, bucket: int, want: int, now: int) -> Any:
        ask = want + sum(1 for p in pair.open if p > pair.cursor)  # items handed out already come back too
        return (ask, self.db.execute_async(SELECT_ITEMS, (self.queue, grp, shard, bucket, *pair.cursor, now, ask)))

    def _read(self, shard: int, grp: str, pair: _Pair, buckets: list[int], want: int, now: int, first: Any
              ) -> list[WorkItem]:
        got: list[WorkItem] = []
        for i, bucket in enumerate(buckets):
            ask, future = first if i == 0 else self._start_read(shard, grp, pair, bucket, want - len(got), now)
            rows = list(future.result())
            for r in rows:
                pos = (r.due_us, r.key, r.attempt)
                if pos in pair.open and pos not in pair.returned:
                    pair.cursor = max(pair.cursor, pos)
                    continue  # handed out already (or finished, waiting for the checkpoint)
                if len(got) >= want:
                    return got  # the share is full: the cursor stays before this row
                pair.cursor = max(pair.cursor, pos)
                pair.open[pos] = False
                pair.returned.discard(pos)
                got.append(WorkItem(queue=self.queue, group=grp, key=r.key, payload=json.loads(r.payload),
                                    attempts=r.attempt, shard=shard, due_us=r.due_us, last_error=r.last_error))
            if len(rows) >= ask:
                return got  # more in this bucket
            # The bucket is read up to now: past it (or, for the current bucket, up to now).
            end = (bucket + 1) * BUCKET_US
            pair.cursor = max(pair.cursor, (min(end, now), "", -1))
            if len(got) >= want:
                return got
        return got

    def _flush_all(self) -> None:
        for shard, state in self.shards.items():
            self.flush(state, shard)

    def finish(self, item: WorkItem) -> None:
        state = self.shards.get(item.shard)
        if state is None:
            return  # no longer ours: the new owner re-reads it (processing is idempotent)
        pair = state.pairs.get(item.group)
        if pair is None or item.pos not in pair.open:
            return
        pair.open[item.pos] = True
        pair.advance(now_us(self.clock))
        self.flush(state, item.shard)
        if state.lease_until - self.clock.monotonic() < LEASE_SECONDS / 2:
            self.maintain()  # a long batch keeps its leases

    def put_back(self, item: WorkItem) -> None:
        state = self.shards.get(item.shard)
        pair = state.pairs.get(item.group) if state is not None else None
        if pair is None or pair.open.get(item.pos) is not False:
            return
        # Still open and unfinished (the checkpoint stays before it, whatever finishes around it), marked to be
        # handed out again; the next take reads from the checkpoint to meet it.
        pair.returned.add(item.pos)
        pair.cursor = pair.cp


# Held by the Database (`db.held`), not cached: a consumer holds the leases this process took in Cassandra and the
# items it handed out and not yet finished. Evicting one (LRU) or clearing it (Caches.clear between tests) would
# leave its shards leased to nobody who remembers them until the TTL runs out, and drop `done` calls for items in
# flight (their checkpoints would stall, then they would run again). Released in `stop`.
def _consumer(db: Database, queue: str, owner: str) -> _Consumer:
    return db.held(("workqueue.consumer", queue, owner), lambda: _Consumer(db, queue, owner))


def _locked(db: Database, queue: str, owner: str, fn: Callable[[_Consumer], Any]) -> Any:
    consumer = _consumer(db, queue, owner)
    with consumer.lock:
        return fn(consumer)


def take(db: Database, queue: str, owner: str, limit: int) -> list[WorkItem]:
    """Up to `limit` due items of `queue`, from the shards `owner` holds (acquiring its share of shards first),
    an equal share from each active group. Each item must come back through `done` or `retry`; until then it
    is not handed out again by this owner, and no other owner holds its shard."""
    return _locked(db, queue, owner, lambda c: c.take(limit))


def done(db: Database, item: WorkItem, owner: str) -> None:
    """`item` is finished: the checkpoint of its group and shard may move past it (never deleted)."""
    _locked(db, item.queue, owner, lambda c: c.finish(item))


def retry(db: Database, item: WorkItem, owner: str, *, due_at_us: int, error: str) -> None:
    """Try `item` again at `due_at_us`: a new row (attempts + 1) in the bucket of that time, then the old one
    is finished. Until it is due it blocks nothing."""
    db.execute_many(enqueue_writes(item.queue, item.group, item.key, item.payload, due_at_us=due_at_us,
                                   clock=db.clock, _attempt=item.attempts + 1, _error=error))
    done(db, item, owner)


def put_back(db: Database, items: list[WorkItem], owner: str) -> None:
    """`items` were taken but not begun (a worker stopping mid-batch): they are handed out again, by this owner's
    next `take` or by the next holder of their shard."""
    def give_back(consumer: _Consumer) -> None:
        for item in items:
            consumer.put_back(item)

    if items:
        _locked(db, items[0].queue, owner, give_back)


def stop(db: Database, queue: str, owner: str) -> None:
    """Write the checkpoints and hand back every shard `owner` holds (a worker shutting down; a killed worker's
    leases simply expire after LEASE_SECONDS)."""
    _locked(db, queue, owner, lambda c: c.stop())
    db.release(("workqueue.consumer", queue, owner))


def backlog(db: Database, queue: str) -> dict:
    """Items after the checkpoints, per group: {"groups": {group: n}, "total": n, "capped": [groups]}.

    Counts at most BACKLOG_CAP rows per group (a bounded read); includes retries not yet due, and items finished
    within the last SETTLE_US + CHECKPOINT_EVERY_SECONDS (the checkpoint has not passed them yet)."""
    groups = [r.grp for r in db.execute(SELECT_GROUPS, (queue,))]
    cps: dict[tuple[int, str], Pos] = {}
    for shard in range(SHARDS):
        for r in db.execute(SELECT_CHECKPOINTS, (queue, shard)):
            cps[(shard, r.grp)] = (r.due_us, r.key, r.attempt)
    counts: dict[str, int] = {}
    capped = []
    for grp in groups:
        n = 0
        for shard in range(SHARDS):
            cp = cps.get((shard, grp), START)
            listing = db.execute(SELECT_BUCKETS, (queue, grp, shard, cp[0] // BUCKET_US, 2**62, 1000))
            for r in listing:
                n += len(list(db.execute(COUNT_ITEMS, (queue, grp, shard, r.bucket, *cp, BACKLOG_CAP - n + 1))))
                if n > BACKLOG_CAP:
                    break
            if n > BACKLOG_CAP:
                capped.append(grp)
                n = BACKLOG_CAP
                break
        counts[grp] = n
    return {"queue": queue, "groups": {g: n for g, n in counts.items() if n}, "total": sum(counts.values()),
            "capped": capped}
