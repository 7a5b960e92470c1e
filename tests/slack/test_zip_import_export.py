"""Export ZIP import and export back, against exports written by tests/fakes/slack_export.py.

The generator keeps its own model of what it wrote (from its random choices, not from Chronicle's code): the
read endpoints' answers after an import are compared with that model.
"""

from __future__ import annotations

import dataclasses
import io
import json
import uuid
import zipfile

import pytest
from click.testing import CliRunner

from api.cli import chronicle as cli
from api.db import Database
from api.slack import channels, messages, users, zip_export, zip_import
from api.slack.zip_import import BadArchive, Limits
from api.workqueue import backlog
from tests.fakes.slack_export import ExportSpec, write_export
from tests.slack.helpers import ALL

SPEC = ExportSpec(seed=7, messages=400, days=9, n_channels=3, n_private=1, n_dms=1, n_mpims=1, n_deleted=1,
                  n_archived=1, thread_span_days=3)


def _team() -> str:
    return f"T{uuid.uuid4().hex[:12].upper()}"


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    path = tmp_path_factory.mktemp("exports") / "workspace.zip"
    return write_export(path, SPEC, keep_expected=True)


def _timeline(client, team: str, channel: str) -> dict[str, dict]:
    got, cursor = {}, None
    while True:
        query = {"limit": 200, "order": "asc", **({"cursor": cursor} if cursor else {})}
        body = client.get(f"/slack/teams/{team}/channels/{channel}/messages", query_string=query,
                          headers=ALL).get_json()
        for m in body["messages"]:
            got[m["ts"]] = {
                "user": m.get("user"), "text": m.get("text"), "subtype": m.get("subtype"),
                "thread_ts": m.get("thread_ts"), "edited_ts": m.get("edited_ts"),
                "reactions": {r["name"]: sorted(r["users"]) for r in m.get("reactions", ())},
                "files": [f["id"] for f in m.get("files", ())], "bot_id": m.get("bot_id")}
        cursor = body.get("next_cursor")
        if not cursor:
            return got


def _expected_timeline(expected, channel: str) -> dict[str, dict]:
    return {ts: {"user": m["user"], "text": m["text"], "subtype": m["subtype"], "thread_ts": m["thread_ts"],
                 "edited_ts": m["edited_ts"], "reactions": {e: sorted(u) for e, u in m["reactions"].items()},
                 "files": list(m["files"]), "bot_id": m["bot_id"]}
            for (ch, ts), m in expected.messages.items() if ch == channel}


def test_an_export_imports_every_channel_message_thread_reaction_file_and_user(db, client, export):
    team = _team()
    expected = export.expected
    report = zip_import.import_export(db, str(export.path), team_id=team, include_private=True)
    conversations = {cid: c for cid, c in expected.channels.items() if c["kind"] in ("public", "private")}
    for channel_id in conversations:
        assert _timeline(client, team, channel_id) == _expected_timeline(expected, channel_id), channel_id
    assert report.messages == sum(export.per_channel[c] for c in conversations)
    # Direct messages are never archived: their day files are counted as skipped, not stored.
    assert report.skipped["direct-message day file (direct messages are never archived)"] > 0
    for channel_id, c in conversations.items():
        meta = client.get(f"/slack/teams/{team}/channels/{channel_id}", headers=ALL).get_json()
        assert meta["name"] == c["name"]
        assert meta["visibility"] == ("private" if c["private"] else "public")
        assert meta.get("archived", False) == c["archived"]
        assert meta.get("topic", "") == c["topic"] and meta.get("purpose", "") == c["purpose"]
    listed, cursor = [], None
    while True:
        body = client.get(f"/slack/teams/{team}/users", query_string={"limit": 3, **(
            {"cursor": cursor} if cursor else {})}, headers=ALL).get_json()
        listed.extend(body["users"])
        cursor = body["next_cursor"]
        if not cursor:
            break
    profiles = {u["user_id"]: u for u in listed if "name" in u}
    assert {uid: (u["name"], bool(u.get("deleted")), bool(u.get("is_bot")), u.get("tz"))
            for uid, u in profiles.items()} == {
        uid: (u["name"], u["deleted"], u["is_bot"], u["tz"]) for uid, u in expected.users.items()}
    # First post per user: the earliest plain message (or broadcast) of each user in the imported channels.
    firsts: dict[str, tuple[int, str, str]] = {}
    for (ch, ts), m in expected.messages.items():
        if ch in conversations and m["user"] and m["subtype"] in (None, "thread_broadcast"):
            key = (int(ts.replace(".", "")), ts, ch)
            firsts[m["user"]] = min(firsts.get(m["user"], key), key)
    for uid, (_, ts, ch) in firsts.items():
        assert users.get(db, team, uid)["first_post"] == {"ts": ts, "channel_id": ch}
    # Files in exports are links: queued for the file worker like live file_share events.
    files = sum(len(m["files"]) for (ch, _), m in expected.messages.items() if ch in conversations)
    assert files and backlog(db, "slack_files")["groups"].get(team) == files


