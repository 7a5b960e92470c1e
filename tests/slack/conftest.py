"""Fixtures of the Slack tests (plain helpers: tests/slack/helpers.py)."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from tests.slack.helpers import created, msg, post_event, reaction

REPORT_BASE = int(dt.datetime(2026, 3, 1, tzinfo=dt.UTC).timestamp())


def _ts(day: int, second: int) -> str:
    return f"{REPORT_BASE + day * 86400 + second}.000100"


@pytest.fixture
def unique_channel():
    """A fresh channel id per call, so tests sharing the keyspace never see each other's data."""
    def make(prefix: str = "C") -> str:
        return f"{prefix}{uuid.uuid4().hex[:16].upper()}"
    return make


@pytest.fixture(scope="module")
def report_workspace(app):
    """A workspace filled through live events: 2 channels, 2 users with time zones; 2 messages a day in the week
    of 2026-02-22 and 3 a day in the week of 2026-03-01, each with one reaction. Returns the team id."""
    client = app.test_client()
    team = f"T{uuid.uuid4().hex[:12].upper()}"
    channels = {"CREPGENERAL": "general", "CREPRANDOM": "random"}
    for i, (channel, name) in enumerate(channels.items()):
        assert post_event(client, team, created(channel, name, _ts(-30, i))).status_code == 200
    for user, tz in (("UA", "Europe/Berlin"), ("UB", "America/New_York")):
        assert post_event(client, team, {"type": "team_join", "event_ts": _ts(-20, 0), "user": {
            "id": user, "name": user.lower(), "tz": tz, "tz_offset": 0, "updated": REPORT_BASE - 20 * 86400,
            "profile": {"display_name": f"name-{user}"}}}).status_code == 200
    for day in range(-7, 7):  # the previous week and this one
        for k, (channel, user) in enumerate((("CREPGENERAL", "UA"), ("CREPRANDOM", "UB"), ("CREPGENERAL", "UB"))):
            if day < 0 and k == 2:
                continue
            ts = _ts(day, 3600 * (9 + k))
            assert post_event(client, team, msg(channel, ts, f"day {day} message {k}", user=user)).status_code == 200
            assert post_event(client, team, reaction("added", channel, ts, "tada", "UA" if k else "UB",
                                                     at=_ts(day, 3600 * (9 + k) + 5))).status_code == 200
    return team
