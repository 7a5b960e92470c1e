"""What every server-rendered page shares: the security headers, and the shared assets (api/static/common/:
the stylesheet of api/templates/layout.html) served by Chronicle itself at /common/static/.

The Content-Security-Policy allows only this origin's scripts and styles (no inline code, no inline event
handlers), so archived text can never run as script even if some escaping slipped; no page may be framed.
"""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response

_API_DIR = Path(__file__).resolve().parent

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

common = Blueprint("pages_common", __name__, static_folder=str(_API_DIR / "static" / "common"),
                   static_url_path="/common/static")


def secure(response: Response) -> Response:
    """The security headers on a page response; HTML is never cached (pages show archived, scoped data)."""
    response.headers.update(SECURITY_HEADERS)
    if response.mimetype == "text/html":
        response.headers["Cache-Control"] = "no-store"
    return response


common.after_request(secure)
