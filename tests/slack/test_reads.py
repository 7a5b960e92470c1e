"""Read endpoints: timeline paging with signed cursors, time filters, threads, channels, auth, errors."""

from __future__ import annotations

import uuid

import pytest

from api.paging import sign_cursor, verify_cursor
from tests.slack.helpers import ALL, T1_ONLY, channel_event, created, delete, msg, post_event, rename

DAY = 86_400


def ts(seconds: float) -> str:
    return f"{1700000000 + seconds:.6f}"


def pages(client, team, channel, **params):
    """All pages of a timeline, following next_cursor; returns (list of pages of ts)."""
    out, cursor = [], None
    for _ in range(100):
        q = dict(params)
        if cursor:
            q["cursor"] = cursor
        r = client.get(f"/slack/teams/{team}/channels/{channel}/messages", headers=ALL, query_string=q)
        assert r.status_code == 200, r.json
        out.append([m["ts"] for m in r.json["messages"]])
        cursor = r.json["next_cursor"]
        if not cursor:
            return out
    raise AssertionError("cursor never ended")


@pytest.fixture(scope="module")
def busy(app):
    """A channel with 3 messages a day on days 0, 1, 5, 40 and 400 (gaps: empty buckets never read)."""
    client = app.test_client()
    channel = "CBUSYREADS"
    stamps = [d * DAY + h * 3600 for d in (0, 1, 5, 40, 400) for h in (1, 2, 3)]
    for s in stamps:
        assert post_event(client, "TREAD", msg(channel, ts(s), f"m{s}")).status_code == 200
    post_event(client, "TREAD", delete(channel, ts(5 * DAY + 2 * 3600), ts(5 * DAY + 9 * 3600)))
    return channel, [ts(s) for s in stamps]


def test_timeline_pages_newest_first_across_days(client, busy):
    channel, stamps = busy
    visible = [s for s in stamps if s != ts(5 * DAY + 2 * 3600)]
    got = pages(client, "TREAD", channel, limit=4)
    assert [len(p) for p in got] == [4, 4, 4, 2]
    assert [s for p in got for s in p] == sorted(visible, reverse=True)


def test_timeline_oldest_first_and_include_deleted(client, busy):
    channel, stamps = busy
    got = pages(client, "TREAD", channel, limit=5, order="asc", include_deleted="true")
    assert [s for p in got for s in p] == sorted(stamps)
    r = client.get(f"/slack/teams/TREAD/channels/{channel}/messages", headers=ALL,
                   query_string={"include_deleted": "true", "before": ts(5 * DAY + 3 * 3600), "limit": 1})
    assert r.json["messages"][0]["deleted"] is True and r.json["messages"][0]["deleted_ts"] == ts(5 * DAY + 9 * 3600)


def test_before_and_after_filters(client, busy):
    channel, stamps = busy
    got = pages(client, "TREAD", channel, limit=50, after=ts(1 * DAY + 1 * 3600), before=ts(40 * DAY + 3 * 3600))
    expected = [s for s in stamps
                if ts(1 * DAY + 3600) < s < ts(40 * DAY + 3 * 3600) and s != ts(5 * DAY + 2 * 3600)]
    assert got == [sorted(expected, reverse=True)]


def test_cursor_is_signed_and_bound_to_its_listing(client, busy, settings):
    channel, _ = busy
    r = client.get(f"/slack/teams/TREAD/channels/{channel}/messages", headers=ALL, query_string={"limit": 2})
    cursor = r.json["next_cursor"]
    assert "paging" not in cursor and len(cursor) < 200
    body, _, mac = cursor.partition(".")
    tampered = body[:-2] + ("AA" if body[-2:] != "AA" else "BB") + "." + mac
    for bad in (tampered, "garbage", cursor + "x", "a.b.c"):
        r = client.get(f"/slack/teams/TREAD/channels/{channel}/messages", headers=ALL,
                       query_string={"limit": 2, "cursor": bad})
        assert r.status_code == 400, bad
        assert r.json["code"] == 400
    # The same cursor with other filters (another listing) is refused too.
    r = client.get(f"/slack/teams/TREAD/channels/{channel}/messages", headers=ALL,
                   query_string={"limit": 2, "cursor": cursor, "order": "asc"})
    assert r.status_code == 400


