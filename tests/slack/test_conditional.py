"""Conditional GETs (issue 33): every write path changes the ETag of every page it changes, a page is never
answered 304 after its content changed, pages a write did not touch stay 304, and a 304 reads no row.

Each step writes through one path (Events API ingest, edit, reaction, deletion, thread reply, the file worker's
record, a channel rename, a ZIP import, a retention run, a report, an erasure), then every page is fetched three
times: with the ETag held from before (If-None-Match), without (which may be the page the process kept by its
tag), and without after every cache of the process was emptied (a fresh build). A 304 and a kept page must come
with the same bytes the fresh build gives; a page whose bytes changed must answer 200.
"""

from __future__ import annotations

import dataclasses
import io
import json
import uuid
import zipfile
from dataclasses import dataclass
from datetime import date

import pytest

from api.erasure import slack as erasure
from api.retention import policies
from api.retention import slack as retention
from api.slack import messages, versions, zip_import
from api.slack.reports import service as reports
from api.slack.reports.period import Period
from api.statement import Statement
from tests.helpers import form_post
from tests.slack.helpers import ALL, T1_ONLY, created, delete, edit, msg, post_event, reaction, rename
from tests.test_code_model import _modules

BASE = 1672617600  # 2023-01-02 00:00 UTC
US = 1_000_000


def ts(day: int, second: int) -> str:
    return f"{BASE + day * 86_400 + second}.000100"


def us(value: str) -> int:
    seconds, _, micros = value.partition(".")
    return int(seconds) * US + int(micros)


@dataclass
class Seen:
    etag: str
    body: bytes


class Pages:
    def __init__(self, client, db, team: str, paths: dict[str, str]) -> None:
        self.client, self.db, self.team, self.paths = client, db, team, paths
        self.seen = {name: self._full(name) for name in paths}

    def _full(self, name: str, *, fresh: bool = True) -> Seen:
        held_settings = self.db.settings
        if fresh:  # built from the rows: the pages this process keeps by their tag are neither read nor changed
            self.db.settings = dataclasses.replace(held_settings, page_cache_bytes=0)
        try:
            r = self.client.get(self.paths[name], headers=ALL)
        finally:
            self.db.settings = held_settings
        assert r.status_code == 200, (name, r.json)
        assert r.headers["Cache-Control"] == "private, no-cache"
        return Seen(r.headers["ETag"].strip('"'), r.data)

    def after(self, step: str, *, changed: set[str], untouched: set[str] = frozenset()) -> set[str]:
        """Revalidate every page; returns the pages whose bytes changed (at least `changed`), checking that none
        of them is answered 304 and that `untouched` pages are."""
        moved = set()
        for name in self.paths:
            held = self.seen[name]
            revalidated = self.client.get(self.paths[name], headers={**ALL, "If-None-Match": f'"{held.etag}"'})
            kept = self._full(name, fresh=False)
            now = self._full(name)
            assert (kept.body, kept.etag) == (now.body, now.etag), f"{step}: {name} kept differs from a fresh build"
            if revalidated.status_code == 304:
                assert now.body == held.body, f"{step}: {name} answered 304 but its content changed (stale)"
                assert now.etag == held.etag and revalidated.data == b""
                assert revalidated.headers["ETag"] == f'"{held.etag}"'
            else:
                assert revalidated.status_code == 200 and revalidated.data == now.body, (step, name)
            if now.body != held.body:
                moved.add(name)
                assert now.etag != held.etag, f"{step}: {name} changed under the same ETag"
            if name in untouched:
                assert revalidated.status_code == 304, f"{step}: {name} was not touched but not answered 304"
            self.seen[name] = now
        assert changed <= moved, f"{step}: expected {changed} to change, changed {moved}"
        return moved


