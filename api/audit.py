"""The access audit log (cql/0230, docs/audit.md): every read of archive content — REST reads, the archive
pages, exports and reports printed by the CLI — as one append-only row: who (a token's id, never the token),
what (the route and the path read), when, from where, and the answer's status.

Rows are written without waiting (the request does not wait for the log): a request appends its entry to its
process's pending entries, which a background thread sends every FLUSH_SECONDS (or at BATCH_ROWS entries) as one
single-partition batch without waiting for the answer (a wait is a wake-up of the writer per batch, and worker CPU:
measured, bench/hotpath.py --ab-audit), so a page costs an append, not a driver request. Entry ids are the holder's
random prefix and a count (no random draw per entry).
Partitioned by UTC day and one of SHARDS shards (each batch picks one at random: a busy day spreads over the
cluster); rows expire after CHRONICLE_AUDIT_RETENTION_DAYS. A process that dies loses at most its last
FLUSH_SECONDS of entries (an entry was never a condition of the read it records). Admins read a time range
(`entries`): every shard of each day in the range, merged in time order, at most MAX_RANGE_DAYS days a request,
paged by (time, id).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import heapq
import itertools
import os
import secrets
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import structlog

from api.db import Database, Statement

TABLES = frozenset({"audit_log"})

SHARDS = 32
BATCH_ROWS = 128  # entries of one batch at most (one partition: one mutation)
FLUSH_SECONDS = 0.5  # how long an entry waits at most in its process before it is written
_IDLE_ROUNDS = 10  # a writer thread with nothing to write for this many rounds (5 s) ends
DAY_US = 86_400_000_000
MAX_RANGE_DAYS = 31

log = structlog.get_logger("chronicle.audit")

RECORD = Statement(
    "INSERT INTO audit_log (day, shard, at_us, entry_id, actor, token_id, via, action, target, status, remote) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?")
BETWEEN = Statement(
    "SELECT at_us, entry_id, actor, token_id, via, action, target, status, remote FROM audit_log "
    "WHERE day = ? AND shard = ? AND (at_us, entry_id) > (?, ?) AND at_us < ? LIMIT ?")

@dataclass(frozen=True)
class Entry:
    at_us: int
    entry_id: str
    actor: str  # "admin", "token", "anonymous" (no or an unknown token), "cli:<os user>"
    token_id: str | None  # the first 16 hex digits of the token's SHA-256: tells tokens apart, reveals nothing
    via: str  # "rest", "pages", "cli"
    action: str  # the route (e.g. "GET /slack/teams/<team_id>/channels/<channel_id>/messages") or the command
    target: str  # what was read: the path and query, or the command's arguments
    status: int  # the answer's HTTP status (0: a command that finished)
    remote: str | None  # the client's address


def token_id(token: str | bytes | None) -> str | None:
    if not token:
        return None
    raw = token.encode() if isinstance(token, str) else token
    return hashlib.sha256(raw).hexdigest()[:16]


def record(db: Database, *, actor: str, via: str, action: str, target: str, status: int,
           token: str | bytes | None = None, remote: str | None = None, wait: bool = False) -> None:
    """Append one entry; without `wait` the caller does not wait for the write (a request). A failed write is
    logged: the read it records is not refused."""
    pending = _pending(db)
    at_us = int(db.clock.time() * 1_000_000)
    entry = (at_us, pending.next_id(), actor, token_id(token), via, action[:300], target[:2000], status, remote)
    if not wait:
        pending.add(entry)
        return
    try:  # a command: written before it returns (its process may end right after)
        db.execute(RECORD, _params(db, entry, secrets.randbelow(SHARDS)))
    except Exception as exc:  # noqa: BLE001 - the audit log must never turn a read into an error
        log.warning("audit_write_failed", error=repr(exc)[:300])


def _failed(exc: BaseException, entries: int) -> None:
    log.warning("audit_write_failed", entries=entries, error=repr(exc)[:300])


def _params(db: Database, entry: tuple, shard: int) -> tuple:
    return (entry[0] // DAY_US, shard, *entry, db.settings.audit_retention_days * 86_400)


class _Pending:
    """A process's entries not yet written, and the thread that writes them (started with the first entry: after
    gunicorn forked, as the Database itself)."""

    def __init__(self, db: Database) -> None:
        self._db = weakref.ref(db)
        self._lock = threading.Lock()
        self._entries: list[tuple] = []
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        # Entry ids: a random prefix per holder and a count (unique without a random draw per entry).
        self._ids = itertools.count()
        self._prefix = secrets.token_hex(5)

    def next_id(self) -> str:
        return f"{self._prefix}{next(self._ids):06x}"

    def add(self, entry: tuple) -> None:
        with self._lock:
            self._entries.append(entry)
            # The writer is woken once as the entries reach a batch, not again by every entry added before it
            # takes them (an Event.set is a lock and a notify).
            full = len(self._entries) == BATCH_ROWS
        self.add_thread()
        if full:
            self._wake.set()

    def flush(self, *, wait: bool = False) -> None:
        """Send the pending entries, one partition a batch; `wait`: until the node answered (a failure is
        logged either way: the reads they record were answered)."""
        with self._lock:
            entries, self._entries = self._entries, []
        db = self._db()
        if not entries or db is None:
            return
        shard = secrets.randbelow(SHARDS)
        by_day: dict[int, list[tuple]] = {}
        for entry in entries:
            by_day.setdefault(entry[0] // DAY_US, []).append(_params(db, entry, shard))
        sent = []
        for rows in by_day.values():
            for start in range(0, len(rows), BATCH_ROWS):
                batch = rows[start:start + BATCH_ROWS]
                try:
                    future = db.send_partition(RECORD, batch)
                except Exception as exc:  # noqa: BLE001 - logged, as a failed answer
                    _failed(exc, len(batch))
                    continue
                future.add_errback(_failed, len(batch))
                sent.append(future)
        for future in sent if wait else ():
            with contextlib.suppress(Exception):  # logged by the errback
                future.result()

    def _loop(self) -> None:
        idle = 0
        while self._db() is not None and idle < _IDLE_ROUNDS:  # an idle writer ends; the next entry starts one
            self._wake.wait(FLUSH_SECONDS)
            self._wake.clear()
            with self._lock:
                idle = idle + 1 if not self._entries else 0
            self.flush()
        with self._lock:
            self._thread = None
            restart = bool(self._entries)  # an entry added while it was ending
        if restart:
            self.add_thread()

    def add_thread(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="audit-log", daemon=True)
                self._thread.start()


def _pending(db: Database) -> _Pending:
    """The Database's pending entries (one holder per Database, in its registry: a test's Database starts with
    none). A holder is flushed at exit too."""
    def make() -> _Pending:
        holder = _Pending(db)
        atexit.register(holder.flush, wait=True)
        return holder

    return db.caches.lru("audit.pending", maxsize=1).setdefault("entries", make)


def flush(db: Database) -> None:
    """Write this process's pending entries now and wait for them (before reading the log)."""
    _pending(db).flush(wait=True)


