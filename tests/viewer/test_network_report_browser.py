"""The follower-network and report pages in a real headless Chromium (Debian's chromium, driven by Playwright):
an account page, a home timeline in both orders, the top-100 page with its history charts drawn, a word search
from the header box, then signed in: the list of reports and a report with its charts. No console error or
warning (a CSP refusal of inline code would be one), no dialog, nothing asked of another host.
Screenshots: test-artifacts/viewer-network-*.png and viewer-report-*.png."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.viewer.insights_data import (
    DAY_REPORTS,
    PRIVATE_REPORT,
    PUBLIC_REPORT,
    NetworkData,
    ReportData,
    api_tokens,
    build_network,
    chart_expectation,
    fill_reports,
    new_report_team,
)

TEAM = new_report_team()
PAGE = 25


@pytest.fixture(scope="module")
def app(settings, db):
    """The app with this module's report tokens (tests/viewer/insights_data.py)."""
    from api.app import create_app

    application = create_app(dataclasses.replace(settings, api_tokens=api_tokens(TEAM)), database=db)
    application.config["TESTING"] = True
    return application


@pytest.fixture(scope="module")
def net(app, db, tmp_path_factory) -> NetworkData:
    return build_network(app.test_client(), db, tmp_path_factory.mktemp("network-browser"))


@pytest.fixture(scope="module")
def reports(app, db) -> ReportData:
    return fill_reports(app.test_client(), db, TEAM)


class Watch:
    """What a page must not do: log a console error or warning, throw, open a dialog, ask another host."""

    def __init__(self, served: str) -> None:
        self.host = served.split("/")[2]
        self.problems: list[str] = []
        self.hosts: set[str] = set()

    def attach(self, page: Page) -> Page:
        page.on("console", lambda m: self.problems.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss()))
        page.on("request", lambda r: self.hosts.add(r.url.split("/")[2]))
        return page


def _shot(page: Page, artifacts: Path, name: str) -> None:
    page.screenshot(path=str(artifacts / f"viewer-{name}.png"), full_page=True)


def _post_ids(page: Page, list_id: str) -> list[int]:
    return [int(x) for x in page.locator(f"#{list_id} li.post").evaluate_all("els => els.map(e => e.dataset.post)")]


def test_network_pages_account_home_top_and_search(browser, served, net: NetworkData, artifacts):
    watch = Watch(served)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, timezone_id="UTC")
    page = watch.attach(context.new_page())
    ref = net.ref

    # the landing forms: a network by name, then an account by id
    response = page.goto(f"{served}/archive/networks")
    assert response.status == 200 and "script-src 'self'" in response.headers["content-security-policy"]
    page.fill("#network-name", net.name)
    page.press("#network-name", "Enter")
    page.wait_for_url(f"{served}/archive/networks/{net.name}")
    expect(page.locator("#landing-top li")).to_have_count(10)
    _shot(page, artifacts, "network-landing")
    page.fill("#account-id", str(net.author))
    page.press("#account-id", "Enter")
    page.wait_for_url(f"{served}/archive/networks/{net.name}/accounts/{net.author}")
    expect(page.locator("#account-name")).to_have_text(ref.usernames[net.author])
    expect(page.locator("#count-followers")).to_have_text(f"{len(ref.followers(net.author)):,}")
    assert _post_ids(page, "posts") == ref.q1(net.author)[:PAGE]
    hostile = page.locator(f"#post-{net.hostile_post} .post-text")
    expect(hostile).to_contain_text("<script>alert('post')</script>")  # shown as text, never run
    assert page.locator("#posts script, #posts img").count() == 0
    _shot(page, artifacts, "network-account")
    page.click("#older-posts")
    page.wait_for_url(f"**/accounts/{net.author}?cursor=*")
    assert _post_ids(page, "posts") == ref.q1(net.author)[PAGE:2 * PAGE]

    # the home timeline of the account following the most, newest first, then most liked
    page.goto(f"{served}/archive/networks/{net.name}/accounts/{net.reader}")
    page.click("#tab-home")
    page.wait_for_url(f"**/accounts/{net.reader}/home")
    expect(page.locator("#order-newest")).to_have_attribute("aria-current", "page")
    assert _post_ids(page, "home-posts") == ref.q4(net.reader, "newest", net.cap, PAGE)[2]
    _shot(page, artifacts, "network-home-newest")
    page.click("#order-likes")
    page.wait_for_url(f"**/accounts/{net.reader}/home?order=likes")
    expect(page.locator("#order-likes")).to_have_attribute("aria-current", "page")
    liked = ref.q4(net.reader, "likes", net.cap, PAGE)[2]
    assert _post_ids(page, "home-posts") == liked
    likes = page.locator("#home-posts .like-count").all_inner_texts()
    assert [int(n) for n in likes] == [ref.like_count(p) for p in liked]
    _shot(page, artifacts, "network-home-likes")

    # the top 100: both tables, both charts drawn with a point per (account, snapshot) of the latest top 10
    page.click("#nav-top")
    page.wait_for_url(f"**/networks/{net.name}/top")
    for kind in ("accounts", "followers"):
        expect(page.locator(f"#table-{kind} tbody tr")).to_have_count(len(net.snapshots[-1][kind]))
        top10, points, lines = chart_expectation(net.snapshots, kind)
        chart = page.locator(f"#chart-top-{kind}")
        expect(chart.locator("circle.point")).to_have_count(len(points))
        box = chart.bounding_box()
        assert box and box["width"] > 400 and box["height"] > 150
        circles = chart.locator("circle.point").evaluate_all(
            "els => els.map(e => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width]; })")
        assert all(box["x"] <= x and x + w <= box["x"] + box["width"] + 1 and box["y"] <= y <= box["y"] + box["height"]
                   and w > 0 for x, y, w in circles)  # drawn inside the chart, not only declared
        lengths = chart.locator("polyline.line").evaluate_all("els => els.map(e => e.getTotalLength())")
        assert len(lengths) == lines and all(n > 0 for n in lengths)
        colours = chart.locator("polyline.line").evaluate_all("els => els.map(e => getComputedStyle(e).stroke)")
        assert len(set(colours)) == len(colours)  # network.css gives each line its own colour
        expect(page.locator(f"#legend-{kind} li")).to_have_count(len(top10))
    page.locator("#ranking-accounts figure").screenshot(path=str(artifacts / "viewer-network-top-chart.png"))
    _shot(page, artifacts, "network-top")

    # the word search from the header box
    page.fill("#network-search-q", net.word)
    page.press("#network-search-q", "Enter")
    page.wait_for_url(f"**/networks/{net.name}/search?q={net.word}")
    assert _post_ids(page, "results") == ref.q6([net.word])
    expect(page.locator("#results li.post").first.locator("mark").first).to_have_text(net.word, ignore_case=True)
    _shot(page, artifacts, "network-search")

    context.close()
    assert watch.problems == []
    assert watch.hosts == {watch.host}


