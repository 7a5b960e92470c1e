"""Who is calling a tagging route: a personal token (bearer header, or the pages' HttpOnly cookie holding it)
or the admin token, and what their role lets them do. A state-changing call that the cookie authenticates has
passed the CSRF check first (api/csrf.py, declared in http.py and pages.py); "bearer" means the same here and
there (`csrf.bearer_token`)."""

from __future__ import annotations

import hmac
import threading
import time

from flask import request
from flask_smorest import abort

from api import csrf
from api.config import Settings
from api.db import get_db
from api.tagging import effort, projects
from api.tagging.projects import Member

COOKIE = "chronicle_tagging"
ADMIN = "admin"
_SEEN_EVERY = 30.0  # seconds between two "online" writes for one person and process
_seen: dict[tuple[str, str], float] = {}
_seen_lock = threading.Lock()


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
    key = (member.project, member.user)
    now = time.monotonic()
    with _seen_lock:
        if _seen.get(key, 0.0) > now:
            return
        if len(_seen) > 100_000:
            _seen.clear()
        _seen[key] = now + _SEEN_EVERY
    statement, params = effort.seen_write(member.project, member.user, time.time_ns() // 1000)
    get_db().execute_async(statement, params)  # not awaited: presence is best effort
