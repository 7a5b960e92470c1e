#!/usr/bin/env python3
"""Load Chronicle's small built-in sample data (a Slack workspace and a follower network).

Idempotent: loading twice leaves the same state. Exit codes: 0 loaded, 3 Cassandra unreachable.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import click  # noqa: E402
from cassandra.cluster import NoHostAvailable  # noqa: E402

from api.db import get_db  # noqa: E402


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--dry-run", is_flag=True, help="Say what would be loaded without writing.")
def main(dry_run: bool) -> None:
    """Load the sample Slack workspace and the sample follower network into CHRONICLE_KEYSPACE."""
    from api.network import rankings
    from api.network.sample import SAMPLE_NETWORK
    from api.network.sample import load_sample as load_network_sample
    from api.slack.sample import load_sample as load_slack_sample

    if dry_run:
        click.echo("would load: the sample Slack workspace (api/slack/sample.py) and the sample follower "
                   "network (api/network/sample.py)")
        return
    db = get_db()
    try:
        for name, loader in (("slack", load_slack_sample), ("network", load_network_sample)):
            summary = loader(db)
            click.echo(f"sample {name}: {summary}")
        # One run of the periodic Q2/Q3 job, so the served sample answers the ranking endpoints at once
        # (each load appends a snapshot to the time series, as each run of the job does).
        snapshot = rankings.compute(db, SAMPLE_NETWORK)
        click.echo(f"sample network: Q2/Q3 snapshot {snapshot['snapshot_id']} in {snapshot['seconds']} s")
    except NoHostAvailable as exc:
        click.echo(f"error: Cassandra unreachable: {exc}", err=True)
        sys.exit(3)
    finally:
        db.close()


if __name__ == "__main__":
    main()
