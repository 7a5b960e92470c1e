"""HTTP surface of the Slack archive: the signed Events endpoint and the read endpoints."""

from __future__ import annotations

import os
import time
from typing import Any

import structlog
from cassandra import DriverException
from flask import current_app, g, request
from flask_smorest import Blueprint, abort
from marshmallow import Schema, ValidationError, fields, validate

from api.auth import require_workspace
from api.config import Settings
from api.db import get_db
from api.errors import CASSANDRA_UNAVAILABLE
from api.paging import sign_cursor, verify_cursor
from api.slack import channels, events, messages
from api.slack.store import ID_RE
from api.slack.timeutil import is_ts, ts_to_us

log = structlog.get_logger("chronicle.slack")

blp = Blueprint("slack", __name__, description="Slack live archive: Events API ingest and archive reads")

# The path is read once at import (blueprint routes are declared at import time); default /slack/events.
EVENTS_PATH = os.environ.get("CHRONICLE_SLACK_EVENTS_PATH", "/slack/events")
_ID = ID_RE.pattern  # Slack team/channel ids: upper-case letters and digits
_ID_RE = ID_RE


@blp.after_request
def _server_timing(response):
    """Handler time (from the foundation's request start) as Server-Timing: what the benchmarks report."""
    started = g.get("request_started")
    if started is not None:
        response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.2f}"
    return response


def _settings() -> Settings:
    return current_app.config["CHRONICLE_SETTINGS"]


# -- schemas ----------------------------------------------------------------------------------------------

class EventAckSchema(Schema):
    ok = fields.Boolean()
    outcome = fields.String(metadata={"description": "stored | ignored: <why>"})
    challenge = fields.String(metadata={"description": "url_verification only: the challenge echoed back"})


class SlackErrorSchema(Schema):
    code = fields.Integer(required=True)
    status = fields.String(required=True)
    message = fields.String(required=True)
    errors = fields.Dict()


