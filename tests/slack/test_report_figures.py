"""The report's figures (docs/slack-reports.md §2-§3) against a brute-force reference computed here.

One deterministic workspace (random.Random(SEED)) is generated as a model of every message's life: its post,
edits, delete, reactions added and removed, thread replies. It is delivered through the real routes: the
signed Events API endpoint (in a shuffled order, some events twice) and, for one channel, an export ZIP made
at a snapshot time inside the period, with live events after it. The reference computes every figure from the
model's final state, written from the documentation only (not from the code under test), and each test
compares one part of the report with it, value and previous.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
import re
import statistics
import uuid
import zipfile
from collections import Counter, defaultdict
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from api.slack import channels as channel_tables
from api.slack.reports import service
from api.slack.reports.period import Period
from api.slack.zip_import import import_export
from tests.slack.helpers import created, delete, edit, msg, post_event, reaction

SEED = 20261101
START = dt.date(2026, 11, 1)
DAYS = 7
US = 1_000_000


def _us(*args: int) -> int:
    return int(dt.datetime(*args, tzinfo=dt.UTC).timestamp()) * US


PREV_LO = _us(2026, 10, 25)  # the previous period: 2026-10-25 .. 2026-10-31
MID = _us(2026, 11, 1)  # the period: 2026-11-01 .. 2026-11-07 (US daylight saving ends on its first day)
HI = _us(2026, 11, 8)
OBS = _us(2026, 11, 5, 12)  # the export ZIP's snapshot time
WORKDAYS = range(5)


def _away(t: int) -> int:
    """A time of the export channel's life moved off the snapshot time (a tie with it is another subject)."""
    return t + 10 * US if abs(t - OBS) < 5 * US else t


def _ts(us: int) -> str:
    return f"{us // US}.{us % US:06d}"


# -- the workspace --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Person:
    id: str
    name: str | None = None
    real: str | None = None
    display: str | None = None
    tz: str | None = None
    tz_offset: int | None = None
    deleted: bool = False
    is_bot: bool = False
    is_app: bool = False
    joined: int = _us(2026, 9, 1)  # the team_join event time: when Chronicle first saw them
    profile: bool = True


PEOPLE = [
    Person("UNYA01", "ann", "Ann Arbor", "annie", "America/New_York", -18000, joined=_us(2026, 9, 1, 9)),
    Person("UNYB02", "ben", "Ben Bowe", None, "America/New_York", -18000, joined=_us(2026, 9, 2, 9)),
    Person("UBER03", "clara", "Clara Zetkin", "clara.z", "Europe/Berlin", 3600, joined=_us(2026, 9, 3, 9)),
    Person("UKOL04", "dev", None, None, "Asia/Kolkata", 19800, joined=_us(2026, 9, 4, 9)),
    Person("UOFF05", "eve", "Eve Offset", "", None, -25200, joined=_us(2026, 9, 5, 9)),  # offset only
    Person("UUTC06", "finn", "Finn Utc", "finny", None, None, joined=_us(2026, 9, 6, 9)),  # neither: UTC
    Person("UBER07", None, None, None, "Europe/Berlin", 3600, joined=_us(2026, 9, 7, 9)),  # no name: the id
    Person("ULRK08", "lurk", "Lou Lurker", "lou", "Asia/Kolkata", 19800, joined=_us(2026, 9, 8, 9)),  # reacts only
    Person("UDEL09", "gone", "Gone Person", "gone", "America/New_York", -18000, deleted=True,
           joined=_us(2026, 9, 9, 9)),  # posts in the previous period only
    Person("UNEW10", "nina", "Nina New", "nina", "Europe/Berlin", 3600, joined=_us(2026, 11, 3, 10)),
    Person("UNEW11", "omar", "Omar Oct", None, "America/Los_Angeles", -28800, joined=_us(2026, 10, 27, 8)),
    Person("UBOT12", "deploybot", "Deploy Bot", "deploybot", None, None, is_bot=True, joined=_us(2026, 8, 1)),
    Person("UAPP13", "someapp", "Some App", None, None, None, is_app=True, joined=_us(2026, 8, 2)),
    Person("USLACKBOT", "slackbot", "Slackbot", "Slackbot", None, None, joined=_us(2026, 8, 3)),
    Person("USYD16", "sid", "Sid Ney", "sid", "Australia/Sydney", 39600, joined=_us(2026, 9, 10, 9)),
    Person("UZUL17", "zulu", None, "zulu", "UTC", 0, joined=_us(2026, 9, 11, 9)),
    Person("UTIE18", "tia", None, None, "Asia/Kolkata", 19800, joined=_us(2026, 9, 12, 9)),  # rank ties
    Person("UTIE19", "tom", None, None, "Europe/Berlin", 3600, joined=_us(2026, 9, 13, 9)),
    Person("UNOP14", profile=False),  # posts, never had a profile: UTC, time zone unknown, named by id
    Person("UNOP15", profile=False),  # never had a profile, posts only after the period
]
BY_ID = {p.id: p for p in PEOPLE}
BOT_ID = "BBOT12"
POSTERS = ["UNYA01", "UNYB02", "UBER03", "UKOL04", "UOFF05", "UUTC06", "UBER07", "UNOP14", "USYD16", "UZUL17"]
WEIGHTS_NOW = [9, 5, 7, 3, 4, 2, 3, 1, 0.6, 0.4]
WEIGHTS_PREV = [4, 8, 3, 6, 2, 5, 1, 2, 0.5, 0.8]
GHOSTS = ["UGHOST9", "WENT01"]  # mentioned, never seen: named by their id

CHANNELS = {"CGEN01": "general", "CDEV02": "dev", "CRND03": "random", "CEXP04": "imported", "CPRV05": "secret"}
RENAMED = ("CRND03", "watercooler", _us(2026, 11, 4, 15))  # the current name is the newest one
PRIVATE = "CPRV05"
EXPORTED = "CEXP04"
CHANNEL_WEIGHTS = {"CGEN01": 6, "CDEV02": 4, "CRND03": 3, "CEXP04": 3, "CPRV05": 2}
EMOJI = ["+1", "heart", "tada", "eyes", "rocket", "white_check_mark", "joy", "pray", "fire", "thinking_face",
         "100", "clap", "wave", "sob", "smile", "ok_hand", "muscle", "star", "sparkles", "bulb", "coffee",
         "zap", "skull", "memo", "pizza"]  # more than 20: the top-20 cut is exercised
REACTORS = ["UNYA01", "UNYB02", "UBER03", "UKOL04", "UOFF05", "UUTC06", "UBER07", "ULRK08", "UNEW10",
            "UBOT12", "UNOP14"]
WORDS = ["deploy", "green", "rollback", "logs", "tenant", "lunch", "review", "cassandra", "compaction", "node",
         "standup", "retro", "pager", "latency", "noon", "postmortem", "draft", "ok", "sounds", "good", "café", "naïve",
         "🎉", "ship", "it", "done"]
MEMBERS = {"CGEN01": [(_us(2026, 10, 20), 30), (_us(2026, 10, 28, 7), 31), (_us(2026, 10, 30, 7), 33),
                      (_us(2026, 11, 3, 7), 34), (_us(2026, 11, 9, 7), 40)],
           "CDEV02": [(_us(2026, 10, 22, 7), 12)]}
EXPORT_MEMBERS = ["UNYA01", "UNYB02", "UBER03", "UKOL04", "UOFF05"]


