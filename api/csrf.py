"""Cross-site request forgery: the one protection of every cookie-authenticated browser route (docs/security.md,
"CSRF").

A browser sends Chronicle's session cookies (`chronicle_archive` on /archive, `chronicle_tagging` on /tagging)
with whatever request a page makes, also a page of another origin: a form it submits, or a `fetch` with a
`text/plain` body (a "simple" request: no CORS preflight). SameSite=Strict keeps the cookies off requests from
other *sites*, but a page on another port of the same host is the same site. So every state-changing request
(POST, PUT, PATCH, DELETE) that a cookie authenticates, and every sign-in form (login CSRF: no session yet), must
pass, in this order:

1. **Where it comes from.** `Sec-Fetch-Site`, when sent, is `same-origin` (`same-site` is refused: another port
   or subdomain is another origin). `Origin`, when sent, names this host (`null` is refused: an opaque origin, a
   sandboxed frame or a `no-referrer` page); an `http://` origin is refused on an HTTPS request (a downgrade), an
   `https://` origin on a plain request is accepted (a TLS-terminating proxy). Without `Sec-Fetch-Site` the
   `Origin` is required (every browser sends one of them on a POST).
2. **What it is** (JSON routes): `Content-Type: application/json`, which a cross-origin page cannot send without
   a CORS preflight that Chronicle never answers: else 415.
3. **The token.** The page's token (a hidden `csrf_token` field of a form, or the `X-CSRF-Token` header that the
   pages' scripts copy from `<meta name="csrf-token">`) must equal HMAC(server key, the browser's `chronicle_csrf`
   cookie, the session cookie of this path). `chronicle_csrf` is random (32 bytes), HttpOnly, SameSite=Lax (not
   Strict: a link followed from another site must not replace it under the open tabs), set by the first page that
   renders a token; binding the session cookie too means a token seen before signing in (or by another person on a
   shared browser) is worthless after a sign-in, and that a cookie planted from a sibling host does not give a
   pair the attacker knows.

Requests with `Authorization: Bearer` are not cookie-authenticated (a cross-origin page cannot send that header
without a preflight) and need none of this; `GET`/`HEAD`/`OPTIONS` change nothing and are never checked.

A blueprint declares its policy with `protect(bp, ...)`; a route outside every declared blueprint that receives a
declared session cookie on a state-changing request (a later page someone forgot to declare) gets the same check,
token from either place. Refusals are 403 (415 for the content type) with a reason: JSON, or the blueprint's own
page (`refuse=`).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import secrets
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import structlog
from flask import Blueprint, Flask, current_app, g, has_request_context, request
from flask.typing import ResponseReturnValue

from api.errors import error_response

COOKIE = "chronicle_csrf"
FIELD = "csrf_token"
HEADER = "X-CSRF-Token"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_COOKIE_CHARS = 43  # 32 random bytes, URL-safe base64 without padding
_TOKEN_CHARS = 43
log = structlog.get_logger("chronicle.csrf")

Refuse = Callable[[int, str], ResponseReturnValue]


def json_refusal(status: int, reason: str) -> ResponseReturnValue:
    return error_response(status, reason)


@dataclasses.dataclass(frozen=True)
class Policy:
    """How one blueprint's requests are authenticated and refused.

    session_cookie, cookie_path: the cookie that authenticates them and the path it is set on.
    body: "form" (token in the `csrf_token` field or the header) or "json" (header only, JSON content type).
    always: check every state-changing request, also without the session cookie (sign-in forms).
    """

    session_cookie: str
    cookie_path: str
    body: str = "form"
    always: bool = False
    refuse: Refuse = json_refusal


def protect(bp: Blueprint, *, session_cookie: str, cookie_path: str, body: str = "form", always: bool = False,
            refuse: Refuse | None = None) -> None:
    """Declare `bp`'s policy; the check runs before each of its views (installed once per app)."""
    if body not in ("form", "json"):
        raise ValueError(f"body must be 'form' or 'json', not {body!r}")
    policy = Policy(session_cookie, cookie_path.rstrip("/") or "/", body, always, refuse or json_refusal)

    def register(state: Any) -> None:
        # The app keeps its blueprints' policies (app.extensions): nothing is held by this module.
        install(state.app)
        state.app.extensions["chronicle_csrf_policies"][bp.name] = policy

    bp.record_once(register)


def install(app: Flask) -> None:
    """The hooks of every app (idempotent): the check before each request, the cookie after it, and
    `csrf_token()` in templates."""
    if app.extensions.get("chronicle_csrf"):
        return
    app.extensions["chronicle_csrf"] = True
    app.extensions["chronicle_csrf_policies"] = {}
    app.before_request(_check)
    app.after_request(_issue_cookie)
    app.add_template_global(csrf_token, "csrf_token")


# -- the token ----------------------------------------------------------------------------------------------------

def _key() -> bytes:
    secret = current_app.config["CHRONICLE_SETTINGS"].cursor_secret
    secret = secret.encode() if isinstance(secret, str) else bytes(secret)
    return hmac.new(secret, b"chronicle csrf key v1", hashlib.sha256).digest()


def _valid_cookie(value: str | None) -> bool:
    return bool(value) and len(value) == _COOKIE_CHARS and value.isascii() and \
        all(c.isalnum() or c in "-_" for c in value)


