"""`chronicle sample load`: Chronicle's small built-in sample data (a Slack workspace and a follower network)."""

from __future__ import annotations

import click

from api.cli.common import CONTEXT, cassandra_errors, database


@click.group("sample", context_settings=CONTEXT, short_help="Load the built-in sample data.")
def sample() -> None:
    """The built-in sample data: a Slack workspace, a follower network and a tagging project."""


@sample.command("load", context_settings=CONTEXT, short_help="Load the sample Slack workspace and network.")
@click.option("--dry-run", is_flag=True, help="Say what would be loaded without writing.")
def load(dry_run: bool) -> None:
    """Load the sample Slack workspace, the sample follower network and the sample tagging project (printing
    its people's new tokens; sign in at /tagging) into CHRONICLE_KEYSPACE.

    Idempotent: loading twice leaves the same state. Exit codes: 0 loaded, 3 Cassandra unreachable.
    """
    from api.network import top100
    from api.network.sample import SAMPLE_NETWORK
    from api.network.sample import load_sample as load_network_sample
    from api.slack.sample import load_sample as load_slack_sample
    from api.tagging.sample import load_sample as load_tagging_sample

    if dry_run:
        click.echo("would load: the sample Slack workspace (api/slack/sample.py) and the sample follower "
                   "network (api/network/sample.py)")
        return
    db = database()
    with cassandra_errors():
        for name, loader in (("slack", load_slack_sample), ("network", load_network_sample)):
            summary = loader(db)
            click.echo(f"sample {name}: {summary}")
        # One run of the periodic Q2/Q3 job, so the served sample answers the ranking endpoints at once
        # (each load appends a snapshot to the time series, as each run of the job does).
        snapshot = top100.compute_rankings(db, SAMPLE_NETWORK)
        click.echo(f"sample network: Q2/Q3 snapshot {snapshot['snapshot_id']} in {snapshot['seconds']} s")
        # After the Slack sample: the tagging project's items are its messages. New tokens each load.
        click.echo(f"sample tagging: {load_tagging_sample(db)}")
