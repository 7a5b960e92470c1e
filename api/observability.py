"""Structured JSON logs with a request id, and per-endpoint Prometheus metrics."""

from __future__ import annotations

import logging
import sys
import time
import uuid
from typing import TextIO

import structlog
from flask import Flask, Response, g, request

from api import metrics


def configure_logging(level: str = "INFO", *, stream: TextIO = sys.stdout) -> None:
    """JSON logs to `stream`: stdout for the server; the CLI passes stderr, its stdout is the command's output."""
    # Leaves handlers someone else installed (pytest's, an embedding app's) in place.
    logging.basicConfig(stream=stream, format="%(message)s", level=level.upper())
    logging.getLogger().setLevel(level.upper())
    logging.getLogger("cassandra").setLevel(logging.WARNING)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        cache_logger_on_first_use=True,
    )


def install_request_hooks(app: Flask) -> None:
    log = structlog.get_logger("chronicle.http")

    @app.before_request
    def _start() -> None:
        g.request_started = time.perf_counter()
        g.request_id = request.headers.get("X-Request-Id") or uuid.uuid4().hex
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=g.request_id)

    @app.after_request
    def _finish(response: Response) -> Response:
        elapsed = time.perf_counter() - g.get("request_started", time.perf_counter())
        endpoint = request.url_rule.rule if request.url_rule else "unmatched"
        metrics.HTTP_REQUESTS.labels(endpoint, request.method, str(response.status_code)).inc()
        metrics.HTTP_LATENCY.labels(endpoint, request.method).observe(elapsed)
        response.headers["X-Request-Id"] = g.get("request_id", "")
        if endpoint != "/metrics":
            log.info("request", method=request.method, path=request.path, endpoint=endpoint,
                     status=response.status_code, latency_ms=round(elapsed * 1000, 2))
        return response
