"""Web API backfill against the loopback stand-in for Slack (tests/fakes/slack_web_api.py).

The expected archive is computed here from the fake's own messages (what Slack holds), never from Chronicle's
code; it is compared with what the read endpoints answer.
"""

from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner

from api.cli import chronicle as cli
from api.slack import backfill as bf
from api.slack.backfill import Backfill, BackfillError, Options
from tests.fakes.slack_web_api import DEFAULT_TOKEN, FIRST_TS, FakeSlackWebApi, ts_key, ts_str
from tests.slack.helpers import ALL

DAY = 86_400
NOW = FIRST_TS / 1_000_000 + 3 * DAY  # the runs' clock: three days after the first fake message


def _team() -> str:
    return f"T{uuid.uuid4().hex[:12].upper()}"


def _workspace(fake: FakeSlackWebApi) -> dict[str, str]:
    """Two public channels (one with a thread spanning pages, reactions, an edit, a file), a private one."""
    for uid, name, tz in (("U1", "ada", "Europe/Zurich"), ("U2", "bob", "America/New_York"), ("U3", "cy", None)):
        fake.add_user(uid, name, tz=tz, tz_offset=3600 if tz == "Europe/Zurich" else -18000, updated=1699990000,
                      profile={"real_name": name.title(), "display_name": name})
    fake.add_channel("CGEN", "general", topic="all things", created=1690000000, creator="U1")
    fake.add_channel("CRAND", "random")
    fake.add_channel("CPRIV", "secret", private=True)
    fake.set_members("CGEN", ["U1", "U2", "U3"])
    fake.set_members("CRAND", ["U1"])
    ts = {}
    ts["hello"] = fake.post("CGEN", "U1", "hello <@U2>")
    ts["parent"] = fake.post("CGEN", "U2", "a thread")
    for i in range(7):
        ts[f"reply{i}"] = fake.post("CGEN", "U3" if i % 2 else "U1", f"reply {i}", thread_ts=ts["parent"])
    ts["edited"] = fake.post("CGEN", "U1", "first text")
    fake.edit("CGEN", ts["edited"], "second text")
    ts["file"] = fake.post("CGEN", "U2", "a file", files=[{"id": "F0001", "name": "a.txt", "mimetype": "text/plain",
                                                           "url_private": "http://127.0.0.1:9/files/F0001"}])
    fake.react("CGEN", ts["hello"], "wave", "U2")
    fake.react("CGEN", ts["hello"], "wave", "U3")
    fake.react("CGEN", ts["parent"], "eyes", "U1")
    for i in range(5):
        ts[f"rand{i}"] = fake.post("CRAND", "U1", f"random {i}")
    ts["secret"] = fake.post("CPRIV", "U1", "private words")
    return ts


def _expected(fake: FakeSlackWebApi, channel: str) -> list[dict]:
    """What Slack holds for a channel, in the API's shape (oldest first); a tombstone as Slack shows it."""
    out = []
    for m in fake.messages(channel):
        item = {"ts": m["ts"], "user": m["user"], "text": m["text"]}
        if "thread_ts" in m:
            item["thread_ts"] = m["thread_ts"]
        if m.get("reactions"):
            item["reactions"] = sorted((r["name"], tuple(sorted(r["users"]))) for r in m["reactions"])
        out.append(item)
    return out


def _archived(client, team: str, channel: str, include_deleted: bool = False) -> list[dict]:
    got, cursor = [], None
    while True:
        query = {"limit": 3, "order": "asc", "include_deleted": str(include_deleted).lower()}
        if cursor:
            query["cursor"] = cursor
        body = client.get(f"/slack/teams/{team}/channels/{channel}/messages", query_string=query,
                          headers=ALL).get_json()
        for m in body["messages"]:
            item = {"ts": m["ts"], "user": m.get("user"), "text": m.get("text")}
            if "thread_ts" in m:
                item["thread_ts"] = m["thread_ts"]
            if m.get("reactions"):
                item["reactions"] = sorted((r["name"], tuple(sorted(r["users"]))) for r in m["reactions"])
            if include_deleted and m.get("deleted"):
                item["deleted"] = True
            got.append(item)
        cursor = body.get("next_cursor")
        if not cursor:
            return got


def _run(db, fake, team, **options) -> bf.Report:
    opts = Options(page_size=options.pop("page_size", 2), now=options.pop("now", NOW), **options)
    return Backfill(db, team, DEFAULT_TOKEN, opts, base_url=fake.base_url).run()


