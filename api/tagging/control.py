"""One project's bookkeeping: owner lease, queue positions, checkpoints and figures, in one partition.

Owner of tagging_control. Only the project's owner writes it, and every write is one conditional batch
`IF owner = <me> AND version = <what I read>` that also bumps the version: a writer that lost its lease, or
that another writer (reconcile) overtook, is refused and reloads. Figures are map cells added with
`figures = figures + {...}` (a write of the new values; never an overwrite of the whole map, which would write
a tombstone each time).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from api.db import Database, Statement, was_applied

TABLES = frozenset({"tagging_control"})

_STATICS = ("version", "tag_head", "tag_tail", "review_head", "review_tail", "fill_cursor", "lease_checkpoint",
            "events_checkpoint", "applied")

INIT = Statement(
    "UPDATE tagging_control SET version = 0, tag_head = 0, tag_tail = 0, review_head = 0, review_tail = 0, "
    "fill_cursor = 0, lease_checkpoint = ?, events_checkpoint = ?, applied = '[]' "
    "WHERE project = ?")
ACQUIRE = Statement("UPDATE tagging_control USING TTL ? SET owner = ? WHERE project = ? IF owner = null",
                    idempotent=False)
RELEASE = Statement("DELETE owner FROM tagging_control WHERE project = ? IF owner = ?", idempotent=False)
READ_ALL = Statement(f"SELECT scope, name, figures, ranking, owner, {', '.join(_STATICS)} FROM tagging_control "
                     "WHERE project = ?")
READ_SHOWN = Statement(
    f"SELECT scope, name, figures, ranking, owner, {', '.join(_STATICS)} FROM tagging_control WHERE project = ? "
    "AND scope IN ('project', 'team', 'user', 'top')", name="SELECT tagging_control (shown figures)")
READ_STATICS = Statement(f"SELECT owner, {', '.join(_STATICS)} FROM tagging_control WHERE project = ? LIMIT 1",
                         name="SELECT tagging_control (statics)")
COMMIT = Statement(
    "UPDATE tagging_control SET version = ?, tag_head = ?, tag_tail = ?, review_head = ?, review_tail = ?, "
    "fill_cursor = ?, lease_checkpoint = ?, events_checkpoint = ?, applied = ? WHERE project = ? "
    "IF owner = ? AND version = ?", idempotent=False)
KEEP_OWNER = Statement("UPDATE tagging_control USING TTL ? SET owner = ? WHERE project = ?")
SET_RANKING = Statement("UPDATE tagging_control SET ranking = ? WHERE project = ? AND scope = 'top' AND name = ?")
BUMP = Statement("UPDATE tagging_control SET version = ? WHERE project = ? IF version = ?", idempotent=False,
                 name="UPDATE tagging_control (version only)")
ADD_FIGURES = Statement(
    "UPDATE tagging_control SET figures = figures + ? WHERE project = ? AND scope = ? AND name = ?")


@dataclasses.dataclass
class Positions:
    """The statics: where each queue lane starts and ends, how far the fill and the log readers got."""

    version: int
    tag_head: int
    tag_tail: int
    review_head: int
    review_tail: int
    fill_cursor: int
    lease_checkpoint: int
    events_checkpoint: int
    applied: set[tuple[int, int, str]]
    owner: str | None = None

    @classmethod
    def from_row(cls, row: Any) -> Positions:
        applied = {tuple(k) for k in json.loads(row.applied or "[]")}
        return cls(row.version or 0, row.tag_head or 0, row.tag_tail or 0, row.review_head or 0,
                   row.review_tail or 0, row.fill_cursor or 0, row.lease_checkpoint or 0,
                   row.events_checkpoint or 0, applied, row.owner)


Figures = dict[tuple[str, str], dict[str, int]]  # (scope, name) -> {figure: value}
Rankings = dict[str, list[tuple[str, int]]]  # 'keywords' | 'categories' | 'subcategories' -> top (name, count)


def init(db: Database, project: str, created_us: int) -> None:
    """The project's statics, its checkpoints just before its creation: the logs are read after a checkpoint
    (`at_us > checkpoint`), so an event or lease end stamped in the creation's own microsecond (a coarse or a
    test clock) is still read, and reconcile does not count it as already in the figures."""
    db.execute(INIT, (created_us - 1, created_us - 1, project))


def acquire(db: Database, project: str, owner: str, ttl_seconds: int) -> bool:
    result = db.execute(ACQUIRE, (ttl_seconds, owner, project))
    row = result.one()
    return bool(row is not None and (row[0] or getattr(row, "owner", None) == owner))


def release(db: Database, project: str, owner: str) -> None:
    db.execute(RELEASE, (project, owner))


def positions(db: Database, project: str) -> Positions | None:
    row = db.execute(READ_STATICS, (project,)).one()
    return Positions.from_row(row) if row is not None and row.version is not None else None


def _figures(rows: list[Any]) -> Figures:
    return {(r.scope, r.name): dict(r.figures or {}) for r in rows if r.scope is not None and r.scope != "top"}


def _rankings(rows: list[Any]) -> Rankings:
    return {r.name: [(n, c) for n, c in json.loads(r.ranking)] for r in rows if r.scope == "top" and r.ranking}


def load(db: Database, project: str) -> tuple[Positions | None, Figures]:
    """Everything: the statics and every figure row (the owner's start)."""
    rows = list(db.execute(READ_ALL, (project,)))
    if not rows or rows[0].version is None:
        return None, {}
    return Positions.from_row(rows[0]), _figures(rows)


def shown(db: Database, project: str) -> tuple[Positions | None, Figures, Rankings]:
    """The statics, the figures the statistics page shows (project, teams, users) and the top lists."""
    rows = list(db.execute(READ_SHOWN, (project,)))
    if not rows:
        return positions(db, project), {}, {}
    return Positions.from_row(rows[0]), _figures(rows), _rankings(rows)


def commit(db: Database, project: str, owner: str, seen: Positions, new: Positions, changed: Figures,
           ttl_seconds: int, rankings: Rankings | None = None) -> bool:
    """Write the new statics and the changed figure rows if the partition is still at `seen.version` and
    `owner` still holds it; renews the owner's lease. False: someone else wrote (nothing was written)."""
    applied = json.dumps(sorted(list(k) for k in new.applied))
    writes: list[tuple[Statement, Any]] = [
        (COMMIT, (seen.version + 1, new.tag_head, new.tag_tail, new.review_head, new.review_tail, new.fill_cursor,
                  new.lease_checkpoint, new.events_checkpoint, applied, project, owner, seen.version)),
        (KEEP_OWNER, (ttl_seconds, owner, project)),
    ]
    writes.extend((ADD_FIGURES, (values, project, scope, name)) for (scope, name), values in changed.items())
    writes.extend((SET_RANKING, (json.dumps(top), project, kind)) for kind, top in (rankings or {}).items())
    applied_now = was_applied(db.execute_conditional_batch(writes))
    if applied_now:
        new.version = seen.version + 1
    return applied_now


def repair(db: Database, project: str, seen: Positions, rows: Figures, rankings: Rankings) -> bool:
    """Overwrite figure values (reconcile) if nothing was written since `seen`: the owner's next commit is then
    refused, and it reloads what this wrote."""
    writes: list[tuple[Statement, Any]] = [(BUMP, (seen.version + 1, project, seen.version))]
    writes.extend((ADD_FIGURES, (values, project, scope, name)) for (scope, name), values in rows.items())
    writes.extend((SET_RANKING, (json.dumps(top), project, kind)) for kind, top in rankings.items())
    return was_applied(db.execute_conditional_batch(writes))
