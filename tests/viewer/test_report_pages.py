"""The archive's report pages through Flask's test client: the REST report routes' access rules (sign-in, the
workspace scope, the private scope for a report counting private channels), the list of stored reports with the
REST list's cursor, a report with its charts inside the archive's layout, the anonymised view, bad ids. What the
pages must show comes from the planned messages (tests/viewer/insights_data.py), not from the stored reports."""

from __future__ import annotations

import dataclasses
from urllib.parse import quote

import pytest

from tests.helpers import form_post
from tests.viewer.html_tree import Element, parse
from tests.viewer.insights_data import (
    DAY_REPORTS,
    PRIVATE_REPORT,
    PUBLIC_REPORT,
    ReportData,
    api_tokens,
    fill_reports,
    new_report_team,
)

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
       "base-uri 'none'; form-action 'self'")
TEAM = new_report_team()


@pytest.fixture(scope="module")
def app(settings, db):
    """The app with this module's tokens: the report workspace with and without the private scope, another one."""
    from api.app import create_app

    application = create_app(dataclasses.replace(settings, api_tokens=api_tokens(TEAM)), database=db)
    application.config["TESTING"] = True
    return application


@pytest.fixture(scope="module")
def reports(app, db) -> ReportData:
    return fill_reports(app.test_client(), db, TEAM)


def signed_in(app, token: str):
    client = app.test_client()
    r = form_post(client, "/archive", {"token": token, "tz": "UTC"})
    assert r.status_code == 303, r.data
    return client


def page(client, path: str, status: int = 200) -> Element:
    r = client.get(path)
    assert r.status_code == status, (path, r.status_code, r.data[:400])
    assert r.mimetype == "text/html" and r.headers["Cache-Control"] == "no-store"
    assert r.headers["Content-Security-Policy"] == CSP and r.headers["X-Content-Type-Options"] == "nosniff"
    assert b" style=" not in r.data and b"<style" not in r.data  # the CSP would refuse inline style
    return parse(r.data)


def listed(tree: Element) -> list[str]:
    return [tr.get("data-report") for tr in tree.by_id("report-list").find("tbody").find_all("tr")]


def test_access_follows_the_rest_report_rules(app, reports):
    base = f"/archive/teams/{TEAM}/reports"
    for path in (base, f"{base}/{PUBLIC_REPORT}", f"{base}/{PRIVATE_REPORT}"):
        r = app.test_client().get(path)  # no cookie: the sign-in form, then back here
        assert r.status_code == 303 and r.headers["Location"] == f"/archive?next={quote(path, safe='')}"
    other = signed_in(app, reports.other_token)
    for path in (base, f"{base}/{PUBLIC_REPORT}"):
        assert "may not read workspace" in page(other, path, 403).by_id("error-message").text()
    public = signed_in(app, reports.public_token)
    page(public, f"{base}/{PUBLIC_REPORT}")
    refusal = page(public, f"{base}/{PRIVATE_REPORT}", 403)
    assert "private" in refusal.by_id("error-message").text() and refusal.find(id="report") is None
    private = signed_in(app, reports.private_token)
    tree = page(private, f"{base}/{PRIVATE_REPORT}")
    assert tree.by_id("totals").find("div", data_figure="messages").find(class_="v").text() == \
        str(reports.messages[PRIVATE_REPORT])
    channels = [tr.find("td").text() for tr in tree.by_id("channels").find("tbody").find_all("tr")]
    assert "#secret-plans" in channels  # the private channel is counted, and shown to this reader
    # the REST API agrees: same tokens, same answers
    rest = app.test_client()
    assert rest.get(f"/slack/teams/{TEAM}/reports/{PRIVATE_REPORT}",
                    headers={"Authorization": f"Bearer {reports.public_token}"}).status_code == 403
    assert rest.get(f"/slack/teams/{TEAM}/reports/{PRIVATE_REPORT}",
                    headers={"Authorization": f"Bearer {reports.private_token}"}).status_code == 200


