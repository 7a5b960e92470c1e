"""OpenAPI schemas of the report endpoints. The report document's own layout is in docs/slack-reports.md; its
sections are declared here as objects (validated for shape, not re-serialised field by field: a 200k-message
report is large)."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError, fields, validate

from api.slack.reports.period import MAX_DAYS
from api.slack.schemas import CURSOR_MAX_CHARS, CURSOR_PATTERN

REPORT_ID_PATTERN = r"^\d{4}-\d{2}-\d{2}-\d{1,2}(\.html)?$"


class ReportListArgs(Schema):
    limit = fields.Integer(load_default=52, validate=validate.Range(1, 200))
    cursor = fields.String(metadata={
        "description": "next_cursor of the previous page (opaque, signed); any other value is answered 400.",
        "pattern": CURSOR_PATTERN, "maxLength": CURSOR_MAX_CHARS})


class ReportArgs(Schema):
    anonymise = fields.Boolean(load_default=False, metadata={
        "description": "replace every user and channel (ids and names) with a stable fake, drop links"})


class JsonBoolean(fields.Boolean):
    """true or false as JSON has them (no "yes", 1 or "true" in a JSON body)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if not isinstance(value, bool):
            raise ValidationError("must be true or false")
        return value


class GenerateBody(Schema):
    start = fields.Date(metadata={"description": "first day (UTC), YYYY-MM-DD, 1970-01-01 … 2199-12-31; default: "
                                                 "the latest Sunday-start week that has ended"})
    days = fields.Integer(load_default=7, strict=True, validate=validate.Range(1, MAX_DAYS))
    include_private = JsonBoolean(load_default=False, metadata={"description": "count private channels too"})
    post = JsonBoolean(load_default=False, metadata={"description": "also post it to Slack (chat.postMessage)"})
    per_channel = JsonBoolean(load_default=False, metadata={
        "description": "with post: each channel's report to #<channel>-stats"})
    anonymise = JsonBoolean(load_default=False, metadata={"description": "with post: post it anonymised"})


class ReportEntrySchema(Schema):
    report_id = fields.String(required=True)
    start = fields.String(required=True)
    days = fields.Integer(required=True)
    generated_at = fields.String(required=True)
    messages = fields.Integer(allow_none=True)
    size_bytes = fields.Integer(allow_none=True)
    compressed_bytes = fields.Integer(allow_none=True)


class ReportListSchema(Schema):
    team_id = fields.String(required=True)
    reports = fields.List(fields.Nested(ReportEntrySchema), required=True)
    next_cursor = fields.String(allow_none=True, metadata={"description": "the next page; null on the last"})


class ReportSchema(Schema):
    team_id = fields.String(required=True)
    report_id = fields.String(required=True)
    period = fields.Dict(required=True, metadata={"description": "{start, end, days}"})
    previous = fields.Dict(required=True, metadata={"description": "the period compared with"})
    generated_at = fields.String(required=True)
    totals = fields.Dict(required=True, metadata={"description": "{key: {value, previous, change}}"})
    users = fields.Dict(required=True)
    channels = fields.List(fields.Dict(), required=True, metadata={
        "description": "per channel: messages, words (figures) and users, a table of channel_user_columns"})
    channel_user_columns = fields.List(fields.String(), required=True)
    activity = fields.Dict(required=True)
    reactions = fields.Dict(required=True)
    mentions = fields.Dict(required=True)
    threads = fields.Dict(required=True)
    top_messages = fields.Dict(required=True)
    new_users = fields.Dict(required=True)
    first_posts = fields.Dict(required=True)
    members = fields.List(fields.Dict(), required=True)
    names = fields.Dict(required=True)
    stats = fields.Dict()
    include_private = fields.Boolean()
    anonymised = fields.Boolean()
    delivery = fields.Dict(metadata={"description": "with post: {posted: [{channel, ts}], skipped, error}"})
