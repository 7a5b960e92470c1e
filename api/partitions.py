"""Whole-partition scans and deletes for administration: dropping everything a network (or another leading key
value) holds, e.g. to redo an import. Never on a request path.

Cassandra cannot list the partitions of one network without reading every partition key of the table, so
`drop` does exactly that: `SELECT DISTINCT <partition key>` over the whole table (paged, bounded memory), keeps
the keys whose first column has the value, and deletes those partitions (one partition tombstone each, no row
tombstones). A re-run finds only what is left, so an interrupted drop is resumed by running it again.

The owner module of a table calls this with its own TABLES (see e.g. api/network/accounts.py: drop_network).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import SimpleStatement

from api.db import Database

SCAN_PAGE = 5000
Progress = Callable[[str, int], None]  # (table, partitions done)


def partition_key(db: Database, table: str) -> list[str]:
    meta = db.cluster.metadata.keyspaces[db.keyspace].tables.get(table)
    if meta is None:
        raise KeyError(f"table {db.keyspace}.{table} does not exist")
    return [column.name for column in meta.partition_key]


def partitions_with(db: Database, table: str, column: str, value: Any) -> Iterator[tuple]:
    """Every partition key of `table` whose first column `column` equals `value` (a full scan of the keys)."""
    keys = partition_key(db, table)
    if keys[0] != column:
        raise ValueError(f"{table}'s partition key {keys} does not start with {column}")
    scan = SimpleStatement(f"SELECT DISTINCT {', '.join(keys)} FROM {db.keyspace}.{table}", fetch_size=SCAN_PAGE)
    for row in db.session.execute(scan, timeout=120):
        if row[0] == value:
            yield tuple(row)


def drop(db: Database, tables: Iterable[str], column: str, value: Any, *, dry_run: bool = False,
         progress: Progress | None = None) -> dict[str, int]:
    """Delete every partition of `tables` whose first key column `column` is `value`; returns the partitions
    found per table (deleted unless `dry_run`). `progress(table, n)` is told as partitions are done."""
    found: dict[str, int] = {}
    for table in sorted(tables):
        keys = partition_key(db, table)
        delete = None if dry_run else db.session.prepare(
            f"DELETE FROM {db.keyspace}.{table} WHERE " + " AND ".join(f"{k} = ?" for k in keys))
        found[table] = 0
        batch: list[tuple] = []
        for key in partitions_with(db, table, column, value):
            batch.append(key)
            if len(batch) >= SCAN_PAGE:
                found[table] += _delete(db, delete, batch, table, progress)
                batch = []
        found[table] += _delete(db, delete, batch, table, progress)
    return found


def _delete(db: Database, delete: Any, keys: list[tuple], table: str,
            progress: Progress | None) -> int:
    if delete is not None and keys:
        for ok, result in execute_concurrent_with_args(db.session, delete, keys, concurrency=64):
            if not ok:
                raise result
    if progress and keys:
        progress(table, len(keys))
    return len(keys)
