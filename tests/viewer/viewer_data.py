"""The archive the viewer tests read, decided in plain data before anything is posted: users, channels, and every
message with its edits, reactions, files, thread and deletion. The tests compute what a page must show from
this (which messages are visible, newest first; which local days they fall on), never from what was stored."""

from __future__ import annotations

import dataclasses
import uuid
import zoneinfo
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

READER_ZONE = "America/New_York"  # the browser's time zone in the browser tests (and the tz field in the others)
GENERAL_COUNT = 130  # top-level messages of #general: three pages of 50
SPACING = timedelta(minutes=53)

SCRIPT = "<script>alert('script tag')</script>"
IMG = '<img src=x onerror="alert(\'img onerror\')">'
BIG_TEXT = ("lorem ipsum dolor sit amet " * 4000)[:102_400]
HOSTILE_TEXTS = {  # oldest first: the 100 KB message at the bottom of the page
    "big": BIG_TEXT,
    "script": f"{SCRIPT} right in the text",
    "js-link": "<javascript:alert('js link')|click me> and <JaVaScRiPt:alert(2)> and <java\tscript:alert(3)|tab> "
               "and <data:text/html;base64,PHNjcmlwdD5hbGVydCg0KTwvc2NyaXB0Pg==|data link>",
    "img": f"{IMG} and <svg onload=alert('svg')> and \" onmouseover=\"alert('attr') and "
           "<a href=\"javascript:alert('raw a')\">raw anchor</a>",
    "malformed": "*unclosed bold _mixed ~strike `code ```fence <@ <#C <! <http://x| &lt;b&gt; &amp;lt; "
                 "*_~`nested wrong~_* <@UNOTAUSER> <#CNOTACHANNEL|ghost> :not-an-emoji: :tada::skin-tone-9:",
    "rtl": "\u202eTHIS SHOULD STAY INSIDE ITS BOX and \u202bשלום unbalanced \u2067 isolate",
}
HOSTILE_NAME = f"{IMG}\u202eevil"


@dataclasses.dataclass
class PlannedMessage:
    key: str
    channel: str
    ts: str
    user: str
    text: str
    thread_ts: str | None = None
    edits: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (at, new text)
    reactions: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)  # (emoji, user, at)
    files: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    deleted_at: str | None = None

    @property
    def at(self) -> datetime:
        return datetime.fromtimestamp(int(self.ts.split(".")[0]), zoneinfo.ZoneInfo("UTC"))

    @property
    def current_text(self) -> str:
        return self.edits[-1][1] if self.edits else self.text

    @property
    def is_reply(self) -> bool:
        return self.thread_ts is not None and self.thread_ts != self.ts


@dataclasses.dataclass
class Archive:
    team: str
    other_team: str
    tokens: dict[str, dict[str, Any]]
    token_private: str  # the team, private channels too
    token_public: str  # the team, no private scope
    token_other: str  # another workspace only
    users: list[dict[str, Any]]
    channels: dict[str, str]  # id -> name at creation
    general: str
    hostile: str
    private_channel: str
    renamed_channel: str
    renamed_to: str
    deleted_channel: str
    other_channel: str
    messages: list[PlannedMessage]
    first_time: datetime
    files_root: Path

    def setup_ts(self, i: int) -> str:
        return f"{int(self.first_time.timestamp()) - 3600 + i}.000000"

    def by_key(self, key: str) -> PlannedMessage:
        return next(m for m in self.messages if m.key == key)

    def visible_top_level(self, channel: str, *, include_deleted: bool = False) -> list[PlannedMessage]:
        """What the channel page lists, newest first: top-level messages (a reply lives in its thread), deleted
        ones only with include_deleted."""
        shown = [m for m in self.messages if m.channel == channel and not m.is_reply
                 and (include_deleted or not m.deleted_at)]
        return sorted(shown, key=lambda m: m.ts, reverse=True)

    def local_days(self, channel: str, zone: str = READER_ZONE) -> list[date]:
        """The reader's local days of the visible top-level messages, newest first, each once."""
        tz = zoneinfo.ZoneInfo(zone)
        return list(dict.fromkeys(m.at.astimezone(tz).date() for m in self.visible_top_level(channel)))


def _id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:10].upper()}"


