"""One project's bookkeeping: owner lease, queue positions, checkpoints and figures, in one partition.

Owner of tagging_control. Only the project's owner writes it, and every write is one conditional batch
`IF owner = <me> AND version = <what I read>` that also bumps the version: a writer that lost its lease, or
that another writer (reconcile) overtook, is refused and reloads. Figures are map cells added with
`figures = figures + {...}` (a write of the new values; never an overwrite of the whole map, which would write
a tombstone each time).

Keyword use counts (10^5-10^6 per project) live in their own table, tagging_keyword_uses (64 buckets by hash),
also owned here: the partition keeps people, categories and the top lists only, so loading it is small. The
owner writes the counts a commit changed right after it, `USING TIMESTAMP <that commit's version>`, and the
commit itself carries them (`keywords_pending`) for the next owner to rewrite if this one died first.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Iterable
from typing import Any

from cassandra import ConsistencyLevel

from api.db import Database, Statement, was_applied

TABLES = frozenset({"tagging_control", "tagging_keyword_uses"})

_STATICS = ("version", "tag_head", "tag_tail", "review_head", "review_tail", "fill_cursor", "lease_checkpoint",
            "events_checkpoint", "applied", "keywords_pending", "late_checkpoint", "late_applied", "counted_pending")
# Every figure scope but 'keyword' (rows of projects made before cql/0170, no longer read).
_SCOPES = "('project', 'team', 'user', 'category', 'subcategory', 'top')"
KEYWORD_BUCKETS = 64

INIT = Statement(
    "UPDATE tagging_control SET version = 0, tag_head = 0, tag_tail = 0, review_head = 0, review_tail = 0, "
    "fill_cursor = 0, lease_checkpoint = ?, events_checkpoint = ?, applied = '[]', late_checkpoint = ?, "
    "late_applied = '[]', counted_pending = '[]' WHERE project = ?")
ACQUIRE = Statement("UPDATE tagging_control USING TTL ? SET owner = ? WHERE project = ? IF owner = null",
                    idempotent=False)
RELEASE = Statement("DELETE owner FROM tagging_control WHERE project = ? IF owner = ?", idempotent=False)
READ_ALL = Statement(f"SELECT scope, name, figures, ranking FROM tagging_control WHERE project = ? "
                     f"AND scope IN {_SCOPES}", name="SELECT tagging_control (figures)")
READ_SHOWN = Statement(
    f"SELECT scope, name, figures, ranking, owner, {', '.join(_STATICS)} FROM tagging_control WHERE project = ? "
    "AND scope IN ('project', 'team', 'user', 'top')", name="SELECT tagging_control (shown figures)")
READ_STATICS = Statement(f"SELECT owner, {', '.join(_STATICS)} FROM tagging_control WHERE project = ? LIMIT 1",
                         name="SELECT tagging_control (statics)")
# What takers and the review list need: the lanes' ends only (the statics' event keys are the owner's business,
# and decoding them on every refresh of a taker's positions was a tenth of a `next`).
READ_LANES = Statement("SELECT version, tag_head, tag_tail, review_head, review_tail FROM tagging_control "
                       "WHERE project = ? LIMIT 1", name="SELECT tagging_control (lanes)")
COMMIT = Statement(
    "UPDATE tagging_control SET version = ?, tag_head = ?, tag_tail = ?, review_head = ?, review_tail = ?, "
    "fill_cursor = ?, lease_checkpoint = ?, events_checkpoint = ?, applied = ?, keywords_pending = ?, "
    "late_checkpoint = ?, late_applied = ?, counted_pending = ? WHERE project = ? IF owner = ? AND version = ?",
    idempotent=False)
KEEP_OWNER = Statement("UPDATE tagging_control USING TTL ? SET owner = ? WHERE project = ?")
SET_RANKING = Statement("UPDATE tagging_control SET ranking = ? WHERE project = ? AND scope = 'top' AND name = ?")
# Reconcile's repair: bumps the version (the owner's next commit is refused) and clears the pending counts (the
# repair writes the right ones; an owner rewriting its older ones at its reload would undo them). The pending
# marks stay: those events are counted in the figures the repair wrote too.
BUMP = Statement("UPDATE tagging_control SET version = ?, keywords_pending = '{}' WHERE project = ? IF version = ?",
                 idempotent=False, name="UPDATE tagging_control (version only)")
# The timestamp is the control version of the commit that counted the uses: of two owners, the later one wins.
PUT_USES = Statement(
    "UPDATE tagging_keyword_uses USING TIMESTAMP ? SET uses = ? WHERE project = ? AND bucket = ? AND keyword = ?")
# LOCAL_QUORUM: an owner reads what the previous owner (another process) wrote at LOCAL_QUORUM.
GET_USES = Statement("SELECT keyword, uses FROM tagging_keyword_uses WHERE project = ? AND bucket = ? AND keyword IN ?",
                     consistency=ConsistencyLevel.LOCAL_QUORUM)
ALL_USES = Statement("SELECT keyword, uses FROM tagging_keyword_uses WHERE project = ? AND bucket = ?",
                     consistency=ConsistencyLevel.LOCAL_QUORUM, name="SELECT tagging_keyword_uses (a bucket)")
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
    keywords_pending: dict[str, int] = dataclasses.field(default_factory=dict)  # counts the commit changed
    late_checkpoint: int = 0  # every notice of a late event at or before this time (us) is handled
    late_applied: set[tuple[int, int, int, str]] = dataclasses.field(default_factory=set)  # handled after it
    counted_pending: list[tuple[int, int, str]] = dataclasses.field(default_factory=list)  # to mark counted

    @classmethod
    def from_row(cls, row: Any) -> Positions:
        applied = {tuple(k) for k in json.loads(row.applied or "[]")}
        # A project made before cql/0260 has no notices before its events checkpoint.
        late = row.late_checkpoint if row.late_checkpoint is not None else (row.events_checkpoint or 0)
        return cls(row.version or 0, row.tag_head or 0, row.tag_tail or 0, row.review_head or 0,
                   row.review_tail or 0, row.fill_cursor or 0, row.lease_checkpoint or 0,
                   row.events_checkpoint or 0, applied, row.owner, json.loads(row.keywords_pending or "{}"), late,
                   {tuple(k) for k in json.loads(row.late_applied or "[]")},
                   [tuple(k) for k in json.loads(row.counted_pending or "[]")])


Figures = dict[tuple[str, str], dict[str, int]]  # (scope, name) -> {figure: value}
Rankings = dict[str, list[tuple[str, int]]]  # 'keywords' | 'categories' | 'subcategories' -> top (name, count)


def init(db: Database, project: str, created_us: int) -> None:
    """The project's statics, its checkpoints just before its creation: the logs are read after a checkpoint
    (`at_us > checkpoint`), so an event or lease end stamped in the creation's own microsecond (a coarse or a
    test clock) is still read, and reconcile does not count it as already in the figures."""
    db.execute(INIT, (created_us - 1, created_us - 1, created_us - 1, project))


def acquire(db: Database, project: str, owner: str, ttl_seconds: int) -> bool:
    result = db.execute(ACQUIRE, (ttl_seconds, owner, project))
    row = result.one()
    return bool(row is not None and (row[0] or getattr(row, "owner", None) == owner))


def release(db: Database, project: str, owner: str) -> None:
    db.execute(RELEASE, (project, owner))


def positions(db: Database, project: str) -> Positions | None:
    row = db.execute(READ_STATICS, (project,)).one()
    return Positions.from_row(row) if row is not None and row.version is not None else None


@dataclasses.dataclass(frozen=True)
class Lanes:
    """Where each queue lane starts and ends."""

    tag_head: int
    tag_tail: int
    review_head: int
    review_tail: int


def lanes(db: Database, project: str) -> Lanes | None:
    row = db.execute(READ_LANES, (project,)).one()
    if row is None or row.version is None:
        return None
    return Lanes(row.tag_head or 0, row.tag_tail or 0, row.review_head or 0, row.review_tail or 0)


def _figures(rows: list[Any]) -> Figures:
    return {(r.scope, r.name): dict(r.figures or {}) for r in rows if r.scope is not None and r.scope != "top"}


def _rankings(rows: list[Any]) -> Rankings:
    return {r.name: [(n, c) for n, c in json.loads(r.ranking)] for r in rows if r.scope == "top" and r.ranking}


def load(db: Database, project: str) -> tuple[Positions | None, Figures, Rankings]:
    """The statics, every figure row but the keyword counts, and the top lists (the owner's start)."""
    # Two reads: with a restriction on `scope`, a partition without figure rows yet answers nothing at all
    # (not even its statics).
    pos = positions(db, project)
    if pos is None:
        return None, {}, {}
    rows = list(db.execute(READ_ALL, (project,)))
    return pos, _figures(rows), _rankings(rows)


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
    pending = json.dumps(new.keywords_pending, sort_keys=True)
    late_applied = json.dumps(sorted(list(k) for k in new.late_applied))
    counted = json.dumps(sorted(list(k) for k in new.counted_pending))
    writes: list[tuple[Statement, Any]] = [
        (COMMIT, (seen.version + 1, new.tag_head, new.tag_tail, new.review_head, new.review_tail, new.fill_cursor,
                  new.lease_checkpoint, new.events_checkpoint, applied, pending, new.late_checkpoint, late_applied,
                  counted, project, owner, seen.version)),
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
    refused, and it reloads what this wrote. Keyword counts go to their table at the repair's version."""
    uses = {name: values.get("uses", 0) for (scope, name), values in rows.items() if scope == "keyword"}
    writes: list[tuple[Statement, Any]] = [(BUMP, (seen.version + 1, project, seen.version))]
    writes.extend((ADD_FIGURES, (values, project, scope, name)) for (scope, name), values in rows.items()
                  if scope != "keyword")
    writes.extend((SET_RANKING, (json.dumps(top), project, kind)) for kind, top in rankings.items())
    if not was_applied(db.execute_conditional_batch(writes)):
        return False
    write_keyword_uses(db, project, uses, seen.version + 1)
    return True


# -- keyword use counts -------------------------------------------------------------------------------------

def keyword_bucket(keyword: str) -> int:
    return zlib.crc32(keyword.encode()) % KEYWORD_BUCKETS


def keyword_uses(db: Database, project: str, keywords: Iterable[str]) -> dict[str, int]:
    """The stored counts of these keywords (absent: never used), one read per bucket, concurrently."""
    by_bucket: dict[int, list[str]] = {}
    for k in set(keywords):
        by_bucket.setdefault(keyword_bucket(k), []).append(k)
    futures = [db.execute_async(GET_USES, (project, bucket, sorted(ks)[i:i + 500]))
               for bucket, ks in by_bucket.items() for i in range(0, len(ks), 500)]
    return {r.keyword: r.uses or 0 for f in futures for r in f.result()}


def write_keyword_uses(db: Database, project: str, uses: dict[str, int], version: int) -> None:
    """Store counts as of control version `version` (their cell timestamp: a later version always wins)."""
    db.execute_many((PUT_USES, (version, n, project, keyword_bucket(k), k)) for k, n in uses.items())


def all_keyword_uses(db: Database, project: str) -> dict[str, int]:
    """Every keyword count of a project (reconcile): 64 partitions, paged."""
    futures = [db.execute_async(ALL_USES, (project, bucket)) for bucket in range(KEYWORD_BUCKETS)]
    return {r.keyword: r.uses or 0 for f in futures for r in f.result()}