def test_limit_validation(client, busy):
    channel, _ = busy
    for bad in (0, 201, "x"):
        r = client.get(f"/slack/teams/TREAD/channels/{channel}/messages", headers=ALL, query_string={"limit": bad})
        assert r.status_code == 422 and r.json["code"] == 422
    r = client.get(f"/slack/teams/TREAD/channels/{channel}/messages", headers=ALL,
                   query_string={"before": "yesterday"})
    assert r.status_code == 422
    r = client.get(f"/slack/teams/TREAD/channels/{channel}/messages", headers=ALL, query_string={"limit": 200})
    assert r.status_code == 200


def test_auth(client, busy, unique_channel):
    channel, _ = busy
    url = f"/slack/teams/TREAD/channels/{channel}/messages"
    assert client.get(url).status_code == 401
    assert client.get(url, headers={"Authorization": "Bearer nope"}).status_code == 401
    r = client.get(url, headers=T1_ONLY)
    assert r.status_code == 403 and r.json["code"] == 403
    # Workspace T1 is in scope for token-t1, but a channel that became private needs the private scope.
    c = unique_channel()
    post_event(client, "T1", created(c, "soon-private", ts(0)))
    post_event(client, "T1", msg(c, ts(1), "hello"))
    assert client.get(f"/slack/teams/T1/channels/{c}/messages", headers=T1_ONLY).status_code == 200
    post_event(client, "T1", channel_event("channel_convert_to_private", c, ts(2)))
    for path in (f"/channels/{c}/messages", f"/channels/{c}", f"/channels/{c}/messages/{ts(1)}"):
        assert client.get(f"/slack/teams/T1{path}", headers=T1_ONLY).status_code == 403, path
        assert client.get(f"/slack/teams/T1{path}", headers=ALL).status_code == 200, path
    index_t1 = client.get("/slack/teams/T1/channels", headers=T1_ONLY).json["channels"]
    assert c not in {e["channel_id"] for e in index_t1}
    index_all = client.get("/slack/teams/T1/channels", headers=ALL).json["channels"]
    assert c in {e["channel_id"] for e in index_all}


def test_not_found(client, unique_channel):
    c = unique_channel()
    assert client.get(f"/slack/teams/T1/channels/{c}", headers=ALL).status_code == 404
    assert client.get(f"/slack/teams/T1/channels/{c}/messages/{ts(1)}", headers=ALL).status_code == 404
    assert client.get(f"/slack/teams/T1/channels/{c}/messages/notats", headers=ALL).status_code == 404
    assert client.get(f"/slack/teams/T1/channels/{c}/threads/{ts(1)}", headers=ALL).status_code == 404
    r = client.get(f"/slack/teams/T1/channels/{c}/messages", headers=ALL)
    assert r.status_code == 200 and r.json == {"messages": [], "next_cursor": None}


def test_deleted_message_hidden_unless_asked(client, unique_channel):
    c = unique_channel()
    post_event(client, "T1", msg(c, ts(1), "gone soon"))
    post_event(client, "T1", delete(c, ts(1), ts(2)))
    assert client.get(f"/slack/teams/T1/channels/{c}/messages/{ts(1)}", headers=ALL).status_code == 404
    r = client.get(f"/slack/teams/T1/channels/{c}/messages/{ts(1)}", headers=ALL,
                   query_string={"include_deleted": "true"})
    assert r.json["deleted"] is True and r.json["text"] == "gone soon"


