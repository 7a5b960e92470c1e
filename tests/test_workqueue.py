"""The generic work queue (api/workqueue.py) against the real node: order, retries that do not block the head,
fairness across groups, one owner per shard, crash safety, and reads that never meet a tombstone.

Time is a manual clock (tests/clocks.py) on the queue's Database, with the production timing constants: a test
advances it past a due time, a settle delay or a lease instead of sleeping. The node's own clock still counts
down the TTLs of leases and heartbeats (see api/workqueue.py, "Time"): the lease TTL is 60 real seconds, longer
than any test, and a test that needs one to run out checks it and removes the row as the node would."""

from __future__ import annotations

import re
import threading
import time
import uuid

import pytest

from api import workqueue
from api.workqueue import WorkItem
from tests.clocks import ManualClock


@pytest.fixture
def queue() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


def settle(clock: ManualClock) -> None:
    """Let what was enqueued so far age past SETTLE_US (and the checkpoint pacing): a checkpoint may then move
    over it once it is finished."""
    clock.advance(workqueue.SETTLE_US / 1e6 + workqueue.CHECKPOINT_EVERY_SECONDS)


def drain(db, queue: str, owner: str, *, limit: int = 50, seconds: float = 10.0) -> list[WorkItem]:
    """Take and finish everything due, until a take comes back empty twice (`seconds`: a real-time safety net;
    the queue's clock does not move here)."""
    got: list[WorkItem] = []
    empty, deadline = 0, time.monotonic() + seconds
    while empty < 2 and time.monotonic() < deadline:
        batch = workqueue.take(db, queue, owner, limit)
        empty = 0 if batch else empty + 1
        for item in batch:
            workqueue.done(db, item, owner)
        got.extend(batch)
    return got


def test_items_come_back_once_with_their_payload(mdb, clock, queue):
    db = mdb
    for i in range(30):
        workqueue.enqueue(db, queue, "G1", f"k{i}", {"n": i, "text": "é"})
    settle(clock)
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


def test_a_retry_not_yet_due_does_not_block_the_items_behind_it(mdb, clock, queue):
    db = mdb
    workqueue.enqueue(db, queue, "G1", "first", {"n": 1})
    try:
        [first] = workqueue.take(db, queue, "w1", 10)
        workqueue.retry(db, first, "w1", due_at_us=workqueue.now_us(clock) + 2_000_000, error="HTTP 500")
        for i in range(5):
            workqueue.enqueue(db, queue, "G1", f"later{i}", {"n": i})
        later = drain(db, queue, "w1")
        assert sorted(item.key for item in later) == [f"later{i}" for i in range(5)]  # first is not due yet
        clock.advance(2.0 - 0.001)
        assert drain(db, queue, "w1") == []  # a millisecond before its due time: still not
        clock.advance(0.002)
        [again] = drain(db, queue, "w1")
        assert (again.key, again.attempts, again.last_error, again.payload) == ("first", 1, "HTTP 500", {"n": 1})
    finally:
        workqueue.stop(db, queue, "w1")


def test_a_big_backlog_does_not_starve_a_new_group(mdb, clock, queue):
    db = mdb
    db.execute_many(w for i in range(2000)
                    for w in workqueue.enqueue_writes(queue, "BIG", f"b{i}", {"i": i}, clock=clock))
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


def test_two_workers_never_process_one_item_at_once(mdb, clock, queue):
    """Real threads, one shared manual clock: the queue's time moves as the workers pause between takes (faster
    than real time, so heartbeats and rebalancing happen within the run). Processing of an item spans from its
    take to its `done`, measured on the real clock (what could overlap is real concurrency)."""
    db = mdb
    keys = [f"k{i}" for i in range(600)]
    db.execute_many(w for i, k in enumerate(keys)
                    for w in workqueue.enqueue_writes(queue, f"G{i % 3}", k, {}, clock=clock))
    log: list[tuple[str, str, float, float]] = []
    lock = threading.Lock()

    def work(owner: str) -> None:
        deadline = time.monotonic() + 40  # a real-time safety net
        try:
            while time.monotonic() < deadline:
                with lock:
                    if {k for k, *_ in log} >= set(keys):
                        return
                batch = workqueue.take(db, queue, owner, 20)
                start = time.perf_counter()  # every item of the batch is in this worker's hands from here
                for item in batch:
                    workqueue.done(db, item, owner)
                    with lock:
                        log.append((item.key, owner, start, time.perf_counter()))
                clock.sleep(0.05)
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


