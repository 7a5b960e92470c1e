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
    entries = _rendered(caplog)
    failure = next(e for e in entries if e.get("event") == "unhandled_exception")
    assert failure["request_id"] == "rid-123" and "kaboom" in failure["exception"]
    assert failure["level"] == "error" and failure["timestamp"].endswith("Z")


def test_openapi_document_is_valid_openapi_3(client):
    response = client.get("/openapi.json")
    assert response.status_code == 200
    spec = response.get_json()
    validate(spec)
    assert spec["openapi"].startswith("3.")
    assert "/readyz" in spec["paths"] and "/healthz" in spec["paths"]
    # The browsable UI is served too.
    assert client.get("/docs").status_code == 200


def _rendered(caplog) -> list[dict]:
    """Each captured record as the server writes it: through the one JSON renderer."""
    import json

    from api.observability import json_formatter

    formatter = json_formatter()
    return [json.loads(formatter.format(r)) for r in caplog.records]


def test_request_logs_are_json_with_request_id_latency_and_status(client, caplog):
    client.get("/healthz", headers={"X-Request-Id": "log-check-1"})
    entry = next(e for e in _rendered(caplog) if e.get("request_id") == "log-check-1" and e.get("event") == "request")
    assert entry["status"] == 200 and entry["path"] == "/healthz"
    assert isinstance(entry["latency_ms"], float)


def test_the_request_line_written_directly_is_the_line_logging_would_write(client):
    """The server's request line skips `logging` when the JSON handler is the root's only one: it must be the
    same line (fields, context, level, time format) the logging path writes, and never a record."""
    import io
    import json
    import logging

    from api.observability import json_formatter

    root = logging.getLogger()
    saved = root.handlers[:]
    written = io.StringIO()
    ours = logging.StreamHandler(written)
    ours.chronicle_json = True  # what configure_logging installs on a root without handlers
    ours.setFormatter(json_formatter())
    records: list[logging.LogRecord] = []
    ours.addFilter(lambda record: records.append(record) or True)
    try:
        root.handlers[:] = [ours]
        client.get("/healthz", headers={"X-Request-Id": "direct-line"})
        direct_records = [r for r in records if "direct-line" in str(r.msg)]
        root.handlers.append(logging.NullHandler())  # someone else's handler: the line goes through logging
        client.get("/healthz", headers={"X-Request-Id": "logged-line"})
    finally:
        root.handlers[:] = saved
    lines = [json.loads(line) for line in written.getvalue().splitlines()]
    direct = next(e for e in lines if e.get("request_id") == "direct-line" and e.get("event") == "request")
    logged = next(e for e in lines if e.get("request_id") == "logged-line" and e.get("event") == "request")
    assert direct_records == [] and any("logged-line" in str(r.msg) for r in records)
    assert list(direct) == list(logged)  # the same fields in the same order
    assert {k: v for k, v in direct.items() if k not in ("request_id", "latency_ms", "timestamp")} == \
        {k: v for k, v in logged.items() if k not in ("request_id", "latency_ms", "timestamp")}
    assert direct["status"] == 200 and direct["path"] == "/healthz" and direct["level"] == "info"
    assert direct["timestamp"].endswith("Z") and len(direct["timestamp"]) == len(logged["timestamp"])


def test_a_request_line_that_cannot_be_written_never_fails_the_request(client):
    """A full disk or a closed pipe under the server's log: the request is answered as logging's own handlers
    would let it be."""
    import logging

    class Full:
        def write(self, _text):
            raise OSError(28, "No space left on device")

        def flush(self):
            raise OSError(28, "No space left on device")

    root = logging.getLogger()
    saved = root.handlers[:]
    broken = logging.StreamHandler(Full())
    broken.chronicle_json = True
    try:
        root.handlers[:] = [broken]
        response = client.get("/healthz", headers={"X-Request-Id": "disk-full"})
    finally:
        root.handlers[:] = saved
    assert response.status_code == 200 and response.get_json() == {"status": "alive"}


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


def test_library_log_lines_are_json_with_time_level_and_logger():
    """The driver's own lines ("host down", reconnects) come through the same renderer as the app's."""
    import json
    import logging

    from api.observability import json_formatter

    record = logging.getLogger("cassandra.cluster").makeRecord(
        "cassandra.cluster", logging.WARNING, __file__, 1, "Host %s has been marked down", ("127.0.0.3:9142",), None)
    entry = json.loads(json_formatter().format(record))
    assert entry["event"] == "Host 127.0.0.3:9142 has been marked down"
    assert entry["level"] == "warning" and entry["logger"] == "cassandra.cluster"
    assert entry["timestamp"].endswith("Z")


