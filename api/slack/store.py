"""Small helpers shared by the Slack modules: Slack id shape, concurrent writes, raw-event compression."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import zstandard

from api.db import Database, Statement

# Slack team, channel and file ids: upper-case letters and digits. Checked at ingest so that an id the
# read endpoints could never serve (or that would name a path or overflow a partition key) is refused.
ID_RE = re.compile(r"^[A-Z0-9][A-Z0-9_-]{0,63}$")

_local = threading.local()

Write = tuple[Statement, Sequence[Any] | Mapping[str, Any]]


def run_concurrently(db: Database, writes: Iterable[Write]) -> None:
    """Send the writes at once and wait for all; raise the first failure (the caller answers 503).

    Every write is idempotent (same key, same event-time timestamp), so a retry of the whole set after a
    partial failure ends in the same state.
    """
    futures = [db.execute_async(stmt, params) for stmt, params in writes]
    error: BaseException | None = None
    for future in futures:
        try:
            future.result()
        except BaseException as exc:  # wait for the others before raising
            error = error or exc
    if error is not None:
        raise error


def compress_json(value: Any) -> bytes:
    """zstd-compressed JSON (the raw event, when kept); one compressor per thread (they are not thread-safe)."""
    compressor = getattr(_local, "zc", None)
    if compressor is None:
        compressor = _local.zc = zstandard.ZstdCompressor(level=3)
    return compressor.compress(json.dumps(value, separators=(",", ":")).encode())


def decompress_json(blob: bytes) -> Any:
    return json.loads(zstandard.ZstdDecompressor().decompress(blob))
