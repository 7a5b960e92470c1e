"""The Events endpoint: signatures, envelopes, rejections, channel policy, failure answers."""

from __future__ import annotations

import dataclasses
import json
import time

from api.slack import messages
from tests.slack.helpers import ALL, SHARED_SECRET, envelope, msg, post_envelope, post_event, sign, timeline


def test_url_verification_answers_the_challenge(client):
    body = json.dumps({"type": "url_verification", "token": "x", "challenge": "abc123"}).encode()
    r = client.post("/slack/events", data=body, headers=sign(body, SHARED_SECRET))
    assert r.status_code == 200
    assert r.json == {"challenge": "abc123"}


def test_signed_message_is_stored(client, unique_channel):
    c = unique_channel()
    r = post_event(client, "T1", msg(c, "1700000000.000100", "hello"))
    assert r.status_code == 200 and r.json["ok"] is True
    assert [m["text"] for m in timeline(client, "T1", c)] == ["hello"]


def test_bad_signature_is_401_and_nothing_is_stored(client, unique_channel):
    c = unique_channel()
    body = json.dumps(envelope("T1", msg(c, "1700000000.000100", "forged"))).encode()
    r = client.post("/slack/events", data=body, headers=sign(body, "wrong-secret"))
    assert r.status_code == 401 and r.json["code"] == 401
    # A valid signature over other bytes does not cover these bytes.
    headers = sign(body + b" ", SHARED_SECRET)
    assert client.post("/slack/events", data=body, headers=headers).status_code == 401
    assert client.post("/slack/events", data=body, headers={"Content-Type": "application/json"}).status_code == 401
    assert timeline(client, "T1", c) == []


def test_stale_timestamp_is_401(client, unique_channel):
    c = unique_channel()
    body = json.dumps(envelope("T1", msg(c, "1700000000.000100", "old"))).encode()
    stale = sign(body, SHARED_SECRET, timestamp=int(time.time()) - 301)
    assert client.post("/slack/events", data=body, headers=stale).status_code == 401
    future = sign(body, SHARED_SECRET, timestamp=int(time.time()) + 301)
    assert client.post("/slack/events", data=body, headers=future).status_code == 401
    edge = sign(body, SHARED_SECRET, timestamp=int(time.time()) - 240)
    assert client.post("/slack/events", data=body, headers=edge).status_code == 200
    bad_ts = sign(body, SHARED_SECRET)
    bad_ts["X-Slack-Request-Timestamp"] = "yesterday"
    assert client.post("/slack/events", data=body, headers=bad_ts).status_code == 401


def test_per_workspace_secret(client, unique_channel):
    c = unique_channel()
    env = envelope("T2", msg(c, "1700000000.000100", "t2 message"))
    # T2 has its own secret: the shared one is not accepted for it.
    assert post_envelope(client, env, secret=SHARED_SECRET).status_code == 401
    assert post_envelope(client, env, secret="t2-secret").status_code == 200
    assert [m["text"] for m in timeline(client, "T2", c)] == ["t2 message"]
    # Any other workspace uses the shared secret.
    env3 = envelope("T3", msg(c, "1700000000.000100", "t3 message"))
    assert post_envelope(client, env3, secret="t2-secret").status_code == 401
    assert post_envelope(client, env3, secret=SHARED_SECRET).status_code == 200


def test_malformed_json_and_missing_fields_are_400(client, unique_channel):
    c = unique_channel()
    body = b'{"type": "event_callback", "team_id": '
    r = client.post("/slack/events", data=body, headers=sign(body, SHARED_SECRET))
    assert r.status_code == 400 and "JSON" in r.json["message"]
    cases = [
        ({"type": "event_callback", "event_id": "Ev1", "event_time": 1, "event": {"type": "message"}}, "team_id"),
        ({"type": "event_callback", "team_id": "T1", "event_time": 1, "event": {"type": "message"}}, "event_id"),
        ({"type": "event_callback", "team_id": "T1", "event_id": "E", "event_time": 1}, "event.type"),
        ({"team_id": "T1"}, "type"),
    ]
    for env, field in cases:
        r = post_envelope(client, env, secret=SHARED_SECRET)
        assert r.status_code == 400, env
        assert field in r.json["message"]
    # Handler-level: a message without ts, a reaction without item, a bad ts.
    no_ts = msg(c, "1700000000.000100", "x")
    del no_ts["ts"]
    r = post_event(client, "T1", no_ts)
    assert r.status_code == 400 and "ts" in r.json["message"]
    r = post_event(client, "T1", {"type": "reaction_added", "user": "U1", "reaction": "x", "event_ts": "1.0"})
    assert r.status_code == 400 and "item" in r.json["message"]
    r = post_event(client, "T1", msg(c, "not-a-ts", "x"))
    assert r.status_code == 400
    assert timeline(client, "T1", c) == []


def test_unknown_event_type_is_acknowledged_and_ignored(client):
    r = post_event(client, "T1", {"type": "app_mention", "channel": "C1", "event_ts": "1700000000.000001"})
    assert r.status_code == 200 and r.json["outcome"].startswith("ignored")
    r = post_event(client, "T1", {"type": "app_mention", "channel": "C1", "event_ts": "1700000000.000001"})
    assert r.status_code == 200


