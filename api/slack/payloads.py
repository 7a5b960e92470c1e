"""Slack Events API payloads: a request body decoded once and parsed into typed values the dispatcher acts on.

`RawBody.decode` reads the JSON once. Nothing in it is trusted until the signature over the raw bytes is
checked (events.read_request): the `team_id` the body claims only chooses which signing secret to check with.
`RawBody.parse` then builds an `Envelope`, and every check of the payload's shape is here: a payload that
cannot be stored as sent raises `BadEvent` (answered 400) before anything is read or written.

One exception keeps the channel policy first: the content of a message (and a reaction's time) is only
checked for a channel Chronicle archives, so a malformed event in a DM is ignored like any DM event. The
parser returns `Unreadable` for it, and the dispatcher refuses it once it knows the channel is archived.

No database access here; the shapes follow Slack's documentation of each event type.
"""

from __future__ import annotations

import dataclasses
import json
import re
import zlib
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import orjson

from api import json_guard
from api.slack.codec import is_bot_id, is_slack_id, is_user_id
from api.slack.content import shape_error
from api.slack.messages import NewMessage
from api.slack.timeutil import BadTimestamp, message_ts_to_us, ts_to_us


class BadEvent(ValueError):
    """A payload that cannot be stored as sent (answered 400 with the reason)."""


# -- events -----------------------------------------------------------------------------------------------
# Times are microseconds: the event's own time, the write timestamp of what it changes.

@dataclasses.dataclass(frozen=True)
class Unhandled:
    """An event type Chronicle does not store (acknowledged, logged once per type)."""

    type: str


@dataclasses.dataclass(frozen=True)
class Ignored:
    """A handled event type that carries nothing to store."""

    reason: str


@dataclasses.dataclass(frozen=True)
class MessagePosted:
    channel_id: str
    channel_type: str | None
    message: NewMessage
    purpose: str | None = None  # set by a channel_purpose message
    topic: str | None = None  # set by a channel_topic message


@dataclasses.dataclass(frozen=True)
class MessageEdited:
    channel_id: str
    channel_type: str | None
    message: NewMessage  # the message as it reads after the edit
    at: int  # the edit time (never before the message's ts)
    edited_ts: int | None  # None when the text did not change (reply counts, unfurls)
    versions: tuple[tuple[int, str], ...]  # (time, text) of the new text and of the previous one


@dataclasses.dataclass(frozen=True)
class MessageDeleted:
    channel_id: str
    channel_type: str | None
    ts: int
    at: int
    thread_ts: int | None = None  # the thread of a deleted reply, when the event's previous_message says it
    user: str | None = None  # the deleted message's author, when previous_message says it (activity days)


@dataclasses.dataclass(frozen=True)
class HiddenMessage:
    """A hidden bookkeeping message (e.g. message_replied): not a message of the channel."""

    channel_id: str
    channel_type: str | None
    subtype: Any


@dataclasses.dataclass(frozen=True)
class Unreadable:
    """An event of a channel whose content cannot be stored: 400 if the channel is archived, else ignored."""

    channel_id: str
    channel_type: str | None
    reason: str


@dataclasses.dataclass(frozen=True)
class Reaction:
    channel_id: str
    ts: int  # the message reacted to
    emoji: str
    user: str
    added: bool
    at: int
    channel_type: None = None  # reactions do not say what kind of channel they are in
    item_user: str | None = None  # the reacted-to message's author (Slack's item_user), for activity days


@dataclasses.dataclass(frozen=True)
class ChannelCreated:
    channel_id: str
    at: int
    name: str
    created_ts: int | None
    creator: str | None


@dataclasses.dataclass(frozen=True)
class ChannelRenamed:
    channel_id: str
    at: int
    name: str


@dataclasses.dataclass(frozen=True)
class ChannelTextSet:
    """channel_purpose / channel_topic: exactly one of the two is set."""

    channel_id: str
    at: int
    purpose: str | None = None
    topic: str | None = None


@dataclasses.dataclass(frozen=True)
class ChannelConverted:
    channel_id: str
    at: int
    visibility: str  # "private" | "public"


