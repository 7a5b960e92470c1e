"""Users: profiles by Slack's own `updated` time, the earliest first-seen time and first post whatever the
order of arrival, the paged users listing."""

from __future__ import annotations

import random
import uuid

from api.slack import users
from tests.slack.helpers import ALL, msg, post_event


def _team() -> str:
    return f"T{uuid.uuid4().hex[:12].upper()}"


def _profile(name: str, updated: int, **extra) -> dict:
    return {"id": "U7", "name": name, "updated": updated, "tz": extra.pop("tz", "UTC"), "tz_offset": 0,
            "profile": {"display_name": name, "real_name": name.title()}, **extra}


def test_user_change_events_keep_the_profile_with_the_newest_updated_time_whatever_their_order(client):
    team = _team()
    events = [
        {"type": "team_join", "user": _profile("newbie", 1_700_000_000), "event_ts": "1700000000.000100"},
        {"type": "user_change", "user": _profile("renamed", 1_700_000_500, tz="Asia/Tokyo"),
         "event_ts": "1700000500.000100"},
        {"type": "user_change", "user": _profile("gone", 1_700_000_900, deleted=True),
         "event_ts": "1700000900.000100"},
    ]
    for event in reversed(events):  # newest first: each older one must lose
        assert post_event(client, team, event).status_code == 200
    user = client.get(f"/slack/teams/{team}/users/U7", headers=ALL).get_json()
    assert (user["name"], user["deleted"], user["tz"]) == ("gone", True, "UTC")
    assert user["updated_ts"] == "1700000900.000000"
    assert user["first_seen_ts"] == "1700000000.000100"  # the earliest of the three deliveries


def test_a_user_event_without_a_user_object_is_refused(client):
    r = post_event(client, _team(), {"type": "user_change", "user": "U7", "event_ts": "1700000000.000100"})
    assert r.status_code == 400 and "event.user" in r.get_json()["message"]


def test_the_first_post_is_the_earliest_plain_message_whatever_the_arrival_order(client, unique_channel):
    team, channel = _team(), unique_channel()
    posts = [msg(channel, f"17000000{i:02d}.000100", f"post {i}", user="U9") for i in range(10)]
    noise = [msg(channel, "1699999990.000100", "joined", user="U9", subtype="channel_join")]
    order = posts + noise
    random.Random(3).shuffle(order)
    for event in order:
        assert post_event(client, team, event).status_code == 200
    user = client.get(f"/slack/teams/{team}/users/U9", headers=ALL).get_json()
    assert user["first_post"] == {"ts": "1700000000.000100", "channel_id": channel}  # the join is no post


def test_first_seen_keeps_the_earliest_time_without_reading(db):
    team = _team()
    profile = users.Profile.from_slack(team, _profile("ada", 1_700_000_000), observed_at=0)
    for seen in (2_000, 1_000, 3_000):
        users.store_profile(db, profile, seen_at=seen)
    assert users.get(db, team, "U7")["first_seen_ts"] == "0.001000"


def test_the_users_listing_pages_through_every_bucket_once(db, client):
    team = _team()
    ids = [f"U{i:04d}X" for i in range(37)]
    for uid in ids:
        users.store_profile(db, users.Profile.from_slack(team, {"id": uid, "name": uid.lower(), "updated": 5},
                                                         observed_at=0), seen_at=1)
    assert len({users.bucket_of(u) for u in ids}) == users.BUCKETS  # the listing crosses every bucket
    listed, cursor, pages = [], None, 0
    while True:
        query = {"limit": 7, **({"cursor": cursor} if cursor else {})}
        body = client.get(f"/slack/teams/{team}/users", query_string=query, headers=ALL).get_json()
        assert len(body["users"]) <= 7
        listed += [u["user_id"] for u in body["users"]]
        pages += 1
        cursor = body["next_cursor"]
        if not cursor:
            break
    assert sorted(listed) == sorted(ids) and len(listed) == len(set(listed))
    assert pages == 6  # 37 users, 7 a page
    r = client.get(f"/slack/teams/{team}/users", query_string={"cursor": "forged.cursor"}, headers=ALL)
    assert r.status_code == 400
    assert client.get(f"/slack/teams/{team}/users/UNOBODY", headers=ALL).status_code == 404
    assert client.get(f"/slack/teams/{team}/users", headers={"Authorization": "Bearer token-t1"}).status_code == 403
