"""Slack Events API: request verification, envelope validation and the dispatch of each event type.

`handle_envelope` is the one ingest path: the HTTP endpoint, the sample loader and the tests all use it.
Handlers raise `BadEvent` (400) for a payload missing what they need; a Cassandra failure propagates, so
the endpoint answers 503 and Slack retries (the writes are idempotent, so the retry completes the record).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from slack_sdk.signature import SignatureVerifier

from api.config import Settings
from api.db import Database
from api.slack import channels, messages
from api.slack.messages import NewMessage
from api.slack.store import ID_RE
from api.slack.timeutil import BadTimestamp, ts_to_us

log = structlog.get_logger("chronicle.slack")

ARCHIVED_CHANNEL_TYPES = {"channel"}  # public channels; "group" only when it was public before
NEVER_ARCHIVED = {"im", "mpim"}


class BadEvent(ValueError):
    """A payload that cannot be stored as sent (answered 400 with the reason)."""


class BadSignature(Exception):
    """Missing, invalid or stale Slack signature (answered 401)."""


# -- verification -----------------------------------------------------------------------------------------

def verify_request(settings: Settings, body: bytes, headers: Mapping[str, str]) -> None:
    """Check X-Slack-Signature over the raw body with the workspace's signing secret (else the shared one);
    the timestamp must be within 5 minutes (slack-sdk's SignatureVerifier)."""
    timestamp = headers.get("X-Slack-Request-Timestamp")
    signature = headers.get("X-Slack-Signature")
    if not timestamp or not signature:
        raise BadSignature("missing X-Slack-Signature or X-Slack-Request-Timestamp")
    if not timestamp.isdigit():
        raise BadSignature("X-Slack-Request-Timestamp is not a Unix time")
    team_id = _team_of(body)
    if team_id is not None:
        secret = settings.slack_signing_secrets.get(team_id) or settings.slack_signing_secret
        secrets = [secret] if secret else []
    else:  # url_verification (no team) or unparsable body: any configured secret may have signed it
        secrets = [s for s in (settings.slack_signing_secret, *settings.slack_signing_secrets.values()) if s]
    if not secrets:
        raise BadSignature("no signing secret configured for this workspace")
    for secret in secrets:
        if SignatureVerifier(secret).is_valid(body, timestamp, signature):
            return
    raise BadSignature("invalid or stale Slack signature")


def _team_of(body: bytes) -> str | None:
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    team = parsed.get("team_id") if isinstance(parsed, dict) else None
    return team if isinstance(team, str) and team else None


def _unix_seconds(value: Any) -> bool:
    """An integer Unix time that fits the microsecond bigint columns (rejects bools and absurd values)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**11


def parse_body(body: bytes) -> dict[str, Any]:
    """The JSON envelope, validated enough to dispatch; BadEvent with the reason otherwise."""
    try:
        envelope = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadEvent(f"body is not JSON: {exc}") from None
    if not isinstance(envelope, dict):
        raise BadEvent("body must be a JSON object")
    kind = envelope.get("type")
    if not isinstance(kind, str):
        raise BadEvent("missing field: type")
    if kind == "url_verification":
        if not isinstance(envelope.get("challenge"), str):
            raise BadEvent("url_verification without a string challenge")
    elif kind == "event_callback":
        for field in ("team_id", "event_id"):
            if not isinstance(envelope.get(field), str) or not envelope[field]:
                raise BadEvent(f"missing field: {field}")
        if not _unix_seconds(envelope.get("event_time")):
            raise BadEvent("missing field: event_time (integer Unix time)")
        event = envelope.get("event")
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise BadEvent("missing field: event.type")
        _check_ids(envelope, event)
    try:  # JSON escapes can carry unpaired surrogates, which no text column can store
        json.dumps(envelope, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise BadEvent("body holds text that is not valid Unicode (an unpaired surrogate escape)") from None
    return envelope


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
        if value is not None and not (isinstance(value, str) and ID_RE.match(value)):
            raise BadEvent(f"{where} is not a Slack id (upper-case letters and digits, at most 64)")


# -- dispatch ---------------------------------------------------------------------------------------------

_logged_unknown: set[str] = set()
_logged_lock = threading.Lock()


def _log_unknown_once(kind: str) -> None:
    with _logged_lock:
        if kind in _logged_unknown:
            return
        _logged_unknown.add(kind)
    log.info("slack_event_ignored", event_type=kind, reason="unhandled type (logged once per process)")


def handle_envelope(db: Database, settings: Settings, envelope: dict[str, Any]) -> str:
    """Store what an event_callback envelope implies; returns the outcome ("stored", "ignored: ...")."""
    if envelope.get("type") != "event_callback":
        _log_unknown_once(f"envelope:{envelope.get('type')}")
        return "ignored: envelope type"
    event = envelope["event"]
    handler = _HANDLERS.get(event["type"])
    if handler is None:
        _log_unknown_once(event["type"])
        return "ignored: event type"
    ctx = _Ctx(db, settings, envelope["team_id"], envelope, event)
    try:
        return handler(ctx)
    except BadTimestamp as exc:
        raise BadEvent(str(exc)) from None


class _Ctx:
    def __init__(self, db: Database, settings: Settings, team_id: str, envelope: dict, event: dict) -> None:
        self.db, self.settings, self.team_id, self.envelope, self.event = db, settings, team_id, envelope, event

    def raw(self) -> Any:
        return self.envelope if self.settings.slack_keep_raw_events else None

    def event_us(self) -> int:
        """The event's own time: event_ts when present (µs precision), else the envelope's event_time."""
        ets = self.event.get("event_ts")
        if isinstance(ets, str | int | float) and not isinstance(ets, bool):
            return ts_to_us(ets)
        return self.envelope["event_time"] * 1_000_000

    def field(self, obj: dict, name: str, kind: type | tuple = str, where: str = "event") -> Any:
        value = obj.get(name)
        if not isinstance(value, kind) or value == "":
            raise BadEvent(f"missing field: {where}.{name}")
        return value


def _archived(ctx: _Ctx, channel_id: str, channel_type: str | None) -> bool:
    """Channel policy: public channels yes; DMs and group DMs never; a private channel only when it was a
    public channel we archived before (then its visibility is recorded as private and we go on)."""
    if channel_type in ARCHIVED_CHANNEL_TYPES:
        return True
    if channel_type in NEVER_ARCHIVED or channel_id.startswith("D"):
        return False
    if channel_type == "group" or channel_type is None:
        if channel_type is None and channel_id.startswith("C"):
            return True  # payloads without channel_type (reactions): C ids are channels, not DMs
        return channels.visibility(ctx.db, ctx.team_id, channel_id) is not None
    return False


def _new_message(ctx: _Ctx, channel_id: str, m: dict, where: str) -> NewMessage:
    msg_ts = ctx.field(m, "ts", str, where)
    thread = m.get("thread_ts")
    files = m.get("files") if isinstance(m.get("files"), list) else None
    return NewMessage(
        team_id=ctx.team_id, channel_id=channel_id, ts=ts_to_us(msg_ts), msg_ts=msg_ts,
        user=m.get("user") if isinstance(m.get("user"), str) else None,
        text=m.get("text") if isinstance(m.get("text"), str) else None,
        subtype=m.get("subtype") if isinstance(m.get("subtype"), str) else None,
        bot_id=m.get("bot_id") if isinstance(m.get("bot_id"), str) else None,
        username=m.get("username") if isinstance(m.get("username"), str) else None,
        thread_ts=ts_to_us(thread) if isinstance(thread, str) else None,
        files=messages.slim_files(files) if files else None,
    )


def on_message(ctx: _Ctx) -> str:
    ev = ctx.event
    channel_id = ctx.field(ev, "channel")
    subtype = ev.get("subtype")
    if not _archived(ctx, channel_id, ev.get("channel_type")):
        return "ignored: channel not archived"
    if subtype == "message_changed":
        return _on_changed(ctx, channel_id)
    if ev.get("hidden") and subtype != "message_deleted":
        # Hidden bookkeeping events (e.g. message_replied) are not messages of the channel.
        _log_unknown_once(f"message:{subtype}")
        return "ignored: hidden message subtype"
    if subtype == "message_deleted":
        previous = ev.get("previous_message")
        deleted = ev.get("deleted_ts") or (previous.get("ts") if isinstance(previous, dict) else None)
        if not isinstance(deleted, str):
            raise BadEvent("missing field: event.deleted_ts")
        ts = ts_to_us(deleted)
        at = ts_to_us(ctx.field(ev, "ts")) if isinstance(ev.get("ts"), str) else ctx.event_us()
        messages.mark_deleted(ctx.db, ctx.team_id, channel_id, ts, deleted_at=max(at, ts))
        return "stored"
    msg = _new_message(ctx, channel_id, ev, "event")
    # original=True keeps the text as first posted on the row itself: the edit history starts with it.
    messages.write_message(ctx.db, msg, write_ts=msg.ts, original=True, raw=ctx.raw())
    if subtype in ("channel_purpose", "channel_topic"):
        field = "purpose" if subtype == "channel_purpose" else "topic"
        value = ev.get(field)
        if isinstance(value, str):
            channels.update(ctx.db, ctx.team_id, channel_id, msg.ts, **{field: value})
    return "stored"


def _on_changed(ctx: _Ctx, channel_id: str) -> str:
    ev = ctx.event
    new = ev.get("message") if isinstance(ev.get("message"), dict) else {}
    prev = ev.get("previous_message") if isinstance(ev.get("previous_message"), dict) else {}
    ts = new.get("ts") if isinstance(new.get("ts"), str) else prev.get("ts")
    if not isinstance(ts, str):
        raise BadEvent("missing field: event.message.ts (and event.previous_message.ts)")
    msg = _new_message(ctx, channel_id, {**new, "ts": ts}, "event.message")
    if msg.thread_ts is None and isinstance(prev.get("thread_ts"), str):
        msg.thread_ts = ts_to_us(prev["thread_ts"])
    edited = new.get("edited") if isinstance(new.get("edited"), dict) else {}
    if isinstance(edited.get("ts"), str):
        at = ts_to_us(edited["ts"])
    elif isinstance(ev.get("ts"), str):
        at = ts_to_us(ev["ts"])
    else:
        at = ctx.event_us()
    at = max(at, msg.ts + 1)  # an edit is never older than the message it edits
    versions: list[tuple[int, str]] = []
    prev_text = prev.get("text") if isinstance(prev.get("text"), str) else None
    if msg.text is not None and msg.text != prev_text:
        versions.append((at, msg.text))
        if prev_text is not None:
            prev_edited = prev.get("edited") if isinstance(prev.get("edited"), dict) else {}
            prev_at = ts_to_us(prev_edited["ts"]) if isinstance(prev_edited.get("ts"), str) else msg.ts
            versions.append((prev_at, prev_text))
    # Only a real text change is an edit; other changes (reply counts, unfurls) rewrite the same text.
    edited_ts = at if versions else None
    messages.write_message(ctx.db, msg, write_ts=at, edited_ts=edited_ts, version_text=versions,
                           raw=ctx.raw())
    return "stored"


def on_reaction(ctx: _Ctx) -> str:
    ev = ctx.event
    item = ev.get("item")
    if not isinstance(item, dict):
        raise BadEvent("missing field: event.item")
    if item.get("type", "message") != "message":
        return "ignored: reaction to a non-message item"
    channel_id = ctx.field(item, "channel", str, "event.item")
    ts = ts_to_us(ctx.field(item, "ts", str, "event.item"))
    emoji, user = ctx.field(ev, "reaction"), ctx.field(ev, "user")
    if not _archived(ctx, channel_id, None):
        return "ignored: channel not archived"
    messages.set_reaction(ctx.db, ctx.team_id, channel_id, ts, emoji, user,
                          added=ev["type"] == "reaction_added", at=ctx.event_us())
    return "stored"


def _channel_obj(ctx: _Ctx) -> dict:
    ch = ctx.event.get("channel")
    if not isinstance(ch, dict):
        raise BadEvent("missing field: event.channel (object with id and name)")
    ctx.field(ch, "id", str, "event.channel")
    return ch


def _channel_time(ctx: _Ctx, ch: dict) -> int:
    if "event_ts" in ctx.event:
        return ctx.event_us()
    created = ch.get("created")
    if _unix_seconds(created):
        return created * 1_000_000
    return ctx.event_us()


def on_channel_created(ctx: _Ctx) -> str:
    ch = _channel_obj(ctx)
    name = ctx.field(ch, "name", str, "event.channel")
    created = ch.get("created") if _unix_seconds(ch.get("created")) else None
    at = _channel_time(ctx, ch)
    channels.update(ctx.db, ctx.team_id, ch["id"], at, name=name, visibility="public",
                    created_ts=created * 1_000_000 if created is not None else None,
                    creator=ch.get("creator") if isinstance(ch.get("creator"), str) else None, raw=ctx.raw())
    return "stored"


def on_channel_rename(ctx: _Ctx) -> str:
    ch = _channel_obj(ctx)
    name = ctx.field(ch, "name", str, "event.channel")
    channels.update(ctx.db, ctx.team_id, ch["id"], ctx.event_us(), name=name, raw=ctx.raw())
    return "stored"


def _channel_id(ctx: _Ctx) -> str:
    ch = ctx.event.get("channel")
    if isinstance(ch, dict):
        ch = ch.get("id")
    if not isinstance(ch, str) or not ch:
        raise BadEvent("missing field: event.channel")
    return ch


def on_channel_deleted(ctx: _Ctx) -> str:
    channels.set_deleted(ctx.db, ctx.team_id, _channel_id(ctx), ctx.event_us())
    return "stored"


def on_channel_archive(ctx: _Ctx) -> str:
    channels.set_archived(ctx.db, ctx.team_id, _channel_id(ctx), ctx.event_us(),
                          archived=ctx.event["type"] == "channel_archive")
    return "stored"


def on_channel_id_changed(ctx: _Ctx) -> str:
    old = ctx.field(ctx.event, "old_channel_id")
    new = ctx.field(ctx.event, "new_channel_id")
    at = ctx.event_us()
    # Old id first: the new row (what readers start from) is complete once it exists.
    channels.update(ctx.db, ctx.team_id, old, at, next_channel_id=new)
    channels.update(ctx.db, ctx.team_id, new, at, prev_channel_id=old, raw=ctx.raw())
    return "stored"


def on_channel_text(ctx: _Ctx) -> str:
    field = "purpose" if ctx.event["type"] == "channel_purpose" else "topic"
    value = ctx.event.get(field)
    if isinstance(value, dict):  # {"value": ..., "creator": ..., "last_set": ...}
        value = value.get("value")
    if not isinstance(value, str):
        raise BadEvent(f"missing field: event.{field}")
    channels.update(ctx.db, ctx.team_id, _channel_id(ctx), ctx.event_us(), **{field: value})
    return "stored"


def on_channel_convert(ctx: _Ctx) -> str:
    vis = "private" if ctx.event["type"] == "channel_convert_to_private" else "public"
    channels.update(ctx.db, ctx.team_id, _channel_id(ctx), ctx.event_us(), visibility=vis, raw=ctx.raw())
    return "stored"


_HANDLERS: dict[str, Callable[[_Ctx], str]] = {
    "message": on_message,
    "reaction_added": on_reaction,
    "reaction_removed": on_reaction,
    "channel_created": on_channel_created,
    "channel_rename": on_channel_rename,
    "channel_deleted": on_channel_deleted,
    "channel_archive": on_channel_archive,
    "channel_unarchive": on_channel_archive,
    "channel_id_changed": on_channel_id_changed,
    "channel_purpose": on_channel_text,
    "channel_topic": on_channel_text,
    "channel_convert_to_private": on_channel_convert,
    "channel_convert_to_public": on_channel_convert,
}
HANDLED_TYPES = sorted(_HANDLERS)
