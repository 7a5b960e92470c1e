"""One Cassandra Cluster/Session per process, and statements prepared once per process.

Table-family modules declare their CQL at import time as `Statement` objects and run them through
`get_db()`; nothing connects until the first query, so gunicorn workers (which fork after importing the
app) each create their own Cluster after the fork.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import itertools
import os
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cassandra import ConsistencyLevel, OperationTimedOut, ReadTimeout, WriteTimeout
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, ResponseFuture, Session
from cassandra.concurrent import execute_concurrent
from cassandra.metadata import NetworkTopologyStrategy
from cassandra.policies import (
    ConstantReconnectionPolicy,
    ConstantSpeculativeExecutionPolicy,
    DCAwareRoundRobinPolicy,
    TokenAwarePolicy,
)
from cassandra.query import (
    BatchStatement,
    BatchType,
    PreparedStatement,
    SimpleStatement,
    named_tuple_factory,
    tuple_factory,
)

from api import metrics
from api.caches import Caches
from api.clock import SYSTEM, Clock
from api.config import Settings
from api.slack import versions
from api.statement import Params, Statement

__all__ = ["Database", "Params", "Statement"]  # Statement and Params are declared in api/statement.py

try:  # The libev reactor is bundled in the driver's wheel; asyncore is gone from Python 3.12 and slow.
    from cassandra.io.libevreactor import LibevConnection
except ImportError as exc:  # pragma: no cover - depends on how the driver was built
    raise RuntimeError(
        "cassandra-driver was built without its libev extension; reinstall the binary wheel "
        "(pip install --force-reinstall cassandra-driver) or install libev-dev and rebuild"
    ) from exc

_BATCH_PARTITIONS = 10  # Cassandra's unlogged_batch_across_partitions_warn_threshold
_BATCH_BYTES = 4096  # below batch_size_warn_threshold (5 KiB): a larger write goes alone (no batch limit applies)
# Values bound in one unlogged batch across partitions, at most: Cassandra refuses such a batch above
# batch_size_fail_threshold (50 KiB). Rows of one partition are not bounded (one mutation: no threshold applies).
_BATCH_MAX_BYTES = 24 * 1024
_FEW = 16  # writes up to which execute_many sends them directly
_MANY_SLICE = 20_000  # writes of `execute_many` taken from the iterator at a time
_PROGRESS_EVERY = 500  # rows between two progress callbacks of `execute_many`
# The read consistency of the request at hand, when it differs from the configured one (set per request by
# api/observability.py from the X-Read-Consistency header, or by an endpoint that reads back a client's write).
read_level: contextvars.ContextVar[int | None] = contextvars.ContextVar("read_level", default=None)
READ_LEVELS = ("LOCAL_ONE", "ONE", "LOCAL_QUORUM", "QUORUM", "ALL")  # what X-Read-Consistency accepts


def reads_own_writes(view: Callable[..., Any]) -> Callable[..., Any]:
    """An endpoint that looks one record up by key, typically right after the client wrote it (a 404 there is
    a wrong answer the client acts on): its reads run at LOCAL_QUORUM, which on RF 3 overlaps every
    LOCAL_QUORUM write, unless the request's X-Read-Consistency header asked for a level itself."""
    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if read_level.get() is not None:
            return view(*args, **kwargs)
        token = read_level.set(ConsistencyLevel.LOCAL_QUORUM)
        try:
            return view(*args, **kwargs)
        finally:
            read_level.reset(token)  # a test client runs the view in the caller's context: nothing may leak
    return wrapper


@contextlib.contextmanager
def reads_at(level: int = ConsistencyLevel.LOCAL_QUORUM) -> Iterator[None]:
    """Every read of this block (in this thread) at `level`, unless its statement has a level of its own: work
    that decides from what it reads (a bookkeeping pass, a reconcile) must not take a replica that missed writes
    for the truth. LOCAL_QUORUM reads overlap every LOCAL_QUORUM write on RF 3."""
    token = read_level.set(level)
    try:
        yield
    finally:
        read_level.reset(token)


