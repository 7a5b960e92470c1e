"""HTTP surface of the reports: list a workspace's stored reports, get one (JSON or HTML), generate (admin)."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import re
from typing import Any

from flask import Response, current_app, request
from flask_smorest import Blueprint, abort

from api import conditional
from api.auth import require_admin, require_workspace
from api.config import Settings
from api.context import get_db
from api.pages import CONTENT_SECURITY_POLICY
from api.paging import sign_cursor, verify_cursor
from api.slack import versions
from api.slack.codec import is_slack_id
from api.slack.reports import render, service
from api.slack.reports.anonymise import anonymise as anonymised_copy
from api.slack.reports.period import BadPeriod, Period, last_full_week
from api.slack.reports.schemas import (
    JOB_ID_PATTERN,
    REPORT_ID_PATTERN,
    GenerateBody,
    ReportArgs,
    ReportJobSchema,
    ReportListArgs,
    ReportListSchema,
    ReportSchema,
)
from api.slack.schemas import error_responses, path_parameters

blp = Blueprint("slack_reports", __name__, description="Slack activity reports (weekly, any period)")

_ERRORS = {400: "invalid cursor", 401: "missing or unknown token", 403: "token not allowed (or not the admin token)",
           404: "no such workspace id, stored report or job", 422: "invalid parameters", 503: "database unavailable"}
_REPORT_PARAM = {"in": "path", "name": "report_id", "required": True, "schema": {
    "type": "string", "pattern": REPORT_ID_PATTERN},
    "description": "{start_day}-{days}, e.g. 2026-11-15-7; with .html the HTML page"}
# The HTML page, documented beside the JSON body of the same 200 (the int key merges with flask-smorest's own).
_HTML_DOC = {"responses": {200: {"content": {"text/html": {"schema": {"type": "string"}}}}}}


_errors = error_responses(blp, _ERRORS)


def _settings() -> Settings:
    return current_app.config["CHRONICLE_SETTINGS"]


def _check_team(team_id: str) -> None:
    if not is_slack_id(team_id):
        abort(404, message=f"no such id: {team_id[:80]!r}")


@blp.route("/slack/teams/<team_id>/reports", methods=["GET"],
           parameters=[*path_parameters("team_id"), conditional.IF_NONE_MATCH])
@blp.arguments(ReportListArgs(), location="query", as_kwargs=True)
@blp.response(200, ReportListSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(400, 401, 403, 404, 503)
@blp.alt_response(304, description=conditional.NOT_MODIFIED)
def list_reports(team_id: str, limit: int, cursor: str | None = None):
    """The workspace's stored reports, newest period first (`limit`, `next_cursor`)."""
    _check_team(team_id)
    require_workspace(_settings(), team_id)
    scope = f"reports|{team_id}"
    before = "~"
    if cursor:
        position = verify_cursor(cursor, _settings().cursor_secret, scope)
        before = position.get("r")
        if not isinstance(before, str):
            abort(400, message="invalid cursor")
    db = get_db()
    tag = conditional.etag(versions.read(db, team_id, [versions.REPORTS]))
    if (unchanged := conditional.not_modified(tag)) is not None:
        return unchanged
    entries, nxt = service.listing(db, team_id, limit=limit, before=before)
    return ({"team_id": team_id, "reports": entries,
             "next_cursor": sign_cursor({"r": nxt}, _settings().cursor_secret, scope) if nxt else None},
            200, conditional.headers(tag))


@blp.route("/slack/teams/<team_id>/reports/<report_id>", methods=["GET"],
           parameters=[*path_parameters("team_id"), _REPORT_PARAM, conditional.IF_NONE_MATCH])
