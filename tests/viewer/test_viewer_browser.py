"""The archive's Slack pages in a real headless Chromium (Debian's chromium, driven by Playwright), with the
browser in New York time: sign in, browse #general back through three pages of history, open a thread and an edit
history in the side panel, download a stored file, read the hostile channel (no script runs, no dialog opens, the
100 KB message is there), the refusals (another workspace, a private channel without the scope), sign out.
No console errors; nothing is loaded from another host. Screenshots: test-artifacts/viewer-*.png."""

from __future__ import annotations

import re
import zoneinfo
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from api.viewer import render
from tests.fakes.slack_file_host import content_for
from tests.viewer.viewer_data import BIG_TEXT, READER_ZONE, Archive


class Watch:
    """What a page must not do: log a console error or warning, throw, open a dialog, ask another host."""

    def __init__(self, served: str) -> None:
        self.host = served.split("/")[2]
        self.problems: list[str] = []
        self.hosts: set[str] = set()
        self.expected: list[str] = []  # console errors a step provokes on purpose (a refused page)

    def attach(self, page: Page) -> Page:
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss()))
        page.on("request", lambda r: self.hosts.add(r.url.split("/")[2]))
        return page

    def _console(self, message) -> None:
        if message.type not in ("error", "warning"):
            return
        for i, wanted in enumerate(self.expected):
            if wanted in message.text:
                del self.expected[i]
                return
        self.problems.append(f"console {message.type}: {message.text}")


@pytest.fixture(scope="module")
def watch(served) -> Watch:
    return Watch(served)


def _shot(page: Page, artifacts: Path, name: str, *, full: bool = False) -> None:
    page.screenshot(path=str(artifacts / f"viewer-{name}.png"), full_page=full)


def _sign_in(browser, served: str, watch: Watch, token: str, landing: str):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, timezone_id=READER_ZONE,
                                  accept_downloads=True)
    page = watch.attach(context.new_page())
    response = page.goto(f"{served}/archive")
    assert response.status == 200 and "script-src 'self'" in response.headers["content-security-policy"]
    expect(page.locator("#tz")).to_have_value(READER_ZONE)  # archive.js read the browser's zone
    page.fill("#token", token)
    with page.expect_navigation():
        page.click("#signin-button")
    assert page.url == f"{served}{landing}"
    return context, page