def test_json_answers_keep_the_shapes_of_flasks_encoder(client):
    """Answers are encoded with orjson; whatever it does not know goes through Flask's own conversions, and a
    lone surrogate (which orjson refuses) is escaped as Flask would."""
    import datetime
    import decimal
    import json
    import uuid as uuid_module

    from flask.json.provider import DefaultJSONProvider

    app = client.application
    reference = DefaultJSONProvider(app)
    reference.sort_keys = False
    value = {"when": datetime.datetime(2026, 11, 24, 8, 0, tzinfo=datetime.UTC), "day": datetime.date(2026, 1, 2),
             "id": uuid_module.UUID("12345678-1234-5678-1234-567812345678"), "amount": decimal.Decimal("1.50"),
             7: "int key", "text": "héllo ✓", "nested": [{"b": 1, "a": None}], "odd": "x\ud800y"}
    assert json.loads(app.json.dumps(value)) == json.loads(reference.dumps(value))
    with app.app_context():
        response = app.json.response(value)
    assert response.mimetype == "application/json"
    assert json.loads(response.get_data()) == json.loads(reference.dumps(value))


def test_every_answer_says_its_server_time(client):
    for path in ("/healthz", "/no/such/path"):
        timing = client.get(path).headers["Server-Timing"]
        assert timing.startswith("app;dur=") and float(timing.split("=")[1]) >= 0


def test_readyz_is_503_when_too_few_replicas_answer_for_the_configured_levels(settings, db):
    """Ready means "can serve at the configured consistency": THREE replicas cannot be met by one node."""
    import dataclasses

    from cassandra import ConsistencyLevel

    strict = dataclasses.replace(settings, write_consistency=ConsistencyLevel.THREE)
    database = Database(strict)
    app = create_app(strict, database=database)
    try:
        response = app.test_client().get("/readyz")
        body = response.get_json()
        assert response.status_code == 503, body
        assert body["reason"] == "1 of 1 nodes up: writes at THREE need 3 of 1 replicas"
    finally:
        database.close()
        set_db(db)


def test_reads_run_at_the_level_the_request_or_the_endpoint_asks(client, db, monkeypatch):
    """Lookups by key read at LOCAL_QUORUM (a client reading back its own write must not get a 404 from a
    replica still catching up); listings at the configured LOCAL_ONE; X-Read-Consistency overrides both, and
    one request's level never leaks into the next on the same thread."""
    from cassandra import ConsistencyLevel as CL

    levels: list[int] = []
    real_bind = Database._bind

    def spy(self, statement, params):
        bound = real_bind(self, statement, params)
        if statement.cql.startswith("SELECT"):
            levels.append(bound.consistency_level)
        return bound

    monkeypatch.setattr(Database, "_bind", spy)

    def read(path: str, **headers: str) -> set[int]:
        levels.clear()
        response = client.get(path, headers=headers)
        assert response.status_code in (200, 404), response.get_json()
        assert levels, "the endpoint read nothing"
        return set(levels)

    by_key = "/networks/levels-check/accounts/42"  # unknown: a 404 after its read
    listing = "/networks/levels-check/accounts/42/followers"
    assert read(by_key) == {CL.LOCAL_QUORUM}
    assert read(listing) == {CL.LOCAL_ONE}
    assert read(listing, **{"X-Read-Consistency": "local_quorum"}) == {CL.LOCAL_QUORUM}
    assert read(by_key, **{"X-Read-Consistency": "LOCAL_ONE"}) == {CL.LOCAL_ONE}
    assert read(listing) == {CL.LOCAL_ONE}

    bad = client.get(listing, headers={"X-Read-Consistency": "EVENTUALLY"})
    assert bad.status_code == 400
    assert "X-Read-Consistency must be one of" in bad.get_json()["message"]


