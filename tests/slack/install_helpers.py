"""What the install tests share: an app with the Slack app configured against the loopback fake Slack, and the
install walked through over HTTP (the test client plays the browser, the fake plays Slack's consent page)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from contextlib import contextmanager
from html import unescape
from typing import Any
from urllib.parse import urlsplit

import requests
from cryptography.fernet import Fernet

from api.config import Settings, SlackAppSettings
from api.db import Database, installed_db, set_db
from tests.fakes.slack_oauth import CLIENT_ID, CLIENT_SECRET
from tests.fakes.slack_web_api import FakeSlackWebApi

KEY = Fernet.generate_key().decode()


def oauth_settings(settings: Settings, fake: FakeSlackWebApi, *, keys: tuple[str, ...] = (KEY,)) -> Settings:
    app = SlackAppSettings(client_id=CLIENT_ID, client_secret=CLIENT_SECRET, token_keys=keys,
                           authorize_url=fake.base_url.replace("/api/", "/oauth/v2/authorize"), state_ttl=600,
                           rotate_before=7200)
    return dataclasses.replace(settings, slack_app=app,
                               slack=dataclasses.replace(settings.slack, api_url=fake.base_url, bot_token="",
                                                         bot_tokens={}))


@contextmanager
def oauth_app(settings: Settings, fake: FakeSlackWebApi, clock: Any) -> Iterator[tuple[Any, Database]]:
    """An app (and its Database, on the run's keyspace, with `clock`) whose Slack app is the fake's."""
    from api.app import create_app

    before = installed_db()
    db = Database(oauth_settings(settings, fake), clock=clock)
    try:
        yield create_app(db.settings, database=db), db
    finally:
        set_db(before)  # the session's Database is the process's again
        db.close()


def href(page: str, element_id: str) -> str:
    found = re.search(rf'id="?{element_id}"?[^>]*href="([^"]+)"', page) or \
        re.search(rf'href="([^"]+)"[^>]*id="?{element_id}"?', page)
    assert found, f"no #{element_id} link in the page"
    return unescape(found.group(1))


def consent(client: Any, fake: FakeSlackWebApi, *, choice: str = "allow") -> str:
    """GET /slack/install, then Slack's consent page; returns the local redirect (path and query) Slack sends
    the browser back to after `choice` (allow or deny)."""
    fake.oauth.default_redirect_uri = "http://localhost/slack/oauth_redirect"
    start = client.get("/slack/install")
    assert start.status_code == 200, start.text
    page = requests.get(href(start.text, "add-to-slack"), timeout=10)
    assert page.status_code == 200, page.text
    back = urlsplit(href(page.text, choice))
    return f"{back.path}?{back.query}"


def install(client: Any, fake: FakeSlackWebApi) -> Any:
    return client.get(consent(client, fake))
