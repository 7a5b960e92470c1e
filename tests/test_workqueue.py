"""The generic work queue (api/workqueue.py) against the real node: order, retries that do not block the head,
fairness across groups, one owner per shard, crash safety, and reads that never meet a tombstone."""

from __future__ import annotations

import re
import threading
import time
import uuid

import pytest

from api import workqueue
from api.workqueue import WorkItem


@pytest.fixture
def queue() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def quick(monkeypatch):
    """Checkpoints written at once and allowed up to now, leases and heartbeats in seconds: the timing knobs
    shrunk so a test sees in seconds what takes a minute in production."""
    monkeypatch.setattr(workqueue, "SETTLE_US", 0)
    monkeypatch.setattr(workqueue, "CHECKPOINT_EVERY_SECONDS", 0.0)
    monkeypatch.setattr(workqueue, "HEARTBEAT_SECONDS", 0.2)
    monkeypatch.setattr(workqueue, "LEASE_SECONDS", 3)
    monkeypatch.setattr(workqueue, "WORKER_TTL_SECONDS", 1)


def drain(db, queue: str, owner: str, *, limit: int = 50, seconds: float = 10.0) -> list[WorkItem]:
    """Take and finish everything due, until a take comes back empty twice."""
    got: list[WorkItem] = []
    empty, deadline = 0, time.monotonic() + seconds
    while empty < 2 and time.monotonic() < deadline:
        batch = workqueue.take(db, queue, owner, limit)
        empty = 0 if batch else empty + 1
        for item in batch:
            workqueue.done(db, item, owner)
        got.extend(batch)
    return got


def test_items_come_back_once_with_their_payload(db, queue, quick):
    for i in range(30):
        workqueue.enqueue(db, queue, "G1", f"k{i}", {"n": i, "text": "é"})
    try:
        got = drain(db, queue, "w1")
        assert sorted(item.payload["n"] for item in got) == list(range(30))
        assert {item.key for item in got} == {f"k{i}" for i in range(30)}
        assert all(item.attempts == 0 and item.group == "G1" and item.queue == queue for item in got)
        assert got[0].payload["text"] == "é"
        assert workqueue.take(db, queue, "w1", 50) == []
    finally:
        workqueue.stop(db, queue, "w1")
    # Another worker, after the first handed its shards back, starts after the checkpoints: nothing again.
    try:
        assert drain(db, queue, "w2") == []
        assert workqueue.backlog(db, queue)["total"] == 0
    finally:
        workqueue.stop(db, queue, "w2")


def test_a_retry_not_yet_due_does_not_block_the_items_behind_it(db, queue, quick):
    workqueue.enqueue(db, queue, "G1", "first", {"n": 1})
    try:
        [first] = workqueue.take(db, queue, "w1", 10)
        workqueue.retry(db, first, "w1", due_at_us=workqueue._now_us() + 2_000_000, error="HTTP 500")
        for i in range(5):
            workqueue.enqueue(db, queue, "G1", f"later{i}", {"n": i})
        later = drain(db, queue, "w1")
        assert sorted(item.key for item in later) == [f"later{i}" for i in range(5)]  # first is not due yet
        time.sleep(2.2)
        [again] = drain(db, queue, "w1")
        assert (again.key, again.attempts, again.last_error, again.payload) == ("first", 1, "HTTP 500", {"n": 1})
    finally:
        workqueue.stop(db, queue, "w1")


def test_a_big_backlog_does_not_starve_a_new_group(db, queue, quick):
    db.execute_many(w for i in range(2000) for w in workqueue.enqueue_writes(queue, "BIG", f"b{i}", {"i": i}))
    for i in range(3):
        workqueue.enqueue(db, queue, "SMALL", f"s{i}", {"i": i})
    try:
        first = workqueue.take(db, queue, "w1", 40)
        assert sorted(item.key for item in first if item.group == "SMALL") == ["s0", "s1", "s2"]
        assert len(first) <= 40 and sum(item.group == "BIG" for item in first) >= 20
        backlog = workqueue.backlog(db, queue)
        assert backlog["groups"]["BIG"] == 2000 and backlog["groups"]["SMALL"] == 3  # none finished yet
    finally:
        workqueue.stop(db, queue, "w1")


def test_two_workers_never_process_one_item_at_once(db, queue, quick):
    keys = [f"k{i}" for i in range(600)]
    db.execute_many(w for i, k in enumerate(keys) for w in workqueue.enqueue_writes(queue, f"G{i % 3}", k, {}))
    log: list[tuple[str, str, float, float]] = []
    lock = threading.Lock()

    def work(owner: str) -> None:
        deadline = time.monotonic() + 40
        try:
            while time.monotonic() < deadline:
                with lock:
                    if {k for k, *_ in log} >= set(keys):
                        return
                for item in workqueue.take(db, queue, owner, 20):
                    start = time.monotonic()
                    time.sleep(0.005)
                    with lock:
                        log.append((item.key, owner, start, time.monotonic()))
                    workqueue.done(db, item, owner)
                time.sleep(0.01)
        finally:
            workqueue.stop(db, queue, owner)

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert {k for k, *_ in log} == set(keys)
    assert {owner for _k, owner, *_ in log} == {"w0", "w1"}  # the shards were shared out
    by_key: dict[str, list[tuple[str, float, float]]] = {}
    for key, owner, start, end in log:
        by_key.setdefault(key, []).append((owner, start, end))
    for key, runs in by_key.items():
        for a in runs:
            for b in runs:
                if a is not b and a[0] != b[0]:
                    assert a[2] <= b[1] or b[2] <= a[1], f"{key} processed by two workers at once: {runs}"