def test_no_read_level_outlives_its_request(client):
    """The test client runs a request in its caller's context, as a gunicorn thread runs one request after
    another: neither the endpoint's LOCAL_QUORUM nor the header's level may stay set after the request (a leaked
    LOCAL_QUORUM once changed the level of a later test's reads made outside any request)."""
    from api.db import read_level

    assert client.get("/networks/levels-check/accounts/42").status_code == 404  # a reads_own_writes lookup
    assert read_level.get() is None
    asked = client.get("/networks/levels-check/accounts/42/followers", headers={"X-Read-Consistency": "QUORUM"})
    assert asked.status_code in (200, 404)
    assert read_level.get() is None


def test_page_assets_carry_their_content_hash_and_are_cached_for_a_year(client):
    """Pages revalidated their stylesheets and scripts on every navigation: now a URL names the file's content
    (a changed file gets a new URL), so browsers keep it; an unversioned or outdated URL is not cached."""
    import hashlib
    import re
    from pathlib import Path

    html = client.get("/archive").get_data(as_text=True)
    assets = re.findall(r'(?:href|src)="(/[^"?]+/static/([^"?]+)\?v=([0-9a-f]+))"', html)
    assert len(assets) >= 3, html[:500]
    folders = {"/common/static/": "api/static/common", "/archive/static/": "api/static/viewer"}
    for url, filename, version in assets:
        folder = next(f for prefix, f in folders.items() if url.startswith(prefix))
        content = (Path(__file__).resolve().parents[1] / folder / filename).read_bytes()
        assert version == hashlib.sha256(content).hexdigest()[:12]
        cached = client.get(url)
        assert cached.status_code == 200 and cached.get_data() == content
        assert cached.headers["Cache-Control"] == "public, max-age=31536000, immutable"
        for other in (url.split("?")[0], url.split("?")[0] + "?v=000000000000"):
            assert "max-age=31536000" not in client.get(other).headers.get("Cache-Control", "")


def test_each_app_serves_from_its_own_database(settings, db, client):
    """The runtime is the app's (api/context.py): a second app built on a Database of its own answers from
    that Database (its caches fill, the first app's stay empty), whatever the process's installed one is."""
    from api.context import EXTENSION

    own = Database(settings)
    other = create_app(settings, database=own)
    set_db(db)  # create_app installed `own` as the process's database: put the run's back
    try:
        assert other.extensions[EXTENSION].db is own and client.application.extensions[EXTENSION].db is db
        assert other.test_client().get("/readyz").status_code == 200
        assert "health.schema_current" in own.caches.names()
        assert "health.schema_current" not in db.caches.names() or len(db.caches.lru(
            "health.schema_current", maxsize=1)) == 0
        assert client.get("/readyz").status_code == 200
        assert len(db.caches.lru("health.schema_current", maxsize=1)) == 1
    finally:
        own.close()


def test_each_function_is_asked_once_whether_it_is_a_coroutine_function(app, client, monkeypatch):
    """Flask asks `inspect` for every hook and view of every request; the app keeps each function's answer, so
    a second request asks for nothing and answers as the first did."""
    import flask.app

    asked: list[object] = []
    real = flask.app.iscoroutinefunction

    def counting(func):
        asked.append(func)
        return real(func)

    monkeypatch.setattr(flask.app, "iscoroutinefunction", counting)
    first = client.get("/healthz")
    asked_first = len(asked)
    second = client.get("/healthz")
    assert first.get_json() == second.get_json() == {"status": "alive"}
    assert len(asked) == asked_first  # nothing asked again

    def plain() -> str:
        return "plain"

    async def coroutine() -> str:
        return "coroutine"

    assert app.ensure_sync(plain) is plain and app.ensure_sync(plain) is plain
    with pytest.raises(RuntimeError, match="async"):  # as Flask answers without its async extra
        app.ensure_sync(coroutine)


def test_a_body_is_checked_whether_it_comes_with_a_length_or_chunked(client):
    """The body guard (api/json_guard.py) skips requests that have no body (no Content-Length, no chunked coding:
    RFC 9112 6.3) and checks every other, a chunked one without a length too."""
    import io

    deep = b"[" * 5000
    framings = [
        {"headers": {"Content-Type": "application/json"}, "data": deep},
        {"headers": {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
         "input_stream": io.BytesIO(deep), "environ_overrides": {"wsgi.input_terminated": True, "CONTENT_LENGTH": ""}},
    ]
    for framing in framings:
        response = client.open("/slack/events", method="POST", **framing)
        message = response.get_json()["message"]
        assert response.status_code == 400 and message.startswith("malformed request body") and \
            "nested deeper" in message, (framing, message)
    assert client.get("/healthz").status_code == 200