def _zip(team: str, day: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("users.json", json.dumps([{"id": "U1", "team_id": team, "name": "ada"}]))
        zf.writestr("channels.json", json.dumps([{"id": "CETAG1", "name": "general", "created": BASE}]))
        zf.writestr(f"general/{date.fromtimestamp(BASE + day * 86_400).isoformat()}.json", json.dumps([
            {"type": "message", "user": "U1", "text": "imported from a zip", "ts": ts(day, 50)}]))
    return buf.getvalue()


@pytest.fixture
def workspace(client, db):
    team = f"TETAG{uuid.uuid4().hex[:6].upper()}"
    c1, c2 = "CETAG1", "CETAG2"
    w = {"team": team, "old": ts(0, 10), "head": ts(6, 10), "m2": ts(6, 20)}
    for event in (created(c1, "general", ts(0, 1)), msg(c1, w["old"], "an old one"), msg(c1, w["head"], "a question"),
                  msg(c1, w["m2"], "with a file", files=[{"id": "FETAG1", "name": "a.txt", "mimetype": "text/plain"}]),
                  msg(c2, ts(6, 30), "elsewhere", user="U3")):
        assert post_event(client, team, event).status_code == 200
    reports.generate(db, team, Period(date(2023, 1, 2), 7))
    report_id = client.get(f"/slack/teams/{team}/reports", headers=ALL).json["reports"][0]["report_id"]
    base = f"/slack/teams/{team}"
    w["paths"] = {
        "timeline": f"{base}/channels/{c1}/messages",
        "older": f"{base}/channels/{c1}/messages?before={ts(1, 0)}",
        "thread": f"{base}/channels/{c1}/threads/{w['head']}",
        "message": f"{base}/channels/{c1}/messages/{w['m2']}",
        "index": f"{base}/channels",
        "metadata": f"{base}/channels/{c1}",
        "other": f"{base}/channels/{c2}/messages",
        "reports": f"{base}/reports",
        "report": f"{base}/reports/{report_id}",
    }
    return w


def test_every_write_path_changes_the_pages_it_changes_and_nothing_stale_is_served(client, db, workspace,
                                                                                   tmp_path):
    team, w = workspace["team"], workspace
    pages = Pages(client, db, team, w["paths"])
    channel_pages = {"other", "index", "reports", "report"}

    def post(event: dict) -> None:
        assert post_event(client, team, event).status_code == 200

    post(msg("CETAG1", ts(6, 40), "a new one"))
    pages.after("ingest", changed={"timeline"}, untouched=channel_pages)
    post(msg("CETAG1", ts(6, 45), "an answer", user="U2", thread_ts=w["head"], parent_user_id="U1"))
    pages.after("thread reply", changed={"thread", "timeline"}, untouched=channel_pages)
    post(edit("CETAG1", w["m2"], "with a file, edited", "with a file", at=ts(6, 60)))
    pages.after("edit", changed={"message", "timeline"}, untouched=channel_pages)
    post(reaction("added", "CETAG1", w["m2"], "tada", "U2", at=ts(6, 70)))
    pages.after("reaction added", changed={"message", "timeline"}, untouched=channel_pages)
    post(reaction("removed", "CETAG1", w["m2"], "tada", "U2", at=ts(6, 80)))
    pages.after("reaction removed", changed={"message", "timeline"}, untouched=channel_pages)
    messages.record_file_stored(db, team, "CETAG1", us(w["m2"]), "FETAG1", "file:///stored/a.txt")
    pages.after("file stored", changed={"message", "timeline"}, untouched=channel_pages)
    post(delete("CETAG1", ts(6, 40), ts(6, 90)))
    pages.after("deletion", changed={"timeline"}, untouched=channel_pages)
    post(rename("CETAG1", "renamed", ts(6, 95)))
    pages.after("rename", changed={"index", "metadata"}, untouched={"other", "reports", "report"})
    archive = tmp_path / "export.zip"
    archive.write_bytes(_zip(team, 7))
    zip_import.import_export(db, str(archive), team_id=team)
    pages.after("zip import", changed={"timeline"}, untouched={"other", "reports", "report"})
    reports.generate(db, team, Period(date(2023, 1, 9), 7))
    pages.after("report", changed={"reports"}, untouched={"timeline", "older", "thread", "message", "other"})
    policies.set_policy(db, f"slack:{team}", "CETAG1", 5, by="test")
    retention.run(db, team, dry_run=False, files=None, today=date(2023, 1, 10))
    pages.after("retention", changed={"older"}, untouched={"other"})
    erasure.erase(db, team, "U2", requested_by="test", files=None)
    pages.after("erasure", changed={"thread", "timeline"}, untouched={"other"})


def _tables_read(db, monkeypatch) -> list[str]:
    """The tables of every statement `db` runs from now on (a list the test reads as it goes)."""
    tables: list[str] = []
    for method in ("execute", "execute_async"):
        real = getattr(db, method)

        def recording(statement, params=(), *args, _real=real, **kwargs):
            tables.append(statement.table)
            return _real(statement, params, *args, **kwargs)

        monkeypatch.setattr(db, method, recording)
    return tables


def test_a_revalidated_page_reads_no_row_and_access_is_checked_first(client, db, workspace, monkeypatch):
    path = workspace["paths"]["timeline"]
    tag = client.get(path, headers=ALL).headers["ETag"]
    tables = _tables_read(db, monkeypatch)
    r = client.get(path, headers={**ALL, "If-None-Match": tag})
    assert r.status_code == 304
    # The channel's version only: its row (access, previous ids) is the one this process read at that version;
    # no day listing, no message.
    assert tables == ["slack_versions"]
    # A token of another workspace is refused as before, whatever it holds.
    assert client.get(path, headers={**T1_ONLY, "If-None-Match": tag}).status_code == 403
    # Another page (a different query) has another tag; a tag list and a weak form match too.
    assert client.get(path + "?limit=5", headers={**ALL, "If-None-Match": tag}).status_code == 200
    assert client.get(path, headers={**ALL, "If-None-Match": f'"x", W/{tag}'}).status_code == 304
    # The channel made private: its version moves, its row is read again, and a token without the private scope
    # is refused at once (the access check never rides on what the process held).
    public = {"Authorization": "Bearer token-public", "If-None-Match": tag}
    assert client.get(path, headers=public).status_code == 304
    assert post_event(client, workspace["team"], {"type": "channel_convert_to_private", "channel": "CETAG1",
                                                  "event_ts": ts(6, 99)}).status_code == 200
    assert client.get(path, headers=public).status_code == 403


def test_a_page_asked_again_unchanged_is_the_kept_one_reading_only_the_versions(client, db, workspace, monkeypatch):
    """A JSON page (timeline, thread, message) is kept by its ETag: asked again without If-None-Match while its
    versions hold, it is answered with the same bytes after reading the versions only; once a write moves them, it
    is built again from the rows."""
    paths = [workspace["paths"][name] for name in ("timeline", "thread", "message")]
    first = {path: client.get(path, headers=ALL) for path in paths}
    tables = _tables_read(db, monkeypatch)
    for path in paths:
        again = client.get(path, headers=ALL)
        assert again.status_code == 200 and again.data == first[path].data
        assert again.headers["ETag"] == first[path].headers["ETag"]
        assert again.headers["Content-Type"] == first[path].headers["Content-Type"] == "application/json"
        assert again.headers["Cache-Control"] == "private, no-cache"
    assert set(tables) == {"slack_versions"}, tables
    # Access is still checked before anything kept is used.
    assert client.get(paths[0], headers=T1_ONLY).status_code == 403
    # A reaction moves the channel's version: each page is built again and shows it.
    assert post_event(client, workspace["team"], reaction("added", "CETAG1", workspace["m2"], "tada", "U2",
                                                          at=ts(6, 70))).status_code == 200
    tables.clear()
    for path in paths:
        again = client.get(path, headers=ALL)
        assert again.headers["ETag"] != first[path].headers["ETag"]
    assert "slack_messages" in tables
    assert "tada" in client.get(paths[2], headers=ALL).get_data(as_text=True)
    # Kept pages are bounded by bytes (CHRONICLE_PAGE_CACHE_MB); 0 keeps none: every GET reads the rows.
    monkeypatch.setattr(db, "settings", dataclasses.replace(db.settings, page_cache_bytes=0))
    db.caches.clear()
    for _ in range(2):
        tables.clear()
        assert client.get(paths[0], headers=ALL).status_code == 200
        assert {"slack_channel_days", "slack_messages"} <= set(tables), tables


def test_every_write_to_a_table_behind_a_page_names_the_scope_it_changes(db):
    """Database advances the versions of any write to these tables: each such statement in api/ binds the
    workspace, and the channel where the table is a channel's (else it would advance every page: '*')."""
    found = []
    for module in _modules().values():
        for statement in vars(module).values():
            if not isinstance(statement, Statement) or statement.cql.startswith("SELECT"):
                continue
            scopes = versions.TABLE_SCOPES.get(statement.table or "")
            if scopes is None:
                continue
            names = {c.name for c in db.prepared(statement).column_metadata}
            assert "team_id" in names, statement
            if None in scopes:
                assert names & {"channel_id", "in(channel_id)"}, statement
            found.append(statement.table)
    assert set(found) == set(versions.TABLE_SCOPES)  # every table listed is written somewhere


def test_the_archive_viewers_channel_page_is_revalidated_per_reader_and_signing_out_clears_the_cache(
        app, workspace):
    team = workspace["team"]
    browser = app.test_client()
    assert form_post(browser, "/archive", {"token": "token-all"}).status_code == 303
    page = f"/archive/teams/{team}/channels/CETAG1"
    first = browser.get(page)
    assert first.status_code == 200 and first.headers["Cache-Control"] == "private, no-cache"
    tag = first.headers["ETag"]
    again = browser.get(page, headers={"If-None-Match": tag})
    assert again.status_code == 304 and again.headers["ETag"] == tag
    assert browser.get(page).data == first.data  # what the 304 stood for is what a full answer shows
    # Another reader (another session, another CSRF token in the page) has a tag of their own.
    other = app.test_client()
    assert form_post(other, "/archive", {"token": "token-all"}).status_code == 303
    assert other.get(page, headers={"If-None-Match": tag}).status_code == 200
    # A new message in the channel: a new page and a new tag.
    assert post_event(browser, team, msg("CETAG1", ts(6, 55), "zqviewernew")).status_code == 200
    changed = browser.get(page, headers={"If-None-Match": tag})
    assert changed.status_code == 200 and b"zqviewernew" in changed.data and changed.headers["ETag"] != tag
    # Pages without a tag are still not stored; signing out asks the browser to drop what it kept.
    assert browser.get(f"/archive/teams/{team}").headers["Cache-Control"] == "no-store"
    out = form_post(browser, "/archive/signout", page=page)
    assert out.status_code == 303 and out.headers["Clear-Site-Data"] == '"cache"'
