"""A small built-in sample workspace, loaded through the same parse and ingest path as live Slack events.

Idempotent: every write is keyed and timestamped by event time, so loading twice changes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from api.config import Settings
from api.db import Database, get_db
from api.slack.events import handle
from api.slack.payloads import parse

TEAM = "TSAMPLE"
GENERAL, RANDOM, OLD = "CSAMPLEGEN", "CSAMPLERND", "CSAMPLEOLD"
T0 = 1_763_700_000  # 2025-11-21 04:40 UTC


def _ts(seconds: int, micro: int = 0) -> str:
    return f"{T0 + seconds}.{micro:06d}"


def sample_events() -> list[dict[str, Any]]:
    """The sample's events in the order Slack would have sent them."""
    def msg(channel: str, s: int, text: str, user: str, **extra: Any) -> dict[str, Any]:
        return {"type": "message", "channel": channel, "channel_type": "channel", "user": user, "text": text,
                "ts": _ts(s), "event_ts": _ts(s), **extra}

    events: list[dict[str, Any]] = [
        {"type": "channel_created", "event_ts": _ts(0),
         "channel": {"id": GENERAL, "name": "general", "created": T0, "creator": "UALICE"}},
        {"type": "channel_created", "event_ts": _ts(1),
         "channel": {"id": RANDOM, "name": "random", "created": T0 + 1, "creator": "UBOB"}},
        {"type": "channel_created", "event_ts": _ts(2),
         "channel": {"id": OLD, "name": "old-projects", "created": T0 + 2, "creator": "UBOB"}},
        {"type": "channel_topic", "channel": GENERAL, "topic": "Company-wide announcements", "event_ts": _ts(3)},
        {"type": "channel_purpose", "channel": RANDOM, "purpose": "Anything goes", "event_ts": _ts(4)},
        msg(GENERAL, 10, "Welcome to Chronicle's sample workspace!", "UALICE"),
        msg(GENERAL, 20, "Where do we keep the release notes?", "UBOB"),
        msg(GENERAL, 30, "In the wiki, under Releases.", "UALICE", thread_ts=_ts(20)),
        msg(GENERAL, 40, "Thanks! Found them.", "UBOB", thread_ts=_ts(20)),
        msg(GENERAL, 45, "Also pinned in #random.", "UCAROL", thread_ts=_ts(20), subtype="thread_broadcast"),
        {"type": "message", "subtype": "message_changed", "channel": GENERAL, "channel_type": "channel",
         "ts": _ts(60), "event_ts": _ts(60),
         "message": {"type": "message", "user": "UALICE", "text": "Welcome to Chronicle's sample workspace :wave:",
                     "ts": _ts(10), "edited": {"user": "UALICE", "ts": _ts(60)}},
         "previous_message": {"type": "message", "user": "UALICE", "ts": _ts(10),
                              "text": "Welcome to Chronicle's sample workspace!"}},
        {"type": "reaction_added", "user": "UBOB", "reaction": "wave", "item_user": "UALICE",
         "item": {"type": "message", "channel": GENERAL, "ts": _ts(10)}, "event_ts": _ts(70)},
        {"type": "reaction_added", "user": "UCAROL", "reaction": "wave", "item_user": "UALICE",
         "item": {"type": "message", "channel": GENERAL, "ts": _ts(10)}, "event_ts": _ts(71)},
        msg(RANDOM, 80, "Lunch at noon?", "UCAROL"),
        msg(RANDOM, 90, "posted a bot reminder", "UBOT", subtype="bot_message", bot_id="BREMIND",
            username="reminder"),
        msg(RANDOM, 95, "oops, wrong channel", "UBOB"),
        {"type": "message", "subtype": "message_deleted", "channel": RANDOM, "channel_type": "channel",
         "ts": _ts(96), "event_ts": _ts(96), "deleted_ts": _ts(95),
         "previous_message": {"type": "message", "user": "UBOB", "text": "oops, wrong channel", "ts": _ts(95)}},
        {"type": "channel_rename", "event_ts": _ts(100), "channel": {"id": OLD, "name": "archive-2024",
                                                                     "created": T0 + 2}},
        {"type": "channel_archive", "channel": OLD, "user": "UBOB", "event_ts": _ts(110)},
    ]
    return events


def load_sample(db: Database | None = None, settings: Settings | None = None) -> dict[str, Any]:
    """Load the sample workspace; returns what was loaded (team, channel ids, event count)."""
    db = db or get_db()
    settings = settings or db.settings
    outcomes = []
    for i, event in enumerate(sample_events()):
        env = {"type": "event_callback", "team_id": TEAM, "api_app_id": "ASAMPLE", "event_id": f"EvSAMPLE{i:04d}",
               "event_time": int(float(event.get("event_ts") or event["ts"])), "event": event}
        outcomes.append(handle(db, settings, parse(env)))
    # Live ingest marked the days it touched for the activity worker; the sample's days are built now, so the
    # served sample answers the activity endpoint at once.
    from api.activity import calendar, service

    archive = service.Archive.slack(TEAM)
    times = [float(e.get("event_ts") or e["ts"]) for e in sample_events()]
    first = datetime.fromtimestamp(min(times), UTC).date() - timedelta(days=1)
    last = datetime.fromtimestamp(max(times), UTC).date() + timedelta(days=1)
    every_day = calendar.date_range(first, last)
    days = service.rebuild_days(db, archive, dict.fromkeys(archive.all_accounts(db), every_day))
    return {"team_id": TEAM, "channels": [GENERAL, RANDOM, OLD], "events": len(outcomes),
            "stored": sum(1 for o in outcomes if o == "stored"), "activity_days": days}
