#!/usr/bin/env python3
"""Apply pending CQL migrations from cql/ to the configured keyspace.

Exit codes: 0 applied (or nothing pending), 1 a migration failed or an applied file was edited,
3 Cassandra unreachable.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import click  # noqa: E402
from cassandra.cluster import NoHostAvailable  # noqa: E402

from api.config import Settings  # noqa: E402
from api.db import Database  # noqa: E402
from api.migrations import CQL_DIR, MigrationError, migrate  # noqa: E402


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--keyspace", envvar="CHRONICLE_KEYSPACE", default="chronicle", show_default=True)
@click.option("--replication", envvar="CHRONICLE_REPLICATION", default="SimpleStrategy:1", show_default=True,
              help="SimpleStrategy:N or NetworkTopologyStrategy:<dc>:<rf>[,<dc>:<rf>]")
@click.option("--directory", type=click.Path(exists=True, file_okay=False, path_type=Path), default=CQL_DIR)
@click.option("--dry-run", is_flag=True, help="List pending files without applying them.")
def main(keyspace: str, replication: str, directory: Path, dry_run: bool) -> None:
    """Apply the pending files of cql/ exactly once, in order, recording each in schema_migrations."""
    settings = Settings.from_env()
    settings = settings.__class__(**{**settings.__dict__, "keyspace": keyspace, "replication": replication,
                                     "request_timeout": 60.0})
    db = Database(settings, keyspace="")
    try:
        done = migrate(db, keyspace, settings.replication_map(), directory=directory, dry_run=dry_run,
                       log=click.echo)
    except NoHostAvailable as exc:
        click.echo(f"error: Cassandra unreachable at {settings.contact_points}:{settings.cassandra_port}: {exc}",
                   err=True)
        sys.exit(3)
    except MigrationError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    finally:
        db.close()
    verb = "pending" if dry_run else "applied"
    click.echo(f"{keyspace}: {len(done)} migration(s) {verb}" + (f": {', '.join(done)}" if done else ""))


if __name__ == "__main__":
    main()
