"""Apply the versioned CQL files of `cql/` exactly once, in order, with a checksum ledger.

Files are named `NNNN_description.cql`; `{{keyspace}}` and `{{replication}}` are filled in when applied, so
one set of files serves the local node (SimpleStrategy) and clusters (NetworkTopologyStrategy).

The ledger (`schema_migrations`, one partition) records each file's checksum and how many of its
statements have run. A failure midway leaves the file `partial`; the next run resumes at the first
statement that did not run, provided the statements that did are unchanged. An `applied` file that was
edited afterwards stops the runner: schema changes go in a new file.

Every DDL statement of a run goes to one coordinator, which applies it before it answers, so the next statement
(an ALTER of the table just created, a table of the keyspace just created) always finds what it needs there:
the runner does not wait for the other nodes after each statement (on three nodes that wait, a gossip round or
more per statement, made the whole schema take minutes). It waits for schema agreement once the keyspace and the
ledger exist (the ledger is written at QUORUM, so its replicas must know the table) and once at the end of the
run, and fails if the nodes do not agree then.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cassandra import ConsistencyLevel, InvalidRequest, ReadFailure, WriteFailure

from api.db import Database, Statement

CQL_DIR = Path(__file__).resolve().parents[1] / "cql"
LEDGER_SCOPE = "schema"
_FILE_RE = re.compile(r"^(\d{4})_[\w-]+\.cql$")

LEDGER_DDL = """
CREATE TABLE IF NOT EXISTS {keyspace}.schema_migrations (
    scope text,
    version text,
    name text,
    checksum text,
    status text,
    statements_applied int,
    prefix_checksum text,
    applied_at timestamp,
    PRIMARY KEY ((scope), version)
) WITH comment = 'Q: which schema files are applied (migration runner, /readyz): one partition per scope'
"""

TABLES = frozenset({"schema_migrations"})
# The ledger decides what runs next, on whichever node coordinates: written and read at QUORUM (a majority of
# all replicas, whatever the data centre), so a runner never misses an entry another runner wrote.
LEDGER_CONSISTENCY = ConsistencyLevel.QUORUM

LATEST_MIGRATION = Statement(
    "SELECT version, status FROM schema_migrations WHERE scope = ? ORDER BY version DESC LIMIT 1"
)


class MigrationError(RuntimeError):
    pass


@dataclasses.dataclass(frozen=True)
class Migration:
    version: str
    name: str
    text: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def statements(self) -> list[str]:
        return split_statements(self.text)


def split_statements(text: str) -> list[str]:
    """Split CQL on `;`, ignoring semicolons inside quoted strings, `$$` bodies and comments."""
    statements: list[str] = []
    current: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith(("--", "//"), i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif text[i] in "'\"" or text.startswith("$$", i):
            quote = "$$" if text[i] == "$" else text[i]
            j = i + len(quote)
            while True:
                j = text.find(quote, j)
                if j < 0:
                    raise MigrationError(f"unterminated {quote} in: {text[i:i + 60]!r}")
                if quote == "'" and text.startswith("''", j):  # '' is an escaped quote
                    j += 2
                    continue
                break
            current.append(text[i:j + len(quote)])
            i = j + len(quote)
        elif text[i] == ";":
            if "".join(current).strip():
                statements.append("".join(current).strip())
            current = []
            i += 1
        else:
            current.append(text[i])
            i += 1
    if "".join(current).strip():
        statements.append("".join(current).strip())
    return statements


def discover(directory: Path = CQL_DIR) -> list[Migration]:
    migrations, seen = [], {}
    for path in sorted(directory.glob("*.cql")):
        match = _FILE_RE.match(path.name)
        if not match:
            raise MigrationError(f"{path.name}: migration files are named NNNN_description.cql")
        version = match.group(1)
        if version in seen:
            raise MigrationError(f"{path.name} and {seen[version]} share version {version}")
        seen[version] = path.name
        migrations.append(Migration(version, path.name, path.read_text()))
    if not migrations:
        raise MigrationError(f"no .cql files in {directory}")
    return migrations


def latest_version(directory: Path = CQL_DIR) -> str:
    return discover(directory)[-1].version


def _render(statement: str, keyspace: str, replication: dict[str, object]) -> str:
    replication_cql = json.dumps(replication).replace('"', "'")
    return statement.replace("{{keyspace}}", keyspace).replace("{{replication}}", replication_cql)


def _prefix_checksum(statements: list[str], count: int) -> str:
    return hashlib.sha256("\n;\n".join(statements[:count]).encode()).hexdigest()


def read_ledger(db: Database, keyspace: str) -> dict[str, dict]:
    rows = db.execute_raw(
        f"SELECT version, name, checksum, status, statements_applied, prefix_checksum "
        f"FROM {keyspace}.schema_migrations WHERE scope = %s",
        (LEDGER_SCOPE,), consistency=LEDGER_CONSISTENCY,
    )
    return {row.version: row._asdict() for row in rows}


# A coordinator that has not yet applied the previous DDL answers "does not exist" even after the driver saw
# schema versions agree (gossip runs ahead of some nodes' schema tables), and replicas that lag behind the
# coordinator fail a write with INCOMPATIBLE_SCHEMA: such answers are retried briefly.
_NOT_YET_VISIBLE = ("does not exist", "doesn't exist", "unconfigured table", "Unknown keyspace", "INCOMPATIBLE_SCHEMA")


AGREEMENT_WAIT = 60.0  # seconds the nodes get to agree on the schema, at the two points a run waits for it


def _retry_until_visible(run: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + 30
    while True:
        try:
            return run()
        except (InvalidRequest, WriteFailure, ReadFailure) as exc:
            if not any(text in str(exc) for text in _NOT_YET_VISIBLE) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _execute_when_visible(db: Database, cql: str, params: tuple = (), *, consistency: int | None = None) -> Any:
    return _retry_until_visible(lambda: db.execute_raw(cql, params, timeout=60, consistency=consistency))


def _coordinator(db: Database) -> Any:
    """The node every DDL statement of a run goes to: one that just answered this session (right after it
    connects, the session may not have its connections to every node yet)."""
    result = db.session.execute("SELECT release_version FROM system.local", timeout=60)
    return result.response_future.coordinator_host


@contextlib.contextmanager
def _no_agreement_wait_per_statement(db: Database) -> Iterator[None]:
    """The driver waits for schema agreement after every schema change it sees answered, for up to the Cluster's
    `max_schema_agreement_wait` (0 turns that wait off; it still refreshes its metadata of the changed table or
    keyspace from the coordinator that answered). Off during a run (see the module docstring), restored after."""
    cluster = db.cluster
    before = cluster.max_schema_agreement_wait
    cluster.max_schema_agreement_wait = 0
    try:
        yield
    finally:
        cluster.max_schema_agreement_wait = before


def _run_ddl(db: Database, cql: str, coordinator: Any) -> None:
    """One DDL statement on the run's coordinator; no wait for the other nodes (see `_await_agreement`)."""
    _retry_until_visible(lambda: db.session.execute(cql, timeout=60, host=coordinator))


