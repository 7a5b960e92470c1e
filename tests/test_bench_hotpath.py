"""The logic of bench/hotpath.py that could be wrong without anyone noticing in its figures: the open-loop
generator's latency from the scheduled time (no coordinated omission), the recorder's capture of one request's
calls (rounds, consistency, paging) and their replay with the plain driver. Expected values are worked out by
hand from the inputs."""

from __future__ import annotations

import dataclasses
import math

import pytest

from api.config import Settings
from api.db import Database, Statement
from bench.hotpath import Recorder
from bench.hotpath_replay import Call, Recording, Replayer, connect, rounds
from bench.network_loadgen import open_figures, open_loop, thread_requests

MS = 0.001


class FakeClock:
    """Time that moves only when the code under test sleeps or a request is served."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


def _serve(clock: FakeClock, service: float):
    def send(_i: int) -> int:
        clock.now += service
        return 200
    return send


def test_open_loop_measures_from_the_scheduled_time_when_the_server_falls_behind() -> None:
    # 100/s offered (due every 10 ms) to one connection that takes 30 ms per request: request k is due at 10k ms,
    # can only be sent when k-1 is answered, at 30k ms, and is answered at 30(k+1) ms.
    clock = FakeClock()
    records = open_loop(_serve(clock, 30 * MS), rate=100, count=10, start=0.0, connections=1, clock=clock,
                        sleep=clock.sleep)
    records.sort()
    assert [r[0] for r in records] == pytest.approx([k * 10 * MS for k in range(10)])
    assert [r[1] for r in records] == pytest.approx([k * 30 * MS for k in range(10)])
    assert [r[2] - r[0] for r in records] == pytest.approx([(30 + 20 * k) * MS for k in range(10)])
    figures = open_figures(records, rate=100, window_start=0.0, seconds=0.1, late_s=10 * MS)
    # Latencies 30, 50, ..., 210 ms: nearest rank p50 is the 5th (110 ms), p99 the 10th (210 ms). Sent late by
    # 20k ms: every request but the first is more than 10 ms late. Service time stays 30 ms throughout.
    assert figures["due"] == figures["ok"] == 10 and figures["failed"] == 0
    assert (figures["p50_ms"], figures["p99_ms"], figures["max_ms"]) == (110.0, 210.0, 210.0)
    assert figures["late"] == 9
    assert figures["service_p50_ms"] == figures["service_p99_ms"] == 30.0
    assert figures["max_send_delay_ms"] == 180.0
    # Answers arrive every 30 ms: those at 30, 60 and 90 ms fall in the 100 ms window, 30 per second.
    assert figures["achieved_rps"] == 30.0
    # A closed loop would have reported the 30 ms service time for every one of them.


def test_open_loop_sends_on_schedule_when_the_server_keeps_up() -> None:
    clock = FakeClock()
    records = open_loop(_serve(clock, 4 * MS), rate=100, count=6, start=1.0, connections=1, clock=clock,
                        sleep=clock.sleep)
    records.sort()
    assert [r[1] for r in records] == pytest.approx([1.0 + k * 10 * MS for k in range(6)])
    figures = open_figures(records, rate=100, window_start=1.02, seconds=0.04, late_s=1 * MS)
    # Due in [1.02, 1.06): requests 2, 3, 4, 5.
    assert figures["due"] == 4 and figures["late"] == 0
    assert figures["p50_ms"] == figures["max_ms"] == 4.0


def test_open_loop_counts_requests_never_sent_and_errors_as_failed() -> None:
    clock = FakeClock()
    statuses = iter([200, 503, 0, 200, 200])

    def send(_i: int) -> int:
        clock.now += 20 * MS
        return next(statuses)

    # Due every 10 ms, 20 ms each: request k is sent at 20k ms; giving up at 65 ms leaves 4 and 5 unsent.
    records = open_loop(send, rate=100, count=6, start=0.0, connections=1, give_up_at=0.065, clock=clock,
                        sleep=clock.sleep)
    figures = open_figures(records, rate=100, window_start=0.0, seconds=1.0, late_s=50 * MS)
    assert figures["due"] == 6 and figures["ok"] == 2
    assert figures["failed"] == 4  # a 503, a connection error, two never sent
    assert figures["statuses"] == {"200": 2, "503": 1, "0": 1, "-1": 2}
    assert figures["late"] == 0  # the sent ones were at most 30 ms late


def test_closed_loop_threads_never_share_a_request() -> None:
    requests = ["r0", "r1", "r2", "r3", "r4"]
    assert [thread_requests(requests, t, 2) for t in range(2)] == [["r0", "r2", "r4"], ["r1", "r3"]]
    assert [thread_requests(requests[:2], t, 4) for t in range(4)] == [["r0"], ["r1"], ["r0"], ["r1"]]


def _call(issued: float, answered: float | None) -> Call:
    return Call("bound", "", "", [], [], None, None, None, None, True, issued=issued, answered=answered)


def test_rounds_follow_the_answers_a_call_was_sent_after() -> None:
    calls = [_call(0.0, 1.0),   # A
             _call(0.1, 1.2),   # B: sent with A
             _call(1.1, 1.5),   # C: after A's answer, before B's
             _call(1.3, 2.0),   # D: after A and B
             _call(2.5, 3.0),   # E: after C (round 2) and D (round 2)
             _call(0.2, None)]  # F: never answered, sent with A
    assert rounds(calls) == [1, 1, 2, 2, 3, 1]


@pytest.fixture
def system_db(settings: Settings):
    database = Database(dataclasses.replace(settings, keyspace=""), keyspace="")
    yield database
    database.close()


LOCAL = Statement("SELECT release_version FROM system.local WHERE key = ?")
CLUSTER = Statement("SELECT cluster_name FROM system.local WHERE key = ?")
KEYSPACES = Statement("SELECT keyspace_name FROM system_schema.keyspaces")


def test_recorder_captures_one_request_and_the_replay_reads_the_same(system_db: Database, settings: Settings) -> None:
    system_db.execute(LOCAL, ("local",))  # connected and prepared before recording, as after a warm-up request
    recorder = Recorder(system_db)
    recorder.install()
    try:
        system_db.execute(CLUSTER, ("local",))  # outside a request: not recorded
        with recorder.request() as calls:
            system_db.execute(LOCAL, ("local",))
            pair = [system_db.execute_async(CLUSTER, ("local",)) for _ in range(2)]  # both sent at once
            for f in pair:
                f.result()
            listed = [r.keyspace_name for r in system_db.execute(KEYSPACES, fetch_size=2)]  # pages of 2
        with recorder.request() as later:
            pass
        with recorder.request() as many:  # execute_many past its few-writes path: execute_concurrent
            system_db.execute_many([(LOCAL, ("local",))] * 20)
    finally:
        recorder.uninstall()
    assert "execute_async" not in vars(system_db.session)  # uninstalled: the class's own method again
    assert later == []
    pages = math.ceil(len(listed) / 2)
    assert [c.cql for c in calls[:3]] == [LOCAL.cql, CLUSTER.cql, CLUSTER.cql]
    assert [c.values for c in calls[:3]] == [["local"]] * 3
    assert all(c.cql == KEYSPACES.cql for c in calls[3:])
    # The driver fetches each further page on the first call's future; a final empty page may follow.
    assert pages <= len(calls) - 3 <= pages + 1
    assert calls[3].paging_state is None and all(c.paging_state for c in calls[4:])
    assert all(c.fetch_size == 2 for c in calls[3:])
    assert [c.rows for c in calls[:3]] == [1, 1, 1]
    assert sum(c.rows for c in calls[3:]) == len(listed)
    assert {c.consistency for c in calls} == {settings.read_consistency}
    # The sync read, then the pair sent together after its answer, then each page after the one before.
    assert [c.round for c in calls[:4]] == [1, 2, 2, 3]
    assert [c.round for c in calls[3:]] == list(range(3, len(calls)))
    assert [c.name for c in calls[:2]] == ["SELECT system.local"] * 2
    assert [(c.kind, c.cql, c.values) for c in many] == [("bound", LOCAL.cql, ["local"])] * 20

    # Replayed on a session of the driver's own (bench/hotpath_replay.py's, as its process makes it).
    recording = Recording(list(settings.contact_points), settings.cassandra_port, "", settings.local_dc,
                          system_db.session.cluster.protocol_version, {"t": [calls]})
    session = connect(recording, "tuple")
    try:
        replayer = Replayer(session, recording.targets["t"], concurrency=2, mode="rounds")
        figures = replayer.run(seconds=0.3, warmup=0.05)
    finally:
        session.cluster.shutdown()
    assert figures["failed"] == 0 and figures["pages"] > 0
    assert figures["row_mismatches"] == 0
    assert figures["calls_per_page"] == len(calls)
    assert figures["round_trips_per_page"] == len({c.round for c in calls})
    # Every page sent every recorded call (pages still in flight when stopped sent some of theirs).
    assert replayer.calls_sent >= len(replayer.pages) * len(calls)
