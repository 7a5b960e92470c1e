"""Malformed Slack payloads found in review: each is refused with 400 and leaves nothing behind."""

from __future__ import annotations

import json

import pytest

from api.slack.files import LocalStore, object_key
from tests.slack.helpers import SHARED_SECRET, channel_event, created, envelope, msg, post_event, sign

READ = {"Authorization": "Bearer token-all"}
PUBLIC_ONLY = {"Authorization": "Bearer token-t1"}


def _raw(client, text_body: str):
    body = text_body.encode()
    return client.post("/slack/events", data=body, headers=sign(body, SHARED_SECRET))


@pytest.mark.parametrize("previous", ["x", [1], 7])
def test_delete_with_a_non_object_previous_message_is_400(client, unique_channel, previous):
    channel = unique_channel()
    event = {"type": "message", "subtype": "message_deleted", "channel": channel, "channel_type": "channel",
             "hidden": True, "ts": "1700000001.000100", "previous_message": previous}
    response = post_event(client, "T1", event)
    assert response.status_code == 400
    assert "deleted_ts" in response.get_json()["message"]


def test_unpaired_surrogates_are_refused_before_any_write(client, unique_channel):
    channel = unique_channel()
    assert post_event(client, "T1", created(channel, "general", "1700000000.000000")).status_code == 200
    # A channel_purpose message whose purpose cannot be stored: the message must not be stored either.
    event = msg(channel, "1700000003.000100", "set purpose", subtype="channel_purpose", purpose="p \ud800")
    text = json.dumps(envelope("T1", event))  # json.dumps escapes the surrogate as \ud800
    assert "\\ud800" in text
    response = _raw(client, text)
    assert response.status_code == 400
    assert "Unicode" in response.get_json()["message"]
    missing = client.get(f"/slack/teams/T1/channels/{channel}/messages/1700000003.000100", headers=READ)
    assert missing.status_code == 404


@pytest.mark.parametrize("where", ["team", "channel", "item", "new_channel_id"])
def test_ids_that_are_not_slack_ids_are_400(client, where):
    huge = "C" + "X" * 70_000
    team = huge if where == "team" else "T1"
    if where == "channel":
        event = msg(huge, "1700000001.000100", "hi")
    elif where == "item":
        event = {"type": "reaction_added", "user": "U1", "reaction": "wave",
                 "item": {"type": "message", "channel": "c-lower", "ts": "1700000001.000100"},
                 "event_ts": "1700000002.000000"}
    else:
        event = {"type": "channel_id_changed", "old_channel_id": "C1", "new_channel_id": "../../etc",
                 "event_ts": "1700000002.000000"}
    body = json.dumps(envelope(team, event)).encode()
    response = client.post("/slack/events", data=body, headers=sign(body, SHARED_SECRET))
    assert response.status_code == 400
    assert "is not a Slack id" in response.get_json()["message"]


def test_private_visibility_follows_a_channel_id_change(client, unique_channel):
    old, new = unique_channel(), unique_channel()
    for event in (created(old, "secret-plans", "1700000000.000000"),
                  msg(old, "1700000100.000100", "before the move"),
                  channel_event("channel_convert_to_private", old, "1700000200.000000"),
                  {"type": "channel_id_changed", "old_channel_id": old, "new_channel_id": new,
                   "event_ts": "1700000300.000000"}):
        assert post_event(client, "T1", event).status_code == 200
    for path in (f"/slack/teams/T1/channels/{new}/messages",
                 f"/slack/teams/T1/channels/{new}/messages/1700000100.000100"):
        assert client.get(path, headers=PUBLIC_ONLY).status_code == 403, path
        assert client.get(path, headers=READ).status_code == 200, path


def test_file_ids_cannot_name_paths_outside_the_store(client, unique_channel, tmp_path):
    channel = unique_channel()
    event = msg(channel, "1700000400.000100", "a file", subtype="file_share",
                files=[{"id": "../../../escaped", "name": "x", "url_private": "http://127.0.0.1:9/x"},
                       {"id": "F0GOOD", "name": "y", "url_private": "http://127.0.0.1:9/y"}])
    assert post_event(client, "T1", event).status_code == 200
    stored = client.get(f"/slack/teams/T1/channels/{channel}/messages/1700000400.000100", headers=READ).get_json()
    assert [f["id"] for f in stored["files"]] == ["F0GOOD"]
    store = LocalStore(tmp_path / "root")
    with pytest.raises(ValueError, match="leaves the files root"):
        store.put(object_key("T1", channel, 1700000400000100, "../../../../../escaped"), b"x", None)
    assert not (tmp_path / "escaped").exists()