def test_a_backfill_archives_channels_threads_reactions_edits_users_and_member_counts(db, client):
    team = _team()
    with FakeSlackWebApi(team_id=team) as fake:
        ts = _workspace(fake)
        report = _run(db, fake, team)
        assert {c.channel_id for c in report.channels} == {"CGEN", "CRAND"}  # private only when configured
        assert report.users == 3
        for channel in ("CGEN", "CRAND"):
            assert _archived(client, team, channel) == _expected(fake, channel)
        # The thread's 7 replies came over 4 pages of conversations.replies (limit 2, the parent on each page).
        thread = client.get(f"/slack/teams/{team}/channels/CGEN/threads/{ts['parent']}", headers=ALL).get_json()
        assert [r["text"] for r in thread["replies"]] == [f"reply {i}" for i in range(7)]
        assert fake.count("conversations.replies") >= 4
        history = client.get(f"/slack/teams/{team}/channels/CGEN/messages/{ts['edited']}", headers=ALL).get_json()
        assert history["text"] == "second text" and history["edited_ts"]
        meta = client.get(f"/slack/teams/{team}/channels/CGEN", headers=ALL).get_json()
        assert meta["name"] == "general" and meta["topic"] == "all things" and meta["creator"] == "U1"
        assert client.get(f"/slack/teams/{team}/channels/CPRIV/messages", headers=ALL).get_json()["messages"] == []
        user = client.get(f"/slack/teams/{team}/users/U1", headers=ALL).get_json()
        assert (user["name"], user["tz"], user["tz_offset"], user["real_name"]) == ("ada", "Europe/Zurich", 3600,
                                                                                    "Ada")
        assert user["first_post"] == {"ts": ts["hello"], "channel_id": "CGEN"}
        from api.slack import channels
        assert [m for _, m, _ in channels.member_counts(db, team, "CGEN")] == [3]
        # The file is queued for the file worker like a live file_share.
        from api.workqueue import backlog
        assert backlog(db, "slack_files")["groups"].get(team) == 1


def test_a_second_run_sees_edits_deletes_removed_reactions_and_new_replies_in_its_refetch_window(db, client):
    team = _team()
    with FakeSlackWebApi(team_id=team) as fake:
        ts = _workspace(fake)
        _run(db, fake, team)
        fake.edit("CGEN", ts["hello"], "hello again")
        fake.delete("CGEN", ts["file"])
        fake.unreact("CGEN", ts["hello"], "wave", "U3")
        fake.delete("CGEN", ts["reply3"])
        late = fake.post("CGEN", "U2", "late reply", thread_ts=ts["parent"])
        fake.delete("CRAND", ts["rand4"])
        report = _run(db, fake, team, now=NOW + 3600)
        for channel in ("CGEN", "CRAND"):
            assert _archived(client, team, channel) == _expected(fake, channel)
        deleted = {m["ts"] for m in _archived(client, team, "CGEN", include_deleted=True) if m.get("deleted")}
        assert deleted == {ts["file"], ts["reply3"]}
        assert late in {m["ts"] for m in _archived(client, team, "CGEN")}
        gen = next(c for c in report.channels if c.channel_id == "CGEN")
        assert gen.reactions_removed == 1 and gen.deleted_seen >= 2
        # The window: 7 days (refetch) before the cursor, the newest ts the first run fetched in the channel
        # (it is later than 21 days (max_age) before now).
        assert gen.window[0] == ts_str(ts_key(ts["file"]) - 7 * DAY * 1_000_000)
        narrow = _run(db, fake, team, now=NOW + 3600, max_age_days=1)
        assert next(c for c in narrow.channels if c.channel_id == "CGEN").window[0] == ts_str(
            int((NOW + 3600 - DAY) * 1_000_000))


def test_a_deleted_thread_parent_with_replies_left_is_a_tombstone_and_reads_as_deleted(db, client):
    team = _team()
    with FakeSlackWebApi(team_id=team) as fake:
        ts = _workspace(fake)
        _run(db, fake, team)
        fake.delete("CGEN", ts["parent"])
        assert fake.message("CGEN", ts["parent"])["subtype"] == "tombstone"
        _run(db, fake, team, now=NOW + 60)
        # Shown as Slack shows it: the placeholder, with its replies, and nothing of the deleted text.
        shown = client.get(f"/slack/teams/{team}/channels/CGEN/messages/{ts['parent']}", headers=ALL)
        assert shown.status_code == 200
        placeholder = shown.get_json()
        assert placeholder["subtype"] == "tombstone" and placeholder["text"] == "This message was deleted."
        assert "a thread" not in shown.get_data(as_text=True) and "deleted" not in placeholder
        assert placeholder["reply_count"] == 7  # _workspace posts 7 replies, none deleted
        kept = client.get(f"/slack/teams/{team}/channels/CGEN/messages/{ts['parent']}",
                          query_string={"include_deleted": "true"}, headers=ALL).get_json()
        assert kept["text"] == "a thread" and kept["deleted"] is True  # the tombstone text never replaces it
        assert _archived(client, team, "CGEN") == _expected(fake, "CGEN")


def _tables(db, client, team: str) -> dict:
    out = {ch: _archived(client, team, ch, include_deleted=True) for ch in ("CGEN", "CRAND")}
    body = client.get(f"/slack/teams/{team}/users", headers=ALL).get_json()
    out["users"] = sorted((u["user_id"], u.get("name"), u.get("first_post", {}).get("ts")) for u in body["users"])
    return out


