"""Item state and the exclusive parts of the workflow: leases, hold slots and team quotas.

Owner of tagging_item_state, tagging_holds and tagging_team_usage. Every transition that needs exclusivity is
a lightweight transaction on ONE small partition: the item's own (claim, submit, skip, expiry, verify,
disable), the tagger's hold slots, or the team's usage row. Nothing else is conditional: queue entries, effort
events and figures are derived from these and rewritten idempotently.

Every write to a cell a transaction manages is itself a transaction (queueing an item, naming a slot, creating
a slot, repairing a usage shard). A Paxos commit carries the coordinator's timestamp and a plain write the
client's, so a plain write from a client whose clock is behind would lose to the transaction before it
(tests/tagging/test_consistency.py). Reads that follow a transaction are serial reads (LOCAL_SERIAL): they see
the committed state even where a replica lags.

A transaction can end with its outcome unknown (a timeout while a node is down or paused): it may have applied.
Each is then settled by a serial read of its row (db.transact), by what only that transaction writes: the
lease id and times it set, or, for a usage shard, its own operation id among the shard's last 32.
"""

from __future__ import annotations

import dataclasses
import os
import random
import secrets
import threading
from typing import Any

from cassandra import ConsistencyLevel

from api.db import Database, Statement, outcome_unknown, transact, was_applied

TABLES = frozenset({"tagging_item_state", "tagging_holds", "tagging_team_usage"})

NEW, IN_PROGRESS, TAGGED, VERIFIED = "New", "InProgress", "Tagged", "QAVerified"
DISABLED, MISSING = "Disabled", "SourceMissing"
NOT_QUEUED, RETURNED = -1, -2  # queue_pos values of a New item that no queue entry hands out
FREE = -1  # a hold slot's seq when free

_STATE_COLS = ("status, queue_pos, holder, team, lease_id, lease_from_us, lease_until_us, categories, subcategories, "
               "keywords, tagged_us, verification, verifier, note, verified_us")

PUT_NEW = Statement("INSERT INTO tagging_item_state (project, seq, status, queue_pos) VALUES (?, ?, 'New', -1)")
GET_STATE = Statement(f"SELECT seq, {_STATE_COLS} FROM tagging_item_state WHERE project = ? AND seq = ?")
# After a transaction: a serial read sees what it committed even when the replica a LOCAL_ONE read picks lags.
GET_STATE_SERIAL = Statement(f"SELECT seq, {_STATE_COLS} FROM tagging_item_state WHERE project = ? AND seq = ?",
                             consistency=ConsistencyLevel.LOCAL_SERIAL, name="SELECT tagging_item_state (serial)")
GET_STATES = Statement(f"SELECT seq, {_STATE_COLS} FROM tagging_item_state WHERE project = ? AND seq IN ?",
                       name="SELECT tagging_item_state (several)")
# The owner queues a New item it read as not queued (or returned). A transaction, not a plain write: after an
# expiry or a skip (Paxos, the coordinator's timestamp) a plain write from a client clock behind would be lost
# and the item stranded, returned but never queued.
SET_QUEUED = Statement(
    "UPDATE tagging_item_state SET queue_pos = ? WHERE project = ? AND seq = ? IF status = 'New' AND queue_pos = ?",
    idempotent=False,
    name="UPDATE tagging_item_state (queue)")
CLAIM = Statement(
    "UPDATE tagging_item_state SET status = 'InProgress', holder = ?, team = ?, lease_id = ?, lease_from_us = ?, "
    "lease_until_us = ? WHERE project = ? AND seq = ? IF status = 'New' AND queue_pos = ?", idempotent=False,
    name="UPDATE tagging_item_state (claim)")
RENEW = Statement(
    "UPDATE tagging_item_state SET lease_until_us = ? WHERE project = ? AND seq = ? "
    "IF status = 'InProgress' AND holder = ? AND lease_id = ?", idempotent=False,
    name="UPDATE tagging_item_state (renew)")
SUBMIT = Statement(
    "UPDATE tagging_item_state SET status = 'Tagged', categories = ?, subcategories = ?, keywords = ?, "
    "tagged_us = ?, verification = 'Pending' WHERE project = ? AND seq = ? "
    "IF status = 'InProgress' AND holder = ? AND lease_id = ?", idempotent=False,
    name="UPDATE tagging_item_state (submit)")
