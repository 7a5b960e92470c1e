"""Chronicle's one command line: `chronicle <group> <command>` (declared in pyproject.toml `[project.scripts]`).

One module per area: `node` (Cassandra nodes), `migrate`, `sample`, `slack`, `network`, `activity`,
`tagging`; `common` holds what they share (exit codes, JSON output, error handling, progress bars). The files
in runtime_scripts/ and cleaning_scripts/ are thin wrappers around these commands, kept for the names users and
the seeds know.
"""

from __future__ import annotations

import logging
import sys

import click

from api.cli.activity import activity
from api.cli.common import CONTEXT, EXIT_CODES_DOC, Runtime
from api.cli.erase import erase
from api.cli.migrate import migrate
from api.cli.network import network
from api.cli.node import node
from api.cli.retention import retention
from api.cli.sample import sample
from api.cli.slack import slack
from api.cli.slack_app import register as register_slack_app
from api.cli.slack_socket import socket_mode
from api.cli.tagging import tagging


class _Chronicle(click.Group):
    """The root group: its help lists the groups, then every command by its full path."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_commands(ctx, formatter)
        leaves: list[tuple[str, click.Command]] = []

        def walk(group: click.Group, prefix: str) -> None:
            for name in group.list_commands(ctx):
                command = group.get_command(ctx, name)
                if command is None or command.hidden:
                    continue
                if isinstance(command, click.Group):
                    walk(command, f"{prefix}{name} ")
                else:
                    leaves.append((f"{prefix}{name}", command))

        walk(self, "")
        limit = formatter.width - 6 - max(len(path) for path, _ in leaves)
        with formatter.section("Every command"):
            formatter.write_dl([(path, command.get_short_help_str(limit)) for path, command in leaves])


@click.group("chronicle", cls=_Chronicle, context_settings=CONTEXT, epilog=EXIT_CODES_DOC)
@click.pass_context
def chronicle(ctx: click.Context) -> None:
    """Chronicle's admin commands: Cassandra nodes, schema migrations, sample data, Slack file worker and
    follower-network jobs. Settings come from CHRONICLE_* environment variables (README "Configuration").
    """
    # Every command's logs (the driver's and ours, as JSON) go to stderr: stdout carries its JSON output only.
    # Unconfigured, structlog printed plain lines to stdout ahead of a worker's summary.
    from api.config import log_level
    from api.observability import configure_logging

    configure_logging(log_level(), stream=sys.stderr)
    logging.getLogger("cassandra").setLevel(logging.WARNING)  # the driver's connection chatter
    # One runtime per command (settings validated once, one Database), closed when the command ends.
    ctx.obj = Runtime()
    ctx.call_on_close(ctx.obj.close)


for command in (node, migrate, sample, slack, network, activity, tagging, retention, erase):
    chronicle.add_command(command)
register_slack_app(slack)  # the Slack app's commands: manifest, token-key, installations, reencrypt-tokens
slack.add_command(socket_mode)


def main() -> None:
    chronicle()


__all__ = ["chronicle", "main"]
