"""The OAuth v2 install end to end over HTTP against the loopback fake Slack (its consent page and
oauth.v2.access): tokens stored encrypted and found by `installations.bot_token`; every refusal (state reused,
expired, wrong, consent denied, a revoked token) is a clear page and stores nothing; rotation; uninstall and
revocation events; org installs; key rotation; and no token, refresh token or client secret in any log line."""

from __future__ import annotations

import dataclasses
import logging

import pytest
from cryptography.fernet import Fernet

from api.config import ConfigError, Settings, SlackAppSettings
from api.slack import installations
from api.slack.reports import blocks, service
from tests.fakes.slack_oauth import CLIENT_SECRET
from tests.fakes.slack_web_api import FakeSlackWebApi
from tests.slack.helpers import post_envelope
from tests.slack.install_helpers import KEY, consent, install, oauth_app


@pytest.fixture
def fake():
    import uuid

    with FakeSlackWebApi(team_id=f"TI{uuid.uuid4().hex[:10].upper()}", team_name="Acme") as f:
        yield f


@pytest.fixture
def served(settings, db, fake, clock):  # `db` applied the migrations
    with oauth_app(settings, fake, clock) as (app, db):
        yield app.test_client(), db


def _raw_row(db, team_id: str):
    return db.execute(installations.SELECT_INSTALLATION, (f"T:{team_id}",)).one()


def test_install_stores_the_token_encrypted_and_every_worker_finds_it(served, fake, caplog, capsys):
    client, db = served
    caplog.set_level(logging.DEBUG)
    front = client.get("/")
    assert front.status_code == 200 and 'href="/slack/install"' in front.text
    done = install(client, fake)
    assert done.status_code == 200, done.text
    assert "Chronicle is installed" in done.text and "Acme" in done.text and fake.team_id in done.text
    (token,) = fake.oauth.issued_tokens()
    row = _raw_row(db, fake.team_id)
    assert row.state == "active" and row.bot_user_id == fake.bot_user_id and row.bot_id == fake.bot_id
    assert token.encode() not in row.bot_token and b"xoxe-1-" not in row.bot_refresh_token  # encrypted at rest
    assert Fernet(KEY.encode()).decrypt(row.bot_token).decode() == token
    assert "files:read" in row.bot_scopes.split(",") and row.installer_user_id == "U0INSTALLER"
    assert installations.bot_token(db, fake.team_id) == token
    # The scopes asked for are the manifest's.
    assert fake.oauth.exchanges == [("code", True)]
    # Not one secret in any log line of the whole flow (ours, slack-sdk's, werkzeug's), at DEBUG.
    logged = caplog.text + capsys.readouterr().err
    assert "slack_app_installed" in logged
    for secret in (token, "xoxe-1-secretrefresh", CLIENT_SECRET, "secretbot"):
        assert secret not in logged


def test_refusals_are_clear_pages_and_store_nothing(served, fake, clock):
    client, db = served
    # Consent denied: the state is used up, nothing stored.
    denied = client.get(consent(client, fake, choice="deny"))
    assert denied.status_code == 403 and "Install cancelled" in denied.text
    # Wrong state: the cookie of this browser names another state.
    back = consent(client, fake)
    client.set_cookie("chronicle_slack_oauth_state", "someone-elses-state", path="/slack/")
    wrong = client.get(back)
    assert wrong.status_code == 400 and "Wrong state" in wrong.text
    # Expired: the consent took longer than the state's lifetime.
    back = consent(client, fake)
    clock.advance(601)
    expired = client.get(back)
    assert expired.status_code == 400 and "expired" in expired.text
    # A token revoked before Chronicle checked it (auth.test answers token_revoked).
    fake.oauth.revoke_on_issue = True
    revoked = install(client, fake)
    assert revoked.status_code == 400 and "token_revoked" in revoked.text
    fake.oauth.revoke_on_issue = False
    assert _raw_row(db, fake.team_id) is None
    # Reuse: the same redirect twice (same cookie too) installs once, then refuses.
    back = consent(client, fake)
    first = client.get(back)
    assert first.status_code == 200
    client.set_cookie("chronicle_slack_oauth_state", back.split("state=")[1].split("&")[0], path="/slack/")
    again = client.get(back)
    assert again.status_code == 400 and "already used" in again.text
    # Bad input is a 400 page, never a 500.
    assert client.get("/slack/oauth_redirect?state=" + "x" * 300).status_code == 400
    assert client.get("/slack/oauth_redirect").status_code == 400