SKIP = Statement(
    "UPDATE tagging_item_state SET status = 'New', queue_pos = -2, lease_until_us = ? WHERE project = ? AND seq = ? "
    "IF status = 'InProgress' AND holder = ? AND lease_id = ?", idempotent=False,
    name="UPDATE tagging_item_state (skip)")
EXPIRE = Statement(
    "UPDATE tagging_item_state SET status = 'New', queue_pos = -2 WHERE project = ? AND seq = ? "
    "IF status = 'InProgress' AND lease_id = ? AND lease_until_us <= ?", idempotent=False,
    name="UPDATE tagging_item_state (expire)")
HOLDER_MISSING = Statement(
    "UPDATE tagging_item_state SET status = 'SourceMissing', tagged_us = ? WHERE project = ? AND seq = ? "
    "IF status = 'InProgress' AND holder = ? AND lease_id = ?", idempotent=False,
    name="UPDATE tagging_item_state (missing)")
# An admin acts on what they saw: the transition applies only if the item is still in that state and lease.
ADMIN_SET = Statement(
    "UPDATE tagging_item_state SET status = ?, tagged_us = ? WHERE project = ? AND seq = ? "
    "IF status = ? AND lease_id = ?", idempotent=False,
    name="UPDATE tagging_item_state (admin)")
ADMIN_SET_NEVER_LEASED = Statement(
    "UPDATE tagging_item_state SET status = ?, tagged_us = ? WHERE project = ? AND seq = ? "
    "IF status = ? AND lease_id = null", idempotent=False,
    name="UPDATE tagging_item_state (admin, never leased)")
VERIFY = Statement(
    "UPDATE tagging_item_state SET status = 'QAVerified', verification = ?, verifier = ?, note = ?, "
    "verified_us = ? WHERE project = ? AND seq = ? IF status = 'Tagged' AND verification = 'Pending'",
    idempotent=False,
    name="UPDATE tagging_item_state (verify)")

PUT_SLOT = Statement("INSERT INTO tagging_holds (project, user_id, slot, seq) VALUES (?, ?, ?, -1) IF NOT EXISTS",
                     idempotent=False, name="INSERT tagging_holds (make slot)")
SLOTS = Statement("SELECT slot, seq, lease_id, since_us FROM tagging_holds WHERE project = ? AND user_id = ?")
SLOT_SERIAL = Statement(
    "SELECT slot, seq, lease_id, since_us FROM tagging_holds WHERE project = ? AND user_id = ? AND slot = ?",
    consistency=ConsistencyLevel.LOCAL_SERIAL, name="SELECT tagging_holds (serial)")
# A slot is taken by compare-and-set on the lease it was seen with (null for a slot never used), naming the item
# to claim at once: a slot whose lease ended (the item it names finished or went back under that lease) is free
# without a write, so a submit, an expiry, a report or a disable never touches the slot (see `slot_use`).
TAKE_SLOT = Statement(
    "UPDATE tagging_holds SET seq = ?, lease_id = ?, since_us = ? WHERE project = ? AND user_id = ? AND slot = ? "
    "IF lease_id = ?", idempotent=False,
    name="UPDATE tagging_holds (take slot)")
# A claim refused for the item the slot names, and granted for another: the slot names that one (a transaction,
# as the reservation was one: a plain write from a client clock behind would be lost).
SET_SLOT_ITEM = Statement(
    "UPDATE tagging_holds SET seq = ? WHERE project = ? AND user_id = ? AND slot = ? IF lease_id = ?",
    idempotent=False,
    name="UPDATE tagging_holds (name slot)")
FREE_SLOT = Statement(
    "UPDATE tagging_holds SET seq = -1 WHERE project = ? AND user_id = ? AND slot = ? IF lease_id = ?",
    idempotent=False,
    name="UPDATE tagging_holds (free slot)")

USAGE_SHARDS = 8
PUT_USAGE = Statement(
    "INSERT INTO tagging_team_usage (project, team, shard, used, recent_ops) VALUES (?, ?, ?, 0, []) IF NOT EXISTS",
    idempotent=False,
    name="INSERT tagging_team_usage (make shard)")
GET_USAGE = Statement(
    "SELECT shard, used, recent_ops FROM tagging_team_usage WHERE project = ? AND team = ? AND shard IN ?")
