"""Database.execute_many against the node: batched writes land whole, and no unlogged batch covers more
partitions than Cassandra's warning threshold."""

from __future__ import annotations

import secrets

import pytest
from cassandra.cqltypes import LongType, UTF8Type
from cassandra.query import BatchStatement

from api.db import Database, Statement
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


def test_batches_across_partitions_stay_under_the_batch_size_failure_and_every_row_lands(db: Database):
    """Rows of 2 KiB over 40 partitions: a batch of 50 such rows across partitions would be ~100 KiB, which
    Cassandra refuses (batch_size_fail_threshold, 50 KiB); batches across partitions stay within 24 KiB of values,
    one partition's rows may go together whatever their size (one mutation), and every row lands."""
    network = f"bigbatch{secrets.token_hex(3)}"
    wanted = {a: {t: f"{t:04d}" + "n" * 2044 for t in range(4 if a > 1 else 60)} for a in range(1, 41)}
    writes = [relation_write(network, a, FOLLOWER, t, name) for a, rows in wanted.items() for t, name in rows.items()]
    requests = db._many_requests(writes, 50)
    for request, _params, _rows, _stmt in requests:
        if isinstance(request, BatchStatement) and len(set(_batch_partitions(request))) > 1:
            assert sum(len(v) for _p, _s, values in request._statements_and_parameters for v in values
                       if isinstance(v, bytes)) <= 24 * 1024
    assert db.execute_many(writes, batch_size=50) == len(writes)
    for account, rows in wanted.items():
        got = {r.target_id for r in db.execute(LIST_RELATIONS, (network, account, FOLLOWER))}
        assert got == set(rows), account


def test_writes_sent_together_stay_under_the_batch_warnings_and_every_write_lands(db: Database):
    """execute_together: plain writes in unlogged batches of at most 10 partitions and 4 KiB, counter updates in
    counter batches of their own, a write too large for a batch alone; every row and increment lands once, and a
    lightweight transaction is refused."""
    from cassandra.query import BatchType

    from api.network import accounts, relations

    network = f"together{secrets.token_hex(3)}"
    big = "x" * 3000  # two of these exceed 4 KiB together
    rows = {a: f"u{a}" for a in range(1, 13)} | {13: big, 14: big, 15: "y" * 6000}
    writes = [relation_write(network, a, FOLLOWER, 1000 + a, name) for a, name in rows.items()]
    writes += accounts.count_writes(network, 7, 8, 3) + accounts.count_writes(network, 9, 8, 2)
    plan = db._together_requests(writes)
    assert sum(len(stmts) for stmts, _ in plan) == len(writes)
    for stmts, request in plan:
        counters = {s is accounts.ADD_FOLLOWERS or s is accounts.ADD_FOLLOWS for s in stmts}
        assert len(counters) == 1, "counter updates never share a batch with other writes"
        if isinstance(request, BatchStatement):
            assert len(stmts) <= 10
            assert request.batch_type == (BatchType.COUNTER if counters == {True} else BatchType.UNLOGGED)
            assert sum(len(v) for _p, _s, values in request._statements_and_parameters for v in values
                       if isinstance(v, bytes)) <= 4096
    alone = [stmts for stmts, request in plan if not isinstance(request, BatchStatement)]
    assert len(alone) >= 1 and len(plan) < len(writes) / 2
    assert db.execute_together(writes) == len(writes)
    for account, name in rows.items():
        got = [(r.target_id, r.target_username) for r in db.execute(LIST_RELATIONS, (network, account, FOLLOWER))]
        assert got == [(1000 + account, name)], account
    assert accounts.fresh_counts(db, network, [7, 8, 9]) == {7: (0, 3), 8: (5, 0), 9: (0, 2)}
    claim = (relations.FOLLOW_IF_NEW, (network, 1, 2, "u2"))
    with pytest.raises(ValueError, match="lightweight transaction"):
        db.execute_together([claim])


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


# Module-level, as product statements are: the Database keeps a prepared statement per Statement object, so a
# Statement made and dropped inside a test could hand its id (and prepared statement) to the next one made.
_POSTING = Statement("INSERT INTO slack_search_postings (team_id, term, day, ts, channel_id) VALUES (?, ?, ?, ?, ?)")
_POSTINGS_CQL = "SELECT day, ts, channel_id FROM slack_search_postings WHERE team_id = ? AND term = ? AND day IN ?"
_POSTINGS_PLAIN = Statement(_POSTINGS_CQL, tuples=True)
_POSTINGS_NAMED = Statement(_POSTINGS_CQL)


