"""A Slack export of every documented message shape goes in and comes back out whole (issue 27).

The corpus (tests/fixtures/slack_corpus, its sources in tests/fixtures/SLACK_CORPUS_PROVENANCE.md) was written
from Slack's documentation and public samples, not from Chronicle's output: 2015-era messages with the legacy
`file`, current ones with `blocks`, bots and apps with attachments, unfurls, Workflow Builder metadata, Slack
Connect, a huddle, a canvas update, a tombstone with its replies, full user profiles, `created` as a string.

It is imported, read over REST, searched, exported (day files in the workspace's zone), and the export is
imported and exported again. Every expectation below is computed from the corpus files themselves; the only
differences allowed are the normalisations docs/slack-messages.md names (`_NORMALISED`).
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from api.slack.timeutil import ts_to_us
from api.slack.zip_export import export
from api.slack.zip_import import import_export
from tests.slack.helpers import ALL

CORPUS = Path(__file__).parents[1] / "fixtures" / "slack_corpus"
META = json.loads((CORPUS.parent / "slack_corpus_meta.json").read_text())
TEAM = META["team_id"]
COPY = "T0CORPUSCOPY"  # the export imported again, as another workspace


def _entries(root: Path) -> dict[str, Any]:
    return {str(p.relative_to(root)): json.loads(p.read_text()) for p in sorted(root.rglob("*.json"))}


def _zip_entries(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as zf:
        return {name: json.loads(zf.read(name)) for name in zf.namelist()}


ORIGINAL = _entries(CORPUS)
CHANNEL_IDS = {c["name"]: c["id"] for name in ("channels.json", "groups.json") for c in ORIGINAL[name]}
MESSAGES = [(name.split("/")[0], m) for name, day in ORIGINAL.items() if "/" in name for m in day]


def _normalised(m: dict[str, Any]) -> dict[str, Any]:
    """What Chronicle's export writes for an original message (docs/slack-messages.md, "Normalisations")."""
    out = dict(m)
    if isinstance(out.get("reactions"), list):  # by emoji, users by id, count = the users who reacted
        out["reactions"] = sorted(({**r, "users": sorted(r["users"]), "count": len(r["users"])}
                                   for r in out["reactions"]), key=lambda r: r["name"])
    return out


@pytest.fixture(scope="module")
def archive(db, tmp_path_factory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("corpus")
    source = tmp / "corpus.zip"
    with zipfile.ZipFile(source, "w") as zf:
        for name in ORIGINAL:
            zf.write(CORPUS / name, name)
    imported = import_export(db, str(source), include_private=True)
    first, second = tmp / "first.zip", tmp / "second.zip"
    exported = export(db, TEAM, str(first))
    again = import_export(db, str(first), team_id=COPY, include_private=True)
    export(db, COPY, str(second))
    return {"imported": imported, "exported": exported, "again": again, "first": _zip_entries(first),
            "second": _zip_entries(second)}


def test_the_corpus_imports_without_a_skip(archive):
    report = archive["imported"]
    assert dict(report.skipped) == {} and report.messages == len(MESSAGES) == META["message_count"]
    assert report.users == len(ORIGINAL["users.json"])
    assert archive["again"].messages == len(MESSAGES) and dict(archive["again"].skipped) == {}


def test_every_message_comes_back_over_rest_with_every_field(client, archive):
    for folder, m in MESSAGES:
        r = client.get(f"/slack/teams/{TEAM}/channels/{CHANNEL_IDS[folder]}/messages/{m['ts']}", headers=ALL)
        assert r.status_code == 200, (folder, m["ts"], r.json)
        got = r.json
        for key, value in m.items():
            if key in ("type", "reactions"):
                continue
            assert got.get(key) == value, (folder, m["ts"], key)
        if m.get("reactions"):
            assert {(x["name"], tuple(sorted(x["users"]))) for x in got["reactions"]} == \
                {(x["name"], tuple(sorted(x["users"]))) for x in m["reactions"]}
        if m.get("subtype") == "file_comment" and "user" not in m:
            assert got["user"] == m["comment"]["user"]  # the commenter is the author
        if isinstance(m.get("file"), dict):  # a legacy file is a file of the message like a modern one
            assert [f["id"] for f in got["files"]] == [m["file"]["id"]]


def test_the_export_writes_every_original_field_and_the_workspace_zone(archive):
    assert archive["exported"].time_zone == META["workspace_tz"]
    first = archive["first"]
    days = {name for name in ORIGINAL if "/" in name}
    assert {name for name in first if "/" in name} == days  # same day files: dated in the workspace's zone
    for name in sorted(days):
        got = {m["ts"]: m for m in first[name]}
        assert list(got) == [m["ts"] for m in ORIGINAL[name]], name  # oldest first, nothing added or lost
        for m in ORIGINAL[name]:
            assert _normalised(got[m["ts"]]) == _normalised(m), (name, m["ts"])


def test_the_export_keeps_whole_users_and_channels(archive):
    first = archive["first"]
    assert sorted(first["users.json"], key=lambda u: u["id"]) == sorted(ORIGINAL["users.json"],
                                                                        key=lambda u: u["id"])
    for name in ("channels.json", "groups.json"):
        got = {c["id"]: c for c in first[name]}
        for c in ORIGINAL[name]:
            want = {**c, "created": int(c["created"])}  # older exports write `created` as a string
            assert got[c["id"]] == want, (name, c["id"])


def test_import_then_export_is_a_fixed_point(archive):
    assert archive["second"] == archive["first"]


def _walk(value: Any):
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)