GET_USAGE_QUORUM = Statement(
    "SELECT shard, used, recent_ops FROM tagging_team_usage WHERE project = ? AND team = ? AND shard IN ?",
    consistency=ConsistencyLevel.LOCAL_QUORUM, name="SELECT tagging_team_usage (quorum)")
GET_SHARD_SERIAL = Statement(
    "SELECT shard, used, recent_ops FROM tagging_team_usage WHERE project = ? AND team = ? AND shard = ?",
    consistency=ConsistencyLevel.LOCAL_SERIAL, name="SELECT tagging_team_usage (serial)")
# Taking a unit: the bound is in the condition, so a shard that looks full by a stale guess is still tried
# (`IF used = <guess> AND used < <share>`): the refusal returns the current value, which may have room. The
# condition names the shard's last operations too (null on a shard made before cql/0260: a condition, never a
# written value), and the write appends this one's id: an unknown outcome is settled by looking for it.
TAKE_UNIT = Statement(
    "UPDATE tagging_team_usage SET used = ?, recent_ops = ? WHERE project = ? AND team = ? AND shard = ? "
    "IF used = ? AND used < ? AND recent_ops = ?", idempotent=False,
    name="UPDATE tagging_team_usage (take unit)")
GIVE_UNIT = Statement(
    "UPDATE tagging_team_usage SET used = ?, recent_ops = ? WHERE project = ? AND team = ? AND shard = ? "
    "IF used = ? AND used > 0 AND recent_ops = ?", idempotent=False,
    name="UPDATE tagging_team_usage (give unit)")
RECENT_OPS = 32
# Reconcile's repair: a compare-and-set too (the shard's cell is managed by transactions).
SET_USAGE = Statement(
    "UPDATE tagging_team_usage SET used = ? WHERE project = ? AND team = ? AND shard = ? IF used = ?",
    idempotent=False,
    name="UPDATE tagging_team_usage (repair)")


@dataclasses.dataclass(frozen=True)
class State:
    seq: int
    status: str
    queue_pos: int
    holder: str | None
    team: str | None
    lease_id: int | None
    lease_from_us: int | None
    lease_until_us: int | None
    categories: tuple[str, ...]
    subcategories: tuple[str, ...]
    keywords: tuple[str, ...]
    tagged_us: int | None
    verification: str | None
    verifier: str | None
    note: str | None
    verified_us: int | None

    @classmethod
    def from_row(cls, row: Any, seq: int | None = None) -> State:
        return cls(row.seq if seq is None else seq, row.status, row.queue_pos, row.holder, row.team, row.lease_id,
                   row.lease_from_us, row.lease_until_us, tuple(row.categories or ()),
                   tuple(row.subcategories or ()), tuple(row.keywords or ()), row.tagged_us, row.verification,
                   row.verifier, row.note, row.verified_us)

    def held_by(self, user: str, lease_id: int) -> bool:
        return self.holder == user and self.lease_id == lease_id


# A lease id carries its start time and the holder's slot (start_us << 11 | slot << 4 | 4 random bits): a submit
# knows both from the id it is given, without reading the item or the slots first.
_SLOT_BITS, _RANDOM_BITS = 7, 4


def new_lease_id(start_us: int, slot: int) -> int:
    return (start_us << (_SLOT_BITS + _RANDOM_BITS)) | (slot << _RANDOM_BITS) | secrets.randbits(_RANDOM_BITS)


def lease_start(lease_id: int) -> int:
    return lease_id >> (_SLOT_BITS + _RANDOM_BITS)


def lease_slot(lease_id: int) -> int:
    return (lease_id >> _RANDOM_BITS) & ((1 << _SLOT_BITS) - 1)


def new_writes(project: str, first: int, count: int) -> list[tuple[Statement, Any]]:
    return [(PUT_NEW, (project, seq)) for seq in range(first, first + count)]


def get(db: Database, project: str, seq: int, *, serial: bool = False) -> State | None:
    """One item's state; `serial` after a transaction on it (sees the committed state on any replica)."""
    row = db.execute(GET_STATE_SERIAL if serial else GET_STATE, (project, seq)).one()
    return State.from_row(row) if row is not None and row.status is not None else None


