"""The scale suite's harness (bench/scale_common.py) against the real local node: scratch keyspaces, partition
figures from nodetool and sstablepartitions, tombstone warnings from the node's log, latency measurement and
result files."""

from __future__ import annotations

import json
import multiprocessing
import re
import time
import zipfile
from pathlib import Path

import pytest
from cassandra.concurrent import execute_concurrent_with_args

from api.db import Database, get_db, set_db
from api.migrations import CQL_DIR
from api.node.config import NodeSpec
from bench.scale_common import (
    drop_scratch_keyspace,
    largest_partitions,
    log_offset,
    measure,
    node_cpu_seconds,
    scratch_keyspace,
    scratch_settings,
    tombstone_warnings,
    write_result,
)

ROWS = 5_000
VALUE = 100  # characters in each of the two text columns of a wide row


@pytest.fixture(scope="module")
def some_migrations(tmp_path_factory) -> Path:
    """The keyspace's migration and the follower network's tables: a schema of a few tables to create (the
    whole of cql/ takes half a minute of the node's schema work; the session's keyspace has it all)."""
    directory = tmp_path_factory.mktemp("cql")
    for name in ("0001_keyspace.cql", "0020_network.cql"):
        (directory / name).write_text((CQL_DIR / name).read_text())
    return directory


@pytest.fixture(scope="module")
def scratch(cassandra_node: NodeSpec, some_migrations: Path):
    with scratch_keyspace("harnesstest", node=cassandra_node, request_timeout=30.0,
                          directory=some_migrations) as db:
        yield db


def _table(db: Database, name: str, columns: str, *, autocompaction: bool = True) -> None:
    compaction = "" if autocompaction else (
        " AND compaction = {'class': 'SizeTieredCompactionStrategy', 'enabled': 'false'}")
    db.execute_raw(f"CREATE TABLE IF NOT EXISTS {db.keyspace}.{name} ({columns}) "
                   f"WITH comment = 'Q: harness test rows'{compaction}", timeout=60)


def _write_partition(db: Database, table: str, key: int, rows: int, values: bool = True) -> None:
    if values:
        insert = db.session.prepare(f"INSERT INTO {db.keyspace}.{table} (k, c, a, b) VALUES (?, ?, ?, ?)")
        params = [(key, c, "a" * VALUE, "b" * VALUE) for c in range(rows)]
    else:
        insert = db.session.prepare(f"INSERT INTO {db.keyspace}.{table} (k, c) VALUES (?, ?)")
        params = [(key, c) for c in range(rows)]
    assert all(ok for ok, _ in execute_concurrent_with_args(db.session, insert, params, concurrency=64))


def _delete_rows(db: Database, table: str, key: int, rows: range) -> None:
    delete = db.session.prepare(f"DELETE FROM {db.keyspace}.{table} WHERE k = ? AND c = ?")
    assert all(ok for ok, _ in execute_concurrent_with_args(db.session, delete, [(key, c) for c in rows],
                                                            concurrency=64))


# ------------------------------------------------------------------------------------------------ keyspaces


def test_scratch_keyspace_is_migrated_then_dropped(cassandra_node, some_migrations):
    with scratch_keyspace("harnessks", node=cassandra_node, directory=some_migrations) as db:
        keyspace = db.keyspace
        assert re.fullmatch(r"harnessks_\d{8}t\d{6}_[0-9a-f]{6}", keyspace)
        applied = {row.name for row in db.execute_raw(
            f"SELECT name, status FROM {keyspace}.schema_migrations") if row.status == "applied"}
        assert applied == {p.name for p in some_migrations.glob("*.cql")} == {"0001_keyspace.cql",
                                                                                "0020_network.cql"}
        assert "posts_by_id" in db.cluster.metadata.keyspaces[keyspace].tables
    admin = Database(scratch_settings(keyspace, node=cassandra_node), keyspace="")
    try:
        admin.cluster.refresh_schema_metadata()
        assert keyspace not in admin.cluster.metadata.keyspaces
    finally:
        admin.close()


def test_only_scratch_keyspaces_are_dropped(cassandra_node):
    with pytest.raises(ValueError, match="not a scratch keyspace"):
        drop_scratch_keyspace(Database(scratch_settings("chronicle", node=cassandra_node)))


# ------------------------------------------------------------------------------------------------ partitions


