"""The event format of activity days, version 1 (docs/activity.md §2).

An activity day is the time-ordered list of one account's events on one local day. Every event is a flat dict:

| field | type | on | meaning |
|---|---|---|---|
| `at` | int | every event | when it happened, epoch microseconds (UTC) |
| `kind` | str | every event | one of `SLACK_KINDS` or `NETWORK_KINDS` |
| `channel` | str | Slack | the channel it happened in |
| `ts` | int | Slack | the message it concerns (Slack ts in µs): with `channel`, the message's address |
| `thread_ts` | int | Slack replies | the thread the reply belongs to |
| `emoji` | str | reactions | the reaction's name |
| `user` | str | reactions; network likes and follows | the other party (who reacted, whose post, who followed) |
| `words` | int | Slack messages | words in the message's current text |
| `files` | int | Slack messages | files attached |
| `subtype` | str | Slack messages | Slack's subtype, when the message has one (e.g. `bot_message`, `channel_topic`) |
| `post` | int | network posts and likes | the post |
| `count` | int | counted events (format 2) | this many events of the kind in the 15-minute slot starting at `at` |

Texts are not copied into the day: the archive keeps them (with their edits and deletion state), and the
address (`channel`, `ts`) or `post` points there. A day therefore never shows a deleted message's text.
Absent fields are left out, never null. `FORMAT_VERSION` changes when a field changes meaning; a reader refuses
a version it does not know.

Hot days (format 2, docs/activity.md §4): a day of more than DAY_EVENTS events keeps the first SLOT_SHARE events
of each 15-minute UTC slot; the others become counted events, one per (slot, kind, channel, and the post for
received likes), at the slot's start, with `count`. Every count by kind stays exact; a day holds at most
96 x SLOT_SHARE single events. A day of DAY_EVENTS events or fewer is as before (format 1).
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

FORMAT_VERSION = 2  # what this version reads; days written without counted events are still format 1
PLAIN_FORMAT = 1  # a day of single events only

# Slack: what a user did, and what others did to their messages.
MESSAGE, REPLY, FILE_SHARE = "message", "reply", "file_share"
EDIT, DELETE = "edit", "delete"
REACTION_GIVEN, REACTION_RECEIVED = "reaction_given", "reaction_received"
JOIN, LEAVE, RENAME = "channel_join", "channel_leave", "channel_rename"
SLACK_KINDS = (MESSAGE, REPLY, FILE_SHARE, EDIT, DELETE, REACTION_GIVEN, REACTION_RECEIVED, JOIN, LEAVE, RENAME)

# Follower network.
POST = "post"
LIKE_GIVEN, LIKE_RECEIVED, UNLIKE_GIVEN, UNLIKE_RECEIVED = "like_given", "like_received", "unlike_given", \
    "unlike_received"
FOLLOW, FOLLOWED, UNFOLLOW, UNFOLLOWED = "follow", "followed_by", "unfollow", "unfollowed_by"
NETWORK_KINDS = (POST, LIKE_GIVEN, LIKE_RECEIVED, UNLIKE_GIVEN, UNLIKE_RECEIVED, FOLLOW, FOLLOWED, UNFOLLOW,
                 UNFOLLOWED)

KINDS = frozenset(SLACK_KINDS + NETWORK_KINDS)
# The kinds in a fixed order: the columnar codec stores a kind as its position here (only ever append).
KIND_ORDER = SLACK_KINDS + NETWORK_KINDS
# The fields in their canonical order (the columnar codec writes its columns in this order).
FIELDS = ("at", "kind", "channel", "ts", "thread_ts", "emoji", "user", "words", "files", "subtype", "post", "count")

SLOT_US = 900 * 1_000_000  # 15 minutes: every zone offset in use is a multiple, so a slot lies in one local day
# A hot day keeps 192 single events (and a counted event per slot, kind and channel or post): a 31-day read of a
# hot account decodes ~9,000 events, where 31 days of 1,000 cost 17 ms of this machine's CPU (docs/activity.md §4).
DAY_EVENTS = 500  # single events a day keeps whole; beyond, each slot keeps SLOT_SHARE
SLOT_SHARE = 2  # 96 slots x 2 = 192 single events at most in a hot day
PER_POST = frozenset({"like_received", "unlike_received"})  # counted per post (the account's own posts)


def event(at: int, kind: str, **fields: Any) -> dict[str, Any]:
    """One event; fields given as None are left out."""
    out: dict[str, Any] = {"at": at, "kind": kind}
    out.update((k, v) for k, v in fields.items() if v is not None)
    return out


def _order(e: dict[str, Any]) -> tuple:
    return (e["at"], e["kind"], e.get("channel", ""), e.get("ts", 0), e.get("user", ""), e.get("emoji", ""),
            e.get("post", 0))


_AT_KIND = operator.itemgetter("at", "kind")


def in_order(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Time order, ties broken by the other fields: the same events always give the same day (and bytes)."""
    ordered = sorted(events, key=_AT_KIND)  # in C; the full key only where events share time and kind
    keys = list(map(_AT_KIND, ordered))
    if not any(map(operator.eq, keys, keys[1:])):
        return ordered
    out: list[dict[str, Any]] = []
    for _key, group in itertools.groupby(ordered, key=_AT_KIND):
        tied = list(group)
        if len(tied) > 1:
            tied.sort(key=_order)
        out += tied
    return out


def counts_by_kind(events: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Events per kind, a counted event as its `count`."""
    found: Counter[str] = Counter()
    for e in events:
        found[e["kind"]] += e.get("count", 1)
    return dict(sorted(found.items()))


def total(events: Sequence[dict[str, Any]]) -> int:
    """How many events a day holds (a counted event as its `count`)."""
    return len(events) + sum(e["count"] - 1 for e in events if "count" in e)


def format_of(events: Iterable[dict[str, Any]]) -> int:
    return FORMAT_VERSION if any("count" in e for e in events) else PLAIN_FORMAT


def _count_key(e: dict[str, Any]) -> tuple[int, str, str, int]:
    kind = e["kind"]
    return (e["at"] - e["at"] % SLOT_US, kind, e.get("channel", ""), e.get("post", 0) if kind in PER_POST else 0)


def _counted(key: tuple[int, str, str, int], n: int) -> dict[str, Any]:
    at, kind, channel, post = key
    return event(at, kind, channel=channel or None, post=post or None, count=n)


def capped(events: list[dict[str, Any]], *, day_events: int = DAY_EVENTS, share: int = SLOT_SHARE
           ) -> list[dict[str, Any]]:
    """The day's events (in order) as stored: whole when it holds at most `day_events` single events; else the
    first `share` single events of each slot and counted events for the rest. Counted events given (the
    network's counts beyond the rows read) are merged with those made here, by key."""
    singles = sum(1 for e in events if "count" not in e)
    if singles <= day_events and singles == len(events):
        return events
    kept: list[dict[str, Any]] = []
    counts: Counter[tuple[int, str, str, int]] = Counter()
    per_slot: Counter[int] = Counter()
    # Counted events given stand for events too: a day of them is hot however few singles came with them (the
    # network's and the Slack posts' reads leave exactly what a hot day keeps).
    hot = total(events) > day_events
    for e in events:
        if "count" in e:
            counts[_count_key(e)] += e["count"]
            continue
        slot = e["at"] // SLOT_US
        if hot and per_slot[slot] >= share:
            counts[_count_key(e)] += 1
            continue
        per_slot[slot] += 1
        kept.append(e)
    return in_order(kept + [_counted(key, n) for key, n in counts.items() if n > 0])
