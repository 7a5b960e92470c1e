"""Property: any valid Slack message survives live ingest, export import, REST and export unchanged (issue 27).

Messages are drawn from the documented shapes (Slack's message reference, Block Kit and attachment references):
text with mrkdwn references, attachments with fields, rich text and section blocks, modern files and the
legacy `file`, bot and user profiles, metadata, Slack Connect team fields, subtype fields, and any other field
Slack may add (an unknown key with a JSON value). Each drawn message goes in twice, once as a live event and
once inside an export ZIP, into channels of their own, and must read back over REST with every field, and come
back out of Chronicle's export as it went in (docs/slack-messages.md's normalisations only).
"""

from __future__ import annotations

import itertools
import json
import zipfile
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.slack.zip_export import export
from api.slack.zip_import import import_export
from tests.slack.helpers import ALL, post_event

LIVE_TEAM, IMPORT_TEAM = "T0PROPLIVE", "T0PROPZIP"
_seq = itertools.count(1)

ids = st.from_regex(r"\A[UBW][A-Z0-9]{8}\Z")
user_ids = st.from_regex(r"\A[UW][A-Z0-9]{8}\Z")  # a message's user and inviter: Slack user ids only (payloads.py)
words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=0, max_size=40)
urls = st.builds(lambda host, path: f"https://{host}.example/{path}", st.from_regex(r"\A[a-z]{3,10}\Z"),
                 st.from_regex(r"\A[a-z0-9/]{0,20}\Z"))
mrkdwn = st.one_of(words, st.builds(lambda u, w: f"<@{u}> {w}", ids, words),
                   st.builds(lambda url, w: f"see <{url}|{w or 'link'}>", urls, words))
text_object = st.fixed_dictionaries({"type": st.sampled_from(["plain_text", "mrkdwn"]), "text": words})
rich_section = st.fixed_dictionaries({"type": st.just("rich_text_section"), "elements": st.lists(st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": words},
                          optional={"style": st.fixed_dictionaries({}, optional={
                              "bold": st.booleans(), "italic": st.booleans(), "code": st.booleans()})}),
    st.fixed_dictionaries({"type": st.just("link"), "url": urls}, optional={"text": words}),
    st.fixed_dictionaries({"type": st.just("user"), "user_id": ids}),
    st.fixed_dictionaries({"type": st.just("emoji"), "name": st.from_regex(r"\A[a-z_+-]{1,20}\Z")}),
), max_size=4)})
blocks = st.lists(st.one_of(
    st.fixed_dictionaries({"type": st.just("rich_text"), "block_id": st.from_regex(r"\A[A-Za-z0-9=]{3,6}\Z"),
                           "elements": st.lists(rich_section, min_size=1, max_size=2)}),
    st.fixed_dictionaries({"type": st.just("section"), "text": text_object},
                          optional={"fields": st.lists(text_object, max_size=3)}),
    st.fixed_dictionaries({"type": st.just("divider")}),
    st.fixed_dictionaries({"type": st.just("header"),
                           "text": st.fixed_dictionaries({"type": st.just("plain_text"), "text": words})}),
), max_size=3)
attachments = st.lists(st.fixed_dictionaries({}, optional={
    "fallback": words, "color": st.sampled_from(["good", "#36a64f", "danger"]), "pretext": mrkdwn,
    "author_name": words, "author_link": urls, "title": words, "title_link": urls, "text": mrkdwn,
    "fields": st.lists(st.fixed_dictionaries({"title": words, "value": words, "short": st.booleans()}),
                       max_size=3),
    "image_url": urls, "footer": words, "ts": st.integers(1_400_000_000, 1_800_000_000),
    "mrkdwn_in": st.lists(st.sampled_from(["text", "pretext", "fields"]), max_size=3, unique=True),
}), max_size=2)
file_object = st.fixed_dictionaries({"id": st.from_regex(r"\AF[A-Z0-9]{8}\Z"), "name": words,
                                     "mimetype": st.sampled_from(["text/plain", "image/png"])},
                                    optional={"title": words, "size": st.integers(0, 10**9),
                                              "mode": st.sampled_from(["hosted", "tombstone", "hidden_by_limit"]),
                                              "permalink": urls})
json_value = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | words,
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
                          max_leaves=6)
content = st.fixed_dictionaries({}, optional={
    "attachments": attachments, "blocks": blocks, "files": st.lists(file_object, min_size=1, max_size=2),
    "bot_profile": st.fixed_dictionaries({"id": ids, "name": words, "app_id": ids, "deleted": st.booleans()}),
    "user_profile": st.fixed_dictionaries({"display_name": words, "real_name": words, "team": ids}),
    "metadata": st.fixed_dictionaries({"event_type": st.from_regex(r"\A[a-z_]{1,20}\Z"),
                                       "event_payload": st.dictionaries(words, words, max_size=3)}),
    "team": ids, "user_team": ids, "source_team": ids, "client_msg_id": st.uuids().map(str),
    "app_id": ids, "inviter": user_ids, "upload": st.booleans(), "display_as_bot": st.booleans(),
    "x_unknown_field": json_value,
})


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    m: dict[str, Any] = {"type": "message", "user": draw(user_ids), "text": draw(mrkdwn)}
    m.update(draw(content))
    if "files" not in m and draw(st.booleans()):
        m["subtype"], m["file"] = "file_share", draw(file_object)
    return m


def _ts() -> str:
    return f"{1_600_000_000 + next(_seq) * 7}.{next(_seq) % 1_000_000:06d}"


def _rest(client, team: str, channel: str, ts: str) -> dict[str, Any]:
    r = client.get(f"/slack/teams/{team}/channels/{channel}/messages/{ts}", headers=ALL)
    assert r.status_code == 200, r.json
    return r.json


def _same_fields(got: dict[str, Any], sent: dict[str, Any]) -> None:
    for key, value in sent.items():
        if key == "type":
            continue
        assert got.get(key) == value, key


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(m=messages())
def test_any_message_survives_live_ingest_import_rest_and_export(client, db, tmp_path_factory, m):
    ts = _ts()
    sent = {**m, "ts": ts}
    channel = f"C0P{next(_seq):08d}"
    r = post_event(client, LIVE_TEAM, {**sent, "channel": channel, "channel_type": "channel", "event_ts": ts})
    assert r.status_code == 200, r.json
    _same_fields(_rest(client, LIVE_TEAM, channel, ts), sent)

    tmp = tmp_path_factory.mktemp("prop")
    source, out = tmp / "in.zip", tmp / "out.zip"
    with zipfile.ZipFile(source, "w") as zf:
        zf.writestr("channels.json", json.dumps([{"id": channel, "name": channel.lower(), "created": 1_500_000_000,
                                                  "creator": sent["user"], "members": [sent["user"]]}]))
        zf.writestr("users.json", "[]")
        zf.writestr(f"{channel.lower()}/2020-09-13.json", json.dumps([sent]))
    report = import_export(db, str(source), team_id=IMPORT_TEAM)
    assert report.messages == 1 and not report.skipped
    _same_fields(_rest(client, IMPORT_TEAM, channel, ts), sent)

    export(db, IMPORT_TEAM, str(out), channel_filter=[channel], tz="UTC")
    with zipfile.ZipFile(out) as zf:
        day_files = [n for n in zf.namelist() if n.startswith(f"{channel.lower()}/")]
        assert len(day_files) == 1
        assert json.loads(zf.read(day_files[0])) == [sent]
