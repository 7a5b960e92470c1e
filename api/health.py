"""Liveness and readiness."""

from __future__ import annotations

import functools

from flask_smorest import Blueprint
from marshmallow import Schema, fields

from api.context import get_db
from api.db import Statement
from api.errors import CASSANDRA_UNAVAILABLE
from api.migrations import latest_version, schema_state

blp = Blueprint("health", __name__, description="Liveness and readiness probes")

RELEASE_VERSION = Statement("SELECT release_version FROM system.local", name="SELECT system.local")


class LiveSchema(Schema):
    status = fields.String(required=True)


class ReadySchema(Schema):
    status = fields.String(required=True, metadata={"description": "ready | unavailable"})
    reason = fields.String(metadata={"description": "why the service is not ready"})
    cassandra_release = fields.String()
    schema_version = fields.String(allow_none=True)
    schema_latest = fields.String()
    keyspace = fields.String()


@blp.route("/healthz")
@blp.response(200, LiveSchema)
def healthz():
    """The process is alive (no dependency is checked)."""
    return {"status": "alive"}


# The latest version this process saw applied to the database's keyspace. The ledger only moves forward, so once
# current it stays current for this code: later checks skip the ledger read.
_SCHEMA_SEEN = "health.schema_current"


@functools.cache
def _code_latest() -> str:
    """The newest migration this code ships (the cql/ folder does not change under a running process)."""
    return latest_version()


@blp.route("/readyz")
@blp.response(200, ReadySchema)
@blp.alt_response(503, schema=ReadySchema,
                  description="Cassandra unreachable, too few replicas up for the configured consistency levels, "
                              "or schema not current")
def readyz():
    """The service can serve at its configured consistency levels: a node answers (a slow or frozen one is
    asked around after the speculative delay), the nodes up hold enough replicas for the read and write
    levels, and the schema is at the latest migration. Answers within about a second."""
    db = get_db()
    body = {"keyspace": db.keyspace}
    try:
        body["cassandra_release"] = db.execute(RELEASE_VERSION, timeout=1.0).one().release_version
        latest = _code_latest()
        seen = db.caches.lru(_SCHEMA_SEEN, maxsize=1)
        if seen.get(db.keyspace) == latest:
            applied = latest
        else:
            applied, latest = schema_state(db, db.keyspace)
            if applied == latest:
                seen.set(db.keyspace, latest)
        shortfall = db.serving_shortfall()
    except CASSANDRA_UNAVAILABLE as exc:
        return {**body, "status": "unavailable", "reason": f"Cassandra unreachable: {type(exc).__name__}"}, 503
    except Exception as exc:  # e.g. keyspace or ledger missing: migrations never ran
        return {**body, "status": "unavailable", "reason": f"schema not readable: {exc}"[:300]}, 503
    body.update(schema_version=applied, schema_latest=latest)
    if shortfall is not None:
        return {**body, "status": "unavailable", "reason": shortfall}, 503
    if applied != latest:
        return {**body, "status": "unavailable",
                "reason": f"schema at {applied or 'nothing'}, latest is {latest}: run `chronicle migrate`"}, 503
    return {**body, "status": "ready"}