def _links(m: dict[str, Any]) -> bool:
    """Slack's has:link, computed from the message as Slack sent it: a link in its text, in an attachment's
    text fields, an unfurl or a linked title, a link element or a linked mrkdwn text in its blocks."""
    texts = [m.get("text") or ""]
    for a in m.get("attachments") or []:
        if any(a.get(k) for k in ("title_link", "from_url", "original_url")):
            return True
        texts += [a.get(k) or "" for k in ("pretext", "text", "footer", "title")]
        texts += [f.get("value") or "" for f in a.get("fields") or []]
    for node in _walk(m.get("blocks") or []):
        if node.get("type") == "link":
            return True
        if node.get("type") == "mrkdwn":
            texts.append(node.get("text") or "")
    return any("<http" in t or "<mailto:" in t for t in texts)


def _files(m: dict[str, Any]) -> bool:
    return bool(m.get("files") or isinstance(m.get("file"), dict))


@pytest.mark.parametrize(("modifier", "holds"), [("has:file", _files), ("has:link", _links)])
def test_has_file_and_has_link_find_exactly_the_messages_that_have_them(client, archive, modifier, holds):
    for folder, channel_id in CHANNEL_IDS.items():
        expected = {m["ts"] for f, m in MESSAGES if f == folder and holds(m) and m.get("subtype") != "tombstone"}
        assert _search(client, f"in:{channel_id} {modifier}") == expected, (folder, modifier)
    assert any(holds(m) for _f, m in MESSAGES)


def test_words_of_attachments_and_blocks_are_found(client, archive):
    checked = 0
    for _folder, m in MESSAGES:
        shown = [a.get(k) or "" for a in m.get("attachments") or [] for k in ("title", "pretext", "text")]
        shown += [f.get("value") or "" for a in m.get("attachments") or [] for f in a.get("fields") or []]
        shown += [n["text"].get("text") for n in _walk(m.get("blocks") or [])
                  if n.get("type") in ("header", "section") and isinstance(n.get("text"), dict)]
        for text in filter(None, shown):
            word = max(re.findall(r"[A-Za-z]{5,}", text), key=len, default=None)
            if word and word.casefold() not in (m.get("text") or "").casefold():
                assert m["ts"] in _search(client, word), (m["ts"], word)
                checked += 1
    assert checked >= 6


def _search(client, q: str) -> set[str]:
    out, cursor = set(), None
    while True:
        params = {"q": q, "limit": 100, **({"cursor": cursor} if cursor else {})}
        r = client.get(f"/slack/teams/{TEAM}/search", query_string=params, headers=ALL)
        assert r.status_code == 200, (q, r.json)
        out.update(h["ts"] for h in r.json["messages"])
        cursor = r.json.get("next_cursor")
        if not cursor:
            return out


def test_first_seen_is_never_later_than_the_first_message_that_shows_a_user(client, archive):
    first_shown: dict[str, int] = {}
    for _f, m in MESSAGES:
        if isinstance(m.get("user"), str) and m.get("subtype") != "tombstone":  # a placeholder shows nobody
            first_shown[m["user"]] = min(first_shown.get(m["user"], 2**62), ts_to_us(m["ts"]))
    for u in ORIGINAL["users.json"]:
        r = client.get(f"/slack/teams/{TEAM}/users/{u['id']}", headers=ALL)
        assert r.status_code == 200
        seen = ts_to_us(r.json["first_seen_ts"])
        assert seen <= first_shown.get(u["id"], 2**62), u["id"]
        if u.get("updated"):  # Slack's own time of the profile: shown by the export, so seen by then
            assert seen <= u["updated"] * 1_000_000