def test_browse_a_channel_its_thread_history_and_file_then_sign_out(browser, served, filled: Archive, watch,
                                                                    artifacts):
    context, page = _sign_in(browser, served, watch, filled.token_private, f"/archive/teams/{filled.team}")
    expect(page.locator("#who-scope")).to_contain_text(READER_ZONE)
    expect(page.locator("#channel-list li")).to_have_count(len(filled.channels))
    _shot(page, artifacts, "workspace")

    page.click(f"#channel-list li[data-channel='{filled.general}'] a")
    page.wait_for_url(f"{served}/archive/teams/{filled.team}/channels/{filled.general}")
    expect(page.locator("#channel-name")).to_have_text("#general")
    visible = filled.visible_top_level(filled.general)
    first_page = page.locator("#timeline li.message").count()
    assert 40 <= first_page < len(visible)
    _shot(page, artifacts, "channel")

    # "load older" twice reaches the first message; each day has one separator, in the reader's zone
    clicks = 0
    while page.locator("#load-older").is_visible():
        before = page.locator("#timeline li.message").count()
        page.click("#load-older")
        expect(page.locator("#timeline li.message")).not_to_have_count(before)
        clicks += 1
    assert clicks == 2
    expect(page.locator("#timeline-end")).to_be_visible()
    shown = page.locator("#timeline li.message").evaluate_all("items => items.map(li => li.dataset.ts)")
    assert shown == [m.ts for m in visible]
    tz = zoneinfo.ZoneInfo(READER_ZONE)
    assert page.locator("#timeline li.message a.time").all_inner_texts() == [
        m.at.astimezone(tz).strftime("%H:%M") for m in visible]
    days = page.locator("#timeline section.day").evaluate_all("items => items.map(s => s.dataset.day)")
    assert days == [d.isoformat() for d in filled.local_days(filled.general)]
    labels = page.locator("#timeline .day-separator").all_inner_texts()
    assert labels[-1] == filled.local_days(filled.general)[-1].strftime("%A, %d %B %Y").replace(" 0", " ")
    page.locator(f"li[data-ts='{filled.by_key('g5').ts}']").scroll_into_view_if_needed()
    _shot(page, artifacts, "channel-older")

    # the thread opens in the side panel with its (not deleted) replies
    head = filled.by_key("g100")
    page.locator(f"li[data-ts='{head.ts}'] button.replies").click()
    expect(page.locator("#panel")).to_be_visible()
    expect(page.locator("#panel-title")).to_have_text("Thread in #general")
    replies = [m for m in filled.messages if m.thread_ts == head.ts and not m.deleted_at]
    expect(page.locator("#panel ol.thread-replies li.message")).to_have_count(len(replies))
    expect(page.locator("#panel ol.thread-replies .message-text")).to_have_text([m.text for m in replies])
    expect(page.locator(f"li[data-ts='{head.ts}']").first).to_have_class(re.compile(r"\bselected\b"))
    _shot(page, artifacts, "thread")

    # "(edited)" shows every version of the text, newest first
    edited = filled.by_key("g120")
    page.locator(f"#timeline li[data-ts='{edited.ts}'] button.edited").click()
    expect(page.locator("#panel-title")).to_have_text("Edit history")
    expect(page.locator("#panel li.version .message-text")).to_have_text(
        ["Final version of the announcement 👋", "Second version of the announcement", edited.text])
    _shot(page, artifacts, "history")
    page.keyboard.press("Escape")
    expect(page.locator("#panel")).to_be_hidden()

    # a stored file downloads the bytes the file worker stored
    with page.expect_download() as download:
        page.locator(f"li[data-ts='{filled.by_key('g110').ts}'] a.file-link[data-file-id='FVIEWREPORT']").click()
    assert download.value.suggested_filename == "report.txt"
    assert Path(download.value.path()).read_bytes() == content_for("FVIEWREPORT")

    # deleted messages, greyed, on request
    page.click("#toggle-deleted")
    page.wait_for_url(re.compile(r".*include_deleted=1$"))
    expect(page.locator(f"li.message.deleted[data-ts='{filled.by_key('g125').ts}']")).to_be_visible()

    # sign out: the cookie is gone and pages go back to the sign-in form
    page.click("#signout")
    page.wait_for_url(f"{served}/archive")
    assert [c for c in context.cookies() if c["name"] == "chronicle_archive"] == []
    page.goto(f"{served}/archive/teams/{filled.team}/channels/{filled.general}")
    assert page.url.startswith(f"{served}/archive?next=")
    expect(page.locator("#token")).to_be_visible()
    assert watch.hosts == {watch.host}
    assert watch.problems == []
    context.close()


def test_hostile_messages_run_no_script_and_the_page_renders(browser, served, filled: Archive, watch, artifacts):
    context, page = _sign_in(browser, served, watch, filled.token_private, f"/archive/teams/{filled.team}")
    page.goto(f"{served}/archive/teams/{filled.team}/channels/{filled.hostile}")
    expect(page.locator("#timeline li.message")).to_have_count(len(filled.visible_top_level(filled.hostile)))
    big = page.locator(f"li[data-ts='{filled.by_key('hostile-big').ts}'] .message-text")
    assert big.evaluate("el => el.textContent") == BIG_TEXT
    found = page.evaluate("""(rtl) => ({
        scripts: document.querySelectorAll('#timeline script, #timeline img, #timeline svg, #timeline iframe').length,
        handlers: Array.from(document.querySelectorAll('#timeline *')).filter(
            el => Array.from(el.attributes).some(a => a.name.startsWith('on'))).length,
        hrefs: Array.from(document.querySelectorAll('a[href]')).map(a => a.protocol),
        isolated: getComputedStyle(document.querySelector(`li[data-ts='${rtl}'] .message-text`)).unicodeBidi,
    })""", filled.by_key("hostile-rtl").ts)
    assert found["scripts"] == 0 and found["handlers"] == 0
    assert set(found["hrefs"]) <= {"http:", "https:", "mailto:"}
    assert found["isolated"] == "isolate"  # a right-to-left override stays inside the message
    # the script-tag text is on the page as text
    expect(page.locator(f"li[data-ts='{filled.by_key('hostile-script').ts}'] .message-text")).to_contain_text(
        "<script>alert('script tag')</script>")
    _shot(page, artifacts, "hostile")

    page.goto(f"{served}/archive/teams/{filled.team}/users/UANN")
    expect(page.locator("#user-name")).to_have_text("Ann")
    expect(page.locator("#recent-messages li.message")).to_have_count(20)
    assert page.locator("#calendar li.cell[data-count]").count() >= 78
    _shot(page, artifacts, "user", full=True)
    page.goto(f"{served}/archive/teams/{filled.team}/users/UEVIL")
    # render.shown: the name's right-to-left override closed at its end (docs/viewer.md, "Rendering limits")
    expect(page.locator("#user-name")).to_have_text(render.shown(filled.users[2]["profile"]["display_name"]))
    assert watch.hosts == {watch.host}
    assert watch.problems == []
    context.close()