def test_the_list_shows_stored_reports_newest_first_a_page_at_a_time(app, reports):
    reader = signed_in(app, reports.public_token)
    base = f"/archive/teams/{TEAM}/reports"
    every = sorted([PUBLIC_REPORT, PRIVATE_REPORT, *DAY_REPORTS], reverse=True)  # report ids, descending
    tree = page(reader, base)
    assert listed(tree) == every[:25]
    for tr in tree.by_id("report-list").find("tbody").find_all("tr"):
        report_id = tr.get("data-report")
        assert tr.find("a").get("href") == f"{base}/{report_id}"
        assert tr.find_all("td")[2].text() == f"{reports.messages[report_id]:,}"
    older = tree.by_id("older-reports").get("href")
    second = page(reader, base + older)
    assert listed(second) == every[25:] and second.find(id="older-reports") is None
    # the REST list's cursor pages this list, and this list's cursor pages the REST list
    headers = {"Authorization": f"Bearer {reports.public_token}"}
    rest = app.test_client().get(f"/slack/teams/{TEAM}/reports?limit=25", headers=headers).json
    assert listed(page(reader, f"{base}?cursor={quote(rest['next_cursor'])}")) == every[25:]
    cursor = older.split("cursor=", 1)[1]
    assert [e["report_id"] for e in app.test_client().get(f"/slack/teams/{TEAM}/reports?limit=25&cursor={cursor}",
                                                          headers=headers).json["reports"]] == every[25:]
    assert "invalid cursor" in page(reader, f"{base}?cursor=forged", 400).by_id("error-message").text()


def test_a_report_shows_its_figures_and_charts_in_the_archive_layout(app, reports):
    reader = signed_in(app, reports.public_token)
    tree = page(reader, f"/archive/teams/{TEAM}/reports/{PUBLIC_REPORT}")
    assert tree.by_id("report-title").text() == "Activity report 01 Mar 2026 – 07 Mar 2026"
    assert any((link.get("href") or "").startswith("/archive/static/reports.css?v=") for link in tree.find_all("link"))
    assert tree.by_id("nav-team").get("href") == f"/archive/teams/{TEAM}"  # the workspace's header bar
    assert tree.by_id("all-reports").get("href") == f"/archive/teams/{TEAM}/reports"
    assert tree.by_id("totals").find("div", data_figure="messages").find(class_="v").text() == "21" == \
        str(reports.messages[PUBLIC_REPORT])
    weekday_bars = tree.by_id("chart-utc-weekday").find_all("rect", class_="bar-value")
    assert [int(b.get("data-value")) for b in weekday_bars] == [3] * 7  # 3 messages every day of the week
    previous = tree.by_id("chart-utc-weekday").find_all("rect", class_="bar-previous")
    assert [int(b.get("data-value")) for b in previous] == [2] * 7
    assert len(tree.by_id("chart-heatmap").find_all("rect", class_="cell")) == 168
    channels = [tr.find("td").text() for tr in tree.by_id("channels").find("tbody").find_all("tr")]
    assert sorted(channels) == ["#general", "#random"]  # a public report: the private channel is not counted
    users = tree.by_id("users").text()
    assert all(name in users for name in reports.names)
    # a top message links to its channel in the archive (not the REST API, which needs a bearer token)
    links = [a.get("href") for a in tree.by_id("top-messages").find_all("a")]
    assert links and all(h.startswith(f"/archive/teams/{TEAM}/channels/CRP") and "#m-" in h for h in links)
    assert [s.get("src").split("?v=")[0] for s in tree.find_all("script")] == ["/archive/static/archive.js"]


def test_the_anonymised_view_hides_every_name(app, reports):
    reader = signed_in(app, reports.public_token)
    tree = page(reader, f"/archive/teams/{TEAM}/reports/{PUBLIC_REPORT}?anonymise=1")
    assert tree.find(id="anonymised-badge") is not None
    report = tree.by_id("report").text()
    assert not any(name in report for name in (*reports.names, "#general", "#random", "URA", "URB"))
    assert tree.by_id("totals").find("div", data_figure="messages").find(class_="v").text() == "21"
    assert tree.by_id("top-messages").find("a") is None  # no link back into the workspace
    assert tree.by_id("toggle-anonymise").get("href") == "?"


@pytest.mark.parametrize("path, status, says", [
    ("/archive/teams/{t}/reports/2026-03-08-7", 404, "No stored report 2026-03-08-7"),
    ("/archive/teams/{t}/reports/2026-02-30-7", 404, "no such day"),
    ("/archive/teams/{t}/reports/2026-03-01-99", 404, "days must be between"),
    ("/archive/teams/{t}/reports/not-a-report", 404, "a report id is"),
    ("/archive/teams/{t}/reports/2026-03-01-7.html", 404, "a report id is"),
    ("/archive/teams/not%20a%20team/reports", 404, "not a Slack workspace id"),
    ("/archive/teams/not%20a%20team/reports/2026-03-01-7", 404, "not a Slack workspace id"),
])
def test_bad_ids_are_clear_404_pages(app, reports, path, status, says):
    reader = signed_in(app, reports.private_token)
    message = page(reader, path.format(t=TEAM), status).by_id("error-message")
    assert message.get("data-status") == str(status) and says in message.text()
