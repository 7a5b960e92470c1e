"""Who is reading the archive pages: sign in with an API token (/archive), sign out, the grant of the cookie's
token and the reader's time zone.

The cookie `chronicle_archive` holds the API token itself (HttpOnly, SameSite=Strict, Path=/archive, Secure over
HTTPS), so the pages have exactly the REST API's scopes (api/auth.py): a token for workspace T never sees U's
pages, and channels converted to private need the `private` scope. The reader's IANA time zone comes from the
browser at sign-in (a static script fills a hidden field: no inline code) and is kept in `chronicle_tz`; a zone
that does not resolve is UTC (api/activity/calendar.py `zone`).

Signing in and out are POST forms protected against cross-site request forgery (api/csrf.py): the page's own
origin, and the form's `csrf_token` (the sign-in form too, so no other page can sign a reader in with its token).
"""

from __future__ import annotations

import dataclasses
from datetime import tzinfo
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from flask import Blueprint, Response, current_app, g, redirect, render_template, request

from api import csrf
from api.activity import calendar
from api.auth import Grant, grant_for_token
from api.config import Settings
from api.pages import PageError, secure
from api.slack.codec import is_slack_id

COOKIE = "chronicle_archive"
TZ_COOKIE = "chronicle_tz"
COOKIE_PATH = "/archive"
SIGNIN_URL = "/archive"
_MAX_TOKEN_CHARS = 512
_MAX_ZONE_CHARS = 64

_API_DIR = Path(__file__).resolve().parents[1]

# The sign-in, landing and sign-out routes; the workspace pages are in slack_pages.py (same URL prefix).
bp = Blueprint("archive_session", __name__, template_folder=str(_API_DIR / "templates"))
bp.after_request(secure)


@dataclasses.dataclass(frozen=True)
class Reader:
    """A signed-in reader: the grant of the cookie's token and the zone the pages show times in."""

    grant: Grant
    zone_name: str

    @property
    def zone(self) -> tzinfo:
        return calendar.zone(self.zone_name)

    def may_read(self, team_id: str) -> bool:
        return self.grant.allows(team_id)

    @property
    def scope_label(self) -> str:
        """What the token may read, for the header bar (never the token itself)."""
        teams = "all workspaces" if "*" in self.grant.workspaces else ", ".join(sorted(self.grant.workspaces))
        return f"{teams} · private channels too" if self.grant.private else teams

    @property
    def workspaces(self) -> list[str]:
        """The workspaces the token names (none for a token of every workspace)."""
        return sorted(w for w in self.grant.workspaces if w != "*")


def _settings() -> Settings:
    return current_app.config["CHRONICLE_SETTINGS"]


def zone_of(value: str | None) -> str:
    """The zone name to keep: the browser's IANA name when it resolves, else UTC."""
    if not value or len(value) > _MAX_ZONE_CHARS:
        return "UTC"
    return calendar.zone_name(value.strip())


def current_reader() -> Reader | None:
    """The reader of this request: the cookie's token must still be a known API token (a token removed from
    CHRONICLE_API_TOKENS signs its cookie out at once)."""
    token = request.cookies.get(COOKIE, "")
    if not token or len(token) > _MAX_TOKEN_CHARS:
        return None
    grant = grant_for_token(_settings(), token)
    if grant is None:
        return None
    return Reader(grant, zone_of(request.cookies.get(TZ_COOKIE)))


def safe_next(target: str | None) -> str | None:
    """A path inside the archive pages to go back to after signing in; anything else (another host, a scheme,
    `//evil`, a backslash trick) is dropped."""
    if not target or len(target) > 2000 or "\\" in target or any(ord(c) < 0x20 for c in target):
        return None
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/archive/") or target.startswith("//"):
        return None
    return target


def signin_redirect() -> Response:
    """Where a page request without a valid cookie goes: the sign-in form, then back here."""
    target = request.full_path if request.query_string else request.path
    return redirect(f"{SIGNIN_URL}?{urlencode({'next': target})}", code=303)


