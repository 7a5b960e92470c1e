"""Opaque, HMAC-signed cursors: clients get a token they cannot read meaningfully nor forge.

A cursor carries a small JSON dict (a position, never a raw driver paging_state) plus a `scope` string that
ties it to one query (e.g. team/channel/filters), so a cursor of one listing is refused by another.
Format: base64url(json) "." base64url(HMAC-SHA256(secret, scope + "\\n" + json)[:16]).
A cursor that fails any check is a `BadCursor` (api/errors.py: a 400 with the reason, as JSON or as a page).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
from typing import Any

from api.errors import BadCursor, BadPosition

_MAX_CURSOR_CHARS = 2048
INVALID_CURSOR = "invalid cursor: pass back the `next_cursor` of the same listing unchanged"
# The reason of a BadPosition: a signed cursor whose position the listing's own check refused.
BAD_POSITION = "invalid cursor: not the next_cursor of this listing (or not a cursor at all)"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: bytes, scope: str, payload: bytes) -> bytes:
    return hmac.new(secret, scope.encode() + b"\n" + payload, hashlib.sha256).digest()[:16]


def sign_cursor(position: dict[str, Any], secret: bytes, scope: str = "") -> str:
    """Encode `position` (JSON-serialisable) as an opaque signed cursor bound to `scope`."""
    payload = json.dumps(position, separators=(",", ":"), sort_keys=True).encode()
    return f"{_b64(payload)}.{_b64(_mac(secret, scope, payload))}"


def verify_cursor(cursor: str, secret: bytes, scope: str = "") -> dict[str, Any]:
    """The position inside a cursor made by `sign_cursor` for the same scope; BadCursor when forged or garbled."""
    try:
        if len(cursor) > _MAX_CURSOR_CHARS:
            raise ValueError("too long")
        body, _, mac = cursor.partition(".")
        payload = _unb64(body)
        if not hmac.compare_digest(_unb64(mac), _mac(secret, scope, payload)):
            raise ValueError("bad signature")
        position = json.loads(payload)
        if not isinstance(position, dict) or not all(_scalar(v) for v in position.values()):
            raise ValueError("not an object of scalars")
    except (ValueError, TypeError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise BadCursor(INVALID_CURSOR) from None
    return position


# A validly signed cursor is only as good as the secret: whoever holds it (a leaked or default secret) can sign
# any position. So positions are checked after the MAC as if they were input: every value a scalar that fits a
# Cassandra bigint (no 10**30 reaching the driver), and each listing checks its own range with `in_range`.
_BIGINT = (-(2**63), 2**63 - 1)


def _scalar(value: Any) -> bool:
    if value is None or isinstance(value, bool | str):
        return True
    if isinstance(value, int):
        return _BIGINT[0] <= value <= _BIGINT[1]
    return isinstance(value, float) and math.isfinite(value)


def in_range(value: Any, low: int, high: int) -> bool:
    """Whether a cursor's position is an integer (not a bool) in [low, high]."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def int_position(value: Any, low: int, high: int) -> int:
    """A cursor's integer position in [low, high]; BadPosition otherwise."""
    if not in_range(value, low, high):
        raise BadPosition(BAD_POSITION)
    return value
