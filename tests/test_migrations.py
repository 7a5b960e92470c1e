"""The migration runner against the real node, each test in a keyspace of its own."""

from __future__ import annotations

import dataclasses
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from api.config import Settings
from api.db import Database
from api.migrations import (
    CQL_DIR,
    MigrationError,
    discover,
    migrate,
    read_ledger,
    split_statements,
)

KEYSPACE_FILE = """CREATE KEYSPACE IF NOT EXISTS {{keyspace}} WITH replication = {{replication}};\n"""


@pytest.fixture
def admin(settings: Settings):
    """A keyspace-less session plus a fresh keyspace name, dropped afterwards."""
    keyspace = f"mig_{secrets.token_hex(4)}"
    database = Database(dataclasses.replace(settings, request_timeout=60.0), keyspace="")
    yield database, keyspace
    database.execute_raw(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=60)
    database.close()


def _write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def _tables(db: Database, keyspace: str) -> set[str]:
    rows = db.execute_raw("SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,))
    return {r.table_name for r in rows}


SIMPLE = {"replication": {"class": "SimpleStrategy", "replication_factor": 1}}


def test_applies_each_file_once_in_order(admin, tmp_path):
    db, ks = admin
    directory = _write(tmp_path / "cql", {
        "0001_keyspace.cql": KEYSPACE_FILE,
        "0002_a.cql": "CREATE TABLE {{keyspace}}.a (k int PRIMARY KEY) WITH comment = 'Q: a';\n"
                      "ALTER TABLE {{keyspace}}.a ADD v text;",
        "0003_b.cql": "CREATE TABLE {{keyspace}}.b (k int PRIMARY KEY, v text) WITH comment = 'Q: b';",
    })
    first = migrate(db, ks, SIMPLE["replication"], directory=directory, log=lambda _m: None)
    assert first == ["0001_keyspace.cql", "0002_a.cql", "0003_b.cql"]
    assert {"a", "b", "schema_migrations"} <= _tables(db, ks)
    # A second run has nothing to do; were it to re-run 0002, the ALTER ... ADD would fail.
    assert migrate(db, ks, SIMPLE["replication"], directory=directory, log=lambda _m: None) == []
    ledger = read_ledger(db, ks)
    assert sorted(ledger) == ["0001", "0002", "0003"]
    assert all(row["status"] == "applied" for row in ledger.values())
    assert ledger["0002"]["statements_applied"] == 2
    # Adding a file later applies just that one.
    _write(directory, {"0004_c.cql": "CREATE TABLE {{keyspace}}.c (k int PRIMARY KEY);"})
    assert migrate(db, ks, SIMPLE["replication"], directory=directory, log=lambda _m: None) == ["0004_c.cql"]


def test_refuses_an_edited_applied_file(admin, tmp_path):
    db, ks = admin
    directory = _write(tmp_path / "cql", {
        "0001_keyspace.cql": KEYSPACE_FILE,
        "0002_a.cql": "CREATE TABLE {{keyspace}}.a (k int PRIMARY KEY);",
    })
    migrate(db, ks, SIMPLE["replication"], directory=directory, log=lambda _m: None)
    (directory / "0002_a.cql").write_text("CREATE TABLE {{keyspace}}.a (k int PRIMARY KEY, v int);")
    _write(directory, {"0003_b.cql": "CREATE TABLE {{keyspace}}.b (k int PRIMARY KEY);"})
    with pytest.raises(MigrationError, match="0002_a.cql was applied with checksum"):
        migrate(db, ks, SIMPLE["replication"], directory=directory, log=lambda _m: None)
    assert "b" not in _tables(db, ks), "nothing after the refusal may be applied"


def test_refuses_when_an_applied_file_disappears(admin, tmp_path):
    db, ks = admin
    directory = _write(tmp_path / "cql", {
        "0001_keyspace.cql": KEYSPACE_FILE,
        "0002_a.cql": "CREATE TABLE {{keyspace}}.a (k int PRIMARY KEY);",
    })
    migrate(db, ks, SIMPLE["replication"], directory=directory, log=lambda _m: None)
    (directory / "0002_a.cql").unlink()
    with pytest.raises(MigrationError, match="its file is gone"):
        migrate(db, ks, SIMPLE["replication"], directory=directory, log=lambda _m: None)


def test_resumes_after_a_failing_statement_without_rerunning_what_ran(admin, tmp_path):
    db, ks = admin
    directory = _write(tmp_path / "cql", {
        "0001_keyspace.cql": KEYSPACE_FILE,
        "0002_base.cql": "CREATE TABLE {{keyspace}}.t (k int PRIMARY KEY);",
        # Statement 1 is not idempotent; statement 2 fails until the type exists.
        "0003_midway.cql": "ALTER TABLE {{keyspace}}.t ADD extra int;\n"
                           "CREATE TABLE {{keyspace}}.u (k int PRIMARY KEY, a frozen<{{keyspace}}.address>);\n"
                           "CREATE TABLE {{keyspace}}.w (k int PRIMARY KEY);",
    })
    with pytest.raises(MigrationError, match="0003_midway.cql: statement 2 of 3 failed"):
        migrate(db, ks, SIMPLE["replication"], directory=directory, log=lambda _m: None)
    ledger = read_ledger(db, ks)
    assert ledger["0003"]["status"] == "partial"
    assert ledger["0003"]["statements_applied"] == 1

    db.execute_raw(f"CREATE TYPE {ks}.address (street text)", timeout=60)
    messages: list[str] = []
    assert migrate(db, ks, SIMPLE["replication"], directory=directory, log=messages.append) == ["0003_midway.cql"]
    assert any("resuming 0003_midway.cql at statement 2 of 3" in m for m in messages)
    assert {"t", "u", "w"} <= _tables(db, ks)
    assert read_ledger(db, ks)["0003"]["status"] == "applied"


def test_a_partial_file_may_fix_its_failed_statement_but_not_the_ones_that_ran(admin, tmp_path):
    db, ks = admin
    directory = _write(tmp_path / "cql", {
        "0001_keyspace.cql": KEYSPACE_FILE,
        "0002_x.cql": "CREATE TABLE {{keyspace}}.t (k int PRIMARY KEY);\nCREATE TABLE {{keyspace}}.u (k nosuchtype);",
    })
    with pytest.raises(MigrationError):
        migrate(db, ks, SIMPLE["replication"], directory=directory, log=lambda _m: None)
    # Editing the statement that already ran is refused ...
    (directory / "0002_x.cql").write_text(
        "CREATE TABLE {{keyspace}}.t (k int PRIMARY KEY, v int);\nCREATE TABLE {{keyspace}}.u (k int PRIMARY KEY);")
    with pytest.raises(MigrationError, match="first 1 statements already ran"):
        migrate(db, ks, SIMPLE["replication"], directory=directory, log=lambda _m: None)
    # ... fixing only the failed one is how a broken migration is repaired.
    (directory / "0002_x.cql").write_text(
        "CREATE TABLE {{keyspace}}.t (k int PRIMARY KEY);\nCREATE TABLE {{keyspace}}.u (k int PRIMARY KEY);")
    assert migrate(db, ks, SIMPLE["replication"], directory=directory, log=lambda _m: None) == ["0002_x.cql"]
    assert {"t", "u"} <= _tables(db, ks)


def test_dry_run_lists_pending_and_writes_nothing(admin, tmp_path):
    db, ks = admin
    directory = _write(tmp_path / "cql", {"0001_keyspace.cql": KEYSPACE_FILE,
                                          "0002_a.cql": "CREATE TABLE {{keyspace}}.a (k int PRIMARY KEY);"})
    assert migrate(db, ks, SIMPLE["replication"], directory=directory, dry_run=True) == [
        "0001_keyspace.cql", "0002_a.cql"]
    assert ks not in db.cluster.metadata.keyspaces


def test_network_topology_replication_is_rendered(admin, tmp_path, settings):
    db, ks = admin
    replication = dataclasses.replace(settings, replication="NetworkTopologyStrategy:datacenter1:1").replication_map()
    assert replication == {"class": "NetworkTopologyStrategy", "datacenter1": 1}
    directory = _write(tmp_path / "cql", {"0001_keyspace.cql": KEYSPACE_FILE})
    migrate(db, ks, replication, directory=directory, log=lambda _m: None)
    row = db.execute_raw("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (ks,)).one()
    assert row.replication["class"].endswith("NetworkTopologyStrategy")
    assert row.replication["datacenter1"] == "1"


def test_file_names_must_be_versioned(tmp_path):
    _write(tmp_path, {"0001_keyspace.cql": KEYSPACE_FILE, "extra.cql": "SELECT 1"})
    with pytest.raises(MigrationError, match="NNNN_description.cql"):
        discover(tmp_path)


def test_split_statements_respects_quotes_and_comments():
    text = ("-- leading; comment\nCREATE TABLE a (x int) WITH comment = 'semi;colon and it''s quoted';\n"
            "/* block ; comment */ INSERT INTO a (x) VALUES (1); // trailing ; comment\n"
            "CREATE FUNCTION f() RETURNS NULL ON NULL INPUT RETURNS int LANGUAGE java AS $$ return 1; $$")
    assert split_statements(text) == [
        "CREATE TABLE a (x int) WITH comment = 'semi;colon and it''s quoted'",
        "INSERT INTO a (x) VALUES (1)",
        "CREATE FUNCTION f() RETURNS NULL ON NULL INPUT RETURNS int LANGUAGE java AS $$ return 1; $$",
    ]


def test_every_table_of_the_real_schema_names_its_query(db, settings):
    """The project's own cql/: each table carries a comment saying which query it serves."""
    rows = db.execute_raw("SELECT table_name, comment FROM system_schema.tables WHERE keyspace_name = %s",
                          (settings.keyspace,))
    tables = {r.table_name: r.comment for r in rows}
    assert "schema_migrations" in tables
    missing = [name for name, comment in tables.items() if not comment.startswith("Q:")]
    assert missing == [], f"tables without a 'Q: ...' comment: {missing}"
    ledger = read_ledger(db, settings.keyspace)
    assert sorted(ledger) == [m.version for m in discover(CQL_DIR)]


def test_cqlsh_shows_the_keyspace_and_table_comments(db, settings, cassandra_node):
    """What README tells people to run: cqlsh through the node manager, DESCRIBE showing the comments."""
    result = subprocess.run(
        [str(Path(sys.executable).with_name("chronicle")), "node", "cqlsh",
         "-e", f"DESCRIBE KEYSPACE {settings.keyspace}"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "CHRONICLE_CASSANDRA_PORT": str(cassandra_node.native_port)},
    )
    assert result.returncode == 0, result.stderr
    assert f"CREATE KEYSPACE {settings.keyspace}" in result.stdout
    assert f"CREATE TABLE {settings.keyspace}.schema_migrations" in result.stdout
    assert "comment = 'Q: which schema files are applied" in result.stdout


def test_the_ledger_is_written_and_read_at_quorum(admin, tmp_path, monkeypatch):
    """A runner must see what another runner recorded on any coordinator: every ledger statement is QUORUM."""
    from cassandra import ConsistencyLevel

    db, ks = admin
    seen: list[tuple[str, int | None]] = []
    original = db.execute_raw

    def spy(cql, params=(), **kw):
        seen.append((cql, kw.get("consistency")))
        return original(cql, params, **kw)

    monkeypatch.setattr(db, "execute_raw", spy)
    directory = _write(tmp_path / "cql", {
        "0001_keyspace.cql": KEYSPACE_FILE,
        "0002_a.cql": "CREATE TABLE {{keyspace}}.a (k int PRIMARY KEY) WITH comment = 'Q: a';"})
    migrate(db, ks, SIMPLE["replication"], directory=directory, log=lambda _m: None)
    migrate(db, ks, SIMPLE["replication"], directory=directory, log=lambda _m: None)  # reads the ledger
    ledger = [(cql.split()[0], level) for cql, level in seen
              if "schema_migrations" in cql and not cql.lstrip().upper().startswith("CREATE")]
    assert {verb for verb, _ in ledger} == {"INSERT", "SELECT"}
    assert all(level == ConsistencyLevel.QUORUM for _, level in ledger), ledger


def test_a_run_sends_its_ddl_to_one_coordinator_and_ends_with_the_nodes_agreeing(admin, tmp_path, monkeypatch):
    """Every DDL statement of a run goes to the same node (which applied the one before it), the driver's wait for
    agreement after each statement is off only for the run (restored after, also when a statement fails), and the
    run returns once the nodes agree, with the driver's metadata showing every table."""
    db, ks = admin
    session = db.session
    hosts: list[object] = []
    original = session.execute

    def spy(query, *args, **kw):
        if str(query).lstrip().upper().startswith(("CREATE", "ALTER", "DROP")):
            hosts.append(kw.get("host"))
        return original(query, *args, **kw)

    monkeypatch.setattr(session, "execute", spy)
    wait_before = db.cluster.max_schema_agreement_wait
    directory = _write(tmp_path / "cql", {
        "0001_keyspace.cql": KEYSPACE_FILE,
        "0002_a.cql": "CREATE TABLE {{keyspace}}.a (k int PRIMARY KEY) WITH comment = 'Q: a';\n"
                      "ALTER TABLE {{keyspace}}.a ADD v text;\nCREATE INDEX IF NOT EXISTS a_v ON {{keyspace}}.a (v);",
        "0003_b.cql": "CREATE TABLE {{keyspace}}.b (k int PRIMARY KEY, v text) WITH comment = 'Q: b';",
    })
    assert migrate(db, ks, SIMPLE["replication"], directory=directory, log=lambda _m: None) == [
        "0001_keyspace.cql", "0002_a.cql", "0003_b.cql"]
    # The keyspace (made first, then run again as 0001), the ledger, and the four statements of 0002 and 0003.
    assert len(hosts) == 7 and hosts[0] is not None and all(h is hosts[0] for h in hosts), hosts
    assert db.cluster.max_schema_agreement_wait == wait_before
    assert db.cluster.control_connection.wait_for_schema_agreement(wait_time=10)
    assert {"a", "b", "schema_migrations"} <= set(db.cluster.metadata.keyspaces[ks].tables)
    assert "v" in db.cluster.metadata.keyspaces[ks].tables["a"].columns

    _write(directory, {"0004_bad.cql": "CREATE TABLE {{keyspace}}.c (k nosuchtype PRIMARY KEY);"})
    with pytest.raises(MigrationError, match="0004_bad.cql: statement 1 of 1 failed"):
        migrate(db, ks, SIMPLE["replication"], directory=directory, log=lambda _m: None)
    assert db.cluster.max_schema_agreement_wait == wait_before