def test_a_killed_worker_loses_nothing(db, queue, quick):
    for i in range(10):
        workqueue.enqueue(db, queue, "G1", f"k{i}", {})
    batch = workqueue.take(db, queue, "doomed", 10)
    assert len(batch) == 10
    finished = {item.key for item in sorted(batch, key=lambda x: x.pos)[:4]}
    for item in batch:
        if item.key in finished:
            workqueue.done(db, item, "doomed")
    # Killed: no stop(), its leases stay until they expire; its in-memory state is gone.
    workqueue._consumers.pop((id(db), db.keyspace, queue, "doomed"))
    assert workqueue.take(db, queue, "heir", 10) == []  # the shards are still leased
    time.sleep(workqueue.LEASE_SECONDS + 0.5)
    try:
        rest = drain(db, queue, "heir")
        # Checkpoints were written as items finished: exactly the unfinished ones come back.
        assert {item.key for item in rest} == {f"k{i}" for i in range(10)} - finished
    finally:
        workqueue.stop(db, queue, "heir")


def test_reads_never_meet_a_tombstone(db, queue, quick):
    """Structure: no statement deletes items, buckets, groups or checkpoints. Behaviour: after 300 items were
    taken and finished, the reader's next read of their partition, traced by the node, scans no tombstone."""
    for statement in vars(workqueue).values():
        if isinstance(statement, workqueue.Statement) and statement.table in {
                "work_items", "work_buckets", "work_groups", "work_checkpoints"}:
            assert not statement.cql.upper().startswith("DELETE"), statement
            assert " = NULL" not in statement.cql.upper()
    db.execute_many(w for i in range(300) for w in workqueue.enqueue_writes(queue, "G1", f"k{i}", {}))
    try:
        assert len(drain(db, queue, "w1", limit=100)) == 300
        consumer = workqueue._consumers[(id(db), db.keyspace, queue, "w1")]
        traced = 0
        for shard, state in consumer.shards.items():
            pair = state.pairs.get("G1")
            if pair is None or pair.cp == workqueue.START:
                continue
            for start, live in ((pair.cp, 0), (workqueue.START, None)):
                bound = db.prepared(workqueue.SELECT_ITEMS).bind(
                    (queue, "G1", shard, pair.cp[0] // workqueue.BUCKET_US, *start, workqueue._now_us(), 1000))
                result = db.session.execute(bound, trace=True)
                rows = list(result)
                events = [e.description for e in result.get_query_trace(max_wait_sec=5).events]
                counts = [tuple(map(int, m.groups())) for d in events
                          if (m := re.match(r"Read (\d+) live rows and (\d+) tombstone cells", d))]
                # From the checkpoint: nothing. From the head: the finished rows, alive, never a tombstone.
                assert counts and all(t == 0 for _, t in counts), events
                assert len(rows) == (live if live is not None else len(rows)) and (live == 0 or rows)
            traced += 1
        assert traced >= 8  # 300 keys spread over the 16 shards
    finally:
        workqueue.stop(db, queue, "w1")


def test_lightweight_transactions_use_local_serial(db):
    from cassandra import ConsistencyLevel

    conditional = [workqueue.ACQUIRE, workqueue.RENEW, workqueue.RELEASE]
    assert all(s.conditional for s in conditional)
    assert not any(s.conditional for s in (workqueue.INSERT_ITEM, workqueue.SELECT_ITEMS, workqueue.HEARTBEAT))
    for statement in conditional:
        assert db.prepared(statement).serial_consistency_level == ConsistencyLevel.LOCAL_SERIAL
    # Reads of other processes' writes (items, checkpoints) are LOCAL_QUORUM whatever the default read level.
    assert db.prepared(workqueue.SELECT_ITEMS).consistency_level == ConsistencyLevel.LOCAL_QUORUM


def test_a_lease_transaction_with_an_unknown_outcome_is_settled_by_a_serial_read(db, queue, quick, monkeypatch):
    """On a loaded cluster a lease transaction can end "CAS operation result is unknown" (seen on the 3-node
    run). The worker must not crash: it reads the lease serially and keeps the shards that name it, and only
    those (a second worker then takes the rest, so no shard is held twice)."""
    from cassandra.protocol import ErrorMessage

    workqueue.enqueue(db, queue, "G1", "k1", {"n": 1})
    real = db.execute
    failed: list[int] = []

    def flaky(statement, params=(), **kw):
        result = real(statement, params, **kw)  # the transaction runs (and applies, or not) ...
        if statement is workqueue.ACQUIRE and len(failed) < 3:
            failed.append(params[1])
            # ... but the client only learns that its outcome is unknown (protocol error 0x1700, as the node sends)
            raise ErrorMessage(0x1700, "CAS operation result is unknown - proposal accepted by 1 but not a quorum.",
                               None)
        return result

    monkeypatch.setattr(db, "execute", flaky)
    try:
        got = drain(db, queue, "w1")
        assert [item.key for item in got] == ["k1"]
        assert len(failed) == 3
        owners = {r.shard: r.owner for r in real(workqueue.SELECT_OWNERS, (queue, list(range(workqueue.SHARDS))))}
        held = workqueue._consumer(db, queue, "w1").shards
        assert set(failed) <= set(held)  # those transactions did apply: the serial read found them ours
        assert {s for s, o in owners.items() if o == "w1"} == set(held)
    finally:
        workqueue.stop(db, queue, "w1")