def test_refusals_say_why(browser, served, filled: Archive, watch, artifacts):
    context, page = _sign_in(browser, served, watch, filled.token_other, f"/archive/teams/{filled.other_team}")
    watch.expected.append("403")
    response = page.goto(f"{served}/archive/teams/{filled.team}")
    assert response.status == 403
    expect(page.locator("#error-message")).to_contain_text(f"may not read workspace {filled.team}")
    _shot(page, artifacts, "forbidden-workspace")
    context.close()

    context, page = _sign_in(browser, served, watch, filled.token_public, f"/archive/teams/{filled.team}")
    expect(page.locator(f"#channel-list li[data-channel='{filled.private_channel}']")).to_have_count(0)
    watch.expected.append("403")
    response = page.goto(f"{served}/archive/teams/{filled.team}/channels/{filled.private_channel}")
    assert response.status == 403
    expect(page.locator("#error-title")).to_have_text("Private channel")
    expect(page.locator("#error-message")).to_contain_text("lacks the private scope")
    _shot(page, artifacts, "forbidden-private")
    assert watch.problems == []
    assert watch.expected == []  # each refusal logged its one console error, nothing else did
    context.close()


def _word(word: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE) is not None


def _result_ts(page: Page) -> list[str]:
    return page.locator("#search-results li.message").evaluate_all("items => items.map(li => li.dataset.ts)")


def test_search_with_modifiers_pages_and_respects_scopes(browser, served, filled: Archive, watch, artifacts):
    context, page = _sign_in(browser, served, watch, filled.token_private, f"/archive/teams/{filled.team}")
    page.fill("#search-q", "message in:#general from:@ann")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expected = [m.ts for m in sorted(filled.messages, key=lambda m: m.ts, reverse=True)
                if m.channel == filled.general and m.user == "UANN" and not m.deleted_at
                and _word("message", m.current_text)]
    assert len(expected) > 40  # three pages of 20
    assert _result_ts(page) == expected[:20]
    expect(page.locator("#search-understood")).to_contain_text("from: @ann")
    _shot(page, artifacts, "search")
    page.click("#search-next")
    expect(page.locator("#search-results li.message").first).to_have_attribute("data-ts", expected[20])
    assert _result_ts(page) == expected[20:40]

    # dates are the reader's days (the browser is in New York)
    tz = zoneinfo.ZoneInfo(READER_ZONE)
    day = filled.by_key("g5").at.astimezone(tz).date()
    page.goto(f"{served}/archive/teams/{filled.team}/search?q=general+on:{day.isoformat()}")
    assert _result_ts(page) == [m.ts for m in sorted(filled.messages, key=lambda m: m.ts, reverse=True)
                                if m.channel == filled.general and not m.deleted_at
                                and _word("general", m.current_text) and m.at.astimezone(tz).date() == day][:20]

    # hostile text found by search is shown as text; a query it cannot read says why
    page.goto(f"{served}/archive/teams/{filled.team}/search?q=script+in:%23hostile-input")
    script_ts = filled.by_key("hostile-script").ts
    assert script_ts in _result_ts(page)
    expect(page.locator(f"#search-results li[data-ts='{script_ts}'] .message-text")).to_contain_text("<script>")
    assert page.locator("#search-results script, #search-results img").count() == 0
    watch.expected.append("422")
    response = page.goto(f"{served}/archive/teams/{filled.team}/search?q=plan+has:star")
    assert response.status == 422
    expect(page.locator("#search-error")).to_contain_text("has: takes file, link or reaction")
    page.goto(f"{served}/archive/teams/{filled.team}/search?q=secret+plan")
    assert len(_result_ts(page)) == 3
    context.close()

    context, page = _sign_in(browser, served, watch, filled.token_public, f"/archive/teams/{filled.team}")
    page.goto(f"{served}/archive/teams/{filled.team}/search?q=secret+plan")
    expect(page.locator("#search-empty")).to_be_visible()  # the private channel is not searched without scope
    assert watch.problems == [] and watch.expected == []
    assert watch.hosts == {watch.host}
    context.close()
