"""Fixtures of the archive pages' tests: an app whose API tokens include three scoped to this run's workspaces,
and one workspace filled through the real paths (signed Events API requests; the file worker fetching from the
loopback stand-in for Slack's file host into a local store; the activity builder). Plain data: viewer_data.py.
"""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from api.activity import calendar, service
from api.slack import messages
from api.slack.files import FileWorker
from api.slack.settings import SlackSettings
from api.slack.timeutil import ts_to_us
from tests.fakes.slack_file_host import FakeSlackFileHost
from tests.helpers import TEST_API_TOKENS
from tests.slack.helpers import channel_event, created, delete, edit, msg, post_event, reaction, rename
from tests.viewer.viewer_data import Archive, build_archive

BOT_TOKEN = "xoxb-viewer-test"


@pytest.fixture(scope="session")
def viewer_archive(tmp_path_factory) -> Archive:
    """What the archive will hold (team ids, tokens, every message with its fate), decided before anything is
    posted: the tests compare the pages with this, not with what the code stored."""
    return build_archive(now=datetime.now(UTC), files_root=tmp_path_factory.mktemp("viewer-files"))


@pytest.fixture(scope="session")
def app(settings, db, viewer_archive: Archive):
    """The app with this run's viewer tokens added to the suite's (the REST API and the pages read the same
    CHRONICLE_API_TOKENS), and CHRONICLE_FILES_ROOT pointing at this run's object store."""
    from api.app import create_app

    tokens = {**TEST_API_TOKENS, **viewer_archive.tokens}
    slack = dataclasses.replace(settings.slack, files_root=str(viewer_archive.files_root))
    application = create_app(dataclasses.replace(settings, api_tokens=json.dumps(tokens), slack=slack), database=db)
    application.config["TESTING"] = True
    return application


@pytest.fixture(scope="session")
def filled(app, db, viewer_archive: Archive) -> Archive:
    """The archive filled through the Events API, the file worker and the activity builder."""
    a = viewer_archive
    client = app.test_client()

    def post(team: str, event: dict) -> None:
        r = post_event(client, team, event)
        assert r.status_code == 200 and r.json["outcome"] == "stored", (event.get("type"), r.json)

    for team in (a.team, a.other_team):
        for user in a.users:
            post(team, {"type": "team_join", "event_ts": a.setup_ts(0), "user": user})
    for channel_id, name in a.channels.items():
        post(a.team, created(channel_id, name, a.setup_ts(1)))
    post(a.other_team, created(a.other_channel, "elsewhere", a.setup_ts(1)))
    post(a.other_team, msg(a.other_channel, a.setup_ts(2), "a message of another workspace", user="UANN"))
    post(a.team, channel_event("channel_convert_to_private", a.private_channel, a.setup_ts(3)))
    post(a.team, rename(a.renamed_channel, a.renamed_to, a.setup_ts(4)))
    post(a.team, channel_event("channel_archive", a.renamed_channel, a.setup_ts(5), user="UANN"))
    post(a.team, {"type": "channel_deleted", "channel": a.deleted_channel, "event_ts": a.setup_ts(6)})

    with FakeSlackFileHost(token=BOT_TOKEN) as host:
        for m in a.messages:
            for f in m.files:
                if not f.get("is_external"):
                    f["url_private"] = f"{host.base_url}/files/{f['id']}"
            extra = {"thread_ts": m.thread_ts} if m.thread_ts else {}
            if m.files:
                extra.update(subtype="file_share", files=m.files)
            event = msg(m.channel, m.ts, m.text, user=m.user, **extra)
            if m.channel == a.private_channel:
                event["channel_type"] = "group"  # what Slack sends once the channel is private
            post(a.team, event)
        for m in a.messages:
            previous, previous_edit = m.text, None
            for at, text in m.edits:
                post(a.team, edit(m.channel, m.ts, text, previous, at, user=m.user, prev_edited=previous_edit))
                previous, previous_edit = text, at
            for emoji, user, at in m.reactions:
                post(a.team, reaction("added", m.channel, m.ts, emoji, user, at))
            if m.deleted_at:
                event = delete(m.channel, m.ts, m.deleted_at)
                event["previous_message"].update(user=m.user, **({"thread_ts": m.thread_ts} if m.thread_ts else {}))
                post(a.team, event)
        slack = dataclasses.replace(SlackSettings.from_env(), bot_tokens={}, bot_token=BOT_TOKEN,
                                    files_root=str(a.files_root), s3_bucket="", max_attempts=2,
                                    backoff_seconds=0.05, backoff_max_seconds=0.1, download_timeout=2.0,
                                    file_hosts=(host.file_host,))
        worker = FileWorker(db, slack)
        wanted = [(a.team, m.channel, ts_to_us(m.ts), f["id"]) for m in a.messages for f in m.files
                  if not f.get("is_external")]
        deadline = time.monotonic() + 30
        try:
            while not all(messages.files_finished(db, wanted)):
                assert time.monotonic() < deadline, "the file worker did not store the test files"
                if worker.run_once().total() == 0:
                    time.sleep(0.05)
        finally:
            worker.stop()

    # Activity days as the dirty worker would build them (the same builder), for the users' calendars.
    archive = service.Archive.slack(a.team)
    first = a.first_time.date() - timedelta(days=1)
    last = datetime.now(UTC).date() + timedelta(days=1)
    service.rebuild_days(db, archive, {u["id"]: calendar.date_range(first, last) for u in a.users})
    return a


@pytest.fixture(scope="session")
def artifacts() -> Path:
    from tests.browser import ARTIFACTS

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