def test_thread_paging(client, unique_channel):
    c = unique_channel()
    parent = ts(100)
    post_event(client, "T1", msg(c, parent, "parent", thread_ts=parent))
    replies = [ts(100 + i * 37_000) for i in range(1, 8)]  # spread over several days
    for i, r in enumerate(reversed(replies)):
        post_event(client, "T1", msg(c, r, f"reply {len(replies) - i}", thread_ts=parent))
    got, cursor, first = [], None, None
    for _ in range(10):
        q = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        body = client.get(f"/slack/teams/T1/channels/{c}/threads/{parent}", headers=ALL, query_string=q).json
        first = first or body
        got += [m["ts"] for m in body["replies"]]
        cursor = body["next_cursor"]
        if not cursor:
            break
    assert first["parent"]["text"] == "parent"
    assert got == replies


def test_names_history_is_capped_at_20_newest_first(client, unique_channel):
    c = unique_channel()
    post_event(client, "T1", created(c, "name-0", ts(0)))
    for i in range(1, 25):
        post_event(client, "T1", rename(c, f"name-{i}", ts(i)))
    meta = client.get(f"/slack/teams/T1/channels/{c}", headers=ALL).json
    assert meta["name"] == "name-24"
    assert [n["name"] for n in meta["names_history"]] == [f"name-{i}" for i in range(24, 4, -1)]


def test_index_hides_deleted_channels_unless_asked(client, unique_channel):
    a, b = unique_channel(), unique_channel()
    post_event(client, "TIDX", created(a, "keep", ts(0)))
    post_event(client, "TIDX", created(b, "drop", ts(0)))
    post_event(client, "TIDX", channel_event("channel_deleted", b, ts(5)))
    index = client.get("/slack/teams/TIDX/channels", headers=ALL).json
    assert {e["channel_id"]: e["name"] for e in index["channels"]} == {a: "keep"}
    assert index["next_cursor"] is None
    index = client.get("/slack/teams/TIDX/channels", headers=ALL, query_string={"include_deleted": "true"}).json
    assert {e["channel_id"]: e["name"] for e in index["channels"]} == {a: "keep", b: "deleted_drop"}
    assert next(e for e in index["channels"] if e["channel_id"] == b)["deleted"] is True


def test_index_pages_through_every_channel_once(client):
    team = f"TPG{uuid.uuid4().hex[:8].upper()}"
    ids = [f"CPAGE{i:03d}" for i in range(57)]
    for i, c in enumerate(ids):
        post_event(client, team, created(c, f"chan-{i}", ts(i)))
    post_event(client, team, channel_event("channel_deleted", ids[3], ts(100)))
    # An id change whose old id sits on another page: the new id still shows the old id's name.
    post_event(client, team, {"type": "channel_id_changed", "old_channel_id": ids[0], "new_channel_id": "CZNEW",
                              "event_ts": ts(101)})
    seen, cursor, pages = [], "", 0
    while True:
        r = client.get(f"/slack/teams/{team}/channels", headers=ALL, query_string={"limit": 10, "cursor": cursor})
        assert r.status_code == 200, r.json
        pages += 1
        seen.extend(r.json["channels"])
        cursor = r.json["next_cursor"]
        if cursor is None:
            break
    expected = sorted(set(ids) - {ids[3]}) + ["CZNEW"]
    assert [e["channel_id"] for e in seen] == expected and pages == 6
    names = {e["channel_id"]: e["name"] for e in seen}
    assert names["CZNEW"] == "chan-0" and names[ids[10]] == "chan-10"
    # A cursor of this listing is refused by another listing (with deleted channels) and another team.
    first = client.get(f"/slack/teams/{team}/channels", headers=ALL, query_string={"limit": 5}).json["next_cursor"]
    assert client.get(f"/slack/teams/{team}/channels", headers=ALL,
                      query_string={"cursor": first, "include_deleted": "true"}).status_code == 400
    assert client.get("/slack/teams/TIDX/channels", headers=ALL, query_string={"cursor": first}).status_code == 400
    assert client.get(f"/slack/teams/{team}/channels", headers=ALL, query_string={"limit": 0}).status_code == 422
    assert client.get(f"/slack/teams/{team}/channels", headers=ALL, query_string={"limit": 1001}).status_code == 422