def many(db: Database, project: str, seqs: list[int]) -> dict[int, State]:
    """States of many items: partitions of 100 per request, concurrently."""
    futures = [db.execute_async(GET_STATES, (project, seqs[i:i + 100])) for i in range(0, len(seqs), 100)]
    return {r.seq: State.from_row(r) for f in futures for r in f.result() if r.status is not None}


def set_queued_writes(project: str, seq: int, pos: int, seen_pos: int) -> tuple[Statement, Any]:
    """Point a New item at its queue entry, if it is still New and not queued (`seen_pos`: -1 or -2)."""
    return SET_QUEUED, (pos, project, seq, seen_pos)


def _settle(db: Database, project: str, seq: int, test: Any) -> Any:
    """A settle function for db.transact: a serial read of the item, `test` of its state."""
    def settle() -> bool:
        state = get(db, project, seq, serial=True)
        return state is not None and bool(test(state))
    return settle


def claim(db: Database, project: str, seq: int, queue_pos: int, user: str, team: str, lease_id: int,
          from_us: int, until_us: int) -> bool:
    return transact(db, CLAIM, (user, team, lease_id, from_us, until_us, project, seq, queue_pos),
                    _settle(db, project, seq, lambda s: s.status == IN_PROGRESS and s.lease_id == lease_id))


def renew(db: Database, project: str, seq: int, user: str, lease_id: int, until_us: int) -> bool:
    return transact(db, RENEW, (until_us, project, seq, user, lease_id),
                    _settle(db, project, seq, lambda s: s.lease_id == lease_id and s.lease_until_us == until_us))


def submit(db: Database, project: str, seq: int, user: str, lease_id: int, categories: list[str],
           subcategories: list[str], keywords: list[str], at_us: int) -> bool:
    return transact(db, SUBMIT, (categories, subcategories, keywords, at_us, project, seq, user, lease_id),
                    _settle(db, project, seq, lambda s: s.lease_id == lease_id and s.tagged_us == at_us
                            and s.status in (TAGGED, VERIFIED)))


def skip(db: Database, project: str, seq: int, user: str, lease_id: int, now_us: int) -> bool:
    """Give the item back; the lease ends now (the stored end time keys its effort event)."""
    return transact(db, SKIP, (now_us, project, seq, user, lease_id),
                    _settle(db, project, seq, lambda s: s.lease_id == lease_id and s.lease_until_us == now_us
                            and s.status == NEW))


def expire(db: Database, project: str, seq: int, lease_id: int, until_us: int, now_us: int) -> bool:
    """Return an item whose lease (ending at `until_us`) ran out; False: submitted, renewed or returned
    meanwhile. Settled as applied when the item is New under this lease with that end (a skip would have set
    the end to its own time)."""
    return transact(db, EXPIRE, (project, seq, lease_id, now_us),
                    _settle(db, project, seq, lambda s: s.lease_id == lease_id and s.status == NEW
                            and s.lease_until_us == until_us))


def holder_missing(db: Database, project: str, seq: int, user: str, lease_id: int, at_us: int) -> bool:
    return transact(db, HOLDER_MISSING, (at_us, project, seq, user, lease_id),
                    _settle(db, project, seq, lambda s: s.status == MISSING and s.tagged_us == at_us))


def admin_set(db: Database, project: str, seen: State, status: str, at_us: int) -> bool:
    settle = _settle(db, project, seen.seq, lambda s: s.status == status and s.tagged_us == at_us)
    if seen.lease_id is None:
        return transact(db, ADMIN_SET_NEVER_LEASED, (status, at_us, project, seen.seq, seen.status), settle)
    return transact(db, ADMIN_SET, (status, at_us, project, seen.seq, seen.status, seen.lease_id), settle)


def verify(db: Database, project: str, seq: int, result: str, verifier: str, note: str, at_us: int) -> bool:
    return transact(db, VERIFY, (result, verifier, note, at_us, project, seq),
                    _settle(db, project, seq, lambda s: s.status == VERIFIED and s.verified_us == at_us
                            and s.verifier == verifier))


# -- hold slots ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Slot:
    slot: int
    seq: int
    lease_id: int | None
    since_us: int | None


