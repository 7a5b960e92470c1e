"""The project owner: one worker at a time per project (a lease in tagging_control) returns expired and skipped
items to the queue, keeps the queue at its size, moves the lane heads past taken entries, and adds new effort
events to the figures. `chronicle tagging worker` runs it for every project; `fill-queues` runs one pass.

A pass: (1) read the lease log from its checkpoint and return expired leases (a transaction per item, so a
submit racing the expiry either wins or loses whole); (2) read the waiting entries, move the head past taken
ones, pick items to queue (returned ones first, then New items from the fill cursor); (3) read new effort
events; (4) commit #1 reserves queue positions (tails) with the version check; (5) write the entries, then
point the items at them; (6) commit #2 stores heads, cursor, checkpoints and the changed figures. A crash
between steps is repaired by the next pass: every step is idempotent or re-derived from the item states.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

from api.db import Database
from api.tagging import control, effort, figures, items, projects, queue, service
from api.tagging.control import Positions

log = logging.getLogger(__name__)

SETTLE_US = 5_000_000  # checkpoints stay this far behind now: writes in flight land after them
LEASE_TTL = 30  # seconds the owner lease lives without a commit
_REVIEW_WINDOW = 1000


class ProjectOwner:
    """Holds one project while it can: `step()` runs a pass and returns what it did."""

    def __init__(self, db: Database, project: str, owner: str | None = None) -> None:
        self.db = db
        self.project = project
        self.owner = owner or f"{uuid.uuid4().hex[:12]}"
        self.pos: Positions | None = None
        self.figures: figures.Figures = {}

    def acquire(self) -> bool:
        if not control.acquire(self.db, self.project, self.owner, LEASE_TTL):
            return False
        self.pos, self.figures = control.load(self.db, self.project)
        return self.pos is not None

    def release(self) -> None:
        control.release(self.db, self.project, self.owner)

    def step(self) -> dict[str, int]:
        project = projects.get(self.db, self.project)
        if project is None or self.pos is None:
            return {}
        now = time.time_ns() // 1000
        seen = self.pos
        new = Positions(**{**seen.__dict__})
        returned, expired = self._returned_items(project, seen.lease_checkpoint, now)
        new.lease_checkpoint = max(seen.lease_checkpoint, now - SETTLE_US)

        waiting = queue.entries(self.db, self.project, queue.TAG, seen.tag_head, seen.tag_tail,
                                project.queue_size + 1000)
        new.tag_head = _first_waiting(waiting, seen.tag_head, seen.tag_tail)
        live = sum(1 for e in waiting if e.taken_by is None)
        need = max(0, project.queue_size - live)
        to_queue = returned[:need]
        fill_cursor = seen.fill_cursor
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
        new.fill_cursor = fill_cursor

        events = [e for e in effort.events_between(self.db, self.project, seen.events_checkpoint, now)
                  if e.key not in seen.applied]
        tagged = [e.seq for e in events if e.kind == "tagged"]
        review_head = self._review_head(seen)

        # (4) reserve the positions
        reserve = Positions(**{**seen.__dict__})
        reserve.tag_tail = seen.tag_tail + len(to_queue)
        reserve.review_tail = seen.review_tail + len(tagged)
        if not control.commit(self.db, self.project, self.owner, seen, reserve, {}, LEASE_TTL):
            return self._lost()
        # (5) entries first, then the items pointing at them (a taker skips an entry its item does not name yet)
        refs = self._refs(project, seen.fill_cursor, fill_cursor, [*to_queue, *tagged])
        writes = [queue.entry_write(self.project, queue.TAG, seen.tag_tail + i, seq, refs.get(seq, ""))
                  for i, seq in enumerate(to_queue)]
        writes += [queue.entry_write(self.project, queue.REVIEW, seen.review_tail + i, seq, refs.get(seq, ""))
                   for i, seq in enumerate(tagged)]
        self.db.execute_many(writes)
        self.db.execute_many(items.set_queued_writes(self.project, seq, seen.tag_tail + i)
                             for i, seq in enumerate(to_queue))
        # (6) heads, cursor, checkpoints, figures
        changed = figures.apply(self.figures, events)
        checkpoint = max(seen.events_checkpoint, now - SETTLE_US)
        applied = (seen.applied | {e.key for e in events})
        new.applied = {k for k in applied if k[0] > checkpoint}
        new.events_checkpoint = checkpoint
        new.tag_tail, new.review_tail = reserve.tag_tail, reserve.review_tail
        new.review_head = review_head
        queued = live + len(to_queue)
        whole = self.figures.setdefault(("project", ""), {})
        if whole.get("queued") != queued:
            whole["queued"] = queued
            changed.setdefault(("project", ""), {})["queued"] = queued
        rankings = {kind: figures.top(self.figures, kind) for kind in figures.USE_SCOPES
                    if any(e.kind == "tagged" for e in events)}
        if not control.commit(self.db, self.project, self.owner, reserve, new, changed, LEASE_TTL, rankings):
            return self._lost()
        self.pos = new
        return {"queued": len(to_queue), "returned": len(returned), "expired": expired, "events": len(events),
                "waiting": queued}

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
            self.pos, self.figures = control.load(self.db, self.project)
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
                if service.return_expired(self.db, self.project, seq, lease_id, now):
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


def _pass(db: Database, held: dict[str, ProjectOwner]) -> None:
    for project in projects.every(db):
        owner = held.get(project)
        if owner is None:
            owner = ProjectOwner(db, project)
            if not owner.acquire():
                continue
            held[project] = owner
        try:
            done = owner.step()
        except Exception:  # one project's trouble (a timeout) must not stop the others
            log.exception("tagging pass failed", extra={"project": project})
            continue
        if owner.pos is None:
            held.pop(project, None)
        elif done.get("queued") or done.get("expired"):
            log.info("tagging pass", extra={"project": project, **done})


def run(db: Database, stop: threading.Event, *, tick: float = 1.0) -> None:
    """Every project, one owner per project across all workers, until `stop` is set."""
    held: dict[str, ProjectOwner] = {}
    try:
        while not stop.is_set():
            started = time.monotonic()
            try:
                _pass(db, held)
            except Exception:  # the node is down or restarting: keep looping, the next pass retries
                log.exception("tagging worker pass failed")
            stop.wait(max(0.0, tick - (time.monotonic() - started)))
    finally:
        for owner in held.values():
            try:
                owner.release()
            except Exception:  # the lease expires by itself
                log.warning("could not release tagging project %s", owner.project)
