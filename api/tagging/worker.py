"""The project owner: one worker at a time per project (a lease in tagging_control) returns expired and skipped
items to the queue, keeps the queue at its size, moves the lane heads past taken entries, and adds new effort
events to the figures. `chronicle tagging worker` runs it for every project; `fill-queues` runs one pass.

A pass: (1) read the lease log from its checkpoint and return expired leases (a transaction per item, so a
submit racing the expiry either wins or loses whole); (2) read the waiting entries, move the head past taken
ones, pick items to queue (returned ones first, then New items from the fill cursor); (3) read new effort
events; (4) commit #1 reserves queue positions (tails) with the version check; (5) write the entries, then
point the items at them; (6) commit #2 stores heads, cursor, checkpoints and the changed figures. A crash
between steps is repaired by the next pass: every step is idempotent or re-derived from the item states;
(7) the keyword counts commit #2 changed go to tagging_keyword_uses (control.py), and the events it counted are
marked counted in the log.

Step (3) first reads the notices of events written late (effort.py) after their own checkpoint, and counts
each event they name that lies behind the events checkpoint and is not marked counted; then the log after the
events checkpoint.

Keyword counts are not held in memory: a pass reads the counts of the keywords its events use, and the top-5
is updated from those changed counts only (counts only grow between two loads, so the new top five are among
the old five and the changed ones). Each project is served on its own thread of a pool, so one project's slow
pass never delays another's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import logging
import threading
import uuid
from concurrent.futures import Future
from typing import Any

from cassandra import ConsistencyLevel

from api.db import Database, reads_at
from api.tagging import control, effort, figures, items, projects, queue, service, stamps
from api.tagging.control import Positions

log = logging.getLogger(__name__)

SETTLE_US = 5_000_000  # checkpoints stay this far behind now: writes in flight land after them
LEASE_TTL = 30  # seconds the owner lease lives without a commit
_REVIEW_WINDOW = 1000
PROJECT_THREADS = 8  # projects served at once by one worker process
_QUEUEING_IN_FLIGHT = 8  # the owner's transactions queueing items, in flight at once


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What a pass read and decided before it commits (steps 1-3)."""

    now: int
    returned: list[int]  # items whose lease was returned (expired now, or skipped) and are to be queued again
    expired: int  # of those, the leases this pass expired
    tag_head: int  # the first waiting entry of the tag lane
    live: int  # waiting entries nobody took yet
    to_queue: list[int]  # items to append to the tag lane, returned ones first
    fill_cursor: int  # where the next pass looks for New items
    events: list[effort.Event]  # effort events not yet in the figures
    tagged: list[int]  # items to append to the review lane
    review_head: int
    notices: list[effort.Notice]  # notices of late events read (after the late checkpoint, not yet handled)
    notices_upto: int  # the time up to which notices were read

    @property
    def queued(self) -> int:
        return self.live + len(self.to_queue)


