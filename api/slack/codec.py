"""Value encodings shared by the Slack modules: the shape of a Slack id and the compressed raw-event blob."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import orjson
import zstandard

# Slack team, channel and file ids: upper-case letters and digits. Checked at ingest so that an id the read
# endpoints could never serve (or that would name a path or overflow a partition key) is refused. The
# pattern is also the one the OpenAPI document states for the id path parameters.
ID_PATTERN = r"^[A-Z0-9][A-Z0-9_-]{0,63}$"
_ID_RE = re.compile(ID_PATTERN)

# People and bots, by Slack's documented prefixes: a user id starts with U (W on Enterprise Grid; Slack's own bot
# is USLACKBOT), a bot id with B. A message's author becomes a link in the archive pages and a key of the
# activity and report tables, so only these shapes are stored (api/slack/payloads.py).
USER_ID_PATTERN = r"^[UW][A-Z0-9]{1,63}$"
BOT_ID_PATTERN = r"^B[A-Z0-9]{1,63}$"
_USER_RE = re.compile(USER_ID_PATTERN)
_BOT_RE = re.compile(BOT_ID_PATTERN)

_local = threading.local()


def is_slack_id(value: object) -> bool:
    """A Slack-shaped id (the whole string: a trailing newline is not allowed either)."""
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


def is_user_id(value: object) -> bool:
    """A Slack user id: U or W, then upper-case letters and digits (the whole string)."""
    return isinstance(value, str) and _USER_RE.fullmatch(value) is not None


def is_bot_id(value: object) -> bool:
    """A Slack bot id: B, then upper-case letters and digits (the whole string)."""
    return isinstance(value, str) and _BOT_RE.fullmatch(value) is not None


def compress_json(value: Any) -> bytes:
    """zstd-compressed JSON (the raw event, when kept); one compressor per thread (they are not thread-safe)."""
    compressor = getattr(_local, "zc", None)
    if compressor is None:
        compressor = _local.zc = zstandard.ZstdCompressor(level=3)
    return compressor.compress(json.dumps(value, separators=(",", ":")).encode())


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
COMPRESS_ABOVE = 4096  # bytes of JSON: below it the table's own compression is enough


def encode_json(value: Any) -> bytes:
    """Compact JSON, zstd-compressed when longer than COMPRESS_ABOVE. Small values are not compressed here:
    zstd releases the GIL for every call, and with the driver's I/O thread busy each call then waits for the GIL
    back (~0.3 ms of wall time per message on a bulk import), where the JSON alone costs ~2 µs; Cassandra's
    SSTable compression still compresses them on disk."""
    try:
        data = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):  # integers beyond 64 bits, keys that are not strings
        data = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    if len(data) <= COMPRESS_ABOVE:
        return data
    compressor = getattr(_local, "zc", None)
    if compressor is None:
        compressor = _local.zc = zstandard.ZstdCompressor(level=3)
    return compressor.compress(data)


def decode_json(blob: bytes) -> Any:
    """The value `encode_json` (or `compress_json`) stored."""
    if blob[:4] == _ZSTD_MAGIC:
        blob = zstandard.ZstdDecompressor().decompress(blob)
    try:
        return orjson.loads(blob)
    except orjson.JSONDecodeError:  # what orjson refuses (integers beyond 64 bits) the stdlib reads
        return json.loads(blob)


def decompress_json(blob: bytes) -> Any:
    """The value `compress_json` stored (to read a kept raw event back)."""
    return json.loads(zstandard.ZstdDecompressor().decompress(blob))
