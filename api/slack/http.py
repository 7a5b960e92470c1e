"""HTTP surface of the Slack archive: the signed Events endpoint and the read endpoints (schemas: schemas.py).

`blueprints()` gives an app its Slack blueprints: the read routes, and the Events receiver registered at the
app's own `Settings.slack_events_path` (CHRONICLE_SLACK_EVENTS_PATH, default /slack/events).
"""

from __future__ import annotations

from typing import Any

import structlog
from cassandra import DriverException
from flask import current_app, request
from flask_smorest import Blueprint, abort

from api import conditional
from api.auth import require_workspace
from api.config import Settings
from api.context import get_db
from api.db import reads_own_writes
from api.errors import CASSANDRA_UNAVAILABLE
from api.paging import BAD_POSITION
from api.slack import channels, events, listings, messages, search, users, versions
from api.slack.codec import is_slack_id
from api.slack.file_http import download_links
from api.slack.payloads import BadEvent, UrlVerification
from api.slack.schemas import (
    EVENT_REQUEST_DOC,
    ChannelSchema,
    EventAckSchema,
    IndexArgs,
    IndexSchema,
    MessageArgs,
    MessageWithHistorySchema,
    PageSchema,
    SearchArgs,
    SearchSchema,
    SlackErrorSchema,
    ThreadArgs,
    ThreadSchema,
    TimelineArgs,
    UsersArgs,
    UserSchema,
    UsersSchema,
    error_responses,
    path_parameters,
)
from api.slack.timeutil import is_ts, ts_to_us

log = structlog.get_logger("chronicle.slack")

blp = Blueprint("slack", __name__, description="Slack live archive: archive reads")


class EventsBlueprint(Blueprint):
    """The Events API receiver. Its path is the app's setting, so the route is added when the blueprint is
    registered on an app (one new instance per app: `blueprints()`), and the OpenAPI document shows it there.
    """

    def __init__(self) -> None:
        super().__init__("slack_events", __name__, description="Slack live archive: Events API ingest")

    def register(self, app: Any, options: dict[str, Any]) -> None:
        settings: Settings = app.config["CHRONICLE_SETTINGS"]
        self.add_url_rule(settings.slack_events_path, view_func=slack_events, methods=["POST"])
        super().register(app, options)


def blueprints() -> list[Blueprint]:
    """The Slack blueprints for one app."""
    from api.slack.file_http import blp as files_blp
    from api.slack.reports.http import blp as reports_blp

    return [EventsBlueprint(), blp, files_blp, reports_blp]


def _settings() -> Settings:
    return current_app.config["CHRONICLE_SETTINGS"]


_ERRORS = {400: "bad request", 401: "missing or unknown token", 403: "token not allowed",
           404: "not found", 422: "invalid parameters", 503: "database unavailable"}
_BAD_CURSOR = BAD_POSITION  # the 400 the OpenAPI document names (a BadPosition's reason)


_errors = error_responses(blp, _ERRORS)


# -- events -----------------------------------------------------------------------------------------------

@blp.doc(**EVENT_REQUEST_DOC)
@blp.response(200, EventAckSchema, description="stored, or ignored (unhandled type / channel not archived)")
@_errors(400, 401, 503, e400="malformed event", e401="missing, invalid or stale Slack signature")
@blp.alt_response(413, schema=SlackErrorSchema, description="body larger than CHRONICLE_MAX_BODY_BYTES")
def slack_events():
    """Slack Events API receiver: verify the signature, then store the event (idempotently).

    A url_verification request is answered 200 with `{"challenge": "<the challenge>"}`."""
    settings = _settings()
    body = request.get_data(cache=True)  # raw bytes: the signature covers them exactly
    try:
        envelope = events.read_request(settings, body, request.headers)
    except events.BadSignature as exc:
        abort(401, message=str(exc))
    except BadEvent as exc:
        abort(400, message=str(exc))
    if isinstance(envelope, UrlVerification):
        return {"challenge": envelope.challenge}  # Slack reads only this field
    event_id = getattr(envelope, "event_id", None)
    try:
        outcome = events.handle(get_db(), settings, envelope)
    except BadEvent as exc:
        abort(400, message=str(exc))
    except CASSANDRA_UNAVAILABLE:
        raise  # 503 with Retry-After (api.errors): Slack retries, the idempotent writes complete
    except DriverException as exc:
        log.warning("slack_event_store_failed", event_id=event_id, error=repr(exc)[:300])
        abort(503, message=f"the event could not be stored ({type(exc).__name__}); retry")
    if request.headers.get("X-Slack-Retry-Num"):
        log.info("slack_event_retry", event_id=event_id, retry=request.headers["X-Slack-Retry-Num"],
                 reason=request.headers.get("X-Slack-Retry-Reason"), outcome=outcome)
    return {"ok": True, "outcome": outcome}


