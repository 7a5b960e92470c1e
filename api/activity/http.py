"""HTTP surface of activity days: a Slack user's or a network account's days, a range (at most 31 days) or a
list of dates, with the events or per-kind counts."""

from __future__ import annotations

from typing import Any

from flask import current_app
from flask_smorest import Blueprint, abort
from marshmallow import ValidationError

from api.activity import codec, service
from api.activity.schemas import ActivityArgs, ActivitySchema, asked_days
from api.activity.service import Archive
from api.auth import require_workspace
from api.context import get_db
from api.network import accounts
from api.network.common import valid_network_name
from api.slack import channels
from api.slack.codec import is_slack_id
from api.slack.schemas import error_responses, path_parameters

blp = Blueprint("activity", __name__, description="Per-account, per-day activity (Slack users, network accounts)")

_ERRORS = {401: "missing or unknown token", 403: "token not allowed for this workspace",
           404: "no such workspace, user, network or account", 422: "invalid parameters (the reason is given)",
           500: "a stored day this version cannot decode (unknown codec or format)", 503: "database unavailable"}


_errors = error_responses(blp, _ERRORS)


def _answer(archive: Archive, account: str, args: dict[str, Any], hidden: frozenset[str] = frozenset()
            ) -> dict[str, Any]:
    try:
        days, contiguous = asked_days(args)
    except ValidationError as exc:
        abort(422, message="invalid parameters", errors={"query": exc.normalized_messages()})
    db = get_db()
    zone = archive.time_zones(db, [account])[account]
    try:
        found = service.read(db, archive, account, days, contiguous=contiguous, summary=args["summary"],
                             hidden_channels=hidden)
    except codec.UnknownCodec as exc:
        abort(500, message=f"stored activity day unreadable: {exc}")
    return {"archive": archive.name, "account": account, "time_zone": zone, "days": found}


@blp.route("/slack/teams/<team_id>/users/<user_id>/activity", methods=["GET"],
           parameters=path_parameters("team_id", "user_id"))
@blp.arguments(ActivityArgs(), location="query")
@blp.response(200, ActivitySchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 422, 500, 503)
def slack_user_activity(args: dict[str, Any], team_id: str, user_id: str):
    """A Slack user's activity days in their time zone: messages, replies, edits, deletes, reactions given and
    received, files, joins, leaves, renames. Events in private-converted channels need the private scope."""
    if not is_slack_id(team_id) or not is_slack_id(user_id):
        abort(404, message="no such id")
    grant = require_workspace(current_app.config["CHRONICLE_SETTINGS"], team_id)
    # The one private-channel set (channels.py, cached in db.caches): search and the pages hide the same ones.
    hidden = frozenset() if grant.private else channels.private_channels(get_db(), team_id)
    return _answer(Archive.slack(team_id), user_id, args, hidden)


@blp.route("/networks/<network>/accounts/<int(max=9223372036854775807):account_id>/activity", methods=["GET"])
@blp.arguments(ActivityArgs(), location="query")
@blp.response(200, ActivitySchema)
@_errors(404, 422, 500, 503)
def network_account_activity(args: dict[str, Any], network: str, account_id: int):
    """A network account's activity days in the network's time zone: posts, likes given and received, follows
    and unfollows (both directions)."""
    if not valid_network_name(network):
        abort(404, message="unknown network (names are 1-64 letters, digits, '_' or '-')")
    if accounts.get_account(get_db(), network, account_id) is None:
        abort(404, message=f"account {account_id} not found in network {network}")
    return _answer(Archive.network(network), str(account_id), args)
