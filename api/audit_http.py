"""The access audit log over HTTP: every GET of archive content is recorded after its answer (`install`), and
admins read a time range at GET /admin/audit (api/audit.py owns the table)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import Flask, Request, Response, current_app, request
from flask_smorest import Blueprint, abort
from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from api import audit
from api.auth import require_admin
from api.config import Settings
from api.db import get_db
from api.network.schemas import UtcDateTime
from api.paging import sign_cursor, verify_cursor

# The blueprints whose GETs read archive content: the REST reads and the archive pages (not sign-in, health,
# docs, assets or the Events endpoint).
AUDITED = frozenset({"slack", "slack_files", "slack_reports", "network", "activity", "tagging", "archive_pages",
                     "archive_networks", "archive_reports"})
_PAGES = frozenset({"archive_pages", "archive_networks", "archive_reports"})
_SCOPE = "audit"

blp = Blueprint("audit", __name__, url_prefix="/admin",
                description="Who read what: the access audit log (admin)")


def _settings() -> Settings:
    return current_app.config["CHRONICLE_SETTINGS"]


@blp.before_request
def _admins_only() -> None:
    # Before the arguments are parsed: a request without the admin token is a 401/403, never a 422.
    require_admin(_settings())


def install(app: Flask) -> None:
    """Record every GET of an audited blueprint once it is answered (whatever the status: refusals too)."""

    @app.after_request
    def _audit(response: Response) -> Response:
        req = request._get_current_object()  # type: ignore[attr-defined]  # once, not through the proxy each time
        if req.method != "GET" or req.blueprint not in AUDITED:
            return response
        settings = _settings()
        if settings.audit:
            pages = req.blueprint in _PAGES
            token = _token(req, pages)
            actor = ("admin" if settings.admin_token and token == settings.admin_token
                     else "token" if token else "anonymous")
            rule = req.url_rule.rule if req.url_rule else req.path
            audit.record(get_db(), actor=actor, via="pages" if pages else "rest", action=f"GET {rule}",
                         target=req.full_path.rstrip("?"), status=response.status_code, token=token,
                         remote=req.remote_addr)
        return response


def _token(req: Request, pages: bool) -> str | None:
    if pages:
        from api.viewer.session import COOKIE

        return req.cookies.get(COOKIE) or None
    scheme, _, token = req.headers.get("Authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class AuditArgs(Schema):
    since = UtcDateTime(required=True, data_key="from", metadata={"description": "start of the range (RFC 3339)"})
    until = UtcDateTime(required=True, data_key="to",
                        metadata={"description": f"end of the range, excluded; at most {audit.MAX_RANGE_DAYS} days "
                                                 "after `from`"})
    limit = fields.Integer(load_default=100, validate=validate.Range(1, 1000))
    cursor = fields.String(load_default=None, validate=validate.Length(max=512),
                           metadata={"description": "the `next_cursor` of the previous page"})

    @validates_schema
    def _range(self, data: dict[str, Any], **_kwargs: Any) -> None:
        since, until = data.get("since"), data.get("until")
        if since is not None and until is not None:
            if until <= since:
                raise ValidationError("`to` must be after `from`", "to")
            if (until - since).total_seconds() > audit.MAX_RANGE_DAYS * 86_400:
                raise ValidationError(f"at most {audit.MAX_RANGE_DAYS} days a request", "to")


class AuditEntrySchema(Schema):
    at = fields.DateTime(required=True)
    entry_id = fields.String(required=True)
    actor = fields.String(required=True, metadata={"description": "admin, token, anonymous or cli:<user>"})
    token_id = fields.String(allow_none=True, metadata={
        "description": "the first 16 hex digits of the token's SHA-256 (never the token)"})
    via = fields.String(required=True, metadata={"description": "rest, pages or cli"})
    action = fields.String(required=True)
    target = fields.String(required=True)
    status = fields.Integer(required=True)
    remote = fields.String(allow_none=True)


class AuditPageSchema(Schema):
    entries = fields.List(fields.Nested(AuditEntrySchema), required=True)
    next_cursor = fields.String(allow_none=True)


@blp.route("/audit")
@blp.arguments(AuditArgs(), location="query")
@blp.response(200, AuditPageSchema)
@blp.alt_response(400, description="invalid cursor (not the next_cursor of this range)")
@blp.alt_response(401, description="no bearer token")
@blp.alt_response(403, description="not the admin token")
@blp.doc(security=[{"bearer": []}])
def list_entries(args: dict[str, Any]):
    """Who read what in [from, to) (admin): the audit log's entries in time order, `limit` a page."""
    since_us = int(args["since"].timestamp() * 1_000_000)
    until_us = int(args["until"].timestamp() * 1_000_000)
    scope = f"{_SCOPE}|{since_us}|{until_us}"
    after = None
    if args["cursor"]:
        position = verify_cursor(args["cursor"], _settings().cursor_secret, scope)
        try:
            after = (int(position["t"]), str(position["e"]))
        except (KeyError, TypeError, ValueError):
            abort(400, message="invalid cursor")
    found = audit.entries(get_db(), since_us, until_us, args["limit"] + 1, after)
    page, more = found[:args["limit"]], len(found) > args["limit"]
    next_cursor = (sign_cursor({"t": page[-1].at_us, "e": page[-1].entry_id}, _settings().cursor_secret, scope)
                   if more else None)
    return {"entries": [{**e.__dict__, "at": datetime.fromtimestamp(e.at_us / 1_000_000, UTC)} for e in page],
            "next_cursor": next_cursor}
