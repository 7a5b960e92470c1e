"""Limits a JSON body must meet before any parser sees it (docs/security.md "Hostile input").

Python's json parser recurses once per nesting level: `[` x 5000 raises RecursionError (a 500, with a
traceback in the log) instead of a parse error, and an integer literal of more than 4,300 digits raises a
plain ValueError that the request parsers do not expect either. `problem(body)` finds both with a linear
scan, without parsing: the nesting depth of brackets outside strings, and the longest run of digits outside
strings. The size of a body is capped before that by Flask (`MAX_CONTENT_LENGTH`: 413).

`check_request_body` is the before-request hook (installed by api/observability.py `install_request_hooks`)
that every route passes through: every body that is not a form is checked, so the routes' parsers
(flask-smorest / webargs, the Slack events receiver) never see one beyond the limits. The Slack receiver's
decoder (api/slack/payloads.py `RawBody.decode`) applies the same check to the bytes it is given.
"""

from __future__ import annotations

import re

MAX_DEPTH = 64            # nesting of arrays and objects (Slack's deepest Block Kit payloads use about 10)
MAX_NUMBER_DIGITS = 1000  # digits in one number literal (Python's int parser refuses more than 4,300)

# A JSON string, escapes included; an unterminated one runs to the end (so the scan stays linear).
_STRING = re.compile(rb'"(?:[^"\\]++|\\.?)*+(?:"|\Z)', re.DOTALL)
_LONG_NUMBER = re.compile(rb"[0-9]{%d}" % (MAX_NUMBER_DIGITS + 1))
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_OPENERS = frozenset(b"[{")
_FORMS = frozenset({"multipart/form-data", "application/x-www-form-urlencoded"})


def problem(body: bytes | str) -> str | None:
    """Why `body` is refused before parsing (nested too deep, a number too long), or None."""
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    opens = body.count(b"[") + body.count(b"{")
    long_number = _LONG_NUMBER.search(body) is not None
    if opens <= MAX_DEPTH and not long_number:
        return None  # the common case: no string stripping, no loop
    bare = _STRING.sub(b'""', body)
    if long_number and _LONG_NUMBER.search(bare):
        return f"a number in the JSON body has more than {MAX_NUMBER_DIGITS} digits"
    depth = 0
    for byte in bare.translate(None, _NOT_BRACKETS):
        if byte in _OPENERS:
            depth += 1
            if depth > MAX_DEPTH:
                return f"the JSON body is nested deeper than {MAX_DEPTH} levels"
        elif depth:
            depth -= 1
    return None


def check_request_body() -> None:
    """Before-request hook: 400 with the reason for a body beyond the limits (forms are not JSON: skipped).
    Reading the body here is what the routes would do anyway (it is cached); a body over MAX_CONTENT_LENGTH
    answers 413 from the read."""
    from flask import request
    from flask_smorest import abort

    environ = request.environ
    if environ.get("CONTENT_LENGTH") in (None, "", "0") and "HTTP_TRANSFER_ENCODING" not in environ:
        return  # no body (RFC 9112 6.3: without a length or chunked coding a request has none): most GETs
    if request.mimetype in _FORMS:
        return
    body = request.get_data(cache=True)
    if body:
        found = problem(body)
        if found is not None:
            abort(400, message=f"malformed request body: {found}")