class TsField(fields.String):
    """A Slack timestamp such as 1620000000.000200."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        value = super()._deserialize(value, attr, data, **kwargs)
        if not is_ts(value):
            raise ValidationError("not a Slack timestamp (seconds[.micro], e.g. 1620000000.000200)")
        return value


class PageArgs(Schema):
    limit = fields.Integer(load_default=50, validate=validate.Range(1, 200))
    cursor = fields.String(validate=validate.Length(max=2048),
                           metadata={"description": "next_cursor of the previous page (opaque, signed)"})
    include_deleted = fields.Boolean(load_default=False)


class TimelineArgs(PageArgs):
    before = TsField(metadata={"description": "only messages with ts < before"})
    after = TsField(metadata={"description": "only messages with ts > after"})
    order = fields.String(load_default="desc", validate=validate.OneOf(["desc", "asc"]))


class ThreadArgs(PageArgs):
    pass


class ReactionSchema(Schema):
    name = fields.String(required=True)
    users = fields.List(fields.String(), required=True)
    count = fields.Integer(required=True)


class MessageSchema(Schema):
    ts = fields.String(required=True)
    channel_id = fields.String(required=True)
    user = fields.String()
    text = fields.String()
    subtype = fields.String()
    bot_id = fields.String()
    username = fields.String()
    thread_ts = fields.String()
    edited_ts = fields.String(metadata={"description": "time of the newest edit (updated_ts)"})
    deleted = fields.Boolean(metadata={"description": "present (true) only with include_deleted=true"})
    deleted_ts = fields.String()
    files = fields.List(fields.Dict())
    files_stored = fields.Dict(keys=fields.String(), values=fields.String(),
                               metadata={"description": "file_id -> stored object URI"})
    files_fetch_failed = fields.Boolean()
    files_fetch_error = fields.Dict(keys=fields.String(), values=fields.String())
    reactions = fields.List(fields.Nested(ReactionSchema))


class VersionSchema(Schema):
    ts = fields.String(required=True)
    text = fields.String(allow_none=True)


class MessageWithHistorySchema(MessageSchema):
    history = fields.List(fields.Nested(VersionSchema),
                          metadata={"description": "every version of the text, oldest first (last = current)"})


class PageSchema(Schema):
    messages = fields.List(fields.Nested(MessageSchema), required=True)
    next_cursor = fields.String(allow_none=True)


class ThreadSchema(Schema):
    parent = fields.Nested(MessageSchema, allow_none=True)
    replies = fields.List(fields.Nested(MessageSchema), required=True)
    next_cursor = fields.String(allow_none=True)


class NameSchema(Schema):
    name = fields.String(required=True)
    ts = fields.String(required=True)


class ChannelSchema(Schema):
    team_id = fields.String(required=True)
    channel_id = fields.String(required=True)
    name = fields.String()
    names_history = fields.List(fields.Nested(NameSchema), metadata={"description": "newest first, at most 20"})
    visibility = fields.String()
    archived = fields.Boolean()
    deleted = fields.Boolean()
    purpose = fields.String()
    topic = fields.String()
    created_ts = fields.String()
    creator = fields.String()
    prev_channel_id = fields.String()
    next_channel_id = fields.String()


class IndexEntrySchema(Schema):
    channel_id = fields.String(required=True)
    name = fields.String(required=True, metadata={"description": "current name; deleted_<name> when deleted"})
    visibility = fields.String()
    deleted = fields.Boolean()
    prev_channel_id = fields.String()
    next_channel_id = fields.String()


class IndexSchema(Schema):
    team_id = fields.String(required=True)
    channels = fields.List(fields.Nested(IndexEntrySchema), required=True)


_ERRORS = {400: "bad request", 401: "missing or unknown token", 403: "token not allowed",
           404: "not found", 422: "invalid parameters", 503: "database unavailable"}


def _errors(*codes: int):
    def deco(fn):
        for code in codes:
            fn = blp.alt_response(code, schema=SlackErrorSchema, description=_ERRORS.get(code, ""))(fn)
        return fn
    return deco


# -- events -----------------------------------------------------------------------------------------------

EVENT_BODY_DOC = {
    "requestBody": {
        "required": True,
        "description": "A Slack Events API payload (url_verification or event_callback), signed by Slack. "
                       "The raw bytes are verified before parsing.",
        "content": {"application/json": {"schema": {
            "type": "object", "required": ["type"],
            "properties": {
                "type": {"type": "string", "enum": ["url_verification", "event_callback"]},
                "challenge": {"type": "string"}, "team_id": {"type": "string"},
                "event_id": {"type": "string"}, "event_time": {"type": "integer"},
                "event": {"type": "object", "required": ["type"],
                          "properties": {"type": {"type": "string", "enum": events.HANDLED_TYPES}}},
            }}}},
    },
    "parameters": [
        {"in": "header", "name": "X-Slack-Signature", "required": True, "schema": {"type": "string"}},
        {"in": "header", "name": "X-Slack-Request-Timestamp", "required": True, "schema": {"type": "string"}},
        {"in": "header", "name": "X-Slack-Retry-Num", "required": False, "schema": {"type": "integer"}},
    ],
}


@blp.route(EVENTS_PATH, methods=["POST"])
@blp.doc(**EVENT_BODY_DOC)
@blp.response(200, EventAckSchema, description="stored, or ignored (unhandled type / channel not archived)")
@_errors(400, 401, 503)
@blp.alt_response(413, schema=SlackErrorSchema, description="body larger than CHRONICLE_MAX_BODY_BYTES")
def slack_events():
    """Slack Events API receiver: verify the signature, then store the event (idempotently).

    A url_verification request is answered 200 with `{"challenge": "<the challenge>"}`."""
    settings = _settings()
    body = request.get_data(cache=True)  # raw bytes: the signature covers them exactly
    try:
        events.verify_request(settings, body, request.headers)
    except events.BadSignature as exc:
        abort(401, message=str(exc))
    try:
        envelope = events.parse_body(body)
    except events.BadEvent as exc:
        abort(400, message=str(exc))
    if envelope["type"] == "url_verification":
        return {"challenge": envelope["challenge"]}  # Slack reads only this field
    try:
        outcome = events.handle_envelope(get_db(), settings, envelope)
    except events.BadEvent as exc:
        abort(400, message=str(exc))
    except CASSANDRA_UNAVAILABLE:
        raise  # 503 with Retry-After (api.errors): Slack retries, the idempotent writes complete
    except DriverException as exc:
        log.warning("slack_event_store_failed", event_id=envelope.get("event_id"), error=repr(exc)[:300])
        abort(503, message=f"the event could not be stored ({type(exc).__name__}); retry")
    if request.headers.get("X-Slack-Retry-Num"):
        log.info("slack_event_retry", event_id=envelope["event_id"], retry=request.headers["X-Slack-Retry-Num"],
                 reason=request.headers.get("X-Slack-Retry-Reason"), outcome=outcome)
    return {"ok": True, "outcome": outcome}


# -- reads ------------------------------------------------------------------------------------------------

def _check_ids(*values: str) -> None:
    for value in values:
        if not _ID_RE.match(value):
            abort(404, message=f"no such id: {value[:80]!r}")


def _channel_chain(team_id: str, channel_id: str, *, full: bool = False) -> list[Any]:
    """Authorise the workspace, then the channel (private-converted channels need the private scope)."""
    settings = _settings()
    _check_ids(team_id, channel_id)
    require_workspace(settings, team_id)
    chain = channels.id_chain(get_db(), team_id, channel_id, full=full)
    if channels.is_private(chain):
        require_workspace(settings, team_id, private=True)
    return chain


@blp.route("/slack/teams/<team_id>/channels", methods=["GET"])
@blp.response(200, IndexSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 503)
def channel_index(team_id: str):
    """The workspace's channel index: channel id -> current name (deleted channels as deleted_<name>)."""
    _check_ids(team_id)
    grant = require_workspace(_settings(), team_id)
    entries = channels.index(get_db(), team_id)
    if not grant.private:  # names of private-converted channels need the private scope
        entries = [e for e in entries if e.get("visibility") != "private"]
    return {"team_id": team_id, "channels": entries}


