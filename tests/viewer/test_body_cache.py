"""The viewer keeps each message's rendered HTML per process (api/viewer/views.py `_cached_body`): a page shows
what a fresh rendering shows, whatever changed since the last one (a user's or a channel's name, a channel the
reader may no longer open, an edit, an unfurl, the reader's zone), and renders nothing again when nothing did."""

from __future__ import annotations

import dataclasses
import zoneinfo

import pytest

from api.slack.codec import encode_json
from api.slack.messages import Message
from api.viewer import views

TEAM = "TBODYCACHE"
CHANNEL = "CBODY1"


def message(text: str, content: dict | None = None, ts: int = 1_767_225_600_000_000) -> Message:
    return Message(ts, CHANNEL, "UANN", text, None, None, None, None, None, False, None, None, None, False, None,
                   (), 0, encode_json(content) if content else None)


BLOCKS = {"blocks": [{"type": "rich_text", "elements": [{"type": "rich_text_section", "elements": [
    {"type": "text", "text": "ask "}, {"type": "user", "user_id": "UBOB"}, {"type": "text", "text": " in "},
    {"type": "channel", "channel_id": "COPS"}, {"type": "text", "text": " at "},
    {"type": "date", "timestamp": 1767261600, "format": "{date_short} {time}", "fallback": "soon"}]}]}]}
MESSAGES = [message("hi <@UBOB>, see <#COPS> and <#CSECRET>", ts=1_767_225_600_000_000),
            message("fallback text", BLOCKS, ts=1_767_225_601_000_000),
            message("unfurled", {"attachments": [{"title": "Runbook", "text": "by <@UBOB>",
                                                  "title_link": "https://example.org/r"}]}, ts=1_767_225_602_000_000)]
USERS = {"UANN": "ann", "UBOB": "bob"}
CHANNELS = {CHANNEL: "general", "COPS": "ops"}


def shown(db, msgs=MESSAGES, *, users=USERS, channels=CHANNELS, zone="Europe/Berlin") -> list[tuple[str, ...]]:
    found = views.message_views(db, TEAM, msgs, zone=zoneinfo.ZoneInfo(zone), page_channel_id=CHANNEL,
                                include_deleted=False, channel_names_map=channels, names=users)
    return [(str(v.html), str(v.attachments), str(v.extras), str(v.note)) for v in found]


def fresh(db, *args, **kwargs) -> list[tuple[str, ...]]:
    """The same page rendered with no body kept: what the cache must agree with."""
    db.caches.lru(views._BODIES, maxsize=views._BODIES_MAX).clear()
    return shown(db, *args, **kwargs)


@pytest.fixture
def renders(monkeypatch):
    calls = []
    real = views._body

    def counted(m, content, names):
        calls.append(m.text)
        return real(m, content, names)

    monkeypatch.setattr(views, "_body", counted)
    return calls


def test_a_page_shown_again_renders_nothing_again_and_shows_the_same(db, renders):
    first = fresh(db)
    assert "bob" in first[0][0] and "ops" in first[1][0] and "Runbook" in first[2][1]
    renders.clear()
    assert shown(db) == first and renders == []


@pytest.mark.parametrize(("change", "touched"), [
    ("user renamed", [0, 1, 2]), ("channel renamed", [0, 1]), ("channel no longer open", [0, 1]),
    ("other zone", [0, 1, 2]), ("edited", [0]), ("unfurl added", [2])])
def test_what_a_message_shows_follows_every_change_it_depends_on(db, renders, change, touched):
    before = fresh(db)  # kept
    msgs, users, channels, zone = list(MESSAGES), USERS, CHANNELS, "Europe/Berlin"
    if change == "user renamed":
        users = {**USERS, "UBOB": "robert"}
    elif change == "channel renamed":
        channels = {**CHANNELS, "COPS": "operations"}
    elif change == "channel no longer open":
        channels = {CHANNEL: "general"}
    elif change == "other zone":
        zone = "Asia/Tokyo"
    elif change == "edited":
        msgs[0] = dataclasses.replace(msgs[0], text="hi <@UBOB>, see <#COPS> now", edited_ts=msgs[0].ts + 1,
                                      decoded=None)
    else:
        msgs[2] = dataclasses.replace(msgs[2], decoded=None, content_blob=encode_json(
            {"attachments": [{"title": "Runbook v2", "title_link": "https://example.org/r2"}]}))
    renders.clear()
    after = shown(db, msgs, users=users, channels=channels, zone=zone)
    # Rendered again: exactly the messages that depend on what changed.
    assert renders == [msgs[i].text for i in touched]
    assert after == fresh(db, msgs, users=users, channels=channels, zone=zone)
    # What shows differently: those messages (in another zone, only the one showing a date).
    assert [i for i in range(3) if after[i] != before[i]] == ([1] if change == "other zone" else touched)


def test_a_messages_li_is_kept_per_view_and_zone(app, db):
    """The `message` global keeps a message's <li> under its view: the same view again is the same HTML; the same
    instant in another zone (views compare datetimes by instant) shows its own local time."""
    with app.test_request_context():
        berlin = views.message_views(db, TEAM, MESSAGES[:1], zone=zoneinfo.ZoneInfo("Europe/Berlin"),
                                     page_channel_id=CHANNEL, include_deleted=False, channel_names_map=CHANNELS,
                                     names=USERS)[0]
        tokyo = dataclasses.replace(berlin, at=berlin.at.astimezone(zoneinfo.ZoneInfo("Asia/Tokyo")))
        assert berlin == tokyo  # what makes the zone part of the key
        first = str(views.message_html(berlin))
        assert ">01:00</time>" in first and str(views.message_html(berlin)) == first
        assert ">09:00</time>" in str(views.message_html(tokyo))
        renamed = dataclasses.replace(berlin, author_name="annette")
        assert "annette" in str(views.message_html(renamed)) and "annette" not in first
