"""One message, one row: live events, a Web API backfill and an export import of the same workspace converge.

One scenario (a channel created and renamed, a topic, a user's profile change, messages, a thread, edits,
reactions added and removed, deletes, a file) is delivered through all three routes: each live event alone,
a backfill of the final state from the loopback Slack stand-in, and an import of the final state as an
export ZIP. Every shuffled order of those deliveries, each into its own workspace, must read back through every
read endpoint exactly as the in-order delivery does; the in-order state is itself checked by hand below.
"""

from __future__ import annotations

import json
import random
import zipfile

import pytest

from api.slack.backfill import Backfill, Options
from api.slack.zip_import import import_export
from tests.fakes.slack_web_api import DEFAULT_TOKEN, FakeSlackWebApi
from tests.slack.helpers import channel_event, created, delete, edit, msg, post_event, reaction, rename, workspace_get

C = "CROUTE01"
BASE = 1700000000


def t(seconds: float) -> str:
    return f"{BASE + seconds:.6f}"


M1, M2, R1, R2, M3, M4 = t(10), t(20), t(25), t(27), t(30), t(50)
FILE = {"id": "F1", "name": "a.txt", "mimetype": "text/plain", "url_private": "http://127.0.0.1:9/files/F1"}
FINAL = BASE + 100  # when the backfill ran and the export was made
PROFILE = {"id": "U1", "name": "ada", "real_name": "Ada L", "tz": "Europe/Zurich", "tz_offset": 3600,
           "updated": BASE + 2, "profile": {"display_name": "ada", "real_name": "Ada L"}}


def live_events() -> list[dict]:
    return [
        created(C, "alpha", t(0)),
        {"type": "user_change", "user": PROFILE, "event_ts": t(2)},
        channel_event("channel_topic", C, t(3), topic="first topic"),
        rename(C, "beta", t(5)),
        msg(C, M1, "m1 v1"),
        msg(C, M2, "thread parent", user="U2", thread_ts=M2),
        msg(C, R1, "reply one", user="U3", thread_ts=M2),
        msg(C, R2, "reply two", user="U1", thread_ts=M2),
        msg(C, M3, "to be deleted", user="U2"),
        edit(C, M1, "m1 v2", "m1 v1", t(41)),
        reaction("added", C, M1, "wave", "U2", t(42)),
        reaction("added", C, M1, "eyes", "U3", t(43)),
        reaction("removed", C, M1, "eyes", "U3", t(44)),
        reaction("added", C, R1, "tada", "U1", t(45)),
        delete(C, M3, t(46)),
        delete(C, R2, t(47), thread_ts=M2),  # Slack's previous_message of a reply names its thread
        msg(C, M4, "late with a file", user="U3", subtype="file_share", files=[FILE]),
    ]


def slack_holds(fake: FakeSlackWebApi) -> None:
    """The final state of the scenario, as Slack's Web API shows it."""
    fake.add_user("U1", "ada", **{k: v for k, v in PROFILE.items() if k not in ("id", "name")})
    fake.add_user("U2", "bob", updated=BASE - 10)
    fake.add_user("U3", "cy", updated=BASE - 10)
    fake.add_channel(C, "beta", created=BASE, creator="U1")
    fake.channels[C]["topic"] = {"value": "first topic", "creator": "U1", "last_set": BASE + 3}
    fake.set_members(C, ["U1", "U2", "U3"])
    fake.post(C, "U1", "m1 v1", ts=M1)
    fake.post(C, "U2", "thread parent", ts=M2)
    fake.post(C, "U3", "reply one", ts=R1, thread_ts=M2)
    fake.post(C, "U1", "reply two", ts=R2, thread_ts=M2)
    fake.post(C, "U2", "to be deleted", ts=M3)
    fake.edit(C, M1, "m1 v2", edited_ts=t(41))
    fake.react(C, M1, "wave", "U2")
    fake.react(C, R1, "tada", "U1")
    fake.delete(C, M3)
    fake.delete(C, R2)
    fake.post(C, "U3", "late with a file", ts=M4, subtype="file_share", files=[FILE])


