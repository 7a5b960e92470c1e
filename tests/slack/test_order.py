"""Order and idempotency: any arrival order of the same events, with duplicates, ends in the in-order state.

Each permutation is ingested into a workspace of its own (same channel ids), through the signed endpoint, and
the state read back through the API must equal the in-order workspace's state, which itself is checked against
expectations written out by hand below.
"""

from __future__ import annotations

import random

import pytest

from tests.slack.helpers import (
    ALL,
    channel_event,
    created,
    delete,
    edit,
    msg,
    post_event,
    reaction,
    rename,
    workspace_get,
)

C, OLD, NEW = "CORDER01", "CIDOLD01", "CIDNEW01"


def t(seconds: float) -> str:
    return f"{1700000000 + seconds:.6f}"


def scenario() -> list[dict]:
    m1, m2, r1, r2, bc, m3, m4, fs = (t(10), t(20), t(25), t(27), t(28), t(35), t(36), t(40))
    return [
        created(C, "alpha", t(0)),
        channel_event("channel_purpose", C, t(3), purpose="first purpose"),
        channel_event("channel_topic", C, t(4), topic="first topic"),
        rename(C, "beta", t(5)),
        {**msg(C, t(6), "set the topic", subtype="channel_topic"), "topic": "topic by message"},
        channel_event("channel_archive", C, t(7), user="U1"),
        channel_event("channel_unarchive", C, t(8), user="U1"),
        rename(C, "gamma", t(9)),
        channel_event("channel_convert_to_private", C, t(50)),
        channel_event("channel_convert_to_public", C, t(51)),
        channel_event("channel_archive", C, t(60), user="U1"),
        msg(C, m1, "m1 v1"),
        msg(C, m2, "thread parent", user="U2", thread_ts=m2),
        msg(C, r1, "reply one", user="U3", thread_ts=m2),
        msg(C, r2, "reply two", user="U4", thread_ts=m2),
        msg(C, bc, "broadcast reply", user="U3", thread_ts=m2, subtype="thread_broadcast"),
        {**msg(C, m3, "bot says hi", user="UBOT"), "subtype": "bot_message", "bot_id": "B1", "username": "bot"},
        msg(C, m4, "waves", subtype="me_message"),
        msg(C, fs, "a file", subtype="file_share", files=[
            {"id": "F1", "name": "a.txt", "mimetype": "text/plain", "url_private": "http://127.0.0.1:9/files/F1"},
            {"id": "F2", "name": "doc", "is_external": True, "external_url": "https://example.invalid/doc"}]),
        edit(C, m1, "m1 v2", "m1 v1", t(41)),
        edit(C, m1, "m1 v3", "m1 v2", t(43), prev_edited=t(41)),
        edit(C, r1, "reply one (edited)", "reply one", t(44), thread_ts=m2),
        delete(C, m3, t(45)),
        delete(C, r2, t(46)),
        reaction("added", C, m1, "+1", "U2", t(47)),
        reaction("added", C, m1, "+1", "U3", t(48)),
        reaction("removed", C, m1, "+1", "U2", t(49)),
        reaction("added", C, m1, "tada", "U2", t(52)),
        reaction("added", C, m2, "eyes", "U4", t(53)),
        reaction("removed", C, m2, "eyes", "U4", t(54)),
        reaction("added", C, m2, "eyes", "U4", t(55)),
        reaction("added", C, r1, "heart", "U2", t(56)),
        # An id change: messages under both ids, a rename after the change.
        created(OLD, "legacy", t(1)),
        msg(OLD, t(2), "said under the old id"),
        {"type": "channel_id_changed", "old_channel_id": OLD, "new_channel_id": NEW, "event_ts": t(30)},
        msg(NEW, t(31), "said under the new id"),
        rename(NEW, "modern", t(32)),
        channel_event("channel_deleted", NEW, t(70)),
    ]


def snapshot(client, team: str) -> dict:
    """Everything the read API returns for the scenario's channels."""
    def get(path: str, **params):
        return workspace_get(client, team, path, **params)

    out = {
        "timeline": get(f"/channels/{C}/messages", include_deleted="true", limit=200),
        "visible": get(f"/channels/{C}/messages", limit=200),
        "thread": get(f"/channels/{C}/threads/{t(20)}", include_deleted="true"),
        "m1": get(f"/channels/{C}/messages/{t(10)}"),
        "r1": get(f"/channels/{C}/messages/{t(25)}"),
        "meta": get(f"/channels/{C}"),
        "new_meta": get(f"/channels/{NEW}"),
        "new_timeline": get(f"/channels/{NEW}/messages"),
        "index": get("/channels", include_deleted="true"),
    }
    return out


def ingest(client, team: str, events: list[dict]) -> None:
    for event in events:
        r = post_event(client, team, event)
        assert r.status_code == 200, r.json


@pytest.fixture(scope="module")
def in_order(client_module):
    ingest(client_module, "TORDER", scenario())
    return snapshot(client_module, "TORDER")


@pytest.fixture(scope="module")
def client_module(app):
    return app.test_client()


