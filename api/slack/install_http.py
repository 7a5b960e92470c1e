"""The browser side of the Slack app install (docs/slack-app.md): GET /slack/install shows the "Add to Slack"
button (a fresh single-use state, also set as an HttpOnly cookie scoped to /slack/, so the redirect must come
back to the browser that started); GET /slack/oauth_redirect finishes the install (oauth.py) and shows what
happened. Pages, not API operations (outside the OpenAPI document, like the archive's pages); their query
arguments are checked with a marshmallow schema, and every refusal is a page with its status, never a 500.
"""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, make_response, render_template, request
from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate

from api.context import get_db
from api.pages import PageError, error_pages, secure
from api.slack import oauth

_API_DIR = Path(__file__).resolve().parents[1]
STATE_COOKIE = "chronicle_slack_oauth_state"

bp = Blueprint("slack_install", __name__, template_folder=str(_API_DIR / "templates"))
bp.after_request(secure)


class RedirectArgs(Schema):
    """What Slack appends to the redirect URL: state and code, or state and error (the user cancelled)."""

    class Meta:
        unknown = EXCLUDE

    state = fields.String(load_default=None, validate=validate.Length(max=200))
    code = fields.String(load_default=None, validate=validate.Length(max=500))
    error = fields.String(load_default=None, validate=validate.Length(max=100))


def _show(exc: PageError) -> tuple[str, int]:
    return render_template("slack/install_error.html", error=exc), exc.status


error_pages(bp, _show)


@bp.get("/slack/install")
def install() -> Response:
    db = get_db()
    try:
        state, url = oauth.start(db)
    except oauth.InstallRefused as exc:
        raise PageError(exc.status, exc.title, exc.message) from None
    response = make_response(render_template("slack/install.html", authorize_url=url))
    response.set_cookie(STATE_COOKIE, state, max_age=db.settings.slack_app.state_ttl, path="/slack/",
                        httponly=True, samesite="Lax", secure=request.is_secure)
    return response


@bp.get("/slack/oauth_redirect")
def oauth_redirect() -> tuple[Response, int]:
    try:
        args = RedirectArgs().load(request.args.to_dict())
    except ValidationError as exc:
        raise PageError(400, "Bad redirect", f"Slack's redirect is malformed: {sorted(exc.messages)}.") from None
    try:
        done = oauth.finish(get_db(), state=args["state"], browser_state=request.cookies.get(STATE_COOKIE),
                            code=args["code"], error=args["error"])
        response, status = make_response(render_template("slack/install_done.html", installed=done)), 200
    except oauth.InstallRefused as exc:
        error = PageError(exc.status, exc.title, exc.message)
        response, status = make_response(render_template("slack/install_error.html", error=error)), exc.status
    response.delete_cookie(STATE_COOKIE, path="/slack/")  # used or refused: a state serves one redirect
    return response, status
