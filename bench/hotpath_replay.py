"""The raw-driver floor of bench/hotpath.py: recorded requests replayed with the plain driver, in a process of its own.

    .venv/bin/python -m bench.hotpath_replay RECORDING --target NAME [--concurrency 16] [--seconds 10]
                                             [--warmup 2] [--mode concurrent|rounds] [--rows tuple|named]
                                             [--node-pid PID]

RECORDING is a pickle written by bench/hotpath.py: for each target (an endpoint with its variants), the requests
recorded while the app served them in-process; each request is the list of `Call`s the app's driver Session was
handed, in the order it was handed them (bound statement: CQL, values as bound, consistency, serial consistency,
fetch size, paging state; or a batch; or unprepared CQL), with the time each was sent and answered.

Replay: every distinct CQL is prepared once; then `--concurrency` requests are in flight at all times. A request
binds and sends its calls with `Session.execute_async` (the same consistency levels, fetch size and paging state
as recorded) and counts as one page when every call has answered; its slot then starts its next request at once
(from the driver's callback). Slot k replays the recorded requests k, k + c, k + 2c, ... in turn (the API's load
generator gives its threads the same shares), so a request bound to one caller is never in flight twice.

Dependent statements: `--mode concurrent` (the default, the floor) sends all of a request's calls at once, even
those the endpoint sent only after an earlier answer; `--mode rounds` keeps the endpoint's order: a call is sent
once every call answered before the endpoint sent it (in the recording) has answered here (`Call.round`), so a
page costs as many round trips as it did in the app. At 16 in flight the machine's CPU is the limit, not the
round trips, so both give about the same pages/s; latency differs.

Rows: `--rows tuple` (the default) decodes rows into plain tuples, the driver's cheapest row factory: the floor
of what reading these rows costs; `--rows named` uses the driver's default named-tuple factory (a new class per
result). Results are not otherwise used. The driver is the one the app uses (its compiled extensions, libev).

Prints one JSON object: pages, pages_per_s, p50/p90/p99/max_ms (a page's time from its first call sent to its last
answer), failed pages and the first error, calls per page, this process's CPU ms per page and, with
--node-pid, the node's CPU ms per page over the window; `row_mismatches`: calls whose first page held another
number of rows than when recorded (0: the replay reads what the app read).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pickle
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, Session
from cassandra.io.libevreactor import LibevConnection
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
from cassandra.query import (
    UNSET_VALUE,
    BatchStatement,
    PreparedStatement,
    SimpleStatement,
    named_tuple_factory,
    tuple_factory,
)

from bench.network_loadgen import percentile, thread_requests
from bench.tagging import cpu_seconds


@dataclasses.dataclass
class Call:
    """One request the app handed to the driver's Session while serving one HTTP request."""

    kind: str  # "bound" (a prepared statement's values), "batch", "simple" (unprepared CQL)
    name: str  # the statement's verb and table, as api.db.Statement names it (for the report)
    cql: str  # bound: the CQL; simple: the CQL as sent (parameters inlined); batch: ""
    values: list[Any]  # bound: the values as bound (positions in `unset` were left unset)
    unset: list[int]
    consistency: int | None  # as sent on the wire (statement, else the execution profile's)
    serial_consistency: int | None
    fetch_size: int | None
    paging_state: bytes | None  # a further page of an earlier call (the driver's paging)
    idempotent: bool
    batch: list[tuple[str, bytes, list[Any]]] = dataclasses.field(default_factory=list)  # (cql, query id, values)
    batch_type: int | None = None
    execution_profile: str = ""  # not "" when the app named an execution profile (replayed with the default one)
    issued: float = 0.0  # perf_counter when handed to the Session
    answered: float | None = None  # perf_counter when its answer arrived
    rows: int | None = None  # rows of its (first) page
    round: int = 1  # 1 + the rounds of the calls answered before it was sent (see rounds())


@dataclasses.dataclass
class Recording:
    """What bench/hotpath.py hands to this process."""

    contact_points: list[str]
    port: int
    keyspace: str
    local_dc: str | None
    protocol_version: int
    targets: dict[str, list[list[Call]]]  # target -> requests -> calls


