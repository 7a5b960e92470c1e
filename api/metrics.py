"""Prometheus metrics, shared across gunicorn workers through PROMETHEUS_MULTIPROC_DIR when it is set."""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)

from api.config import prometheus_multiprocess_dir

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

HTTP_REQUESTS = Counter("chronicle_http_requests_total", "HTTP requests by endpoint, method and status",
                        ["endpoint", "method", "status"])
HTTP_LATENCY = Histogram("chronicle_http_request_seconds", "HTTP request latency by endpoint",
                         ["endpoint", "method"], buckets=_LATENCY_BUCKETS)
CASSANDRA_LATENCY = Histogram("chronicle_cassandra_query_seconds", "Cassandra query latency by statement",
                              ["statement"], buckets=_LATENCY_BUCKETS)
CASSANDRA_ERRORS = Counter("chronicle_cassandra_query_errors_total", "Cassandra query errors",
                           ["statement", "error"])


def render() -> tuple[bytes, str]:
    """The exposition text: all workers' values in multiprocess mode, this process's otherwise."""
    if prometheus_multiprocess_dir():
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    from prometheus_client import REGISTRY

    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
