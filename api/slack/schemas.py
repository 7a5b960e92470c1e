"""OpenAPI schemas of the Slack endpoints: query arguments, path parameters, request and response bodies.

Every rule a Slack endpoint enforces on its input is stated here, so a request the document allows is never
refused for its shape: the Slack id pattern of `team_id`/`channel_id`, the Slack timestamp pattern of
`ts`/`thread_ts`/`before`/`after`, limits, enums, the cursor's length and format.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from marshmallow import INCLUDE, Schema, ValidationError, fields, validate

from api.schema_fields import plain_fields
from api.slack.codec import ID_PATTERN
from api.slack.content_schemas import FileSchema, MessageContentFields
from api.slack.payloads import HANDLED_TYPES
from api.slack.timeutil import TS_PATTERN, is_ts

TS_FORMAT = "Slack timestamp: seconds[.micro], e.g. 1620000000.000200"
# What api/paging.sign_cursor makes: base64url(JSON position) "." base64url(MAC), at most 2048 characters.
# Declared, not validated here: a cursor of any other shape, or not signed for this listing, is answered
# 400 by api/paging.verify_cursor (as is a longer one), the status every Chronicle listing uses.
CURSOR_PATTERN = r"^([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)?$"
CURSOR_MAX_CHARS = 2048


def path_parameters(*names: str) -> list[dict[str, Any]]:
    """The OpenAPI path parameters of a Slack read route, with the pattern each one must match."""
    known = {
        "team_id": ("Slack workspace (team) id", ID_PATTERN),
        "channel_id": ("Slack channel id", ID_PATTERN),
        "ts": (f"the message's ts ({TS_FORMAT})", TS_PATTERN),
        "thread_ts": (f"the thread parent's ts ({TS_FORMAT})", TS_PATTERN),
        "user_id": ("Slack user id", ID_PATTERN),
    }
    return [{"in": "path", "name": name, "required": True, "description": known[name][0],
             "schema": {"type": "string", "pattern": known[name][1]}} for name in names]


# -- query arguments --------------------------------------------------------------------------------------

class TsField(fields.String):
    """A Slack timestamp such as 1620000000.000200 (422 otherwise); the document states TS_PATTERN.

    Checked with timeutil.is_ts (the whole string) rather than marshmallow's Regexp, whose `$` would let a
    trailing newline through."""

    def __init__(self, *, metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(metadata={**(metadata or {}), "pattern": TS_PATTERN}, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        value = super()._deserialize(value, attr, data, **kwargs)
        if not is_ts(value):
            raise ValidationError(f"not a Slack timestamp ({TS_FORMAT})")
        return value


def _cursor() -> fields.String:
    return fields.String(metadata={
        "description": "next_cursor of the previous page of the same listing (opaque, signed); empty or "
                       "absent = first page. Any other value is answered 400.",
        "pattern": CURSOR_PATTERN, "maxLength": CURSOR_MAX_CHARS})


class PageArgs(Schema):
    limit = fields.Integer(load_default=50, validate=validate.Range(1, 200))
    cursor = _cursor()
    include_deleted = fields.Boolean(load_default=False)


class TimelineArgs(PageArgs):
    before = TsField(metadata={"description": "only messages with ts < before"})
    after = TsField(metadata={"description": "only messages with ts > after"})
    order = fields.String(load_default="desc", validate=validate.OneOf(["desc", "asc"]))


class ThreadArgs(PageArgs):
    pass


class IndexArgs(Schema):
    limit = fields.Integer(load_default=200, validate=validate.Range(1, 1000))
    cursor = _cursor()
    include_deleted = fields.Boolean(load_default=False, metadata={
        "description": "also list deleted channels (as deleted_<name>, with \"deleted\": true)"})


class UsersArgs(Schema):
    limit = fields.Integer(load_default=200, validate=validate.Range(1, 1000))
    cursor = _cursor()


class MessageArgs(Schema):
    include_deleted = fields.Boolean(load_default=False)


class SearchArgs(Schema):
    q = fields.String(required=True, validate=validate.Length(1, 1000), metadata={
        "description": "Slack's search syntax: words (all required), \"exact phrase\", -word, in:#channel, "
                       "from:@user, @user, #channel, before:/after:/on:YYYY-MM-DD, during:YYYY[-MM[-DD]], "
                       "has:file, has:link, has:reaction, is:thread (docs/slack-search.md)"})
    limit = fields.Integer(load_default=20, validate=validate.Range(1, 100))
    cursor = _cursor()
    tz = fields.String(load_default=None, validate=validate.Length(1, 64), metadata={
        "description": "IANA time zone the dates of before:/after:/on:/during: are days of (default UTC)"})


# -- responses --------------------------------------------------------------------------------------------

class EventAckSchema(Schema):
    ok = fields.Boolean()
    outcome = fields.String(metadata={"description": "stored | ignored: <why>"})
    challenge = fields.String(metadata={"description": "url_verification only: the challenge echoed back"})


class SlackErrorSchema(Schema):
    code = fields.Integer(required=True)
    status = fields.String(required=True)
    message = fields.String(required=True)
    errors = fields.Dict()


def error_responses(blp: Any, descriptions: dict[int, str]) -> Callable[..., Callable]:
    """`errors = error_responses(blp, {404: "..."})`, then `@errors(401, 404, e404="...")` on a route documents
    those answers (JSON, SlackErrorSchema) in the OpenAPI document; `e<code>=` overrides a description."""
    def errors(*codes: int, **overrides: str) -> Callable:
        def deco(fn: Callable) -> Callable:
            for code in codes:
                description = overrides.get(f"e{code}", descriptions.get(code, ""))
                fn = blp.alt_response(code, schema=SlackErrorSchema, description=description)(fn)
            return fn
        return deco
    return errors


class ReactionSchema(Schema):
    name = fields.String(required=True)
    users = fields.List(fields.String(), required=True)
    count = fields.Integer(required=True)


class MessageSchema(MessageContentFields, plain_fields(strings="user text subtype bot_id username thread_ts")):
    """A message: its columns, and every field Slack sent (content_schemas.py; others pass through as sent)."""

    class Meta:
        unknown = INCLUDE

    ts = fields.String(required=True)
    channel_id = fields.String(required=True)
    edited_ts = fields.String(metadata={"description": "time of the newest edit (updated_ts)"})
    deleted = fields.Boolean(metadata={"description": "present (true) only with include_deleted=true"})
    deleted_ts = fields.String()
    files = fields.List(fields.Nested(FileSchema), metadata={
        "description": "the message's files as Slack sent them (a legacy `file` also listed here)"})
    files_stored = fields.Dict(keys=fields.String(), values=fields.String(), metadata={
        "description": "file_id -> the stored file's download path (GET it with the same token; the object "
                       "store's own URI is never shown)"})
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


class SearchHitSchema(MessageSchema):
    channel_name = fields.String(metadata={"description": "the channel's current name"})
    reply_count = fields.Integer(metadata={"description": "replies of a thread head (absent: none)"})


class SearchSchema(Schema):
    messages = fields.List(fields.Nested(SearchHitSchema), required=True)
    next_cursor = fields.String(allow_none=True)
    searched_to = fields.String(allow_none=True, metadata={
        "description": "set when a page was cut short by the per-request read budget: the UTC day (YYYY-MM-DD) "
                       "searched back to; next_cursor continues below it"})
    query = fields.Dict(metadata={"description": "how the query was read: words, excluded, mentions, in, from, "
                                                 "after, before (inclusive local dates), has, is"})


class ThreadSchema(Schema):
    parent = fields.Nested(MessageSchema, allow_none=True)
    replies = fields.List(fields.Nested(MessageSchema), required=True)
    next_cursor = fields.String(allow_none=True)


class NameSchema(Schema):
    name = fields.String(required=True)
    ts = fields.String(required=True)


class ChannelSchema(plain_fields(strings="name visibility purpose topic created_ts creator prev_channel_id "
                                         "next_channel_id", booleans="archived deleted")):
    team_id = fields.String(required=True)
    channel_id = fields.String(required=True)
    names_history = fields.List(fields.Nested(NameSchema), metadata={"description": "newest first, at most 20"})


class IndexEntrySchema(plain_fields(strings="visibility prev_channel_id next_channel_id", booleans="deleted")):
    channel_id = fields.String(required=True)
    name = fields.String(required=True, metadata={"description": "current name; deleted_<name> when deleted"})


class IndexSchema(Schema):
    team_id = fields.String(required=True)
    channels = fields.List(fields.Nested(IndexEntrySchema), required=True)
    next_cursor = fields.String(allow_none=True, metadata={"description": "the next page; null on the last"})


class FirstPostSchema(Schema):
    ts = fields.String(required=True)
    channel_id = fields.String(required=True)


class UserSchema(plain_fields(strings="name real_name display_name tz tz_label avatar_url",
                              booleans="deleted is_bot is_app_user")):
    user_id = fields.String(required=True)
    tz_offset = fields.Integer(metadata={"description": "seconds east of UTC"})
    updated_ts = fields.String(metadata={"description": "Slack's `updated` time of this profile"})
    first_seen_ts = fields.String(metadata={"description": "when Chronicle first saw the user"})
    first_post = fields.Nested(FirstPostSchema, metadata={"description": "the user's earliest archived post"})


class UsersSchema(Schema):
    team_id = fields.String(required=True)
    users = fields.List(fields.Nested(UserSchema), required=True)
    next_cursor = fields.String(allow_none=True, metadata={"description": "the next page; null on the last"})


# -- the Events API request -------------------------------------------------------------------------------

EVENT_REQUEST_DOC: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "A Slack Events API payload (url_verification or event_callback), signed by Slack. "
                       "The raw bytes are verified before parsing; other envelope types are acknowledged and "
                       "ignored, as are event types not listed.",
        "content": {"application/json": {"schema": {
            "type": "object", "required": ["type"],
            "properties": {
                "type": {"type": "string", "enum": ["url_verification", "event_callback"]},
                "challenge": {"type": "string"},
                "team_id": {"type": "string", "pattern": ID_PATTERN},
                "event_id": {"type": "string", "minLength": 1},
                "event_time": {"type": "integer", "minimum": 0, "maximum": 10**11 - 1},
                "event": {"type": "object", "required": ["type"],
                          "properties": {"type": {"type": "string", "enum": HANDLED_TYPES}}},
            }}}},
    },
    "parameters": [
        {"in": "header", "name": "X-Slack-Signature", "required": True, "schema": {"type": "string"}},
        {"in": "header", "name": "X-Slack-Request-Timestamp", "required": True,
         "schema": {"type": "string", "pattern": "^[0-9]+$"}},
        {"in": "header", "name": "X-Slack-Retry-Num", "required": False, "schema": {"type": "integer"}},
    ],
}