def test_importing_the_same_zip_again_stores_nothing_twice_and_a_killed_import_resumes(db, client, export):
    clean, killed = _team(), _team()
    zip_import.import_export(db, str(export.path), team_id=clean)
    calls = {"n": 0}

    def die_after_a_few(_channel: str, _n: int) -> None:
        calls["n"] += 1
        if calls["n"] == 7:
            raise KeyboardInterrupt  # a kill between two day files (some stored, their group not recorded)

    with pytest.raises(KeyboardInterrupt):
        zip_import.import_export(db, str(export.path), team_id=killed, progress=die_after_a_few, group_messages=20)
    resumed = zip_import.import_export(db, str(export.path), team_id=killed)
    # The day files of the groups written before the kill are skipped; the rest is imported now.
    assert resumed.day_files_done_before > 0 and 0 < resumed.messages < export.messages
    again = zip_import.import_export(db, str(export.path), team_id=killed)
    assert again.messages == 0 and again.day_files_done_before > 0
    public = [cid for cid, c in export.expected.channels.items() if c["kind"] == "public"]
    for channel_id in public:
        assert _timeline(client, killed, channel_id) == _timeline(client, clean, channel_id)
    assert backlog(db, "slack_files")["groups"].get(killed) == backlog(db, "slack_files")["groups"].get(clean)


def test_a_group_that_times_out_is_sent_again_and_the_import_completes(db, client, export, settings):
    """An overloaded node answers a group's writes with a client timeout: the import pauses (on its clock) and
    sends the group again instead of stopping; a node that keeps timing out stops it after GROUP_ATTEMPTS. The
    routing reads that build a group's rows (where a day's messages go) are read again the same way (a
    2M-message import once stopped on one)."""
    from cassandra import OperationTimedOut

    from api.slack import messages
    from tests.clocks import ManualClock

    class Flaky(Database):
        def __init__(self, failures: int) -> None:
            super().__init__(settings, clock=ManualClock())
            self.failures = failures
            self.read_failures = 1 if failures else 0

        def execute(self, statement, params=(), **kwargs):
            if statement is messages.SELECT_DAY_STATE and self.read_failures > 0:
                self.read_failures -= 1
                raise OperationTimedOut(errors={"127.0.0.1:9042": "Client request timeout"})
            return super().execute(statement, params, **kwargs)

        def execute_many(self, writes, **kwargs):
            if self.failures > 0 and kwargs.get("batch_size") == 50:  # a group's rows, after they were built
                self.failures -= 1
                raise OperationTimedOut(errors={"127.0.0.1:9042": "Client request timeout"})
            return super().execute_many(writes, **kwargs)

    clean, flaky_team = _team(), _team()
    expected = zip_import.import_export(db, str(export.path), team_id=clean).messages
    flaky = Flaky(failures=2)
    started = flaky.clock.monotonic()
    try:
        report = zip_import.import_export(flaky, str(export.path), team_id=flaky_team, group_messages=50)
        assert flaky.failures == 0 == flaky.read_failures and report.messages == expected > 0
        # Paused 1 x then 2 x the pause for the writes, 1 x for the read, on the injected clock (no real sleep).
        assert flaky.clock.monotonic() - started == pytest.approx(4 * zip_import.GROUP_RETRY_PAUSE)
        for channel_id, c in export.expected.channels.items():
            if c["kind"] == "public":
                assert _timeline(client, flaky_team, channel_id) == _timeline(client, clean, channel_id)
        stuck = Flaky(failures=zip_import.GROUP_ATTEMPTS)
        try:
            with pytest.raises(OperationTimedOut):
                zip_import.import_export(stuck, str(export.path), team_id=_team(), group_messages=50)
        finally:
            stuck.close()
    finally:
        flaky.close()