def test_in_order_state_matches_hand_written_expectations(in_order):
    s = in_order
    texts = [(m["ts"], m["text"]) for m in s["visible"]["messages"]]
    # Newest first; m3 (bot) and r2 deleted -> hidden; replies are part of the channel's messages.
    assert texts == [(t(40), "a file"), (t(36), "waves"), (t(28), "broadcast reply"),
                     (t(25), "reply one (edited)"), (t(20), "thread parent"), (t(10), "m1 v3"),
                     (t(6), "set the topic")]
    deleted = {m["ts"] for m in s["timeline"]["messages"] if m.get("deleted")}
    assert deleted == {t(35), t(27)}
    m1 = s["m1"]
    assert m1["edited_ts"] == t(43)
    assert [v["text"] for v in m1["history"]] == ["m1 v1", "m1 v2", "m1 v3"]
    assert [v["ts"] for v in m1["history"]] == [t(10), t(41), t(43)]
    assert sorted((r["name"], tuple(r["users"])) for r in m1["reactions"]) == [("+1", ("U3",)), ("tada", ("U2",))]
    thread = s["thread"]
    assert thread["parent"]["text"] == "thread parent"
    assert thread["parent"]["reactions"] == [{"name": "eyes", "users": ["U4"], "count": 1}]
    assert [(r["ts"], r.get("deleted", False)) for r in thread["replies"]] == [
        (t(25), False), (t(27), True), (t(28), False)]
    assert thread["replies"][0]["reactions"][0]["name"] == "heart"
    assert thread["replies"][2]["subtype"] == "thread_broadcast"
    files = next(m for m in s["visible"]["messages"] if m["ts"] == t(40))["files"]
    assert [f["id"] for f in files] == ["F1", "F2"]
    meta = s["meta"]
    assert meta["name"] == "gamma"
    assert [n["name"] for n in meta["names_history"]] == ["gamma", "beta", "alpha"]
    assert meta["archived"] is True
    assert meta["visibility"] == "public"
    assert meta["purpose"] == "first purpose"
    assert meta["topic"] == "topic by message"
    assert "deleted" not in meta
    new = s["new_meta"]
    assert new["name"] == "modern" and new["prev_channel_id"] == OLD
    assert [n["name"] for n in new["names_history"]] == ["modern", "legacy"]
    assert new["deleted"] is True
    assert [m["text"] for m in s["new_timeline"]["messages"]] == ["said under the new id", "said under the old id"]
    index = {e["channel_id"]: e["name"] for e in s["index"]["channels"]}
    assert index == {C: "gamma", OLD: "legacy", NEW: "deleted_modern"}


@pytest.mark.parametrize("seed", range(24))
def test_shuffled_and_duplicated_deliveries_converge(client_module, in_order, seed):
    rng = random.Random(seed)
    events = scenario()
    # Every event at least once, some two or three times (Slack retries / duplicate deliveries).
    deliveries = events + [rng.choice(events) for _ in range(len(events) // 2)]
    rng.shuffle(deliveries)
    if seed % 4 == 0:
        deliveries.reverse()  # the worst case: everything newest first
    team = f"TSHUF{seed:02d}"
    ingest(client_module, team, deliveries)
    assert snapshot(client_module, team) == in_order


def test_named_out_of_order_cases(client_module, unique_channel):
    """The issue's examples, one by one, each against the state its event times imply."""
    client = client_module
    c = unique_channel()
    base = f"/slack/teams/TNAMED/channels/{c}"
    # An edit that arrives before its message: the edit (later event time) wins, history has both versions.
    post_event(client, "TNAMED", edit(c, t(1), "edited", "original", t(5)))
    post_event(client, "TNAMED", msg(c, t(1), "original"))
    m = client.get(f"{base}/messages/{t(1)}", headers=ALL).json
    assert m["text"] == "edited" and [v["text"] for v in m["history"]] == ["original", "edited"]
    # An unarchive before its archive: the unarchive is newer, so the channel is not archived...
    post_event(client, "TNAMED", channel_event("channel_unarchive", c, t(20)))
    post_event(client, "TNAMED", channel_event("channel_archive", c, t(10)))
    # ...and a rename before the create: the rename's name stands.
    post_event(client, "TNAMED", rename(c, "second", t(30)))
    post_event(client, "TNAMED", created(c, "first", t(0)))
    meta = client.get(base, headers=ALL).json
    assert "archived" not in meta
    assert meta["name"] == "second" and [n["name"] for n in meta["names_history"]] == ["second", "first"]
    # The same event three times: stored once.
    for _ in range(3):
        post_event(client, "TNAMED", reaction("added", c, t(1), "eyes", "U9", t(40)))
        post_event(client, "TNAMED", msg(c, t(2), "twice?"))
    m = client.get(f"{base}/messages/{t(1)}", headers=ALL).json
    assert m["reactions"] == [{"name": "eyes", "users": ["U9"], "count": 1}]
    texts = [x["text"] for x in client.get(f"{base}/messages", headers=ALL).json["messages"]]
    assert texts == ["twice?", "edited"]
    # A delete before its message: the message arrives deleted.
    post_event(client, "TNAMED", delete(c, t(3), t(9)))
    post_event(client, "TNAMED", msg(c, t(3), "short-lived"))
    assert client.get(f"{base}/messages/{t(3)}", headers=ALL).status_code == 404
    assert client.get(f"{base}/messages/{t(3)}", headers=ALL,
                      query_string={"include_deleted": "true"}).json["deleted"] is True