def rounds(calls: Sequence[Call]) -> list[int]:
    """The round of each call: 1 + the highest round of the calls whose answer had arrived when it was sent (1
    when none had). Calls the endpoint sent together share a round; a call sent after reading an answer comes a
    round later. (A call sent after an unrelated answer happened to arrive also counts as dependent.)"""
    out: list[int] = []
    for i, call in enumerate(calls):
        before = [out[j] for j in range(i) if calls[j].answered is not None and calls[j].answered <= call.issued]
        out.append(1 + max(before, default=0))
    return out


def connect(recording: Recording, rows: str) -> Session:
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=recording.local_dc)),
        request_timeout=10.0, row_factory=tuple_factory if rows == "tuple" else named_tuple_factory)
    cluster = Cluster(recording.contact_points, port=recording.port, protocol_version=recording.protocol_version,
                      connection_class=LibevConnection, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    return cluster.connect(recording.keyspace or None)


class Replayer:
    """Keeps `concurrency` recorded requests in flight on `session` until stopped; see the module doc."""

    def __init__(self, session: Session, requests: Sequence[Sequence[Call]], concurrency: int, mode: str) -> None:
        if mode not in ("concurrent", "rounds"):
            raise ValueError(f"mode {mode!r}: concurrent or rounds")
        self.session = session
        self.prepared: dict[str, PreparedStatement] = {}
        self.plans: list[list[list[Call]]] = []
        for calls in requests:
            for call in calls:
                for cql in ([call.cql] if call.kind == "bound" else [c for c, _i, _v in call.batch]):
                    if cql not in self.prepared:
                        self.prepared[cql] = session.prepare(cql)
                        self.prepared[cql].is_idempotent = call.idempotent
            if mode == "concurrent":
                self.plans.append([list(calls)])
            else:
                by_round: dict[int, list[Call]] = {}
                for call in calls:
                    by_round.setdefault(call.round, []).append(call)
                self.plans.append([by_round[r] for r in sorted(by_round)])
        self.slots = [thread_requests(range(len(self.plans)), k, concurrency) for k in range(concurrency)]
        self.turn = [0] * concurrency
        self.lock = threading.Lock()
        self.stopping = False
        self.in_flight = 0
        self.idle = threading.Event()
        self.pages: list[tuple[float, float, bool]] = []  # (started, finished, failed)
        self.first_error: str | None = None
        self.row_mismatches = 0
        self.calls_sent = 0

    # -- one call ----------------------------------------------------------------------------------------
    def _statement(self, call: Call) -> Any:
        if call.kind == "bound":
            values = list(call.values)
            for i in call.unset:
                values[i] = UNSET_VALUE
            statement: Any = self.prepared[call.cql].bind(values)
        elif call.kind == "batch":
            statement = BatchStatement(batch_type=call.batch_type)
            for cql, _query_id, values in call.batch:
                # Values as serialized by the app's driver: added as the driver's own BatchStatement.add does.
                statement._add_statement_and_params(True, self.prepared[cql].query_id, values)
        else:
            statement = SimpleStatement(call.cql)
        if call.consistency is not None:
            statement.consistency_level = call.consistency
        if call.serial_consistency is not None:
            statement.serial_consistency_level = call.serial_consistency
        if call.kind != "batch":
            statement.fetch_size = call.fetch_size  # as sent: None is an unpaged read (IN with ORDER BY needs it)
        return statement

    def _send(self, call: Call, done: Any) -> None:
        future = self.session.execute_async(self._statement(call), paging_state=call.paging_state)

        def answered(rows: Any) -> None:
            if call.rows is not None and rows is not None and len(rows) != call.rows:
                with self.lock:
                    self.row_mismatches += 1
            done(None)

        future.add_callbacks(answered, done)

    # -- one request ---------------------------------------------------------------------------------------
    def _start(self, slot: int) -> None:
        with self.lock:
            if self.stopping:
                self.in_flight -= 1
                if self.in_flight == 0:
                    self.idle.set()
                return
            mine = self.slots[slot]
            plan = self.plans[mine[self.turn[slot] % len(mine)]]
            self.turn[slot] += 1
        self._round(slot, plan, 0, time.perf_counter(), [False])

    def _round(self, slot: int, plan: list[list[Call]], index: int, started: float, failed: list[bool]) -> None:
        calls = plan[index]
        pending = [len(calls)]
        lock = threading.Lock()

        def done(error: Any) -> None:
            if error is not None:
                failed[0] = True
                if self.first_error is None:
                    self.first_error = f"{type(error).__name__}: {error}"[:300]
            with lock:
                pending[0] -= 1
                last = pending[0] == 0
            if not last:
                return
            if index + 1 < len(plan) and not failed[0]:
                self._round(slot, plan, index + 1, started, failed)
                return
            finished = time.perf_counter()
            with self.lock:
                self.pages.append((started, finished, failed[0]))
            self._start(slot)

        with self.lock:
            self.calls_sent += len(calls)
        for call in calls:
            self._send(call, done)

    # -- the run -------------------------------------------------------------------------------------------
    def run(self, seconds: float, warmup: float, node_pid: int = 0) -> dict[str, Any]:
        concurrency = len(self.slots)
        self.in_flight = concurrency
        for slot in range(concurrency):
            self._start(slot)
        time.sleep(warmup)
        window_start = time.perf_counter()
        cpu0, node0 = _own_cpu(), cpu_seconds(node_pid)
        time.sleep(seconds)
        window_end = time.perf_counter()
        cpu1, node1 = _own_cpu(), cpu_seconds(node_pid)
        with self.lock:
            self.stopping = True
        drained = self.idle.wait(30)
        timed = [p for p in self.pages if window_start <= p[1] < window_end]
        ok = sorted(p[1] - p[0] for p in timed if not p[2])
        pages = len(timed)
        out = {"concurrency": concurrency, "seconds": round(window_end - window_start, 2), "pages": len(ok),
               "failed": pages - len(ok), "first_error": self.first_error,
               "pages_per_s": round(len(ok) / (window_end - window_start), 1),
               "p50_ms": round(percentile(ok, 0.50) * 1000, 2), "p90_ms": round(percentile(ok, 0.90) * 1000, 2),
               "p99_ms": round(percentile(ok, 0.99) * 1000, 2), "max_ms": round((ok[-1] if ok else 0) * 1000, 2),
               "calls_per_page": round(sum(len(c) for p in self.plans for c in p) / len(self.plans), 2),
               "round_trips_per_page": round(sum(len(p) for p in self.plans) / len(self.plans), 2),
               "driver_cpu_ms_per_page": round((cpu1 - cpu0) * 1000 / pages, 3) if pages else None,
               "row_mismatches": self.row_mismatches, "drained": drained}
        if node_pid:
            out["node_cpu_ms_per_page"] = round((node1 - node0) * 1000 / pages, 3) if pages else None
        return out


def _own_cpu() -> float:
    now = os.times()
    return now.user + now.system


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recording", type=Path)
    parser.add_argument("--target", required=True)
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    parser.add_argument("--seconds", type=float, default=10.0, help="the measured window")
    parser.add_argument("--warmup", type=float, default=2.0, help="untimed seconds first")
    parser.add_argument("--mode", choices=["concurrent", "rounds"], default="concurrent")
    parser.add_argument("--rows", choices=["tuple", "named"], default="tuple")
    parser.add_argument("--node-pid", type=int, default=0, help="the node's process: its CPU per page")
    args = parser.parse_args(argv)
    with args.recording.open("rb") as handle:
        recording: Recording = pickle.load(handle)
    requests = recording.targets[args.target]
    session = connect(recording, args.rows)
    try:
        out = Replayer(session, requests, args.concurrency, args.mode).run(args.seconds, args.warmup, args.node_pid)
    finally:
        session.cluster.shutdown()
    out.update(target=args.target, mode=args.mode, rows=args.rows, variants=len(requests),
               consistency=sorted({ConsistencyLevel.value_to_name.get(c.consistency, str(c.consistency))
                                   for r in requests for c in r if c.consistency is not None}))
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
