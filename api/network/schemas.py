"""Request and response schemas of the follower-network API (marshmallow; they are the OpenAPI document)."""

from __future__ import annotations

import re
from datetime import UTC
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate

from api.network import search
from api.schema_fields import plain_fields


class AccountSchema(plain_fields(strings="username", integers="account_id follower_count follows_count",
                                 required=True)):
    pass


class PostSchema(plain_fields(integers="post_id author_id like_count", required=True),
                 plain_fields(strings="author_username content language country", floats="latitude longitude",
                              nullable=True)):
    original_author = fields.String(allow_none=True, metadata={"description": "author in the imported file"})
    posted_at = fields.DateTime(required=True)
    share_count = fields.Integer()


class PostsPageSchema(Schema):
    account = fields.Nested(AccountSchema, required=True)
    posts = fields.List(fields.Nested(PostSchema), required=True)
    next_cursor = fields.String(allow_none=True)


class PageArgs(Schema):
    limit = fields.Integer(load_default=25, validate=validate.Range(1, 100))
    cursor = fields.String(load_default=None)


class HomeArgs(Schema):
    order = fields.String(load_default="newest", validate=validate.OneOf(["newest", "likes"]))


class HomeSchema(Schema):
    account = fields.Nested(AccountSchema, required=True)
    order = fields.String(required=True)
    posts = fields.List(fields.Nested(PostSchema), required=True)
    cache_rebuilt = fields.Boolean(metadata={"description": "the home cache was (re)built by this read"})
    ranked_at = fields.DateTime(metadata={
        "description": "order=likes: when the window was ranked. A ranking is reused for "
                       "CHRONICLE_NETWORK_LIKES_RANK_MAX_AGE seconds (the like counts shown are current; the "
                       "reader's own follows and unfollows re-rank at once)"})


# Years 1970..9998 as written (any offset): every such time has a month key of four digits and converts to
# UTC without overflow. Declared as the field's pattern, so the OpenAPI document states the same rule.
TIME_PATTERN = r"^(19[7-9][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])-"


class UtcDateTime(fields.AwareDateTime):
    """An RFC 3339 time with an offset, years 1970..9998, turned into UTC."""

    def __init__(self, **kwargs: Any) -> None:
        metadata = {"pattern": TIME_PATTERN, **kwargs.pop("metadata", {})}
        super().__init__(default_timezone=None, metadata=metadata, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, str) and not re.match(TIME_PATTERN, value):
            raise ValidationError("time must be written with a year from 1970 to 9998")
        return super()._deserialize(value, attr, data, **kwargs).astimezone(UTC)


