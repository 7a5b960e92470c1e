"""Retention policies, legal holds and retention run reports over HTTP (admin only). Runs themselves are started
by `chronicle retention run` (a scheduled job): they can take minutes, which no request should hold."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from flask import current_app, request
from flask_smorest import Blueprint
from marshmallow import Schema, ValidationError, fields, validate, validates

from api.auth import require_admin
from api.db import get_db
from api.errors import InvalidInput
from api.network.common import NETWORK_PATTERN, valid_network_name
from api.retention import network as network_retention
from api.retention import policies
from api.retention import slack as slack_retention
from api.slack.codec import ID_PATTERN, is_slack_id
from api.slack.schemas import path_parameters

_TARGET = [{"in": "path", "name": "target", "required": True, "description": "'*' (the workspace) or a channel id",
            "schema": {"type": "string", "pattern": rf"^\*$|{ID_PATTERN}"}}]
_HOLD_ID = [{"in": "path", "name": "hold_id", "required": True, "description": "a hold's id (a time UUID)",
             "schema": {"type": "string", "format": "uuid"}}]

blp = Blueprint("retention", __name__, url_prefix="/admin/retention",
                description="Retention policies, legal holds and retention runs (admin)")


def admins_only(blueprint: Blueprint) -> None:
    """Every route of an admin blueprint (retention, erasure) refuses without the admin token, before its
    arguments are parsed: a request without it is a 401/403, never a 422."""
    blueprint.before_request(lambda: require_admin(current_app.config["CHRONICLE_SETTINGS"]))


def admin_documented(blueprint: Blueprint) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator documenting an admin route's bearer scheme and its 401/403 refusals."""
    def document(func: Callable[..., Any]) -> Callable[..., Any]:
        for status, why in ((401, "no bearer token"), (403, "not the admin token")):
            func = blueprint.alt_response(status, description=why)(func)
        return blueprint.doc(security=[{"bearer": []}])(func)
    return document


def slack_archive(team_id: str) -> str:
    """The archive name of a Slack workspace id from a path (400 when it is not one)."""
    if not is_slack_id(team_id):
        raise InvalidInput(f"{team_id!r} is not a Slack workspace id")
    return f"slack:{team_id}"


def network_archive(network: str) -> str:
    """The archive name of a follower network from a path (400 when it is not a network name)."""
    if not valid_network_name(network):
        raise InvalidInput(f"{network!r} is not a network name")
    return f"network:{network}"


def parse_id(value: str, what: str) -> uuid.UUID:
    """A UUID from a path (a hold's, an erasure request's): 400 naming what it should have been."""
    try:
        return uuid.UUID(value)
    except ValueError:
        raise InvalidInput(f"{value!r} is not {what}") from None


def _release(archive: str, hold_id: str) -> Any:
    return policies.release_hold(get_db(), archive, parse_id(hold_id, "a hold id"), by="admin", via="rest",
                                 remote=request.remote_addr)


NETWORK_PATH = [{"in": "path", "name": "network", "required": True, "description": "a follower network's name",
                 "schema": {"type": "string", "pattern": NETWORK_PATTERN}}]

admins_only(blp)
_archive = slack_archive


class PolicySchema(Schema):
    target = fields.String(required=True, metadata={"description": "'*' (the workspace) or a channel id"})
    keep_days = fields.Integer(required=True, metadata={"description": "days kept; 0: forever"})
    set_by = fields.String(required=True)
    set_at = fields.DateTime(required=True)


class PolicyArgs(Schema):
    keep_days = fields.Integer(required=True, strict=True, validate=validate.Range(0, policies.MAX_KEEP_DAYS),
                               metadata={"description": "days to keep; 0 keeps forever"})


class HoldSchema(Schema):
    hold_id = fields.UUID(required=True)
    scope = fields.String(required=True, metadata={"description": "archive, channel or user"})
    target = fields.String(required=True, metadata={"description": "the channel or user id ('' for the archive)"})
    reason = fields.String(required=True)
    created_by = fields.String(required=True)
    created_at = fields.DateTime(required=True)
    released_by = fields.String(allow_none=True)
    released_at = fields.DateTime(allow_none=True)
    active = fields.Boolean(required=True)


class HoldArgs(Schema):
    scope = fields.String(required=True, validate=validate.OneOf(policies.SCOPES["slack"]))
    target = fields.String(load_default="", validate=validate.Length(max=64))
    reason = fields.String(required=True, validate=validate.Length(1, 1000))

    @validates("target")
    def _target(self, value: str, **_kwargs: Any) -> None:
        if value and not is_slack_id(value):
            raise ValidationError("a channel or user id")


class NetworkHoldArgs(Schema):
    scope = fields.String(required=True, validate=validate.OneOf(policies.SCOPES["network"]))
    target = fields.String(load_default="", validate=validate.Regexp(r"^[0-9]{0,19}$"),
                           metadata={"description": "the account id ('' for the network)"})
    reason = fields.String(required=True, validate=validate.Length(1, 1000))


class RunSchema(Schema):
    run_id = fields.UUID(required=True)
    dry_run = fields.Boolean(required=True)
    state = fields.String(required=True, metadata={"description": "running, done or failed"})
    started_at = fields.DateTime(required=True)
    finished_at = fields.DateTime(allow_none=True)
    counts = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True,
                         metadata={"description": "what went (or would go), by kind"})
    held = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True,
                       metadata={"description": "what a hold kept, by kind and hold"})