@blp.arguments(ReportArgs(), location="query", as_kwargs=True)
@blp.response(200, ReportSchema)
@blp.doc(security=[{"bearer": []}], **_HTML_DOC)
@_errors(401, 403, 404, 503)
@blp.alt_response(304, description=conditional.NOT_MODIFIED)
def get_report(team_id: str, report_id: str, anonymise: bool):
    """A stored report (one partition read): JSON, or the HTML page with charts for `Accept: text/html` or a
    report id ending in `.html`. `anonymise` replaces every user and channel with a stable fake."""
    _check_team(team_id)
    grant = require_workspace(_settings(), team_id)
    as_html = report_id.endswith(".html")
    report_id = report_id.removesuffix(".html")
    try:
        Period.parse_id(report_id)
    except BadPeriod as exc:
        abort(404, message=f"no report {report_id[:40]!r}: {exc}")
    db = get_db()
    best = request.accept_mimetypes.best_match(["application/json", "text/html"])
    html = as_html or (best == "text/html" and request.accept_mimetypes["text/html"] >
                       request.accept_mimetypes["application/json"])
    # The reader's private scope decides a 403, never the page: it is checked on the document below.
    tag = conditional.etag(versions.read(db, team_id, [versions.REPORTS]), html)
    if grant.allows(team_id, private=True) and (unchanged := conditional.not_modified(tag)) is not None:
        return unchanged
    document = service.get(db, team_id, report_id)
    if document is None:
        abort(404, message=f"no stored report {report_id} for workspace {team_id}: generate it first "
                           f"(POST /slack/teams/{team_id}/reports or `chronicle slack report`)")
    if document.get("include_private") and not grant.allows(team_id, private=True):
        abort(403, message="this report covers private channels: the token needs the private scope")
    if anonymise:
        document = anonymised_copy(document)
    if html:
        return conditional.tagged(_html_response(render.html(document)), tag, vary="Accept")
    return document, 200, conditional.headers(tag, vary="Accept")


_STYLE = re.compile(r"<style>(.*?)</style>", re.S)


def _html_response(page: str) -> Response:
    """The standalone report page under the app's header policy (api/pages.py). Its one <style> element (the
    page is also written as a file by `chronicle slack report --html`) is allowed by its hash; no script."""
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(m.encode()).digest()).decode()}'"
                      for m in _STYLE.findall(page))
    response = Response(page, mimetype="text/html")
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY.replace(
        "style-src 'self'", f"style-src 'self' {hashes}".rstrip())
    return response


@blp.route("/slack/teams/<team_id>/reports", methods=["POST"], parameters=path_parameters("team_id"))
@blp.arguments(GenerateBody(), location="json", required=False)
@blp.response(202, ReportJobSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 422, 503)
def generate_report(body: dict[str, Any], team_id: str):
    """Queue the generation (or regeneration) of the report of a period (admin token) and answer at once with
    the job (202): `start` (default: the latest Sunday-start week that has ended) and `days` (default 7),
    compared with the period before. `chronicle slack report-worker` computes and stores it; follow
    `status_url`. Readers of the stored report see the old one or the new one, never a mix. With `post`, it is
    also posted to Slack (the outcome is in the job's `result.delivery`)."""
    _check_team(team_id)
    require_admin(_settings())
    try:
        period = Period(body["start"], body["days"]) if body.get("start") else \
            Period(last_full_week(dt.datetime.now(dt.UTC).date()).start, body["days"])
    except BadPeriod as exc:
        abort(422, message=str(exc), errors={"json": {"start": [str(exc)]}})
    try:
        job = service.submit(get_db(), team_id, period, include_private=body["include_private"],
                             post=body["post"], per_channel=body["per_channel"], anonymise=body["anonymise"])
    except service.UnknownWorkspace as exc:
        abort(404, message=str(exc))
    return _with_links(job), 202


_JOB_PARAM = {"in": "path", "name": "job_id", "required": True, "schema": {"type": "string", "pattern": JOB_ID_PATTERN},
              "description": "the job id a POST of .../reports answered"}


@blp.route("/slack/teams/<team_id>/reports/jobs/<job_id>", methods=["GET"],
           parameters=[*path_parameters("team_id"), _JOB_PARAM])
@blp.response(200, ReportJobSchema)
@blp.doc(security=[{"bearer": []}])
@_errors(401, 403, 404, 503)
def report_job(team_id: str, job_id: str):
    """The state of a queued report generation (admin token): queued, running, done (with `messages` and
    `report_url`) or failed (with `error`). Jobs are kept 14 days."""
    _check_team(team_id)
    require_admin(_settings())
    if not re.fullmatch(JOB_ID_PATTERN, job_id):
        abort(404, message=f"no such job: {job_id[:40]!r}")
    job = service.job(get_db(), team_id, job_id)
    if job is None:
        abort(404, message=f"no report job {job_id} for workspace {team_id} (jobs are kept 14 days)")
    return _with_links(job)


def _with_links(job: dict[str, Any]) -> dict[str, Any]:
    base = f"/slack/teams/{job['team_id']}/reports"
    out = {**job, "status_url": f"{base}/jobs/{job['job_id']}"}
    if job["state"] == "done":
        out["report_url"] = f"{base}/{job['report_id']}"
    return out
