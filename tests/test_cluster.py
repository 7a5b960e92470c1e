"""Fault tolerance on a real 3-node cluster (127.0.0.1-3:9142): QUORUM survives the loss of one replica."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from cassandra import ConsistencyLevel
from cassandra.concurrent import execute_concurrent_with_args

from api.config import Settings
from api.db import Database
from api.node.process import stop_node

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(cluster_up):
    """The run's shared 3-node cluster (tests/conftest.py), every node up; this test stops one of them."""
    return cluster_up


def test_quorum_reads_every_row_with_one_node_down(cluster, rf3_keyspace):
    settings = dataclasses.replace(
        Settings.from_env(), contact_points=[s.address for s in cluster], cassandra_port=cluster[0].native_port,
        keyspace=rf3_keyspace, replication="NetworkTopologyStrategy:datacenter1:3", request_timeout=30.0,
        write_consistency=ConsistencyLevel.QUORUM, read_consistency=ConsistencyLevel.QUORUM,
    )
    admin = Database(settings, keyspace="")
    try:
        # The project's own migrations (the run's keyspace, tests/conftest.py), with cluster replication.
        session = admin.session
        assert len([h for h in admin.cluster.metadata.all_hosts() if h.is_up]) == 3
        replication = session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                                      (settings.keyspace,)).one().replication
        assert replication["datacenter1"] == "3"

        session.execute(f"CREATE TABLE IF NOT EXISTS {settings.keyspace}.fault_rows (k uuid PRIMARY KEY, v int) "
                        "WITH comment = 'Q: fault test rows'", timeout=60)
        insert = session.prepare(f"INSERT INTO {settings.keyspace}.fault_rows (k, v) VALUES (?, ?)")
        insert.consistency_level = ConsistencyLevel.QUORUM
        rows = {uuid.uuid4(): i for i in range(500)}
        results = execute_concurrent_with_args(session, insert, list(rows.items()), concurrency=50)
        assert all(ok for ok, _ in results)

        stop_node(cluster[2])
        select = session.prepare(f"SELECT v FROM {settings.keyspace}.fault_rows WHERE k = ?")
        select.consistency_level = ConsistencyLevel.QUORUM
        results = execute_concurrent_with_args(session, select, [(k,) for k in rows], concurrency=50,
                                               raise_on_first_error=False)
        read_back = {}
        for key, (ok, result) in zip(rows, results, strict=True):
            assert ok, f"QUORUM read failed with one node down: {result}"
            read_back[key] = result.one().v
        assert read_back == rows

        # ALL needs the stopped replica: the driver must say so rather than return partial data.
        from cassandra import Unavailable
        from cassandra.cluster import NoHostAvailable

        strict = session.prepare(f"SELECT v FROM {settings.keyspace}.fault_rows WHERE k = ?")
        strict.consistency_level = ConsistencyLevel.ALL
        with pytest.raises((Unavailable, NoHostAvailable)):
            session.execute(strict, (next(iter(rows)),))
    finally:
        admin.close()