def test_dry_run_reports_counts_per_channel_and_writes_nothing(db, client, export):
    team = _team()
    report = zip_import.import_export(None, str(export.path), team_id=team, dry_run=True)
    public = {cid: c for cid, c in export.expected.channels.items() if c["kind"] == "public"}
    assert {c.channel_id: c.messages for c in report.channels.values()} == {
        cid: export.per_channel[cid] for cid in public}
    assert client.get(f"/slack/teams/{team}/channels", headers=ALL).get_json()["channels"] == []


def _zip(entries: dict[str, bytes | str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _good_entries() -> dict[str, str]:
    return {
        "users.json": json.dumps([{"id": "U1", "team_id": "TBAD", "name": "ada"}]),
        "channels.json": json.dumps([{"id": "C1", "name": "general", "created": 1600000000}]),
        "general/2023-01-02.json": json.dumps([
            {"type": "message", "user": "U1", "text": "kept", "ts": "1672617600.000100"},
            {"type": "message", "user": "U1", "text": "no ts"},
            {"type": "message", "user": "U1", "text": "bad ts", "ts": "yesterday"},
            {"type": "message", "user": "U1", "text": "from the future", "ts": "1672617601.000100",
             "subtype": "zz_new_kind"},
            {"type": "message", "user": "U1", "text": "bad \ud800 text", "ts": "1672617602.000100"},
        ]),
        "general/2023-01-03.json": "{not json",
        "../evil/2023-01-02.json": "[]",
        "general/../../etc/2023-01-02.json": "[]",
    }


def test_bad_entries_and_messages_are_skipped_with_their_reason_and_the_rest_is_imported(db, client, tmp_path):
    team = _team()
    path = tmp_path / "mixed.zip"
    path.write_bytes(_zip(_good_entries()))
    report = zip_import.import_export(db, str(path), team_id=team)
    got = _timeline(client, team, "C1")
    assert [m["text"] for m in got.values()] == ["kept", "from the future"]
    assert report.unknown_subtypes == {"zz_new_kind": 1}
    reasons = "\n".join(report.examples)
    for words in ("missing field: message.ts", "not a Slack timestamp", "not valid Unicode", "not JSON",
                  "leaves the archive (..)"):
        assert words in reasons, words
    assert report.skipped["entry path leaves the archive (..)"] == 2


def test_a_corrupt_zip_a_zip_bomb_and_archives_over_the_limits_are_refused(db, tmp_path):
    corrupt = tmp_path / "corrupt.zip"
    corrupt.write_bytes(_zip(_good_entries())[:200])
    with pytest.raises(BadArchive, match="not a readable ZIP"):
        zip_import.import_export(db, str(corrupt), team_id="TX")
    bomb = tmp_path / "bomb.zip"
    bomb.write_bytes(_zip({**_good_entries(), "general/2023-01-04.json": "[" + " " * (50 * 1024**2) + "]"}))
    report = zip_import.import_export(db, str(bomb), team_id=_team())
    assert report.skipped["compression ratio over 200:1 (a ZIP bomb?)"] == 1 and report.messages == 2
    with pytest.raises(BadArchive, match="over the limit"):
        zip_import.import_export(db, str(bomb), team_id="TX", limits=Limits(max_total_bytes=10 * 1024**2))
    with pytest.raises(BadArchive, match="entries, over the limit"):
        zip_import.import_export(db, str(bomb), team_id="TX", limits=Limits(max_entries=3))
    runner = CliRunner()
    result = runner.invoke(cli, ["slack", "import-export", str(corrupt), "--no-progress", "--keyspace",
                                 db.keyspace])
    assert result.exit_code == 1 and "not a readable ZIP" in result.output


def test_slackdump_variants_org_users_and_uploads_folders_import_the_same(db, client, tmp_path):
    spec = dataclasses.replace(SPEC, seed=11, messages=120, users_file="org_users.json", mattermost=True,
                               replies_list=False)
    summary = write_export(tmp_path / "dump.zip", spec, keep_expected=True)
    team = _team()
    report = zip_import.import_export(db, str(summary.path), team_id=team)
    assert report.users == len(summary.expected.users)
    for channel_id, c in summary.expected.channels.items():
        if c["kind"] == "public":
            assert _timeline(client, team, channel_id) == _expected_timeline(summary.expected, channel_id)


def _state(db: Database, team: str) -> dict:
    """Everything the read endpoints show of a workspace, read through the owners' read functions."""
    out: dict = {"users": users.page(db, team, limit=1000)[0]}
    for entry in channels.index_page(db, team, limit=1000)[0]:
        cid = entry["channel_id"]
        meta = channels.metadata(db, team, cid, channels.id_chain(db, team, cid))
        meta.pop("names_history", None)
        page, _ = messages.timeline(db, team, [cid], limit=10_000, ascending=True)
        threads = {m.ts: [r.to_json() for r in messages.thread(db, team, [cid], m.ts, limit=1000, after=m.ts,
                                                              include_deleted=False)[0]]
                   for m in page if m.thread_ts == m.ts}
        out[cid] = (meta, [m.to_json() for m in page], threads)
    for u in out["users"]:
        u.pop("first_seen_ts", None)  # when Chronicle first saw the user: the time of each import
    return out


def _masked(state: dict, team: str) -> object:
    """A workspace's state with its id masked: the only thing allowed to differ between two imports."""
    return json.loads(json.dumps(state, default=str, sort_keys=True).replace(team, "<team>"))


def test_round_trip_import_export_import_into_a_new_workspace_keeps_every_channel_message_and_user(
        db, export, tmp_path):
    """Import, export, import the export as another workspace: the second shows exactly what the first does
    (every row is keyed by its workspace, so the second import reads nothing of the first)."""
    team, again = _team(), _team()
    zip_import.import_export(db, str(export.path), team_id=team, include_private=True)
    out = tmp_path / "exported.zip"
    report = zip_export.export(db, team, str(out))
    assert report.messages == sum(export.per_channel[c] for c, v in export.expected.channels.items()
                                  if v["kind"] in ("public", "private"))
    zip_import.import_export(db, str(out), team_id=again, include_private=True)
    first = _masked(_state(db, team), team)
    assert first["users"] and len(first) > 3  # users and channels, not two empty states
    assert _masked(_state(db, again), again) == first


def test_export_leaves_deleted_messages_out_unless_asked_and_honours_from_to_and_channels(db, client, tmp_path):
    team = _team()
    path = tmp_path / "small.zip"
    path.write_bytes(_zip({
        "users.json": json.dumps([{"id": "U1", "team_id": team, "name": "ada"}]),
        "channels.json": json.dumps([{"id": "C1", "name": "general"}, {"id": "C2", "name": "random"}]),
        "general/2023-01-02.json": json.dumps([
            {"type": "message", "user": "U1", "text": f"m{i}", "ts": f"{1672617600 + i}.000100"} for i in range(3)]),
        "general/2023-01-03.json": json.dumps([
            {"type": "message", "user": "U1", "text": "next day", "ts": "1672704000.000100"}]),
        "random/2023-01-02.json": json.dumps([
            {"type": "message", "user": "U1", "text": "r", "ts": "1672617600.000200"}]),
    }))
    zip_import.import_export(db, str(path), team_id=team)
    messages.mark_deleted(db, team, "C1", 1672617601_000100, deleted_at=1672617700_000000)

    def day_files(zip_path) -> dict[str, list[str]]:
        with zipfile.ZipFile(zip_path) as zf:
            return {n: [m["text"] for m in json.loads(zf.read(n))] for n in zf.namelist() if n.count("/") == 1}

    zip_export.export(db, team, str(tmp_path / "a.zip"))
    assert day_files(tmp_path / "a.zip") == {"general/2023-01-02.json": ["m0", "m2"],
                                             "general/2023-01-03.json": ["next day"],
                                             "random/2023-01-02.json": ["r"]}
    zip_export.export(db, team, str(tmp_path / "b.zip"), include_deleted=True, channel_filter=["general"],
                      since=1672617601_000100, until=1672704000_000000)
    assert day_files(tmp_path / "b.zip") == {"general/2023-01-02.json": ["m1", "m2"]}
