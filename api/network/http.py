"""HTTP API of the follower network archive: Q1-Q6, follow/unfollow, like/unlike, posts, rankings.

Reads are public; every write (post, delete, follow, like, ranking run, cache rebuild) needs the admin bearer
token, since network accounts have no credentials of their own.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from flask import current_app
from flask_smorest import Blueprint, abort
from marshmallow import Schema, ValidationError, fields, validate, validates

from api.auth import require_admin
from api.db import get_db
from api.network import accounts, likes, posts, rankings, relations, search, timelines
from api.network.common import month_of, read_cursor, sign_cursor, to_utc
from api.network.settings import network_settings

blp = Blueprint("network", __name__, url_prefix="/networks", description="Follower network archive (issue 4)")
_NETWORK_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
ID = "int(max=9223372036854775807)"  # ids are bigint: larger numbers are unknown (404), never a driver error


# -- schemas ---------------------------------------------------------------------------------------------------
class AccountSchema(Schema):
    account_id = fields.Integer(required=True)
    username = fields.String(required=True)
    follower_count = fields.Integer(required=True)
    follows_count = fields.Integer(required=True)


class PostSchema(Schema):
    post_id = fields.Integer(required=True)
    author_id = fields.Integer(required=True)
    author_username = fields.String(allow_none=True)
    original_author = fields.String(allow_none=True, metadata={"description": "author in the imported file"})
    posted_at = fields.DateTime(required=True)
    content = fields.String(allow_none=True)
    language = fields.String(allow_none=True)
    country = fields.String(allow_none=True)
    latitude = fields.Float(allow_none=True)
    longitude = fields.Float(allow_none=True)
    like_count = fields.Integer(required=True)
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


_EARLIEST, _LATEST = datetime(1970, 1, 1, tzinfo=UTC), datetime(9999, 1, 1, tzinfo=UTC)


class UtcDateTime(fields.AwareDateTime):
    """An aware time turned into UTC, within 1970..9998 (posts and snapshots live there; month keys and the
    timestamp columns stay well-formed)."""

    def _deserialize(self, value, attr, data, **kwargs):
        moment = super()._deserialize(value, attr, data, **kwargs)
        try:
            moment = moment.astimezone(UTC)
        except OverflowError:
            raise ValidationError("time out of range") from None
        if not _EARLIEST <= moment < _LATEST:
            raise ValidationError("time must be between 1970-01-01 and 9998-12-31 (UTC)")
        return moment


def _unicode_text(value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("not valid Unicode (an unpaired surrogate escape)") from None


class NewPostSchema(Schema):
    author_id = fields.Integer(required=True, validate=validate.Range(0, 2**63 - 1))
    content = fields.String(required=True, validate=[validate.Length(1, 10_000), _unicode_text])
    posted_at = UtcDateTime(load_default=None, default_timezone=None)
    language = fields.String(load_default=None, validate=validate.Length(max=16))
    country = fields.String(load_default=None, validate=validate.Length(max=64))
    latitude = fields.Float(load_default=None, validate=validate.Range(-90, 90))
    longitude = fields.Float(load_default=None, validate=validate.Range(-180, 180))


class CreatedPostSchema(Schema):
    post = fields.Nested(PostSchema, required=True)
    fanned_out_to = fields.Integer(required=True, metadata={"description": "home caches written (0: merged at "
                                                                            "read time, the author is above the "
                                                                            "hybrid threshold)"})


class DeletedSchema(Schema):
    post_id = fields.Integer(required=True)
    removed_from_caches = fields.Integer(required=True)


class FollowResultSchema(Schema):
    follower = fields.Nested(AccountSchema, required=True)
    followee = fields.Nested(AccountSchema, required=True)
    changed = fields.Boolean(required=True, metadata={"description": "false when the request repeated a state"})


class LikeResultSchema(Schema):
    post_id = fields.Integer(required=True)
    user_id = fields.Integer(required=True)
    like_count = fields.Integer(required=True)


class RelationSchema(Schema):
    account_id = fields.Integer(required=True)
    username = fields.String(allow_none=True)


class RelationArgs(Schema):
    limit = fields.Integer(load_default=100, validate=validate.Range(1, 5000))


class SearchArgs(Schema):
    q = fields.String(required=True, metadata={"description": "1 to 5 words, all required (AND), any case"})

    @validates("q")
    def _words(self, value: str, **_kw: Any) -> None:
        words = search.parse_query(value)
        if not words:
            raise ValidationError("give at least one word")
        if len(words) > network_settings().search_max_words:
            raise ValidationError(f"at most {network_settings().search_max_words} words")


class SearchResultSchema(Schema):
    words = fields.List(fields.String(), required=True)
    posts = fields.List(fields.Nested(PostSchema), required=True)


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


class ComputedSchema(Schema):
    taken_at = fields.DateTime(required=True)
    snapshot_id = fields.String(required=True)
    accounts = fields.List(fields.Nested(RankedAccountSchema), required=True)
    followers = fields.List(fields.Nested(RankedAccountSchema), required=True)
    seconds = fields.Float(required=True)


class CacheBuiltSchema(Schema):
    entries = fields.Integer(required=True)
    complete = fields.Boolean(required=True)
    followed_authors = fields.Integer(required=True)


# -- helpers ---------------------------------------------------------------------------------------------------
def _settings():
    return current_app.config["CHRONICLE_SETTINGS"]


def _admin() -> None:
    require_admin(_settings())


def _network(network: str) -> str:
    if not _NETWORK_RE.match(network):
        abort(404, message="unknown network (names are 1-64 letters, digits, '_' or '-')")
    return network


def _account(network: str, account_id: int) -> dict[str, Any]:
    account = accounts.get_account(get_db(), _network(network), account_id)
    if account is None:
        abort(404, message=f"account {account_id} not found in network {network}")
    return account


def _post(network: str, post_id: int) -> dict[str, Any]:
    post = posts.get_post(get_db(), _network(network), post_id)
    if post is None:
        abort(404, message=f"post {post_id} not found in network {network}")
    return post


_ADMIN_DOC = {"security": [{"bearer": []}]}


# -- accounts and Q1 ------------------------------------------------------------------------------------------
@blp.route(f"/<network>/accounts/<{ID}:account_id>")
@blp.response(200, AccountSchema)
@blp.alt_response(404, description="unknown account")
def get_account(network: str, account_id: int):
    """An account with its follower and follows counts."""
    return _account(network, account_id)


@blp.route(f"/<network>/accounts/<{ID}:account_id>/posts")
@blp.arguments(PageArgs, location="query")
@blp.response(200, PostsPageSchema)
@blp.alt_response(404, description="unknown account")
@blp.alt_response(422, description="invalid cursor or limit")
def list_posts(args: dict, network: str, account_id: int):
    """Q1: the posts of an account, newest first, `limit` per page with a signed cursor."""
    account = _account(network, account_id)
    before = None
    if args["cursor"]:
        payload = read_cursor(_settings().cursor_secret, args["cursor"])
        if not payload or payload.get("a") != account_id or payload.get("n") != network:
            abort(422, message="invalid cursor")
        from datetime import UTC, datetime

        before = (payload["m"], datetime.fromtimestamp(payload["t"] / 1000, UTC), payload["p"])
    page = posts.posts_of_author(get_db(), network, account_id, args["limit"] + 1, before=before)
    next_cursor = None
    if len(page) > args["limit"]:
        page = page[:args["limit"]]
        last = page[-1]
        next_cursor = sign_cursor(_settings().cursor_secret, {
            "n": network, "a": account_id, "m": month_of(last["posted_at"]),
            "t": int(to_utc(last["posted_at"]).timestamp() * 1000), "p": last["post_id"]})
    return {"account": account, "posts": page, "next_cursor": next_cursor}


@blp.route(f"/<network>/accounts/<{ID}:account_id>/followers")
@blp.arguments(RelationArgs, location="query")
@blp.response(200, RelationSchema(many=True))
@blp.alt_response(404, description="unknown account")
def list_followers(args: dict, network: str, account_id: int):
    """The followers of an account (up to `limit`)."""
    _account(network, account_id)
    return relations.list_relations(get_db(), network, account_id, "follower", args["limit"])


@blp.route(f"/<network>/accounts/<{ID}:account_id>/follows")
@blp.arguments(RelationArgs, location="query")
@blp.response(200, RelationSchema(many=True))
@blp.alt_response(404, description="unknown account")
def list_follows(args: dict, network: str, account_id: int):
    """The accounts an account follows (up to `limit`)."""
    _account(network, account_id)
    return relations.list_relations(get_db(), network, account_id, "follows", args["limit"])


# -- Q4 --------------------------------------------------------------------------------------------------------
@blp.route(f"/<network>/accounts/<{ID}:account_id>/home")
@blp.arguments(HomeArgs, location="query")
@blp.response(200, HomeSchema)
@blp.alt_response(404, description="unknown account")
def home(args: dict, network: str, account_id: int):
    """Q4: follower and follows counts and the 25 newest (`order=newest`) or 25 most-liked (`order=likes`)
    posts of the home timeline: the newest 800 posts of the accounts it follows."""
    found = timelines.home_of(get_db(), _network(network), account_id, args["order"])
    if found is None:
        abort(404, message=f"account {account_id} not found in network {network}")
    return found


@blp.route(f"/<network>/accounts/<{ID}:account_id>/home/rebuild", methods=["POST"])
@blp.response(200, CacheBuiltSchema)
@blp.alt_response(404, description="unknown account")
@blp.doc(**_ADMIN_DOC)
def rebuild_home(network: str, account_id: int):
    """Build an account's home cache from scratch (admin)."""
    _admin()
    _account(network, account_id)
    return timelines.init_cache(get_db(), network, account_id)