def test_openapi_lists_every_slack_endpoint(client):
    spec = client.get("/openapi.json").json
    paths = spec["paths"]
    for path in ("/slack/events", "/slack/teams/{team_id}/channels", "/slack/teams/{team_id}/channels/{channel_id}",
                 "/slack/teams/{team_id}/channels/{channel_id}/messages",
                 "/slack/teams/{team_id}/channels/{channel_id}/messages/{ts}",
                 "/slack/teams/{team_id}/channels/{channel_id}/threads/{thread_ts}"):
        assert path in paths, path
    assert "requestBody" in paths["/slack/events"]["post"]


def test_paging_helper_roundtrip_and_scope():
    secret = b"k"
    cursor = sign_cursor({"p": 42}, secret, "scope-a")
    assert verify_cursor(cursor, secret, "scope-a") == {"p": 42}
    from api.errors import BadCursor, http_status

    # A domain error, not an HTTP one (api/errors.py maps it: 400 with the reason).
    for args in ((cursor, secret, "scope-b"), (cursor, b"other", "scope-a"), ("x" * 3000, secret, "scope-a")):
        with pytest.raises(BadCursor) as info:
            verify_cursor(*args)
        assert http_status(info.value) == 400 and "invalid cursor" in info.value.reason


def test_sample_workspace_loads_idempotently(client, db):
    from api.slack.sample import GENERAL, OLD, RANDOM, TEAM, load_sample

    first = load_sample(db)
    second = load_sample(db)
    assert first == second and first["stored"] == first["events"]
    general = client.get(f"/slack/teams/{TEAM}/channels/{GENERAL}/messages", headers=ALL).json["messages"]
    assert len(general) == 5
    welcome = general[-1]
    assert welcome["text"].endswith(":wave:") and welcome["reactions"][0]["count"] == 2
    rnd = client.get(f"/slack/teams/{TEAM}/channels/{RANDOM}/messages", headers=ALL).json["messages"]
    assert [m.get("subtype") for m in rnd] == ["bot_message", None]
    index = client.get(f"/slack/teams/{TEAM}/channels", headers=ALL).json["channels"]
    assert {e["channel_id"]: e["name"] for e in index} == {GENERAL: "general", RANDOM: "random", OLD: "archive-2024"}
    assert client.get(f"/slack/teams/{TEAM}/channels/{OLD}", headers=ALL).json["archived"] is True
    # The sample's activity days are built by the load: Alice's day, from the sample's script (T0 + seconds).
    from api.slack.sample import T0

    day = client.get(f"/slack/teams/{TEAM}/users/UALICE/activity?from=2025-11-21", headers=ALL).json["days"][0]
    assert [(e["kind"], e["at"] - T0 * 1_000_000) for e in day["events"]] == [
        ("message", 10_000_000), ("reply", 30_000_000), ("edit", 60_000_000),
        ("reaction_received", 70_000_000), ("reaction_received", 71_000_000)]
    assert {e["user"] for e in day["events"] if e["kind"] == "reaction_received"} == {"UBOB", "UCAROL"}


def test_many_quiet_days_page_past_the_day_listing_horizon(client, unique_channel):
    """One message every 3 days for 90 messages: more days than one request lists (64)."""
    c = unique_channel()
    stamps = [ts(i * 3 * DAY) for i in range(90)]
    for s in stamps:
        post_event(client, "T1", msg(c, s, "quiet"))
    got = pages(client, "T1", c, limit=50)
    assert [s for p in got for s in p] == sorted(stamps, reverse=True)
    assert all(len(p) <= 50 for p in got)
    got_asc = pages(client, "T1", c, limit=200, order="asc")
    assert [s for p in got_asc for s in p] == sorted(stamps)