def test_a_killed_worker_loses_nothing(mdb, clock, queue):
    db = mdb
    for i in range(10):
        workqueue.enqueue(db, queue, "G1", f"k{i}", {})
    settle(clock)
    batch = workqueue.take(db, queue, "doomed", 10)
    assert len(batch) == 10
    finished = {item.key for item in sorted(batch, key=lambda x: x.pos)[:4]}
    for item in batch:
        if item.key in finished:
            clock.advance(workqueue.CHECKPOINT_EVERY_SECONDS)  # a second of work: its checkpoint is written
            workqueue.done(db, item, "doomed")
    # Killed: no stop(), its leases stay until they expire; its in-memory state is gone.
    db.release(("workqueue.consumer", queue, "doomed"))
    assert workqueue.take(db, queue, "heir", 10) == []  # the shards are still leased
    # The leases and the heartbeat are rows with TTLs that the node counts down on its own clock (immune to
    # the workers' clock skew): they name the dead worker and run out within LEASE_SECONDS / WORKER_TTL_SECONDS.
    shards = ", ".join(map(str, range(workqueue.SHARDS)))
    leases = db.execute_raw(f"SELECT shard, owner, TTL(owner) AS ttl FROM {db.keyspace}.work_shards "
                            f"WHERE queue = %s AND shard IN ({shards})", (queue,)).all()
    assert {r.shard for r in leases} == set(range(workqueue.SHARDS)) and {r.owner for r in leases} == {"doomed"}
    assert all(0 < r.ttl <= workqueue.LEASE_SECONDS for r in leases)
    [beat] = db.execute_raw(f"SELECT TTL(seen_us) AS ttl FROM {db.keyspace}.work_workers "
                            f"WHERE queue = %s AND owner = 'doomed'", (queue,)).all()
    assert 0 < beat.ttl <= workqueue.WORKER_TTL_SECONDS
    clock.advance(workqueue.LEASE_SECONDS - 1)
    assert workqueue.take(db, queue, "heir", 10) == []  # before the leases ran out: still nothing
    # They run out now: the node drops the rows, as it would at their TTL.
    for r in leases:
        db.execute(workqueue.RELEASE, (queue, r.shard, "doomed"))
    db.execute(workqueue.REMOVE_WORKER, (queue, "doomed"))
    clock.advance(1 + workqueue.HEARTBEAT_SECONDS)  # past the lease; the heir's next heartbeat finds it alone
    try:
        rest = drain(db, queue, "heir")
        # Checkpoints were written as items finished: exactly the unfinished ones come back.
        assert {item.key for item in rest} == {f"k{i}" for i in range(10)} - finished
    finally:
        workqueue.stop(db, queue, "heir")


def test_items_put_back_come_again_to_the_same_owner_and_to_the_next_one(mdb, clock, queue):
    """A worker stopping mid-batch puts back what it did not begin: its own next takes hand those out again, the
    checkpoint never passes them (whatever finishes around them), and once it stops, the next holder of the
    shard gets exactly them."""
    db = mdb
    # Keys of one shard: the checkpoint there is what the items finished around the ones put back could move.
    keys = [k for k in (f"k{i}" for i in range(1000)) if workqueue.shard_of(k) == workqueue.shard_of("k0")][:6]
    for key in keys:
        workqueue.enqueue(db, queue, "G1", key, {})
    settle(clock)

    def take(n: int) -> list[WorkItem]:
        """n items (a take hands out a share per shard: one of this shard's at a time)."""
        got: list[WorkItem] = []
        for _ in range(50):
            got += workqueue.take(db, queue, "w1", n - len(got))
            if len(got) >= n:
                break
        return sorted(got, key=lambda x: x.pos)

    try:
        batch = take(6)
        assert sorted(item.key for item in batch) == sorted(keys)
        for item in batch[:2]:
            workqueue.done(db, item, "w1")
        workqueue.put_back(db, batch[2:4], "w1")
        assert [item.key for item in take(2)] == [item.key for item in batch[2:4]]
        workqueue.put_back(db, batch[2:4], "w1")
        workqueue.put_back(db, batch[:1], "w1")  # finished already: not handed out again
        # The items after them finish: the checkpoint must still not pass the ones put back.
        settle(clock)
        for item in batch[4:]:
            workqueue.done(db, item, "w1")
    finally:
        workqueue.stop(db, queue, "w1")
    clock.advance(workqueue.CHECKPOINT_EVERY_SECONDS)
    try:
        rest = {item.key for item in drain(db, queue, "w2")}
        # Those put back, and (delivery is at least once) the finished ones the checkpoint stayed before.
        assert {item.key for item in batch[2:4]} <= rest <= {item.key for item in batch[2:]}
    finally:
        workqueue.stop(db, queue, "w2")