def test_largest_partitions_reports_rows_bytes_and_cells(scratch, cassandra_node):
    _table(scratch, "wide", "k int, c int, a text, b text, PRIMARY KEY (k, c)")
    _table(scratch, "keys_only", "k int, c int, PRIMARY KEY (k, c)")
    _table(scratch, "empty", "k int PRIMARY KEY, v int")
    _write_partition(scratch, "wide", 1, ROWS)
    _write_partition(scratch, "keys_only", 1, ROWS, values=False)
    for key in range(2, 52):  # 50 one-row partitions beside the big one
        _write_partition(scratch, "wide", key, 1)

    # min_rows=2 (the one-row partitions stay out of the listing): the node may flush a memtable on its own
    # mid-write (memory pressure from the other process's tests), and the big partition then lies in two SSTables,
    # one piece under the default threshold of 1,000 rows (seen: 4,528 + 472).
    found = largest_partitions(cassandra_node, scratch.keyspace, ["wide", "keys_only", "empty"], min_rows=2)

    wide = found["wide"]
    assert wide["max_rows"] == ROWS
    assert wide["largest"][0]["key"] == "1" and wide["largest"][0]["rows"] == ROWS
    assert wide["max_tombstones"] == 0
    assert len(wide["largest"]) == 1  # the one-row partitions are under the listing threshold
    # Two text cells a row; nodetool's figures are histogram bucket bounds (at most ~20% above the truth).
    assert 2 * ROWS <= wide["max_cells"] <= 2 * ROWS * 1.2
    payload = ROWS * 2 * VALUE
    assert payload <= wide["largest"][0]["bytes"] <= payload * 1.3
    assert wide["largest"][0]["bytes"] <= wide["max_partition_bytes"] <= payload * 1.3 * 1.2
    assert 45 <= wide["partitions"] <= 60 and wide["sstables"] >= 1
    # A table whose columns are all key columns: rows but no cells, so cell counts are not row counts.
    keys_only = found["keys_only"]
    assert keys_only["max_rows"] == ROWS
    assert keys_only["max_cells"] <= 1
    assert found["empty"] == {"max_partition_bytes": 0, "max_cells": 0, "partitions": 0, "sstables": 0,
                              "max_rows": 0, "max_tombstones": 0, "largest": []}


def test_tombstones_are_found_in_partitions_and_in_the_node_log(scratch, cassandra_node):
    # No background compaction: the node flushes memtables on its own whenever another test drops a table (every
    # table dirty in the commit log, reason COMMITLOG_DIRTY), and four SSTables make a size-tiered compaction that
    # merged the rows with their deletions before the split was read (seen in CI). A major compaction still runs.
    _table(scratch, "graveyard", "k int, c int, a text, b text, PRIMARY KEY (k, c)", autocompaction=False)
    _write_partition(scratch, "graveyard", 7, ROWS)
    largest_partitions(cassandra_node, scratch.keyspace, ["graveyard"], scan=False)  # flush: the rows on disk
    for _ in range(2):  # two more small SSTables: with the deletions' that makes the four that would compact
        _write_partition(scratch, "graveyard", 8, 10)
        largest_partitions(cassandra_node, scratch.keyspace, ["graveyard"], scan=False)
    offset = log_offset(cassandra_node)
    _delete_rows(scratch, "graveyard", 7, range(2_000))
    select = f"SELECT c FROM {scratch.keyspace}.graveyard WHERE k = %s"
    graveyard = f"{scratch.keyspace}.graveyard"  # the node's log is shared with the other worker's tests

    def ours(warnings: list[str]) -> list[str]:
        return [w for w in warnings if graveyard in w]

    assert len(list(scratch.execute_raw(select, (8,)))) == 10  # no tombstones here: no warning
    assert ours(tombstone_warnings(cassandra_node, offset)) == []

    assert len(list(scratch.execute_raw(select, (7,)))) == ROWS - 2_000
    deadline = time.monotonic() + 10
    while not (warned := ours(tombstone_warnings(cassandra_node, offset))) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(warned) == 1, warned
    assert warned[0].startswith("WARN") and "2000 tombstone" in warned[0] and f"{ROWS - 2_000} live rows" in warned[0]
    assert ours(tombstone_warnings(cassandra_node, log_offset(cassandra_node))) == []

    # On disk: the rows (first SSTables) and their deletions (later ones) summed for the partition; min_rows=2 as
    # the node's own flushes may cut either into pieces under the default listing threshold ...
    split = largest_partitions(cassandra_node, scratch.keyspace, ["graveyard"], min_rows=2)["graveyard"]
    assert split["largest"][0] | {"bytes": 0, "sstables": 0} == {"key": "7", "rows": ROWS + 2_000, "cells": 2 * ROWS,
                                                                 "tombstones": 2_000, "bytes": 0, "sstables": 0}
    assert split["largest"][0]["sstables"] >= 2
    # ... and exact once a compaction has merged them (deleted rows stay as tombstones until gc_grace).
    merged = largest_partitions(cassandra_node, scratch.keyspace, ["graveyard"], compact=True)["graveyard"]
    assert merged["sstables"] == 1
    assert merged["largest"][0] | {"bytes": 0} == {"key": "7", "rows": ROWS, "cells": 2 * (ROWS - 2_000),
                                                   "tombstones": 2_000, "bytes": 0, "sstables": 1}
    assert merged["max_rows"] == ROWS and merged["max_tombstones"] == 2_000


