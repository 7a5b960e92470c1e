"""Every error leaves the API as JSON: {"code": 404, "status": "Not Found", "message": "<reason>"}."""

from __future__ import annotations

import structlog
from cassandra import OperationTimedOut, ReadTimeout, Unavailable, WriteTimeout
from cassandra.cluster import NoHostAvailable
from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

log = structlog.get_logger("chronicle.errors")

# The database is down or overloaded: the client may retry, so 503 rather than 500.
CASSANDRA_UNAVAILABLE = (NoHostAvailable, OperationTimedOut, ReadTimeout, WriteTimeout, Unavailable)


def error_response(code: int, message: str, **extra):
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
