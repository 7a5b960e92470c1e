"""The access audit log (cql/0230, docs/audit.md): every read of archive content — REST reads, the archive
pages, exports and reports printed by the CLI — as one append-only row: who (a token's id, never the token),
what (the route and the path read), when, from where, and the answer's status.

Rows are written without waiting (the request does not wait for the log), partitioned by UTC day and one of
SHARDS shards (each entry picks one at random: a busy day spreads over the cluster), and expire after
CHRONICLE_AUDIT_RETENTION_DAYS. Admins read a time range (`entries`): every shard of each day in the range, merged
in time order, at most MAX_RANGE_DAYS days a request, paged by (time, id).
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import structlog

from api.db import Database, Statement

TABLES = frozenset({"audit_log"})

SHARDS = 32
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
    at_us = int(db.clock.time() * 1_000_000)
    params = (at_us // DAY_US, secrets.randbelow(SHARDS), at_us, secrets.token_hex(8), actor, token_id(token), via,
              action[:300], target[:2000], status, remote, db.settings.audit_retention_days * 86_400)
    try:
        future = db.execute_async(RECORD, params)
        future.add_errback(lambda exc: log.warning("audit_write_failed", error=repr(exc)[:300]))
        if wait:  # a command: its process may end before a write in flight is sent
            future.result()
    except Exception as exc:  # noqa: BLE001 - the audit log must never turn a read into an error
        log.warning("audit_write_failed", error=repr(exc)[:300])


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