def test_tombstone_warnings_follow_the_log_across_a_roll_over(tmp_path):
    node = NodeSpec(name="n", address="127.0.0.1", native_port=1, storage_port=2, jmx_port=3, home=tmp_path,
                    cluster_name="c", seeds=("127.0.0.1",), initial_token=0)
    logs = tmp_path / "logs"
    logs.mkdir()
    before = "INFO  [main] 2026-01-01 00:00:00,000 X.java:1 - Read 1 live rows and 5000 tombstone cells (old)\n"
    node.log_file.write_text(before)
    offset = log_offset(node)
    assert offset == len(before)
    warn = ("WARN  [ReadStage-1] 2026-01-01 00:00:01,000 ReadCommand.java:644 - Read 3 live rows and 1500 "
            "tombstone cells for query SELECT * FROM ks.t WHERE k = 1 (see tombstone_warn_threshold)\n")
    error = ("ERROR [ReadStage-2] 2026-01-01 00:00:02,000 ReadCommand.java:700 - Scanned over 100001 tombstones "
             "during query SELECT * FROM ks.t WHERE k = 2; query aborted\n"
             "org.apache.cassandra.db.filter.TombstoneOverwhelmingException: null\n\tat a.b.C(C.java:1)\n")
    other = "WARN  [main] 2026-01-01 00:00:03,000 X.java:1 - Some unrelated warning\n"
    # The file rolls over after the offset, as logback does it: the full file (with `warn`) is renamed, a new
    # one started, the renamed one compressed into an archive and removed.
    with node.log_file.open("a") as log:
        log.write(warn)
    node.log_file.rename(logs / "system.log.tmp")
    node.log_file.write_text(error + other + "WARN  [x] partial line about a tombstone")
    with zipfile.ZipFile(logs / "system.log.2026-01-01.0.zip", "w") as archive:
        archive.write(logs / "system.log.tmp", "system.log.2026-01-01.0")
    (logs / "system.log.tmp").unlink()
    assert log_offset(node) > offset  # the new file is already longer than the old position
    assert tombstone_warnings(node, offset) == [warn.strip(), error.splitlines()[0]]
    # A plain int offset (no inode) still works while the file has not rolled over.
    assert tombstone_warnings(node, 0) == [error.splitlines()[0]]


# ------------------------------------------------------------------------------------------------ measure


def _unstalled(mode: str, concurrency: int) -> dict:
    """`measure` of 5 ms sleeps, again when the process stalled meanwhile (a sleep seen taking over 100 ms: the
    cluster tests' start-up shares this process's interpreter), at most three times."""
    for _ in range(3):
        found = measure(lambda: time.sleep(0.005), seconds=1.0, concurrency=concurrency, mode=mode, warmup=0.1)
        if found["max_ms"] <= 100:
            return found
    raise AssertionError(f"every measurement stalled: {found}")


def test_measure_times_every_call_in_threads_and_processes():
    for mode in ("threads", "processes"):
        one, four = _unstalled(mode, 1), _unstalled(mode, 4)
        assert 5.0 <= one["p50_ms"] <= 30.0 and one["p99_ms"] >= one["p50_ms"], one
        assert 30 <= one["requests"] <= 200 and one["errors"] == 0, one
        assert abs(one["rate"] - one["requests"]) <= 0.1 * one["requests"], one  # a one-second window
        # Four sleepers overlap: about four times the calls of one.
        assert four["requests"] >= 2.5 * one["requests"], (one, four)
        assert (four["concurrency"], four["mode"]) == (4, mode)


