"""The service skeleton in-process: probes, JSON errors, OpenAPI, metrics, per-process database."""

from __future__ import annotations

import os

import pytest
from openapi_spec_validator import validate

from api.app import create_app
from api.db import Database, Statement, get_db, set_db
from api.migrations import latest_version


def test_healthz_is_alive(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "alive"}


def test_readyz_reports_release_and_schema(client, settings):
    response = client.get("/readyz")
    body = response.get_json()
    assert response.status_code == 200, body
    assert body["status"] == "ready"
    assert body["cassandra_release"].startswith("5.0.")
    assert body["schema_version"] == body["schema_latest"] == latest_version()
    assert body["keyspace"] == settings.keyspace


def test_readyz_is_503_when_the_schema_was_never_applied(settings, db):
    import dataclasses

    bare = Database(dataclasses.replace(settings, keyspace="system"), keyspace="system")
    app = create_app(dataclasses.replace(settings, keyspace="system"), database=bare)
    try:
        response = app.test_client().get("/readyz")
        body = response.get_json()
        assert response.status_code == 503
        assert body["status"] == "unavailable"
        assert "schema" in body["reason"]
        assert body["cassandra_release"].startswith("5.0.")
    finally:
        bare.close()
        set_db(db)  # create_app installed `bare` as the process's database


@pytest.mark.parametrize(("method", "path", "code"), [
    ("GET", "/no/such/path", 404),
    ("POST", "/healthz", 405),
    ("DELETE", "/readyz", 405),
])
def test_errors_are_json_with_a_reason(client, method, path, code):
    response = client.open(path, method=method)
    assert response.status_code == code
    assert response.is_json
    body = response.get_json()
    assert body["code"] == code
    assert body["message"]
    if code == 405:
        assert "GET" in response.headers["Allow"]


def test_unexpected_exceptions_are_json_500_and_logged(settings, db, caplog):
    app = create_app(settings, database=db)

    @app.get("/boom")
    def _boom():
        raise RuntimeError("kaboom")

    response = app.test_client().get("/boom", headers={"X-Request-Id": "rid-123"})
    assert response.status_code == 500
    body = response.get_json()
    assert body["code"] == 500 and "request id" in body["message"]
    assert "kaboom" not in body["message"], "internals must not leak to clients"
    assert response.headers["X-Request-Id"] == "rid-123"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert '"request_id": "rid-123"' in logged and "kaboom" in logged


def test_openapi_document_is_valid_openapi_3(client):
    response = client.get("/openapi.json")
    assert response.status_code == 200
    spec = response.get_json()
    validate(spec)
    assert spec["openapi"].startswith("3.")
    assert "/readyz" in spec["paths"] and "/healthz" in spec["paths"]
    # The browsable UI is served too.
    assert client.get("/docs").status_code == 200


def test_request_logs_are_json_with_request_id_latency_and_status(client, caplog):
    import json

    client.get("/healthz", headers={"X-Request-Id": "log-check-1"})
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.getMessage().startswith("{")]
    entry = next(e for e in lines if e.get("request_id") == "log-check-1" and e.get("event") == "request")
    assert entry["status"] == 200 and entry["path"] == "/healthz"
    assert isinstance(entry["latency_ms"], float)


def test_metrics_count_requests_and_cassandra_queries(client):
    def sample(text: str, prefix: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))

    before = client.get("/metrics").get_data(as_text=True)
    client.get("/readyz")
    client.get("/readyz")
    after = client.get("/metrics").get_data(as_text=True)
    key = 'chronicle_http_requests_total{endpoint="/readyz",method="GET",status="200"}'
    assert sample(after, key) - sample(before, key) == 2
    query = 'chronicle_cassandra_query_seconds_count{statement="SELECT system.local"}'
    assert sample(after, query) - sample(before, query) == 2


def test_statements_are_prepared_once_per_process(db):
    stmt = Statement("SELECT release_version FROM system.local WHERE key = ?")
    first = db.prepared(stmt)
    db.execute(stmt, ("local",))
    assert db.prepared(stmt) is first


def test_a_forked_child_builds_its_own_database(db):
    """gunicorn forks workers after importing the app: a child must not reuse the parent's Cluster."""
    set_db(db)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report whether get_db() handed back the parent's object
        os.close(read_end)
        os.write(write_end, b"same" if get_db() is db else b"new")
        os._exit(0)
    os.close(write_end)
    answer = os.read(read_end, 16)
    os.waitpid(pid, 0)
    assert answer == b"new"
    assert get_db() is db