def test_report_list_and_a_report_with_its_charts(browser, served, reports: ReportData, artifacts):
    watch = Watch(served)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, timezone_id="UTC")
    page = watch.attach(context.new_page())
    target = f"/archive/teams/{TEAM}/reports"
    page.goto(f"{served}{target}")  # signed out: the sign-in form, then back to the list
    page.wait_for_url(f"{served}/archive?next=*")
    page.fill("#token", reports.public_token)
    with page.expect_navigation():
        page.click("#signin-button")
    assert page.url == f"{served}{target}"
    every = sorted([PUBLIC_REPORT, PRIVATE_REPORT, *DAY_REPORTS], reverse=True)
    rows = page.locator("#report-list tbody tr").evaluate_all("els => els.map(e => e.dataset.report)")
    assert rows == every[:PAGE]
    _shot(page, artifacts, "report-list")

    page.click(f"#report-list tr[data-report='{PUBLIC_REPORT}'] a")
    page.wait_for_url(f"**{target}/{PUBLIC_REPORT}")
    expect(page.locator("#report-title")).to_have_text("Activity report 01 Mar 2026 – 07 Mar 2026")
    expect(page.locator("#totals [data-figure=messages] .v")).to_have_text(str(reports.messages[PUBLIC_REPORT]))
    # every chart is drawn: bars with height, the heatmap's cells at their drawn size, in the page's colours
    expect(page.locator("#chart-utc-weekday rect.bar")).to_have_count(14)
    heights = page.locator("#chart-utc-weekday rect.bar").evaluate_all(
        "els => els.map(e => e.getBoundingClientRect().height)")
    assert all(h > 0 for h in heights)
    expect(page.locator("#chart-heatmap rect.cell")).to_have_count(168)
    cell = page.locator("#chart-heatmap rect.cell").first.evaluate(
        "e => [e.getBBox().width, e.getBBox().height, getComputedStyle(e).fill]")
    assert cell[:2] == [24, 24] and cell[2] == "rgb(47, 111, 223)"  # not viewer.css's 14px calendar cells
    fills = page.locator("#chart-utc-weekday rect.bar-value").evaluate_all(
        "els => els.map(e => getComputedStyle(e).fill)")
    assert set(fills) == {"rgb(47, 111, 223)"}  # reports.css: no inline style needed
    expect(page.locator("#chart-channels rect.bar")).to_have_count(4)
    expect(page.locator("#chart-posters rect.bar")).to_have_count(4)
    _shot(page, artifacts, "report")

    page.click("#toggle-anonymise")
    page.wait_for_url("**?anonymise=1")
    expect(page.locator("#anonymised-badge")).to_be_visible()
    assert not any(name in page.locator("#report").inner_text() for name in reports.names)

    page.goto(f"{served}{target}/{PRIVATE_REPORT}")  # counts private channels: this token lacks the scope
    expect(page.locator("#error-message")).to_contain_text("private")
    _shot(page, artifacts, "report-forbidden-private")
    context.close()
    # the refused page's status is the document's own: Chromium logs that one as a console error, nothing else
    assert watch.problems == ["console error: Failed to load resource: the server responded with a status of 403 "
                              "(FORBIDDEN)"]
    assert watch.hosts == {watch.host}