def without_none(values: Mapping[str, Any]) -> dict[str, Any]:
    """Leave absent values out of a named bind: the driver sends them as unset, so no tombstone is written."""
    return {k: v for k, v in values.items() if v is not None}


@functools.lru_cache(maxsize=1024)
def _row_type(colnames: tuple[str, ...]) -> type:
    # The driver's own Row class for these columns (its naming rules), made once: its default factory builds
    # a new namedtuple class for every result, which costs more than decoding a small result's rows.
    return type(named_tuple_factory(list(colnames), [(None,) * len(colnames)])[0])


_TUPLES = "tuples"  # the execution profile of statements declared with tuples=True


def named_tuple_rows(colnames: Sequence[str], rows: Sequence[tuple]) -> list[Any]:
    """The driver's named-tuple rows, with one class per column list and process."""
    return list(map(_row_type(tuple(colnames))._make, rows))


def was_applied(result: Any) -> bool:
    """Whether a conditional (IF ...) statement applied: the `[applied]` column of its one row. (The driver's
    ResultSet.was_applied refuses row factories other than its own.)"""
    if not result.column_names or result.column_names[0] != "[applied]":
        raise ValueError(f"not the result of a conditional statement (columns {result.column_names})")
    row = result.one()
    return row is not None and bool(row[0])


CAS_WRITE_UNKNOWN = 0x1700  # protocol v5: the Paxos proposal was accepted by some replicas, not a quorum


def outcome_unknown(exc: BaseException) -> bool:
    """Whether a conditional statement that failed with `exc` may still have applied: a timeout (the node's or
    the driver's), or a proposal accepted by too few replicas, which a later Paxos round may complete."""
    return isinstance(exc, (WriteTimeout, ReadTimeout, OperationTimedOut)) or \
        getattr(exc, "code", None) == CAS_WRITE_UNKNOWN


def transact(db: Database, statement: Statement, params: Params, settle: Callable[[], bool]) -> bool:
    """Run a conditional statement: whether it applied. When its outcome is unknown (`outcome_unknown`),
    `settle` decides it from a serial read of the row, which also completes a proposal left half-done, so what
    it sees stays true. (If that read fails too, its error is raised: the outcome stays unknown.)"""
    try:
        return was_applied(db.execute(statement, params))
    except Exception as exc:
        if not outcome_unknown(exc):
            raise
    return settle()


class SecondPassPolicy(TokenAwarePolicy):
    """Token-aware routing whose query plan offers its hosts a second time, once speculative attempts cannot
    reach them.

    The driver keeps one plan per request and speculative attempts take hosts from it: with three nodes and two
    attempts, a slow request has every host in flight. When the first one's connection then breaks (a frozen
    node's heartbeat fails), the driver retries "the next host" of that plan, finds none and fails the request
    with NoHostAvailable while the other two attempts are still out and would answer. The second pass gives that
    retry a host. It follows only a plan that holds every attempt (the first and `speculative_attempts` more),
    so a speculative attempt never asks a node a second time (one or two nodes: the driver's plan as it was)."""

    def __init__(self, child: DCAwareRoundRobinPolicy, speculative_attempts: int) -> None:
        super().__init__(child)
        self.speculative_attempts = speculative_attempts

    def make_query_plan(self, working_keyspace: str | None = None, query: Any = None) -> Iterator[Any]:
        first: list[Any] = []
        for host in super().make_query_plan(working_keyspace, query):
            first.append(host)
            yield host
        if len(first) >= 1 + self.speculative_attempts:  # attempts end with the first pass
            yield from first


