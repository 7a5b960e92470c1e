"""bench/io_floor.py against the real local node: the like's I/O shape, sent by the driver alone."""

from __future__ import annotations

import threading

import pytest

from api.migrations import CQL_DIR
from api.node.config import NodeSpec
from bench.io_floor import COUNTS, ROWS, LikeIoFloor
from bench.scale_common import scratch_keyspace


@pytest.fixture(scope="module")
def scratch(cassandra_node: NodeSpec, tmp_path_factory):
    """A keyspace of its own, with none of cql/'s tables: the floor makes and drops its own probe tables."""
    migrations = tmp_path_factory.mktemp("cql")
    (migrations / "0001_keyspace.cql").write_text((CQL_DIR / "0001_keyspace.cql").read_text())
    with scratch_keyspace("floortest", node=cassandra_node, request_timeout=30.0, directory=migrations) as db:
        yield db


def _tables(db) -> set[str]:
    rows = db.execute_raw("SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", [db.keyspace])
    return {r.table_name for r in rows}


def test_calls_alternate_a_claimed_like_and_its_undo_and_leave_no_tables(scratch):
    ks = scratch.keyspace
    with LikeIoFloor(scratch) as call:
        assert {ROWS, COUNTS} <= _tables(scratch)

        def claimed(key: int) -> bool:
            return scratch.execute_raw(f"SELECT v FROM {ks}.{ROWS} WHERE k = %s AND c = 0", [key]).one() is not None

        def count() -> int:
            row = scratch.execute_raw(f"SELECT n FROM {ks}.{COUNTS} WHERE k = 0").one()
            return row.n if row is not None else 0

        call()  # a like of key 1: its claim, the counter, both batches
        assert claimed(1) and count() == 1
        batch_rows = scratch.execute_raw(f"SELECT k, c FROM {ks}.{ROWS} WHERE k IN (-100, -101, -102, -103, -104, "
                                         "-105, -106) AND c IN (1, 2)")
        assert sorted((r.k, r.c) for r in batch_rows) == sorted((-100 - i, c) for i in range(6) for c in (1, 2))
        call()  # its undo
        assert not claimed(1) and count() == 0
        call()  # the next like is of a new key
        assert claimed(2) and not claimed(1) and count() == 1

        # Threads toggle keys of their own: four calls each end with every like undone.
        threads = [threading.Thread(target=lambda: [call() for _ in range(4)]) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert count() == 1  # the main thread's pending like of key 2
        assert [k for k in range(3, 9) if claimed(k)] == []  # two likes a thread, each undone
    assert not {ROWS, COUNTS} & _tables(scratch)
