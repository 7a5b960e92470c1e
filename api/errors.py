"""Every error leaves the API as JSON: {"code": 404, "status": "Not Found", "message": "<reason>"}.

Domain code (owners, api/paging.py, search) never raises HTTP errors: it raises the `DomainError`s below, in its
own terms and with a reason. `HTTP_STATUS` is their one mapping to HTTP; the JSON routes answer them through
`register_error_handlers` (installed by the app factory), the server-rendered pages through `api.pages.error_pages`
(as a page, with the same status and reason).
"""

from __future__ import annotations

from typing import Any

import structlog
from cassandra import OperationTimedOut, ReadTimeout, Unavailable, WriteTimeout
from cassandra.cluster import NoHostAvailable
from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

log = structlog.get_logger("chronicle.errors")

class DomainError(Exception):
    """A refusal in the domain's terms, with the reason a client is shown."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidInput(DomainError):
    """Input the domain cannot use as given (the reason says which and why)."""


class BadCursor(InvalidInput):
    """A cursor this listing did not issue: garbled, forged (bad signature), too long, or of another listing."""


class BadPosition(BadCursor):
    """A validly signed cursor whose position this listing cannot hold. Only a holder of the cursor secret (a
    leaked or default one) can make it: the position is checked as input, never sent to the driver."""


class InvalidQuery(InvalidInput):
    """A query that reads as a query but cannot be answered as written (e.g. a search modifier without a value)."""


class NotFound(DomainError):
    """What was asked for is not in the archive."""


# The one mapping of domain errors to HTTP statuses; the most specific class listed wins.
HTTP_STATUS: dict[type[DomainError], int] = {
    NotFound: 404,
    InvalidQuery: 422,
    BadCursor: 400,
    InvalidInput: 400,
    DomainError: 400,
}


def http_status(exc: DomainError) -> int:
    """The HTTP status of a domain error (its nearest class in HTTP_STATUS)."""
    return next(HTTP_STATUS[cls] for cls in type(exc).__mro__ if cls in HTTP_STATUS)


# The database is down or overloaded: the client may retry, so 503 rather than 500.
CASSANDRA_UNAVAILABLE = (NoHostAvailable, OperationTimedOut, ReadTimeout, WriteTimeout, Unavailable)


def error_response(code: int, message: str, **extra: Any) -> tuple[Response, int]:
    from http import HTTPStatus

    body = {"code": code, "status": HTTPStatus(code).phrase, "message": message, **extra}
    return jsonify(body), code


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        extra = {}
        data = getattr(exc, "data", None) or {}
        if data.get("messages"):  # webargs / marshmallow validation details
            extra["errors"] = data["messages"]
        elif data.get("errors"):
            extra["errors"] = data["errors"]
        message = data.get("message") or exc.description or exc.name
        response, code = error_response(exc.code or 500, message, **extra)
        if exc.code == 405 and exc.valid_methods:
            response.headers["Allow"] = ", ".join(exc.valid_methods)
        return response, code

    @app.errorhandler(DomainError)
    def _domain_error(exc: DomainError):
        # Same body as flask_smorest.abort(status, message=reason) gave when domain code raised HTTP errors.
        return error_response(http_status(exc), exc.reason)

    def _cassandra_unavailable(exc: Exception):
        log.warning("cassandra_unavailable", error=type(exc).__name__, detail=str(exc)[:300])
        response, code = error_response(503, f"the database is unavailable ({type(exc).__name__}); retry later")
        response.headers["Retry-After"] = "1"
        return response, code

    for exc_type in CASSANDRA_UNAVAILABLE:
        app.register_error_handler(exc_type, _cassandra_unavailable)

    @app.errorhandler(UnicodeEncodeError)
    def _not_unicode(exc: UnicodeEncodeError):
        # Raised before anything is written: a JSON escape left an unpaired surrogate in some text.
        return error_response(400, "the request holds text that is not valid Unicode (an unpaired surrogate)")

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        log.exception("unhandled_exception")
        return error_response(500, "internal error; see the server log for the request id")