@dataclasses.dataclass(frozen=True)
class ChannelArchived:
    channel_id: str
    at: int
    archived: bool  # False: unarchived


@dataclasses.dataclass(frozen=True)
class ChannelDeleted:
    channel_id: str
    at: int


@dataclasses.dataclass(frozen=True)
class ChannelIdChanged:
    old_channel_id: str
    new_channel_id: str
    at: int


@dataclasses.dataclass(frozen=True)
class UserChanged:
    """user_change / team_join: the user object as it now reads (users.py normalises it)."""

    user: dict[str, Any]
    at: int


Event = (Unhandled | Ignored | MessagePosted | MessageEdited | MessageDeleted | HiddenMessage | Unreadable
         | Reaction | ChannelCreated | ChannelRenamed | ChannelTextSet | ChannelConverted | ChannelArchived
         | ChannelDeleted | ChannelIdChanged | UserChanged)
# Events in a channel the archive policy decides on (channel_id, channel_type) before anything is stored.
CHANNEL_POLICY_EVENTS = (MessagePosted, MessageEdited, MessageDeleted, HiddenMessage, Unreadable, Reaction)


# -- envelopes --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class UrlVerification:
    type: ClassVar[str] = "url_verification"
    challenge: str


@dataclasses.dataclass(frozen=True)
class EventCallback:
    type: ClassVar[str] = "event_callback"
    team_id: str
    event_id: str
    event_time: int  # Unix seconds
    event: Event
    raw: dict[str, Any]  # the envelope as sent (kept compressed with the record when configured)
    enterprise_id: str | None = None  # Enterprise Grid: the workspace's org (an org-wide install serves it)


@dataclasses.dataclass(frozen=True)
class OtherEnvelope:
    """Another envelope type (e.g. app_rate_limited): acknowledged, nothing to store."""

    type: str


Envelope = UrlVerification | EventCallback | OtherEnvelope


@dataclasses.dataclass(frozen=True)
class RawBody:
    """A request body decoded once: its JSON value, or why it is not JSON."""

    value: Any = None
    error: str | None = None

    @classmethod
    def decode(cls, body: bytes) -> RawBody:
        # The limits every request body meets (api/json_guard.py), also here: this decoder reads any body it is
        # given, whatever its Content-Type. Then json.loads never recurses past them.
        problem = json_guard.problem(body)
        if problem is not None:
            return cls(error=f"body is not JSON Chronicle accepts: {problem}")
        try:
            return cls(value=json.loads(body))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            return cls(error=f"body is not JSON: {str(exc)[:200]}")

    @property
    def claimed_team_id(self) -> str | None:
        """The workspace the body says it comes from: not trusted, it only chooses the signing secret."""
        team = self.value.get("team_id") if isinstance(self.value, dict) else None
        return team if isinstance(team, str) and team else None

    def parse(self) -> Envelope:
        if self.error is not None:
            raise BadEvent(self.error)
        return parse(self.value)


def parse(value: Any) -> Envelope:
    """The typed envelope of a decoded payload (the HTTP body, or an envelope built by the sample loader)."""
    if not isinstance(value, dict):
        raise BadEvent("body must be a JSON object")
    kind = value.get("type")
    if not isinstance(kind, str):
        raise BadEvent("missing field: type")
    if kind == "url_verification":
        challenge = value.get("challenge")
        if not isinstance(challenge, str):
            raise BadEvent("url_verification without a string challenge")
        _check_unicode(value)
        return UrlVerification(challenge=challenge)
    if kind != "event_callback":
        _check_unicode(value)
        return OtherEnvelope(type=kind)
    for field in ("team_id", "event_id"):
        if not isinstance(value.get(field), str) or not value[field]:
            raise BadEvent(f"missing field: {field}")
    if not _unix_seconds(value.get("event_time")):
        raise BadEvent("missing field: event_time (integer Unix time)")
    event = value.get("event")
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise BadEvent("missing field: event.type")
    _check_ids(value, event)
    _check_unicode(value)
    return EventCallback(team_id=value["team_id"], event_id=value["event_id"], event_time=value["event_time"],
                         event=_parse_event(_Reader(value, event)), raw=value, enterprise_id=_enterprise_of(value))


