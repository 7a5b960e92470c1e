"""Secrets that are safe by default: outside CHRONICLE_ENV=development the service refuses to start (at start-up,
naming the variable) with a missing or published cursor secret, Slack signing secret or admin token, and a bad
CHRONICLE_API_TOKENS fails at start-up in every mode; `bootstrap.sh serve` generates its secrets once; a rotated
cursor secret answers old cursors with a clean 400."""

from __future__ import annotations

import dataclasses
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from api.config import ConfigError, Settings
from api.paging import sign_cursor
from tests.helpers import READ_TOKEN

ROOT = Path(__file__).resolve().parents[1]
GOOD = {"CHRONICLE_ENV": "production", "CHRONICLE_CURSOR_SECRET": "c" * 40, "CHRONICLE_ADMIN_TOKEN": "a" * 40,
        "CHRONICLE_SLACK_SIGNING_SECRET": "s" * 32, "CHRONICLE_SLACK_SIGNING_SECRETS": "",
        "CHRONICLE_API_TOKENS": '{"' + "r" * 40 + '": {"workspaces": ["*"], "private": true}}'}


def from_env(monkeypatch, **changes: str) -> Settings:
    for name, value in {**GOOD, **changes}.items():
        monkeypatch.setenv(name, value)
    return Settings.from_env()


def test_production_settings_with_real_secrets_are_accepted(monkeypatch):
    settings = from_env(monkeypatch)
    assert not settings.development and settings.validate() is settings


@pytest.mark.parametrize(("variable", "value"), [
    ("CHRONICLE_CURSOR_SECRET", ""), ("CHRONICLE_CURSOR_SECRET", "dev-cursor-secret-change-me"),
    ("CHRONICLE_CURSOR_SECRET", "short"), ("CHRONICLE_ADMIN_TOKEN", ""), ("CHRONICLE_ADMIN_TOKEN", "dev-admin-token"),
    ("CHRONICLE_SLACK_SIGNING_SECRET", ""), ("CHRONICLE_SLACK_SIGNING_SECRET", "dev-signing-secret"),
    ("CHRONICLE_API_TOKENS", '{"dev-token": {"workspaces": ["*"]}}'),
])
def test_production_refuses_a_missing_or_published_secret(monkeypatch, variable, value):
    settings = from_env(monkeypatch, **{variable: value})
    with pytest.raises(ConfigError, match=variable) as refused:
        settings.validate()
    assert "refusing to start" in str(refused.value) and "CHRONICLE_ENV=development" in str(refused.value)


def test_per_workspace_signing_secrets_are_enough_but_none_may_be_empty(monkeypatch):
    from_env(monkeypatch, CHRONICLE_SLACK_SIGNING_SECRET="", CHRONICLE_SLACK_SIGNING_SECRETS="T1=abc").validate()
    with pytest.raises(ConfigError, match="CHRONICLE_SLACK_SIGNING_SECRETS"):
        from_env(monkeypatch, CHRONICLE_SLACK_SIGNING_SECRET="", CHRONICLE_SLACK_SIGNING_SECRETS="T1=").validate()


def test_development_starts_without_secrets_and_with_a_random_cursor_secret(monkeypatch):
    settings = from_env(monkeypatch, CHRONICLE_ENV="development", CHRONICLE_CURSOR_SECRET="",
                        CHRONICLE_ADMIN_TOKEN="", CHRONICLE_SLACK_SIGNING_SECRET="")
    assert settings.development and settings.validate() is settings
    assert len(settings.cursor_secret) >= 32 and settings.cursor_secret == Settings.from_env().cursor_secret


@pytest.mark.parametrize("tokens", ["{not json", "[]", '{"t": ["T1"]}', '{"t": {"workspaces": "T1"}}',
                                    '{"t": {"workspaces": ["T1"], "private": "yes"}}', '{"": {"workspaces": []}}',
                                    '{"t": {"workspace": ["T1"]}}'])
@pytest.mark.parametrize("mode", ["production", "development"])
def test_bad_api_tokens_fail_at_start_in_every_mode(monkeypatch, tokens, mode, db):
    from api.app import create_app

    settings = from_env(monkeypatch, CHRONICLE_ENV=mode, CHRONICLE_API_TOKENS=tokens)
    with pytest.raises(ConfigError, match="CHRONICLE_API_TOKENS"):
        settings.validate()
    with pytest.raises(ConfigError, match="CHRONICLE_API_TOKENS"):
        create_app(settings, database=db)  # at creation, not on the first request


