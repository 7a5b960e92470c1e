"""HTTP API of the follower network archive: Q1-Q6, follow/unfollow, like/unlike, posts, rankings.

Reads are public; every write (post, delete, follow, like, ranking run, cache rebuild) needs the admin bearer
token, since network accounts have no credentials of their own. Routes validate, authorise and call
the cross-table modules (actions.py, home.py, post_search.py, top100.py) or one table owner
(single-table reads).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from flask import current_app, url_for
from flask.views import MethodView
from flask_smorest import Blueprint, abort

from api.auth import require_admin
from api.context import get_db
from api.db import reads_own_writes
from api.network import accounts, actions, post_search, posts, rankings, relations, search, top100
from api.network import home as home_timeline
from api.network.common import valid_network_name
from api.network.relations import FOLLOWER, FOLLOWS
from api.network.schemas import (
    AccountSchema,
    CacheBuiltSchema,
    CreatedPostSchema,
    DeletedSchema,
    FollowResultSchema,
    HistoryArgs,
    HistorySchema,
    HomeArgs,
    HomeSchema,
    LikeResultSchema,
    NewPostSchema,
    PageArgs,
    PostRequestHeadersSchema,
    PostSchema,
    PostsPageSchema,
    RankingJobSchema,
    RelationArgs,
    RelationSchema,
    SearchArgs,
    SearchResultSchema,
    SnapshotArgs,
    SnapshotSchema,
)
from api.network.settings import network_settings
from api.network.values import Account, Post
from api.paging import sign_cursor, verify_cursor

blp = Blueprint("network", __name__, url_prefix="/networks", description="Follower network archive")
ID = "int(max=9223372036854775807)"  # ids are bigint: larger numbers are unknown (404), never a driver error
RANKINGS = {"top-accounts": "accounts", "top-followers": "followers"}
_ADMIN_DOC = {"security": [{"bearer": []}]}


# -- helpers ---------------------------------------------------------------------------------------------------
def _settings():
    return current_app.config["CHRONICLE_SETTINGS"]


def _admin() -> None:
    require_admin(_settings())


def _network(network: str) -> str:
    if not valid_network_name(network):
        abort(404, message="unknown network (names are 1-64 letters, digits, '_' or '-')")
    return network


def _account(network: str, account_id: int) -> Account:
    return _accounts(network, account_id)[0]


def _accounts(network: str, *account_ids: int, counts: bool = True) -> list[Account]:
    """The accounts, read together (404 for the first one missing); without their counts if not `counts`."""
    db = get_db()
    futures = [accounts.start_get_account(db, _network(network), a, counts=counts) for a in account_ids]
    found = [accounts.account_from(f) for f in futures]
    for account_id, account in zip(account_ids, found, strict=True):
        if account is None:
            abort(404, message=f"account {account_id} not found in network {network}")
    return found


def _post(network: str, post_id: int) -> Post:
    post = posts.get_post(get_db(), _network(network), post_id)
    if post is None:
        abort(404, message=f"post {post_id} not found in network {network}")
    return post


# -- accounts and Q1 ------------------------------------------------------------------------------------------
@blp.route(f"/<network>/accounts/<{ID}:account_id>")
@blp.response(200, AccountSchema)
@blp.alt_response(404, description="unknown account")
@reads_own_writes
def get_account(network: str, account_id: int):
    """An account with its follower and follows counts."""
    return _account(network, account_id)


@blp.route(f"/<network>/accounts/<{ID}:account_id>/posts")
@blp.arguments(PageArgs(), location="query")
@blp.response(200, PostsPageSchema)
@blp.alt_response(400, description="invalid cursor (not the next_cursor of this listing)")
@blp.alt_response(404, description="unknown account")
@blp.alt_response(422, description="invalid limit or cursor format")
def list_posts(args: dict, network: str, account_id: int):
    """Q1: the posts of an account, newest first, `limit` per page with a signed cursor."""
    account = _account(network, account_id)
    scope = f"q1|{network}|{account_id}"
    before = None
    if args["cursor"]:
        position = verify_cursor(args["cursor"], _settings().cursor_secret, scope)
        try:
            before = (str(position["m"]), datetime.fromtimestamp(position["t"] / 1000, UTC), int(position["p"]))
        except (KeyError, TypeError, ValueError, OverflowError):
            abort(400, message="invalid cursor")
    page = posts.posts_of_author(get_db(), network, account_id, args["limit"] + 1, before=before)
    next_cursor = None
    if len(page) > args["limit"]:
        page = page[:args["limit"]]
        month, posted_at, post_id = posts.position_of(page[-1])
        next_cursor = sign_cursor({"m": month, "t": int(posted_at.timestamp() * 1000), "p": post_id},
                                  _settings().cursor_secret, scope)
    return {"account": account, "posts": page, "next_cursor": next_cursor}


# Both directions of a relation: one view, the direction given by the route (never by the client).
@blp.route(f"/<network>/accounts/<{ID}:account_id>/followers", endpoint="list_followers",
           defaults={"direction": FOLLOWER})
@blp.route(f"/<network>/accounts/<{ID}:account_id>/follows", endpoint="list_follows",
           defaults={"direction": FOLLOWS})
@blp.arguments(RelationArgs(), location="query")
@blp.response(200, RelationSchema(many=True))
@blp.alt_response(404, description="unknown account")
def list_relations(args: dict, network: str, account_id: int, direction: str):
    """The followers of an account (`/followers`) or the accounts it follows (`/follows`), up to `limit`."""
    _account(network, account_id)
    return relations.listing(get_db(), network, account_id, direction, args["limit"])


# -- Q4 --------------------------------------------------------------------------------------------------------
@blp.route(f"/<network>/accounts/<{ID}:account_id>/home")
@blp.arguments(HomeArgs(), location="query")
@blp.response(200, HomeSchema)
@blp.alt_response(404, description="unknown account")
def home(args: dict, network: str, account_id: int):
    """Q4: follower and follows counts and the 25 newest (`order=newest`) or 25 most-liked (`order=likes`)
    posts of the home timeline: the newest 800 posts of the accounts it follows."""
    found = home_timeline.home_of(get_db(), _network(network), account_id, args["order"])
    if found is None:
        abort(404, message=f"account {account_id} not found in network {network}")
    return current_app.json.response(home_json(found))


def home_json(found: dict[str, Any]) -> dict[str, Any]:
    """What HomeSchema dumps of `found` (home.home_of's answer), built directly: the hot path's body without a
    marshmallow call per field (tests/network/test_api_json.py holds the two equal)."""
    body = {"account": found["account"].to_json(), "order": found["order"],
            "posts": [post.api_json() for post in found["posts"]]}
    if "cache_rebuilt" in found:
        body["cache_rebuilt"] = found["cache_rebuilt"]
    if "ranked_at" in found:
        body["ranked_at"] = found["ranked_at"].isoformat() if found["ranked_at"] is not None else None
    return body


@blp.route(f"/<network>/accounts/<{ID}:account_id>/home/rebuild", methods=["POST"])
@blp.response(200, CacheBuiltSchema)
@blp.alt_response(404, description="unknown account")
@blp.doc(**_ADMIN_DOC)
def rebuild_home(network: str, account_id: int):
    """Build an account's home cache from scratch (admin)."""
    _admin()
    _account(network, account_id)
    return home_timeline.build_cache(get_db(), network, account_id)


# -- follow / unfollow ---------------------------------------------------------------------------------------
@blp.route(f"/<network>/accounts/<{ID}:account_id>/follows/<{ID}:target_id>")
class Follow(MethodView):
    """`account_id` follows `target_id` (admin; idempotent: repeating a state answers changed=false)."""

    def _pair(self, network: str, account_id: int, target_id: int) -> tuple[Account, Account]:
        _admin()
        follower, followee = _accounts(network, account_id, target_id, counts=False)  # read after the change
        if account_id == target_id:
            abort(422, message="an account cannot follow itself")
        return follower, followee

    @blp.response(200, FollowResultSchema)
    @blp.alt_response(404, description="unknown account")
    @blp.alt_response(422, description="self-follow")
    @blp.doc(**_ADMIN_DOC)
    def put(self, network: str, account_id: int, target_id: int):
        """`account_id` follows `target_id`."""
        return actions.follow(get_db(), network, *self._pair(network, account_id, target_id))

    @blp.response(200, FollowResultSchema)
    @blp.alt_response(404, description="unknown account")
    @blp.alt_response(422, description="self-unfollow")
    @blp.doc(**_ADMIN_DOC)
    def delete(self, network: str, account_id: int, target_id: int):
        """`account_id` stops following `target_id`."""
        return actions.unfollow(get_db(), network, *self._pair(network, account_id, target_id))


# -- posts (Q5), likes -----------------------------------------------------------------------------------------
@blp.route("/<network>/posts", methods=["POST"])
@blp.arguments(NewPostSchema())
@blp.arguments(PostRequestHeadersSchema(), location="headers", as_kwargs=True)
@blp.response(201, CreatedPostSchema, headers={"Idempotent-Replayed": {
    "description": "`true` when this answer is the post an earlier request with the same Idempotency-Key made",
    "schema": {"type": "string", "enum": ["true"]}}})
@blp.alt_response(404, description="unknown author")
@blp.alt_response(422, description="invalid post, dated more than 5 minutes in the future, or an "
                                   "Idempotency-Key the author used for a different post")
@blp.doc(**_ADMIN_DOC)
def create_post(body: dict, network: str, idempotency_key: str | None):
    """Q5: write a post and fan it out to the home caches of its author's followers (admin)."""
    _admin()
    fields = dict(body)
    author = _account(network, fields.pop("author_id"))
    db = get_db()
    try:
        if idempotency_key is None:
            post, fanned = actions.create_post(db, network, author, fields.pop("content"), **fields)
            return {"post": post, "fanned_out_to": fanned}
        post, fanned, replayed = actions.create_post_once(db, network, author, fields.pop("content"),
                                                          idempotency_key, **fields)
    except (actions.FuturePost, actions.KeyReused) as exc:
        abort(422, message=str(exc))
    return {"post": post, "fanned_out_to": fanned}, {"Idempotent-Replayed": "true"} if replayed else {}


@blp.route(f"/<network>/posts/<{ID}:post_id>")
class OnePost(MethodView):
    @blp.response(200, PostSchema)
    @blp.alt_response(404, description="unknown post")
    @reads_own_writes
    def get(self, network: str, post_id: int):
        """One post."""
        return _post(network, post_id)

    @blp.response(200, DeletedSchema)
    @blp.alt_response(404, description="unknown post")
    @blp.doc(**_ADMIN_DOC)
    @reads_own_writes
    def delete(self, network: str, post_id: int):
        """Delete a post: it leaves every home timeline, the search index and the likes (admin)."""
        _admin()
        liked = actions.delete_post(get_db(), network, _post(network, post_id))
        return {"post_id": post_id, "likes_to_purge": liked}



def _like_endpoint(method: Callable[..., Any]) -> Callable[..., Any]:
    """The documented response of a like change (PUT likes, DELETE unlikes; both admin, both idempotent)."""
    documented = blp.doc(**_ADMIN_DOC)(reads_own_writes(method))
    return blp.response(200, LikeResultSchema)(blp.alt_response(404, description="unknown post or account")(
        documented))


@blp.route(f"/<network>/posts/<{ID}:post_id>/likes/<{ID}:user_id>")
class Like(MethodView):
    """`user_id` likes the post (admin; idempotent)."""

    @staticmethod
    def _change(network: str, post_id: int, user_id: int, change: Callable[..., int]) -> dict[str, int]:
        """Like or unlike (`change`) once the post (with its term buckets, where the count is copied) and the
        liker are known."""
        _admin()
        user_f = accounts.start_get_account(get_db(), _network(network), user_id, counts=False)
        post, buckets = posts.post_and_term_buckets(get_db(), network, post_id)
        if post is None:
            abort(404, message=f"post {post_id} not found in network {network}")
        if accounts.account_from(user_f) is None:
            abort(404, message=f"account {user_id} not found in network {network}")
        count = change(get_db(), network, post, user_id, buckets)
        return {"post_id": post_id, "user_id": user_id, "like_count": count}

    @_like_endpoint
    def put(self, network: str, post_id: int, user_id: int):
        """`user_id` likes the post."""
        return self._change(network, post_id, user_id, actions.like)

    @_like_endpoint
    def delete(self, network: str, post_id: int, user_id: int):
        """`user_id` no longer likes the post."""
        return self._change(network, post_id, user_id, actions.unlike)


# -- Q6 --------------------------------------------------------------------------------------------------------
@blp.route("/<network>/search")
@blp.arguments(SearchArgs(), location="query")
@blp.response(200, SearchResultSchema)
def search_posts(args: dict, network: str):
    """Q6: the 25 most-liked posts containing every given word (case-insensitive)."""
    words = search.parse_query(args["q"])
    found = post_search.search_posts(get_db(), _network(network), words, network_settings().page_size)
    return {"words": words, "posts": found.posts, "exact": found.exact}


# -- Q2 / Q3 ---------------------------------------------------------------------------------------------------
@blp.route("/<network>/rankings", methods=["POST"])
@blp.response(202, RankingJobSchema, headers={"Location": {
    "description": "the job's status endpoint", "schema": {"type": "string"}}})
@blp.doc(**_ADMIN_DOC)
def compute_rankings(network: str):
    """Queue a Q2+Q3 job: it computes both and appends a snapshot to both time series (admin). Answers 202 with
    the job's id at once; `chronicle network worker` runs it; follow it at `status_url` (the periodic command
    `chronicle network rankings` computes in its own process instead)."""
    _admin()
    job = top100.request_rankings(get_db(), _network(network))
    url = url_for("network.ranking_job", network=network, job_id=job["job_id"])
    return {**job, "status_url": url}, {"Location": url}


@blp.route("/<network>/rankings/jobs/<uuid:job_id>")
@blp.response(200, RankingJobSchema)
@blp.alt_response(404, description="unknown job (or older than 30 days)")
def ranking_job(network: str, job_id: uuid.UUID):
    """The status of a Q2+Q3 job: queued, running, done (with its snapshot) or failed."""
    found = None
    if job_id.version == 1:  # job ids are time-based: any other UUID is unknown, never a driver error
        found = rankings.job_status(get_db(), _network(network), job_id)
    if found is None:
        abort(404, message=f"no ranking job {job_id} in network {network}")
    return {**found, "status_url": url_for("network.ranking_job", network=network, job_id=found["job_id"])}


@blp.route("/<network>/rankings/<any('top-accounts', 'top-followers'):ranking>")
@blp.arguments(SnapshotArgs(), location="query")
@blp.response(200, SnapshotSchema)
@blp.alt_response(404, description="no snapshot at that time")
def ranking(args: dict, network: str, ranking: str):
    """Q2 (`top-accounts`: the 100 accounts with the most followers) or Q3 (`top-followers`: the 100 accounts
    following the most of the Q2 accounts), from the latest snapshot or the one in force at `at`."""
    at = args["at"]
    found = rankings.snapshots(get_db(), _network(network), RANKINGS[ranking], at=at, limit=1)
    if not found:
        abort(404, message="no snapshot" + (f" at or before {at.isoformat()}" if at else " yet: run the rankings "
                                             "job (POST /networks/<network>/rankings)"))
    return found[0]


@blp.route("/<network>/rankings/<any('top-accounts', 'top-followers'):ranking>/history")
@blp.arguments(HistoryArgs(), location="query")
@blp.response(200, HistorySchema)
def ranking_history(args: dict, network: str, ranking: str):
    """Q2 or Q3 snapshots, newest first."""
    return {"snapshots": rankings.snapshots(get_db(), _network(network), RANKINGS[ranking], at=args["at"],
                                            limit=args["limit"])}