def make_slots(db: Database, project: str, user: str, count: int) -> None:
    """Create the missing hold slots 0..count-1 of a person (existing ones keep what they hold)."""
    have = {s.slot for s in slots(db, project, user)}
    for slot in range(count):
        if slot not in have:  # IF NOT EXISTS: a slot taken meanwhile (another tab) is never reset to free
            db.execute(PUT_SLOT, (project, user, slot))


_KEPT_MAX = 100_000  # people's slots, and ended leases, a process remembers


def slots(db: Database, project: str, user: str, *, fresh: bool = True) -> list[Slot]:
    """A person's hold slots; `fresh=False`: as this process last read or wrote them, if it did. Such a view
    is a guess that costs nothing when wrong: every change of a slot is a compare-and-set on the lease it was
    seen with, refused when another process changed it since, and a slot seen held is held (it moves on only
    once its lease has ended)."""
    kept = db.caches.lru("tagging.slots_seen", maxsize=_KEPT_MAX)
    if not fresh:
        hit = kept.get((project, user))
        if hit is not None:
            return hit
    found = [Slot(r.slot, r.seq, r.lease_id, r.since_us) for r in db.execute(SLOTS, (project, user))]
    kept.set((project, user), found)
    return found


def _keep_slot(db: Database, project: str, user: str, slot: Slot | None, number: int) -> None:
    """What this process wrote to slot `number` (None: unknown now, read again next time)."""
    kept = db.caches.lru("tagging.slots_seen", maxsize=_KEPT_MAX)
    known = kept.get((project, user))
    if known is None:
        return
    if slot is None:
        kept.pop((project, user))
    else:
        kept.set((project, user), [slot if s.slot == number else s for s in known])


def lease_ended(db: Database, project: str, lease_id: int) -> None:
    """Note that a lease has ended (its item submitted, skipped, reported or disabled under it): a lease never
    comes back, so `slot_use` can free its slot without reading the item."""
    db.caches.lru("tagging.leases_ended", maxsize=_KEPT_MAX).set((project, lease_id), True)


def _slot_serial(db: Database, project: str, user: str, slot: int) -> Slot | None:
    row = db.execute(SLOT_SERIAL, (project, user, slot)).one()
    return Slot(row.slot, row.seq, row.lease_id, row.since_us) if row is not None else None


# What a hold slot is used for now (`slot_use`).
SLOT_FREE, SLOT_HELD, SLOT_BUSY = "free", "held", "busy"


def slot_use(db: Database, project: str, slot: Slot, lease_us: int, now_us: int) -> tuple[str, State | None]:
    """What `slot` is used for, decided by reading (a lease's end frees its slot without a write):

    - SLOT_HELD (with the item's state): the item it names is in progress under the slot's lease;
    - SLOT_FREE: never used, freed, or the item it names is no longer in progress under the slot's lease;
    - SLOT_BUSY: taken less than a lease length ago for an item not (yet) under its lease: a claim may be in
      flight (another tab).

    An item under the slot's lease and no longer in progress stays so (a lease never comes back), so even a
    lagging replica's answer is safe there. An item under another lease is only trusted from a serial read:
    a lagging replica could show the state before the slot's claim."""
    if slot.seq == FREE or slot.lease_id is None:
        return SLOT_FREE, None
    if (project, slot.lease_id) in db.caches.lru("tagging.leases_ended", maxsize=_KEPT_MAX):
        return SLOT_FREE, None
    if slot.seq >= 0:
        state = get(db, project, slot.seq)
        if state is not None and state.lease_id == slot.lease_id:
            return (SLOT_HELD, state) if state.status == IN_PROGRESS else (SLOT_FREE, None)
    if (slot.since_us or 0) + lease_us >= now_us:
        return SLOT_BUSY, None
    if slot.seq >= 0:  # older than a lease: the claim never applied, or the item went on under another lease
        state = get(db, project, slot.seq, serial=True)
        if state is not None and state.lease_id == slot.lease_id and state.status == IN_PROGRESS:
            return SLOT_HELD, state
    return SLOT_FREE, None


def take_slot(db: Database, project: str, user: str, seen: Slot, seq: int, lease_id: int, now_us: int) -> bool:
    """Take a slot found free (`seen`, as read) for lease `lease_id`, naming the item `seq` it is about to
    claim: refused when another request took it since (its lease changed)."""
    def settle() -> bool:
        found = _slot_serial(db, project, user, seen.slot)
        return found is not None and found.lease_id == lease_id
    taken = transact(db, TAKE_SLOT, (seq, lease_id, now_us, project, user, seen.slot, seen.lease_id), settle)
    _keep_slot(db, project, user, Slot(seen.slot, seq, lease_id, now_us) if taken else None, seen.slot)
    return taken