def _signin_page(error: str | None = None, status: int = 200, next_url: str | None = None) -> tuple[str, int]:
    return render_template("viewer/signin.html", error=error, next_url=next_url, reader=None), status


@bp.get("/archive")
def home() -> tuple[str, int] | Response:
    """The sign-in form; for a signed-in reader, the workspaces the token may read."""
    reader = current_reader()
    next_url = safe_next(request.args.get("next"))
    if reader is None:
        return _signin_page(next_url=next_url)
    if next_url:
        return redirect(next_url, code=303)
    return render_template("viewer/home.html", reader=reader, team=None), 200


def _csrf_refused(status: int, reason: str) -> tuple[str, int]:
    """A sign-in or sign-out form that did not come from this page (api/csrf.py): the sign-in form again (with a
    fresh token), or for a signed-in reader the refusal page; nobody is signed in or out."""
    if request.path == SIGNIN_URL:
        return _signin_page(f"Sign in from this page: {reason}.", status, safe_next(request.form.get("next")))
    error = PageError(status, "Sign-out refused", f"Sign out with the button of Chronicle's own pages: {reason}.")
    return render_template("viewer/error.html", error=error, reader=current_reader(), team=None), status


csrf.protect(bp, session_cookie=COOKIE, cookie_path=COOKIE_PATH, body="form", always=True, refuse=_csrf_refused)


@bp.post("/archive")
def signin() -> Response | tuple[str, int]:
    token = request.form.get("token", "").strip()
    next_url = safe_next(request.form.get("next"))
    grant = grant_for_token(_settings(), token) if token and len(token) <= _MAX_TOKEN_CHARS else None
    if grant is None:
        return _signin_page("Unknown token. Paste an API token of this Chronicle (CHRONICLE_API_TOKENS).", 401,
                            next_url)
    reader = Reader(grant, zone_of(request.form.get("tz")))
    target = next_url
    if target is None:
        only = reader.workspaces
        target = f"/archive/teams/{only[0]}" if len(only) == 1 and "*" not in grant.workspaces else SIGNIN_URL
    response = redirect(target, code=303)
    for name, value in ((COOKIE, token), (TZ_COOKIE, reader.zone_name)):
        response.set_cookie(name, value, httponly=True, samesite="Strict", path=COOKIE_PATH,
                            secure=request.is_secure)
    return response


@bp.post("/archive/signout")
def signout() -> Response | tuple[str, int]:
    response = redirect(SIGNIN_URL, code=303)
    # The archive's pages kept by the browser for revalidation (ETag, `private, no-cache`) go with the session.
    response.headers["Clear-Site-Data"] = '"cache"'
    for name in (COOKIE, TZ_COOKIE):
        response.delete_cookie(name, path=COOKIE_PATH, httponly=True, samesite="Strict", secure=request.is_secure)
    return response


@bp.get("/archive/open")
def open_workspace() -> Response | tuple[str, int]:
    """The landing page's "open a workspace" form (a GET form cannot fill a path)."""
    team_id = request.args.get("team", "").strip().upper()
    if current_reader() is None:
        return signin_redirect()
    if not is_slack_id(team_id):
        return redirect(SIGNIN_URL, code=303)
    return redirect(f"/archive/teams/{team_id}", code=303)


def allow_workspace(reader: Reader, team_id: str) -> None:
    """The REST API's workspace rule: the token must name the workspace (or every workspace); PageError 404/403."""
    if not is_slack_id(team_id):
        raise PageError(404, "Not found", "That is not a Slack workspace id.")
    if not reader.may_read(team_id):
        allowed = ", ".join(reader.workspaces) or "none"
        raise PageError(403, "Not allowed",
                        f"This token may not read workspace {team_id}. It may read: {allowed}.")
    g.archive_team = team_id
