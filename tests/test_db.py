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


def test_prepared_statements_name_their_keyspace():
    from api.db import Statement

    cases = {
        "SELECT a FROM slack_channels WHERE team_id = ?": "SELECT a FROM ks1.slack_channels WHERE team_id = ?",
        "INSERT INTO posts (k) VALUES (?)": "INSERT INTO ks1.posts (k) VALUES (?)",
        "UPDATE likes USING TTL ? SET n = ? WHERE k = ?": "UPDATE ks1.likes USING TTL ? SET n = ? WHERE k = ?",
        "DELETE FROM work_shards WHERE q = ? IF owner = ?": "DELETE FROM ks1.work_shards WHERE q = ? IF owner = ?",
        # Already qualified, or a system table: left as written.
        "SELECT release_version FROM system.local": "SELECT release_version FROM system.local",
    }
    for cql, qualified in cases.items():
        assert Statement(cql).qualified("ks1") == qualified
    assert Statement("SELECT a FROM t WHERE k = ?").qualified("") == "SELECT a FROM t WHERE k = ?"


def test_the_node_sees_no_use_keyspace_ambiguity(db: Database):
    """The node warns about prepared statements that lean on the connection's keyspace (it did on every start)."""
    from api.db import Statement

    stmt = Statement("SELECT version FROM schema_migrations WHERE scope = ? LIMIT 1")
    result = db.execute(stmt, ("no-such-scope",))
    assert db.prepared(stmt).query_string == f"SELECT version FROM {db.keyspace}.schema_migrations " \
                                              "WHERE scope = ? LIMIT 1"
    assert not result.response_future.warnings


def test_lightweight_transactions_are_never_sent_twice_at_once(db: Database):
    """Speculative execution asks a second replica for idempotent statements only: an LWT sent twice could
    answer "not applied" for its own applied claim."""
    from api.db import Statement

    plain = Statement("SELECT version FROM schema_migrations WHERE scope = ?")
    conditional = Statement("UPDATE schema_migrations SET status = ? WHERE scope = ? AND version = ? IF status = ?")
    assert conditional.idempotent and conditional.conditional  # declared idempotent, yet...
    assert db.prepared(conditional).is_idempotent is False
    assert db.prepared(plain).is_idempotent is True
    assert db.cluster.profile_manager.default.speculative_execution_policy is not None


def test_replicas_needed_per_consistency_level():
    from cassandra import ConsistencyLevel as CL

    from api.db import replicas_needed

    expected = {(CL.LOCAL_ONE, 3): 1, (CL.ONE, 1): 1, (CL.LOCAL_QUORUM, 3): 2, (CL.QUORUM, 5): 3,
                (CL.LOCAL_QUORUM, 1): 1, (CL.ALL, 3): 3, (CL.TWO, 3): 2, (CL.EACH_QUORUM, 4): 3}
    for (level, replication), needed in expected.items():
        assert replicas_needed(level, replication) == needed, (level, replication)


def test_a_single_node_serves_the_default_levels(db: Database):
    assert db.serving_shortfall() is None
