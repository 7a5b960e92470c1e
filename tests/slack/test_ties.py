"""Event-time ties (issue 8, item 6): events that carry the same time end in one documented state, whatever
the order they arrive in (docs/slack.md, "Ties"). Each case is ingested in both arrival orders, each order into
a workspace of its own, and both must end in the state written out here by hand."""

from __future__ import annotations

import itertools

import pytest

from tests.slack.helpers import ALL, msg, post_event, reaction

SECOND = 1_700_100_000
_teams = itertools.count()


def both_orders(client, events: list[tuple[dict, int | None]]):
    """Post the events in the given order into one new workspace and in reverse into another; yields the team
    of each. `events` are (event, envelope event_time or None for the default)."""
    for ordered in (events, list(reversed(events))):
        team = f"TTIE{next(_teams):04d}"
        for event, event_time in ordered:
            kw = {"event_time": event_time} if event_time is not None else {}
            r = post_event(client, team, event, **kw)
            assert r.status_code == 200, r.json
        yield team


def meta(client, team: str, channel: str) -> dict:
    r = client.get(f"/slack/teams/{team}/channels/{channel}", headers=ALL)
    assert r.status_code == 200, r.json
    return r.json


def created(channel: str, name: str) -> dict:
    return {"type": "channel_created", "event_ts": f"{SECOND - 100}.000000",
            "channel": {"id": channel, "name": name, "created": SECOND - 100, "creator": "U1"}}


def no_ts(kind: str, channel, **extra) -> dict:
    """A channel event as documented by Slack, without event_ts: its time is the envelope's whole second."""
    return {"type": kind, "channel": channel, **extra}


def test_two_renames_in_one_second_keep_both_names_and_agree(client, unique_channel):
    c = unique_channel()
    renames = [(no_ts("channel_rename", {"id": c, "name": name, "created": SECOND - 100}), SECOND)
               for name in ("zeta", "alpha")]
    states = []
    for team in both_orders(client, [(created(c, "start"), None), *renames]):
        m = meta(client, team, c)
        history = [n["name"] for n in m["names_history"]]
        assert sorted(history) == ["alpha", "start", "zeta"]  # no name lost to a shared timestamp
        assert history[-1] == "start" and m["name"] == history[0]
        index = client.get(f"/slack/teams/{team}/channels", headers=ALL).json["channels"]
        assert [e["name"] for e in index if e["channel_id"] == c] == [m["name"]]
        states.append((m["name"], history))
    assert states[0] == states[1]  # the same answer whatever the arrival order


def test_two_topics_in_one_second_end_the_same_in_both_orders(client, unique_channel):
    c = unique_channel()
    topics = [(no_ts("channel_topic", c, topic=t), SECOND) for t in ("b-topic", "a-topic")]
    answers = [meta(client, team, c)["topic"] for team in both_orders(client, [(created(c, "t"), None), *topics])]
    assert answers[0] == answers[1] and answers[0] in {"a-topic", "b-topic"}


@pytest.mark.parametrize("first", ["channel_archive", "channel_unarchive"])
def test_archive_and_unarchive_in_one_second_end_archived(client, unique_channel, first):
    """Without event_ts both are at the same whole second: the set (archive) is taken as the later one."""
    c = unique_channel()
    second = "channel_unarchive" if first == "channel_archive" else "channel_archive"
    for team in both_orders(client, [(created(c, "arch"), None), (no_ts(first, c, user="U1"), SECOND),
                                     (no_ts(second, c, user="U1"), SECOND)]):
        assert meta(client, team, c).get("archived") is True


def test_unarchive_one_microsecond_after_archive_wins_in_both_orders(client, unique_channel):
    c = unique_channel()
    events = [(created(c, "arch"), None),
              ({"type": "channel_archive", "channel": c, "event_ts": f"{SECOND}.000100"}, SECOND),
              ({"type": "channel_unarchive", "channel": c, "event_ts": f"{SECOND}.000101"}, SECOND)]
    for team in both_orders(client, events):
        assert "archived" not in meta(client, team, c)


def test_reaction_removed_and_readded_at_the_same_time_ends_present(client, unique_channel):
    c = unique_channel()
    ts = f"{SECOND}.000000"
    events = [(msg(c, ts, "react to me"), None),
              (reaction("removed", c, ts, "eyes", "U2", f"{SECOND + 5}.000200"), None),
              (reaction("added", c, ts, "eyes", "U2", f"{SECOND + 5}.000200"), None)]
    for team in both_orders(client, events):
        m = client.get(f"/slack/teams/{team}/channels/{c}/messages/{ts}", headers=ALL).json
        assert m["reactions"] == [{"name": "eyes", "users": ["U2"], "count": 1}]


def test_reaction_removed_one_microsecond_after_it_was_added_ends_removed(client, unique_channel):
    c = unique_channel()
    ts = f"{SECOND}.000000"
    events = [(msg(c, ts, "react to me"), None),
              (reaction("added", c, ts, "eyes", "U2", f"{SECOND + 5}.000200"), None),
              (reaction("removed", c, ts, "eyes", "U2", f"{SECOND + 5}.000201"), None)]
    for team in both_orders(client, events):
        m = client.get(f"/slack/teams/{team}/channels/{c}/messages/{ts}", headers=ALL).json
        assert "reactions" not in m


def test_reactions_without_event_ts_in_one_second_end_present(client, unique_channel):
    c = unique_channel()
    ts = f"{SECOND}.000000"
    bare = [{k: v for k, v in reaction(kind, c, ts, "tada", "U3", "0").items() if k != "event_ts"}
            for kind in ("added", "removed")]
    events = [(msg(c, ts, "react to me"), None), (bare[1], SECOND + 9), (bare[0], SECOND + 9)]
    for team in both_orders(client, events):
        m = client.get(f"/slack/teams/{team}/channels/{c}/messages/{ts}", headers=ALL).json
        assert m["reactions"] == [{"name": "tada", "users": ["U3"], "count": 1}]


def test_private_and_public_at_the_same_instant_end_private(client, unique_channel):
    c = unique_channel()
    events = [(created(c, "vis"), None),
              ({"type": "channel_convert_to_public", "channel": c, "event_ts": f"{SECOND}.000300"}, SECOND),
              ({"type": "channel_convert_to_private", "channel": c, "event_ts": f"{SECOND}.000300"}, SECOND)]
    for team in both_orders(client, events):
        assert meta(client, team, c)["visibility"] == "private"
