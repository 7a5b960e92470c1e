"""Structured JSON logs with a request id, per-endpoint Prometheus metrics, and the app's JSON encoder."""

from __future__ import annotations

import itertools
import json
import logging
import os
import sys
import time
from typing import Any, TextIO

import orjson
import structlog
from cassandra import ConsistencyLevel
from flask import Flask, Response, g, request
from flask.json.provider import DefaultJSONProvider
from flask_smorest import abort

from api import json_guard, metrics
from api.db import READ_LEVELS, read_level

_ORJSON = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME


def _render_json(event: Any, **_kwargs: Any) -> str:
    """One log line. orjson is several times faster than json; anything it refuses (a lone surrogate in a
    message echoed from input) goes through json, which escapes it."""
    try:
        return orjson.dumps(event, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(event, default=str)


def json_formatter() -> logging.Formatter:
    """The one renderer of every log line: Chronicle's structlog events and plain `logging` records of the
    libraries (the driver's "host down", gunicorn's own lines) alike, with level, logger and time."""
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=_render_json),
        ],
    )


def configure_logging(level: str = "INFO", *, stream: TextIO = sys.stdout) -> None:
    """JSON logs to `stream`: stdout for the server; the CLI passes stderr, its stdout is the command's output."""
    root = logging.getLogger()
    ours = [h for h in root.handlers if getattr(h, "chronicle_json", False)]
    # Leaves handlers someone else installed (pytest's, an embedding app's) in place.
    if not root.handlers:
        handler = logging.StreamHandler(stream)
        handler.chronicle_json = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        ours = [handler]
    for handler in ours:
        handler.setFormatter(json_formatter())
    root.setLevel(level.upper())
    logging.getLogger("cassandra").setLevel(logging.WARNING)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,  # now, while the exception is at hand
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        cache_logger_on_first_use=True,
    )


class FastJSONProvider(DefaultJSONProvider):
    """Flask's JSON through orjson (a 50-message timeline page encodes in a tenth of the time). Values orjson
    does not know (dates, decimals) take Flask's own conversions, so answers keep their shape."""

    def _encode(self, obj: Any) -> bytes:
        option = _ORJSON | (orjson.OPT_SORT_KEYS if self.sort_keys else 0)
        try:
            return orjson.dumps(obj, default=self.default, option=option)
        except orjson.JSONEncodeError:  # e.g. a lone surrogate: json escapes what orjson refuses
            return super().dumps(obj).encode()

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        """Flask's own `request.get_json` parses here: the body limits of api/json_guard.py first (a ValueError,
        which Flask answers 400), so no caller of get_json can meet a RecursionError either."""
        problem = json_guard.problem(s)
        if problem is not None:
            raise ValueError(problem)
        return super().loads(s, **kwargs)

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        if kwargs:
            return super().dumps(obj, **kwargs)
        return self._encode(obj).decode()

    def response(self, *args: Any, **kwargs: Any) -> Response:
        body = self._encode(self._prepare_response_obj(args, kwargs))
        return self._app.response_class(body + b"\n", mimetype=self.mimetype)


class _RequestIds:
    """Request ids unique across processes without a system call each: a random prefix per process, then a
    counter (uuid4 reads the kernel's random source on every request)."""

    def __init__(self) -> None:
        self._pid = -1
        self._prefix = ""
        self._counter = itertools.count()

    def next(self) -> str:
        if self._pid != os.getpid():  # a forked worker takes a prefix of its own
            self._pid, self._prefix, self._counter = os.getpid(), os.urandom(8).hex(), itertools.count()
        return f"{self._prefix}{next(self._counter):08x}"


_request_ids = _RequestIds()


def install_request_hooks(app: Flask) -> None:
    log = structlog.get_logger("chronicle.http")

    @app.before_request
    def _start() -> None:
        g.request_started = time.perf_counter()
        g.request_id = request.headers.get("X-Request-Id") or _request_ids.next()
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=g.request_id)
        asked = request.headers.get("X-Read-Consistency")
        read_level.set(None)  # a worker thread's previous request must not leak its level
        if asked is not None:
            if asked.upper() not in READ_LEVELS:
                abort(400, message=f"X-Read-Consistency must be one of {', '.join(READ_LEVELS)}")
            g.read_level_token = read_level.set(ConsistencyLevel.name_to_value[asked.upper()])

    @app.teardown_request
    def _forget_read_level(_error: BaseException | None) -> None:
        # The test client runs requests in its caller's context: the asked level must not outlive the request.
        token = g.pop("read_level_token", None)
        if token is not None:
            read_level.reset(token)

    # Every body is checked before any route parses it: nesting depth and number length (api/json_guard.py).
    app.before_request(json_guard.check_request_body)

    @app.after_request
    def _finish(response: Response) -> Response:
        elapsed = time.perf_counter() - g.get("request_started", time.perf_counter())
        endpoint = request.url_rule.rule if request.url_rule else "unmatched"
        metrics.HTTP_REQUESTS.labels(endpoint, request.method, str(response.status_code)).inc()
        metrics.HTTP_LATENCY.labels(endpoint, request.method).observe(elapsed)
        response.headers["X-Request-Id"] = g.get("request_id", "")
        # The handler's time as the server saw it: what the benchmarks compare with the client's.
        response.headers["Server-Timing"] = f"app;dur={elapsed * 1000:.2f}"
        if endpoint != "/metrics":
            log.info("request", method=request.method, path=request.path, endpoint=endpoint,
                     status=response.status_code, latency_ms=round(elapsed * 1000, 2))
        return response
