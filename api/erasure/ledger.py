"""The erasure ledger (cql/0270): one row per request, and the messages each request changed.

Owner of erasure_requests and erasure_touched. The ledger never names the person: a request's `subject` is an
HMAC of the archive and the person's id under the deployment's cursor secret, so `find` locates a person's
request from their id while the rows alone say nothing about whom they concern.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.util import uuid_from_time

from api.db import Database, Statement
from api.errors import NotFound

TABLES = frozenset({"erasure_requests", "erasure_touched"})

RUNNING, DONE, FAILED, HELD = "running", "done", "failed", "held"
_QUORUM = ConsistencyLevel.LOCAL_QUORUM

PUT_REQUEST = Statement(
    "INSERT INTO erasure_requests (archive, request_id, subject, state, requested_by, requested_at) "
    "VALUES (?, ?, ?, ?, ?, ?)", consistency=_QUORUM)
ADD_CHANNELS = Statement("UPDATE erasure_requests SET channels = channels + ? WHERE archive = ? AND request_id = ?",
                         consistency=_QUORUM)
FINISH = Statement(
    "UPDATE erasure_requests SET state = ?, finished_at = ?, counts = counts + ?, held = held + ? "
    "WHERE archive = ? AND request_id = ?", consistency=_QUORUM)
SET_STATE = Statement("UPDATE erasure_requests SET state = ? WHERE archive = ? AND request_id = ?",
                      consistency=_QUORUM, name="UPDATE erasure_requests (state)")
SET_PROOF = Statement("UPDATE erasure_requests SET proof = ? WHERE archive = ? AND request_id = ?",
                      consistency=_QUORUM, name="UPDATE erasure_requests (proof)")
_COLUMNS = "request_id, subject, state, requested_by, requested_at, finished_at, channels, counts, held, proof"
SELECT_REQUESTS = Statement(f"SELECT {_COLUMNS} FROM erasure_requests WHERE archive = ? LIMIT ?",
                            consistency=_QUORUM)
SELECT_REQUEST = Statement(f"SELECT {_COLUMNS} FROM erasure_requests WHERE archive = ? AND request_id = ?",
                           consistency=_QUORUM, name="SELECT erasure_requests (one)")
PUT_TOUCHED = Statement(
    "INSERT INTO erasure_touched (request_id, channel_id, day, ts, what) VALUES (?, ?, ?, ?, ?)")
SELECT_TOUCHED = Statement(
    "SELECT day, ts, what FROM erasure_touched WHERE request_id = ? AND channel_id = ?", consistency=_QUORUM)
MAX_REQUESTS = 10_000  # requests of one archive looked through by `find`
GUARD_CACHE = "erasure.guard_archives"  # guard.py's per-process view of an archive's requests, dropped on a change
GUARD_REFRESH = 10.0  # seconds another process goes on with that view (docs/retention.md "Erased stays erased")


@dataclasses.dataclass(frozen=True)
class Request:
    archive: str
    request_id: uuid.UUID
    subject: str
    state: str
    requested_by: str
    requested_at: datetime
    finished_at: datetime | None
    channels: frozenset[str]
    counts: dict[str, int]
    held: dict[str, int]
    proof: dict[str, Any] | None

    @classmethod
    def from_row(cls, archive: str, row: Any) -> Request:
        return cls(archive, row.request_id, row.subject, row.state, row.requested_by,
                   row.requested_at.replace(tzinfo=UTC), row.finished_at.replace(tzinfo=UTC) if row.finished_at
                   else None, frozenset(row.channels or ()), dict(row.counts or {}), dict(row.held or {}),
                   json.loads(row.proof) if row.proof else None)

    def to_json(self) -> dict[str, Any]:
        return {"request_id": str(self.request_id), "archive": self.archive, "state": self.state,
                "requested_by": self.requested_by, "requested_at": self.requested_at.isoformat(),
                "finished_at": self.finished_at.isoformat() if self.finished_at else None,
                "channels": len(self.channels), "counts": dict(sorted(self.counts.items())),
                "held": dict(sorted(self.held.items())), "proof": self.proof}


def subject_of(db: Database, archive: str, person: str) -> str:
    """The keyed hash that stands for a person in the ledger."""
    return hmac.new(db.settings.cursor_secret, f"erasure\x00{archive}\x00{person}".encode(), hashlib.sha256
                    ).hexdigest()


def start(db: Database, archive: str, person: str, requested_by: str) -> Request:
    at = datetime.fromtimestamp(db.clock.time(), UTC)
    request_id = uuid_from_time(at.timestamp())
    db.execute(PUT_REQUEST, (archive, request_id, subject_of(db, archive, person), RUNNING, requested_by, at))
    view_changed(db, archive)
    return get(db, archive, request_id)


def settle(db: Database, request: Request) -> float:
    """Wait until `request` is in force in every process before a run reads what the archive holds: each
    process's guard reads the requests at least every GUARD_REFRESH seconds, and a write that passed a guard not
    yet refreshed lands moments later (`erasure_settle_seconds`, CHRONICLE_ERASURE_SETTLE_SECONDS, covers both).
    Such a write is then already there for the run to erase; any later one the guard leaves out. Returns the
    seconds waited (0 for a request asked long enough ago, e.g. one resumed)."""
    wait = request.requested_at.timestamp() + db.settings.erasure_settle_seconds - db.clock.time()
    if wait <= 0:
        return 0.0
    db.clock.sleep(wait)
    return wait


def view_changed(db: Database, archive: str) -> None:
    """A request or a hold of the archive changed: this process's guard (guard.py) reads them again."""
    db.caches.ttl(GUARD_CACHE, maxsize=4096, ttl=GUARD_REFRESH).pop(archive)