def test_measure_reports_the_cpu_each_call_costs():
    """A call that sleeps costs almost no CPU; one that spins for 4 ms of CPU costs about 4 ms, in a thread or in
    each of two processes."""

    def spin() -> None:
        until = time.process_time() + 0.004
        while time.process_time() < until:
            pass

    asleep = measure(lambda: time.sleep(0.004), seconds=0.5, concurrency=1, warmup=0)
    assert asleep["cpu_ms_per_call"] < 1.0, asleep
    for mode, concurrency in (("threads", 1), ("processes", 2)):
        busy = measure(spin, seconds=0.5, concurrency=concurrency, mode=mode, warmup=0)
        assert 3.5 <= busy["cpu_ms_per_call"] <= 6.0, busy


def test_measure_reports_the_node_cpu_of_its_window_per_call():
    """The node's CPU is read at both ends of the timed window (warm-up calls excluded) and divided by the calls
    timed. A stand-in reader that every call moves by 2 ms shows the arithmetic, in a thread and across two
    processes sharing it (as they share the node)."""
    moved = multiprocessing.get_context("fork").Value("d", 0.0)

    def call() -> None:
        with moved.get_lock():
            moved.value += 0.002

    alone = measure(call, seconds=0.3, concurrency=1, warmup=0.2, node_cpu=lambda: moved.value)
    assert alone["node_cpu_ms_per_call"] == pytest.approx(2.0, abs=0.001), alone
    shared = measure(call, seconds=0.5, concurrency=2, mode="processes", warmup=0.2, node_cpu=lambda: moved.value)
    assert shared["node_cpu_ms_per_call"] == pytest.approx(2.0, rel=0.1), shared
    assert "node_cpu_ms_per_call" not in measure(call, seconds=0.1, concurrency=1, warmup=0)


def test_node_cpu_seconds_reads_the_running_node(scratch, cassandra_node: NodeSpec):
    read = node_cpu_seconds(cassandra_node)
    before = read()
    statement = scratch.session.prepare("SELECT release_version FROM system.local")
    for _ in range(2_000):
        scratch.session.execute(statement)
    assert read() > before


def test_measure_counts_failures():
    calls = []

    def flaky() -> None:
        calls.append(1)
        if len(calls) % 2:
            raise RuntimeError("odd call")

    result = measure(flaky, seconds=0.3, concurrency=1, warmup=0)
    assert result["requests"] == len(calls)
    assert result["errors"] == (len(calls) + 1) // 2
    assert result["first_error"] == "RuntimeError: odd call"


def test_measured_processes_reach_the_installed_database(scratch):
    """A forked worker gets a Database of its own with the installed one's keyspace (the parent's connections
    do not survive a fork, and a database rebuilt from the environment would be another keyspace)."""
    previous = get_db()
    set_db(scratch)
    try:
        def read() -> None:
            db = get_db()
            if db.keyspace != scratch.keyspace:
                raise AssertionError(f"wrong keyspace {db.keyspace}")
            db.execute_raw(f"SELECT version FROM {scratch.keyspace}.schema_migrations LIMIT 1")

        result = measure(read, seconds=1.0, concurrency=2, mode="processes", warmup=0.5)
    finally:
        set_db(previous)
    assert result["errors"] == 0, result["first_error"]
    assert result["requests"] >= 10


# ------------------------------------------------------------------------------------------------ results


def test_write_result_names_the_file_by_utc_time_and_prints_it(tmp_path, capsys):
    from datetime import UTC, datetime

    obj = {"name": "unit", "when": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "figures": {"p99_ms": 1.5}}
    first = write_result("unit", obj, directory=tmp_path / "results")
    second = write_result("unit", obj, directory=tmp_path / "results")
    assert re.fullmatch(r"unit-\d{8}T\d{6}Z\.json", first.name)
    assert second != first and second.name.startswith("unit-")
    expected = {"name": "unit", "when": "2026-01-02T03:04:05+00:00", "figures": {"p99_ms": 1.5}}
    assert json.loads(first.read_text()) == expected
    printed = capsys.readouterr().out
    assert json.loads(printed[: len(printed) // 2]) == expected
    with pytest.raises(ValueError):
        write_result("../escape", obj, directory=tmp_path)
    assert sorted(Path(tmp_path / "results").iterdir()) == sorted([first, second])