def _enterprise_of(envelope: dict[str, Any]) -> str | None:
    """The org of the workspace an envelope comes from: `enterprise_id` (Enterprise Grid), or the first
    authorization's; None outside an org, or when it is not a plausible id."""
    found = envelope.get("enterprise_id")
    if not found:
        authorizations = envelope.get("authorizations")
        if isinstance(authorizations, list) and authorizations and isinstance(authorizations[0], dict):
            found = authorizations[0].get("enterprise_id")
    return found if isinstance(found, str) and re.fullmatch(r"E[A-Z0-9]{2,20}", found) else None


def _unix_seconds(value: Any) -> bool:
    """An integer Unix time that fits the microsecond bigint columns (rejects bools and absurd values)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**11


def _check_ids(envelope: dict[str, Any], event: dict[str, Any]) -> None:
    channel = event.get("channel")
    item = event.get("item")
    candidates = {
        "team_id": envelope.get("team_id"),
        "event.channel": channel.get("id") if isinstance(channel, dict) else channel,
        "event.item.channel": item.get("channel") if isinstance(item, dict) else None,
        "event.old_channel_id": event.get("old_channel_id"),
        "event.new_channel_id": event.get("new_channel_id"),
    }
    for where, value in candidates.items():
        if value is not None and not is_slack_id(value):
            raise BadEvent(f"{where} is not a Slack id (upper-case letters and digits, at most 64)")


def _check_unicode(envelope: dict[str, Any]) -> None:
    try:  # orjson refuses unpaired surrogates; ten times faster than the stdlib's encoder on a whole message
        orjson.dumps(envelope)
        return
    except orjson.JSONEncodeError:  # a surrogate, or what orjson cannot encode (integers beyond 64 bits)
        pass
    try:  # JSON escapes can carry unpaired surrogates, which no text column can store
        json.dumps(envelope, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise BadEvent("body holds text that is not valid Unicode (an unpaired surrogate escape)") from None


class _Reader:
    """Field access with the error messages of the 400 answers."""

    def __init__(self, envelope: dict[str, Any], event: dict[str, Any]) -> None:
        self.envelope, self.event = envelope, event
        self.team_id: str = envelope["team_id"]

    def field(self, obj: dict, name: str, kind: type | tuple = str, where: str = "event") -> Any:
        value = obj.get(name)
        if not isinstance(value, kind) or value == "":
            raise BadEvent(f"missing field: {where}.{name}")
        return value

    def event_us(self, spread: str | None = None) -> int:
        """The event's own time: event_ts when present (µs precision), else the envelope's event_time.

        An event_ts that is present but not a Slack timestamp (whatever its JSON type) is refused, like
        an out-of-range one: Slack always sends a string. For the whole-second fallback see `seconds_us`.
        """
        ets = self.event.get("event_ts")
        if ets is None:
            return seconds_us(self.envelope["event_time"], spread)
        return ts_to_us(ets)


def seconds_us(seconds: int, spread: str | None = None) -> int:
    """A time Slack gave in whole seconds, as a write time (the tie rule, docs/slack.md "Ties").

    Two events of one second would share a write timestamp, and Cassandra would then keep the larger value
    (a name, a topic) whatever Slack's order, and keep one row where two names were given. Events that set a
    value pass that value as `spread`: a sub-second part derived from it (1..999,999 µs, the same for every
    delivery and retry of the event) gives each distinct value its own time, so every name stays in the history
    and the outcome does not depend on the arrival order. Toggles (archive, reactions, visibility) pass no
    spread: `clearing` orders a same-instant pair.
    """
    offset = 1 + zlib.crc32(spread.encode("utf-8", "surrogatepass")) % 999_999 if spread is not None else 0
    return seconds * 1_000_000 + offset


def clearing(at: int) -> int:
    """The write time of an event that clears a state (reaction_removed, channel_unarchive,
    channel_convert_to_public): 1 µs before its event time. Of a set and a clear at the same instant, the set
    is taken as the later one (the reaction stays, the channel stays archived / private); a clear that is
    1 µs or more after a set still wins (equal timestamps: the tombstone, or the value "public", wins)."""
    return at - 1


def _parse_event(r: _Reader) -> Event:
    parser = _PARSERS.get(r.event["type"])
    if parser is None:
        return Unhandled(type=r.event["type"])
    try:
        return parser(r)
    except BadTimestamp as exc:
        raise BadEvent(str(exc)) from None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


# -- messages ---------------------------------------------------------------------------------------------

_FILE_FIELDS = ("id", "name", "title", "mimetype", "filetype", "size", "url_private", "url_private_download",
                "permalink", "is_external", "external_type", "external_url", "mode", "created", "user")


def slim_files(files: Iterable[Any]) -> list[dict]:
    """The subset of Slack file metadata kept on the message (no thumbnails, no share lists)."""
    # File ids name storage paths: only Slack-shaped ids are kept.
    return [{k: f[k] for k in _FILE_FIELDS if k in f} for f in files
            if isinstance(f, dict) and is_slack_id(f.get("id"))]


def _message(r: _Reader) -> Event:
    channel_id = r.field(r.event, "channel")
    channel_type = r.event.get("channel_type")
    if channel_type is not None and not isinstance(channel_type, str):
        channel_type = ""  # names no kind of channel that is archived
    try:
        return _message_content(r, channel_id, channel_type)
    except (BadEvent, BadTimestamp) as exc:
        return Unreadable(channel_id=channel_id, channel_type=channel_type, reason=str(exc))


def _message_content(r: _Reader, channel_id: str, channel_type: str | None) -> Event:
    ev = r.event
    if ev.get("event_ts") is not None:
        # A message's time is its own ts, but an event_ts that is present must still be one (docs/slack.md):
        # `"event_ts": true` is refused like any other event's.
        ts_to_us(ev["event_ts"])
    subtype = ev.get("subtype")
    if subtype == "message_changed":
        return _message_changed(r, channel_id, channel_type)
    if ev.get("hidden") and subtype != "message_deleted":
        return HiddenMessage(channel_id=channel_id, channel_type=channel_type, subtype=subtype)
    if subtype == "message_deleted":
        previous = ev.get("previous_message")
        deleted = ev.get("deleted_ts") or (previous.get("ts") if isinstance(previous, dict) else None)
        if not isinstance(deleted, str):
            raise BadEvent("missing field: event.deleted_ts")
        ts = ts_to_us(deleted)
        at = ts_to_us(r.field(ev, "ts")) if isinstance(ev.get("ts"), str) else r.event_us()
        thread = previous.get("thread_ts") if isinstance(previous, dict) else None
        author = previous.get("user") if isinstance(previous, dict) else None
        return MessageDeleted(channel_id=channel_id, channel_type=channel_type, ts=ts, at=max(at, ts),
                              thread_ts=ts_to_us(thread) if isinstance(thread, str) else None,
                              user=author if is_user_id(author) else None)
    message = _new_message(r, channel_id, ev, "event")
    return MessagePosted(
        channel_id=channel_id, channel_type=channel_type, message=message,
        purpose=_str(ev.get("purpose")) if subtype == "channel_purpose" else None,
        topic=_str(ev.get("topic")) if subtype == "channel_topic" else None)


# A message's fields that have columns of their own (messages.py). Everything else Slack sends is the message's
# content, kept whole (attachments, blocks, full file objects, profiles, subtype fields, metadata, ...):
# docs/slack-messages.md. A live event also carries fields of the event, not of the message (`channel`,
# `event_ts`, `channel_type`): left out too.
_COLUMN_FIELDS = frozenset({"type", "ts", "user", "text", "subtype", "bot_id", "username", "thread_ts",
                            "reactions"})
_EVENT_FIELDS = _COLUMN_FIELDS | {"channel", "event_ts", "channel_type"}


def message_content(m: dict[str, Any], *, live_event: bool = False) -> dict[str, Any] | None:
    """What a message carries beyond its columns, as Slack sent it (None when nothing)."""
    left_out = _EVENT_FIELDS if live_event else _COLUMN_FIELDS
    # A column's field sent as null (2015-era exports write "bot_id": null) stays, so it comes back as sent.
    content = {k: v for k, v in m.items() if k not in left_out or (v is None and k != "type")}
    problem = shape_error(content)
    if problem is not None:
        raise BadEvent(f"message {problem}")
    if "files" in content:  # file ids name storage paths and URLs: only Slack-shaped ones are files
        content["files"] = [f for f in content["files"] if is_slack_id(f.get("id"))]
    return content or None


def _files_of(m: dict[str, Any]) -> list[dict] | None:
    """The message's files: the modern `files` list, else the legacy single `file` object (2015-era
    file_share / file_comment / file_mention)."""
    files = m.get("files")
    if isinstance(files, list) and files:
        return slim_files(files) or None
    legacy = m.get("file")
    if isinstance(legacy, dict):
        return slim_files([legacy]) or None
    return None


def _author(m: dict[str, Any]) -> str | None:
    """The message's author: `user`, else a file_comment's commenter (old exports put it only in `comment`)."""
    user = _str(m.get("user"))
    if user is None and m.get("subtype") == "file_comment":
        comment = m.get("comment")
        if isinstance(comment, dict) and is_user_id(comment.get("user")):
            return comment["user"]
    return user


# The ids of people and bots a message names, each checked against Slack's shape (api/slack/codec.py): the
# author becomes a link of the archive pages and a key of the activity and report tables, the others are kept
# with the message. A message naming anything else (`"user": "../../tagging/signout"`) is refused whole, with
# the reason: 400 live (in an archived channel), skipped and reported by an import.
_PEOPLE_FIELDS = (("user", is_user_id, "a Slack user id (U or W, then upper-case letters and digits)"),
                  ("parent_user_id", is_user_id, "a Slack user id (U or W, then upper-case letters and digits)"),
                  ("inviter", is_user_id, "a Slack user id (U or W, then upper-case letters and digits)"),
                  ("bot_id", is_bot_id, "a Slack bot id (B, then upper-case letters and digits)"))


def _check_people(m: dict[str, Any], where: str) -> None:
    for name, valid, shape in _PEOPLE_FIELDS:
        value = m.get(name)
        if value is not None and not valid(value):
            raise BadEvent(f"{where}.{name} is not {shape}: {str(value)[:40]!r}")


def _reaction_users(m: dict[str, Any], where: str) -> None:
    for reaction in m.get("reactions") or ():
        users = reaction.get("users") if isinstance(reaction, dict) else None
        for user in users if isinstance(users, list) else ():
            if not is_user_id(user):
                raise BadEvent(f"{where}.reactions: {str(user)[:40]!r} is not a Slack user id")


def _new_message(r: _Reader, channel_id: str, m: dict, where: str) -> NewMessage:
    msg_ts = r.field(m, "ts", str, where)
    _check_people(m, where)
    thread = m.get("thread_ts")
    return NewMessage(
        team_id=r.team_id, channel_id=channel_id, ts=message_ts_to_us(msg_ts), msg_ts=msg_ts,
        user=_author(m), text=_str(m.get("text")), subtype=_str(m.get("subtype")),
        bot_id=_str(m.get("bot_id")), username=_str(m.get("username")),
        thread_ts=message_ts_to_us(thread) if isinstance(thread, str) else None,
        files=_files_of(m),
        parent_user_id=m.get("parent_user_id"),  # None or a user id (_check_people)
        content=message_content(m, live_event=where == "event"),
    )


def _message_changed(r: _Reader, channel_id: str, channel_type: str | None) -> MessageEdited:
    ev = r.event
    new, prev = _dict(ev.get("message")), _dict(ev.get("previous_message"))
    ts = new.get("ts") if isinstance(new.get("ts"), str) else prev.get("ts")
    if not isinstance(ts, str):
        raise BadEvent("missing field: event.message.ts (and event.previous_message.ts)")
    # A reply's edit may leave thread_ts out of the new message: the previous one still says it.
    thread = new.get("thread_ts") if isinstance(new.get("thread_ts"), str) else prev.get("thread_ts")
    message = _new_message(r, channel_id, {**new, "ts": ts, "thread_ts": thread}, "event.message")
    edited = _dict(new.get("edited"))
    prev_text = _str(prev.get("text"))
    text_changed = message.text is not None and message.text != prev_text
    # A text change is written at its edit's time. Any other change (an unfurl, a reply count) at the event's own:
    # it may still carry the last edit's `edited.ts`, and written at that time it would tie with the edit's own
    # write, each cell kept by value (the edit's content could outsort the unfurl's attachments and win).
    if isinstance(edited.get("ts"), str) and (text_changed or not isinstance(ev.get("ts"), str)):
        at = ts_to_us(edited["ts"])
    elif isinstance(ev.get("ts"), str):
        at = ts_to_us(ev["ts"])
    else:
        at = r.event_us()
    at = max(at, message.ts + 1)  # an edit is never older than the message it edits
    versions: list[tuple[int, str]] = []
    if text_changed:
        versions.append((at, message.text))
        if prev_text is not None:
            prev_edited = _dict(prev.get("edited"))
            prev_at = ts_to_us(prev_edited["ts"]) if isinstance(prev_edited.get("ts"), str) else message.ts
            versions.append((prev_at, prev_text))
    # Only a real text change is an edit; other changes (reply counts, unfurls) rewrite the same text.
    return MessageEdited(channel_id=channel_id, channel_type=channel_type, message=message, at=at,
                         edited_ts=at if versions else None, versions=tuple(versions))


def _reaction(r: _Reader) -> Event:
    ev = r.event
    item = ev.get("item")
    if not isinstance(item, dict):
        raise BadEvent("missing field: event.item")
    if item.get("type", "message") != "message":
        return Ignored(reason="reaction to a non-message item")
    channel_id = r.field(item, "channel", str, "event.item")
    ts = ts_to_us(r.field(item, "ts", str, "event.item"))
    emoji, user = r.field(ev, "reaction"), r.field(ev, "user")
    if not is_user_id(user):  # like a bad time: refused in an archived channel, ignored in a DM
        return Unreadable(channel_id=channel_id, channel_type=None,
                          reason=f"event.user is not a Slack user id: {user[:40]!r}")
    try:
        at = r.event_us()
    except BadTimestamp as exc:
        return Unreadable(channel_id=channel_id, channel_type=None, reason=str(exc))
    added = ev["type"] == "reaction_added"
    item_user = ev.get("item_user")
    return Reaction(channel_id=channel_id, ts=ts, emoji=emoji, user=user, added=added,
                    at=at if added else clearing(at), item_user=item_user if is_user_id(item_user) else None)


# -- channels ---------------------------------------------------------------------------------------------

def _channel_object(r: _Reader) -> tuple[dict, str]:
    ch = r.event.get("channel")
    if not isinstance(ch, dict):
        raise BadEvent("missing field: event.channel (object with id and name)")
    return ch, r.field(ch, "id", str, "event.channel")


def _channel_id(r: _Reader) -> str:
    ch = r.event.get("channel")
    if isinstance(ch, dict):
        ch = ch.get("id")
    if not isinstance(ch, str) or not ch:
        raise BadEvent("missing field: event.channel")
    return ch


def _channel_created(r: _Reader) -> ChannelCreated:
    ch, channel_id = _channel_object(r)
    name = r.field(ch, "name", str, "event.channel")
    created = ch.get("created") * 1_000_000 if _unix_seconds(ch.get("created")) else None
    # Without event_ts the creation time is the event's time (whole seconds: spread by the name).
    at = (seconds_us(ch["created"], name) if created is not None and "event_ts" not in r.event
          else r.event_us(name))
    return ChannelCreated(channel_id=channel_id, at=at, name=name, created_ts=created,
                          creator=_str(ch.get("creator")))


def _channel_rename(r: _Reader) -> ChannelRenamed:
    ch, channel_id = _channel_object(r)
    name = r.field(ch, "name", str, "event.channel")
    return ChannelRenamed(channel_id=channel_id, at=r.event_us(name), name=name)


def _channel_text(r: _Reader) -> ChannelTextSet:
    field = "purpose" if r.event["type"] == "channel_purpose" else "topic"
    value = r.event.get(field)
    if isinstance(value, dict):  # {"value": ..., "creator": ..., "last_set": ...}
        value = value.get("value")
    if not isinstance(value, str):
        raise BadEvent(f"missing field: event.{field}")
    return ChannelTextSet(channel_id=_channel_id(r), at=r.event_us(f"{field}:{value}"), **{field: value})


def _channel_convert(r: _Reader) -> ChannelConverted:
    visibility = "private" if r.event["type"] == "channel_convert_to_private" else "public"
    at = r.event_us()
    return ChannelConverted(channel_id=_channel_id(r), at=at if visibility == "private" else clearing(at),
                            visibility=visibility)


def _channel_archive(r: _Reader) -> ChannelArchived:
    archived = r.event["type"] == "channel_archive"
    at = r.event_us()
    return ChannelArchived(channel_id=_channel_id(r), at=at if archived else clearing(at), archived=archived)


def _channel_deleted(r: _Reader) -> ChannelDeleted:
    return ChannelDeleted(channel_id=_channel_id(r), at=r.event_us())


def _channel_id_changed(r: _Reader) -> ChannelIdChanged:
    old = r.field(r.event, "old_channel_id")
    new = r.field(r.event, "new_channel_id")
    return ChannelIdChanged(old_channel_id=old, new_channel_id=new, at=r.event_us())


def _user_change(r: _Reader) -> UserChanged:
    user = r.event.get("user")
    if not isinstance(user, dict) or not is_user_id(user.get("id")):
        raise BadEvent("missing field: event.user (object with a Slack user id)")
    return UserChanged(user=user, at=r.event_us())


# -- history: messages as conversations.history / replies and export day files give them ------------------

@dataclasses.dataclass(frozen=True)
class HistoryMessage:
    """A message as history shows it: its current state (text after the last edit, current reactions)."""

    message: NewMessage
    edited_ts: int | None  # the last edit's time (never before the message ts); None when never edited
    reactions: frozenset[tuple[str, str]]  # (emoji, user)
    tombstone: bool  # a deleted thread parent that Slack keeps for its replies
    hidden: bool  # a hidden subtype (not shown in the channel, as live ingest leaves it out)
    purpose: str | None = None  # set by a channel_purpose message
    topic: str | None = None  # set by a channel_topic message


def history_message(team_id: str, channel_id: str, m: Any) -> HistoryMessage:
    """Parse one history message; BadEvent with the reason when it cannot be stored (no ts, bad ts, ...)."""
    if not isinstance(m, dict):
        raise BadEvent("message is not a JSON object")
    _check_unicode(m)
    r = _Reader({"team_id": team_id}, m)
    _reaction_users(m, "message")
    try:
        message = _new_message(r, channel_id, m, "message")
        edited = _dict(m.get("edited")).get("ts")
        edited_ts = max(ts_to_us(edited), message.ts + 1) if isinstance(edited, str) else None
    except BadTimestamp as exc:
        raise BadEvent(str(exc)) from None
    reactions: set[tuple[str, str]] = set()
    for reaction in m.get("reactions") or ():
        if isinstance(reaction, dict) and isinstance(reaction.get("name"), str) and reaction["name"]:
            users = reaction.get("users")
            reactions.update((reaction["name"], u) for u in (users if isinstance(users, list) else ()))
    subtype = message.subtype
    return HistoryMessage(
        message=message, edited_ts=edited_ts, reactions=frozenset(reactions),
        tombstone=subtype == "tombstone", hidden=bool(m.get("hidden")) and subtype != "tombstone",
        purpose=_str(m.get("purpose")) if subtype == "channel_purpose" else None,
        topic=_str(m.get("topic")) if subtype == "channel_topic" else None)


_PARSERS: dict[str, Callable[[_Reader], Event]] = {
    "message": _message,
    "reaction_added": _reaction,
    "reaction_removed": _reaction,
    "channel_created": _channel_created,
    "channel_rename": _channel_rename,
    "channel_deleted": _channel_deleted,
    "channel_archive": _channel_archive,
    "channel_unarchive": _channel_archive,
    "channel_id_changed": _channel_id_changed,
    "channel_purpose": _channel_text,
    "channel_topic": _channel_text,
    "channel_convert_to_private": _channel_convert,
    "channel_convert_to_public": _channel_convert,
    "user_change": _user_change,
    "team_join": _user_change,
}
HANDLED_TYPES = sorted(_PARSERS)