def _policy_for_path(path: str) -> Policy | None:
    """The declared policy whose session cookie the browser sends to `path` (the longest cookie path wins)."""
    found = None
    for policy in current_app.extensions["chronicle_csrf_policies"].values():
        root = policy.cookie_path
        if (root == "/" or path == root or path.startswith(root + "/")) and \
                (found is None or len(root) > len(found.cookie_path)):
            found = policy
    return found


def _session_value(policy: Policy | None) -> str:
    return request.cookies.get(policy.session_cookie, "") if policy else ""


def _token_for(browser: str, session: str) -> str:
    message = b"csrf\x00" + browser.encode() + b"\x00" + hashlib.sha256(session.encode("utf-8", "replace")).digest()
    mac = hmac.new(_key(), message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def csrf_token() -> str:
    """The token of this browser and this path's session, for a form field or the csrf-token meta tag; the first
    call of a request without a valid `chronicle_csrf` cookie makes one (set on the response)."""
    if not has_request_context():
        return ""
    browser = g.get("csrf_new_cookie") or request.cookies.get(COOKIE)
    if not _valid_cookie(browser):
        browser = secrets.token_urlsafe(32)
        g.csrf_new_cookie = browser
    return _token_for(browser, _session_value(_policy_for_path(request.path)))


def _issue_cookie(response: Any) -> Any:
    browser = g.get("csrf_new_cookie")
    if browser:
        response.set_cookie(COOKIE, browser, httponly=True, samesite="Lax", path="/", secure=request.is_secure)
    return response


# -- the check ----------------------------------------------------------------------------------------------------

def bearer_token() -> str | None:
    """The token of an `Authorization: Bearer` header (such a request is not cookie-authenticated)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


def origin_problem() -> str | None:
    """Why this request does not come from one of Chronicle's own pages (None when it does)."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site.strip().lower() != "same-origin":
        return f"the request was sent from another site or origin (Sec-Fetch-Site: {site[:40]})"
    origin = request.headers.get("Origin")
    if origin is None:
        if site is None:
            return "the request names no Origin (send it from Chronicle's own pages)"
        return None
    origin = origin.strip()
    if origin.lower() == "null":
        return "the request's Origin is null (an opaque origin: a sandboxed or no-referrer page)"
    try:
        parts = urlsplit(origin)
        netloc = parts.netloc.lower()
    except ValueError:
        return "the request's Origin is not an origin"
    if parts.scheme not in ("http", "https") or parts.path not in ("", "/") or \
            _without_default_port(netloc, parts.scheme) != _without_default_port(request.host.lower(), request.scheme):
        return f"the request was sent from another origin ({origin[:100]})"
    if request.is_secure and parts.scheme != "https":
        return "the request was sent from a plain-HTTP page to an HTTPS one"
    return None


def _without_default_port(netloc: str, scheme: str) -> str:
    default = {"http": ":80", "https": ":443"}.get(scheme, "")
    return netloc[: -len(default)] if default and netloc.endswith(default) else netloc


def _json_body() -> bool:
    return request.mimetype == "application/json"


def _sent_token(policy_body: str) -> str:
    sent = request.headers.get(HEADER, "")
    if not sent and policy_body != "json" and request.mimetype in ("application/x-www-form-urlencoded",
                                                                     "multipart/form-data"):
        sent = request.form.get(FIELD, "")
    return sent.strip()


def token_problem(policy_body: str, session: str) -> str | None:
    browser = request.cookies.get(COOKIE)
    if not _valid_cookie(browser):
        return "the page's CSRF cookie is missing: reload the page and try again"
    sent = _sent_token(policy_body)
    if not sent:
        where = f"the {HEADER} header" if policy_body == "json" else f"the {FIELD} field or the {HEADER} header"
        return f"the CSRF token is missing ({where}): reload the page and try again"
    if len(sent) != _TOKEN_CHARS or not hmac.compare_digest(sent.encode("ascii", "replace"),
                                                            _token_for(browser, session).encode()):
        return "the CSRF token does not match this browser's session: reload the page and try again"
    return None


def _check() -> ResponseReturnValue | None:
    if request.method not in UNSAFE_METHODS or request.routing_exception is not None:
        return None
    policy = current_app.extensions["chronicle_csrf_policies"].get(request.blueprint or "")
    body = policy.body if policy else "any"
    if policy is None:
        # A route no blueprint declared: checked when it receives a declared session cookie.
        policy = _policy_for_path(request.path)
        if policy is None:
            return None
        policy = dataclasses.replace(policy, always=False, refuse=json_refusal)
    session = _session_value(policy)
    if not policy.always and (not session or bearer_token() is not None):
        return None  # not cookie-authenticated: the route's own authentication decides
    problem = origin_problem()
    if problem is None and body == "json" and not _json_body():
        return policy.refuse(415, f"send the body as Content-Type: application/json, not {request.mimetype or 'none'}")
    problem = problem or token_problem(body, session)
    if problem is None:
        return None
    log.info("csrf_refused", method=request.method, path=request.path, reason=problem)
    return policy.refuse(403, f"refused (cross-site request forgery protection): {problem}")
