"""One Cassandra Cluster/Session per process, and statements prepared once per process.

Table-family modules declare their CQL at import time as `Statement` objects and run them through
`get_db()`; nothing connects until the first query, so gunicorn workers (which fork after importing the
app) each create their own Cluster after the fork.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, ResponseFuture, Session
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.policies import (
    ConstantReconnectionPolicy,
    DCAwareRoundRobinPolicy,
    TokenAwarePolicy,
)
from cassandra.query import PreparedStatement

from api import metrics
from api.config import Settings

try:  # The libev reactor is bundled in the driver's wheel; asyncore is gone from Python 3.12 and slow.
    from cassandra.io.libevreactor import LibevConnection
except ImportError as exc:  # pragma: no cover - depends on how the driver was built
    raise RuntimeError(
        "cassandra-driver was built without its libev extension; reinstall the binary wheel "
        "(pip install --force-reinstall cassandra-driver) or install libev-dev and rebuild"
    ) from exc

_TABLE_RE = re.compile(r"\b(?:FROM|INTO|UPDATE|TABLE)\s+([\w.]+)", re.IGNORECASE)


class Statement:
    """A CQL statement, declared once at import time and prepared lazily once per process.

    `name` labels its metrics; by default the verb and the table, e.g. `SELECT messages_by_bucket`.
    """

    def __init__(self, cql: str, *, name: str | None = None, consistency: int | None = None,
                 idempotent: bool = True) -> None:
        self.cql = " ".join(cql.split())
        table = _TABLE_RE.search(self.cql)
        self.name = name or f"{self.cql.split()[0].upper()} {table.group(1) if table else '?'}"
        self.consistency = consistency
        self.idempotent = idempotent

    def __repr__(self) -> str:
        return f"Statement({self.name!r})"


def without_none(values: Mapping[str, Any]) -> dict[str, Any]:
    """Leave absent values out of a named bind: the driver sends them as unset, so no tombstone is written."""
    return {k: v for k, v in values.items() if v is not None}


class Database:
    """The process's Cluster, Session and prepared statements."""

    def __init__(self, settings: Settings, *, keyspace: str | None = None) -> None:
        self.settings = settings
        self.keyspace = settings.keyspace if keyspace is None else keyspace
        self._lock = threading.Lock()
        self._cluster: Cluster | None = None
        self._session: Session | None = None
        self._prepared: dict[int, PreparedStatement] = {}
        self.pid = os.getpid()

    # -- connection -------------------------------------------------------------------------------
    def _build_cluster(self) -> Cluster:
        s = self.settings
        profile = ExecutionProfile(
            load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=s.local_dc)),
            consistency_level=s.read_consistency,
            request_timeout=s.request_timeout,
        )
        return Cluster(
            s.contact_points,
            port=s.cassandra_port,
            protocol_version=5,
            connection_class=LibevConnection,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
            connect_timeout=s.connect_timeout,
            control_connection_timeout=s.connect_timeout,
            # A node that comes back is used again within a second, not after minutes of backoff.
            reconnection_policy=ConstantReconnectionPolicy(delay=1.0, max_attempts=None),
            idle_heartbeat_interval=5,
            idle_heartbeat_timeout=3,
            max_schema_agreement_wait=30,
        )

    @property
    def session(self) -> Session:
        if self._session is None:
            with self._lock:
                if self._session is None:
                    cluster = self._build_cluster()
                    try:
                        session = cluster.connect(self.keyspace or None)
                    except Exception:
                        cluster.shutdown()
                        raise
                    self._cluster, self._session = cluster, session
        return self._session

    @property
    def cluster(self) -> Cluster:
        return self.session.cluster

    def close(self) -> None:
        with self._lock:
            if self._cluster is not None:
                self._cluster.shutdown()
            self._cluster = self._session = None
            self._prepared.clear()

    # -- statements -------------------------------------------------------------------------------
    def prepared(self, statement: Statement) -> PreparedStatement:
        prepared = self._prepared.get(id(statement))
        if prepared is None:
            prepared = self.session.prepare(statement.cql)
            prepared.is_idempotent = statement.idempotent
            if statement.consistency is not None:
                prepared.consistency_level = statement.consistency
            elif statement.cql.startswith(("SELECT",)):
                prepared.consistency_level = self.settings.read_consistency
            else:
                prepared.consistency_level = self.settings.write_consistency
            self._prepared[id(statement)] = prepared
        return prepared

    def execute(self, statement: Statement, params: Sequence[Any] | Mapping[str, Any] = (), *,
                paging_state: bytes | None = None, fetch_size: int | None = None,
                timeout: float | None = None) -> Any:
        bound = self.prepared(statement).bind(params)
        if fetch_size is not None:
            bound.fetch_size = fetch_size
        started = time.perf_counter()
        try:
            result = self.session.execute(bound, paging_state=paging_state,
                                          timeout=timeout or self.settings.request_timeout)
        except Exception as exc:
            metrics.CASSANDRA_ERRORS.labels(statement.name, type(exc).__name__).inc()
            raise
        finally:
            metrics.CASSANDRA_LATENCY.labels(statement.name).observe(time.perf_counter() - started)
        return result

    def execute_async(self, statement: Statement, params: Sequence[Any] | Mapping[str, Any] = ()
                      ) -> ResponseFuture:
        return self.session.execute_async(self.prepared(statement).bind(params),
                                          timeout=self.settings.request_timeout)

    def execute_many(self, statement: Statement, params: Iterable[Sequence[Any] | Mapping[str, Any]], *,
                     concurrency: int = 100) -> int:
        """Run one prepared statement for many parameter sets, `concurrency` in flight; raises on failure."""
        prepared = self.prepared(statement)
        started = time.perf_counter()
        results = execute_concurrent_with_args(self.session, prepared, params, concurrency=concurrency,
                                               raise_on_first_error=True, results_generator=True)
        count = 0
        for _ in results:
            count += 1
        metrics.CASSANDRA_LATENCY.labels(statement.name + " (batch)").observe(time.perf_counter() - started)
        return count

    def execute_raw(self, cql: str, params: Sequence[Any] = (), *, timeout: float | None = None) -> Any:
        """Unprepared CQL, for DDL and administration only (product queries use `Statement`)."""
        return self.session.execute(cql, params or None, timeout=timeout or self.settings.request_timeout)


_db: Database | None = None
_db_lock = threading.Lock()


def get_db() -> Database:
    """The process-wide Database; a forked child builds its own instead of inheriting its parent's."""
    global _db
    if _db is None or _db.pid != os.getpid():
        with _db_lock:
            if _db is None or _db.pid != os.getpid():
                _db = Database(Settings.from_env())
    return _db


def set_db(db: Database | None) -> None:
    """Install a Database for this process (the app factory and tests use it)."""
    global _db
    with _db_lock:
        _db = db


def consistency_name(level: int) -> str:
    return ConsistencyLevel.value_to_name[level]