class ProjectOwner:
    """Holds one project while it can: `step()` runs a pass and returns what it did."""

    def __init__(self, db: Database, project: str, owner: str | None = None) -> None:
        self.db = db
        self.project = project
        self.owner = owner or f"{uuid.uuid4().hex[:12]}"
        self.pos: Positions | None = None
        self.figures: figures.Figures = {}  # every figure but keyword counts (people, categories)
        self.rankings: control.Rankings = {}
        self.counts_unwritten = False  # the last commit's keyword counts are not all stored yet

    def acquire(self) -> bool:
        if not control.acquire(self.db, self.project, self.owner, LEASE_TTL):
            return False
        return self._load()

    def _load(self) -> bool:
        self.pos, self.figures, self.rankings = control.load(self.db, self.project)
        if self.pos is not None:
            # The last commit's counts, in case its owner died before writing them (idempotent values).
            self.counts_unwritten = True
            self._write_counts()
        return self.pos is not None

    def _write_counts(self) -> None:
        """Store the keyword counts of the last commit (at its version) and mark the events it counted. A pass
        never starts before both are stored: it reads the counts of its keywords from the table, and a notice's
        event is counted only when it is not marked."""
        if self.counts_unwritten and self.pos is not None:
            control.write_keyword_uses(self.db, self.project, self.pos.keywords_pending, self.pos.version)
            effort.mark_counted(self.db, self.project, self.pos.counted_pending)
        self.counts_unwritten = False

    def release(self) -> None:
        control.release(self.db, self.project, self.owner)

    def step(self) -> dict[str, int]:
        """One pass (steps 1-6 of the module's docstring); {} without a project or a lease. Its reads are at
        LOCAL_QUORUM: the pass moves its checkpoints past what it read, so an event or lease end a lagging replica
        had not received yet (a node back from a pause, hints still replaying) would never be counted."""
        with reads_at(ConsistencyLevel.LOCAL_QUORUM):
            return self._step()

    def _step(self) -> dict[str, int]:
        project = projects.get(self.db, self.project)
        if project is None or self.pos is None:
            return {}
        self._write_counts()  # left over by a pass whose count write failed
        seen = self.pos
        plan = self._plan(project, seen, stamps.now_us(self.db))
        # (4) reserve the positions this pass appends at: commit #1 moves the tails (with the version check)
        reserve = dataclasses.replace(seen, tag_tail=seen.tag_tail + len(plan.to_queue),
                                      review_tail=seen.review_tail + len(plan.tagged))
        if not control.commit(self.db, self.project, self.owner, seen, reserve, {}, LEASE_TTL):
            return self._lost()
        self._append(project, seen, plan)  # (5)
        new, changed, rankings = self._advanced(seen, reserve, plan)  # (6)
        if not control.commit(self.db, self.project, self.owner, reserve, new, changed, LEASE_TTL, rankings):
            return self._lost()
        self.pos = new
        self.rankings.update(rankings)
        self.counts_unwritten = True  # (7) at the commit's version: a successor's later counts always win
        self._write_counts()
        return {"queued": len(plan.to_queue), "returned": len(plan.returned), "expired": plan.expired,
                "events": len(plan.events), "waiting": plan.queued}

    def _plan(self, project: projects.Project, seen: Positions, now: int) -> _Plan:
        """(1) return expired leases, (2) pick what to queue, (3) read the new effort events."""
        returned, expired = self._returned_items(project, seen.lease_checkpoint, now)
        waiting = queue.entries(self.db, self.project, queue.TAG, seen.tag_head, seen.tag_tail,
                                project.queue_size + 1000)
        live = sum(1 for e in waiting if e.taken_by is None)
        to_queue, fill_cursor = self._to_queue(project, returned, max(0, project.queue_size - live),
                                               seen.fill_cursor)
        # Notices before the log: a notice is written after its event is acknowledged, so an event whose
        # notice this pass reads is in the log it reads next.
        notices, notices_upto = effort.notices_between(self.db, self.project, seen.late_checkpoint, now)
        notices = [n for n in notices if n.key not in seen.late_applied]
        behind = {n.event for n in notices if n.event[0] <= seen.events_checkpoint} - seen.applied
        late = [e for e in effort.events_by_key(self.db, self.project, behind) if not e.counted]
        events = late + [e for e in effort.events_between(self.db, self.project, seen.events_checkpoint, now)
                         if e.key not in seen.applied]
        return _Plan(now, returned, expired, _first_waiting(waiting, seen.tag_head, seen.tag_tail), live, to_queue,
                     fill_cursor, events, [e.seq for e in events if e.kind == "tagged"], self._review_head(seen),
                     notices, notices_upto)

    def _to_queue(self, project: projects.Project, returned: list[int], need: int, fill_cursor: int
                  ) -> tuple[list[int], int]:
        """Up to `need` items to queue: returned ones first, then New, never queued items from the fill cursor
        on; and where the cursor stops."""
        to_queue = returned[:need]
        while len(to_queue) < need and fill_cursor < project.total_items:
            batch = list(range(fill_cursor, min(project.total_items, fill_cursor + 2 * (need - len(to_queue)))))
            states = items.many(self.db, self.project, batch)
            for seq in batch:
                if len(to_queue) >= need:
                    break
                fill_cursor = seq + 1
                state = states.get(seq)
                if state is not None and state.status == items.NEW and state.queue_pos == items.NOT_QUEUED:
                    to_queue.append(seq)
            else:
                fill_cursor = batch[-1] + 1 if batch else fill_cursor
        return to_queue, fill_cursor

    def _append(self, project: projects.Project, seen: Positions, plan: _Plan) -> None:
        """(5) Write the entries at the reserved positions, then point the items at them (a taker skips an entry
        its item does not name yet)."""
        refs = self._refs(project, seen.fill_cursor, plan.fill_cursor, [*plan.to_queue, *plan.tagged])
        writes = [queue.entry_write(self.project, queue.TAG, seen.tag_tail + i, seq, refs.get(seq, ""))
                  for i, seq in enumerate(plan.to_queue)]
        writes += [queue.entry_write(self.project, queue.REVIEW, seen.review_tail + i, seq, refs.get(seq, ""))
                   for i, seq in enumerate(plan.tagged)]
        self.db.execute_many(writes)
        returned = set(plan.returned)
        # A few transactions in flight, not a hundred: a pass's burst of Paxos rounds every tick queued the
        # taggers' own transactions behind it (their p99 below saturation).
        self.db.execute_many((items.set_queued_writes(self.project, seq, seen.tag_tail + i,
                                                      items.RETURNED if seq in returned else items.NOT_QUEUED)
                              for i, seq in enumerate(plan.to_queue)), concurrency=_QUEUEING_IN_FLIGHT)

    def _advanced(self, seen: Positions, reserve: Positions, plan: _Plan
                  ) -> tuple[Positions, figures.Figures, control.Rankings]:
        """(6) The new statics (heads, tails, cursor, checkpoints) and the figure rows and rankings that changed;
        `self.figures` takes the new events."""
        # Checkpoints stay SETTLE_US behind now: a write in flight lands after them, and is read by a later pass.
        checkpoint = max(seen.events_checkpoint, plan.now - SETTLE_US)
        applied = seen.applied | {e.key for e in plan.events}
        # The stored counts of the keywords these events use, for the moment of the pass (dropped after it).
        used = {k for e in plan.events if e.kind == "tagged" for k in e.keywords}
        for keyword, uses in control.keyword_uses(self.db, self.project, used).items():
            self.figures[("keyword", keyword)] = {"uses": uses}
        changed = figures.apply(self.figures, plan.events)
        counts = {name: row["uses"] for (scope, name), row in changed.items() if scope == "keyword"}
        for keyword in used:
            self.figures.pop(("keyword", keyword), None)
            changed.pop(("keyword", keyword), None)
        late_checkpoint = max(seen.late_checkpoint, min(plan.now - SETTLE_US, plan.notices_upto))
        late_applied = seen.late_applied | {n.key for n in plan.notices}
        new = dataclasses.replace(
            seen, lease_checkpoint=max(seen.lease_checkpoint, plan.now - SETTLE_US), tag_head=plan.tag_head,
            fill_cursor=plan.fill_cursor, events_checkpoint=checkpoint,
            applied={k for k in applied if k[0] > checkpoint}, tag_tail=reserve.tag_tail,
            review_tail=reserve.review_tail, review_head=plan.review_head, keywords_pending=counts,
            late_checkpoint=late_checkpoint, late_applied={k for k in late_applied if k[0] > late_checkpoint},
            counted_pending=[e.key for e in plan.events])
        whole = self.figures.setdefault(("project", ""), {})
        if whole.get("queued") != plan.queued:
            whole["queued"] = plan.queued
            changed.setdefault(("project", ""), {})["queued"] = plan.queued
        rankings: control.Rankings = {}
        if any(e.kind == "tagged" for e in plan.events):
            rankings = {kind: figures.top(self.figures, kind) for kind in ("categories", "subcategories")}
            rankings["keywords"] = _merged_top(self.rankings.get("keywords", []), counts)
        return new, changed, rankings

    def _refs(self, project: projects.Project, first: int, end: int, seqs: list[int]) -> dict[int, str]:
        """References of the items to append: the fill range in one read per 1,000 items, the rest one by one."""
        refs = dict(projects.refs_from(self.db, project, first, end - first)) if end > first else {}
        rest = [seq for seq in seqs if seq not in refs]
        if rest:
            refs.update(projects.refs_of(self.db, self.project, rest))
        return refs

    def _lost(self) -> dict[str, int]:
        """Someone else wrote the partition (lease lost, or reconcile repaired it): reload before going on."""
        self.pos = None
        if control.acquire(self.db, self.project, self.owner, LEASE_TTL):
            self._load()
        return {"reloaded": 1}

    def _returned_items(self, project: projects.Project, after_us: int, now: int) -> tuple[list[int], int]:
        """Items to queue again: leases that ran out (returned now, with a transaction each) and skips."""
        ends = queue.lease_ends(self.db, self.project, after_us, now)
        states = items.many(self.db, self.project, sorted({seq for _, seq, _ in ends}))
        out: list[int] = []
        expired = 0
        for _at, seq, lease_id in ends:
            state = states.get(seq)
            if state is None or seq in out:
                continue
            if state.status == items.IN_PROGRESS and state.lease_id == lease_id and \
                    (state.lease_until_us or 0) <= now:
                if service.return_expired(self.db, self.project, state, now):
                    expired += 1
                    out.append(seq)
            elif state.status == items.NEW and state.queue_pos == items.RETURNED:
                out.append(seq)
        return out, expired

    def _review_head(self, seen: Positions) -> int:
        """The review lane's head moved past entries whose item is no longer waiting for verification."""
        entries = queue.entries(self.db, self.project, queue.REVIEW, seen.review_head, seen.review_tail,
                                _REVIEW_WINDOW)
        if not entries:
            return seen.review_head
        states = items.many(self.db, self.project, [e.seq for e in entries])
        head = seen.review_head
        for e in entries:
            state = states.get(e.seq)
            if state is not None and state.status == items.TAGGED:
                return e.pos
            head = e.pos + 1
        return head