def build_archive(*, now: datetime, files_root: Path) -> Archive:
    team, other = _id("TV"), _id("TW")
    tokens = {f"viewer-private-{team}": {"workspaces": [team], "private": True},
              f"viewer-public-{team}": {"workspaces": [team], "private": False},
              f"viewer-other-{other}": {"workspaces": [other], "private": False}}
    users = [
        {"id": "UANN", "name": "ann", "tz": "Europe/Berlin", "tz_offset": 3600, "updated": 1_700_000_000,
         "real_name": "Ann Archivist", "profile": {"display_name": "Ann", "real_name": "Ann Archivist"}},
        {"id": "UBOB", "name": "bob", "tz": "America/New_York", "tz_offset": -18000, "updated": 1_700_000_000,
         "profile": {"display_name": "Bob", "real_name": "Bob Builder"}},
        {"id": "UEVIL", "name": "evil", "tz": "Not/AZone", "updated": 1_700_000_000,
         "profile": {"display_name": HOSTILE_NAME, "real_name": SCRIPT}},
    ]
    general, hostile, private, renamed, deleted = (_id("CG"), _id("CH"), _id("CP"), _id("CR"), _id("CD"))
    channels = {general: "general", hostile: "hostile-input", private: "secret-plans", renamed: "old-name",
                deleted: "gone"}
    # #general's messages end about an hour ago: the newest days are "recent" for the users' calendars.
    first = (now - SPACING * (GENERAL_COUNT + 8) - timedelta(hours=1)).replace(microsecond=0)

    def ts_at(t: datetime, micro: int = 100) -> str:
        return f"{int(t.timestamp())}.{micro:06d}"

    planned: list[PlannedMessage] = []
    times = [first + SPACING * i for i in range(GENERAL_COUNT)]
    for i, t in enumerate(times):
        user = ("UANN", "UBOB")[i % 2]
        text = f"General message {i:03d}"
        if i % 10 == 3:
            text += (f" with *bold*, _italics_, `code`, <https://example.com/page?a=1&amp;b=2|a link>, <@UBOB>, "
                     f"<#{hostile}|hostile-input> and :tada:")
        planned.append(PlannedMessage(f"g{i}", general, ts_at(t), user, text))
    thread_head = planned[100]
    thread_head.text = "Where are the release notes? (a thread)"
    for k in range(3):
        planned.append(PlannedMessage(f"reply{k}", general, ts_at(times[100] + timedelta(minutes=5 + k), 200 + k),
                                      ("UBOB", "UANN", "UBOB")[k], f"Reply {k} in the thread",
                                      thread_ts=thread_head.ts))
    planned[-2].deleted_at = ts_at(times[100] + timedelta(minutes=30))  # reply 1 deleted: 2 replies remain
    edited = planned[120]
    edited.text = "First version of the announcement"
    edited.edits = [(ts_at(times[120] + timedelta(minutes=2)), "Second version of the announcement"),
                    (ts_at(times[120] + timedelta(minutes=4)), "Final version of the announcement :wave:")]
    planned[125].deleted_at = ts_at(times[125] + timedelta(minutes=1))
    planned[125].text = "This message was deleted later"
    planned[128].reactions = [("tada", "UANN", ts_at(times[128] + timedelta(minutes=1))),
                              ("tada", "UBOB", ts_at(times[128] + timedelta(minutes=2))),
                              ("+1", "UBOB", ts_at(times[128] + timedelta(minutes=3)))]
    planned[110].text = "Here is the report"
    planned[110].files = [{"id": "FVIEWREPORT", "name": "report.txt", "title": "Quarterly report",
                           "mimetype": "text/plain", "size": 57},
                          {"id": "FVIEWEXT", "name": "evil-link", "title": f"{SCRIPT}.txt", "is_external": True,
                           "external_url": "javascript:alert('external file')"}]

    hostile_start = times[-1] + timedelta(minutes=5)
    for j, (key, text) in enumerate(HOSTILE_TEXTS.items()):
        planned.append(PlannedMessage(f"hostile-{key}", hostile, ts_at(hostile_start + timedelta(minutes=j)),
                                      "UEVIL", text))
    planned[-1].reactions = [(IMG, "UEVIL", ts_at(hostile_start + timedelta(minutes=30)))]  # on the rtl message
    for j in range(3):
        planned.append(PlannedMessage(f"private{j}", private, ts_at(hostile_start + timedelta(minutes=40 + j)),
                                      "UANN", f"Secret plan number {j}"))
    planned.append(PlannedMessage("renamed0", renamed, ts_at(first - timedelta(minutes=30)), "UBOB",
                                  "A message in a channel that was renamed and archived"))
    return Archive(
        team=team, other_team=other, tokens=tokens, token_private=f"viewer-private-{team}",
        token_public=f"viewer-public-{team}", token_other=f"viewer-other-{other}", users=users, channels=channels,
        general=general, hostile=hostile, private_channel=private, renamed_channel=renamed, renamed_to="new-name",
        deleted_channel=deleted, other_channel=_id("CO"), messages=planned, first_time=first - timedelta(hours=1),
        files_root=files_root)