def test_a_frozen_node_costs_the_speculative_delay_not_the_timeout_and_readiness_holds(cluster, rf3_keyspace, db):
    """A node paused like a long GC pause (SIGSTOP) keeps its connections open, so the driver thinks it up for
    seconds. Reads and writes at the default levels go around it after the speculative delay, and /readyz stays
    ready (too few replicas for the levels is a 503 with the reason: tests/test_service.py)."""
    import os
    import signal
    import time

    from api.app import create_app
    from api.db import Statement, set_db
    from api.node.process import read_pid

    node_settings = dataclasses.replace(
        Settings.from_env(), contact_points=[s.address for s in cluster], cassandra_port=cluster[0].native_port,
        keyspace=rf3_keyspace, replication="NetworkTopologyStrategy:datacenter1:3", request_timeout=2.0)
    admin = Database(dataclasses.replace(node_settings, request_timeout=60.0), keyspace="")
    admin.execute_raw(f"CREATE TABLE IF NOT EXISTS {rf3_keyspace}.fault_rows (k uuid PRIMARY KEY, v int) "
                      "WITH comment = 'Q: fault test rows'", timeout=60)
    admin.close()
    node_db = Database(node_settings)
    app = create_app(node_settings, database=node_db)
    client = app.test_client()
    insert = Statement("INSERT INTO fault_rows (k, v) VALUES (?, ?)")
    select = Statement("SELECT v FROM fault_rows WHERE k = ?")
    rows = {uuid.uuid4(): i for i in range(120)}
    frozen = read_pid(cluster[2])
    try:
        for key, value in rows.items():
            node_db.execute(insert, (key, value))
        assert client.get("/readyz").status_code == 200
        # A running server has prepared its statements (a new one waits on every node) and read its tables: each
        # coordinator's own speculative retry (the table's 99th percentile) starts at half the 5 s read timeout until
        # it has latencies, and updates them every 5 s, so a never-read table would wait on the frozen replica.
        for _ in range(3):
            for key in rows:
                node_db.execute(select, (key,))
        time.sleep(6)
        os.kill(frozen, signal.SIGSTOP)
        slowest = 0.0
        for key, value in rows.items():  # every node holds every row (RF 3): a third go to the frozen node first
            started = time.monotonic()
            assert node_db.execute(select, (key,)).one().v == value
            node_db.execute(insert, (key, value + 1))
            slowest = max(slowest, time.monotonic() - started)
        assert slowest < 1.0, f"a read and a write took {slowest:.2f} s with one node frozen (timeout 2 s)"
        for _ in range(10):
            started = time.monotonic()
            response = client.get("/readyz")
            assert response.status_code == 200, response.get_json()
            assert time.monotonic() - started < 1.0
    finally:
        os.kill(frozen, signal.SIGCONT)
        node_db.close()
        set_db(db)  # create_app installed node_db as the process's database


def test_a_connection_that_breaks_with_every_node_asked_is_retried_not_failed(cluster, rf3_keyspace):
    """Speculative attempts take every host of a request's plan (three nodes, two attempts). When one of those
    connections then breaks, the driver retries on the plan's next host: the second pass (api/db.py
    SecondPassPolicy) gives it one. Without it the request fails with NoHostAvailable at once, while the two other
    attempts are still out (CI saw this as a frozen node's heartbeat failed)."""
    import os
    import signal
    import time

    from api.db import Statement
    from api.node.process import read_pid

    settings = dataclasses.replace(
        Settings.from_env(), contact_points=[s.address for s in cluster], cassandra_port=cluster[0].native_port,
        keyspace=rf3_keyspace, replication="NetworkTopologyStrategy:datacenter1:3", request_timeout=30.0,
        speculative_delay=0.05, speculative_attempts=2)
    admin = Database(dataclasses.replace(settings, request_timeout=60.0), keyspace="")
    admin.execute_raw(f"CREATE TABLE IF NOT EXISTS {rf3_keyspace}.fault_rows (k uuid PRIMARY KEY, v int) "
                      "WITH comment = 'Q: fault test rows'", timeout=60)
    admin.close()
    node_db = Database(settings)
    insert = Statement("INSERT INTO fault_rows (k, v) VALUES (?, ?)")
    select = Statement("SELECT v FROM fault_rows WHERE k = ?")
    key = uuid.uuid4()
    node_db.execute(insert, (key, 7))
    assert node_db.execute(select, (key,)).one().v == 7  # prepared on every node before they freeze
    pids = [read_pid(spec) for spec in cluster]
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            future = node_db.execute_async(select, (key,))
            time.sleep(0.5)  # the first attempt and both speculative ones are out; no node answers
            assert len(future.attempted_hosts) == 3
            broken = next(h for h in node_db.cluster.metadata.all_hosts() if h.address == cluster[0].address)
            node_db.session.remove_pool(broken).result()  # its connection closes: that attempt errors, is retried
            time.sleep(0.5)  # the driver retries on its executor, while every node is still frozen
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        assert future.result().one().v == 7
    finally:
        node_db.close()