def _merged_top(old: list[tuple[str, int]], changed: dict[str, int], k: int = figures.TOP
                ) -> list[tuple[str, int]]:
    """The top k keywords after a pass, from the previous top k and the counts the pass changed: counts only
    grow, so a keyword outside both cannot have entered. Exact; no scan of the vocabulary."""
    merged = dict(old)
    merged.update(changed)
    return heapq.nsmallest(k, merged.items(), key=lambda nc: (-nc[1], nc[0]))


def _first_waiting(entries: list[queue.Entry], head: int, tail: int) -> int:
    for e in entries:
        if e.taken_by is None:
            return e.pos
    return entries[-1].pos + 1 if entries else head if head >= tail else tail


def run_once(db: Database, project: str) -> dict[str, Any]:
    """One pass over one project, holding its lease for the pass (waits up to a lease length for a running
    worker's lease to lapse only if `project` is held by a worker that stopped)."""
    owner = ProjectOwner(db, project)
    if not owner.acquire():
        return {"project": project, "skipped": "another worker holds this project"}
    try:
        return {"project": project, **owner.step()}
    finally:
        owner.release()


def _serve(db: Database, held: dict[str, ProjectOwner], project: str) -> None:
    """One pass over one project (on a pool thread): take it if free, step, forget it when lost."""
    try:
        owner = held.get(project)
        if owner is None:
            owner = ProjectOwner(db, project)
            if not owner.acquire():
                return
            held[project] = owner  # each project's key is written by its own task only
        done = owner.step()
    except Exception:  # one project's trouble (a timeout) must not stop the others
        log.exception("tagging pass failed", extra={"project": project})
        return
    if owner.pos is None:
        held.pop(project, None)
    elif done.get("queued") or done.get("expired"):
        log.info("tagging pass", extra={"project": project, **done})


