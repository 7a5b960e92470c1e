"""`chronicle migrate`: apply pending CQL migrations from cql/ to the configured keyspace.

Exit codes: 0 applied (or nothing pending), 1 a migration failed or an applied file was edited,
2 usage error or bad configuration, 3 Cassandra unreachable.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from api.cli.common import CONTEXT, Exit, cassandra_errors, fail_on, keyspace_option, runtime
from api.db import Database
from api.migrations import CQL_DIR, MigrationError
from api.migrations import migrate as apply_migrations


@click.command("migrate", context_settings=CONTEXT, short_help="Apply pending CQL migrations from cql/.")
@keyspace_option
@click.option("--replication", default=None,
              help="SimpleStrategy:N or NetworkTopologyStrategy:<dc>:<rf>[,<dc>:<rf>] "
                   "[env CHRONICLE_REPLICATION, SimpleStrategy:1].")
@click.option("--directory", type=click.Path(exists=True, file_okay=False, path_type=Path), default=CQL_DIR)
@click.option("--dry-run", is_flag=True, help="List pending files without applying them.")
def migrate(keyspace: str | None, replication: str | None, directory: Path, dry_run: bool) -> None:
    """Apply the pending files of cql/ exactly once, in order, recording each in schema_migrations.

    Exit codes: 0 applied (or nothing pending), 1 a migration failed or an applied file was edited,
    2 usage error or bad configuration, 3 Cassandra unreachable.
    """
    configured = runtime().settings()
    with fail_on(ValueError, code=Exit.USAGE, prefix="bad configuration: "):
        settings = dataclasses.replace(configured, keyspace=keyspace or configured.keyspace,
                                       replication=replication or configured.replication, request_timeout=60.0)
        replication_map = settings.replication_map()
    db = Database(settings, keyspace="")
    try:
        with cassandra_errors(f"{settings.contact_points}:{settings.cassandra_port}"), fail_on(MigrationError):
            done = apply_migrations(db, settings.keyspace, replication_map, directory=directory, dry_run=dry_run,
                                    log=click.echo)
    finally:
        db.close()
    verb = "pending" if dry_run else "applied"
    click.echo(f"{settings.keyspace}: {len(done)} migration(s) {verb}" + (f": {', '.join(done)}" if done else ""))