def test_a_statement_declared_with_tuples_reads_plain_tuples_and_the_others_named_rows(db: Database):
    """The search's bulk posting reads skip the named tuple per row; every other statement keeps named rows."""
    team = f"TTUP{secrets.token_hex(3)}"
    db.execute(_POSTING, (team, "word", 5, 7, "C1"))
    plain = list(db.execute_async(_POSTINGS_PLAIN, (team, "word", [5])).result())
    named = list(db.execute(_POSTINGS_NAMED, (team, "word", [5])))
    assert plain == named == [(5, 7, "C1")]
    assert type(plain[0]) is tuple
    assert named[0].ts == 7 and type(named[0]) is not tuple
    assert [type(r) for r in db.execute(_POSTINGS_PLAIN, (team, "word", [5]))] == [tuple]


def test_a_statement_made_and_dropped_never_lends_its_prepared_form_to_the_next_one(db: Database):
    """Prepared forms are kept per Statement object: one made, used and dropped (a test's, a script's) must not
    pass its prepared form to a later one that happens to be made at the same address."""
    for i in range(50):
        dropped = Statement(f"SELECT version FROM schema_migrations WHERE scope = 'gone{i}' LIMIT 1")
        db.prepared(dropped)
        del dropped
        made = Statement("SELECT scope FROM schema_migrations WHERE scope = ? LIMIT 1")
        assert db.prepared(made).query_string == \
            f"SELECT scope FROM {db.keyspace}.schema_migrations WHERE scope = ? LIMIT 1", i


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


def test_a_speculative_attempt_never_asks_a_node_twice(db: Database):
    """The plan's second pass (a retry's host when speculative attempts took every node: tests/test_cluster.py)
    follows only plans that hold every attempt: on one node a slow read is not sent to it again."""
    plain = Statement("SELECT version FROM schema_migrations WHERE scope = ?")
    bound = db.prepared(plain).bind(("slack",))
    policy = db.cluster.profile_manager.default.load_balancing_policy
    assert db.settings.speculative_attempts >= 1
    assert [h.address for h in policy.make_query_plan(db.keyspace, bound)] == \
        [h.address for h in db.cluster.metadata.all_hosts()] == ["127.0.0.1"]


def test_replicas_needed_per_consistency_level():
    from cassandra import ConsistencyLevel as CL

    from api.db import replicas_needed

    expected = {(CL.LOCAL_ONE, 3): 1, (CL.ONE, 1): 1, (CL.LOCAL_QUORUM, 3): 2, (CL.QUORUM, 5): 3,
                (CL.LOCAL_QUORUM, 1): 1, (CL.ALL, 3): 3, (CL.TWO, 3): 2, (CL.EACH_QUORUM, 4): 3}
    for (level, replication), needed in expected.items():
        assert replicas_needed(level, replication) == needed, (level, replication)


def test_a_single_node_serves_the_default_levels(db: Database):
    assert db.serving_shortfall() is None


def test_a_write_over_many_partitions_goes_alone_and_every_partition_it_names_goes(db: Database):
    """An `IN ?` delete over 300 search (term, day) partitions, among single-partition deletes sent batched: it is
    never put into a batch (each of its partitions would count toward the node's batch thresholds), and every
    partition it names is gone while the partitions it does not name stay."""
    from api.slack import search_index

    team = f"TIN{secrets.token_hex(3)}"
    terms = [f"w{n}" for n in range(320)]
    db.execute_many([(search_index.INSERT_POSTING, (team, term, 5, 1000 + n, "C1")) for n, term in
                     enumerate(terms)], batch_size=10)
    doomed, lone, kept = terms[:300], terms[300:310], set(terms[310:])
    writes = [*search_index.expire_posting_writes(db, team, "C1", [(t, 5 * 86_400_000_000) for t in doomed],
                                                  whole_before=6),
              *[(search_index.DELETE_TERM_DAY_POSTINGS, (team, t, 5)) for t in lone]]
    # 300 terms: IN lists of 200 and 100 for their day's partitions, and for their listings' days before the cutoff
    assert sorted(len(p[1]) for stmt, p in writes if stmt.many_partitions) == [100, 100, 200, 200]
    requests = db._many_requests(writes, 10)
    for request, _params, _rows, stmt in requests:
        if isinstance(request, BatchStatement):
            assert not stmt.many_partitions
            assert len({tuple(values[:3]) for _p, _s, values in request._statements_and_parameters}) <= 10
    assert sum(1 for r in requests if r[3].many_partitions) == 4  # each alone
    db.execute_many(writes, batch_size=10)
    left = {t for t in terms if list(db.execute(search_index.SELECT_POSTINGS, (team, t, 5, 2**63 - 1, 0, 10)))}
    assert left == kept
    with pytest.raises(ValueError, match="many partitions"):
        db.execute_together(writes[:2])
