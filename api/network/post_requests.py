"""Post requests: post_requests, the claim an Idempotency-Key makes on a post before anything is written.

A client that retries POST /networks/{n}/posts (its answer was lost, a node died, it was told 503) sends the same
key again. The first request claims (network, author, key) with INSERT IF NOT EXISTS; a retry finds the claim, so
it writes the same post (same id and time: every post write is an upsert of the same values) rather than a
second one, and once the first request has finished it answers what the first answered. A key used again for a
different post of the same author is refused. Claims expire after 24 hours (the table's default TTL).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from api import partitions
from api.db import Database, Statement, was_applied

TABLES = frozenset({"post_requests"})

KEPT_FOR = timedelta(hours=24)  # the table's default_time_to_live (cql/0100_network_post_requests.cql)

CLAIM = Statement(
    "INSERT INTO post_requests (network, author_id, idempotency_key, request_digest, requested_at, post_id, "
    "posted_at) VALUES (?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS",
    name="INSERT post_requests IF NOT EXISTS", idempotent=False)
# The answer outlives the claim by no second: it expires with it (TTL = what is left of the claim's 24 hours).
FINISH = Statement(
    "UPDATE post_requests USING TTL ? SET fanned_out_to = ? "
    "WHERE network = ? AND author_id = ? AND idempotency_key = ?")


@dataclass(frozen=True)
class Claim:
    """The post a key stands for. `first` when this request made the claim; `fanned_out_to` is set once the
    request that made it finished (None: it failed part way, or is still writing)."""
    first: bool
    request_digest: bytes
    requested_at: datetime
    post_id: int
    posted_at: datetime
    fanned_out_to: int | None


def request_digest(fields: dict[str, Any]) -> bytes:
    """What identifies a request besides its key: the post's fields as the client sent them (absent ones
    included as null), so a retry matches and a different post under the same key does not."""
    canonical = json.dumps({k: v.isoformat() if isinstance(v, datetime) else v for k, v in fields.items()},
                           sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(canonical.encode(), digest_size=16).digest()


def claim(db: Database, network: str, author_id: int, key: str, digest: bytes, post_id: int,
          posted_at: datetime) -> Claim:
    """Claim the key for this post, or return the claim already made (the transaction's answer carries the
    existing row, so a retry costs one round)."""
    now = datetime.now(UTC).replace(microsecond=0)
    result = db.execute(CLAIM, (network, author_id, key, digest, now, post_id, posted_at))
    if was_applied(result):
        return Claim(True, digest, now, post_id, posted_at, None)
    row = result.one()
    return Claim(False, row.request_digest, _utc(row.requested_at), row.post_id, _utc(row.posted_at),
                 row.fanned_out_to)


def finish(db: Database, network: str, author_id: int, key: str, claimed: Claim, fanned_out_to: int) -> None:
    """Record the answer, so later retries return it without writing again."""
    left = KEPT_FOR - (datetime.now(UTC) - claimed.requested_at)
    seconds = int(left.total_seconds())
    if seconds > 0:  # an older claim has expired (or is about to): nothing to record
        db.execute(FINISH, (seconds, fanned_out_to, network, author_id, key))


def _utc(when: datetime) -> datetime:
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: partitions.Progress | None = None) -> dict[str, int]:
    """Delete every partition of this module's tables that belongs to `network` (admin; see api/partitions.py)."""
    return partitions.drop(db, TABLES, "network", network, dry_run=dry_run, progress=progress)
