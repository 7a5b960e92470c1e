"""Conditional GETs: a strong ETag per page, derived from the versions of what the page reads (for the Slack
archive, api/slack/versions.py), answered 304 Not Modified without reading the page's rows.

A JSON page's bytes are also kept in the process by their tag (`answered`, `keep_page`): the tag covers every
version the page was built from, so a request that computes the same tag is answered with the same bytes a
fresh build would give, without reading the rows; the versions are still read first, as for a 304, and a write
that changes the page changes its tag (tests/slack/test_conditional.py proves it for every write path). Pages
that carry anything per reader (the viewer's HTML, with its CSRF token) are never kept.

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

from flask import Response, current_app, request

from api.caches import Cache
from api.db import Database

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


_PAGES = "conditional.pages"
_LARGEST_SHARE = 16  # a page larger than this share of the cache is not kept (it would push out many others)


def kept_pages(db: Database) -> Cache | None:
    """This process's kept JSON pages (tag -> bytes), bounded by `CHRONICLE_PAGE_CACHE_MB`; None when 0."""
    limit = db.settings.page_cache_bytes
    return db.caches.lru(_PAGES, maxsize=limit, getsizeof=len) if limit > 0 else None


def kept_page(db: Database, tag: str) -> Response | None:
    """The JSON page this process last built under `tag`, answered again (200, with its tag), or None."""
    pages = kept_pages(db)
    body = pages.get(tag) if pages is not None else None
    if body is None:
        return None
    return tagged(current_app.response_class(body, mimetype="application/json"), tag)


def answered(db: Database, tag: str) -> Response | None:
    """Without reading the page's rows: a 304 when If-None-Match holds `tag`, else the page kept under it
    (`kept_page`), else None (the page is to be built)."""
    unchanged = not_modified(tag)
    return unchanged if unchanged is not None else kept_page(db, tag)


def keep_page(db: Database, tag: str, response: Response) -> Response:
    """`response` (a JSON page built under `tag`) with its tag, its bytes kept for `kept_page`."""
    pages = kept_pages(db)
    if pages is not None and response.status_code == 200 and not response.is_streamed:
        body = response.get_data()
        if len(body) <= pages.maxsize // _LARGEST_SHARE:
            pages.set(tag, body)
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
