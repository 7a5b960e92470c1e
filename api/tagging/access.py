"""Who is calling a tagging route: a personal token (bearer header, or the pages' HttpOnly cookie holding it)
or the admin token, and what their role lets them do. A state-changing call that the cookie authenticates has
passed the CSRF check first (api/csrf.py, declared in http.py and pages.py); "bearer" means the same here and
there (`csrf.bearer_token`)."""

from __future__ import annotations

import hmac

from flask import request
from flask_smorest import abort

from api import csrf
from api.config import Settings
from api.context import get_db
from api.tagging import effort, projects, stamps
from api.tagging.projects import Member

COOKIE = "chronicle_tagging"
ADMIN = "admin"
_SEEN_EVERY = 30.0  # seconds between two "online" writes for one person and process
_SEEN_MAX = 100_000  # people remembered as noted online


def member_for_token(token: str) -> Member | None:
    return projects.member_of_token(get_db(), token) if token else None


def member_from_cookie() -> Member | None:
    return member_for_token(request.cookies.get(COOKIE, ""))


def token_of_request() -> str | None:
    """The bearer token, else the pages' cookie; None without either."""
    return csrf.bearer_token() or request.cookies.get(COOKIE) or None


def require_member(settings: Settings, project: str, roles: tuple[str, ...] = ("tagger", "qa", "admin")
                   ) -> Member:
    """The caller as a member of `project` with one of `roles`: 401 without a known token, 403 for another
    project or role. The admin token is an admin of every project."""
    token = token_of_request()
    if token is None:
        abort(401, message="missing token: send 'Authorization: Bearer <token>' or sign in at /tagging")
    if settings.admin_token and hmac.compare_digest(settings.admin_token.encode(), token.encode()):
        return Member(project, ADMIN, "", "admin")
    member = member_for_token(token)
    if member is None:
        abort(401, message="unknown token")
    if member.project != project:
        abort(403, message=f"this token belongs to another project, not {project}")
    if member.role not in roles:
        abort(403, message=f"a {member.role} may not do this (allowed: {', '.join(roles)})")
    _note_online(member)
    return member


def _note_online(member: Member) -> None:
    """Write that `member` is online, at most once per _SEEN_EVERY per person and process: presence counts
    minutes, so more writes would add nothing. Two threads missing at once both write; that is harmless."""
    db = get_db()
    noted = db.caches.ttl("tagging.online_noted", maxsize=_SEEN_MAX, ttl=_SEEN_EVERY)
    key = (member.project, member.user)
    if key in noted:
        return
    noted.set(key, True)
    statement, params = effort.seen_write(member.project, member.user, stamps.now_us(db))
    db.execute_async(statement, params)  # not awaited: presence is best effort