def test_pages_through_mostly_deleted_days_and_an_id_chain(client, unique_channel):
    """Same day under two ids (before/after channel_id_changed), most messages deleted: every visible
    message comes exactly once, newest first, whatever the page size."""
    old, new = unique_channel(), unique_channel()
    post_event(client, "TDEL", created(old, "chain", ts(0)))
    stamps = {old: [ts(100 + i * 10) for i in range(40)], new: [ts(105 + i * 10) for i in range(40)]}
    post_event(client, "TDEL", {"type": "channel_id_changed", "old_channel_id": old, "new_channel_id": new,
                                "event_ts": ts(50)})
    visible = []
    for channel, lst in stamps.items():
        for i, s in enumerate(lst):
            post_event(client, "TDEL", msg(channel, s, f"{channel}-{i}"))
            if i % 5:
                post_event(client, "TDEL", delete(channel, s, ts(10_000 + i)))
            else:
                visible.append(s)
    expected = sorted(visible, reverse=True)
    for limit in (1, 3, 7, 50):
        got = pages(client, "TDEL", new, limit=limit)
        assert [s for p in got for s in p] == expected, limit
    got = pages(client, "TDEL", new, limit=4, include_deleted="true", order="asc")
    assert [s for p in got for s in p] == sorted(stamps[old] + stamps[new])
    # The old id alone still shows only its own messages.
    assert [s for p in pages(client, "TDEL", old, limit=200) for s in p] == sorted(
        [s for s in visible if s in stamps[old]], reverse=True)


def test_openapi_states_the_slack_input_rules(client):
    """Patterns of ids and timestamps, the cursor's format, and 400 for a bad cursor are in the document."""
    from api.slack.codec import ID_PATTERN
    from api.slack.timeutil import TS_PATTERN

    spec = client.get("/openapi.json").json
    base = "/slack/teams/{team_id}/channels/{channel_id}"
    for path, names in ((f"{base}/messages/{{ts}}", ("team_id", "channel_id", "ts")),
                        (f"{base}/threads/{{thread_ts}}", ("team_id", "channel_id", "thread_ts")),
                        ("/slack/teams/{team_id}/channels", ("team_id",))):
        declared = {p["name"]: p for p in spec["paths"][path].get("parameters", [])
                    + spec["paths"][path]["get"].get("parameters", []) if p.get("in") == "path"}
        for name in names:
            pattern = TS_PATTERN if name.endswith("ts") else ID_PATTERN
            assert declared[name]["schema"]["pattern"] == pattern, (path, name)
            assert declared[name]["required"] is True
    timeline_op = spec["paths"][f"{base}/messages"]["get"]
    query = {p["name"]: p["schema"] for p in timeline_op["parameters"] if p.get("in") == "query"}
    assert query["before"]["pattern"] == query["after"]["pattern"] == TS_PATTERN
    assert query["cursor"]["maxLength"] == 2048 and query["cursor"]["pattern"]
    for op in (timeline_op, spec["paths"][f"{base}/threads/{{thread_ts}}"]["get"]):
        assert "cursor" in op["responses"]["400"]["description"]


def test_values_outside_the_documented_patterns_are_refused(client, busy):
    channel, _ = busy
    base = f"/slack/teams/TREAD/channels/{channel}"
    # A trailing newline or non-ASCII digits match no documented pattern: refused, never served.
    assert client.get(f"{base}/messages/{ts(3600)}%0A", headers=ALL).status_code == 404
    assert client.get(f"{base}/messages/١٧٠٠٠٠٠٠٠٠", headers=ALL).status_code == 404
    assert client.get(f"/slack/teams/TREAD%0A/channels/{channel}/messages", headers=ALL).status_code == 404
    r = client.get(f"{base}/messages", headers=ALL, query_string={"before": "1700000000\n"})
    assert r.status_code == 422
    r = client.get(f"{base}/messages", headers=ALL, query_string={"cursor": "x" * 3000})
    assert r.status_code == 400 and r.json["code"] == 400