# -- follow / unfollow ---------------------------------------------------------------------------------------
def _pair(network: str, account_id: int, target_id: int) -> tuple[dict, dict]:
    _admin()
    follower, followee = _account(network, account_id), _account(network, target_id)
    if account_id == target_id:
        abort(422, message="an account cannot follow itself")
    return follower, followee


@blp.route(f"/<network>/accounts/<{ID}:account_id>/follows/<{ID}:target_id>", methods=["PUT"])
@blp.response(200, FollowResultSchema)
@blp.alt_response(404, description="unknown account")
@blp.alt_response(422, description="self-follow")
@blp.doc(**_ADMIN_DOC)
def follow(network: str, account_id: int, target_id: int):
    """`account_id` follows `target_id` (idempotent; admin)."""
    follower, followee = _pair(network, account_id, target_id)
    changed = relations.follow(get_db(), network, follower, followee)
    return {"follower": follower, "followee": followee, "changed": changed}


@blp.route(f"/<network>/accounts/<{ID}:account_id>/follows/<{ID}:target_id>", methods=["DELETE"])
@blp.response(200, FollowResultSchema)
@blp.alt_response(404, description="unknown account")
@blp.alt_response(422, description="self-unfollow")
@blp.doc(**_ADMIN_DOC)
def unfollow(network: str, account_id: int, target_id: int):
    """`account_id` stops following `target_id` (idempotent; admin)."""
    follower, followee = _pair(network, account_id, target_id)
    changed = relations.unfollow(get_db(), network, follower, followee)
    return {"follower": follower, "followee": followee, "changed": changed}


