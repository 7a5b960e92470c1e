"""Bearer API tokens scoped to workspaces, and the admin token.

CHRONICLE_API_TOKENS is JSON: {"<token>": {"workspaces": ["T1", "T2"] | ["*"], "private": true}}.
`private` grants access to channels that were converted to private after they were archived.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
from functools import cache

from flask import request
from flask_smorest import abort

from api.config import Settings


@dataclasses.dataclass(frozen=True)
class Grant:
    workspaces: frozenset[str]
    private: bool

    def allows(self, team_id: str, *, private: bool = False) -> bool:
        in_scope = "*" in self.workspaces or team_id in self.workspaces
        return in_scope and (self.private or not private)


@cache
def _grants(raw: str) -> tuple[tuple[bytes, Grant], ...]:
    if not raw.strip():
        return ()
    parsed = json.loads(raw)
    return tuple(
        (token.encode(), Grant(frozenset(spec.get("workspaces", [])), bool(spec.get("private", False))))
        for token, spec in parsed.items()
    )


def _bearer() -> bytes:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        abort(401, message="missing bearer token: send 'Authorization: Bearer <token>'")
    return token.strip().encode()


def grant_for_token(settings: Settings, token: str | bytes) -> Grant | None:
    """The grant of an API token (from a bearer header or the archive pages' cookie); None when unknown."""
    wanted = token.encode() if isinstance(token, str) else token
    if not wanted:
        return None
    found = None
    for known, grant in _grants(settings.api_tokens):
        if hmac.compare_digest(known, wanted):  # compare all: no early exit on a match
            found = grant
    return found


def current_grant(settings: Settings) -> Grant:
    """The grant of the request's bearer token; 401 when absent or unknown."""
    found = grant_for_token(settings, _bearer())
    if found is None:
        abort(401, message="unknown API token")
    return found


def require_workspace(settings: Settings, team_id: str, *, private: bool = False) -> Grant:
    grant = current_grant(settings)
    if not grant.allows(team_id, private=private):
        what = "this private channel" if private and grant.allows(team_id) else f"workspace {team_id}"
        abort(403, message=f"this token is not allowed to read {what}")
    return grant


def require_admin(settings: Settings) -> None:
    token = _bearer()
    if not settings.admin_token or not hmac.compare_digest(settings.admin_token.encode(), token):
        abort(403 if settings.admin_token else 401, message="admin token required")