@dataclasses.dataclass
class Msg:
    """One message's whole life, as the test generated it."""

    channel: str
    ts: int
    user: str | None
    text: str
    subtype: str | None = None
    bot_id: str | None = None
    thread_ts: int | None = None  # a reply: its head's ts; a head: its own ts
    parent_user_id: str | None = None
    head_marked_at: int | None = None  # a head whose thread_ts came by a later message_changed (at this time)
    edits: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    deleted_at: int | None = None
    reactions: list[tuple[int, str, str, bool]] = dataclasses.field(default_factory=list)  # (at, emoji, user, add)
    arrived: bool = True  # False: only a reaction or a delete of it ever came
    keep: bool = False  # never deleted (the window edges)

    def text_at(self, at: int) -> str:
        return max([(self.ts, self.text), *[e for e in self.edits if e[0] <= at]])[1]

    @property
    def final_text(self) -> str:
        return self.text_at(2**62)

    def reactions_at(self, at: int) -> set[tuple[str, str]]:
        # an add writes at its time, a removal 1 µs before its time (payloads.clearing); the newest write wins
        latest: dict[tuple[str, str], tuple[int, bool]] = {}
        for when, emoji, user, added in self.reactions:
            wt = when if added else when - 1
            if wt <= at and ((emoji, user) not in latest or latest[(emoji, user)][0] < wt):
                latest[(emoji, user)] = (wt, added)
        return {k for k, (_, added) in latest.items() if added}

    @property
    def final_reactions(self) -> set[tuple[str, str]]:
        return self.reactions_at(2**62)