def _unicode_text(value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("not valid Unicode (an unpaired surrogate escape)") from None


class NewPostSchema(Schema):
    author_id = fields.Integer(required=True, validate=validate.Range(0, 2**63 - 1))
    content = fields.String(required=True, validate=[validate.Length(1, 10_000), _unicode_text])
    posted_at = UtcDateTime(load_default=None)
    language = fields.String(load_default=None, validate=validate.Length(max=16))
    country = fields.String(load_default=None, validate=validate.Length(max=64))
    latitude = fields.Float(load_default=None, validate=validate.Range(-90, 90))
    longitude = fields.Float(load_default=None, validate=validate.Range(-180, 180))


class PostRequestHeadersSchema(Schema):
    """Headers of Q5 (other headers pass through)."""

    class Meta:
        unknown = EXCLUDE

    idempotency_key = fields.String(
        data_key="Idempotency-Key", load_default=None,
        validate=[validate.Length(1, 255), validate.Regexp(r"^[\x21-\x7e]+$", error="visible ASCII, no spaces")],
        metadata={"description": "a key the client makes up for this post (e.g. a UUID) and sends again on "
                                 "every retry: the first request writes the post, a retry writes that same post "
                                 "again or answers what the first answered (header Idempotent-Replayed), for "
                                 "24 hours. Without it, a retry after a lost answer may store the post twice. "
                                 "A key the author used for a different post: 422."})


class CreatedPostSchema(Schema):
    post = fields.Nested(PostSchema, required=True)
    fanned_out_to = fields.Integer(required=True, metadata={"description": "home caches written (0: merged at "
                                                                            "read time, the author is above the "
                                                                            "hybrid threshold)"})


class DeletedSchema(Schema):
    post_id = fields.Integer(required=True)
    likes_to_purge = fields.Integer(required=True, metadata={
        "description": "the post's like count when it was deleted: its likes are removed by a background job "
                       "(`chronicle network worker`); cached copies are skipped by readers, not deleted"})


class FollowResultSchema(Schema):
    follower = fields.Nested(AccountSchema, required=True)
    followee = fields.Nested(AccountSchema, required=True)
    changed = fields.Boolean(required=True, metadata={"description": "false when the request repeated a state"})
    celebrity_job = fields.Boolean(required=True, metadata={
        "description": "the followee crossed a hybrid line: a background job (`chronicle network worker`) "
                       "promotes it (merged at read time) or demotes it (fanned out again)"})


class LikeResultSchema(plain_fields(integers="post_id user_id like_count", required=True)):
    pass


class RelationSchema(Schema):
    account_id = fields.Integer(required=True)
    username = fields.String(allow_none=True)


class RelationArgs(Schema):
    limit = fields.Integer(load_default=100, validate=validate.Range(1, 5000))


class SearchArgs(Schema):
    q = fields.String(required=True, validate=validate.Length(1, search.MAX_QUERY_CHARS), metadata={
        "description": "the words wanted (runs of letters or digits, any case, any separators): posts holding "
                       "all of them; a query without any word matches nothing"})


class SearchResultSchema(Schema):
    words = fields.List(fields.String(), required=True, metadata={"description": "the terms searched for"})
    posts = fields.List(fields.Nested(PostSchema), required=True)
    exact = fields.Boolean(required=True, metadata={
        "description": "true when the answer is proven to be the most-liked posts (always, except for a common "
                       "term whose top list is missing or worn down by unlikes: then the newest 20,000 postings "
                       "were ranked and `chronicle network index-terms` rebuilds the list)"})


class RankedAccountSchema(Schema):
    account_id = fields.Integer(required=True)
    username = fields.String(allow_none=True)
    follower_count = fields.Integer()
    follows_top = fields.Integer(metadata={"description": "how many of the top-100 accounts it follows"})


class SnapshotSchema(Schema):
    taken_at = fields.String(required=True)
    snapshot_id = fields.String(required=True)
    accounts = fields.List(fields.Nested(RankedAccountSchema))
    followers = fields.List(fields.Nested(RankedAccountSchema))


class SnapshotArgs(Schema):
    at = UtcDateTime(load_default=None, metadata={"description": "the snapshot in force at this time"})


class HistoryArgs(Schema):
    limit = fields.Integer(load_default=20, validate=validate.Range(1, 500))
    at = UtcDateTime(load_default=None, metadata={"description": "only snapshots at or before"})


class HistorySchema(Schema):
    snapshots = fields.List(fields.Nested(SnapshotSchema), required=True)


class RankingJobSchema(Schema):
    """A Q2+Q3 job: POST /networks/{n}/rankings answers this (202) at once; the status endpoint follows it."""

    job_id = fields.UUID(required=True, metadata={"description": "the job's id (a time-based UUID)"})
    network = fields.String(required=True)
    status = fields.String(required=True, validate=validate.OneOf(["queued", "running", "done", "failed"]),
                           metadata={"description": "queued (waiting for `chronicle network worker`), running, "
                                                    "done (`snapshot_id` is the snapshot it appended), failed "
                                                    "(`error`; the worker retries it up to 5 attempts, so a failed "
                                                    "job may still run again)"})
    requested_at = fields.DateTime(required=True)
    started_at = fields.DateTime(metadata={"description": "when its latest attempt started"})
    finished_at = fields.DateTime()
    attempts = fields.Integer(required=True, metadata={"description": "attempts started so far"})
    snapshot_id = fields.String(metadata={"description": "done: the snapshot (GET .../rankings/top-accounts and "
                                                         "top-followers show it while it is the latest)"})
    taken_at = fields.DateTime()
    seconds = fields.Float(metadata={"description": "done: how long the computation took"})
    error = fields.String(metadata={"description": "failed: the error of the latest attempt"})
    status_url = fields.String(required=True, metadata={"description": "this job's status endpoint"})


class CacheBuiltSchema(plain_fields(integers="entries followed_authors", booleans="complete", required=True)):
    pass
