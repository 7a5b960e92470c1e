"""Conditional GETs: a strong ETag per page, derived from the versions of what the page reads (for the Slack
archive, api/slack/versions.py), answered 304 Not Modified without reading the page's rows.

The tag covers the code that renders the page (a digest of the app's files, so a deploy that
changes a page's shape changes its tag), the request's path and query, the versions read, and whatever else
the caller names (the reader's access where it changes what is listed). `Cache-Control: private, no-cache`:
browsers keep the page and ask again each time (If-None-Match); shared caches do not keep what a token read.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from pathlib import Path
from typing import Any

from flask import Response, request

CACHE_CONTROL = "private, no-cache"
# The OpenAPI document of a page that carries an ETag: this header among its route's parameters, and
# `@blp.alt_response(304, description=NOT_MODIFIED)`.
IF_NONE_MATCH: dict[str, Any] = {
    "in": "header", "name": "If-None-Match", "required": False, "schema": {"type": "string"},
    "description": "ETags of copies the client holds: 304 without a body when one is the page's current ETag"}
NOT_MODIFIED = "Not Modified: If-None-Match holds the page's current ETag (no body; ETag and Cache-Control sent)"


@functools.cache
def code_digest() -> bytes:
    """A digest of the app's files (sources, templates, page assets), computed once per process."""
    root = Path(__file__).resolve().parent
    digest = hashlib.blake2b(digest_size=16)
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.digest()


def etag(*parts: Any) -> str:
    """The page's strong ETag (without quotes) from the request's path and query and `parts`."""
    digest = hashlib.blake2b(code_digest(), digest_size=18)
    digest.update(request.full_path.encode("utf-8", "surrogatepass"))
    for part in parts:
        digest.update(b"\x00")
        digest.update(repr(part).encode("utf-8", "surrogatepass"))
    return base64.urlsafe_b64encode(digest.digest()).decode()


def not_modified(tag: str) -> Response | None:
    """A 304 answer when the request's If-None-Match holds `tag` (or `*`), else None."""
    if not request.if_none_match.contains_weak(tag):
        return None
    response = Response(status=304)
    return tagged(response, tag)


def tagged(response: Response, tag: str, *, vary: str | None = None) -> Response:
    """`response` with its ETag and cache headers."""
    if response.status_code == 200 or response.status_code == 304:
        response.set_etag(tag)
        response.headers["Cache-Control"] = CACHE_CONTROL
        if vary:
            response.vary.add(vary)
    return response


def headers(tag: str, *, vary: str | None = None) -> dict[str, str]:
    """The same headers, for a view that returns (body, status, headers)."""
    out = {"ETag": f'"{tag}"', "Cache-Control": CACHE_CONTROL}
    if vary:
        out["Vary"] = vary
    return out