def _await_agreement(db: Database, keyspace: str, after: str) -> None:
    """Every node up on one schema version (as the control connection's node sees them), then the driver's
    metadata of the keyspace read again (a refresh it made during the run may have come from a node behind)."""
    if not db.cluster.control_connection.wait_for_schema_agreement(wait_time=AGREEMENT_WAIT):
        raise MigrationError(f"the nodes did not agree on the schema within {AGREEMENT_WAIT:.0f} s after {after}")
    db.cluster.refresh_keyspace_metadata(keyspace, max_schema_agreement_wait=0)


def _record(db: Database, keyspace: str, migration: Migration, status: str, applied: int,
            prefix: str) -> None:
    _execute_when_visible(
        db,
        f"INSERT INTO {keyspace}.schema_migrations "
        "(scope, version, name, checksum, status, statements_applied, prefix_checksum, applied_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        (LEDGER_SCOPE, migration.version, migration.name, migration.checksum, status, applied, prefix,
         datetime.now(UTC)),
        consistency=LEDGER_CONSISTENCY,
    )


def check_applied(migrations: list[Migration], ledger: dict[str, dict]) -> None:
    """Refuse to go on when an applied file changed or disappeared."""
    by_version = {m.version: m for m in migrations}
    for version, row in ledger.items():
        migration = by_version.get(version)
        if migration is None:
            raise MigrationError(f"migration {row['name']} is recorded as {row['status']} but its file is gone")
        if row["status"] == "applied" and row["checksum"] != migration.checksum:
            raise MigrationError(
                f"{migration.name} was applied with checksum {row['checksum'][:12]}… but the file now has "
                f"{migration.checksum[:12]}…: never edit an applied migration, add a new file instead"
            )
        if row["status"] == "partial":
            done = row["statements_applied"]
            if _prefix_checksum(migration.statements, done) != row["prefix_checksum"]:
                raise MigrationError(
                    f"{migration.name}: its first {done} statements already ran and have since been edited"
                )