def test_oversized_body_is_413(client, settings):
    body = json.dumps({"type": "event_callback", "pad": "x" * (settings.max_body_bytes + 10)}).encode()
    r = client.post("/slack/events", data=body, headers=sign(body, SHARED_SECRET))
    assert r.status_code == 413
    assert r.json["code"] == 413


def test_retries_and_duplicates_store_once(client, unique_channel):
    c = unique_channel()
    env = envelope("T1", msg(c, "1700000000.000100", "once"), event_id="EvDUP1")
    for retry in ("", "1", "2", "3"):
        headers = {"X-Slack-Retry-Num": retry, "X-Slack-Retry-Reason": "http_timeout"} if retry else {}
        assert post_envelope(client, env, headers=headers).status_code == 200
    assert [m["text"] for m in timeline(client, "T1", c)] == ["once"]


def test_channel_policy(client, unique_channel):
    public, dm, group, mpim = unique_channel(), unique_channel("D"), unique_channel(), unique_channel("G")
    post_event(client, "T1", msg(public, "1700000000.000100", "public"))
    post_event(client, "T1", {**msg(dm, "1700000000.000100", "dm"), "channel_type": "im"})
    post_event(client, "T1", {**msg(group, "1700000000.000100", "private"), "channel_type": "group"})
    post_event(client, "T1", {**msg(mpim, "1700000000.000100", "mpim"), "channel_type": "mpim"})
    assert len(timeline(client, "T1", public)) == 1
    assert timeline(client, "T1", dm) == []
    assert timeline(client, "T1", group) == []
    assert timeline(client, "T1", mpim) == []


def test_public_channel_converted_to_private_keeps_being_archived(client, unique_channel):
    c = unique_channel()
    post_event(client, "T1", {"type": "channel_created", "event_ts": "1700000000.000000",
                              "channel": {"id": c, "name": "was-public", "created": 1700000000}})
    post_event(client, "T1", msg(c, "1700000001.000000", "before"))
    post_event(client, "T1", {"type": "channel_convert_to_private", "channel": c, "event_ts": "1700000002.000000"})
    r = post_event(client, "T1", {**msg(c, "1700000003.000000", "after"), "channel_type": "group"})
    assert r.json["outcome"] == "stored"
    assert [m["text"] for m in timeline(client, "T1", c)] == ["after", "before"]
    meta = client.get(f"/slack/teams/T1/channels/{c}", headers=ALL).json
    assert meta["visibility"] == "private"


def test_cassandra_failure_answers_503_so_slack_retries(settings, unique_channel):
    """A real unreachable node (nothing listens on port 1): the write fails, the answer is 503."""
    from api.app import create_app
    from api.db import Database, get_db, set_db

    original = get_db()
    dead = dataclasses.replace(settings, cassandra_port=1, connect_timeout=0.5, request_timeout=0.5)
    try:
        app = create_app(dead, database=Database(dead))
        client = app.test_client()
        r = post_event(client, "T1", msg(unique_channel(), "1700000000.000100", "lost"))
        assert r.status_code == 503
        assert r.json["code"] == 503
    finally:
        set_db(original)


def test_hostile_values_are_400_not_500(client, unique_channel):
    c = unique_channel()
    huge = {"type": "event_callback", "team_id": "T1", "event_id": "EvHUGE", "event_time": 10**30,
            "event": msg(c, "1700000000.000100", "x")}
    assert post_envelope(client, huge).status_code == 400
    # An event_ts that is present but not a Slack timestamp is refused whatever its JSON type (Slack always
    # sends a string): out of range, negative, or a boolean, which is not a time at all. The envelope's own
    # event_time is valid, so it is event_ts that is refused.
    for ets in (1e300, -5, 10**20, True, {"ts": "1700000000.000000"}):
        r = post_event(client, "T1", {"type": "channel_deleted", "channel": c, "event_ts": ets},
                       event_time=1_700_000_000)
        assert r.status_code == 400, ets
        assert "not a Slack timestamp" in r.json["message"]
    r = post_event(client, "T1", {"type": "channel_created", "event_ts": "1700000000.000000",
                                  "channel": {"id": c, "name": "n", "created": 10**40}})
    assert r.status_code == 200  # an absurd `created` is ignored, the event time is used
    weird_files = [{"id": 5}, {"id": "FW", "url_private": 7, "mimetype": 3, "name": ["x"]}]
    r = post_event(client, "T1", msg(c, "1700000001.000100", "files", subtype="file_share", files=weird_files))
    assert r.status_code == 200
    # A file list holding something that is not an object is not Slack's: refused whole, with the reason.
    r = post_event(client, "T1", msg(c, "1700000001.000200", "files", subtype="file_share",
                                     files=[*weird_files, "not a dict"]))
    assert r.status_code == 400 and "files must be a list of objects" in r.json["message"]
    for field, value in (("attachments", {"text": "x"}), ("blocks", ["x"]), ("bot_profile", "B1"),
                         ("edited", "1700000000.1")):
        r = post_event(client, "T1", {**msg(c, "1700000001.000300", "shape"), field: value})
        assert r.status_code == 400 and field in r.json["message"], field
    r = post_event(client, "T1", msg(c, "1700000002.000100", "bad thread", thread_ts="soon"))
    assert r.status_code == 400
    # 9999-12-30T00:00:00Z and later: a page in a zone ahead of UTC could not show its date.
    for ts, thread in (("253402128000.000000", None), ("1700000003.000100", "253402300800.000000")):
        r = post_event(client, "T1", msg(c, ts, "far future", **({"thread_ts": thread} if thread else {})),
                       event_time=1_700_000_000)
        assert r.status_code == 400 and "after 9999-12-29" in r.json["message"], ts
    assert post_event(client, "T1", msg(c, "253402127999.999999", "last second"),
                      event_time=1_700_000_000).status_code == 200
    assert [m["text"] for m in timeline(client, "T1", c)] == ["last second", "files"]