def name_slot(db: Database, project: str, user: str, slot: int, seq: int, lease_id: int) -> bool:
    """The slot of lease `lease_id` names `seq` (its claim of the item first named was refused)."""
    def settle() -> bool:
        found = _slot_serial(db, project, user, slot)
        return found is not None and found.lease_id == lease_id and found.seq == seq
    named = transact(db, SET_SLOT_ITEM, (seq, project, user, slot, lease_id), settle)
    _keep_slot(db, project, user, None, slot)
    return named


def free_slot(db: Database, project: str, user: str, slot: int, lease_id: int) -> bool:
    """Free the slot if this lease still holds it (settled: freed, or no longer this lease's)."""
    def settle() -> bool:
        found = _slot_serial(db, project, user, slot)
        return found is None or found.lease_id != lease_id or found.seq == FREE
    freed = transact(db, FREE_SLOT, (project, user, slot, lease_id), settle)
    _keep_slot(db, project, user, Slot(slot, FREE, lease_id, None) if freed else None, slot)
    return freed


def free_slot_of_lease(db: Database, project: str, user: str, lease_id: int) -> None:
    """Free the slot a lease holds (the lease id names it), if it still holds it."""
    free_slot(db, project, user, lease_slot(lease_id), lease_id)


# -- team quotas --------------------------------------------------------------------------------------------

def shard_quota(quota: int, shard: int) -> int:
    """A shard's share of the quota: the shares add up to the quota exactly."""
    return quota // USAGE_SHARDS + (1 if shard < quota % USAGE_SHARDS else 0)


def make_usage(db: Database, project: str, team: str) -> None:
    for shard in range(USAGE_SHARDS):
        db.execute(PUT_USAGE, (project, team, shard))


# A shard as seen: its usage and the ids of the operations that changed it last (None: a shard made before
# cql/0260, whose condition is `recent_ops = null`).
ShardSeen = tuple[int, tuple[int, ...] | None]


def _shards(db: Database, project: str, team: str, *, quorum: bool = False) -> dict[int, ShardSeen]:
    rows = db.execute(GET_USAGE_QUORUM if quorum else GET_USAGE, (project, team, list(range(USAGE_SHARDS))))
    return {r.shard: _seen(r) for r in rows}


def usage_by_shard(db: Database, project: str, team: str, *, quorum: bool = False) -> dict[int, int]:
    """Each shard's usage; `quorum`: at LOCAL_QUORUM, which sees every committed compare-and-set."""
    return {shard: used for shard, (used, _ops) in _shards(db, project, team, quorum=quorum).items()}


def usage(db: Database, project: str, team: str) -> int:
    return sum(usage_by_shard(db, project, team).values())


_GUESSES_MAX = 10_000  # (project, team, shard) values remembered: 8 shards a team, 1,250 teams
_NO_CAP = 2**31 - 1


