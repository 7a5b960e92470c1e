"""OpenAPI schemas of the report endpoints. The report document's own layout is in docs/slack-reports.md; its
sections are declared here as objects (validated for shape, not re-serialised field by field: a 200k-message
report is large)."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError, fields, validate

from api.schema_fields import plain_fields
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


class ReportEntrySchema(plain_fields(strings="report_id start generated_at", integers="days", required=True),
                        plain_fields(integers="messages size_bytes compressed_bytes", nullable=True)):
    pass


class ReportListSchema(Schema):
    team_id = fields.String(required=True)
    reports = fields.List(fields.Nested(ReportEntrySchema), required=True)
    next_cursor = fields.String(allow_none=True, metadata={"description": "the next page; null on the last"})


class ReportSchema(plain_fields(strings="team_id report_id generated_at",
                                dicts="users activity reactions mentions threads top_messages new_users first_posts "
                                      "names", required=True),
                   plain_fields(booleans="include_private anonymised", dicts="stats")):
    period = fields.Dict(required=True, metadata={"description": "{start, end, days}"})
    previous = fields.Dict(required=True, metadata={"description": "the period compared with"})
    totals = fields.Dict(required=True, metadata={"description": "{key: {value, previous, change}}"})
    channels = fields.List(fields.Dict(), required=True, metadata={
        "description": "per channel: messages, words (figures) and users, a table of channel_user_columns"})
    channel_user_columns = fields.List(fields.String(), required=True)
    members = fields.List(fields.Dict(), required=True)
    delivery = fields.Dict(metadata={"description": "with post: {posted: [{channel, ts}], skipped, error}"})


JOB_ID_PATTERN = r"^[0-9a-f]{32}$"


class ReportJobSchema(Schema):
    """A queued report generation (POST answers it with 202; GET .../reports/jobs/{job_id} shows it)."""

    team_id = fields.String(required=True)
    job_id = fields.String(required=True, metadata={"pattern": JOB_ID_PATTERN})
    report_id = fields.String(required=True, metadata={"description": "the report it makes: {start_day}-{days}"})
    state = fields.String(required=True, validate=validate.OneOf(["queued", "running", "done", "failed"]),
                          metadata={"description": "queued -> running -> done | failed (a retried attempt is "
                                                   "queued again, with its error)"})
    options = fields.Dict(metadata={"description": "{start, days, include_private, post, per_channel, anonymise}"})
    submitted_at = fields.String()
    started_at = fields.String()
    finished_at = fields.String()
    attempts = fields.Integer()
    messages = fields.Integer(metadata={"description": "done: messages counted in the period"})
    result = fields.Dict(metadata={"description": "done: {stats, delivery} (delivery with post: {posted, skipped, "
                                                  "error})"})
    error = fields.String(metadata={"description": "failed: why (or the last retried attempt's error)"})
    status_url = fields.String(metadata={"description": "where to follow the job (GET)"})
    report_url = fields.String(metadata={"description": "the stored report (GET), once done"})