class Workspace:
    """The generated messages (`messages`, by ts) and the events that deliver them."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.messages: dict[int, Msg] = {}
        self._generate()

    # -- generation ---------------------------------------------------------------------------------------

    def _free(self, us: int) -> int:
        while us in self.messages or abs(us - OBS) < 2 * US:
            us += 1_001
        return us

    def _random_time(self, lo: int, hi: int) -> int:
        r = self.rng
        day = r.randrange((hi - lo) // (86400 * US))
        hour = r.choices(range(24), weights=[1, 1, 1, 1, 1, 2, 3, 5, 8, 9, 9, 8, 6, 8, 9, 9, 8, 6, 4, 3, 2, 2, 1, 1])[0]
        return self._free(lo + day * 86400 * US + hour * 3600 * US + r.randrange(3600 * US))

    def _text(self, author: str | None) -> str:
        r = self.rng
        words = [r.choice(WORDS) for _ in range(r.randint(0, 14))]
        for _ in range(r.choice([0, 0, 0, 1, 1, 2, 3])):
            who = r.choice([*POSTERS, "ULRK08", "UNEW10", "UDEL09", *GHOSTS, author or "UNYA01"])
            label = BY_ID[who].name if who in BY_ID and BY_ID[who].name else "x y"
            words.insert(r.randint(0, len(words)), r.choice([f"<@{who}>", f"<@{who}|{label}>"]))
        if r.random() < 0.1:
            words.insert(0, r.choice(["<!here>", "<#CGEN01|general>", "<https://example.com|a link>", "<@>"]))
        sep = r.choice([" ", " ", " ", "  ", "\n", " \t "])
        return sep.join(words)

    def _add(self, m: Msg) -> Msg:
        assert m.ts not in self.messages
        self.messages[m.ts] = m
        return m

    def _post(self, channel: str, ts: int, user: str | None, **kw: Any) -> Msg:
        return self._add(Msg(channel, self._free(ts), user, kw.pop("text", None) or self._text(user), **kw))

    def _generate(self) -> None:
        r = self.rng
        chans = list(CHANNEL_WEIGHTS)
        tops: list[Msg] = []
        for lo, hi, weights, n in ((PREV_LO, MID, WEIGHTS_PREV, 110), (MID, HI, WEIGHTS_NOW, 130)):
            for _ in range(n):
                channel = r.choices(chans, weights=[CHANNEL_WEIGHTS[c] for c in chans])[0]
                user = r.choices(POSTERS, weights=weights)[0]
                subtype = r.choices([None, "file_share", "me_message"], weights=[92, 5, 3])[0]
                tops.append(self._post(channel, self._random_time(lo, hi), user, subtype=subtype))
        # previous period only: the deleted user; the period only: the new user (after joining)
        for _ in range(7):
            tops.append(self._post(r.choice(chans[:3]), self._random_time(PREV_LO, MID), "UDEL09"))
        for _ in range(5):
            tops.append(self._post(r.choice(chans[:3]), self._random_time(_us(2026, 11, 4), HI), "UNEW10"))
        for _ in range(3):
            tops.append(self._post(r.choice(chans[:3]), self._random_time(_us(2026, 10, 28), MID), "UNEW11"))
        for _ in range(2):
            tops.append(self._post(r.choice(chans[:3]), self._random_time(MID, HI), "UNEW11"))
        # the edges of the windows, and local-time edges (daylight saving ends in Europe on 10-25, in the US on
        # 11-01; the offset-only user is UTC-7 all year)
        edges = [(PREV_LO - 1, "UNYA01"), (PREV_LO, "UNYA01"), (MID - 1, "UBER03"), (MID, "UBER03"),
                 (HI - 1, "UKOL04"), (HI, "UKOL04"), (_us(2026, 11, 1, 5, 30), "UNYA01"),
                 (_us(2026, 11, 1, 6, 30), "UNYA01"), (_us(2026, 10, 25, 0, 30), "UBER03"),
                 (_us(2026, 10, 25, 1, 30), "UBER03"), (_us(2026, 11, 2, 3), "UOFF05"),
                 (_us(2026, 11, 7, 20), "UKOL04"), (_us(2026, 11, 1, 3), "UOFF05"), (HI + 3600 * US, "UNYB02"),
                 (_us(2026, 10, 24, 22), "UNYB02"), (_us(2026, 11, 10, 12), "UNOP15")]
        for at, user in edges:
            tops.append(self._add(Msg("CGEN01", at, user, self._text(user), keep=True)))
        # rank ties: as many messages; the period: UTIE19 has more words, the previous one: as many words
        for day, user, text in ((2, "UTIE18", "one two"), (3, "UTIE18", "three"), (4, "UTIE19", "one two three"),
                                (5, "UTIE19", "four"), (-2, "UTIE18", "a b"), (-3, "UTIE19", "c d")):
            self._add(Msg("CDEV02", self._free(MID + day * 86400 * US + 13 * 3600 * US), user, text, keep=True))
        # not counted: joins, leaves, a bot message, a bot user's message with a bot_id but no subtype, a topic
        for lo, hi in ((PREV_LO, MID), (MID, HI)):
            for _ in range(4):
                self._post(r.choice(chans), self._random_time(lo, hi), r.choice(POSTERS), subtype="channel_join",
                           text="has joined the channel")
            self._post("CDEV02", self._random_time(lo, hi), r.choice(POSTERS), subtype="channel_leave",
                       text="has left the channel")
            for _ in range(3):
                tops.append(self._post(r.choice(chans), self._random_time(lo, hi), None, subtype="bot_message",
                                       bot_id=BOT_ID, text="build 42 passed <@UNYA01>"))
                tops.append(self._post(r.choice(chans), self._random_time(lo, hi), "UBOT12", bot_id=BOT_ID,
                                       text="deployed <@UBER03> <@UNYB02> now"))
        # threads: heads in both periods and one long before them; the period's public heads get reply counts
        # 3 apart (34, 31, ... 4), so that the top 10 has no tie even after a deleted reply
        cands = [m for m in tops if m.user in [*POSTERS, "UDEL09", "UNEW10"] and m.subtype is None
                 and m.bot_id is None and PREV_LO <= m.ts < HI - 86400 * US]
        current = [m for m in cands if m.ts >= MID and m.channel != PRIVATE]
        heads = r.sample(current, 14)
        heads += r.sample([m for m in cands if m not in current], 18)
        counts = [*range(34, 1, -3), 1, 1, 2] + [r.randint(1, 6) for _ in range(18)]
        old_head = self._post("CDEV02", _us(2026, 10, 20, 12), "UKOL04")  # replied to in both periods
        heads.append(old_head)
        counts.append(6)
        for head, n in zip(heads, counts, strict=True):
            head.thread_ts = head.ts
            replies = []
            for k in range(n):
                if head is old_head:
                    at = self._random_time(PREV_LO, HI)
                else:
                    at = self._free(head.ts + r.randrange(60 * US, 40 * 3600 * US) + k)
                if head.channel == EXPORTED and head.ts < OBS <= at and r.random() < 0.5:
                    at = self._free(max(OBS - r.randrange(3600 * US, 20 * 3600 * US), head.ts + 1000))
                user = r.choices([*POSTERS, "UNEW10"], weights=[*WEIGHTS_NOW, 2])[0]
                if user == "UNEW10" and at < BY_ID["UNEW10"].joined:
                    user = "UBER03"
                subtype = "thread_broadcast" if r.random() < 0.15 else None
                with_parent = k % 2 == 0 if head is old_head else r.random() < 0.75
                replies.append(self._add(Msg(head.channel, at, user, self._text(user), subtype=subtype,
                                             thread_ts=head.ts, parent_user_id=head.user if with_parent else None)))
            if (head.channel != EXPORTED or head.ts >= OBS) and r.random() < 0.5:
                head.head_marked_at = min(x.ts for x in replies) + 1000
            if r.random() < 0.25:  # a deleted reply: it leaves its head's reply count
                victim = r.choice(replies)
                victim.deleted_at = self._free(victim.ts + r.randrange(US, 3 * 86400 * US))
        bot_reply_head = max(heads, key=lambda h: (h.channel != PRIVATE, h.ts < MID, h.ts))
        self._add(Msg(bot_reply_head.channel, self._free(bot_reply_head.ts + 300 * US), None, "bot says hi",
                      subtype="bot_message", bot_id=BOT_ID, thread_ts=bot_reply_head.ts))
        # edits that change the text (words and mentions follow the newest text)
        everything = list(self.messages.values())
        for m in everything:
            if m.user and not m.keep and m.subtype in (None, "thread_broadcast", "me_message") and r.random() < 0.12:
                at = m.ts
                for _ in range(r.choice([1, 1, 2])):
                    at = self._free(at + r.randrange(US, 2 * 86400 * US))
                    m.edits.append((at, self._text(m.user)))
        # deletes (not of heads, nor of replies of the period's heads: their counts stay 3 apart)
        for m in everything:
            replied = m.thread_ts is not None and m.thread_ts != m.ts
            if (m.deleted_at is None and not m.keep and (m.thread_ts is None or replied and m.thread_ts < MID)
                    and r.random() < 0.05):
                m.deleted_at = m.ts + r.randrange(US, 3 * 86400 * US)
        # a deleted head of the previous period: its replies stay and count (they name their thread's author)
        gone = next(h for h in heads if PREV_LO <= h.ts < MID and h is not bot_reply_head and h.channel != PRIVATE)
        gone.deleted_at = gone.ts + 3 * 86400 * US
        for m in everything:
            if m.thread_ts == gone.ts and m is not gone:
                m.parent_user_id = gone.user
        # reactions, some removed later (a removal before the add arrives still wins: it is newer)
        for m in everything:
            if r.random() < 0.4:
                for _ in range(r.choice([1, 1, 2, 3, 4, 6])):
                    emoji, user = r.choice(EMOJI[: r.choice([6, 12, 25])]), r.choice(REACTORS)
                    at = m.ts + r.randrange(US, 86400 * US)
                    m.reactions.append((at, emoji, user, True))
                    if r.random() < 0.15:
                        m.reactions.append((at + r.randrange(US, 86400 * US), emoji, user, False))
        # long-standing users' first posts, long before both periods (never deleted: a deleted first post is
        # still the first post, but whether it is is not this test's subject)
        for i, user in enumerate([*POSTERS, "UDEL09"]):
            self._post(chans[i % 3], _us(2026, 10, 10 + i % 5, 10 + i), user)
        self._post("CGEN01", _us(2026, 9, 20, 12), "UBOT12", bot_id=BOT_ID)
        # an exported message deleted live after the snapshot
        exported = [m for m in everything if m.channel == EXPORTED and m.ts < OBS and m.deleted_at is None
                    and m.user in POSTERS and m.thread_ts is None and m.ts >= PREV_LO]
        r.choice(exported).deleted_at = OBS + 7200 * US
        # and exported messages edited and reacted to live, after the snapshot
        later = r.choice([m for m in exported if m.deleted_at is None])
        later.edits.append((OBS + 3 * 3600 * US, f"edited after the export <@UBER07> <@{later.user}>"))
        later.reactions.append((OBS + 4 * 3600 * US, "pizza", "ULRK08", True))
        # a message whose reactions and delete came, never the message itself
        phantom = self._add(Msg("CGEN01", self._random_time(MID, HI), "UNYA01", "never arrives", arrived=False))
        phantom.reactions.append((phantom.ts + US, "tada", "UBER03", True))
        ghost = self._add(Msg("CDEV02", self._random_time(PREV_LO, MID), "UNYB02", "never", arrived=False))
        ghost.deleted_at = ghost.ts + US
        # nothing of the export channel happens close to the snapshot time (ties with it are another matter)
        for m in self.messages.values():
            if m.channel == EXPORTED:
                m.edits = [(_away(t), x) for t, x in m.edits]
                m.reactions = [(_away(t), *rest) for t, *rest in m.reactions]
                m.deleted_at = _away(m.deleted_at) if m.deleted_at is not None else None
        # a deleted message is not edited any more (a live edit after a delete the export absorbed would bring the
        # row back without its delete)
        for m in self.messages.values():
            m.edits = [e for e in m.edits if m.deleted_at is None or e[0] < m.deleted_at]

    # -- delivery -----------------------------------------------------------------------------------------

    def setup_events(self) -> list[dict[str, Any]]:
        events = [created(c, name, _ts(_us(2026, 8, 1) + i * US)) for i, (c, name) in enumerate(CHANNELS.items())
                  if c != EXPORTED]
        events.append({"type": "channel_convert_to_private", "channel": PRIVATE, "event_ts": _ts(_us(2026, 8, 2))})
        channel, name, at = RENAMED
        events.append({"type": "channel_rename", "event_ts": _ts(at),
                       "channel": {"id": channel, "name": name, "created": 1785542400}})
        for p in PEOPLE:
            if not p.profile:
                continue
            user: dict[str, Any] = {"id": p.id, "deleted": p.deleted, "is_bot": p.is_bot,
                                    "updated": p.joined // US, "profile": {}}
            for key, value in (("name", p.name), ("real_name", p.real), ("tz", p.tz), ("tz_offset", p.tz_offset)):
                if value is not None:
                    user[key] = value
            if p.display is not None:
                user["profile"]["display_name"] = p.display
            if p.is_app:
                user["is_app_user"] = True
            if p.is_bot:
                user["profile"]["bot_id"] = BOT_ID
            events.append({"type": "team_join", "user": user, "event_ts": _ts(p.joined)})
        return events

    def live_events(self) -> list[dict[str, Any]]:
        """Every event that is not in the export (the export channel's life before the snapshot is)."""
        out: list[dict[str, Any]] = []

        def live(m: Msg, at: int) -> bool:
            return m.channel != EXPORTED or at > OBS

        for m in self.messages.values():
            kind = "group" if m.channel == PRIVATE else "channel"
            extra: dict[str, Any] = {k: v for k, v in (("subtype", m.subtype), ("bot_id", m.bot_id),
                                                       ("parent_user_id", m.parent_user_id)) if v is not None}
            is_reply = m.thread_ts is not None and m.thread_ts != m.ts
            if m.thread_ts is not None and (is_reply or m.head_marked_at is None):
                extra["thread_ts"] = _ts(m.thread_ts)
            if m.arrived and live(m, m.ts):
                event = msg(m.channel, _ts(m.ts), m.text, user=m.user or "", channel_type=kind, **extra)
                if m.user is None:
                    del event["user"]
                    event["username"] = "deploybot"
                out.append(event)
            if m.head_marked_at is not None and live(m, m.head_marked_at):
                text = m.text_at(m.head_marked_at)
                out.append({"type": "message", "subtype": "message_changed", "hidden": True, "channel": m.channel,
                            "channel_type": kind, "ts": _ts(m.head_marked_at), "event_ts": _ts(m.head_marked_at),
                            "message": {"type": "message", "user": m.user, "text": text, "ts": _ts(m.ts),
                                        "thread_ts": _ts(m.ts), "reply_count": 1},
                            "previous_message": {"type": "message", "user": m.user, "text": text, "ts": _ts(m.ts)}})
            for at, text in m.edits:
                if live(m, at):
                    more = {"thread_ts": _ts(m.thread_ts)} if is_reply else {}
                    event = edit(m.channel, _ts(m.ts), text, m.text_at(at - 1), _ts(at), user=m.user, **more)
                    event["channel_type"] = kind
                    out.append(event)
            if m.deleted_at is not None and live(m, m.deleted_at):
                event = delete(m.channel, _ts(m.ts), _ts(m.deleted_at))
                event["channel_type"] = kind
                event["previous_message"]["user"] = m.user or ""
                if is_reply:
                    event["previous_message"]["thread_ts"] = _ts(m.thread_ts)
                out.append(event)
            for at, emoji, user, added in m.reactions:
                if live(m, at):
                    out.append(reaction("added" if added else "removed", m.channel, _ts(m.ts), emoji, user, _ts(at)))
        return out

    def export_zip(self, path: str) -> None:
        """The export channel as a Slack export made at OBS: each message as it read then, one file per day."""
        days: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for m in sorted(self.messages.values(), key=lambda x: x.ts):
            if m.channel != EXPORTED or m.ts >= OBS or not m.arrived or (m.deleted_at is not None
                                                                        and m.deleted_at < OBS):
                continue
            obj: dict[str, Any] = {"type": "message", "ts": _ts(m.ts), "text": m.text_at(OBS)}
            for key, value in (("user", m.user), ("subtype", m.subtype), ("bot_id", m.bot_id),
                               ("parent_user_id", m.parent_user_id)):
                if value is not None:
                    obj[key] = value
            if m.thread_ts is not None:
                obj["thread_ts"] = _ts(m.thread_ts)
            edits = [t for t, _ in m.edits if t < OBS]
            if edits:
                obj["edited"] = {"user": m.user, "ts": _ts(max(edits))}
            by_emoji: dict[str, list[str]] = defaultdict(list)
            for emoji, user in sorted(m.reactions_at(OBS)):
                by_emoji[emoji].append(user)
            if by_emoji:
                obj["reactions"] = [{"name": e, "users": u, "count": len(u)} for e, u in by_emoji.items()]
            day = dt.datetime.fromtimestamp(m.ts // US, dt.UTC).date().isoformat()
            days[day].append(obj)
        channel = {"id": EXPORTED, "name": CHANNELS[EXPORTED], "created": 1785542400, "creator": "UNYA01",
                   "is_archived": False, "members": EXPORT_MEMBERS,
                   "topic": {"value": "", "creator": "", "last_set": 0},
                   "purpose": {"value": "", "creator": "", "last_set": 0}}
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("users.json", "[]")
            z.writestr("channels.json", json.dumps([channel]))
            for day, objs in sorted(days.items()):
                z.writestr(f"{CHANNELS[EXPORTED]}/{day}.json", json.dumps(objs))


# -- loading --------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Loaded:
    team: str
    ws: Workspace
    doc: dict[str, Any]
    events: int


@pytest.fixture(scope="module")
def loaded(app, db, tmp_path_factory) -> Loaded:
    ws = Workspace(SEED)
    client = app.test_client()
    team = f"TREP{uuid.uuid4().hex[:12].upper()}"
    for event in ws.setup_events():
        r = post_event(client, team, event)
        assert r.status_code == 200 and r.json["outcome"] == "stored", (event, r.json)
    path = tmp_path_factory.mktemp("export") / "export.zip"
    ws.export_zip(str(path))
    imported = import_export(db, str(path), team_id=team, observed_at=OBS)
    assert imported.messages > 20 and not imported.skipped, imported.to_json()
    for channel, observations in MEMBERS.items():
        for at, count in observations:
            db.execute(*channel_tables.members_write(team, channel, at, count, "backfill"))
    events = ws.live_events()
    order = random.Random(SEED + 1)
    order.shuffle(events)
    events += order.sample(events, len(events) // 30)  # Slack's redeliveries
    for event in events:
        r = post_event(client, team, event)
        assert r.status_code == 200 and r.json["outcome"] == "stored", (event, r.json)
    doc = service.generate(db, team, Period(START, DAYS), save=False)
    return Loaded(team, ws, doc, len(events))


# -- the reference: every figure from the model's final state, per docs/slack-reports.md ----------------------

POST_SUBTYPES = (None, "thread_broadcast", "file_share", "me_message")
MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")


def written(m: Msg) -> bool:
    """The message's own row exists: it arrived (live, or in the export unless deleted before the snapshot)."""
    return m.arrived and not (m.channel == EXPORTED and m.ts < OBS and m.deleted_at is not None
                              and m.deleted_at < OBS)


def counts(m: Msg, lo: int, hi: int, include_private: bool = False) -> bool:
    """§2: arrived, not deleted, a user and no bot_id, a post subtype, a public channel, ts in [lo, hi)."""
    return (m.arrived and m.deleted_at is None and m.user is not None and m.bot_id is None
            and m.subtype in POST_SUBTYPES and (include_private or m.channel != PRIVATE) and lo <= m.ts < hi)


def words(m: Msg) -> int:
    return len(m.final_text.split())


def mentioned(m: Msg) -> set[str]:
    return set(MENTION.findall(m.final_text)) - {m.user}


def is_reply(m: Msg) -> bool:
    return m.thread_ts is not None and m.thread_ts != m.ts


def local_time(user: str, ts: int) -> dt.datetime:
    utc = dt.datetime.fromtimestamp(ts / US, dt.UTC)
    p = BY_ID.get(user)
    if p is not None and p.profile and p.tz:
        return utc.astimezone(ZoneInfo(p.tz))
    if p is not None and p.profile and p.tz_offset is not None:
        return utc + dt.timedelta(seconds=p.tz_offset)
    return utc


def display_name(user: str) -> str:
    p = BY_ID.get(user)
    if p is None or not p.profile:
        return user
    return p.display or p.real or p.name or user


class Side:
    """The figures of one period, computed by brute force."""

    def __init__(self, ws: Workspace, lo: int, hi: int, include_private: bool = False) -> None:
        self.lo, self.hi = lo, hi
        everything = ws.messages.values()
        self.msgs = sorted((m for m in everything if counts(m, lo, hi, include_private)), key=lambda m: m.ts)
        self.messages = Counter(m.user for m in self.msgs)
        self.words = Counter()
        self.channel_messages, self.channel_words = Counter(), Counter()
        self.channel_user_messages, self.channel_user_words = Counter(), Counter()
        self.utc_wh = [[0] * 24 for _ in range(7)]
        self.local_wh = [[0] * 24 for _ in range(7)]
        self.tz_messages, self.tz_posters = Counter(), defaultdict(set)
        self.emoji, self.channel_emoji = Counter(), Counter()
        self.given, self.received, self.reaction_pairs = Counter(), Counter(), Counter()
        self.made, self.mentioned = Counter(), Counter()
        self.reactors: set[str] = set()
        self.replies, self.reply_threads, self.thread_pairs = Counter(), defaultdict(set), Counter()
        self.threads = 0
        readable = {(m.channel, m.ts): m for m in everything
                    if written(m) and (PREV_LO <= m.ts < HI)}  # the rows of both periods' partitions
        for m in self.msgs:
            n = words(m)
            self.words[m.user] += n
            self.channel_messages[m.channel] += 1
            self.channel_words[m.channel] += n
            self.channel_user_messages[(m.channel, m.user)] += 1
            self.channel_user_words[(m.channel, m.user)] += n
            utc = dt.datetime.fromtimestamp(m.ts / US, dt.UTC)
            self.utc_wh[utc.weekday()][utc.hour] += 1
            local = local_time(m.user, m.ts)
            self.local_wh[local.weekday()][local.hour] += 1
            p = BY_ID.get(m.user)
            zone = p.tz if p is not None and p.profile and p.tz else "unknown"
            self.tz_messages[zone] += 1
            self.tz_posters[zone].add(m.user)
            for emoji, user in m.final_reactions:
                self.emoji[emoji] += 1
                self.channel_emoji[(m.channel, emoji)] += 1
                self.given[user] += 1
                self.received[m.user] += 1
                self.reaction_pairs[(user, m.user)] += 1
                self.reactors.add(user)
            for who in mentioned(m):
                self.made[m.user] += 1
                self.mentioned[who] += 1
            if m.thread_ts == m.ts:
                self.threads += 1
            if is_reply(m):
                self.replies[m.user] += 1
                self.reply_threads[m.user].add((m.channel, m.thread_ts))
                head = readable.get((m.channel, m.thread_ts))
                author = m.parent_user_id or (head.user if head is not None else None)
                if author is not None:
                    self.thread_pairs[(m.user, author)] += 1
        self.total = len(self.msgs)
        self.ranking = sorted(self.messages, key=lambda u: (-self.messages[u], -self.words[u], u))

    def rank(self, user: str) -> int | None:
        return self.ranking.index(user) + 1 if user in self.ranking else None

    def share(self, n: int) -> float:
        return round(n / self.total, 4)

    def users_for_half(self) -> int:
        running = 0
        for k, user in enumerate(self.ranking, 1):
            running += self.messages[user]
            if 2 * running >= self.total:
                return k
        raise AssertionError("no messages")

    def top10_share(self) -> float:
        return self.share(sum(self.messages[u] for u in self.ranking[:10]))

    def per_poster(self, counter: Counter) -> tuple[float, float]:
        values = [counter[u] for u in self.ranking]
        return round(sum(values) / len(values), 2), statistics.median(values)

    def weekday(self, matrix: list[list[int]]) -> list[int]:
        return [sum(row) for row in matrix]

    def hours(self, matrix: list[list[int]], days: range = range(7)) -> list[int]:
        return [sum(matrix[d][h] for d in days) for h in range(24)]


class Reference:
    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.now, self.prev = Side(ws, MID, HI), Side(ws, PREV_LO, MID)

    def sides(self, f) -> tuple[Any, Any]:
        return f(self.now), f(self.prev)


def fig(pair: tuple[Any, Any]) -> dict[str, Any]:
    return {"value": pair[0], "previous": pair[1]}


def top(now: Counter, prev: Counter, n: int, name: str | tuple[str, str]) -> list[dict[str, Any]]:
    """A documented top list: keys of the period by value desc, ties by key, with the previous value."""
    keys = sorted((k for k, v in now.items() if v), key=lambda k: (-now[k], k))[:n]
    out = []
    for k in keys:
        entry = dict(zip(name, k, strict=True)) if isinstance(name, tuple) else {name: k}
        out.append({**entry, "count": fig((now[k], prev[k]))})
    return out


def plain(obj: Any) -> Any:
    """The report with every figure's `change` checked (v - p, or null when a side is null) and left out."""
    if isinstance(obj, dict):
        if set(obj) == {"value", "previous", "change"} and not isinstance(obj["value"], list):
            v, p, c = obj["value"], obj["previous"], obj["change"]
            if v is None or p is None:
                assert c is None, obj
            else:
                assert c == pytest.approx(v - p, abs=1e-9), obj
            return {"value": v, "previous": p}
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [plain(x) for x in obj]
    return obj


@pytest.fixture(scope="module")
def ref(loaded) -> Reference:
    return Reference(loaded.ws)


@pytest.fixture(scope="module")
def doc(loaded) -> dict[str, Any]:
    return plain(loaded.doc)


def all_users(ws: Workspace, end: int) -> int:
    """§3 totals.all_users. A user without a profile has no first-seen time: read here, in the product's favour,
    as first seen at their first post (a user Chronicle never saw before the period's end is not counted)."""
    first = first_posts(ws, strict=False)
    return sum(1 for p in PEOPLE if not (p.deleted or p.is_bot or p.is_app) and p.id != "USLACKBOT"
               and (p.joined if p.profile else first[p.id].ts) < end)


def expected_totals(now: Side, prev: Side) -> dict[str, Any]:
    def both(f):
        return fig((f(now), f(prev)))
    return {
        "messages": both(lambda s: s.total),
        "words": both(lambda s: sum(s.words.values())),
        "posters": both(lambda s: len(s.messages)),
        "active_users": both(lambda s: len(set(s.messages) | s.reactors)),
        "channels": both(lambda s: len(s.channel_messages)),
        "reactions": both(lambda s: sum(s.emoji.values())),
        "mentions": both(lambda s: sum(s.made.values())),
        "threads": both(lambda s: s.threads),
        "replies": both(lambda s: sum(s.replies.values())),
    }


def reply_count(ws: Workspace, head: Msg) -> int:
    """Slack's reply_count: every reply of the head that arrived and is not deleted, whoever posted it."""
    return sum(1 for m in ws.messages.values() if m.channel == head.channel and m.thread_ts == head.ts
               and m.ts != head.ts and m.arrived and m.deleted_at is None)


def first_posts(ws: Workspace, strict: bool) -> dict[str, Msg]:
    """Each user's first post: strict = a message that counts (§2, any time); else any stored post of theirs."""
    first: dict[str, Msg] = {}
    for m in sorted(ws.messages.values(), key=lambda x: x.ts):
        ok = counts(m, 0, 2**62) if strict else (written(m) and m.user is not None and m.subtype in POST_SUBTYPES)
        if ok and m.user not in first:
            first[m.user] = m
    return first


# -- the data covers what it must ---------------------------------------------------------------------------

def test_the_generated_workspace_covers_every_rule(loaded, ref):
    ws, msgs = loaded.ws, list(loaded.ws.messages.values())
    in_window = [m for m in msgs if PREV_LO <= m.ts < HI]
    assert 450 <= len(msgs) <= 650 and loaded.events > 1000

    def n(pred) -> int:
        return sum(1 for m in in_window if pred(m))

    def counted(m: Msg) -> bool:
        return counts(m, PREV_LO, HI)

    cases = {
        "self mention": n(lambda m: counted(m) and f"<@{m.user}" in m.final_text),
        "mention with a label": n(lambda m: counted(m) and re.search(r"<@U[A-Z0-9]+\|", m.final_text)),
        "W id": n(lambda m: counted(m) and "<@WENT01" in m.final_text),
        "a user mentioned twice": n(lambda m: counted(m) and any(
            m.final_text.count(f"<@{u}") > 1 for u in mentioned(m))),
        "edit changing the mentions": n(lambda m: counted(m) and m.edits and set(MENTION.findall(m.text))
                                        != set(MENTION.findall(m.final_text))),
        "edit changing the words": n(lambda m: counted(m) and m.edits and len(m.text.split()) != words(m)),
        "deleted": n(lambda m: m.deleted_at is not None and m.thread_ts is None),
        "deleted with reactions": n(lambda m: m.deleted_at is not None and m.final_reactions),
        "deleted reply": n(lambda m: m.deleted_at is not None and is_reply(m)),
        "deleted head": n(lambda m: m.deleted_at is not None and m.thread_ts == m.ts),
        "reaction removed": n(lambda m: counted(m) and any(not a for *_, a in m.reactions)),
        "reaction removed then gone": n(lambda m: counted(m) and len(m.final_reactions) < len(
            {(e, u) for _, e, u, _ in m.reactions})),
        "thread_broadcast": n(lambda m: counted(m) and m.subtype == "thread_broadcast"),
        "file_share": n(lambda m: counted(m) and m.subtype == "file_share"),
        "me_message": n(lambda m: counted(m) and m.subtype == "me_message"),
        "channel_join": n(lambda m: m.subtype == "channel_join"),
        "bot_message": n(lambda m: m.subtype == "bot_message" and m.user is None),
        "bot_id without subtype": n(lambda m: m.bot_id and m.subtype is None and m.user == "UBOT12"),
        "bot reply": n(lambda m: m.bot_id and is_reply(m)),
        "private channel": n(lambda m: m.channel == PRIVATE and counts(m, PREV_LO, HI, include_private=True)),
        "reply with parent_user_id": n(lambda m: counted(m) and is_reply(m) and m.parent_user_id),
        "reply without parent_user_id": n(lambda m: counted(m) and is_reply(m) and not m.parent_user_id),
        "reply without parent, head not read": n(lambda m: counted(m) and is_reply(m) and not m.parent_user_id
                                                 and m.thread_ts < PREV_LO),
        "head marked by message_changed": n(lambda m: counted(m) and m.head_marked_at is not None),
        "head with thread_ts when posted": n(lambda m: counted(m) and m.thread_ts == m.ts
                                             and m.head_marked_at is None),
        "exported": n(lambda m: m.channel == EXPORTED and m.ts < OBS and counted(m)),
        "exported, then edited live": n(lambda m: m.channel == EXPORTED and m.ts < OBS and any(
            t > OBS for t, _ in m.edits)),
        "exported, then reacted live": n(lambda m: m.channel == EXPORTED and m.ts < OBS and any(
            t > OBS for t, *_ in m.reactions)),
        "exported, then deleted live": n(lambda m: m.channel == EXPORTED and m.ts < OBS and m.deleted_at
                                         and m.deleted_at > OBS),
        "weekend": n(lambda m: counted(m) and dt.datetime.fromtimestamp(m.ts / US, dt.UTC).weekday() >= 5),
        "a reaction or a delete whose message never came": sum(1 for m in msgs if not m.arrived),
    }
    assert all(cases.values()), {k: v for k, v in cases.items() if not v}
    outside = [m for m in msgs if counts(m, 0, 2**62) and not PREV_LO <= m.ts < HI]
    assert {PREV_LO - 1, HI} <= {m.ts for m in outside} and len(outside) > 10
    assert {PREV_LO, MID - 1, MID, HI - 1} <= {m.ts for m in ref.now.msgs + ref.prev.msgs}
    # the top 10 of the most replied heads, and the 11th, have distinct counts (no tie to settle)
    ranked = sorted((reply_count(ws, m) for m in ref.now.msgs if m.thread_ts == m.ts), reverse=True)[:11]
    assert len(set(ranked)) == 11, ranked
    # the first post is the same whether or not deleted, private or bot posts count: no ambiguity to settle
    strict, loose = first_posts(ws, strict=True), first_posts(ws, strict=False)
    for user in set(strict) | set(loose):
        a, b = strict.get(user), loose.get(user)
        if any(x is not None and PREV_LO <= x.ts < HI for x in (a, b)):
            assert a is b, user


# -- the figures --------------------------------------------------------------------------------------------

def test_totals(doc, ref):
    assert {k: v for k, v in doc["totals"].items() if k != "all_users"} == expected_totals(ref.now, ref.prev)
    assert doc["period"] == {"start": "2026-11-01", "end": "2026-11-08", "days": 7}
    assert doc["previous"] == {"start": "2026-10-25", "end": "2026-11-01", "days": 7}
    assert doc["report_id"] == "2026-11-01-7"


def test_all_users(doc, loaded):
    """Users not deleted, not bots or apps, not USLACKBOT, first seen before each period's end. UNOP15 has no
    profile and posted only on 2026-11-10: Chronicle had not seen them before either period's end."""
    assert doc["totals"]["all_users"] == fig((all_users(loaded.ws, HI), all_users(loaded.ws, MID)))


def test_private_channels_count_only_when_asked(loaded, db):
    with_private = service.generate(db, loaded.team, Period(START, DAYS), include_private=True, save=False)
    now = Side(loaded.ws, MID, HI, include_private=True)
    prev = Side(loaded.ws, PREV_LO, MID, include_private=True)
    totals = {k: v for k, v in plain(with_private["totals"]).items() if k != "all_users"}
    assert totals == expected_totals(now, prev)
    assert with_private["totals"]["messages"] != loaded.doc["totals"]["messages"]
    assert PRIVATE in {c["channel"] for c in with_private["channels"]}
    assert PRIVATE not in json.dumps(loaded.doc)


def test_users(doc, ref):
    now, prev = ref.now, ref.prev
    rows, running = [], 0
    for user in now.ranking + [u for u in prev.ranking if u not in now.messages]:
        ranked = user in now.messages
        running += now.messages[user]
        rows.append({
            "user": user,
            "messages": fig((now.messages[user], prev.messages[user])),
            "words": fig((now.words[user], prev.words[user])),
            "rank": fig((now.rank(user), prev.rank(user))),
            "share": fig((now.share(now.messages[user]), prev.share(prev.messages[user]))),
            "cumulative_share": now.share(running) if ranked else None,
        })
    got = doc["users"]
    assert got["rows"] == rows
    assert got["users_for_half"] == fig(ref.sides(Side.users_for_half))
    assert got["top10_share"] == fig(ref.sides(Side.top10_share))
    for key, counter in (("messages_per_poster", "messages"), ("words_per_poster", "words")):
        (avg, med), (pavg, pmed) = now.per_poster(getattr(now, counter)), prev.per_poster(getattr(prev, counter))
        assert got[key] == {"average": fig((avg, pavg)), "median": fig((med, pmed))}, key
    assert any(r["rank"]["value"] is None for r in rows)  # someone posted in the previous period only
    assert len(now.ranking) > 10 and len(prev.ranking) > 10  # the top 10 is not everyone
    # ties of messages: more words first, then the user id
    assert now.rank("UTIE19") + 1 == now.rank("UTIE18") and prev.rank("UTIE18") + 1 == prev.rank("UTIE19")


def test_channels(doc, ref):
    now, prev = ref.now, ref.prev
    names = set(now.channel_messages) | set(prev.channel_messages)
    expected = []
    for channel in sorted(names, key=lambda c: (-now.channel_messages[c], c)):
        users = {u for c, u in [*now.channel_user_messages, *prev.channel_user_messages] if c == channel}
        expected.append({
            "channel": channel,
            "messages": fig((now.channel_messages[channel], prev.channel_messages[channel])),
            "words": fig((now.channel_words[channel], prev.channel_words[channel])),
            # a table: one row per user who wrote in the channel in either period, this period's messages desc,
            # then user id
            "users": [[u, now.channel_user_messages[(channel, u)], prev.channel_user_messages[(channel, u)],
                       now.channel_user_words[(channel, u)], prev.channel_user_words[(channel, u)]]
                      for u in sorted(users, key=lambda u: (-now.channel_user_messages[(channel, u)], u))],
        })
    assert doc["channel_user_columns"] == ["user", "messages", "previous_messages", "words", "previous_words"]
    assert doc["channels"] == expected
    assert PRIVATE not in names


def series(now: list[Any], prev: list[Any]) -> list[dict[str, Any]]:
    return [fig(p) for p in zip(now, prev, strict=True)]


def test_activity_in_utc(doc, ref):
    now, prev = ref.now, ref.prev
    got = doc["activity"]
    assert got["utc_weekday_hour"] == {"value": now.utc_wh, "previous": prev.utc_wh}
    assert got["utc_weekday"] == series(now.weekday(now.utc_wh), prev.weekday(prev.utc_wh))
    assert got["utc_hour"] == series(now.hours(now.utc_wh), prev.hours(prev.utc_wh))
    assert got["weekday_hours_utc"] == series(now.hours(now.utc_wh, WORKDAYS), prev.hours(prev.utc_wh, WORKDAYS))
    assert got["weekday_share"] == series([now.share(n) for n in now.weekday(now.utc_wh)],
                                          [prev.share(n) for n in prev.weekday(prev.utc_wh)])
    assert got["workday_share"] == fig((now.share(sum(now.weekday(now.utc_wh)[:5])),
                                        prev.share(sum(prev.weekday(prev.utc_wh)[:5]))))


def test_activity_in_local_time(doc, ref):
    now, prev = ref.now, ref.prev
    got = doc["activity"]
    assert got["local_weekday"] == series(now.weekday(now.local_wh), prev.weekday(prev.local_wh))
    assert got["local_hour"] == series(now.hours(now.local_wh), prev.hours(prev.local_wh))
    assert got["weekday_hours_local"] == series(now.hours(now.local_wh, WORKDAYS),
                                                prev.hours(prev.local_wh, WORKDAYS))
    zones = set(now.tz_messages) | set(prev.tz_messages)
    assert got["timezones"] == [
        {"tz": z, "messages": fig((now.tz_messages[z], prev.tz_messages[z])),
         "posters": fig((len(now.tz_posters[z]), len(prev.tz_posters[z])))}
        for z in sorted(zones, key=lambda z: (-now.tz_messages[z], z))]
    # the daylight-saving edges: 01:30 New York time twice on 2026-11-01, 02:30 Berlin time twice on 2026-10-25
    assert local_time("UNYA01", _us(2026, 11, 1, 5, 30)).hour == local_time("UNYA01", _us(2026, 11, 1, 6, 30)).hour
    assert local_time("UBER03", _us(2026, 10, 25, 0, 30)).hour == local_time("UBER03", _us(2026, 10, 25, 1, 30)).hour
    assert local_time("UOFF05", _us(2026, 11, 2, 3)).weekday() == 6  # UTC-7: still Sunday


def test_reactions(doc, ref):
    now, prev = ref.now, ref.prev
    got = doc["reactions"]
    assert got["top"] == top(now.emoji, prev.emoji, 20, "emoji")
    assert len(now.emoji) > 20  # the cut at 20 is exercised
    by_channel = {}
    for channel in set(now.channel_messages) | set(prev.channel_messages):
        mine = Counter({e: v for (c, e), v in now.channel_emoji.items() if c == channel})
        theirs = Counter({e: v for (c, e), v in prev.channel_emoji.items() if c == channel})
        if mine:
            by_channel[channel] = top(mine, theirs, 5, "emoji")
    assert {x["channel"]: x["top"] for x in got["by_channel"] if x["top"]} == by_channel
    assert got["given"] == top(now.given, prev.given, 20, "user")
    assert got["received"] == top(now.received, prev.received, 20, "user")
    assert got["pairs"] == top(now.reaction_pairs, prev.reaction_pairs, 20, ("from", "to"))
    assert len(now.reaction_pairs) > 20


def test_mentions(doc, ref):
    now, prev = ref.now, ref.prev
    assert doc["mentions"] == {"made": top(now.made, prev.made, 20, "user"),
                               "received": top(now.mentioned, prev.mentioned, 20, "user")}


def test_threads(doc, ref):
    now, prev = ref.now, ref.prev
    responders = sorted((u for u, v in now.replies.items() if v), key=lambda u: (-now.replies[u], u))[:20]
    assert doc["threads"] == {
        "responders": [{"user": u, "replies": fig((now.replies[u], prev.replies[u])),
                        "threads": fig((len(now.reply_threads[u]), len(prev.reply_threads[u])))}
                       for u in responders],
        "pairs": top(now.thread_pairs, prev.thread_pairs, 20, ("from", "to")),
    }


def test_top_messages(doc, ref, loaded):
    now = ref.now

    def entry(m: Msg, key: str, n: int) -> dict[str, Any]:
        return {"channel": m.channel, "ts": _ts(m.ts), "user": m.user, key: n}

    reacted = sorted(now.msgs, key=lambda m: (-len(m.final_reactions), m.ts))[:10]
    heads = [m for m in now.msgs if m.thread_ts == m.ts]
    replied = sorted(heads, key=lambda m: (-reply_count(loaded.ws, m), m.ts))[:10]
    got = doc["top_messages"]
    keep = ("channel", "ts", "user")
    assert [{**{k: x[k] for k in keep}, "reactions": x["reactions"]} for x in got["most_reacted"]] == [
        entry(m, "reactions", len(m.final_reactions)) for m in reacted]
    assert [{**{k: x[k] for k in keep}, "replies": x["replies"]} for x in got["most_replied"]] == [
        entry(m, "replies", reply_count(loaded.ws, m)) for m in replied]
    # ties among the most reacted are settled older first: the data has some
    assert len({len(m.final_reactions) for m in reacted}) < 10


def test_new_users_and_first_posts(doc, ref, loaded):
    def joined(lo: int, hi: int) -> list[Person]:
        return sorted((p for p in PEOPLE if p.profile and lo <= p.joined < hi), key=lambda p: p.id)

    assert doc["new_users"]["count"] == fig((len(joined(MID, HI)), len(joined(PREV_LO, MID))))
    assert sorted(doc["new_users"]["users"], key=lambda x: x["user"]) == [
        {"user": p.id, "first_seen": _ts(p.joined)} for p in joined(MID, HI)]
    first = first_posts(loaded.ws, strict=True)
    now = sorted((m for m in first.values() if MID <= m.ts < HI), key=lambda m: m.user)
    prev = [m for m in first.values() if PREV_LO <= m.ts < MID]
    assert doc["first_posts"]["count"] == fig((len(now), len(prev)))
    assert sorted(doc["first_posts"]["posts"], key=lambda x: x["user"]) == [
        {"user": m.user, "channel": m.channel, "ts": _ts(m.ts)} for m in now]
    assert now and prev


def test_members(doc):
    observed = {c: [(at, n, "backfill") for at, n in rows] for c, rows in MEMBERS.items()}
    observed.setdefault(EXPORTED, []).append((OBS, len(EXPORT_MEMBERS), "export"))
    expected = {}
    for entry in doc["channels"]:
        channel = entry["channel"]
        rows = sorted(observed.get(channel, []))
        if not any(at < HI for at, _, _ in rows):
            continue  # nothing known of it: no figure to give

        def latest(end: int, rows=rows) -> int | None:
            before = [n for at, n, _ in rows if at < end]
            return before[-1] if before else None

        expected[channel] = {
            "channel": channel, "members": fig((latest(HI), latest(MID))),
            "observations": [{"at": _ts(at), "members": n, "source": s} for at, n, s in rows if PREV_LO <= at < HI]}
    got = {x["channel"]: {**x, "observations": sorted(x["observations"], key=lambda o: o["at"])}
           for x in doc["members"]}
    unknown = {"members": {"value": None, "previous": None}, "observations": []}
    got = {c: x for c, x in got.items() if c in expected or {**x, "channel": None} != {**unknown, "channel": None}}
    # CDEV02's only observation (12 members, 2026-10-22) is before both periods: still the latest count before
    # each period's end
    assert got == expected


def _users_and_channels(doc: dict[str, Any]) -> tuple[set[str], set[str]]:
    """Every user and channel id the report's figures mention (walking the document, names left out)."""
    users, channels = set(), set()

    def walk(obj: Any) -> None:
        if isinstance(obj, dict):
            for key, value in obj.items():
                if key in ("user", "from", "to") and isinstance(value, str):
                    users.add(value)
                elif key == "channel" and isinstance(value, str):
                    channels.add(value)
                else:
                    walk(value)
        elif isinstance(obj, list):
            for x in obj:
                walk(x)

    walk({k: v for k, v in doc.items() if k != "names"})
    users.update(row[0] for entry in doc["channels"] for row in entry["users"])  # the per-channel tables
    return users, channels


def test_names(doc):
    users, channels = _users_and_channels(doc)
    assert set(GHOSTS) <= users and "UNOP14" in users and "UDEL09" in users
    current = {**CHANNELS, RENAMED[0]: RENAMED[1]}
    assert doc["names"] == {"users": {u: display_name(u) for u in users},
                            "channels": {c: current[c] for c in channels}}


# -- arrival order ------------------------------------------------------------------------------------------

def _without_team(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _without_team(v) for k, v in obj.items()
                if k not in ("team_id", "generated_at", "stats", "ref")}
    if isinstance(obj, list):
        return [_without_team(x) for x in obj]
    return obj


def test_the_report_is_the_same_whatever_the_arrival_order(app, db):
    """A reaction before its message, edits before the post, a reply before its head, a delete before the reply
    it deletes: in order and in reverse, the same report."""
    def t(hours: float) -> str:
        return _ts(MID + 2 * 86400 * US + int(hours * 3600 * US))

    c = "CORD01"
    deleted_reply = delete(c, t(7), t(8))
    deleted_reply["previous_message"].update(user="UORDC3", thread_ts=t(1))
    events = [
        msg(c, t(1), "head <@UORDB2> words", user="UORDA1"),
        msg(c, t(2), "reply one", user="UORDB2", thread_ts=t(1)),  # no parent_user_id: the head says who
        {"type": "message", "subtype": "message_changed", "hidden": True, "channel": c, "channel_type": "channel",
         "ts": t(2.001), "event_ts": t(2.001),
         "message": {"type": "message", "user": "UORDA1", "text": "head <@UORDB2> words", "ts": t(1),
                     "thread_ts": t(1)},
         "previous_message": {"type": "message", "user": "UORDA1", "text": "head <@UORDB2> words", "ts": t(1)}},
        edit(c, t(1), "new <@UORDC3> <@UORDC3|c> text <@UORDA1>", "head <@UORDB2> words", at=t(3), user="UORDA1"),
        reaction("added", c, t(1), "tada", "UORDC3", t(4)),
        reaction("removed", c, t(1), "tada", "UORDC3", t(5)),
        reaction("added", c, t(1), "heart", "UORDD4", t(6)),
        msg(c, t(7), "second reply", user="UORDC3", thread_ts=t(1), parent_user_id="UORDA1"),
        deleted_reply,
        msg(c, t(9), "a b c", user="UORDB2"),
        edit(c, t(9), "a b c d e", "a b c", at=t(10), user="UORDB2"),
        edit(c, t(9), "x", "a b c d e", at=t(11), user="UORDB2", prev_edited=t(10)),
        reaction("added", c, t(9), "eyes", "UORDA1", t(12)),
    ]
    client = app.test_client()
    docs = []
    for order in (events, events[::-1]):
        team = f"TORD{uuid.uuid4().hex[:12].upper()}"
        assert post_event(client, team, created(c, "order", _ts(PREV_LO))).status_code == 200
        for event in order:
            r = post_event(client, team, event)
            assert r.status_code == 200 and r.json["outcome"] == "stored", r.json
        docs.append(service.generate(db, team, Period(START, DAYS), save=False))
    assert _without_team(docs[0]) == _without_team(docs[1])
    totals = {k: v["value"] for k, v in docs[1]["totals"].items() if k != "all_users"}
    assert totals == {"messages": 3, "words": 5 + 2 + 1, "posters": 2, "active_users": 3, "channels": 1,
                      "reactions": 2, "mentions": 1, "threads": 1, "replies": 1}
    assert [(p["from"], p["to"]) for p in docs[1]["threads"]["pairs"]] == [("UORDB2", "UORDA1")]
    assert [(m["ts"], m["replies"]) for m in docs[1]["top_messages"]["most_replied"]] == [(t(1), 1)]