def test_a_run_killed_twice_resumes_at_its_page_and_ends_with_the_tables_of_an_uninterrupted_run(db, client):
    clean, broken = _team(), _team()
    with FakeSlackWebApi(team_id=clean) as a, FakeSlackWebApi(team_id=broken) as b:
        _workspace(a)
        _workspace(b)
        _run(db, a, clean)
        # A 500 that the client does not retry stops the run like a kill. First kill: at the first history page.
        b.fail_next("conversations.history", 1, status=500)
        with pytest.raises(BackfillError):
            _run(db, b, broken)
        # Second kill: CGEN's first page (2 messages) is stored, the second page dies fetching its thread.
        b.fail_next("conversations.replies", 1, status=500)
        with pytest.raises(BackfillError):
            _run(db, b, broken)
        state = db.execute(bf.SELECT_CURSOR, (broken, "CGEN")).one()
        assert state.run_latest and state.pages == 1 and state.page_cursor  # the run and its next page are kept
        b.reset_counters()
        _run(db, b, broken)
        # CGEN from its second (last) page: 1 request, CRAND's 5 messages in pages of 2: 3 requests.
        assert b.count("conversations.history") == 1 + 3
        assert _tables(db, client, broken) == _tables(db, client, clean)
        done = db.execute(bf.SELECT_CURSOR, (broken, "CGEN")).one()
        newest_top_level = max(ts_key(m["ts"]) for m in b.messages("CGEN") if m.get("thread_ts", m["ts"]) == m["ts"])
        assert done.run_latest == 0 and done.newest_ts == newest_top_level


def test_rate_limits_are_waited_out_and_a_budget_stops_the_run_with_exit_code_7(db, client, monkeypatch):
    team = _team()
    with FakeSlackWebApi(team_id=team) as fake:
        _workspace(fake)
        fake.retry_after_seconds = 1
        fake.force_429_every = 4
        report = _run(db, fake, team, page_size=50)
        assert report.requests_rate_limited >= 1
        times = [t for t, _, status in fake.requests if status == 429]
        assert times and _archived(client, team, "CGEN") == _expected(fake, "CGEN")
        # Every 429 was followed by a pause of at least Retry-After before the next request.
        requests = list(fake.requests)
        for i, (t, _, status) in enumerate(requests[:-1]):
            if status == 429:
                assert requests[i + 1][0] - t >= 1.0
        monkeypatch.setenv("CHRONICLE_SLACK_BOT_TOKENS", f"{team}={DEFAULT_TOKEN}")
        monkeypatch.setenv("CHRONICLE_SLACK_API_URL", fake.base_url)
        monkeypatch.setenv("CHRONICLE_KEYSPACE", db.keyspace)
        fake.force_429_every = 1
        result = CliRunner().invoke(cli, ["slack", "backfill", "--team", team, "--no-progress",
                                          "--rate-wait-budget", "0.5", "--keyspace", db.keyspace])
        assert result.exit_code == 7, result.output
        assert "rate limited" in result.output


@pytest.mark.parametrize("scopes, code, words", [
    (None, 5, "refused (invalid_auth)"),
    ({"channels:read", "users:read"}, 6, "lacks the scope channels:history"),
])
def test_a_refused_token_and_a_missing_scope_have_their_own_exit_codes(db, monkeypatch, scopes, code, words):
    team = _team()
    with FakeSlackWebApi(team_id=team, tokens={"xoxb-good": scopes or set()}) as fake:
        _workspace(fake)
        token = "xoxb-good" if scopes else "xoxb-wrong"
        monkeypatch.setenv("CHRONICLE_SLACK_BOT_TOKENS", f"{team}={token}")
        monkeypatch.setenv("CHRONICLE_SLACK_API_URL", fake.base_url)
        result = CliRunner().invoke(cli, ["slack", "backfill", "--team", team, "--no-progress", "--keyspace",
                                          db.keyspace])
        assert result.exit_code == code, result.output
        assert words in result.output
        assert token not in result.output  # the token is never printed


def test_dry_run_fetches_and_counts_but_writes_nothing(db, client, monkeypatch):
    team = _team()
    with FakeSlackWebApi(team_id=team) as fake:
        _workspace(fake)
        monkeypatch.setenv("CHRONICLE_SLACK_BOT_TOKENS", f"{team}={DEFAULT_TOKEN}")
        monkeypatch.setenv("CHRONICLE_SLACK_API_URL", fake.base_url)
        result = CliRunner().invoke(cli, ["slack", "backfill", "--team", team, "--dry-run", "--channels",
                                          "general,CRAND", "--max-age-days", "0", "--keyspace", db.keyspace])
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout[result.stdout.index("{"):])
        assert report["dry_run"] is True
        assert {c["name"]: (c["messages"], c["replies"]) for c in report["channels"]} == {
            "general": (4, 7), "random": (5, 0)}  # top-level messages and replies of each channel
        assert client.get(f"/slack/teams/{team}/channels/CGEN/messages", headers=ALL).get_json()["messages"] == []
        assert db.execute(bf.SELECT_CURSOR, (team, "CGEN")).one() is None
