"""Versions of a workspace's pages, for conditional GETs (table slack_versions, cql/0290_slack_versions.cql).

A page's ETag is derived from the versions of the scopes it reads (api/conditional.py): a channel id for its
timeline, threads and messages, 'channels' for the channel index, 'users' for the directory, 'reports' for the
stored reports, and '*' in every page. A version is a counter advanced after every acknowledged write to a table
behind a page. `Database` calls `changed` on every write it sends and `advance` once the writes are acknowledged
(api/db.py), so every write path (ingest, edits, deletes, reactions, imports, backfill, the file worker,
retention, erasure) advances the versions of what it wrote without knowing about them.

Why no page is served stale: a writer advances the version only after its rows are acknowledged, and a reader
reads the version before its rows. A reader that saw the old version may have read the new rows (its ETag then
no longer matches the next revalidation: a full answer, never a stale one); a reader that saw the new version
reads rows at least as new as the write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from api.statement import Params, Statement

TABLES = frozenset({"slack_versions"})


class Database(Protocol):
    """What this module uses of api/db.py's Database (which calls it on every write: it cannot import it)."""

    def held(self, key: Any, make: Any) -> Any: ...
    def prepared(self, statement: Statement) -> Any: ...
    def execute_async(self, statement: Statement, params: Params = ()) -> Any: ...

ANY = "*"  # in every page's ETag: advanced by a write whose channel is not known (none today)
CHANNELS, USERS, REPORTS = "channels", "users", "reports"
_CHANNEL = None  # the write's own channel id

# Every table a page reads, with the scopes a write to it advances (tests/slack/test_conditional.py checks that
# every statement writing one of them binds the workspace, and the channel where the scope is the write's own).
TABLE_SCOPES: dict[str, tuple[str | None, ...]] = {
    "slack_messages": (_CHANNEL,),
    "slack_thread_replies": (_CHANNEL,),
    "slack_message_versions": (_CHANNEL,),
    "slack_channel_days": (_CHANNEL,),
    "slack_channels": (_CHANNEL, CHANNELS),
    "slack_channel_index": (_CHANNEL, CHANNELS),
    "slack_channel_names": (_CHANNEL, CHANNELS),
    "slack_users": (USERS,),
    "slack_reports": (REPORTS,),
    "slack_report_index": (REPORTS,),
}

ADVANCE = Statement("UPDATE slack_versions SET version = version + 1 WHERE team_id = ? AND scope IN ?",
                    name="UPDATE slack_versions (advance)", idempotent=False)
SELECT = Statement("SELECT scope, version FROM slack_versions WHERE team_id = ? AND scope IN ?",
                   name="SELECT slack_versions")

Changed = dict[str, set[str]]  # team id -> scopes


def _positions(db: Database, statement: Statement) -> tuple[int | None, int | None]:
    """Where the statement binds `team_id` and the channel (`channel_id` or `in(channel_id)`), by the driver's
    metadata of its bind markers; None where it binds none."""
    def find() -> tuple[int | None, int | None]:
        names = [c.name for c in db.prepared(statement).column_metadata or ()]
        channel = next((i for i, n in enumerate(names) if n in ("channel_id", "in(channel_id)")), None)
        return (names.index("team_id") if "team_id" in names else None), channel

    return db.held(("slack.versions.positions", id(statement)), find)


def changed(db: Database, writes: Iterable[tuple[Statement, Params]], into: Changed | None = None) -> Changed:
    """The (team, scopes) that `writes` change, added to `into` ({} when none of them is behind a page)."""
    out: Changed = {} if into is None else into
    for statement, params in writes:
        scopes = TABLE_SCOPES.get(statement.table or "")
        if scopes is None or statement.cql.startswith("SELECT"):
            continue
        if isinstance(params, Mapping):
            team, channel = params.get("team_id"), params.get("channel_id")
        else:
            team_at, channel_at = _positions(db, statement)
            team = params[team_at] if team_at is not None and team_at < len(params) else None
            channel = params[channel_at] if channel_at is not None and channel_at < len(params) else None
        if not isinstance(team, str):
            continue  # every table here is keyed by team: a write without one binds it as a literal (none today)
        found = out.setdefault(team, set())
        for scope in scopes:
            if scope is not None:
                found.add(scope)
            elif isinstance(channel, str):
                found.add(channel)
            elif isinstance(channel, (list, tuple, set, frozenset)):
                found.update(c for c in channel if isinstance(c, str))
            else:
                found.add(ANY)
    return out


def advance(db: Database, changes: Changed) -> None:
    """Advance the versions of `changes` (one statement per workspace, sent together)."""
    futures = [db.execute_async(ADVANCE, (team, sorted(scopes))) for team, scopes in changes.items() if scopes]
    for future in futures:
        future.result()


def read(db: Database, team_id: str, scopes: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """(scope, version) of `scopes` and of ANY, in scope order; a scope never written is absent (version 0)."""
    rows = db.execute_async(SELECT, (team_id, sorted({*scopes, ANY}))).result()
    return tuple(sorted((row.scope, row.version) for row in rows))
