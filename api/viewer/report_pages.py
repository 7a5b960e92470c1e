"""The archive's report pages: a workspace's stored activity reports (/archive/teams/<team>/reports, newest
period first, a page at a time) and one report with its charts inside the archive's layout
(/archive/teams/<team>/reports/<report_id>, `?anonymise=1` for the anonymised copy).

Access is the REST report routes' (api/slack/reports/http.py): the cookie's token (api/viewer/session.py) must
allow the workspace, and a report that counts private channels needs the private scope. The reads are the same
service calls, the list's cursor the REST list's (a `next_cursor` of one pages the other). The report's sections
are the standalone page's own template (slack/_report_sections.html, charts drawn by
api/slack/reports/render.py), styled by api/static/viewer/reports.css: no inline style, no script.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, current_app, g, render_template, request

from api.context import get_db
from api.pages import PageError, error_pages, secure
from api.paging import sign_cursor, verify_cursor
from api.slack.reports import render, service
from api.slack.reports.anonymise import anonymise as anonymised_copy
from api.slack.reports.period import BadPeriod, Period
from api.slack.reports.store import CorruptReport
from api.viewer import views
from api.viewer.session import Reader, allow_workspace, current_reader, signin_redirect

_API_DIR = Path(__file__).resolve().parents[1]

bp = Blueprint("archive_reports", __name__, url_prefix="/archive/teams/<team_id>/reports",
               template_folder=str(_API_DIR / "templates"))

PAGE_SIZE = 25  # stored reports per page of the list



@bp.after_request
def _headers(response: Response) -> Response:
    secure(response)
    response.headers["Cache-Control"] = "no-store"  # scoped archive data
    return response


def _page_error(exc: PageError) -> Response | tuple[str, int]:
    if exc.status == 401:
        return signin_redirect()
    return render_template("viewer/error.html", error=exc, reader=g.get("archive_reader"),
                           team=g.get("archive_team")), exc.status


error_pages(bp, _page_error)




def _reader(team_id: str) -> Reader:
    """The signed-in reader, allowed to read this workspace (the REST API's `require_workspace`)."""
    reader = current_reader()
    if reader is None:
        raise PageError(401, "Signed out", "Sign in again.")
    g.archive_reader = reader
    allow_workspace(reader, team_id)
    return reader


def _cursor_secret() -> bytes:
    return current_app.config["CHRONICLE_SETTINGS"].cursor_secret


@bp.get("")
def report_list(team_id: str) -> tuple[str, int]:
    """The workspace's stored reports, newest period first; `cursor` continues after a page."""
    reader = _reader(team_id)
    scope = f"reports|{team_id}"  # the REST list's cursor scope (api/slack/reports/http.py)
    cursor = request.args.get("cursor", "")
    before = "~"
    if cursor:
        before = verify_cursor(cursor, _cursor_secret(), scope).get("r")
        if not isinstance(before, str):
            raise PageError(400, "Bad request", "invalid cursor: use the page's own links")
    entries, nxt = service.listing(get_db(), team_id, limit=PAGE_SIZE, before=before)
    rows = []
    for entry in entries:
        try:
            period = Period.parse_id(entry["report_id"])
        except BadPeriod:
            period = None  # an id the store holds is always valid; shown without its days if not
        rows.append({**entry, "period": period})
    return render_template("viewer/reports/list.html", reader=reader, team=team_id, reports=rows, paged=bool(cursor),
                           next_cursor=sign_cursor({"r": nxt}, _cursor_secret(), scope) if nxt else None,
                           last_day=_last_day), 200


def _last_day(period: Period) -> date:
    """The period's last day (its `end` is the day after)."""
    return period.end - timedelta(days=1)


def _anonymise() -> bool:
    return request.args.get("anonymise", "").lower() in ("1", "true", "yes", "on")


@bp.get("/<report_id>")
def report_page(team_id: str, report_id: str) -> tuple[str, int]:
    """One stored report with its charts; 404 for an id that names no period or no stored report, 403 for a
    report of private channels without the private scope."""
    reader = _reader(team_id)
    try:
        period = Period.parse_id(report_id)
    except BadPeriod as exc:
        raise PageError(404, "Not found", f"No report {report_id[:40]}: {exc}.") from None
    try:
        document = service.get(get_db(), team_id, report_id)
    except CorruptReport as exc:
        raise PageError(500, "Unreadable report", str(exc)) from None
    if document is None:
        raise PageError(404, "Not found",
                              f"No stored report {report_id} for workspace {team_id}: generate it first "
                              f"(`chronicle slack report --team {team_id}` or POST /slack/teams/{team_id}/reports).")
    if document.get("include_private") and not reader.grant.private:
        raise PageError(403, "Private channels",
                              "This report counts private channels. This token lacks the private scope, so the report "
                              "is not shown.")
    anonymised = _anonymise()
    if anonymised:
        document = anonymised_copy(document)

    def message_href(m: dict[str, Any]) -> str | None:
        # The message's channel in the archive (an anonymised copy keeps no link).
        return views.channel_url(team_id, m["channel"]) + "#m-" + m["ts"].replace(".", "-") if m.get("ref") else None

    context = render.context(document, message_href=message_href)
    try:
        generated = datetime.fromisoformat(str(document.get("generated_at"))).astimezone(reader.zone)
    except ValueError:
        generated = None  # shown without it
    return render_template("viewer/reports/report.html", reader=reader, team=team_id, period=period,
                           last_day=_last_day(period), previous=period.previous,
                           previous_last_day=_last_day(period.previous), generated=generated, anonymised=anonymised,
                           **context), 200
