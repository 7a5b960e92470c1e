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

Texts are not copied into the day: the archive keeps them (with their edits and deletion state), and the
address (`channel`, `ts`) or `post` points there. A day therefore never shows a deleted message's text.
Absent fields are left out, never null. `FORMAT_VERSION` changes when a field changes meaning; a reader refuses
a version it does not know.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from collections.abc import Iterable
from typing import Any

FORMAT_VERSION = 1

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
FIELDS = ("at", "kind", "channel", "ts", "thread_ts", "emoji", "user", "words", "files", "subtype", "post")


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
    return dict(sorted(Counter(e["kind"] for e in events).items()))
