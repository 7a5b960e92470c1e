"""Value encodings shared by the Slack modules: the shape of a Slack id and the compressed raw-event blob."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import zstandard

# Slack team, channel and file ids: upper-case letters and digits. Checked at ingest so that an id the read
# endpoints could never serve (or that would name a path or overflow a partition key) is refused. The
# pattern is also the one the OpenAPI document states for the id path parameters.
ID_PATTERN = r"^[A-Z0-9][A-Z0-9_-]{0,63}$"
_ID_RE = re.compile(ID_PATTERN)

_local = threading.local()


def is_slack_id(value: object) -> bool:
    """A Slack-shaped id (the whole string: a trailing newline is not allowed either)."""
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


def compress_json(value: Any) -> bytes:
    """zstd-compressed JSON (the raw event, when kept); one compressor per thread (they are not thread-safe)."""
    compressor = getattr(_local, "zc", None)
    if compressor is None:
        compressor = _local.zc = zstandard.ZstdCompressor(level=3)
    return compressor.compress(json.dumps(value, separators=(",", ":")).encode())


def decompress_json(blob: bytes) -> Any:
    """The value `compress_json` stored (to read a kept raw event back)."""
    return json.loads(zstandard.ZstdDecompressor().decompress(blob))