# -- posts (Q5), likes -----------------------------------------------------------------------------------------
@blp.route("/<network>/posts", methods=["POST"])
@blp.arguments(NewPostSchema)
@blp.response(201, CreatedPostSchema)
@blp.alt_response(404, description="unknown author")
@blp.doc(**_ADMIN_DOC)
def create_post(body: dict, network: str):
    """Q5: write a post and fan it out to the home caches of its author's followers (admin)."""
    _admin()
    author = _account(network, body.pop("author_id"))
    post, fanned = posts.create_post(get_db(), network, author, body.pop("content"), **body)
    return {"post": post, "fanned_out_to": fanned}


@blp.route(f"/<network>/posts/<{ID}:post_id>")
@blp.response(200, PostSchema)
@blp.alt_response(404, description="unknown post")
def get_post(network: str, post_id: int):
    """One post."""
    return _post(network, post_id)


@blp.route(f"/<network>/posts/<{ID}:post_id>", methods=["DELETE"])
@blp.response(200, DeletedSchema)
@blp.alt_response(404, description="unknown post")
@blp.doc(**_ADMIN_DOC)
def delete_post(network: str, post_id: int):
    """Delete a post: it leaves every home timeline, the search index and the likes (admin)."""
    _admin()
    post = _post(network, post_id)
    removed = posts.delete_post(get_db(), network, post)
    return {"post_id": post_id, "removed_from_caches": removed}