# -- reads ------------------------------------------------------------------------------------------------

def _check_ids(*values: str) -> None:
    for value in values:
        if not is_slack_id(value):
            abort(404, message=f"no such id: {value[:80]!r}")


def _check_ts(value: str) -> int:
    if not is_ts(value):
        abort(404, message=f"{value[:40]!r} is not a Slack message timestamp")
    return ts_to_us(value)


# What each listing's cursors are bound to, shared with the archive pages (api/slack/listings.py): a cursor of one
# pages the other. Named here too for the tests and tools that build cursors of these routes.
index_scope, timeline_scope = listings.index_scope, listings.timeline_scope
thread_scope, users_scope = listings.thread_scope, listings.users_scope

# A bad cursor (BadCursor, BadPosition) or a missing thread (NotFound) is raised by the listings and answered by
# api/errors.py's one handler: 400 / 404 with the reason.


@blp.route("/slack/teams/<team_id>/channels", methods=["GET"],
           parameters=[*path_parameters("team_id"), conditional.IF_NONE_MATCH])
@blp.arguments(IndexArgs(), location="query", as_kwargs=True)
@blp.response(200, IndexSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(400, 401, 403, 404, 503, e400=_BAD_CURSOR)
@blp.alt_response(304, description=conditional.NOT_MODIFIED)
def channel_index(team_id: str, limit: int, include_deleted: bool, cursor: str | None = None):
    """The workspace's channel index, in channel id order, a page at a time (`limit`, `next_cursor`): channel id
    -> current name. Deleted channels only with include_deleted=true (as deleted_<name>)."""
    _check_ids(team_id)
    grant = require_workspace(_settings(), team_id)
    # Names of private-converted channels need the private scope: the scope is part of the listing.
    scope = index_scope(team_id, include_deleted, grant.private)
    secret = _settings().cursor_secret
    after = listings.index_position(cursor, secret, scope) if cursor else ""
    db = get_db()
    tag = conditional.etag(versions.read(db, team_id, [versions.CHANNELS]), grant.private)
    if (unchanged := conditional.not_modified(tag)) is not None:
        return unchanged
    entries, nxt = channels.index_page(db, team_id, limit=limit, after=after,
                                       include_deleted=include_deleted, include_private=grant.private)
    return ({"team_id": team_id, "channels": entries,
             "next_cursor": listings.sign_index_position(nxt, secret, scope)}, 200, conditional.headers(tag))


@blp.route("/slack/teams/<team_id>/channels/<channel_id>", methods=["GET"],
           parameters=[*path_parameters("team_id", "channel_id"), conditional.IF_NONE_MATCH])
@blp.response(200, ChannelSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 503)
@blp.alt_response(304, description=conditional.NOT_MODIFIED)
def channel_metadata(team_id: str, channel_id: str):
    """A channel's metadata: name, names history (newest first, 20), flags, visibility, topic, purpose,
    previous id (after channel_id_changed, fields not set on the new id come from the previous one)."""
    _check_ids(team_id, channel_id)
    require_workspace(_settings(), team_id)
    db = get_db()
    _ids, tag = _channel_version(db, team_id, channel_id)
    if (unchanged := conditional.not_modified(tag)) is not None:
        return unchanged
    meta = channels.metadata(db, team_id, channel_id, channels.id_chain(db, team_id, channel_id, full=True))
    if meta is None:
        abort(404, message=f"channel {channel_id} is not known in workspace {team_id}")
    return meta, 200, conditional.headers(tag)


@blp.route("/slack/teams/<team_id>/channels/<channel_id>/messages", methods=["GET"],
           parameters=[*path_parameters("team_id", "channel_id"), conditional.IF_NONE_MATCH])
@blp.arguments(TimelineArgs(), location="query", as_kwargs=True)
@blp.response(200, PageSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(400, 401, 403, 404, 503, e400=_BAD_CURSOR)
@blp.alt_response(304, description=conditional.NOT_MODIFIED)
def channel_timeline(team_id: str, channel_id: str, limit: int, include_deleted: bool, order: str,
                     cursor: str | None = None, before: str | None = None, after: str | None = None):
    """A channel's messages (thread replies included), newest first unless order=asc; includes the messages
    stored under the channel's previous ids."""
    settings = _settings()
    _check_ids(team_id, channel_id)
    require_workspace(settings, team_id)
    upper = ts_to_us(before) if before else messages.MAX_US
    lower = ts_to_us(after) if after else messages.MIN_US
    scope = timeline_scope(team_id, channel_id, order, include_deleted, before, after)
    if cursor:
        position = listings.ts_position(cursor, settings.cursor_secret, scope)
        if order == "asc":
            lower = max(lower, position)
        else:
            upper = min(upper, position)
    db = get_db()
    ids, tag = _channel_version(db, team_id, channel_id)
    if (ready := conditional.answered(db, tag)) is not None:
        return ready
    days = messages.start_day_listing(db, team_id, channel_id, upper=upper, lower=lower, ascending=order == "asc")
    page, nxt = messages.timeline(db, team_id, ids, limit=limit, upper=upper, lower=lower,
                                  ascending=order == "asc", include_deleted=include_deleted,
                                  prefetched={channel_id: days})
    body = {"messages": [download_links(m.to_json(), team_id, channel_id) for m in page],
            "next_cursor": listings.sign_ts_position(nxt, settings.cursor_secret, scope)}
    # Already in the documented shape (Message.to_json): skip re-serialising 50 messages through marshmallow.
    return conditional.keep_page(db, tag, current_app.json.response(body))


def _channel_version(db: Any, team_id: str, channel_id: str) -> tuple[list[str], str]:
    """The channel's ids (newest first) and the ETag of a page over them, after the access check. The versions
    are read before any row of the page (api/slack/versions.py), the channel's row (visibility, previous ids)
    only when they moved since this process last read it."""
    seen = versions.read(db, team_id, [channel_id])
    chain = channels.id_chain_at(db, team_id, channel_id, seen)
    if channels.is_private(chain):
        require_workspace(_settings(), team_id, private=True)
    ids = channels.chain_ids(chain, channel_id)
    if len(ids) > 1:  # messages under the channel's previous ids are on its pages too
        seen = versions.read(db, team_id, ids)
    return ids, conditional.etag(ids, seen)


@blp.route("/slack/teams/<team_id>/channels/<channel_id>/messages/<ts>", methods=["GET"],
           parameters=[*path_parameters("team_id", "channel_id", "ts"), conditional.IF_NONE_MATCH])
@blp.arguments(MessageArgs(), location="query", as_kwargs=True)
@blp.response(200, MessageWithHistorySchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 503)
@reads_own_writes
@blp.alt_response(304, description=conditional.NOT_MODIFIED)
def get_message(team_id: str, channel_id: str, ts: str, include_deleted: bool):
    """One message with its edit history (every version of the text with its time, oldest first)."""
    _check_ids(team_id, channel_id)
    require_workspace(_settings(), team_id)
    message_ts = _check_ts(ts)
    db = get_db()
    ids, tag = _channel_version(db, team_id, channel_id)
    if (ready := conditional.answered(db, tag)) is not None:
        return ready
    found = messages.find_with_history(db, team_id, ids, message_ts, include_deleted=include_deleted)
    if found is None:
        abort(404, message=f"no message {ts} in channel {channel_id}")
    message, history = found
    # Returned as built: Slack's own fields pass through whole (marshmallow would keep only declared ones).
    return conditional.keep_page(db, tag, current_app.json.response(
        {**download_links(message.to_json(), team_id, channel_id), "history": history}))


@blp.route("/slack/teams/<team_id>/channels/<channel_id>/threads/<thread_ts>", methods=["GET"],
           parameters=[*path_parameters("team_id", "channel_id", "thread_ts"), conditional.IF_NONE_MATCH])
@blp.arguments(ThreadArgs(), location="query", as_kwargs=True)
@blp.response(200, ThreadSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(400, 401, 403, 404, 503, e400=_BAD_CURSOR)
@blp.alt_response(304, description=conditional.NOT_MODIFIED)
def get_thread(team_id: str, channel_id: str, thread_ts: str, limit: int, include_deleted: bool,
               cursor: str | None = None):
    """A thread: the parent (first page only), then its replies oldest first."""
    _check_ids(team_id, channel_id)
    require_workspace(_settings(), team_id)
    _check_ts(thread_ts)
    db = get_db()
    ids, tag = _channel_version(db, team_id, channel_id)
    if (ready := conditional.answered(db, tag)) is not None:
        return ready
    page = listings.thread_page(db, team_id, channel_id, ids, thread_ts, limit=limit,
                                include_deleted=include_deleted, cursor=cursor, secret=_settings().cursor_secret)
    return conditional.keep_page(db, tag, current_app.json.response({
        "parent": download_links(page.parent.to_json(), team_id, channel_id) if page.parent is not None else None,
        "replies": [download_links(m.to_json(), team_id, channel_id) for m in page.replies],
        "next_cursor": page.next_cursor}))


@blp.route("/slack/teams/<team_id>/users", methods=["GET"], parameters=path_parameters("team_id"))
@blp.arguments(UsersArgs(), location="query", as_kwargs=True)
@blp.response(200, UsersSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(400, 401, 403, 404, 503, e400=_BAD_CURSOR)
def list_users(team_id: str, limit: int, cursor: str | None = None):
    """The workspace's users a page at a time (`limit`, `next_cursor`), each with profile, time zone, flags,
    when Chronicle first saw them and their first archived post."""
    _check_ids(team_id)
    require_workspace(_settings(), team_id)
    scope = users_scope(team_id)
    secret = _settings().cursor_secret
    bucket, after = listings.users_position(cursor, secret, scope) if cursor else (0, "")
    page, nxt = users.page(get_db(), team_id, limit=limit, bucket=bucket, after=after)
    return {"team_id": team_id, "users": page, "next_cursor": listings.sign_users_position(nxt, secret, scope)}


@blp.route("/slack/teams/<team_id>/users/<user_id>", methods=["GET"],
           parameters=path_parameters("team_id", "user_id"))
@blp.response(200, UserSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 503)
def get_user(team_id: str, user_id: str):
    """One user: profile, time zone, flags, when Chronicle first saw them, and their first archived post."""
    _check_ids(team_id, user_id)
    require_workspace(_settings(), team_id)
    user = users.get(get_db(), team_id, user_id)
    if user is None:
        abort(404, message=f"no user {user_id} in workspace {team_id}")
    return user


@blp.route("/slack/teams/<team_id>/search", methods=["GET"], parameters=path_parameters("team_id"))
@blp.arguments(SearchArgs(), location="query", as_kwargs=True)
@blp.response(200, SearchSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(400, 401, 403, 404, 422, 503, e400=_BAD_CURSOR, e422="a query that cannot be read (the reason says why)")
def search_messages(team_id: str, q: str, limit: int, cursor: str | None = None, tz: str | None = None):
    """Messages of the workspace matching a Slack-style query, newest first (docs/slack-search.md). Private
    channels are searched only with the private scope; deleted messages never match."""
    _check_ids(team_id)
    grant = require_workspace(_settings(), team_id)
    found = search_page(team_id, q, limit=limit, cursor=cursor, tz=tz, allow_private=grant.private)
    return current_app.json.response(found)


def search_page(team_id: str, q: str, *, limit: int, cursor: str | None, tz: str | None, allow_private: bool
                ) -> dict[str, Any]:
    """One page of search results in the documented shape (SearchSchema). A cursor of another query is a
    BadCursor (400), a query that cannot be read a SearchError (422): api/errors.py answers both."""
    secret = _settings().cursor_secret
    position = search.read_position(cursor, secret, team_id, q, tz) if cursor else None
    page = search.search(get_db(), team_id, q, limit=limit, position=position, allow_private=allow_private, tz=tz)
    names = page.directory.channel_names
    hits = [{**download_links(hit.message.to_json(), team_id), "channel_name": names.get(hit.message.channel_id),
             "reply_count": hit.reply_count or None} for hit in page.hits]
    return {
        "messages": [{k: v for k, v in hit.items() if v is not None} for hit in hits],
        "next_cursor": search.sign_position(page.next_position, secret, team_id, q, tz),
        "searched_to": search.iso_day(page.searched_to) if page.searched_to is not None else None,
        "query": page.query.describe(),
    }