def cli_actor() -> str:
    """Who runs a command: the operating-system user."""
    try:
        return f"cli:{os.getlogin()}"
    except OSError:
        import pwd

        return f"cli:{pwd.getpwuid(os.getuid()).pw_name}"


def entries(db: Database, since_us: int, until_us: int, limit: int, after: tuple[int, str] | None = None
            ) -> list[Entry]:
    """The entries of [since_us, until_us) in time order (after `after`, a previous page's last (time, id)), at
    most `limit`. ValueError when the range is empty or longer than MAX_RANGE_DAYS."""
    if until_us <= since_us:
        raise ValueError("the range is empty: `to` must be after `from`")
    if until_us - since_us > MAX_RANGE_DAYS * DAY_US:
        raise ValueError(f"at most {MAX_RANGE_DAYS} days a request")
    flush(db)  # this process's own entries first: an admin reading the log sees their own requests
    start = after if after is not None and after[0] >= since_us else (since_us, "")
    found: list[Entry] = []
    for day in range(start[0] // DAY_US, (until_us - 1) // DAY_US + 1):
        want = limit - len(found)
        if want <= 0:
            break
        futures = [db.execute_async(BETWEEN, (day, shard, start[0], start[1], until_us, want))
                   for shard in range(SHARDS)]
        rows: Iterator[Any] = heapq.merge(*[list(f.result()) for f in futures],
                                          key=lambda r: (r.at_us, r.entry_id))
        found.extend(Entry(r.at_us, r.entry_id, r.actor, r.token_id, r.via, r.action, r.target, r.status, r.remote)
                     for r in itertools.islice(rows, want))
    return found