class Database:
    """The process's Cluster, Session and prepared statements, and the runtime that domain code reads with them:
    the clock it decides time by (`clock`) and the caches of what it read (`caches`, api/caches.py). Domain
    functions take a Database, so a test that builds its own gets its own clock and empty caches."""

    def __init__(self, settings: Settings, *, keyspace: str | None = None, clock: Clock = SYSTEM) -> None:
        self.settings = settings
        self.clock = clock
        self.caches = Caches(clock)
        self._executors: dict[str, ThreadPoolExecutor] = {}
        # Live objects this process holds for this database (work-queue consumers with their leases, object
        # store clients): not caches, so `caches.clear()` leaves them; each is made once per key.
        self._held: dict[Hashable, Any] = {}
        self._held_lock = threading.RLock()  # not _lock: making a held object may connect (which takes _lock)
        self.keyspace = settings.keyspace if keyspace is None else keyspace
        self._lock = threading.Lock()
        self._cluster: Cluster | None = None
        self._session: Session | None = None
        # id(statement) -> (the statement, its prepared form): holding the statement keeps its id from being
        # reused by another while the entry exists (a Statement made and dropped, as a test may, cannot pass its
        # prepared form on to the next one made at the same address).
        self._prepared: dict[int, tuple[Statement, PreparedStatement]] = {}
        # Ids of the prepared write statements to tables behind ETagged pages (api/slack/versions.py): once
        # acknowledged, such writes advance their pages' versions, here where every write passes.
        self._versioned: set[int] = set()
        self.pid = os.getpid()

    # -- connection -------------------------------------------------------------------------------
    def _build_cluster(self) -> Cluster:
        s = self.settings
        def profile(row_factory: Callable[..., Any]) -> ExecutionProfile:
            return ExecutionProfile(
                load_balancing_policy=SecondPassPolicy(DCAwareRoundRobinPolicy(local_dc=s.local_dc),
                                                       s.speculative_attempts),
                consistency_level=s.read_consistency,
                request_timeout=s.request_timeout,
                row_factory=row_factory,
                # A replica that stops answering (a long GC pause, a frozen VM) is asked around after
                # `speculative_delay`; the driver only does this for statements marked idempotent.
                speculative_execution_policy=ConstantSpeculativeExecutionPolicy(
                    delay=s.speculative_delay, max_attempts=s.speculative_attempts)
                if s.speculative_attempts > 0 else None,
            )
        return Cluster(
            s.contact_points,
            port=s.cassandra_port,
            protocol_version=s.protocol_version,
            connection_class=LibevConnection,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile(named_tuple_rows), _TUPLES: profile(tuple_factory)},
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
                        # The session's keyspace serves administrative CQL (execute_raw); prepared statements
                        # name theirs (Statement.qualified), so the node has no USE ambiguity to warn about.
                        session = cluster.connect(self.keyspace or None)
                    except Exception:
                        cluster.shutdown()
                        raise
                    self._cluster, self._session = cluster, session
        return self._session

    @property
    def cluster(self) -> Cluster:
        return self.session.cluster

    def serving_shortfall(self) -> str | None:
        """Why the configured consistency levels cannot be met with the nodes the driver sees up (its view,
        kept by heartbeats and the nodes' own status events), or None. A frozen node stays "up" until its
        heartbeat fails; speculative reads go around it meanwhile."""
        metadata = self.cluster.metadata
        keyspace = metadata.keyspaces.get(self.keyspace)
        if keyspace is None:
            return None  # the schema check says why
        strategy = keyspace.replication_strategy
        hosts = list(metadata.all_hosts())
        if isinstance(strategy, NetworkTopologyStrategy):
            replication = int(strategy.dc_replication_factors.get(self.settings.local_dc, 0))
            hosts = [h for h in hosts if h.datacenter == self.settings.local_dc]
        else:
            replication = int(getattr(strategy, "replication_factor", 1))
        up = sum(1 for h in hosts if h.is_up is not False)
        for label, level in (("reads", self.settings.read_consistency), ("writes", self.settings.write_consistency)):
            needed = replicas_needed(level, replication)
            if min(up, replication) < needed:
                return (f"{up} of {len(hosts)} nodes up: {label} at {consistency_name(level)} need {needed} of "
                        f"{replication} replicas")
        return None

    def executor(self, name: str, threads: int) -> ThreadPoolExecutor:
        """The thread pool `name` of this Database (created on first use: after gunicorn forked, never before;
        a forked child builds its own Database, so never an inherited pool whose threads did not survive)."""
        pool = self._executors.get(name)
        if pool is None:
            with self._lock:
                pool = self._executors.get(name)
                if pool is None:
                    pool = self._executors[name] = ThreadPoolExecutor(threads, thread_name_prefix=name)
        return pool

    def held(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The object held under `key`, made by `make()` the first time."""
        with self._held_lock:
            found = self._held.get(key)
            if found is None:
                found = self._held[key] = make()
            return found

    def release(self, key: Hashable) -> None:
        """Stop holding the object under `key` (its owner shut it down)."""
        with self._held_lock:
            self._held.pop(key, None)

    def close(self) -> None:
        with self._held_lock:
            self._held.clear()
        with self._lock:
            for pool in self._executors.values():
                pool.shutdown(wait=False, cancel_futures=True)
            self._executors.clear()
            if self._cluster is not None:
                self._cluster.shutdown()
            self._cluster = self._session = None
            self._prepared.clear()
            self._versioned.clear()

    # -- statements -------------------------------------------------------------------------------
    def prepared(self, statement: Statement) -> PreparedStatement:
        entry = self._prepared.get(id(statement))
        if entry is not None:
            return entry[1]
        prepared = self.session.prepare(statement.qualified(self.keyspace))
        # A lightweight transaction is never sent twice at once: a speculative second attempt of an applied
        # claim would answer "not applied".
        prepared.is_idempotent = statement.idempotent and not statement.conditional
        if statement.consistency is not None:
            prepared.consistency_level = statement.consistency
        elif statement.cql.startswith(("SELECT",)):
            prepared.consistency_level = self.settings.read_consistency
        else:
            prepared.consistency_level = self.settings.write_consistency
        if statement.unpaged:
            prepared.fetch_size = None  # bound statements inherit it: no paging
        if statement.conditional:
            # The Paxos round stays in the local data centre (SERIAL would cross DCs on every claim).
            prepared.serial_consistency_level = ConsistencyLevel.LOCAL_SERIAL
        if not statement.cql.startswith("SELECT") and statement.table in versions.TABLE_SCOPES:
            self._versioned.add(id(statement))
        self._prepared[id(statement)] = (statement, prepared)
        return prepared

    def _bind(self, statement: Statement, params: Params) -> Any:
        bound = self.prepared(statement).bind(params)
        level = read_level.get()
        if level is not None and statement.consistency is None and statement.cql.startswith("SELECT"):
            bound.consistency_level = level  # the request asked its reads to see its own writes
        return bound

    def execute(self, statement: Statement, params: Sequence[Any] | Mapping[str, Any] = (), *,
                paging_state: bytes | None = None, fetch_size: int | None = None,
                timeout: float | None = None) -> Any:
        bound = self._bind(statement, params)
        if fetch_size is not None:
            bound.fetch_size = fetch_size
        started = time.perf_counter()
        try:
            result = self.session.execute(bound, paging_state=paging_state,
                                          timeout=timeout or self.settings.request_timeout,
                                          execution_profile=_TUPLES if statement.tuples else EXEC_PROFILE_DEFAULT)
        except Exception as exc:
            metrics.CASSANDRA_ERRORS.labels(statement.name, type(exc).__name__).inc()
            raise
        finally:
            metrics.CASSANDRA_LATENCY.labels(statement.name).observe(time.perf_counter() - started)
            if id(statement) in self._versioned:
                self._advance([(statement, params)])
        return result

    def _changes(self, writes: Iterable[tuple[Statement, Params]]) -> dict[str, set[str]]:
        """The page versions `writes` change (api/slack/versions.py); {} for writes to no table behind a page."""
        versioned = self._versioned
        mine = [w for w in writes if id(w[0]) in versioned]
        return versions.changed(self, mine) if mine else {}

    def _advance(self, writes: Iterable[tuple[Statement, Params]]) -> None:
        """After `writes` were acknowledged (or failed: some may have landed): advance what they change."""
        changes = self._changes(writes)
        if changes:
            versions.advance(self, changes)

    def _advance_later(self, future: ResponseFuture, writes: Sequence[tuple[Statement, Params]]) -> None:
        """For a write sent without waiting: advance its versions when its answer arrives (statements bound
        now: nothing may be prepared on the driver's I/O thread)."""
        changes = self._changes(writes)
        if not changes:
            return
        bound = [self._bind(versions.ADVANCE, (team, sorted(scopes))) for team, scopes in changes.items()]

        def send(_result: Any) -> None:
            for statement in bound:
                self.session.execute_async(statement, timeout=self.settings.request_timeout)

        future.add_callbacks(send, send)

    def execute_async(self, statement: Statement, params: Sequence[Any] | Mapping[str, Any] = ()
                      ) -> ResponseFuture:
        future = self.session.execute_async(self._bind(statement, params), timeout=self.settings.request_timeout,
                                            execution_profile=_TUPLES if statement.tuples else EXEC_PROFILE_DEFAULT)
        if id(statement) in self._versioned:
            self._advance_later(future, [(statement, params)])
        return future

    def execute_windows(self, statement: Statement, params_list: Iterable[Params], window: int | None = None
                        ) -> Iterator[Any]:
        """Each params' result, in order, with at most `window` requests outstanding (all at once without): reads
        a background job makes beside production reads, which would otherwise queue behind all of them."""
        pending = list(params_list)
        size = window or len(pending) or 1
        for start in range(0, len(pending), size):
            futures = [self.execute_async(statement, params) for params in pending[start:start + size]]
            for future in futures:
                yield future.result()

    def send_partition(self, statement: Statement, rows: Sequence[Params]) -> ResponseFuture:
        """One partition's rows of `statement` as one unlogged batch (one mutation, exempt from the batch size
        thresholds), sent without waiting: for appends nothing waits for (the audit log). The caller adds its
        callbacks to the future."""
        prepared = self.prepared(statement)
        batch = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=prepared.consistency_level)
        for params in rows:
            batch.add(prepared, params)
        batch.is_idempotent = statement.idempotent
        future = self.session.execute_async(batch, timeout=self.settings.request_timeout)
        if id(statement) in self._versioned:
            self._advance_later(future, [(statement, params) for params in rows])
        return future

    def execute_many(self, writes: Iterable[tuple[Statement, Params]], *, concurrency: int = 100,
                     batch_size: int = 1, partitions_per_batch: int = _BATCH_PARTITIONS,
                     progress: Callable[[int], None] | None = None) -> int:
        """Run many (statement, params) pairs, `concurrency` requests (rows or batches) in flight; returns the
        number of rows written.

        The one way Chronicle writes many rows: fan-out, bulk loads and multi-table ingest all come here, so
        every statement is prepared once, measured (latency and errors per statement name) and bounded in
        flight. `writes` may be a lazy iterator of any length: it is pulled in slices on the calling thread
        (preparing on the driver's I/O thread would deadlock). With `batch_size` > 1, writes of one statement
        whose partitions live on the same replica go out as unlogged batches of up to `batch_size` rows over
        at most `partitions_per_batch` (10) partitions, so each batch is one local mutation per partition instead of
        a coordinator fan-out (about three times cheaper per row for the driver and the node). With
        `partitions_per_batch=1` a batch is one partition's rows: one mutation, applied whole, and exempt from
        Cassandra's batch size thresholds (they apply to batches across partitions).
        `progress(n)` is called as rows complete. The first failure stops the sending and is raised (writes
        already sent may still land); every write Chronicle makes is idempotent, so running the same set
        again completes it.
        """
        if isinstance(writes, (list, tuple)) and len(writes) <= _FEW and batch_size <= 1 and progress is None:
            return self._execute_few(writes)
        iterator = iter(writes)
        written = 0
        while True:
            chunk = list(itertools.islice(iterator, _MANY_SLICE))
            if not chunk:
                return written
            requests = self._many_requests(chunk, batch_size, partitions_per_batch)
            started = time.perf_counter()
            names = {id(stmt): stmt.name for stmt, _ in chunk}
            changes = self._changes(chunk)
            try:
                results = execute_concurrent(self.session, [(req, params) for req, params, _n, _s in requests],
                                             concurrency=max(1, concurrency), raise_on_first_error=True,
                                             results_generator=True)
                done = unreported = 0
                try:
                    for _result in results:
                        rows = requests[done][2]
                        done += 1
                        written += rows
                        unreported += rows
                        if progress is not None and unreported >= _PROGRESS_EVERY:
                            progress(unreported)
                            unreported = 0
                except Exception as exc:
                    # Results arrive in order: the first one missing is the one that failed.
                    metrics.CASSANDRA_ERRORS.labels(requests[done][3].name, type(exc).__name__).inc()
                    raise
                finally:
                    if progress is not None and unreported:
                        progress(unreported)
            finally:
                elapsed = time.perf_counter() - started
                for name in names.values():
                    metrics.CASSANDRA_LATENCY.labels(name + " (many)").observe(elapsed)
                if changes:
                    versions.advance(self, changes)

    def _execute_few(self, writes: Sequence[tuple[Statement, Params]]) -> int:
        """A request's handful of writes: all sent at once, then awaited (execute_concurrent's bookkeeping
        costs more than the writes themselves at this size)."""
        started = time.perf_counter()
        sent = [(stmt.name, self.session.execute_async(self._bind(stmt, params),
                                                       timeout=self.settings.request_timeout))
                for stmt, params in writes]
        try:
            _await_round(sent, {stmt.name for stmt, _ in writes}, " (many)", started)
        finally:
            self._advance(writes)
        return len(writes)

    def execute_together(self, writes: Sequence[tuple[Statement, Params]]) -> int:
        """A request's handful of small writes, each to its own partition, in as few requests as Cassandra
        takes them: unlogged batches of the plain writes and counter batches of the counter updates, per
        consistency level, of at most 10 writes and 4 KiB each (the node warns about batches over more
        partitions or 5 KiB; a larger write goes alone).

        For the tiny rows of one user action (a follow or a like writes eight of a few dozen bytes): the driver
        spends more on each request than the node spends on each row, so one request instead of eight saves
        most of the round's client CPU. Like separate writes, a batch is not atomic; a batch of idempotent
        writes is retried like one write, a counter batch is not. Returns the number of writes."""
        return self.start_together(writes).wait()

    def start_together(self, writes: Sequence[tuple[Statement, Params]]) -> WritesInFlight:
        """Send `writes` as `execute_together` does, without waiting: for writes nothing later in the request
        depends on, awaited (`wait`) at its end while the request's other rounds go on."""
        started = time.perf_counter()
        sent = [(stmts[0].name + " (together)",
                 self.session.execute_async(request, timeout=self.settings.request_timeout))
                for stmts, request in self._together_requests(writes)]
        return WritesInFlight(sent, {stmt.name for stmt, _ in writes}, started, len(writes), self, writes)

    def _together_requests(self, writes: Sequence[tuple[Statement, Params]]) -> list[tuple[list[Statement], Any]]:
        """(statements, request) for each batch or lone write of `execute_together`."""
        groups: dict[tuple[bool, int], list[tuple[Statement, Any]]] = {}
        for stmt, params in writes:
            if stmt.conditional or stmt.many_partitions:
                raise ValueError(f"{stmt.name}: a lightweight transaction or a write over many partitions cannot "
                                 "join a batch of other partitions")
            prepared = self.prepared(stmt)
            groups.setdefault((self._is_counter(prepared), prepared.consistency_level), []).append(
                (stmt, self._bind(stmt, params)))
        out: list[tuple[list[Statement], Any]] = []

        def flush(part: list[tuple[Statement, Any]], counter: bool, level: int) -> None:
            if len(part) == 1:
                out.append(([part[0][0]], part[0][1]))
                return
            batch = BatchStatement(batch_type=BatchType.COUNTER if counter else BatchType.UNLOGGED,
                                   consistency_level=level)
            for _stmt, bound in part:
                batch.add(bound)
            batch.is_idempotent = all(stmt.idempotent for stmt, _ in part)
            out.append(([stmt for stmt, _ in part], batch))

        for (counter, level), rows in groups.items():
            part: list[tuple[Statement, Any]] = []
            size = 0
            for row in rows:
                # The serialized values (what the node counts); unset and null ones are not bytes.
                row_size = sum(len(v) for v in row[1].values if isinstance(v, bytes))
                if part and (len(part) == _BATCH_PARTITIONS or size + row_size > _BATCH_BYTES):
                    flush(part, counter, level)
                    part, size = [], 0
                part.append(row)
                size += row_size
            if part:
                flush(part, counter, level)
        return out

    @staticmethod
    def _is_counter(prepared: PreparedStatement) -> bool:
        """Whether the statement updates counters (they go in counter batches; other writes may not)."""
        return any(col.type.typename == "counter" for col in prepared.column_metadata or ())

    def _many_requests(self, chunk: list[tuple[Statement, Params]], batch_size: int,
                       partitions_per_batch: int = _BATCH_PARTITIONS) -> list[tuple[Any, Any, int, Statement]]:
        """(request, params, rows, statement) for each write or batch of one slice of `execute_many`."""
        prepared = {id(stmt): self.prepared(stmt) for stmt, _ in chunk}
        if batch_size <= 1:
            return [(prepared[id(stmt)], params, 1, stmt) for stmt, params in chunk]
        alone = [(prepared[id(stmt)], params, 1, stmt) for stmt, params in chunk if stmt.many_partitions]
        if alone:
            chunk = [write for write in chunk if not write[0].many_partitions]
        # Grouped by first replica (one local mutation per partition on it, not a coordinator fan-out), and
        # at most _BATCH_PARTITIONS partitions per batch (rows of one partition kept together): Cassandra warns
        # about unlogged batches across more partitions than that.
        partitions_per_batch = max(1, min(partitions_per_batch, _BATCH_PARTITIONS))
        metadata = self.cluster.metadata
        single_host = len(metadata.all_hosts()) <= 1
        groups: dict[tuple[int, Any], list[tuple[bytes, Statement, Params, Any]]] = {}
        for stmt, params in chunk:
            bound = prepared[id(stmt)].bind(params)
            key = bound.routing_key
            replica = None
            if not single_host:
                replicas = metadata.get_replicas(self.keyspace, key)
                replica = replicas[0].host_id if replicas else None
            groups.setdefault((id(stmt), replica), []).append((key, stmt, params, bound))
        out: list[tuple[Any, Any, int, Statement]] = []

        def flush(part: list[tuple[bytes, Statement, Params, Any]]) -> None:
            stmt = part[0][1]
            if len(part) == 1:
                out.append((prepared[id(stmt)], part[0][2], 1, stmt))
                return
            level = prepared[id(stmt)].consistency_level
            batch = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=level)
            for row in part:
                batch.add(row[3])
            out.append((batch, None, len(part), stmt))

        for rows in groups.values():
            rows.sort(key=lambda row: row[0])
            part: list[tuple[bytes, Statement, Params, Any]] = []
            keys: set[bytes] = set()
            size = 0
            for row in rows:
                row_size = sum(len(v) for v in row[3].values if isinstance(v, (bytes, bytearray)))
                across = bool(keys) and (row[0] not in keys or len(keys) > 1)
                if part and (len(part) == batch_size or (row[0] not in keys and len(keys) == partitions_per_batch)
                             or (across and size + row_size > _BATCH_MAX_BYTES)):
                    flush(part)
                    part, keys, size = [], set(), 0
                part.append(row)
                keys.add(row[0])
                size += row_size
            if part:
                flush(part)
        return alone + out

    def execute_conditional_batch(self, writes: Sequence[tuple[Statement, Params]]) -> Any:
        """One partition's writes as one logged batch that applies only if every statement's IF holds (a
        lightweight transaction over the batch). The result tells `was_applied`, with the current values when
        refused."""
        batch = BatchStatement(batch_type=BatchType.LOGGED, consistency_level=self.settings.write_consistency,
                               serial_consistency_level=ConsistencyLevel.LOCAL_SERIAL)
        for statement, params in writes:
            batch.add(self.prepared(statement).bind(params))
        started = time.perf_counter()
        name = writes[0][0].name + " (conditional batch)"
        try:
            return self.session.execute(batch, timeout=self.settings.request_timeout)
        except Exception as exc:
            metrics.CASSANDRA_ERRORS.labels(name, type(exc).__name__).inc()
            raise
        finally:
            metrics.CASSANDRA_LATENCY.labels(name).observe(time.perf_counter() - started)
            self._advance(writes)

    def execute_raw(self, cql: str, params: Sequence[Any] = (), *, timeout: float | None = None,
                    consistency: int | None = None) -> Any:
        """Unprepared CQL, for DDL and administration only (product queries use `Statement`)."""
        query: Any = cql if consistency is None else SimpleStatement(cql, consistency_level=consistency)
        return self.session.execute(query, params or None, timeout=timeout or self.settings.request_timeout)


