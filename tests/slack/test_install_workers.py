"""The workers with installed tokens, against the loopback fake Slack: a bot token that expires during a backfill is
rotated and the run goes on (the old token dies, so a single call with it would fail the run); an app uninstalled
while the file worker downloads stops every download of that workspace at once, and the archive stays."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from api.slack import installations, messages
from api.slack.backfill import Backfill, Options
from api.slack.files import FileWorker
from api.slack.timeutil import ts_to_us
from tests.fakes.slack_file_host import FakeSlackFileHost
from tests.fakes.slack_web_api import FIRST_TS, FakeSlackWebApi
from tests.slack.helpers import post_envelope, post_event
from tests.slack.install_helpers import install, oauth_app


@pytest.fixture
def fake():
    with FakeSlackWebApi(team_id=f"TW{uuid.uuid4().hex[:10].upper()}") as f:
        yield f


@pytest.fixture
def served(settings, db, fake, clock):  # `db` applied the migrations
    with oauth_app(settings, fake, clock) as (app, oauth_db):
        client = app.test_client()
        assert install(client, fake).status_code == 200
        yield client, oauth_db


def test_a_token_rotated_during_a_backfill_is_picked_up(served, fake, clock):
    _, db = served
    fake.add_user("U1", "ada")
    fake.add_channel("CGEN", "general")
    posted = [fake.post("CGEN", "U1", f"message {i}") for i in range(8)]
    (first,) = fake.oauth.issued_tokens()
    runner = Backfill(db, fake.team_id, installations.bot_token(db, fake.team_id),
                      Options(page_size=2, now=FIRST_TS / 1_000_000 + 86_400), base_url=fake.base_url)
    installations.refreshing(runner.client, db, fake.team_id)
    calls = {"history": 0}
    inner = runner.client.api_call

    def api_call(method: str, *args, **kwargs):
        if method == "conversations.history":
            calls["history"] += 1
            if calls["history"] == 3:  # mid-run: 11 hours later the token is in its rotation window, then dies
                clock.advance(11 * 3600)
                fake.oauth.revoke(first)
        return inner(method, *args, **kwargs)

    runner.client.api_call = api_call
    report = runner.run()
    assert calls["history"] >= 4
    assert sum(c.messages for c in report.channels) == len(posted)
    assert ("refresh_token", True) in fake.oauth.exchanges
    rotated = installations.bot_token(db, fake.team_id)
    assert rotated != first and rotated in fake.tokens


def test_an_uninstall_during_file_downloads_stops_them_and_keeps_the_archive(served, fake, tmp_path):
    client, db = served
    (token,) = fake.oauth.issued_tokens()
    team, channel, ts = fake.team_id, f"C{uuid.uuid4().hex[:10].upper()}", "1700002000.000100"
    with FakeSlackFileHost(token=token) as host:
        files = [{"id": f"FU{i:04d}", "name": f"{i}.txt", "mimetype": "text/plain",
                  "url_private": f"{host.base_url}/files/FU{i:04d}"} for i in range(6)]
        event = {"type": "message", "subtype": "file_share", "channel": channel, "channel_type": "channel",
                 "user": "U1", "text": "", "ts": ts, "event_ts": ts, "files": files}
        assert post_event(client, team, event).status_code == 200
        slack = dataclasses.replace(db.settings.slack, files_root=str(tmp_path / "files"), s3_bucket="",
                                    file_hosts=(host.file_host,), batch_size=2, concurrency=1, max_attempts=3)
        worker = FileWorker(db, slack)
        try:
            first = worker.run_once()
            assert first.stored == 2 and sum(host.hits.values()) == 2  # downloading with the installed token
            uninstalled = {"type": "event_callback", "team_id": team, "event_id": f"Ev{uuid.uuid4().hex[:8]}",
                           "event_time": int(db.clock.time()), "event": {"type": "app_uninstalled"}}
            assert post_envelope(client, uninstalled).status_code == 200
            rest = [worker.run_once() for _ in range(4)]
        finally:
            worker.stop()
        # Not one more request. (The worker serves every workspace of the keyspace: a file another test left due
        # may fail beside these; this workspace's four are counted on its message row below.)
        assert sum(s.failed for s in rest) >= 4 and sum(host.hits.values()) == 2
    row = messages.find(db, team, [channel], ts_to_us(ts), include_deleted=False)
    assert row is not None and len(row.files_stored) == 2  # the archive is kept, with what was stored
    assert len(row.files_fetch_error) == 4 and all("uninstalled" in error for error in row.files_fetch_error.values())
    assert installations.installation(db, team)["state"] == "uninstalled"