def _pass(db: Database, held: dict[str, ProjectOwner], running: dict[str, Future[None]]) -> None:
    """Start a pass for every project whose previous pass has finished: projects run side by side on the pool,
    so a project with a long pass (a big top-up, many expiries) never holds the others back."""
    pool = db.executor("tagging.projects", PROJECT_THREADS)
    for project in projects.every(db):
        previous = running.get(project)
        if previous is not None and not previous.done():
            continue
        running[project] = pool.submit(_serve, db, held, project)


def run(db: Database, stop: threading.Event, *, tick: float = 1.0) -> None:
    """Every project, one owner per project across all workers, until `stop` is set."""
    held: dict[str, ProjectOwner] = {}
    running: dict[str, Future[None]] = {}
    try:
        while not stop.is_set():
            started = db.clock.monotonic()
            try:
                _pass(db, held, running)
            except Exception:  # the node is down or restarting: keep looping, the next pass retries
                log.exception("tagging worker pass failed")
            # The pause waits on `stop` (real time) so that SIGTERM ends it at once; the pass's length is
            # measured on the database's clock like every other time the worker decides by.
            stop.wait(max(0.0, tick - (db.clock.monotonic() - started)))
    finally:
        for future in list(running.values()):
            # The pass in progress ends before its lease is released (_serve logged any failure).
            with contextlib.suppress(Exception):
                future.result(timeout=LEASE_TTL)
        for owner in list(held.values()):
            try:
                owner.release()
            except Exception:  # the lease expires by itself
                log.warning("could not release tagging project %s", owner.project)