def test_create_app_refuses_production_without_secrets(settings, db):
    from api.app import create_app

    unsafe = dataclasses.replace(settings, environment="production", admin_token="")
    with pytest.raises(ConfigError, match="CHRONICLE_ADMIN_TOKEN"):
        create_app(unsafe, database=db)


def test_gunicorn_refuses_to_start_naming_the_variable(tmp_path):
    env = {**os.environ, **GOOD, "CHRONICLE_CURSOR_SECRET": "", "CHRONICLE_BIND": "127.0.0.1:1",
           "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    out = subprocess.run([str(Path(sys.executable).parent / "gunicorn"), "-c", "gunicorn.conf.py", "api.wsgi:app"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "CHRONICLE_CURSOR_SECRET is empty" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_a_rotated_cursor_secret_answers_old_cursors_with_400(client, settings, sample_channel_cursor_scope):
    path, scope = sample_channel_cursor_scope
    old = sign_cursor({"p": 1_700_000_000_000_000}, b"the-previous-cursor-secret", scope)
    response = client.get(f"{path}?cursor={old}", headers={"Authorization": f"Bearer {READ_TOKEN}"})
    assert response.status_code == 400 and response.mimetype == "application/json"
    assert "cursor" in response.json["message"]


@pytest.fixture
def sample_channel_cursor_scope():
    from api.slack.http import timeline_scope

    return "/slack/teams/T1/channels/C1/messages", timeline_scope("T1", "C1")


def _bootstrap_secrets(state: Path, **env: str) -> str:
    """Run bootstrap.sh's ensure_local_secrets (the function `serve` calls) and print what it exported."""
    script = (ROOT / "bootstrap.sh").read_text()
    functions = "\n".join(re.search(rf"^{name}\(\) \{{\n.*?^\}}\n", script, re.M | re.S).group(0)
                          for name in ("ensure_local_secrets", "random_secret"))
    program = (f"set -euo pipefail\nVENV={ROOT / '.venv'}\nsay() {{ echo \"$*\"; }}\n{functions}\n"
               "ensure_local_secrets\nfor v in CHRONICLE_CURSOR_SECRET CHRONICLE_ADMIN_TOKEN "
               "CHRONICLE_SLACK_SIGNING_SECRET CHRONICLE_API_TOKENS; do echo \"$v=${!v}\"; done\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CHRONICLE_")}
    out = subprocess.run(["bash", "-c", program], env={**clean, "CHRONICLE_STATE_DIR": str(state), **env},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_bootstrap_generates_secrets_once_and_keeps_them_private(tmp_path, monkeypatch):
    state = tmp_path / "state"
    first = _bootstrap_secrets(state)
    assert "generated local secrets" in first  # printed once, when created
    secrets_file = state / "secrets.env"
    for path in (secrets_file, state / "read-token", state / "admin-token"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    exported = dict(line.split("=", 1) for line in first.splitlines() if line.startswith("CHRONICLE_"))
    read_token = (state / "read-token").read_text().strip()
    assert (state / "admin-token").read_text().strip() == exported["CHRONICLE_ADMIN_TOKEN"]
    assert read_token in exported["CHRONICLE_API_TOKENS"]
    for name in ("CHRONICLE_CURSOR_SECRET", "CHRONICLE_ADMIN_TOKEN", "CHRONICLE_SLACK_SIGNING_SECRET"):
        assert len(exported[name]) >= 32 and not exported[name].startswith("dev-")
    # The generated set passes the production checks.
    for name, value in {**exported, "CHRONICLE_ENV": "production", "CHRONICLE_SLACK_SIGNING_SECRETS": ""}.items():
        monkeypatch.setenv(name, value)
    Settings.from_env().validate()
    # Reused, not printed again; a variable set in the environment wins.
    second = _bootstrap_secrets(state, CHRONICLE_ADMIN_TOKEN="from-the-environment")
    assert "generated" not in second
    again = dict(line.split("=", 1) for line in second.splitlines() if line.startswith("CHRONICLE_"))
    assert again == {**exported, "CHRONICLE_ADMIN_TOKEN": "from-the-environment"}


def test_no_published_default_secret_in_product_code():
    """What the before-stop hook checks: no line of api/ holds a published default, except the refusal list."""
    offending = []
    for path in (ROOT / "api").rglob("*"):
        if path.suffix not in (".py", ".html", ".js", ".css", ".sh") or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if re.search(r"change-me|changeme|dev-cursor-secret", line) and not re.search(
                    r"development|refuse|test", line):
                offending.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offending == []