def migrate(db: Database, keyspace: str, replication: dict[str, object], *,
            directory: Path = CQL_DIR, dry_run: bool = False,
            log: Callable[[str], None] = print) -> list[str]:
    """Apply pending migrations; returns the names of the files applied (or, with dry_run, pending)."""
    migrations = discover(directory)
    if "CREATE KEYSPACE" not in migrations[0].text.upper():
        raise MigrationError(f"{migrations[0].name}: the first migration must create the keyspace")
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,47}", keyspace):
        raise MigrationError(f"keyspace name {keyspace!r} must be lower-case letters, digits and _")
    keyspace_exists = keyspace in db.cluster.metadata.keyspaces
    ledger = read_ledger(db, keyspace) if keyspace_exists and _ledger_exists(db, keyspace) else {}
    check_applied(migrations, ledger)
    pending = [m for m in migrations if ledger.get(m.version, {}).get("status") != "applied"]
    if dry_run:
        return [m.name for m in pending]
    coordinator = _coordinator(db)
    applied: list[str] = []
    with _no_agreement_wait_per_statement(db):
        if not keyspace_exists:
            for stmt in migrations[0].statements:
                _run_ddl(db, _render(stmt, keyspace, replication), coordinator)
        _run_ddl(db, LEDGER_DDL.format(keyspace=keyspace), coordinator)
        # The ledger is written and read at QUORUM on any coordinator: every replica must know its table first.
        _await_agreement(db, keyspace, "creating the ledger")
        for migration in pending:
            statements = migration.statements
            done = ledger.get(migration.version, {}).get("statements_applied") or 0
            if done:
                log(f"resuming {migration.name} at statement {done + 1} of {len(statements)}")
            for index in range(done, len(statements)):
                try:
                    _run_ddl(db, _render(statements[index], keyspace, replication), coordinator)
                except Exception as exc:
                    _record(db, keyspace, migration, "partial", index, _prefix_checksum(statements, index))
                    raise MigrationError(
                        f"{migration.name}: statement {index + 1} of {len(statements)} failed: {exc}"
                    ) from exc
            _record(db, keyspace, migration, "applied", len(statements),
                    _prefix_checksum(statements, len(statements)))
            log(f"applied {migration.name} ({len(statements)} statements)")
            applied.append(migration.name)
        if applied:
            _await_agreement(db, keyspace, f"applying {applied[-1]}")
    return applied


def _ledger_exists(db: Database, keyspace: str) -> bool:
    ks = db.cluster.metadata.keyspaces.get(keyspace)
    return ks is not None and "schema_migrations" in ks.tables


def schema_state(db: Database, keyspace: str, directory: Path = CQL_DIR) -> tuple[str | None, str]:
    """(latest applied version or None, latest version on disk) - read from the one ledger partition."""
    row = db.execute(LATEST_MIGRATION, (LEDGER_SCOPE,), timeout=1.0).one()
    applied = row.version if row is not None and row.status == "applied" else None
    return applied, latest_version(directory)