def export_zip(fake: FakeSlackWebApi, path) -> None:
    """The same final state as Slack's export would write it (one day: every ts is on 2023-11-14 UTC)."""
    stamp = (2023, 11, 14, 22, 15, 0)  # FINAL, as the entries' modification time
    with zipfile.ZipFile(path, "w") as zf:
        for name, value in (("users.json", list(fake.users.values())),
                            ("channels.json", [{**fake.channels[C], "members": fake.members[C]}]),
                            ("beta/2023-11-14.json", fake.messages(C))):
            zf.writestr(zipfile.ZipInfo(name, stamp), json.dumps(value))


@pytest.fixture(scope="module")
def routes(tmp_path_factory):
    path = tmp_path_factory.mktemp("routes") / "final.zip"
    with FakeSlackWebApi(team_id="TEXPORT") as fake:
        slack_holds(fake)
        export_zip(fake, path)
    return path


def deliver(client, db, team: str, units: list, zip_path) -> None:
    for unit in units:
        if unit == "backfill":
            with FakeSlackWebApi(team_id=team) as fake:
                slack_holds(fake)
                Backfill(db, team, DEFAULT_TOKEN, Options(max_age_days=0, page_size=2, now=FINAL),
                         base_url=fake.base_url).run()
        elif unit == "import":
            import_export(db, str(zip_path), team_id=team)
        else:
            r = post_event(client, team, unit)
            assert r.status_code == 200, r.json


def snapshot(client, team: str) -> dict:
    def get(path: str, **params):
        return workspace_get(client, team, path, **params)

    users = get("/users")
    for u in users["users"]:
        u.pop("first_seen_ts")  # when Chronicle first saw the user: the moment of each delivery

    def same_team(value):  # each order runs in a workspace of its own: Slack's `team` field names it
        if isinstance(value, dict):
            return {k: same_team(v) for k, v in value.items() if k != "team"}
        return [same_team(v) for v in value] if isinstance(value, list) else value

    return same_team({
        "timeline": get(f"/channels/{C}/messages", include_deleted="true"),
        "visible": get(f"/channels/{C}/messages"),
        "thread": get(f"/channels/{C}/threads/{M2}", include_deleted="true"),
        "m1": get(f"/channels/{C}/messages/{M1}"),
        "r1": get(f"/channels/{C}/messages/{R1}"),
        "meta": get(f"/channels/{C}"),
        "index": get("/channels", include_deleted="true"),
        "users": users,
    })


@pytest.fixture(scope="module")
def in_order(app, db, routes):
    client = app.test_client()
    deliver(client, db, "TROUTE0", [*live_events(), "backfill", "import"], routes)
    return snapshot(client, "TROUTE0")


def test_the_in_order_state_is_the_scenario_as_written(in_order):
    visible = {m["ts"]: m for m in in_order["visible"]["messages"]}
    assert set(visible) == {M1, M2, R1, M4}
    assert visible[M1]["text"] == "m1 v2" and visible[M1]["edited_ts"] == t(41)
    assert visible[M1]["reactions"] == [{"name": "wave", "users": ["U2"], "count": 1}]
    assert visible[R1]["reactions"] == [{"name": "tada", "users": ["U1"], "count": 1}]
    assert visible[M4]["files"][0]["id"] == "F1"
    deleted = {m["ts"] for m in in_order["timeline"]["messages"] if m.get("deleted")}
    assert deleted == {M3, R2}
    assert [r["ts"] for r in in_order["thread"]["replies"]] == [R1, R2]
    assert [v["text"] for v in in_order["m1"]["history"]] == ["m1 v1", "m1 v2"]
    assert in_order["meta"]["name"] == "beta" and in_order["meta"]["topic"] == "first topic"
    assert [n["name"] for n in in_order["meta"]["names_history"]] == ["beta", "alpha"]
    ada = next(u for u in in_order["users"]["users"] if u["user_id"] == "U1")
    assert (ada["name"], ada["tz"], ada["first_post"]) == ("ada", "Europe/Zurich", {"ts": M1, "channel_id": C})


@pytest.mark.parametrize("seed", range(8))
def test_every_order_of_live_events_backfill_and_import_reads_the_same(app, db, routes, in_order, seed):
    rng = random.Random(seed)
    units = [*live_events(), "backfill", "import"]
    rng.shuffle(units)
    if seed % 2:
        units += rng.sample(units, 5)  # redeliveries on top
    client = app.test_client()
    team = f"TROUTE{seed + 1}"
    deliver(client, db, team, units, routes)
    assert snapshot(client, team) == in_order
