"""What every server-rendered page shares: the security headers, and the shared assets (api/static/common/:
the stylesheet of api/templates/layout.html) served by Chronicle itself at /common/static/.

The Content-Security-Policy allows only this origin's scripts and styles (no inline code, no inline event
handlers), so archived text can never run as script even if some escaping slipped; no page may be framed.
`secure` is the one header policy of every response the app sends (api/app.py applies it app-wide: pages, REST
JSON, the report served as HTML, /docs, static files, error answers): a header a view set on purpose (a stored
file's sandbox CSP, a report's style hash) is kept; everything else gets the policy. docs/security.md#headers.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

from flask import Blueprint, Flask, Response, render_template, request, url_for
from werkzeug.exceptions import HTTPException

from api.errors import CASSANDRA_UNAVAILABLE, DomainError, http_status

_API_DIR = Path(__file__).resolve().parent

CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    # same-origin: the origin's own forms send a real Origin/Referer (CSRF checks), no other site learns URLs.
    "Referrer-Policy": "same-origin",
}

common = Blueprint("pages_common", __name__, static_folder=str(_API_DIR / "static" / "common"),
                   static_url_path="/common/static")


def secure(response: Response) -> Response:
    """The security headers on a response (a header the view set itself is kept); HTML is never stored (pages
    show archived, scoped data), except a page with an ETag (api/conditional.py): the browser keeps it privately
    and revalidates it each time, and signing out clears it."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if response.mimetype == "text/html" and "ETag" not in response.headers:
        response.headers["Cache-Control"] = "no-store"
    return response


common.after_request(secure)

# /docs: Swagger UI (its files from the swagger-ui-bundle package at /docs/assets/, api/app.py) started by a script
# file of ours, so the page has no inline script and takes the same CSP as every other page.
docs_ui = Blueprint("api_docs_ui", __name__, template_folder=str(_API_DIR / "templates"),
                    static_folder=str(_API_DIR / "static" / "docs"), static_url_path="/docs/static")


@docs_ui.get("/docs")
def swagger_ui() -> str:
    return render_template("docs/swagger_ui.html", title="Chronicle API", assets="/docs/assets/",
                           spec_url=url_for("api-docs.openapi_json"))

_ASSET_MAX_AGE = 365 * 24 * 3600


@functools.lru_cache(maxsize=256)
def _asset_version(path: str, mtime_ns: int) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()[:12]


def versioned_assets(app: Flask) -> None:
    """Every `url_for(<blueprint>.static, filename=...)` carries `v=<hash of the file>`, and a request naming the
    current version is cached for a year (`immutable`): pages revalidated their stylesheets and scripts on every
    navigation. A changed file gets a new URL; an outdated `v` is served uncached."""
    def asset_path(endpoint: str, filename: str) -> str | None:
        blueprint = app.blueprints.get(endpoint.rpartition(".")[0])
        folder = blueprint.static_folder if blueprint is not None else None
        path = os.path.join(folder, filename) if folder and filename else None
        return path if path and os.path.isfile(path) else None

    def version_of(endpoint: str, filename: str) -> str | None:
        path = asset_path(endpoint, filename)
        return _asset_version(path, os.stat(path).st_mtime_ns) if path else None

    @app.url_defaults
    def _add_version(endpoint: str, values: dict[str, Any]) -> None:
        if endpoint.endswith(".static") and "v" not in values:
            version = version_of(endpoint, values.get("filename", ""))
            if version:
                values["v"] = version

    @app.after_request
    def _cache_versioned(response: Response) -> Response:
        endpoint = request.endpoint or ""
        if (endpoint.endswith(".static") and response.status_code == 200 and request.args.get("v")
                and request.args.get("v") == version_of(endpoint, (request.view_args or {}).get("filename", ""))):
            response.cache_control.public = True
            response.cache_control.max_age = _ASSET_MAX_AGE
            response.cache_control.immutable = True
            response.cache_control.no_cache = None
        return response


class PageError(Exception):
    """A refusal or failure shown as a page of the blueprint that raised it (its status, a title, why)."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


def error_pages(bp: Blueprint, show: Callable[[PageError], Any]) -> None:
    """Show every error of `bp`'s views through `show`: its PageErrors, domain errors (a forged cursor is a
    BadCursor from api/paging.py: 400), HTTP errors and an unreachable database (503), never a bare 500 or a
    JSON body on a page."""
    bp.register_error_handler(PageError, show)

    def http_error(exc: HTTPException) -> Any:
        data = getattr(exc, "data", None) or {}
        return show(PageError(exc.code or 500, exc.name, str(data.get("message") or exc.description or exc.name)))

    def domain_error(exc: DomainError) -> Any:
        status = http_status(exc)  # api/errors.py's one mapping; the title is the status phrase, as HTTP errors'
        return show(PageError(status, HTTPStatus(status).phrase, exc.reason))

    def unavailable(exc: Exception) -> Any:
        return show(PageError(503, "Database unavailable",
                              f"The archive's database did not answer ({type(exc).__name__}). Try again."))

    bp.register_error_handler(HTTPException, http_error)
    bp.register_error_handler(DomainError, domain_error)
    for exc_type in CASSANDRA_UNAVAILABLE:
        bp.register_error_handler(exc_type, unavailable)


# / : the front door, where a person lands first (links to each part; "Add to Slack" when the app is configured).
front_door = Blueprint("front_door", __name__, template_folder=str(_API_DIR / "templates"),
                       static_folder=str(_API_DIR / "static" / "front"), static_url_path="/front/static")
front_door.after_request(secure)


@front_door.get("/")
def front_page() -> str:
    from api.context import get_db
    from api.slack import oauth

    return render_template("front/index.html", install=oauth.configured(get_db()))