@dataclasses.dataclass
class WritesInFlight:
    """Writes sent by `Database.start_together` and not yet awaited."""

    sent: list[tuple[str, ResponseFuture]]
    names: set[str]
    started: float
    writes: int
    db: Database
    sent_writes: Sequence[tuple[Statement, Params]]

    def wait(self) -> int:
        """Wait for every write; raises the first failure. Returns the number of writes."""
        try:
            _await_round(self.sent, self.names, " (together)", self.started)
        finally:
            self.db._advance(self.sent_writes)
        return self.writes


def _await_round(sent: list[tuple[str, ResponseFuture]], names: set[str], suffix: str, started: float) -> None:
    """Wait for a round of requests sent together: the first failure is counted under its label and raised; the
    round's time is observed under every statement name (+ `suffix`) it carried."""
    try:
        for label, future in sent:
            try:
                future.result()
            except Exception as exc:
                metrics.CASSANDRA_ERRORS.labels(label, type(exc).__name__).inc()
                raise
    finally:
        elapsed = time.perf_counter() - started
        for name in names:
            metrics.CASSANDRA_LATENCY.labels(name + suffix).observe(elapsed)


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


def replace_settings(**sections: Any) -> None:
    """Replace sections of the installed Database's settings (tests and benchmarks: e.g. `network=...`)."""
    db = get_db()
    db.settings = dataclasses.replace(db.settings, **sections)


def installed_db() -> Database | None:
    """The Database installed for this process, if any (without creating one)."""
    return _db


def set_db(db: Database | None) -> None:
    """Install a Database for this process (the app factory and tests use it)."""
    global _db
    with _db_lock:
        _db = db


def consistency_name(level: int) -> str:
    return ConsistencyLevel.value_to_name[level]


def replicas_needed(level: int, replication: int) -> int:
    """Replicas that must answer at `level` with `replication` copies in the data centre."""
    fixed = {ConsistencyLevel.ANY: 1, ConsistencyLevel.ONE: 1, ConsistencyLevel.LOCAL_ONE: 1,
             ConsistencyLevel.TWO: 2, ConsistencyLevel.THREE: 3, ConsistencyLevel.ALL: replication}
    return fixed.get(level, replication // 2 + 1)  # QUORUM, LOCAL_QUORUM, EACH_QUORUM, SERIAL, LOCAL_SERIAL