@blp.route("/slack/teams/<team_id>/channels/<channel_id>", methods=["GET"])
@blp.response(200, ChannelSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 503)
def channel_metadata(team_id: str, channel_id: str):
    """A channel's metadata: name, names history (newest first, 20), flags, visibility, topic, purpose,
    previous id (after channel_id_changed, fields not set on the new id come from the previous one)."""
    chain = _channel_chain(team_id, channel_id, full=True)
    meta = channels.metadata(get_db(), team_id, channel_id, chain)
    if meta is None:
        abort(404, message=f"channel {channel_id} is not known in workspace {team_id}")
    return meta


@blp.route("/slack/teams/<team_id>/channels/<channel_id>/messages", methods=["GET"])
@blp.arguments(TimelineArgs, location="query", as_kwargs=True)
@blp.response(200, PageSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(400, 401, 403, 404, 503)
def channel_timeline(team_id: str, channel_id: str, limit: int, include_deleted: bool, order: str,
                     cursor: str | None = None, before: str | None = None, after: str | None = None):
    """A channel's messages (thread replies included), newest first unless order=asc; includes the messages
    stored under the channel's previous ids."""
    settings = _settings()
    _check_ids(team_id, channel_id)
    require_workspace(settings, team_id)
    upper = ts_to_us(before) if before else messages.MAX_US
    lower = ts_to_us(after) if after else messages.MIN_US
    scope = f"timeline|{team_id}|{channel_id}|{order}|{include_deleted}|{before}|{after}"
    if cursor:
        position = verify_cursor(cursor, settings.cursor_secret, scope).get("p")
        if not isinstance(position, int):
            abort(400, message="invalid cursor")
        if order == "asc":
            lower = max(lower, position)
        else:
            upper = min(upper, position)
    db = get_db()
    # The channel's day listing is read while the channel row (visibility, previous ids) is: one round trip.
    days = messages.start_day_listing(db, team_id, channel_id, upper=upper, lower=lower, ascending=order == "asc")
    chain = channels.id_chain(db, team_id, channel_id, full=False)
    if channels.is_private(chain):
        require_workspace(settings, team_id, private=True)
    page, nxt = messages.timeline(db, team_id, channels.chain_ids(chain, channel_id), limit=limit,
                                  upper=upper, lower=lower, ascending=order == "asc",
                                  include_deleted=include_deleted, prefetched={channel_id: days})
    body = {"messages": page,
            "next_cursor": sign_cursor({"p": nxt}, settings.cursor_secret, scope) if nxt is not None else None}
    # Already in the documented shape (row_to_message): skip re-serialising 50 messages through marshmallow.
    return current_app.json.response(body)


@blp.route("/slack/teams/<team_id>/channels/<channel_id>/messages/<ts>", methods=["GET"])
@blp.arguments(Schema.from_dict({"include_deleted": fields.Boolean(load_default=False)},
                                name="MessageArgs")(), location="query", as_kwargs=True)
@blp.response(200, MessageWithHistorySchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 503)
def get_message(team_id: str, channel_id: str, ts: str, include_deleted: bool):
    """One message with its edit history (every version of the text with its time, oldest first)."""
    chain = _channel_chain(team_id, channel_id)
    if not is_ts(ts):
        abort(404, message=f"{ts[:40]!r} is not a Slack message timestamp")
    db = get_db()
    row = messages.get_message_row(db, team_id, channels.chain_ids(chain, channel_id), ts_to_us(ts))
    item = messages.row_to_message(row, include_deleted=include_deleted) if row is not None else None
    if item is None:
        abort(404, message=f"no message {ts} in channel {channel_id}")
    item["history"] = messages.versions(db, row)
    return item


@blp.route("/slack/teams/<team_id>/channels/<channel_id>/threads/<thread_ts>", methods=["GET"])
@blp.arguments(ThreadArgs, location="query", as_kwargs=True)
@blp.response(200, ThreadSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(400, 401, 403, 404, 503)
def get_thread(team_id: str, channel_id: str, thread_ts: str, limit: int, include_deleted: bool,
               cursor: str | None = None):
    """A thread: the parent (first page only), then its replies oldest first."""
    chain = _channel_chain(team_id, channel_id)
    if not is_ts(thread_ts):
        abort(404, message=f"{thread_ts[:40]!r} is not a Slack message timestamp")
    db = get_db()
    ids = channels.chain_ids(chain, channel_id)
    parent_us = ts_to_us(thread_ts)
    scope = f"thread|{team_id}|{channel_id}|{thread_ts}|{include_deleted}"
    after = parent_us
    parent = None
    if cursor:
        position = verify_cursor(cursor, _settings().cursor_secret, scope).get("p")
        if not isinstance(position, int):
            abort(400, message="invalid cursor")
        after = max(after, position)
    else:
        row = messages.get_message_row(db, team_id, ids, parent_us)
        parent = messages.row_to_message(row, include_deleted=include_deleted) if row is not None else None
    replies, nxt = messages.thread(db, team_id, ids, parent_us, limit=limit, after=after,
                                   include_deleted=include_deleted)
    if parent is None and not replies and not cursor:
        abort(404, message=f"no thread {thread_ts} in channel {channel_id}")
    return {"parent": parent, "replies": replies,
            "next_cursor": sign_cursor({"p": nxt}, _settings().cursor_secret, scope) if nxt is not None else None}
