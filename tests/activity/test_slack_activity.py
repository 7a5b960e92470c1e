"""A Slack user's activity days, end to end: events through the Events endpoint, the dirty worker or the
rebuild command builds the days, the API serves them in the user's time zone; compared with the days worked
out here from the scenario itself."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner

from api.activity import dirty, service
from api.activity.settings import ActivitySettings, set_activity_settings
from api.cli import chronicle
from tests.slack.helpers import ALL, T1_ONLY, channel_event, created, msg, post_event

NY = ZoneInfo("America/New_York")


@pytest.fixture
def quick_marks():
    """Marks due within half a second (instead of half of the 60 s delay)."""
    set_activity_settings(ActivitySettings(delay_seconds=1.0))
    yield
    set_activity_settings(None)


def _ts(when: datetime) -> str:
    return f"{int(when.timestamp())}.{when.microsecond:06d}"


def _us(when: datetime) -> int:
    return int(when.timestamp()) * 1_000_000 + when.microsecond


def _drain(db) -> dirty.Stats:
    time.sleep(1.1)  # marks come due on the grid of half the delay
    return dirty.DirtyWorker(db, service.rebuild_marks).drain()


def _user(team: str, user: str, tz: str):
    return {"type": "user_change", "event_ts": "1700000000.000001",
            "user": {"id": user, "name": user.lower(), "tz": tz, "tz_offset": 0, "updated": 1700000000,
                     "profile": {}}}


def _activity(client, team: str, user: str, headers=ALL, **params):
    return client.get(f"/slack/teams/{team}/users/{user}/activity", headers=headers, query_string=params)


def _scenario(client, team: str, ca: str, cb: str) -> dict[tuple[str, date], list[tuple[int, str]]]:
    """Post the scenario; return what each (user, local day) must hold: [(at µs, kind)] in time order."""
    assert post_event(client, team, _user(team, "UANN", "America/New_York")).status_code == 200
    assert post_event(client, team, _user(team, "UBEN", "UTC")).status_code == 200
    # 23:30 in New York on 3 March is 04:30 UTC on 4 March: Ann's 3 March, Ben's 4 March.
    t0 = datetime(2026, 3, 3, 23, 30, tzinfo=NY).astimezone(UTC)
    t = [t0 + timedelta(minutes=10 * i) for i in range(8)]
    events = [
        msg(ca, _ts(t[0]), "hello <@UBEN> all", user="UANN"),
        msg(ca, _ts(t[1]), "reply one", user="UBEN", thread_ts=_ts(t[0])),
        {"type": "reaction_added", "user": "UBEN", "reaction": "tada", "item_user": "UANN",
         "item": {"type": "message", "channel": ca, "ts": _ts(t[0])}, "event_ts": _ts(t[2])},
        {"type": "message", "subtype": "message_changed", "channel": ca, "channel_type": "channel", "hidden": True,
         "ts": _ts(t[3]), "event_ts": _ts(t[3]),
         "message": {"type": "message", "user": "UANN", "text": "hello all", "ts": _ts(t[0]),
                     "edited": {"user": "UANN", "ts": _ts(t[3])}},
         "previous_message": {"type": "message", "user": "UANN", "text": "hello <@UBEN> all", "ts": _ts(t[0])}},
        msg(cb, _ts(t[4]), "", user="UBEN", subtype="channel_join"),
        msg(cb, _ts(t[5]), "oops", user="UBEN"),
        {"type": "message", "subtype": "message_deleted", "channel": cb, "channel_type": "channel", "hidden": True,
         "ts": _ts(t[6]), "event_ts": _ts(t[6]), "deleted_ts": _ts(t[5]),
         "previous_message": {"type": "message", "user": "UBEN", "text": "oops", "ts": _ts(t[5])}},
        msg(ca, _ts(t[7]), "files", user="UANN", files=[{"id": "F1", "name": "a.txt"}]),
    ]
    for event in events[::-1]:  # newest first: the days must not depend on arrival order
        assert post_event(client, team, event).status_code == 200
    us = [_us(x) for x in t]
    ann = [(us[0], "message"), (us[2], "reaction_received"), (us[3], "edit"), (us[7], "file_share")]
    ben = [(us[1], "reply"), (us[2], "reaction_given"), (us[4], "channel_join"), (us[5], "message"),
           (us[6], "delete")]
    expected: dict[tuple[str, date], list[tuple[int, str]]] = {}
    for user, tz, rows in (("UANN", NY, ann), ("UBEN", ZoneInfo("UTC"), ben)):
        for at, kind in rows:
            day = datetime.fromtimestamp(at / 1e6, tz).date()
            expected.setdefault((user, day), []).append((at, kind))
    return expected


def _served(client, team: str, user: str, first: str, last: str, headers=ALL) -> dict[str, list[tuple[int, str]]]:
    r = _activity(client, team, user, headers, **{"from": first, "to": last})
    assert r.status_code == 200, r.json
    return {d["date"]: [(e["at"], e["kind"]) for e in d["events"]] for d in r.json["days"]}


def test_live_events_are_in_each_users_local_days_after_the_worker_runs(client, db, quick_marks):
    team, ca, cb = f"T{uuid.uuid4().hex[:10].upper()}", "CACT1", "CACT2"
    expected = _scenario(client, team, ca, cb)
    assert _drain(db).days >= 3
    for user in ("UANN", "UBEN"):
        served = _served(client, team, user, "2026-03-02", "2026-03-05")
        assert list(served) == ["2026-03-02", "2026-03-03", "2026-03-04", "2026-03-05"]  # every day, empty ones too
        wanted = {d.isoformat(): rows for (u, d), rows in expected.items() if u == user}
        assert {d: rows for d, rows in served.items() if rows} == wanted
    body = _activity(client, team, "UANN", **{"from": "2026-03-03"}).json
    assert body["time_zone"] == "America/New_York" and body["archive"] == f"slack:{team}"
    reaction = next(e for e in body["days"][0]["events"] if e["kind"] == "reaction_received")
    assert reaction == {"at": reaction["at"], "kind": "reaction_received", "channel": ca,
                        "ts": expected[("UANN", date(2026, 3, 3))][0][0], "emoji": "tada", "user": "UBEN"}


def test_the_rebuild_command_writes_the_same_days_as_the_worker_and_resumes(client, db, quick_marks):
    team = f"T{uuid.uuid4().hex[:10].upper()}"
    expected = _scenario(client, team, "CREB1", "CREB2")
    _drain(db)
    by_worker = {u: _served(client, team, u, "2026-03-01", "2026-03-06") for u in ("UANN", "UBEN")}
    runner = CliRunner()
    args = ["activity", "rebuild", "--team", team, "--from", "2026-03-01", "--to", "2026-03-06", "--quiet"]
    dry = runner.invoke(chronicle, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert '"days_written": 3' in dry.output and '"dry_run": true' in dry.output
    first = runner.invoke(chronicle, args)
    assert first.exit_code == 0, first.output
    assert '"units_skipped": 0' in first.output
    again = runner.invoke(chronicle, args)  # the same run again: its one unit is finished, nothing is redone
    assert '"units_skipped": 1' in again.output and '"days_written": 0' in again.output
    assert {u: _served(client, team, u, "2026-03-01", "2026-03-06") for u in ("UANN", "UBEN")} == by_worker
    assert sum(len(v) for v in expected.values()) == 9


def test_summary_and_dates_and_limits(client, db, quick_marks):
    team = f"T{uuid.uuid4().hex[:10].upper()}"
    _scenario(client, team, "CSUM1", "CSUM2")
    _drain(db)
    r = _activity(client, team, "UBEN", summary="true", dates="2026-03-04,2025-12-31,2026-03-04")
    assert r.status_code == 200
    assert r.json["days"] == [
        {"date": "2025-12-31", "event_count": 0, "counts": {}},
        {"date": "2026-03-04", "event_count": 5, "counts": {"channel_join": 1, "delete": 1, "message": 1,
                                                           "reaction_given": 1, "reply": 1}}]
    for params, reason in ((({"from": "2026-01-01", "to": "2026-02-01"}), "at most 31"),
                           (({"from": "2026-03-02", "to": "2026-03-01"}), "before"),
                           (({"from": "2026-03-02", "dates": "2026-03-02"}), "either"),
                           (({}), "either"),
                           (({"dates": ",".join(f"2026-01-{d:02d}" for d in range(1, 32)) + ",2026-02-01"}),
                            "at most 31"),
                           (({"from": "2026-02-30"}), "date")):
        r = _activity(client, team, "UBEN", **params)
        assert r.status_code == 422 and reason in str(r.json), (params, r.json)
    assert _activity(client, team, "UBEN", headers={}, **{"from": "2026-03-01"}).status_code == 401
    # The token is checked before the form: without one, even a request mixing both forms is a 401.
    assert _activity(client, team, "UBEN", headers={}, **{"from": "2026-03-01", "dates": "2026-03-01"}
                     ).status_code == 401
    assert _activity(client, team, "U-BAD!", **{"from": "2026-03-01"}).status_code == 404


def test_events_in_a_private_channel_need_the_private_scope(client, db, quick_marks):
    team, user = "T1", f"U{uuid.uuid4().hex[:8].upper()}"
    public, private = f"CPUB{uuid.uuid4().hex[:6].upper()}", f"CPRV{uuid.uuid4().hex[:6].upper()}"
    when = datetime(2026, 4, 1, 12, tzinfo=UTC)
    for channel in (public, private):
        assert post_event(client, team, created(channel, channel.lower(), _ts(when))).status_code == 200
        assert post_event(client, team, msg(channel, _ts(when + timedelta(minutes=1)), "hi", user=user)
                          ).status_code == 200
    assert post_event(client, team, channel_event("channel_convert_to_private", private,
                                                  _ts(when + timedelta(minutes=2)))).status_code == 200
    _drain(db)
    everything = _activity(client, team, user, **{"from": "2026-04-01"}).json["days"][0]["events"]
    limited = _activity(client, team, user, T1_ONLY, **{"from": "2026-04-01"}).json["days"][0]
    assert sorted(e["channel"] for e in everything) == sorted([public, private])
    assert [e["channel"] for e in limited["events"]] == [public] and limited["event_count"] == 1
    assert _activity(client, "T2", user, T1_ONLY, **{"from": "2026-04-01"}).status_code == 403