class RetentionSchema(Schema):
    policies = fields.List(fields.Nested(PolicySchema), required=True)
    holds = fields.List(fields.Nested(HoldSchema), required=True)
    runs = fields.List(fields.Nested(RunSchema), required=True, metadata={"description": "newest first, 20"})
    plan = fields.Dict(required=True, metadata={
        "description": "what the next run would use: each channel's first kept day, the day before which the "
                       "whole workspace goes, the channels kept forever"})


_documented = admin_documented(blp)


@blp.route("/slack/<team_id>", parameters=path_parameters("team_id"))
@blp.response(200, RetentionSchema)
@blp.alt_response(400, description="not a Slack workspace id")
@_documented
def show(team_id: str):
    """A workspace's policies, holds (released ones too), newest runs and the next run's plan."""
    archive = _archive(team_id)
    db = get_db()
    return {"policies": list(policies.policies(db, archive).values()), "holds": policies.holds(db, archive),
            "runs": policies.runs(db, archive),
            "plan": slack_retention.plan(db, team_id).to_json()}


@blp.route("/slack/<team_id>/policies/<target>", methods=["PUT"], parameters=[*path_parameters("team_id"), *_TARGET])
@blp.arguments(PolicyArgs())
@blp.response(200, PolicySchema)
@blp.alt_response(400, description="not a workspace id, or neither '*' nor a channel id")
@blp.alt_response(422, description="keep_days missing or out of range")
@_documented
def put_policy(args: dict[str, Any], team_id: str, target: str):
    """Keep the workspace's ('*') or one channel's messages `keep_days` days (0: forever); the next run applies
    it."""
    archive = _archive(team_id)
    if target != policies.WHOLE and not is_slack_id(target):
        raise InvalidInput(f"{target!r} is neither '*' nor a channel id")
    return policies.set_policy(get_db(), archive, target, args["keep_days"], by="admin")


@blp.route("/slack/<team_id>/holds", methods=["POST"], parameters=path_parameters("team_id"))
@blp.arguments(HoldArgs())
@blp.response(201, HoldSchema)
@blp.alt_response(400, description="not a workspace id, or a scope without its target (or with one for the "
                                   "archive)")
@blp.alt_response(422, description="an unknown scope, a target that is no Slack id, no reason")
@_documented
def create_hold(args: dict[str, Any], team_id: str):
    """Place a legal hold (recorded in the audit log): what it covers survives retention and erasure."""
    hold = policies.create_hold(get_db(), _archive(team_id), args["scope"], args["target"], args["reason"],
                                by="admin", via="rest", remote=request.remote_addr)
    return hold


@blp.route("/slack/<team_id>/holds/<hold_id>/release", methods=["POST"],
           parameters=[*path_parameters("team_id"), *_HOLD_ID])
@blp.response(200, HoldSchema)
@blp.alt_response(404, description="no such hold")
@blp.alt_response(400, description="not a workspace id or a hold id")
@_documented
def release_hold(team_id: str, hold_id: str):
    """Release a hold (recorded in the audit log); releasing a released hold changes nothing."""
    archive = _archive(team_id)
    return _release(archive, hold_id)


# -- follower networks ----------------------------------------------------------------------------------------------
@blp.route("/network/<network>", parameters=NETWORK_PATH)
@blp.response(200, RetentionSchema)
@blp.alt_response(400, description="not a network name")
@_documented
def show_network(network: str):
    """A network's policy, holds (released ones too), newest runs and the next run's plan."""
    archive = network_archive(network)
    db = get_db()
    return {"policies": list(policies.policies(db, archive).values()), "holds": policies.holds(db, archive),
            "runs": policies.runs(db, archive), "plan": network_retention.plan(db, network).to_json()}


@blp.route("/network/<network>/policy", methods=["PUT"], parameters=NETWORK_PATH)
@blp.arguments(PolicyArgs())
@blp.response(200, PolicySchema)
@blp.alt_response(400, description="not a network name")
@blp.alt_response(422, description="keep_days missing or out of range")
@_documented
def put_network_policy(args: dict[str, Any], network: str):
    """Keep the network's posts `keep_days` days (0: forever); the next `chronicle retention run --network`
    applies it."""
    return policies.set_policy(get_db(), network_archive(network), policies.WHOLE, args["keep_days"], by="admin")


@blp.route("/network/<network>/holds", methods=["POST"], parameters=NETWORK_PATH)
@blp.arguments(NetworkHoldArgs())
@blp.response(201, HoldSchema)
@blp.alt_response(400, description="not a network name, or a scope without its target (or with one for the "
                                   "network)")
@blp.alt_response(422, description="an unknown scope, a target that is no account id, no reason")
@_documented
def create_network_hold(args: dict[str, Any], network: str):
    """Place a legal hold on the network or an account (recorded in the audit log)."""
    return policies.create_hold(get_db(), network_archive(network), args["scope"], args["target"], args["reason"],
                                by="admin", via="rest", remote=request.remote_addr)


@blp.route("/network/<network>/holds/<hold_id>/release", methods=["POST"], parameters=[*NETWORK_PATH, *_HOLD_ID])
@blp.response(200, HoldSchema)
@blp.alt_response(404, description="no such hold")
@blp.alt_response(400, description="not a network name or a hold id")
@_documented
def release_network_hold(network: str, hold_id: str):
    """Release a hold (recorded in the audit log); releasing a released hold changes nothing."""
    archive = network_archive(network)
    return _release(archive, hold_id)
