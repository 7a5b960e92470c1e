"""Retention policies, legal holds and retention run reports (cql/0250, docs/retention.md).

A policy keeps an archive's content for `keep_days` days (0: forever): one for the whole archive (target '*')
and, for Slack, one per channel that overrides it. A hold keeps content whatever the policies say (and erasure
skips it): a whole archive, a channel or a user (Slack), an account (network). Holds are never deleted: a release
writes who released it and when, so the list is also the record of what was held. Every change to a hold is
written to the access audit log.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from cassandra import ConsistencyLevel
from cassandra.util import uuid_from_time

from api import audit
from api.db import Database, Statement
from api.erasure import ledger
from api.errors import InvalidInput, NotFound

TABLES = frozenset({"retention_policies", "legal_holds", "retention_runs"})

WHOLE = "*"  # a policy's target for the whole archive
SCOPES = {"slack": ("archive", "channel", "user"), "network": ("archive", "account")}
MAX_KEEP_DAYS = 36_500

# Policies and holds decide what is deleted: read and written at LOCAL_QUORUM, so a run never misses a hold an
# admin just placed (written at QUORUM too).
_QUORUM = ConsistencyLevel.LOCAL_QUORUM
PUT_POLICY = Statement(
    "INSERT INTO retention_policies (archive, target, keep_days, set_by, set_at) VALUES (?, ?, ?, ?, ?)",
    consistency=_QUORUM)
SELECT_POLICIES = Statement(
    "SELECT target, keep_days, set_by, set_at FROM retention_policies WHERE archive = ?", consistency=_QUORUM)
PUT_HOLD = Statement(
    "INSERT INTO legal_holds (archive, hold_id, scope, target, reason, created_by, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)", consistency=_QUORUM)
RELEASE_HOLD = Statement(
    "UPDATE legal_holds SET released_by = ?, released_at = ? WHERE archive = ? AND hold_id = ?",
    consistency=_QUORUM)
SELECT_HOLDS = Statement(
    "SELECT hold_id, scope, target, reason, created_by, created_at, released_by, released_at FROM legal_holds "
    "WHERE archive = ?", consistency=_QUORUM)
SELECT_HOLD = Statement(
    "SELECT hold_id, scope, target, reason, created_by, created_at, released_by, released_at FROM legal_holds "
    "WHERE archive = ? AND hold_id = ?", consistency=_QUORUM, name="SELECT legal_holds (one)")
PUT_RUN = Statement(
    "UPDATE retention_runs SET dry_run = ?, state = ?, started_at = ?, finished_at = ?, counts = counts + ?, "
    "held = held + ? "
    "WHERE archive = ? AND run_id = ?")
PUT_RUN_STARTED = Statement(
    "UPDATE retention_runs SET dry_run = ?, state = ?, started_at = ? WHERE archive = ? AND run_id = ?",
    name="UPDATE retention_runs (started)")
SELECT_RUNS = Statement(
    "SELECT run_id, dry_run, state, started_at, finished_at, counts, held FROM retention_runs WHERE archive = ? "
    "LIMIT ?")


def side_of(archive: str) -> str:
    side, _, scope = archive.partition(":")
    if side not in SCOPES or not scope:
        raise InvalidInput(f"unknown archive {archive!r}: expected slack:<team_id> or network:<name>")
    return side


@dataclasses.dataclass(frozen=True)
class Policy:
    target: str
    keep_days: int  # 0: forever
    set_by: str
    set_at: datetime

    def to_json(self) -> dict:
        return {"target": self.target, "keep_days": self.keep_days, "set_by": self.set_by,
                "set_at": self.set_at.isoformat()}


@dataclasses.dataclass(frozen=True)
class Hold:
    hold_id: uuid.UUID
    scope: str
    target: str
    reason: str
    created_by: str
    created_at: datetime
    released_by: str | None
    released_at: datetime | None

    @property
    def active(self) -> bool:
        return self.released_at is None

    def to_json(self) -> dict:
        return {"hold_id": str(self.hold_id), "scope": self.scope, "target": self.target, "reason": self.reason,
                "created_by": self.created_by, "created_at": self.created_at.isoformat(),
                "released_by": self.released_by,
                "released_at": self.released_at.isoformat() if self.released_at else None,
                "active": self.active}


def _utc(value: datetime | None) -> datetime | None:
    """Cassandra's timestamps come back naive (UTC): made aware, so every answer says its zone."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def _now(db: Database) -> datetime:
    return datetime.fromtimestamp(db.clock.time(), UTC)


def set_policy(db: Database, archive: str, target: str, keep_days: int, *, by: str) -> Policy:
    """Keep `archive`'s content (or one Slack channel's: `target` a channel id) `keep_days` days; 0 keeps it forever
    (a channel's 0 overrides a shorter archive policy). Written whole: setting again replaces it."""
    side = side_of(archive)
    if not 0 <= keep_days <= MAX_KEEP_DAYS:
        raise InvalidInput(f"keep_days must be 0 (forever) .. {MAX_KEEP_DAYS}")
    if side == "network" and target != WHOLE:  # a network's posts have no channels
        raise InvalidInput("a follower network has one policy, for all its posts")
    at = _now(db)
    db.execute(PUT_POLICY, (archive, target, keep_days, by, at))
    return Policy(target, keep_days, by, at)


