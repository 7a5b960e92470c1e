"""Database.execute_many against the node: batched writes land whole, and no unlogged batch covers more
partitions than Cassandra's warning threshold."""

from __future__ import annotations

import secrets

from cassandra.cqltypes import LongType, UTF8Type
from cassandra.query import BatchStatement

from api.db import Database
from api.network.relations import FOLLOWER, LIST_RELATIONS, relation_write


def test_batches_cover_at_most_ten_partitions_and_every_row_lands(db: Database):
    network = f"batch{secrets.token_hex(3)}"
    # 30 partitions: one with 120 rows, the rest with 1-4 rows each.
    wanted: dict[int, set[int]] = {1: set(range(120))}
    for account in range(2, 31):
        wanted[account] = set(range(account % 4 + 1))
    writes = [relation_write(network, a, FOLLOWER, t, f"u{t}") for a, targets in wanted.items() for t in targets]
    requests = db._many_requests(writes, 50)
    assert sum(rows for _req, _params, rows, _stmt in requests) == len(writes)
    for request, _params, rows, _stmt in requests:
        if isinstance(request, BatchStatement):
            assert rows <= 50
            partitions = set(_batch_partitions(request))
            assert len(partitions) <= 10, partitions
    assert any(isinstance(r[0], BatchStatement) for r in requests), "rows of one partition went out batched"
    assert db.execute_many(writes, batch_size=50) == len(writes)
    for account, targets in wanted.items():
        got = {r.target_id for r in db.execute(LIST_RELATIONS, (network, account, FOLLOWER))}
        assert got == targets, account


def _batch_partitions(batch: BatchStatement) -> list[tuple[str, int]]:
    """(network, account_id) of each row of a batch, decoded from its serialized values."""
    return [(UTF8Type.deserialize(values[0], 4), LongType.deserialize(values[1], 4))
            for _is_prepared, _statement, values in batch._statements_and_parameters]
