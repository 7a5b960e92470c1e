"""Erasure requests over HTTP (admin only): start one (it runs in the background of this process and can take
minutes), follow it in the ledger, or count what it would change. A request cut short by a restart is resumed
by posting it again (or by `chronicle erase`)."""

from __future__ import annotations

import threading
from typing import Any

import structlog
from flask import request
from flask_smorest import Blueprint
from marshmallow import Schema, fields, validate

from api import audit
from api.db import get_db
from api.erasure import ledger
from api.erasure import network as network_erasure
from api.erasure import slack as slack_erasure
from api.retention.http import NETWORK_PATH, admin_documented, admins_only, network_archive, parse_id, slack_archive
from api.slack.codec import ID_PATTERN
from api.slack.files import store_from_settings
from api.slack.schemas import path_parameters

log = structlog.get_logger("chronicle.erasure")

_REQUEST_ID = [{"in": "path", "name": "request_id", "required": True, "description": "an erasure request's id",
                "schema": {"type": "string", "format": "uuid"}}]

blp = Blueprint("erasure", __name__, url_prefix="/admin/erasures",
                description="Erasure of a person, its ledger and proof (admin)")


admins_only(blp)
_archive = slack_archive
_documented = admin_documented(blp)


class EraseArgs(Schema):
    user = fields.String(required=True, validate=validate.Regexp(ID_PATTERN), metadata={
        "description": "the person's Slack user id"})


class EraseAccountArgs(Schema):
    account_id = fields.Integer(required=True, strict=True, validate=validate.Range(min=0, max=2**63 - 1),
                                metadata={"description": "the network account's id"})


class RequestSchema(Schema):
    request_id = fields.UUID(required=True)
    archive = fields.String(required=True)
    state = fields.String(required=True, metadata={"description": "running, done, failed or held"})
    requested_by = fields.String(required=True)
    requested_at = fields.DateTime(required=True)
    finished_at = fields.DateTime(allow_none=True)
    channels = fields.Integer(required=True, metadata={
        "description": "channels whose messages it changed (Slack); places the ledger lists (network)"})
    counts = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True)
    held = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True)
    proof = fields.Dict(allow_none=True, metadata={"description": "the proof check: traces per table, clean"})


class DryRunSchema(Schema):
    counts = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True)
    held = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True)
    refused_by_hold = fields.String(allow_none=True, metadata={
        "description": "archive, user or account: a hold refuses it"})


class RequestsSchema(Schema):
    requests = fields.List(fields.Nested(RequestSchema), required=True, metadata={"description": "newest first"})


def _shown(found: ledger.Request) -> dict[str, Any]:
    """A request as the schema dumps it (datetimes, not strings)."""
    return {**found.to_json(), "requested_at": found.requested_at, "finished_at": found.finished_at}


@blp.route("/slack/<team_id>", parameters=path_parameters("team_id"))
@blp.response(200, RequestsSchema)
@blp.alt_response(400, description="not a Slack workspace id")
@_documented
def listing(team_id: str):
    """The workspace's erasure requests, newest first (the ledger names no one)."""
    return {"requests": [_shown(r) for r in ledger.requests(get_db(), _archive(team_id))]}


@blp.route("/slack/<team_id>/requests/<request_id>", parameters=[*path_parameters("team_id"), *_REQUEST_ID])
@blp.response(200, RequestSchema)
@blp.alt_response(400, description="not a workspace id or a request id")
@blp.alt_response(404, description="no such request")
@_documented
def one(team_id: str, request_id: str):
    """One erasure request: its state, what it did, what holds kept, its proof."""
    return _one(_archive(team_id), request_id)


def _one(archive: str, request_id: str) -> dict[str, Any]:
    return _shown(ledger.get(get_db(), archive, parse_id(request_id, "a request id")))


@blp.route("/slack/<team_id>/dry-run", methods=["POST"], parameters=path_parameters("team_id"))
@blp.arguments(EraseArgs())
@blp.response(200, DryRunSchema)
@blp.alt_response(400, description="not a Slack workspace id")
@blp.alt_response(422, description="no user, or not a Slack user id")
@_documented
def dry_run(args: dict[str, Any], team_id: str):
    """What erasing the person would change (counts) and what holds would keep; nothing is written."""
    _archive(team_id)
    return slack_erasure.dry_run(get_db(), team_id, args["user"])