def _like_args(network: str, post_id: int, user_id: int) -> dict[str, Any]:
    _admin()
    post = _post(network, post_id)
    _account(network, user_id)
    return post


@blp.route(f"/<network>/posts/<{ID}:post_id>/likes/<{ID}:user_id>", methods=["PUT"])
@blp.response(200, LikeResultSchema)
@blp.alt_response(404, description="unknown post or account")
@blp.doc(**_ADMIN_DOC)
def like(network: str, post_id: int, user_id: int):
    """`user_id` likes the post (idempotent; admin)."""
    post = _like_args(network, post_id, user_id)
    count = likes.like(get_db(), network, post, user_id)
    return {"post_id": post_id, "user_id": user_id, "like_count": count}


@blp.route(f"/<network>/posts/<{ID}:post_id>/likes/<{ID}:user_id>", methods=["DELETE"])
@blp.response(200, LikeResultSchema)
@blp.alt_response(404, description="unknown post or account")
@blp.doc(**_ADMIN_DOC)
def unlike(network: str, post_id: int, user_id: int):
    """`user_id` no longer likes the post (idempotent; admin)."""
    post = _like_args(network, post_id, user_id)
    count = likes.unlike(get_db(), network, post, user_id)
    return {"post_id": post_id, "user_id": user_id, "like_count": count}


# -- Q6 --------------------------------------------------------------------------------------------------------
@blp.route("/<network>/search")
@blp.arguments(SearchArgs, location="query")
@blp.response(200, SearchResultSchema)
def search_posts(args: dict, network: str):
    """Q6: the 25 most-liked posts containing every given word (case-insensitive, up to 5 words)."""
    words = search.parse_query(args["q"])
    found = search.search(get_db(), _network(network), words, network_settings().page_size)
    return {"words": words, "posts": found}


# -- Q2 / Q3 ---------------------------------------------------------------------------------------------------
@blp.route("/<network>/rankings", methods=["POST"])
@blp.response(201, ComputedSchema)
@blp.doc(**_ADMIN_DOC)
def compute_rankings(network: str):
    """Compute Q2 and Q3 now and append a snapshot to both time series (admin; also a periodic script)."""
    _admin()
    return rankings.compute(get_db(), _network(network))


def _one(network: str, kind: str, at: Any) -> dict[str, Any]:
    found = rankings.snapshots(get_db(), _network(network), kind, at=at, limit=1)
    if not found:
        abort(404, message="no snapshot" + (f" at or before {at.isoformat()}" if at else " yet: run the rankings "
                                             "job (POST /networks/<network>/rankings)"))
    return found[0]


@blp.route("/<network>/rankings/top-accounts")
@blp.arguments(SnapshotArgs, location="query")
@blp.response(200, SnapshotSchema)
@blp.alt_response(404, description="no snapshot at that time")
def top_accounts(args: dict, network: str):
    """Q2: the 100 accounts with the most followers, from the latest snapshot or the one in force at `at`."""
    return _one(network, "accounts", args["at"])


@blp.route("/<network>/rankings/top-accounts/history")
@blp.arguments(HistoryArgs, location="query")
@blp.response(200, HistorySchema)
def top_accounts_history(args: dict, network: str):
    """Q2 snapshots, newest first."""
    return {"snapshots": rankings.snapshots(get_db(), _network(network), "accounts", at=args["at"],
                                            limit=args["limit"])}


@blp.route("/<network>/rankings/top-followers")
@blp.arguments(SnapshotArgs, location="query")
@blp.response(200, SnapshotSchema)
@blp.alt_response(404, description="no snapshot at that time")
def top_followers(args: dict, network: str):
    """Q3: the 100 accounts following the most of the Q2 accounts, latest snapshot or the one at `at`."""
    return _one(network, "followers", args["at"])


@blp.route("/<network>/rankings/top-followers/history")
@blp.arguments(HistoryArgs, location="query")
@blp.response(200, HistorySchema)
def top_followers_history(args: dict, network: str):
    """Q3 snapshots, newest first."""
    return {"snapshots": rankings.snapshots(get_db(), _network(network), "followers", at=args["at"],
                                            limit=args["limit"])}
