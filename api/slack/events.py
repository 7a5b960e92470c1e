"""Slack Events API: request verification, the channel policy and the dispatch of each typed event.

The path of an event: http.py hands the raw body to `read_request` (decode once, check the signature over
the raw bytes, parse into a typed `Envelope`, payloads.py), then `handle` dispatches the typed event to what
it writes (ingest.py for rows across tables, the owner module for a single table). `handle` is the one ingest
path: the HTTP endpoint, the sample loader and the tests all use it. A payload that cannot be stored raises
`BadEvent` (400); a Cassandra failure propagates, so the endpoint answers 503 and Slack retries (the writes
are idempotent, so the retry completes the record).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, assert_never

import structlog
from slack_sdk.signature import SignatureVerifier

from api.config import Settings
from api.db import Database
from api.erasure import guard
from api.slack import channels, ingest, installations, users
from api.slack.payloads import (
    CHANNEL_POLICY_EVENTS,
    BadEvent,
    ChannelArchived,
    ChannelConverted,
    ChannelCreated,
    ChannelDeleted,
    ChannelIdChanged,
    ChannelRenamed,
    ChannelTextSet,
    Envelope,
    EventCallback,
    HiddenMessage,
    Ignored,
    MessageDeleted,
    MessageEdited,
    MessagePosted,
    RawBody,
    Reaction,
    Unhandled,
    Unreadable,
    UserChanged,
)

log = structlog.get_logger("chronicle.slack")

ARCHIVED_CHANNEL_TYPES = {"channel"}  # public channels; "group" only when it was public before
NEVER_ARCHIVED = {"im", "mpim"}


class BadSignature(Exception):
    """Missing, invalid or stale Slack signature (answered 401)."""


# -- verification -----------------------------------------------------------------------------------------

def read_request(settings: Settings, body: bytes, headers: Mapping[str, str]) -> Envelope:
    """The typed envelope of a signed request: BadSignature (401) unless the signature over the raw bytes is
    valid, then BadEvent (400) for a payload that cannot be stored. The body is decoded once."""
    decoded = RawBody.decode(body)
    verify_request(settings, body, headers, team_id=decoded.claimed_team_id)
    return decoded.parse()


def verify_request(settings: Settings, body: bytes, headers: Mapping[str, str], *, team_id: str | None) -> None:
    """Check X-Slack-Signature over the raw body with the signing secret of workspace `team_id` (else the
    shared one); the timestamp must be within 5 minutes (slack-sdk's SignatureVerifier). Without a team
    (url_verification, or a body that is not JSON) any configured secret may have signed it. A body that is
    not UTF-8 is BadEvent (400) before any secret is tried."""
    timestamp = headers.get("X-Slack-Request-Timestamp")
    signature = headers.get("X-Slack-Signature")
    if not timestamp or not signature:
        raise BadSignature("missing X-Slack-Signature or X-Slack-Request-Timestamp")
    # What slack-sdk's verifier would choke on is refused here, before it: a timestamp int() cannot read
    # ('²' passes isdigit), a signature hmac.compare_digest cannot compare (non-ASCII text raises TypeError),
    # a body that is not UTF-8 (the verifier decodes it: UnicodeDecodeError). Slack's own requests are none.
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
        raise BadSignature("X-Slack-Request-Timestamp is not a Unix time")
    if not signature.isascii() or len(signature) > 200:
        raise BadSignature("X-Slack-Signature is not a Slack signature (v0=<hex>)")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadEvent("body is not UTF-8 (Slack sends UTF-8 JSON)") from None
    if team_id is not None:
        secret = settings.slack_signing_secrets.get(team_id) or settings.slack_signing_secret
        secrets = [secret] if secret else []
    else:
        secrets = [s for s in (settings.slack_signing_secret, *settings.slack_signing_secrets.values()) if s]
    if not secrets:
        raise BadSignature("no signing secret configured for this workspace")
    for secret in secrets:
        if SignatureVerifier(secret).is_valid(body, timestamp, signature):
            return
    raise BadSignature("invalid or stale Slack signature")


# -- dispatch ---------------------------------------------------------------------------------------------

def _log_unknown_once(db: Database, kind: str) -> None:
    logged = db.caches.lru("slack.unknown_event_types_logged", maxsize=1024)
    if kind in logged:
        return
    logged.set(kind, None)
    log.info("slack_event_ignored", event_type=kind, reason="unhandled type (logged once per process)")


def _archived(db: Database, team_id: str, channel_id: str, channel_type: str | None) -> bool:
    """Channel policy: public channels yes; DMs and group DMs never; a private channel only when it was a
    public channel we archived before (then its visibility is recorded as private and we go on)."""
    if channel_type in ARCHIVED_CHANNEL_TYPES:
        return True
    if channel_type in NEVER_ARCHIVED or channel_id.startswith("D"):
        return False
    if channel_type == "group" or channel_type is None:
        if channel_type is None and channel_id.startswith("C"):
            return True  # payloads without channel_type (reactions): C ids are channels, not DMs
        return channels.visibility(db, team_id, channel_id) is not None
    return False


def _of_erased_person(db: Database, team: str, event: Any) -> bool:
    """A message or reaction an erasure took away, delivered again (ingest leaves it out: say so)."""
    if isinstance(event, (MessagePosted, MessageEdited)):
        return ingest.erased(db, event.message)
    if isinstance(event, Reaction):
        return guard.covers(db, ingest.archive_of(team), event.user, event.at, channel=event.channel_id)
    return False


def handle(db: Database, settings: Settings, envelope: Envelope) -> str:
    """Store what an envelope's event implies; returns the outcome ("stored", "ignored: <why>")."""
    if not isinstance(envelope, EventCallback):
        _log_unknown_once(db, f"envelope:{envelope.type}")
        return "ignored: envelope type"
    event, team = envelope.event, envelope.team_id
    if envelope.enterprise_id:
        installations.remember_org(db, team, envelope.enterprise_id)
    if isinstance(event, Unhandled) and event.type in installations.LIFECYCLE_EVENTS:
        return installations.handle_event(db, envelope.raw)  # app_uninstalled / tokens_revoked: tokens off
    if isinstance(event, Unhandled):
        _log_unknown_once(db, event.type)
        return "ignored: event type"
    if isinstance(event, Ignored):
        return f"ignored: {event.reason}"
    if isinstance(event, CHANNEL_POLICY_EVENTS) and not _archived(db, team, event.channel_id, event.channel_type):
        return "ignored: channel not archived"
    if _of_erased_person(db, team, event):
        return "ignored: an erased person's, from before their erasure"
    raw = envelope.raw if settings.slack_keep_raw_events else None
    match event:
        case Unreadable():
            raise BadEvent(event.reason)
        case HiddenMessage():
            _log_unknown_once(db, f"message:{event.subtype}")
            return "ignored: hidden message subtype"
        case MessagePosted(message=msg):
            # original=True keeps the text as first posted on the row itself: the edit history starts with it.
            ingest.store_message(db, msg, write_ts=msg.ts, original=True, raw=raw)
            if event.purpose is not None or event.topic is not None:
                ingest.update_channel(db, team, event.channel_id, msg.ts, purpose=event.purpose, topic=event.topic)
        case MessageEdited(message=msg):
            ingest.store_message(db, msg, write_ts=event.at, edited_ts=event.edited_ts, versions=event.versions,
                                 raw=raw)
        case MessageDeleted():
            ingest.delete_message(db, team, event.channel_id, event.ts, at=event.at, thread_ts=event.thread_ts,
                                  author=event.user)
        case Reaction():
            ingest.react(db, team, event.channel_id, event.ts, event.emoji, event.user, added=event.added,
                         at=event.at, author=event.item_user)
        case ChannelCreated():
            ingest.update_channel(db, team, event.channel_id, event.at, name=event.name, visibility="public",
                                  created_ts=event.created_ts, creator=event.creator, raw=raw)
        case ChannelRenamed():
            ingest.update_channel(db, team, event.channel_id, event.at, name=event.name, raw=raw)
        case ChannelTextSet():
            ingest.update_channel(db, team, event.channel_id, event.at, purpose=event.purpose, topic=event.topic)
        case ChannelConverted():
            ingest.update_channel(db, team, event.channel_id, event.at, visibility=event.visibility, raw=raw)
        case ChannelArchived():
            channels.set_archived(db, team, event.channel_id, event.at, archived=event.archived)
        case ChannelDeleted():
            ingest.delete_channel(db, team, event.channel_id, event.at)
        case ChannelIdChanged():
            ingest.change_channel_id(db, team, event.old_channel_id, event.new_channel_id, event.at, raw=raw)
        case UserChanged():
            try:
                profile = users.Profile.from_slack(team, event.user, observed_at=event.at)
            except ValueError as exc:
                raise BadEvent(str(exc)) from None
            users.store_profile(db, profile, seen_at=event.at, raw=event.user if raw is not None else None)
        case _:
            assert_never(event)
    return "stored"
