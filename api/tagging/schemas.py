"""Request and response schemas of the tagging routes (they make the OpenAPI document and refuse bad input
with 422 and the reason)."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, fields, validate

from api.schema_fields import plain_fields

PROJECT_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
_LEASE = fields.String(required=True, validate=validate.Regexp(r"^[0-9]{1,19}$"),
                       metadata={"description": "the lease id that next returned (decimal)"})


def project_parameter() -> list[dict[str, Any]]:
    return [{"in": "path", "name": "project", "required": True, "description": "tagging project id",
             "schema": {"type": "string", "pattern": PROJECT_PATTERN}}]


class LeaseArgs(Schema):
    lease_id = _LEASE


class MissingArgs(Schema):
    lease_id = fields.String(validate=validate.Regexp(r"^[0-9]{1,19}$"),
                             metadata={"description": "the holder's lease (an admin sends none)"})


class SubmitArgs(Schema):
    lease_id = _LEASE
    categories = fields.List(fields.String(validate=validate.Length(1, 200)), required=True,
                             validate=validate.Length(max=50))
    subcategories = fields.List(fields.String(validate=validate.Length(1, 200)), load_default=list,
                                validate=validate.Length(max=50))
    keywords = fields.List(fields.String(validate=validate.Length(0, 200)), load_default=list,
                           validate=validate.Length(max=50),
                           metadata={"description": "free text, normalised (NFKC, case-folded, spaces collapsed)"})


class VerifyArgs(Schema):
    result = fields.String(required=True, validate=validate.OneOf(["Correct", "Incorrect"]))
    note = fields.String(load_default="", validate=validate.Length(max=2000))


class ReviewArgs(Schema):
    limit = fields.Integer(load_default=50, validate=validate.Range(1, 200))


class KeywordArgs(Schema):
    prefix = fields.String(required=True, validate=validate.Length(1, 64))
    limit = fields.Integer(load_default=10, validate=validate.Range(1, 50))


class ThreadEntrySchema(plain_fields(strings="text time"), plain_fields(strings="author", nullable=True)):
    pass


class SourceSchema(Schema):
    ref = fields.String(allow_none=True)
    kind = fields.String()
    missing = fields.Boolean(required=True)
    text = fields.String()
    author = fields.String(allow_none=True)
    author_id = fields.String(allow_none=True)
    time = fields.String()
    channel = fields.String(allow_none=True)
    ts = fields.String()
    thread = fields.List(fields.Nested(ThreadEntrySchema))


class ItemSchema(Schema):
    seq = fields.Integer(required=True)
    status = fields.String(required=True, metadata={
        "enum": ["New", "InProgress", "Tagged", "QAVerified", "Disabled", "SourceMissing"]})
    holder = fields.String(allow_none=True)
    team = fields.String(allow_none=True)
    lease_id = fields.String(allow_none=True)
    lease_until = fields.String(allow_none=True)
    categories = fields.List(fields.String())
    subcategories = fields.List(fields.String())
    keywords = fields.List(fields.String())
    tagged_at = fields.String(allow_none=True)
    verification = fields.String(allow_none=True)
    verifier = fields.String(allow_none=True)
    note = fields.String(allow_none=True)
    source = fields.Nested(SourceSchema)


class ItemAnswerSchema(Schema):
    item = fields.Nested(ItemSchema, required=True)


class NextSchema(Schema):
    item = fields.Nested(ItemSchema, allow_none=True, required=True)
    reason = fields.String(allow_none=True, required=True)


class ItemsSchema(Schema):
    items = fields.List(fields.Nested(ItemSchema), required=True)


class KeywordsSchema(Schema):
    keywords = fields.List(fields.String(), required=True)


class TeamSchema(Schema):
    team = fields.String(required=True)
    quota = fields.Integer(allow_none=True)


class ProjectSchema(Schema):
    project = fields.String(required=True)
    name = fields.String(required=True)
    source = fields.Dict(required=True)
    categories = fields.List(fields.String(), required=True)
    subcategories = fields.List(fields.String(), required=True)
    queue_size = fields.Integer(required=True)
    lease_seconds = fields.Integer(required=True)
    max_held = fields.Integer(required=True)
    total_items = fields.Integer(required=True)
    teams = fields.List(fields.Nested(TeamSchema), required=True)


class MeSchema(plain_fields(strings="project user team role", required=True)):
    pass


class ProjectFiguresSchema(plain_fields(integers="total remaining queued tagged verified correct incorrect disabled "
                                                 "source_missing returned")):
    pass


class PersonFiguresSchema(plain_fields(strings="user", integers="used assigned finished correct incorrect returned"),
                          plain_fields(strings="team", integers="quota", floats="average_seconds", nullable=True)):
    pass


class RankSchema(Schema):
    name = fields.String()
    count = fields.Integer()


class TopSchema(Schema):
    keywords = fields.List(fields.Nested(RankSchema))
    categories = fields.List(fields.Nested(RankSchema))
    subcategories = fields.List(fields.Nested(RankSchema))


class StatsSchema(Schema):
    project = fields.Nested(ProjectFiguresSchema, required=True)
    teams = fields.List(fields.Nested(PersonFiguresSchema), required=True)
    users = fields.List(fields.Nested(PersonFiguresSchema), required=True)
    top = fields.Nested(TopSchema, required=True)
    online = fields.Integer(required=True)
    as_of = fields.String(allow_none=True)