def policies(db: Database, archive: str) -> dict[str, Policy]:
    """The archive's policies by target ('*' and channel ids)."""
    side_of(archive)
    return {r.target: Policy(r.target, r.keep_days, r.set_by, _utc(r.set_at))
            for r in db.execute(SELECT_POLICIES, (archive,))}


def keep_days_of(found: Mapping[str, Policy], channel_id: str | None = None) -> int:
    """The days a channel's content is kept (its own policy, else the archive's; 0: forever)."""
    if channel_id is not None and channel_id in found:
        return found[channel_id].keep_days
    return found[WHOLE].keep_days if WHOLE in found else 0


def create_hold(db: Database, archive: str, scope: str, target: str, reason: str, *, by: str, via: str,
                remote: str | None = None) -> Hold:
    side = side_of(archive)
    if scope not in SCOPES[side]:
        raise InvalidInput(f"a {side} hold's scope is one of {', '.join(SCOPES[side])}")
    if (scope == "archive") != (target == ""):
        raise InvalidInput("an archive hold has no target; a channel, user or account hold names one")
    at = _now(db)
    hold = Hold(uuid_from_time(at.timestamp()), scope, target, reason, by, at, None, None)
    db.execute(PUT_HOLD, (archive, hold.hold_id, scope, target, reason, by, at))
    ledger.view_changed(db, archive)
    audit.record(db, actor=by, via=via, action="hold create", target=f"{archive} {scope}:{target} {hold.hold_id}",
                 status=0, remote=remote, wait=True)
    return hold


def release_hold(db: Database, archive: str, hold_id: uuid.UUID, *, by: str, via: str,
                 remote: str | None = None) -> Hold:
    """Release a hold (idempotent: a released hold keeps its first release)."""
    side_of(archive)
    if hold_id.version != 1:  # hold ids are time UUIDs: Cassandra refuses any other in a timeuuid column
        raise NotFound(f"no hold {hold_id} on {archive}")
    row = db.execute(SELECT_HOLD, (archive, hold_id)).one()
    if row is None:
        raise NotFound(f"no hold {hold_id} on {archive}")
    hold = _hold(row)
    if not hold.active:
        return hold
    at = _now(db)
    db.execute(RELEASE_HOLD, (by, at, archive, hold_id))
    ledger.view_changed(db, archive)
    audit.record(db, actor=by, via=via, action="hold release", target=f"{archive} {hold.scope}:{hold.target} "
                 f"{hold_id}", status=0, remote=remote, wait=True)
    return dataclasses.replace(hold, released_by=by, released_at=at)


def _hold(row) -> Hold:
    return Hold(row.hold_id, row.scope, row.target, row.reason or "", row.created_by, _utc(row.created_at),
                row.released_by, _utc(row.released_at))


def holds(db: Database, archive: str, *, active_only: bool = False) -> list[Hold]:
    side_of(archive)
    found = [_hold(r) for r in db.execute(SELECT_HOLDS, (archive,))]
    return [h for h in found if h.active] if active_only else found


@dataclasses.dataclass(frozen=True)
class Held:
    """What the active holds of an archive cover."""

    archive: bool = False
    channels: frozenset[str] = frozenset()
    users: frozenset[str] = frozenset()

    @classmethod
    def of(cls, found: Iterable[Hold]) -> Held:
        active = [h for h in found if h.active]
        return cls(any(h.scope == "archive" for h in active),
                   frozenset(h.target for h in active if h.scope == "channel"),
                   frozenset(h.target for h in active if h.scope in ("user", "account")))

    @property
    def any(self) -> bool:
        return self.archive or bool(self.channels) or bool(self.users)


def held(db: Database, archive: str) -> Held:
    return Held.of(holds(db, archive, active_only=True))


@dataclasses.dataclass(frozen=True)
class Run:
    run_id: uuid.UUID
    dry_run: bool
    state: str
    started_at: datetime
    finished_at: datetime | None
    counts: dict[str, int]
    held: dict[str, int]

    def to_json(self) -> dict:
        return {"run_id": str(self.run_id), "dry_run": self.dry_run, "state": self.state,
                "started_at": self.started_at.isoformat(),
                "finished_at": self.finished_at.isoformat() if self.finished_at else None,
                "counts": dict(sorted(self.counts.items())), "held": dict(sorted(self.held.items()))}


def start_run(db: Database, archive: str, *, dry_run: bool) -> Run:
    at = _now(db)
    run = Run(uuid_from_time(at.timestamp()), dry_run, "running", at, None, {}, {})
    db.execute(PUT_RUN_STARTED, (dry_run, "running", at, archive, run.run_id))
    return run


def finish_run(db: Database, archive: str, run: Run, *, counts: Mapping[str, int], held_counts: Mapping[str, int],
               state: str = "done") -> Run:
    at = _now(db)
    done = dataclasses.replace(run, state=state, finished_at=at, counts=dict(counts), held=dict(held_counts))
    db.execute(PUT_RUN, (run.dry_run, state, run.started_at, at, done.counts, done.held, archive, run.run_id))
    return done


def runs(db: Database, archive: str, limit: int = 20) -> list[Run]:
    side_of(archive)
    return [Run(r.run_id, bool(r.dry_run), r.state, _utc(r.started_at), _utc(r.finished_at), dict(r.counts or {}),
                dict(r.held or {})) for r in db.execute(SELECT_RUNS, (archive, limit))]