def get(db: Database, archive: str, request_id: uuid.UUID) -> Request:
    if request_id.version != 1:  # request ids are time UUIDs: any other cannot name one (nor be bound)
        raise NotFound(f"no erasure request {request_id} in {archive}")
    row = db.execute(SELECT_REQUEST, (archive, request_id)).one()
    if row is None:
        raise NotFound(f"no erasure request {request_id} in {archive}")
    return Request.from_row(archive, row)


def requests(db: Database, archive: str, *, limit: int = 100) -> list[Request]:
    return [Request.from_row(archive, row) for row in db.execute(SELECT_REQUESTS, (archive, limit))]


def find(db: Database, archive: str, person: str) -> Request | None:
    """The newest request about this person, if any."""
    subject = subject_of(db, archive, person)
    return next((r for r in requests(db, archive, limit=MAX_REQUESTS) if r.subject == subject), None)


def add_channels(db: Database, request: Request, channels: Iterable[str]) -> None:
    wanted = set(channels) - request.channels
    if wanted:
        db.execute(ADD_CHANNELS, (wanted, request.archive, request.request_id))


def touched_writes(request: Request, channel_id: str, entries: Iterable[tuple[int, int, str]]
                   ) -> list[tuple[Statement, tuple]]:
    """Rows saying which messages (day, ts) the request changed and how: written before the change itself."""
    return [(PUT_TOUCHED, (request.request_id, channel_id, day, ts, what)) for day, ts, what in entries]


def touched(db: Database, request: Request, channel_id: str) -> list[tuple[int, int, str]]:
    return [(r.day, r.ts, r.what) for r in db.execute(SELECT_TOUCHED, (request.request_id, channel_id))]


def finish(db: Database, request: Request, state: str, counts: Mapping[str, int], held: Mapping[str, int]
           ) -> Request:
    at = datetime.fromtimestamp(db.clock.time(), UTC)
    db.execute(FINISH, (state, at, dict(counts), dict(held), request.archive, request.request_id))
    view_changed(db, request.archive)
    return get(db, request.archive, request.request_id)


def set_state(db: Database, request: Request, state: str) -> None:
    db.execute(SET_STATE, (state, request.archive, request.request_id))
    view_changed(db, request.archive)


def record_proof(db: Database, request: Request, proof: Mapping[str, Any]) -> None:
    db.execute(SET_PROOF, (json.dumps(proof, sort_keys=True), request.archive, request.request_id))