def test_token_rotation_uninstall_and_reinstall(served, fake, clock):
    client, db = served
    assert install(client, fake).status_code == 200
    (first,) = fake.oauth.issued_tokens()
    assert installations.bot_token(db, fake.team_id) == first
    # Within 2 hours of expiry (12 h tokens), the next lookup rotates: one refresh, the new pair stored.
    clock.advance(43_200 - 7_000)
    db.caches.clear()
    second = installations.bot_token(db, fake.team_id)
    assert second != first and second in fake.tokens
    assert fake.oauth.exchanges == [("code", True), ("refresh_token", True)]
    assert installations.bot_token(db, fake.team_id) == second  # not due again: no second refresh
    assert len(fake.oauth.exchanges) == 2
    # tokens_revoked naming only user tokens changes nothing; app_uninstalled disables the workspace.
    revoked_users = {"type": "event_callback", "team_id": fake.team_id, "event_id": "EvR1",
                     "event_time": int(clock.time()), "event": {"type": "tokens_revoked",
                                                               "tokens": {"oauth": ["U1"]}}}
    assert post_envelope(client, revoked_users).status_code == 200
    assert installations.installation(db, fake.team_id)["state"] == "active"
    uninstalled = {"type": "event_callback", "team_id": fake.team_id, "event_id": "EvU1",
                   "event_time": int(clock.time()), "event": {"type": "app_uninstalled"}}
    assert post_envelope(client, uninstalled).status_code == 200
    assert installations.installation(db, fake.team_id)["state"] == "uninstalled"
    with pytest.raises(installations.NoToken, match="uninstalled"):
        installations.bot_token(db, fake.team_id)
    with pytest.raises(blocks.PostError, match="uninstalled"):  # report posting asks the same lookup
        service.post({"team_id": fake.team_id}, db.settings.slack, db=db)
    # A reinstall makes it active again; a late redelivery of the old uninstall does not undo it.
    clock.advance(5)
    assert install(client, fake).status_code == 200
    assert post_envelope(client, uninstalled).status_code == 200
    assert installations.installation(db, fake.team_id)["state"] == "active"
    assert installations.bot_token(db, fake.team_id) in fake.tokens
    # tokens_revoked naming the bot's token: revoked, the same way.
    clock.advance(5)
    revoked_bot = {**revoked_users, "event_id": "EvR2", "event_time": int(clock.time()),
                   "event": {"type": "tokens_revoked", "tokens": {"bot": [fake.bot_user_id]}}}
    assert post_envelope(client, revoked_bot).status_code == 200
    with pytest.raises(installations.NoToken, match="revoked"):
        installations.bot_token(db, fake.team_id)


