"""The Slack file queue: files of archived messages waiting for the file worker, on the generic work queue.

Queue `slack_files` of api/workqueue.py, one group per workspace (so one workspace's backlog never starves
another's new files), one item per file keyed `<channel>/<ts>/<file_id>`. Ingest sends `enqueue_writes` with the
message's own rows; the worker (files.py) takes items, and gives each back with `done` or `retry`.

This module owns no table (the old slack_files_pending and slack_file_leases are dropped by
cql/0030_work_queue.cql): it translates between Slack files and work items.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from api import workqueue
from api.clock import SYSTEM, Clock
from api.db import Database, Params, Statement
from api.workqueue import WorkItem

QUEUE = "slack_files"


@dataclasses.dataclass(frozen=True, slots=True)
class PendingFile:
    """One queued file: the message it belongs to, where to fetch it, and its retry state."""

    team_id: str
    channel_id: str
    ts: int  # the message's ts (µs)
    file_id: str
    url_private: str
    mimetype: str | None
    name: str | None
    attempts: int
    item: WorkItem

    @classmethod
    def from_item(cls, item: WorkItem) -> PendingFile:
        p = item.payload
        return cls(team_id=item.group, channel_id=p["channel_id"], ts=int(p["ts"]), file_id=p["file_id"],
                   url_private=p["url"], mimetype=p.get("mimetype"), name=p.get("name"), attempts=item.attempts,
                   item=item)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def fetchable(files: Iterable[dict]) -> list[dict]:
    """The files the worker fetches: external files (no url_private, or is_external) stay links."""
    return [f for f in files
            if isinstance(f.get("url_private"), str) and f["url_private"] and not f.get("is_external")]


def enqueue_writes(team_id: str, channel_id: str, ts: int, files: Iterable[dict], *, clock: Clock = SYSTEM
                   ) -> list[tuple[Statement, Params]]:
    """The queue rows for a message's files (due now by `clock`: the db.clock they are written with); the caller
    sends them with the message's own rows."""
    writes: list[tuple[Statement, Params]] = []
    for f in fetchable(files):
        payload = {"channel_id": channel_id, "ts": ts, "file_id": f["id"], "url": f["url_private"]}
        payload.update({k: v for k in ("mimetype", "name") if (v := _str(f.get(k))) is not None})
        writes.extend(workqueue.enqueue_writes(QUEUE, team_id, f"{channel_id}/{ts}/{f['id']}", payload,
                                               clock=clock))
    return writes


def take(db: Database, owner: str, limit: int) -> list[PendingFile]:
    """Up to `limit` due files, from the shards `owner` holds, shared fairly between workspaces."""
    return [PendingFile.from_item(item) for item in workqueue.take(db, QUEUE, owner, limit)]


def done(db: Database, file: PendingFile, owner: str) -> None:
    """Finished with `file` (stored, failed for good, or found stored already)."""
    workqueue.done(db, file.item, owner)


def retry(db: Database, file: PendingFile, owner: str, *, due_at_us: int, error: str) -> None:
    workqueue.retry(db, file.item, owner, due_at_us=due_at_us, error=error)


def stop(db: Database, owner: str) -> None:
    """A worker stopping: checkpoints written, shards handed back."""
    workqueue.stop(db, QUEUE, owner)


def backlog(db: Database) -> dict:
    """Files not yet finished per workspace (bounded count; see workqueue.backlog)."""
    return workqueue.backlog(db, QUEUE)
