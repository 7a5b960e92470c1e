"""`chronicle slack manifest | token-key | installations | reencrypt-tokens`: the installable Slack app
(docs/slack-app.md). `register` adds them to the `slack` group (the last lines of api/cli/slack.py): this module
does not import that one, so the command modules stay free of import cycles."""

from __future__ import annotations

from urllib.parse import urlsplit

import click

from api.cli.common import CONTEXT, Exit, cassandra_errors, database, emit, fail, keyspace_option


def _https_origin(ctx: click.Context, param: click.Parameter, value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme != "https" or not parts.hostname or parts.query or parts.fragment:
        fail(f"--url {value!r}: Slack needs the https origin Chronicle is served at (e.g. https://chronicle.acme.com)",
             Exit.USAGE)
    return value.rstrip("/")


@click.command("manifest", context_settings=CONTEXT, short_help="Print the Slack app manifest for a host.")
@click.option("--url", required=True, callback=_https_origin,
              help="The https origin Chronicle is served at (the events and OAuth redirect URLs hang off it).")
@click.option("--socket-mode", is_flag=True, help="Socket Mode on: no public events URL.")
def manifest_command(url: str, socket_mode: bool) -> None:
    """Print the app manifest (YAML) filled in for URL: paste it into https://api.slack.com/apps > Create New App >
    From a manifest (docs/slack-app.md). Exit codes: 0 printed, 2 the URL is not an https origin."""
    from api.slack import manifest

    click.echo(manifest.render(url, socket_mode=socket_mode), nl=False)


@click.command("token-key", context_settings=CONTEXT, short_help="Print a new key for CHRONICLE_SLACK_TOKEN_KEYS.")
def token_key() -> None:
    """Print a new Fernet key. Put it FIRST in CHRONICLE_SLACK_TOKEN_KEYS (comma-separated, newest first), restart,
    run `chronicle slack reencrypt-tokens`, then drop the old key (docs/slack-app.md, "Key rotation")."""
    from api.slack import installations

    click.echo(installations.new_key())


@click.command("installations", context_settings=CONTEXT, short_help="List the app's installations.")
@keyspace_option
def list_installations(keyspace: str | None) -> None:
    """Print every installation as JSON lines (workspace, state, scopes, when; never a token).
    Exit codes: 0 listed, 3 Cassandra unreachable."""
    from api.slack import installations

    db = database(keyspace)
    with cassandra_errors():
        for item in installations.installations(db):
            emit(item)


@click.command("reencrypt-tokens", context_settings=CONTEXT, short_help="Re-encrypt stored tokens with the first key.")
@keyspace_option
def reencrypt_tokens(keyspace: str | None) -> None:
    """Encrypt every stored bot token again with the first key of CHRONICLE_SLACK_TOKEN_KEYS (after a key rotation);
    prints counts. Exit codes: 0 done, 2 no key configured or a token no key decrypts, 3 Cassandra unreachable."""
    from cryptography.fernet import InvalidToken

    from api.slack import installations

    db = database(keyspace)
    with cassandra_errors():
        try:
            emit(installations.reencrypt(db))
        except (installations.NoToken, InvalidToken) as exc:
            fail(str(exc) or "a stored token does not decrypt with any configured key", Exit.USAGE)


def register(group: click.Group) -> None:
    """Add this module's commands to the `slack` group."""
    for command in (manifest_command, token_key, list_installations, reencrypt_tokens):
        group.add_command(command)