def change_usage(db: Database, project: str, team: str, delta: int, quota: int | None) -> bool:
    """Take (+1) or give back (-1) one unit of the team's quota with compare-and-set on one shard; False only
    when every shard is full (or, giving back, empty) as of a LOCAL_QUORUM read or a refusal's current value.

    The first try on a shard uses the last value this process saw (a wrong guess costs one refused
    compare-and-set, which returns the current value; never a wrong count). Shards that look full by those
    guesses are not given up: when no shard looks usable, one LOCAL_QUORUM read of the team's shards refreshes
    every guess (it sees each committed compare-and-set), and the shards with room are tried. Units given back
    by another process (the worker's expiries) are so reused, and a team is refused only when its quota is
    really used (issue 30, finding 8). The bound is in each compare-and-set's condition, so no guess can pass
    it. A compare-and-set whose outcome is unknown is settled by a serial read: applied if the shard's recent
    operations hold this call's id."""
    guesses = db.caches.lru("tagging.usage_guess", maxsize=_GUESSES_MAX)
    op = secrets.randbits(62) + 1  # this call's id in the shard's recent operations

    def cap_of(shard: int) -> int:
        return _NO_CAP if quota is None or delta < 0 else shard_quota(quota, shard)

    def usable(shard: int, seen: ShardSeen | None) -> bool:
        return seen is None or (seen[0] > 0 if delta < 0 else seen[0] < cap_of(shard))

    order = [s for s in _shard_order() if cap_of(s) > 0]
    locks = db.caches.lru("tagging.usage_locks", maxsize=_GUESSES_MAX)
    tried: set[int] = set()
    for refreshed in (False, True):
        if refreshed:  # every untried shard looked full: one quorum read of them all before refusing
            for shard, seen in _shards(db, project, team, quorum=True).items():
                guesses.set((project, team, shard), seen)
        for shard in order:
            if shard in tried or not usable(shard, guesses.get((project, team, shard))):
                continue
            tried.add(shard)
            # One compare-and-set at a time per shard in this process (the guess is then this process's last
            # write); not waited for long: a conflict costs a refused transaction, a long wait more.
            lock = locks.setdefault((project, team, shard), threading.Lock)
            locked = lock.acquire(timeout=_LOCK_WAIT)
            try:
                seen = guesses.get((project, team, shard))
                if usable(shard, seen) and _change_shard(db, project, team, shard, delta, cap_of(shard), seen,
                                                         guesses, op):
                    return True
            finally:
                if locked:
                    lock.release()
    return False


_LOCK_WAIT = 0.05


def _shard_order() -> list[int]:
    """The order in which this process tries a team's usage shards: one of its own two first (by process id,
    so consecutive gunicorn workers get disjoint pairs), then the other, then the rest at random. A process
    that keeps to its own shards finds them as it left them: its guess holds and its compare-and-set applies
    the first time (with every process on every shard, two thirds of the guesses were stale and the unit cost
    1.7 transactions, bench/tagging.py). Any process still uses every shard once its own are full."""
    pid = os.getpid()
    own = random.sample([(2 * pid) % USAGE_SHARDS, (2 * pid + 1) % USAGE_SHARDS], 2)
    return own + random.sample([s for s in range(USAGE_SHARDS) if s not in own], USAGE_SHARDS - 2)


def _change_shard(db: Database, project: str, team: str, shard: int, delta: int, cap: int, seen: ShardSeen | None,
                  guesses: Any, op: int) -> bool:
    key = (project, team, shard)
    if seen is None:
        seen = _shards(db, project, team).get(shard, (0, ()))

    def settle() -> bool:  # the outcome is unknown: did this operation apply? (and the shard as it is now)
        nonlocal seen
        seen = _seen(db.execute(GET_SHARD_SERIAL, (project, team, shard)).one())
        return op in (seen[1] or ())

    for _ in range(50):
        current, ops = seen
        written = [*(ops or ())][-(RECENT_OPS - 1):] + [op]
        condition = list(ops) if ops is not None else None  # None only in the condition: `recent_ops = null`
        statement, params = (TAKE_UNIT, (current + 1, written, project, team, shard, current, cap, condition)) \
            if delta > 0 else (GIVE_UNIT, (current - 1, written, project, team, shard, current, condition))
        try:
            row = db.execute(statement, params).one()
        except Exception as exc:
            if not outcome_unknown(exc):
                raise
            if settle():  # applied: `seen` is the shard now
                guesses.set(key, seen)
                return True
        else:
            if row is not None and row[0]:
                guesses.set(key, (current + delta, tuple(written)))
                return True
            seen = _seen(row)  # the refusal's row: the shard now
        stuck = seen == (current, ops)  # refused on the bound itself: full (or empty)
        if stuck or (delta > 0 and seen[0] >= cap) or (delta < 0 and seen[0] <= 0):
            break
    guesses.set(key, seen)
    return False


def _seen(row: Any) -> ShardSeen:
    if row is None:
        return (0, ())
    return (row.used or 0, tuple(row.recent_ops) if row.recent_ops is not None else None)


def force_usage(db: Database, project: str, team: str, seen: dict[int, int], used_by_shard: dict[int, int]
                ) -> bool:
    """Set each shard's usage (reconcile's repair) if it is still what reconcile read; False if any moved."""
    done = True
    for shard, used in used_by_shard.items():
        done &= was_applied(db.execute(SET_USAGE, (used, project, team, shard, seen.get(shard, 0))))
    return done
