"""Structured JSON logs with a request id, per-endpoint Prometheus metrics, and the app's JSON encoder."""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import sys
import time
from datetime import UTC, datetime
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


class RequestLine:
    """The one log line of every request, written straight to the server's JSON log: no LogRecord, no handler
    chain, no processors (a fifth of a revalidated page's Python in a worker went to them). The line is the one
    structlog would write (the same fields, context and renderer; tests/test_service.py compares both). When
    someone else's handlers are on the root logger (pytest's, an embedding app's), or the level leaves INFO out,
    the line goes through `logging` as any other."""

    def __init__(self, name: str = "chronicle.http") -> None:
        self._logger = logging.getLogger(name)
        self._slow = structlog.get_logger(name)

    def _handler(self) -> logging.StreamHandler | None:
        handlers = logging.getLogger().handlers
        if len(handlers) != 1 or not getattr(handlers[0], "chronicle_json", False) or self._logger.handlers \
                or self._logger.filters or not self._logger.propagate:
            return None
        return handlers[0]  # type: ignore[return-value]

    def __call__(self, **fields: Any) -> None:
        if not self._logger.isEnabledFor(logging.INFO):
            return
        handler = self._handler()
        if handler is None:
            self._slow.info("request", **fields)
            return
        line = {**fields, "event": "request"}
        for key, value in structlog.contextvars.get_contextvars().items():
            line.setdefault(key, value)  # as merge_contextvars: the line's own fields win
        line["level"] = "info"
        line["timestamp"] = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        text = _render_json(line) + "\n"
        try:
            with handler.lock:  # whole lines among the other records the handler writes
                handler.stream.write(text)
                handler.stream.flush()
        except Exception:  # noqa: BLE001 - as logging's handlers: a line that cannot be written (a full disk, a
            # closed pipe) never fails the request it records
            with contextlib.suppress(Exception):
                sys.stderr.write("chronicle: a request log line could not be written\n")


def install_request_hooks(app: Flask) -> None:
    request_line = RequestLine()

    @app.before_request
    def _start() -> None:
        # The request and g are taken from their proxies once: each access through a proxy is a context lookup.
        req, state = request._get_current_object(), g._get_current_object()  # type: ignore[attr-defined]
        state.request_started = time.perf_counter()
        state.request_id = req.headers.get("X-Request-Id") or _request_ids.next()
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=state.request_id)
        asked = req.headers.get("X-Read-Consistency")
        read_level.set(None)  # a worker thread's previous request must not leak its level
        if asked is not None:
            if asked.upper() not in READ_LEVELS:
                abort(400, message=f"X-Read-Consistency must be one of {', '.join(READ_LEVELS)}")
            state.read_level_token = read_level.set(ConsistencyLevel.name_to_value[asked.upper()])

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
        req, state = request._get_current_object(), g._get_current_object()  # type: ignore[attr-defined]
        elapsed = time.perf_counter() - getattr(state, "request_started", time.perf_counter())
        rule = req.url_rule
        endpoint = rule.rule if rule else "unmatched"
        method, status = req.method, response.status_code
        metrics.HTTP_REQUESTS.labels(endpoint, method, str(status)).inc()
        metrics.HTTP_LATENCY.labels(endpoint, method).observe(elapsed)
        headers = response.headers
        headers["X-Request-Id"] = getattr(state, "request_id", "")
        # The handler's time as the server saw it: what the benchmarks compare with the client's.
        headers["Server-Timing"] = f"app;dur={elapsed * 1000:.2f}"
        if endpoint != "/metrics":
            request_line(method=method, path=req.path, endpoint=endpoint, status=status,
                         latency_ms=round(elapsed * 1000, 2))
        return response
