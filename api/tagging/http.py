"""HTTP surface of tagging (docs/tagging.md): project definition, next, submit, skip, missing, disable,
verify, item, review list, statistics and keyword completion.

A call that the pages' cookie authenticates (no `Authorization: Bearer`) and that changes something must come
from Chronicle's own pages (api/csrf.py): same origin, `Content-Type: application/json` (else 415) and the page's
`X-CSRF-Token` (else 403). Bearer-token calls need none of this."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from flask import current_app
from flask_smorest import Blueprint, abort

from api import csrf
from api.context import get_db
from api.db import reads_own_writes
from api.slack.schemas import error_responses
from api.tagging import access, effort, projects, service
from api.tagging.projects import Member
from api.tagging.schemas import (
    PROJECT_PATTERN,
    ItemAnswerSchema,
    ItemsSchema,
    KeywordArgs,
    KeywordsSchema,
    LeaseArgs,
    MeSchema,
    MissingArgs,
    NextSchema,
    ProjectSchema,
    ReviewArgs,
    StatsSchema,
    SubmitArgs,
    VerifyArgs,
    project_parameter,
)

blp = Blueprint("tagging", __name__, description="Tagging projects over the archive: queue, leases, QA, figures")

_ERRORS = {400: "the body is not JSON", 401: "missing or unknown token",
           403: "the token belongs to another project, or its role may not do this",
           404: "no such project or item", 409: "the lease is no longer yours (the reason is given)",
           422: "invalid parameters (the reason is given)", 503: "database unavailable"}
_errors = error_responses(blp, _ERRORS)
csrf.protect(blp, session_cookie=access.COOKIE, cookie_path="/tagging", body="json")
_SEQ = "<int(max=2147483647):seq>"
_VALID_PROJECT = re.compile(PROJECT_PATTERN)


def _member(project: str, roles: tuple[str, ...] = ("tagger", "qa", "admin")) -> Member:
    member = access.require_member(current_app.config["CHRONICLE_SETTINGS"], project, roles)
    if not _VALID_PROJECT.match(project) or projects.get_cached(get_db(), project) is None:
        abort(404, message=f"no project {project}")
    return member


def _run(step: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return step()
    except service.Refused as exc:
        abort(exc.status, message=exc.message)


@blp.route("/tagging/me", methods=["GET"])
@blp.response(200, MeSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 404, 503, e404="the admin token is no project's member")
def me():
    """Who the token belongs to: project, user, team and role."""
    token = access.token_of_request()
    if token is None:
        abort(401, message="missing token: send 'Authorization: Bearer <token>' or sign in at /tagging")
    member = access.member_for_token(token)
    if member is None:
        settings = current_app.config["CHRONICLE_SETTINGS"]
        if settings.admin_token and token == settings.admin_token:
            abort(404, message="the admin token is no project's member")
        abort(401, message="unknown token")
    return {"project": member.project, "user": member.user, "team": member.team, "role": member.role}


@blp.route("/tagging/projects/<project>", methods=["GET"], parameters=project_parameter())
@blp.response(200, ProjectSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 503)
def project_definition(project: str):
    """The project: source, category lists, queue size, lease length, hold limit, teams and quotas."""
    _member(project)
    found = _run(lambda: service.project_of(get_db(), project).to_json())
    teams = projects.teams(get_db(), project)
    return {**found, "teams": [{"team": t, "quota": q} for t, q in sorted(teams.items())]}


@blp.route("/tagging/projects/<project>/next", methods=["POST"], parameters=project_parameter())
@blp.response(200, NextSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 503)
def next_item(project: str):
    """The caller's own unfinished item first (its lease renewed: a reload shows the same item), otherwise a
    new item from the queue under a lease. `item` is null with a `reason` when nothing can be handed out (the
    queue is empty, the team's quota is used, or the caller holds the most items allowed)."""
    member = _member(project, ("tagger", "admin"))
    return _run(lambda: service.next_item(get_db(), member))


@blp.route(f"/tagging/projects/<project>/items/{_SEQ}", methods=["GET"], parameters=project_parameter())
@blp.response(200, ItemAnswerSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 503)
@reads_own_writes
def item(project: str, seq: int):
    """One item with its state, effort and source (a tagger sees only items they hold or tagged)."""
    member = _member(project)
    return {"item": _run(lambda: service.get_item(get_db(), member, seq))}


@blp.route(f"/tagging/projects/<project>/items/{_SEQ}/submit", methods=["POST"], parameters=project_parameter())
@blp.arguments(SubmitArgs())
@blp.response(200, ItemAnswerSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(400, 401, 403, 404, 409, 422, 503)
def submit(args: dict[str, Any], project: str, seq: int):
    """Tag the held item. Idempotent: a retry with the same lease answers the stored result. 409 when the lease
    expired and the item went back to the queue or to someone else; 422 for a category or subcategory that is
    not in the project's lists."""
    member = _member(project, ("tagger", "admin"))
    return _run(lambda: service.submit(get_db(), member, seq, args["lease_id"], args["categories"],
                                       args["subcategories"], args["keywords"]))


@blp.route(f"/tagging/projects/<project>/items/{_SEQ}/skip", methods=["POST"], parameters=project_parameter())
@blp.arguments(LeaseArgs())
@blp.response(200, ItemAnswerSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(400, 401, 403, 404, 409, 422, 503)
def skip(args: dict[str, Any], project: str, seq: int):
    """Give the held item back to the queue."""
    member = _member(project, ("tagger", "admin"))
    return _run(lambda: service.skip(get_db(), member, seq, args["lease_id"]))


@blp.route(f"/tagging/projects/<project>/items/{_SEQ}/missing", methods=["POST"], parameters=project_parameter())
@blp.arguments(MissingArgs())
@blp.response(200, ItemAnswerSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(400, 401, 403, 404, 409, 422, 503)
def missing(args: dict[str, Any], project: str, seq: int):
    """Report that the item's message or post is gone from the archive (the holder, with its lease; or an
    admin): the item becomes SourceMissing."""
    member = _member(project, ("tagger", "admin"))
    if member.role != "admin" and "lease_id" not in args:
        abort(422, message="lease_id is required (only an admin reports without a lease)")
    return _run(lambda: service.report_missing(get_db(), member, seq, args.get("lease_id")))


@blp.route(f"/tagging/projects/<project>/items/{_SEQ}/disable", methods=["POST"], parameters=project_parameter())
@blp.response(200, ItemAnswerSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 409, 503)
def disable(project: str, seq: int):
    """Take a New or InProgress item out of the project (admin)."""
    member = _member(project, ("admin",))
    return _run(lambda: service.disable(get_db(), member, seq))


@blp.route(f"/tagging/projects/<project>/items/{_SEQ}/verify", methods=["POST"], parameters=project_parameter())
@blp.arguments(VerifyArgs())
@blp.response(200, ItemAnswerSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(400, 401, 403, 404, 409, 422, 503)
def verify(args: dict[str, Any], project: str, seq: int):
    """QA: mark a Tagged item's tagging Correct or Incorrect, with a note. A retry with the same result
    answers the stored verification; a second, different verification is 409."""
    member = _member(project, ("qa", "admin"))
    return _run(lambda: service.verify(get_db(), member, seq, args["result"], args["note"]))


@blp.route("/tagging/projects/<project>/review", methods=["GET"], parameters=project_parameter())
@blp.arguments(ReviewArgs(), location="query")
@blp.response(200, ItemsSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 422, 503)
def review(args: dict[str, Any], project: str):
    """Tagged items waiting for verification, oldest first (QA, admin)."""
    member = _member(project, ("qa", "admin"))
    return _run(lambda: service.review_list(get_db(), member, args["limit"]))


@blp.route("/tagging/projects/<project>/stats", methods=["GET"], parameters=project_parameter())
@blp.response(200, StatsSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 503)
def stats(project: str):
    """Live figures: project totals, per team and per person, the five most used keywords, categories and
    subcategories, and people online (active in the last five minutes)."""
    _member(project)
    return _run(lambda: service.stats(get_db(), project))


@blp.route("/tagging/projects/<project>/keywords", methods=["GET"], parameters=project_parameter())
@blp.arguments(KeywordArgs(), location="query")
@blp.response(200, KeywordsSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 422, 503)
def keywords(args: dict[str, Any], project: str):
    """Keywords of the project's vocabulary starting with `prefix` (normalised like submitted keywords; two
    characters at least, fewer answer an empty list), in order."""
    _member(project)
    return {"keywords": effort.complete(get_db(), project, args["prefix"], args["limit"])}
