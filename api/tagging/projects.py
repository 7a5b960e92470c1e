"""Tagging projects, their teams, people, tokens and item references.

Owner of tagging_projects, tagging_project_list, tagging_teams, tagging_members, tagging_tokens and
tagging_items. A personal token is 32 random bytes shown once; only its sha256 is stored, and a request's
token is looked up by that hash (one partition read, cached per process for a few seconds).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import secrets
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from api.caches import Cache
from api.db import Database, Statement, without_none
from api.tagging import stamps

TABLES = frozenset({"tagging_projects", "tagging_project_list", "tagging_teams", "tagging_members",
                    "tagging_tokens", "tagging_items"})

ROLES = ("tagger", "qa", "admin")
ITEMS_PER_BUCKET = 1000
DEFAULT_QUEUE_SIZE = 1000
DEFAULT_LEASE_SECONDS = 600

PUT_PROJECT = Statement(
    "INSERT INTO tagging_projects (project, name, source, categories, subcategories, queue_size, lease_seconds, "
    "max_held, total_items, created_us) VALUES (:project, :name, :source, :categories, :subcategories, "
    ":queue_size, :lease_seconds, :max_held, :total_items, :created_us)")
GET_PROJECT = Statement(
    "SELECT project, name, source, categories, subcategories, queue_size, lease_seconds, max_held, total_items, "
    "created_us FROM tagging_projects WHERE project = ?")
LIST_PROJECT = Statement("INSERT INTO tagging_project_list (scope, project, name) VALUES ('all', ?, ?)")
ALL_PROJECTS = Statement("SELECT project, name FROM tagging_project_list WHERE scope = 'all' LIMIT 10000")
PUT_TEAM = Statement("INSERT INTO tagging_teams (project, team, quota) VALUES (:project, :team, :quota)")
TEAMS = Statement("SELECT team, quota FROM tagging_teams WHERE project = ?")
PUT_MEMBER = Statement(
    "INSERT INTO tagging_members (project, user_id, team, role, token_hash, created_us) VALUES (?, ?, ?, ?, ?, ?)")
MEMBERS = Statement("SELECT user_id, team, role, created_us FROM tagging_members WHERE project = ?")
GET_MEMBER = Statement("SELECT user_id, team, role, token_hash FROM tagging_members WHERE project = ? AND user_id = ?")
PUT_TOKEN = Statement(
    "INSERT INTO tagging_tokens (token_hash, project, user_id, team, role) VALUES (?, ?, ?, ?, ?)")
GET_TOKEN = Statement("SELECT project, user_id, team, role FROM tagging_tokens WHERE token_hash = ?")
# A replaced token stops working at once: the one row of its hash is deleted (never read by a range).
DROP_TOKEN = Statement("DELETE FROM tagging_tokens WHERE token_hash = ?")
PUT_ITEM = Statement("INSERT INTO tagging_items (project, bucket, seq, ref) VALUES (?, ?, ?, ?)")
ITEMS_FROM = Statement(
    "SELECT seq, ref FROM tagging_items WHERE project = ? AND bucket = ? AND seq >= ? LIMIT ?")
GET_ITEM = Statement("SELECT ref FROM tagging_items WHERE project = ? AND bucket = ? AND seq = ?")


@dataclasses.dataclass(frozen=True)
class Project:
    project: str
    name: str
    source: dict[str, Any]
    categories: tuple[str, ...]
    subcategories: tuple[str, ...]
    queue_size: int
    lease_seconds: int
    max_held: int
    total_items: int
    created_us: int

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["categories"], out["subcategories"] = list(self.categories), list(self.subcategories)
        del out["created_us"]
        return out


@dataclasses.dataclass(frozen=True)
class Member:
    project: str
    user: str
    team: str
    role: str


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return "tg_" + secrets.token_urlsafe(32)


def create(db: Database, project: Project, refs: Iterable[str],
           progress: Any = None) -> int:
    """Write the project's items (numbered in the order given), then its definition and listing: a project
    is visible only once all its items are written. Returns the number of items."""
    count = 0

    def rows() -> Iterator[tuple[Statement, Any]]:
        nonlocal count
        for seq, ref in enumerate(refs):
            count = seq + 1
            yield PUT_ITEM, (project.project, seq // ITEMS_PER_BUCKET, seq, ref)

    db.execute_many(rows(), batch_size=50, partitions_per_batch=1, progress=progress)
    final = dataclasses.replace(project, total_items=count)
    db.execute(PUT_PROJECT, {**dataclasses.asdict(final), "source": json.dumps(final.source, sort_keys=True),
                             "categories": list(final.categories), "subcategories": list(final.subcategories)})
    db.execute(LIST_PROJECT, (final.project, final.name))
    return count


def _project(row: Any) -> Project:
    return Project(row.project, row.name, json.loads(row.source), tuple(row.categories or ()),
                   tuple(row.subcategories or ()), row.queue_size, row.lease_seconds, row.max_held, row.total_items,
                   row.created_us)


def get(db: Database, project: str) -> Project | None:
    row = db.execute(GET_PROJECT, (project,)).one()
    return _project(row) if row is not None else None


_DEFINITION_SECONDS = 10.0  # a definition never changes once made; teams' quotas may, and are re-read this often
_PROJECTS_MAX = 10_000  # projects whose definition (and, apart, whose teams) are kept


def _cached(db: Database, name: str, project: str, read: Callable[[], Any]) -> Any:
    """`read()`'s value for `project`, kept _DEFINITION_SECONDS in the cache `name`; a None (no such project)
    is not kept, so a project is found as soon as it is made."""
    cache = db.caches.ttl(name, maxsize=_PROJECTS_MAX, ttl=_DEFINITION_SECONDS)
    value = cache.get(project)
    if value is None:
        value = read()
        if value is not None:
            cache.set(project, value)
    return value


def get_cached(db: Database, project: str) -> Project | None:
    """The definition, cached per process (hot path: every workflow request needs it)."""
    return _cached(db, "tagging.projects", project, lambda: get(db, project))


def teams_cached(db: Database, project: str) -> dict[str, int | None]:
    """Teams and quotas, cached per process for 10 s: a changed quota applies within that time."""
    return _cached(db, "tagging.teams", project, lambda: teams(db, project))


def every(db: Database) -> list[str]:
    return [r.project for r in db.execute(ALL_PROJECTS)]


def put_team(db: Database, project: str, team: str, quota: int | None) -> None:
    db.execute(PUT_TEAM, without_none({"project": project, "team": team, "quota": quota}))


def teams(db: Database, project: str) -> dict[str, int | None]:
    return {r.team: r.quota for r in db.execute(TEAMS, (project,))}


def members(db: Database, project: str) -> list[Any]:
    return list(db.execute(MEMBERS, (project,)))


def add_member(db: Database, project: str, user: str, team: str, role: str) -> str:
    """Add (or re-issue the token of) a person; returns the new token. An earlier token of theirs stops working."""
    old = db.execute(GET_MEMBER, (project, user)).one()
    token = new_token()
    digest = hash_token(token)
    db.execute(PUT_TOKEN, (digest, project, user, team, role))
    db.execute(PUT_MEMBER, (project, user, team, role, digest, stamps.now_us(db)))
    if old is not None and old.token_hash and old.token_hash != digest:
        db.execute(DROP_TOKEN, (old.token_hash,))
    # This process forgets both at once (other processes within _TOKEN_SECONDS): the old token's member, and a
    # "no such token" it may have cached for the new one.
    tokens = _tokens(db)
    tokens.pop(digest)
    if old is not None and old.token_hash:
        tokens.pop(old.token_hash)
    return token


_TOKEN_SECONDS = 5.0  # how long a process trusts a token lookup (a revoked token works this long elsewhere)
_TOKENS_MAX = 10_000  # token hashes (known or unknown) remembered
_UNKNOWN = object()  # a miss, told apart from a cached None (an unknown token)


def _tokens(db: Database) -> Cache:
    return db.caches.ttl("tagging.tokens", maxsize=_TOKENS_MAX, ttl=_TOKEN_SECONDS)


def member_of_token(db: Database, token: str) -> Member | None:
    """The member a token belongs to, or None; both answers are kept _TOKEN_SECONDS (every request asks)."""
    digest = hash_token(token)
    tokens = _tokens(db)
    hit = tokens.get(digest, _UNKNOWN)
    if hit is not _UNKNOWN:
        return hit
    row = db.execute(GET_TOKEN, (digest,)).one()
    found = Member(row.project, row.user_id, row.team, row.role) if row is not None else None
    tokens.set(digest, found)
    return found


def refs_from(db: Database, project: Project, first_seq: int, limit: int) -> list[tuple[int, str]]:
    """Up to `limit` (seq, ref) pairs from `first_seq` on, in order (items are numbered densely, 1,000 per
    partition)."""
    out: list[tuple[int, str]] = []
    seq = first_seq
    while len(out) < limit and seq < project.total_items:
        bucket = seq // ITEMS_PER_BUCKET
        out.extend((r.seq, r.ref) for r in db.execute(ITEMS_FROM, (project.project, bucket, seq, limit - len(out))))
        seq = (bucket + 1) * ITEMS_PER_BUCKET
    return out


def ref_of(db: Database, project: str, seq: int) -> str | None:
    row = db.execute(GET_ITEM, (project, seq // ITEMS_PER_BUCKET, seq)).one()
    return row.ref if row is not None else None


def refs_of(db: Database, project: str, seqs: Iterable[int]) -> dict[int, str]:
    futures = {s: db.execute_async(GET_ITEM, (project, s // ITEMS_PER_BUCKET, s)) for s in seqs}
    out = {}
    for seq, future in futures.items():
        row = future.result().one()
        if row is not None:
            out[seq] = row.ref
    return out
