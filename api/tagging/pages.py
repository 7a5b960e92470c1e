"""The tagging web pages: sign in with a personal token (/tagging), the tagger's page (.../tag), the QA page
(.../qa) and the dashboard (.../dashboard) of a project (/tagging/projects/<p>).

Plain Flask (HTML is not part of the OpenAPI document). The pages are rendered on the server with the project's
fixed lists (categories, subcategories), and the JS in api/static/tagging/ fetches everything that changes from
the REST API, which accepts the HttpOnly cookie set here. The Content-Security-Policy allows only this origin's
scripts and styles (no inline code), so archived text can never run as script even if some code slipped.

Signing in and out are POST forms protected against cross-site request forgery (api/csrf.py: the page's own
origin and the form's `csrf_token`; the sign-in form too, against login CSRF); the scripts send the page's token
(`<meta name="csrf-token">`) as `X-CSRF-Token` on every call that changes something.
"""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, redirect, render_template, request

from api import csrf
from api.context import get_db
from api.pages import secure
from api.tagging import access, projects
from api.tagging.projects import Member, Project

_API_DIR = Path(__file__).resolve().parents[1]

# Templates are looked up as "tagging/<name>.html" (api/templates/tagging/): a bare "base.html" could be shadowed
# by another blueprint's template of the same name in Flask's shared loader.
bp = Blueprint("tagging_pages", __name__, template_folder=str(_API_DIR / "templates"),
               static_folder=str(_API_DIR / "static" / "tagging"), static_url_path="/tagging/static")

# The QA page lives at .../qa, not .../review: GET /tagging/projects/<p>/review is the REST review list (JSON), and
# one URL and method can only have one view.
PAGE_PATHS = {"tag": "tag", "review": "qa", "dashboard": "dashboard"}
HOME = {"tagger": "tag", "qa": "review", "admin": "dashboard"}  # the page each role lands on after signing in
PAGE_ROLES = {"tag": ("tagger", "admin"), "review": ("qa", "admin"), "dashboard": ("tagger", "qa", "admin")}


def page_url(project: str, page: str) -> str:
    return f"/tagging/projects/{project}/{PAGE_PATHS[page]}"


def home_url(member: Member) -> str:
    return page_url(member.project, HOME.get(member.role, "dashboard"))


@bp.app_template_global("tagging_page_url")
def _tagging_page_url(project: str, page: str) -> str:
    return page_url(project, page)


# Pages name a person and their project: the shared headers, and HTML never cached.
bp.after_request(secure)


def _signin_page(error: str | None = None, status: int = 200) -> tuple[str, int]:
    return render_template("tagging/signin.html", error=error, member=None), status


def _csrf_refused(status: int, reason: str) -> tuple[str, int]:
    """A sign-in or sign-out form that did not come from these pages: the sign-in form (with a fresh token), or
    for a signed-in person the refusal page; nobody is signed in or out."""
    member = access.member_from_cookie()
    if request.path == "/tagging/signin" or member is None:
        return _signin_page(f"Sign in from this page: {reason}.", status)
    return _forbidden(member, f"Sign out with the button of these pages: {reason}.", status)


csrf.protect(bp, session_cookie=access.COOKIE, cookie_path="/tagging", body="form", always=True,
             refuse=_csrf_refused)


@bp.get("/tagging")
def signin_form() -> tuple[str, int]:
    return _signin_page()


@bp.post("/tagging/signin")
def signin() -> Response | tuple[str, int]:
    token = request.form.get("token", "").strip()
    # Only personal tokens: the global admin token is for scripts, never stored in a browser cookie.
    member = access.member_for_token(token) if token else None
    if member is None:
        return _signin_page("Unknown token. Paste the personal token printed by 'chronicle tagging add-user'.", 401)
    response = redirect(home_url(member), code=303)
    response.set_cookie(access.COOKIE, token, httponly=True, samesite="Strict", path="/tagging",
                        secure=request.is_secure)
    return response


@bp.post("/tagging/signout")
def signout() -> Response:
    response = redirect("/tagging", code=303)
    response.delete_cookie(access.COOKIE, path="/tagging", httponly=True, samesite="Strict",
                           secure=request.is_secure)
    return response


def _forbidden(member: Member, message: str, status: int = 403) -> tuple[str, int]:
    return render_template("tagging/forbidden.html", member=member, message=message, project=None,
                           home=home_url(member)), status


def _page(project_id: str, page: str) -> Response | tuple[str, int]:
    member = access.member_from_cookie()
    if member is None:
        return redirect("/tagging", code=303)
    if member.project != project_id:
        return _forbidden(member, f"You are signed in to project {member.project}, not {project_id}.")
    if member.role not in PAGE_ROLES[page]:
        return _forbidden(member, f"A {member.role} cannot open the {page} page of this project.")
    project: Project | None = projects.get(get_db(), project_id)
    if project is None:
        return render_template("tagging/forbidden.html", member=member, project=None, home=home_url(member),
                               message=f"Project {project_id} does not exist (any more)."), 404
    return render_template(f"tagging/{page}.html", member=member, project=project, page=page), 200


@bp.get("/tagging/projects/<project_id>/tag")
def tag_page(project_id: str) -> Response | tuple[str, int]:
    return _page(project_id, "tag")


@bp.get("/tagging/projects/<project_id>/qa")
def review_page(project_id: str) -> Response | tuple[str, int]:
    return _page(project_id, "review")


@bp.get("/tagging/projects/<project_id>/dashboard")
def dashboard_page(project_id: str) -> Response | tuple[str, int]:
    return _page(project_id, "dashboard")