@blp.route("/slack/<team_id>", methods=["POST"], parameters=path_parameters("team_id"))
@blp.arguments(EraseArgs())
@blp.response(202, RequestSchema)
@blp.alt_response(400, description="not a Slack workspace id")
@blp.alt_response(422, description="no user, or not a Slack user id")
@_documented
def start(args: dict[str, Any], team_id: str):
    """Erase a person (recorded in the audit log): answers at once with the ledger row; the erasure runs in the
    background and its row says when it is done, with its proof."""
    archive = _archive(team_id)
    db = get_db()
    user = args["user"]
    audit.record(db, actor="admin", via="rest", action="erase", target=archive, status=202,
                 remote=request.remote_addr)
    files = store_from_settings(db.settings.slack)
    return _in_background(archive, user, lambda: slack_erasure.erase(db, team_id, user, requested_by="admin",
                                                                     files=files))


def _in_background(archive: str, person: str, erase: Any) -> dict[str, Any]:
    """The person's open request (or a new one), answered at once; `erase` runs in a thread of this process."""
    db = get_db()
    started = ledger.find(db, archive, person)
    if started is None or started.state not in (ledger.RUNNING, ledger.FAILED):
        started = ledger.start(db, archive, person, "admin")

    def work() -> None:
        try:
            erase()
        except Exception as exc:  # noqa: BLE001 - recorded as failed in the ledger; resumed by posting again
            log.error("erasure_failed", archive=archive, error=repr(exc)[:300])

    threading.Thread(target=work, name=f"erasure-{started.request_id}", daemon=True).start()
    return _shown(started)


# -- follower networks ----------------------------------------------------------------------------------------------
_NETWORK = NETWORK_PATH
_network_archive = network_archive


@blp.route("/network/<network>", parameters=_NETWORK)
@blp.response(200, RequestsSchema)
@blp.alt_response(400, description="not a network name")
@_documented
def network_listing(network: str):
    """The network's erasure requests, newest first (the ledger names no one)."""
    return {"requests": [_shown(r) for r in ledger.requests(get_db(), _network_archive(network))]}


@blp.route("/network/<network>/requests/<request_id>", parameters=[*_NETWORK, *_REQUEST_ID])
@blp.response(200, RequestSchema)
@blp.alt_response(400, description="not a network name or a request id")
@blp.alt_response(404, description="no such request")
@_documented
def network_one(network: str, request_id: str):
    """One erasure request: its state, what it did, its proof."""
    return _one(_network_archive(network), request_id)


@blp.route("/network/<network>/dry-run", methods=["POST"], parameters=_NETWORK)
@blp.arguments(EraseAccountArgs())
@blp.response(200, DryRunSchema)
@blp.alt_response(400, description="not a network name")
@blp.alt_response(422, description="no account id, or not one")
@_documented
def network_dry_run(args: dict[str, Any], network: str):
    """What erasing the account would change (counts); nothing is written."""
    _network_archive(network)
    return network_erasure.dry_run(get_db(), network, args["account_id"])


@blp.route("/network/<network>", methods=["POST"], parameters=_NETWORK)
@blp.arguments(EraseAccountArgs())
@blp.response(202, RequestSchema)
@blp.alt_response(400, description="not a network name")
@blp.alt_response(422, description="no account id, or not one")
@_documented
def network_start(args: dict[str, Any], network: str):
    """Erase a network account (recorded in the audit log): answers at once with the ledger row; the erasure runs
    in the background and its row says when it is done, with its proof."""
    archive = _network_archive(network)
    db = get_db()
    account = args["account_id"]
    audit.record(db, actor="admin", via="rest", action="erase", target=archive, status=202,
                 remote=request.remote_addr)
    return _in_background(archive, str(account), lambda: network_erasure.erase(db, network, account,
                                                                               requested_by="admin"))