def test_a_checkpoint_stays_settle_us_behind_the_clock(mdb, clock, queue):
    """An item finished less than SETTLE_US after its due time stays ahead of the checkpoint (an enqueue still in
    flight could land there): the next owner sees it again. Finished just after, the checkpoint passes it."""
    db = mdb
    workqueue.enqueue(db, queue, "G1", "k1", {})
    settle_s = workqueue.SETTLE_US / 1e6
    try:
        clock.advance(settle_s - 0.001)
        [item] = workqueue.take(db, queue, "w1", 10)
        workqueue.done(db, item, "w1")
    finally:
        workqueue.stop(db, queue, "w1")  # writes its checkpoints
    try:
        [again] = workqueue.take(db, queue, "w2", 10)  # at least once: the checkpoint could not pass it
        assert again.key == "k1"
        clock.advance(0.002)
        workqueue.done(db, again, "w2")
    finally:
        workqueue.stop(db, queue, "w2")
    try:
        assert drain(db, queue, "w3") == []
        assert workqueue.backlog(db, queue)["total"] == 0
    finally:
        workqueue.stop(db, queue, "w3")


def test_a_lease_is_renewed_at_half_and_used_until_a_quarter_is_left(mdb, clock, queue):
    db = mdb
    lease = workqueue.LEASE_SECONDS
    workqueue.enqueue(db, queue, "G1", "k1", {})
    try:
        assert len(workqueue.take(db, queue, "w1", 10)) == 1  # acquires the shards
        consumer = workqueue._consumer(db, queue, "w1")
        shard = workqueue.shard_of("k1")
        until = consumer.shards[shard].lease_until
        assert until == clock.monotonic() + lease
        clock.advance(lease / 2 - 0.001)
        workqueue.take(db, queue, "w1", 10)
        assert consumer.shards[shard].lease_until == until  # more than half left: not renewed yet
        clock.advance(0.002)
        workqueue.take(db, queue, "w1", 10)
        renewed = consumer.shards[shard].lease_until
        assert renewed == clock.monotonic() + lease  # renewed (the node's TTL restarted with it)
        # Without a renewal (a batch that runs long), its items stop being handed out a quarter before the end.
        clock.advance(renewed - lease / 4 - clock.monotonic() - 0.001)
        assert consumer.owns(shard)
        clock.advance(0.002)
        assert not consumer.owns(shard)
    finally:
        workqueue.stop(db, queue, "w1")


def test_reads_never_meet_a_tombstone(mdb, clock, queue):
    """Structure: no statement deletes items, buckets, groups or checkpoints. Behaviour: after 300 items were
    taken and finished, the reader's next read of their partition, traced by the node, scans no tombstone."""
    for statement in vars(workqueue).values():
        if isinstance(statement, workqueue.Statement) and statement.table in {
                "work_items", "work_buckets", "work_groups", "work_checkpoints"}:
            assert not statement.cql.upper().startswith("DELETE"), statement
            assert " = NULL" not in statement.cql.upper()
    db = mdb
    db.execute_many(w for i in range(300) for w in workqueue.enqueue_writes(queue, "G1", f"k{i}", {}, clock=clock))
    settle(clock)
    try:
        assert len(drain(db, queue, "w1", limit=100)) == 300
        consumer = workqueue._consumer(db, queue, "w1")
        traced = 0
        for shard, state in consumer.shards.items():
            pair = state.pairs.get("G1")
            if pair is None or pair.cp == workqueue.START:
                continue
            for start, live in ((pair.cp, 0), (workqueue.START, None)):
                bound = db.prepared(workqueue.SELECT_ITEMS).bind(
                    (queue, "G1", shard, pair.cp[0] // workqueue.BUCKET_US, *start, workqueue.now_us(clock), 1000))
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


def test_a_lease_transaction_with_an_unknown_outcome_is_settled_by_a_serial_read(mdb, queue, monkeypatch):
    """On a loaded cluster a lease transaction can end "CAS operation result is unknown" (seen on the 3-node
    run). The worker must not crash: it reads the lease serially and keeps the shards that name it, and only
    those (a second worker then takes the rest, so no shard is held twice)."""
    from cassandra.protocol import ErrorMessage

    db = mdb
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
