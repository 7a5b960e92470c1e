"""The report's HTML page in a real headless Chromium (Debian's chromium, driven by Playwright): it renders without
a console error, asks no host but Chronicle for anything, and draws every chart with the right number of bars,
cells and points. A screenshot of the page is kept under test-artifacts/."""

from __future__ import annotations

from api.slack import channels
from api.slack.reports import service
from api.slack.reports.period import Period
from tests.browser import ARTIFACTS
from tests.helpers import READ_TOKEN
from tests.slack.conftest import REPORT_BASE


def test_the_report_page_renders_every_chart_offline(db, served, browser, report_workspace):
    team = report_workspace
    for i, members in enumerate((3, 5, 8)):  # member-count log of #general: three observations in the window
        db.execute(*channels.members_write(team, "CREPGENERAL", (REPORT_BASE + (i * 3 - 5) * 86400) * 1_000_000,
                                           members, "backfill"))
    document = service.generate(db, team, Period.parse_id("2026-03-01-7"))
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.set_extra_http_headers({"Authorization": f"Bearer {READ_TOKEN}"})
    problems: list[str] = []
    hosts: set[str] = set()
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning")
            else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", lambda r: hosts.add(r.url.split("/")[2]))
    response = page.goto(f"{served}/slack/teams/{team}/reports/2026-03-01-7.html")
    assert response.status == 200 and response.headers["content-type"].startswith("text/html")
    page.wait_for_load_state("load")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "slack-report.png"), full_page=True)
    assert problems == []
    assert hosts == {served.split("/")[2]}  # every request went to Chronicle itself

    def count(selector: str) -> int:
        return page.locator(selector).count()

    assert count("#chart-utc-weekday rect.bar") == 14  # 7 weekdays, this period and the previous one
    assert count("#chart-utc-hour rect.bar") == 48 and count("#chart-local-hour rect.bar") == 48
    assert count("#chart-weekday-hours-utc rect.bar") == 48 and count("#chart-local-weekday rect.bar") == 14
    assert count("#chart-heatmap rect.cell") == 168
    assert count("#chart-channels rect.bar") == 2 * len(document["channels"]) == 4
    assert count("#chart-posters rect.bar") == 2 * 2
    assert count("#chart-members circle.point") == 3
    # bars carry the figures they draw: the weekday chart adds up to the period's message count
    values = page.eval_on_selector_all("#chart-utc-weekday rect.bar-value", "els => els.map(e => +e.dataset.value)")
    assert sum(values) == document["totals"]["messages"]["value"] == 21
    heights = page.eval_on_selector_all("#chart-utc-weekday rect.bar-value",
                                        "els => els.map(e => e.getBoundingClientRect().height)")
    assert all(h > 0 for h in heights)  # every weekday had messages: every bar is drawn, not only declared
    assert page.locator("#totals [data-figure=messages] .v").inner_text() == "21"
    page.close()
