"""Which queue entries a taker tries: the waiting entries this process read last, shared by its request
threads, each entry handed to one request at a time (`Picker`).

Takers that read the same waiting entries and pick at random collide: an entry looks waiting from the moment it
is read until its claim's mark is written, and at 150 claims a second with a few hundred milliseconds between
the two, a third to a half of the entries of a 128-entry window were such entries. A collision is a refused
claim (a lightweight transaction), a lease-log row, a state read and a mark: bench/tagging.py counted 1.67 claim
transactions per item. The process now reads a wider window (`WINDOW`) at most every `POOL_SECONDS`, and hands
an entry to one of its requests only (for `HANDED_SECONDS`): what is left to collide with are the entries other
processes took since the read.

A taken entry stays taken, so the window is read from where the taken entries the process saw end (the
frontier) instead of the head, which the owner moves once a pass. The frontier is forgotten after
`FRONTIER_SECONDS`, so an entry that appeared behind it (a late write of a deposed owner) is still handed out.
"""

from __future__ import annotations

import dataclasses
import random
import threading

from api.db import Database
from api.tagging import control, queue

POSITIONS_SECONDS = 0.5  # how long a process reuses a project's lane ends
POOL_SECONDS = 0.25  # how long a process hands out the waiting entries it read before reading again
WINDOW = 512  # entries read at once from the frontier
HANDED_SECONDS = 5.0  # how long an entry handed to one request is kept from the process's others
FRONTIER_SECONDS = 5.0  # how long a process skips entries it saw taken before reading from the head again
READS = 4  # reads of the queue one request makes at most before it answers that nothing is waiting
TRIES = 16  # claims one request tries at most
_KEPT_MAX = 10_000  # projects whose positions, frontier and pool a process keeps


def positions(db: Database, project: str, *, fresh: bool = False) -> control.Lanes | None:
    """The project's lane ends, reused for `POSITIONS_SECONDS`: a stale head only means a longer read."""
    cache = db.caches.ttl("tagging.queue_positions", maxsize=_KEPT_MAX, ttl=POSITIONS_SECONDS)
    if not fresh:
        hit = cache.get(project)
        if hit is not None:
            return hit
    found = control.lanes(db, project)
    if found is not None:
        cache.set(project, found)
    return found


def read_waiting(db: Database, project: str, *, fresh: bool = False) -> list[queue.Entry]:
    """The waiting entries of the first window after the frontier (or the head) that has any; [] when none
    waits. The lane ends are read again when the ones kept showed nothing waiting."""
    frontiers = db.caches.lru("tagging.queue_frontier", maxsize=_KEPT_MAX)
    for refresh in (fresh, True):
        pos = positions(db, project, fresh=refresh)
        if pos is None:
            return []
        now = db.clock.monotonic()
        known, since = frontiers.get(project) or (0, now)
        if now - since > FRONTIER_SECONDS:
            known, since = 0, now
        start, waiting = max(pos.tag_head, known), []
        while not waiting and start < pos.tag_tail:
            window = queue.entries(db, project, queue.TAG, start, pos.tag_tail, WINDOW)
            if not window:
                break
            waiting = [e for e in window if e.taken_by is None]
            start = waiting[0].pos if waiting else window[-1].pos + 1
        if start > known:
            frontiers.set(project, (start, since))
        if waiting or refresh:
            return waiting
    return []


@dataclasses.dataclass
class _Pool:
    """A project's waiting entries as this process read them, and those handed to its requests."""

    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    entries: list[queue.Entry] = dataclasses.field(default_factory=list)
    read_at: float | None = None
    handed: dict[int, float] = dataclasses.field(default_factory=dict)  # position -> when


class Picker:
    """The entries one request tries, one at a time, at random among the process's pool: never one handed to
    another of its requests in the last `HANDED_SECONDS`."""

    def __init__(self, db: Database, project: str) -> None:
        self.db = db
        self.project = project
        self.pool: _Pool = db.caches.lru("tagging.queue_pool", maxsize=_KEPT_MAX).setdefault(project, _Pool)
        self.reads = 0
        self.tries = 0

    def next(self) -> queue.Entry | None:
        """An entry to try, or None: nothing waiting after `READS` reads, or `TRIES` tries made."""
        if self.tries >= TRIES:
            return None
        while True:
            now = self.db.clock.monotonic()
            with self.pool.lock:
                fresh = self.pool.read_at is not None and now - self.pool.read_at <= POOL_SECONDS
                picked = self._pick(now) if fresh else None
            if picked is not None:
                self.tries += 1
                return picked
            if self.reads >= READS:
                return None
            # Stale, or nothing left in it: this request reads (the lane ends again after its first read).
            waiting = read_waiting(self.db, self.project, fresh=self.reads > 0)
            self.reads += 1
            with self.pool.lock:
                self.pool.entries, self.pool.read_at = waiting, self.db.clock.monotonic()
                picked = self._pick(self.db.clock.monotonic())
            if picked is not None:
                self.tries += 1
                return picked
            if not waiting:
                return None

    def release(self, entry: queue.Entry) -> None:
        """Give back an entry this request did not try to claim (its slot or its team's unit was refused): the
        process's other requests may have it at once (in a small queue it may be the only one waiting)."""
        with self.pool.lock:
            self.pool.handed.pop(entry.pos, None)
        self.tries -= 1

    def _pick(self, now: float) -> queue.Entry | None:
        """(under the pool's lock) a random entry not handed out lately; marks it handed."""
        handed = self.pool.handed
        if len(handed) > 4 * WINDOW:
            for pos in [p for p, at in handed.items() if now - at > HANDED_SECONDS]:
                del handed[pos]
        free = [e for e in self.pool.entries if now - handed.get(e.pos, -HANDED_SECONDS - 1) > HANDED_SECONDS]
        if not free:
            return None
        entry = random.choice(free)
        handed[entry.pos] = now
        return entry