def test_org_install_serves_every_workspace_of_the_org(served, fake):
    client, db = served
    fake.oauth.org_install = True
    fake.oauth.enterprise_id = f"E{fake.team_id[2:]}"
    done = install(client, fake)
    assert done.status_code == 200 and "Enterprise Grid" in done.text
    (token,) = fake.oauth.issued_tokens()
    assert installations.bot_token(db, "TSOMEWS01", enterprise_id=fake.oauth.enterprise_id) == token
    with pytest.raises(installations.NoToken, match="install the app"):
        installations.bot_token(db, "TSOMEWS01")  # no workspace install, no environment token
    # An event from a workspace of the org names the org (as Slack's envelopes do, top level and in
    # authorizations): from then on, callers that know only the workspace (the file worker, reports, backfill)
    # find the org's token. The listing still shows one installation, the org's.
    for team, envelope_org in (("TSOMEWS01", {"enterprise_id": fake.oauth.enterprise_id}),
                               ("TSOMEWS02", {"authorizations": [{"enterprise_id": fake.oauth.enterprise_id,
                                                                  "team_id": None, "is_enterprise_install": True}]})):
        event = {"type": "event_callback", "team_id": team, "event_id": f"Ev{team}", "event_time": 1767225600,
                 "event": {"type": "reaction_added", "user": "U1", "reaction": "tada", "event_ts": "1767225600.1",
                           "item": {"type": "message", "channel": "C1", "ts": "1767225500.000100"}},
                 **envelope_org}
        assert post_envelope(client, event).status_code == 200
        assert installations.bot_token(db, team) == token
    listed = [i for i in installations.installations(db) if i["enterprise_id"] == fake.oauth.enterprise_id]
    assert [i["org_install"] for i in listed] == [True]
    with pytest.raises(installations.NoToken, match="install the app"):
        installations.bot_token(db, "TSOMEWS03")  # a workspace of no known org


def test_backfill_names_the_org_of_a_workspace(db):
    from click.testing import CliRunner

    from api.cli import chronicle as cli

    bad = CliRunner().invoke(cli, ["slack", "backfill", "--team", "TSOMEWS04", "--enterprise", "not-an-org"])
    assert bad.exit_code == 2 and "Enterprise Grid org id" in bad.output
    # A good org id is recorded before the token is looked up: with no install of that org, the usual exit 2.
    missing = CliRunner().invoke(cli, ["slack", "backfill", "--team", "TSOMEWS04", "--enterprise", "EORG4NONE"])
    assert missing.exit_code == 2 and "install the app" in missing.output
    assert db.execute(installations.SELECT_INSTALLATION, ("M:TSOMEWS04",)).one().enterprise_id == "EORG4NONE"


def test_key_rotation_reencrypts_every_token(served, fake, settings, clock):
    client, db = served
    assert install(client, fake).status_code == 200
    (token,) = fake.oauth.issued_tokens()
    new = Fernet.generate_key().decode()
    db.settings = dataclasses.replace(db.settings, slack_app=dataclasses.replace(db.settings.slack_app,
                                                                                 token_keys=(new, KEY)))
    assert installations.reencrypt(db)["reencrypted"] >= 1
    db.settings = dataclasses.replace(db.settings, slack_app=dataclasses.replace(db.settings.slack_app,
                                                                                 token_keys=(new,)))
    db.caches.clear()
    assert installations.bot_token(db, fake.team_id) == token  # the old key is no longer needed


def test_settings_refuse_missing_or_malformed_secrets():
    production = Settings.from_env()
    production = dataclasses.replace(production, environment="production")
    assert any("CHRONICLE_SLACK_CLIENT_SECRET is empty" in p for p in SlackAppSettings(client_id="1.2").problems(False))
    problems = SlackAppSettings(client_id="1.2", client_secret="changeme").problems(False)
    assert any("CLIENT_SECRET" in p and "published" in p for p in problems)
    assert any("CHRONICLE_SLACK_TOKEN_KEYS is empty" in p for p in problems)
    assert SlackAppSettings(client_id="1.2").problems(True) == []  # development: OAuth simply stays off
    assert "not a Fernet key" in SlackAppSettings(token_keys=("nope",)).problems(True)[0]
    with pytest.raises(ConfigError, match="CHRONICLE_SLACK_TOKEN_KEYS"):
        dataclasses.replace(production, slack_app=SlackAppSettings(client_id="1.2", client_secret="x" * 20)
                            ).validate()