def test_hidden_bookkeeping_subtypes_are_not_messages(client, unique_channel):
    c = unique_channel()
    post_event(client, "T1", msg(c, "1700000000.000100", "parent"))
    replied = {"type": "message", "subtype": "message_replied", "hidden": True, "channel": c,
               "channel_type": "channel", "ts": "1700000009.000000", "event_ts": "1700000009.000000",
               "message": {"type": "message", "user": "U1", "text": "parent", "ts": "1700000000.000100",
                           "thread_ts": "1700000000.000100", "reply_count": 1}}
    r = post_event(client, "T1", replied)
    assert r.status_code == 200 and r.json["outcome"].startswith("ignored")
    assert [m["ts"] for m in timeline(client, "T1", c)] == ["1700000000.000100"]


def test_raw_event_is_kept_compressed(client, db, settings, unique_channel):
    import zstandard

    from api.slack.timeutil import day_of, ts_to_us

    assert settings.slack_keep_raw_events  # the default
    c = unique_channel()
    event = msg(c, "1700000000.000100", "keep me raw " * 50)
    env = envelope("T1", event, event_id="EvRAW1")
    assert post_envelope(client, env).status_code == 200
    us = ts_to_us("1700000000.000100")
    # Out of the timeline row (issue 30): in its own table, one partition per channel-hour, read by ts.
    row = db.execute_raw("SELECT raw FROM slack_message_raw WHERE team_id=%s AND channel_id=%s AND hour=%s "
                         "AND ts=%s", ("T1", c, us // 3_600_000_000, us)).one()
    raw = bytes(row.raw)
    assert json.loads(zstandard.ZstdDecompressor().decompress(raw)) == env
    assert len(raw) < len(json.dumps(env))
    assert messages.raw_event(db, "T1", c, us) == env
    page = db.execute_raw("SELECT * FROM slack_messages WHERE team_id=%s AND channel_id=%s AND day=%s",
                          ("T1", c, day_of(us))).one()
    assert page.raw is None  # the timeline row no longer carries it


def test_events_path_comes_from_the_app_settings(settings, db):
    """CHRONICLE_SLACK_EVENTS_PATH (Settings.slack_events_path) moves the receiver and its OpenAPI entry."""
    from api.app import create_app

    app = create_app(dataclasses.replace(settings, slack_events_path="/hooks/slack-events"), database=db)
    client = app.test_client()
    paths = client.get("/openapi.json").json["paths"]
    assert "/hooks/slack-events" in paths and "/slack/events" not in paths
    assert "requestBody" in paths["/hooks/slack-events"]["post"]
    body = json.dumps({"type": "url_verification", "challenge": "moved"}).encode()
    r = client.post("/hooks/slack-events", data=body, headers=sign(body, SHARED_SECRET))
    assert r.status_code == 200 and r.json == {"challenge": "moved"}
    assert "Server-Timing" in r.headers
    assert client.post("/slack/events", data=body, headers=sign(body, SHARED_SECRET)).status_code == 404


def test_malformed_message_is_400_in_an_archived_channel_and_ignored_in_a_dm(client, unique_channel):
    """The channel policy comes first: a DM's content is never looked at, an archived channel's must be valid."""
    for subtype in (None, "message_changed", "message_deleted"):
        event = {"type": "message", "channel": unique_channel(), "channel_type": "channel", "ts": "soon"}
        if subtype:
            event.update(subtype=subtype, deleted_ts="later", message={"ts": "soon"})
        r = post_event(client, "T1", event)
        assert r.status_code == 400 and "not a Slack timestamp" in r.json["message"], subtype
        r = post_event(client, "T1", {**event, "channel": unique_channel("D"), "channel_type": "im"})
        assert r.status_code == 200 and r.json["outcome"] == "ignored: channel not archived", subtype


def test_other_envelope_types_are_acknowledged(client):
    body = json.dumps({"type": "app_rate_limited", "team_id": "T1", "minute_rate_limited": 1518467820}).encode()
    r = client.post("/slack/events", data=body,
                    headers={**sign(body, SHARED_SECRET), "X-Slack-Retry-Num": "1"})
    assert r.status_code == 200 and r.json == {"ok": True, "outcome": "ignored: envelope type"}
