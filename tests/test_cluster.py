"""Fault tolerance on a real 3-node cluster (127.0.0.1-3:9142): QUORUM survives the loss of one replica."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from cassandra import ConsistencyLevel
from cassandra.concurrent import execute_concurrent_with_args

from api.config import Settings
from api.db import Database
from api.migrations import migrate
from api.node.process import stop_node

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(cluster_up):
    """The run's shared 3-node cluster (tests/conftest.py), every node up; this test stops one of them."""
    return cluster_up


def test_quorum_reads_every_row_with_one_node_down(cluster):
    settings = dataclasses.replace(
        Settings.from_env(), contact_points=[s.address for s in cluster], cassandra_port=cluster[0].native_port,
        keyspace="cluster_test", replication="NetworkTopologyStrategy:datacenter1:3", request_timeout=30.0,
        write_consistency=ConsistencyLevel.QUORUM, read_consistency=ConsistencyLevel.QUORUM,
    )
    admin = Database(settings, keyspace="")
    try:
        # The project's own migrations, with cluster replication: the whole schema reaches agreement on 3 nodes.
        migrate(admin, settings.keyspace, settings.replication_map(), log=lambda _m: None)
        session = admin.session
        assert len([h for h in admin.cluster.metadata.all_hosts() if h.is_up]) == 3
        replication = session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                                      (settings.keyspace,)).one().replication
        assert replication["datacenter1"] == "3"

        session.execute("CREATE TABLE IF NOT EXISTS cluster_test.fault_rows (k uuid PRIMARY KEY, v int) "
                        "WITH comment = 'Q: fault test rows'", timeout=60)
        insert = session.prepare("INSERT INTO cluster_test.fault_rows (k, v) VALUES (?, ?)")
        insert.consistency_level = ConsistencyLevel.QUORUM
        rows = {uuid.uuid4(): i for i in range(500)}
        results = execute_concurrent_with_args(session, insert, list(rows.items()), concurrency=50)
        assert all(ok for ok, _ in results)

        stop_node(cluster[2])
        select = session.prepare("SELECT v FROM cluster_test.fault_rows WHERE k = ?")
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

        strict = session.prepare("SELECT v FROM cluster_test.fault_rows WHERE k = ?")
        strict.consistency_level = ConsistencyLevel.ALL
        with pytest.raises((Unavailable, NoHostAvailable)):
            session.execute(strict, (next(iter(rows)),))
    finally:
        admin.close()
