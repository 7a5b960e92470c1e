"""The tagging pages in a real headless Chromium (Debian's chromium, driven by Playwright): two taggers and a QA
reviewer work through a small project of archived Slack messages end to end, and the dashboard shows the
figures this test computes from what it did. Pages load nothing from another host, log no console error, and
show hostile archived text as text (no dialog ever opens). Screenshots are kept under test-artifacts/."""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter
from datetime import UTC, datetime

import pytest
from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from api.tagging import service, worker
from tests.browser import ARTIFACTS
from tests.helpers import form_post
from tests.slack.helpers import created, delete, msg, post_event

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
       "base-uri 'none'; form-action 'self'")

CATEGORIES = ["incident", "question", "announcement", "social", "other"]
SUBCATEGORIES = ["billing", "deploy", "planning", "food"]
HOSTILE = "<script>alert(1)</script> <img src=x onerror=alert(1)> & \"quotes\" 'too'"
DAY = datetime(2026, 2, 10, 9, 0, tzinfo=UTC)
LEASE_SECONDS = 600

# The channel's messages in time order, so item numbers follow this list (a Slack source lists by channel, then
# time). The fourth is deleted after the project is made: its item shows "source missing".
MESSAGES = [
    ("parent", "U1", "Deploy of billing-api failed at 09:02, rolling back now"),
    ("reply", "U2", "Rollback done, error rate is back to normal"),
    ("hostile", "U2", HOSTILE),
    ("deleted", "U1", "Can someone review the invoice export PR?"),
    ("disabled", "U1", "Lunch order today: pizza or sushi?"),
    ("skipped", "U2", "Reminder: quarterly planning tomorrow at 10:00"),
    ("spare", "U1", "Release notes for 4.2 are up on the wiki"),
]


def _ts(i: int) -> str:
    return f"{int(DAY.timestamp()) + 60 * i}.000100"


@pytest.fixture(scope="module")
def tagging_project(app, db):
    """A Slack channel archived through live events (two named people, a thread, hostile text), a project over
    it with a queue of one (so the test decides, with worker passes, which item each tagger gets), two teams,
    two taggers, a QA reviewer and an admin."""
    client = app.test_client()
    team, channel = f"TTAG{uuid.uuid4().hex[:8].upper()}", f"CTAG{uuid.uuid4().hex[:8].upper()}"
    for user, name in (("U1", "dana"), ("U2", "eli")):
        profile = {"id": user, "name": name, "updated": 1_700_000_000, "tz": "UTC", "tz_offset": 0,
                   "profile": {"display_name": name, "real_name": name.title()}}
        assert post_event(client, team, {"type": "team_join", "user": profile,
                                         "event_ts": "1700000000.000100"}).status_code == 200
    assert post_event(client, team, created(channel, "ops-chat", "1700000000.000200")).status_code == 200
    for i, (role, user, text) in enumerate(MESSAGES):
        extra = {"thread_ts": _ts(0)} if role == "reply" else {}
        assert post_event(client, team, msg(channel, _ts(i), text, user=user, **extra)).status_code == 200
    project = f"ui{uuid.uuid4().hex[:10]}"
    made = service.create_project(
        db, project, "Ops chat, February", {"kind": "slack", "team": team, "channels": [channel],
                                            "from": "2026-02-10", "to": "2026-02-10"},
        CATEGORIES, SUBCATEGORIES, queue_size=1, lease_seconds=LEASE_SECONDS, max_held=1,
        teams={"red": None, "blue": 10})
    assert made.total_items == len(MESSAGES)
    deleted = [i for i, m in enumerate(MESSAGES) if m[0] == "deleted"][0]
    assert post_event(client, team, delete(channel, _ts(deleted), _ts(100))).status_code == 200
    people = {"ann": ("red", "tagger"), "bob": ("blue", "tagger"), "quinn": ("red", "qa"), "ada": ("red", "admin")}
    tokens = {user: service.add_member(db, project, user, t, role) for user, (t, role) in people.items()}
    return {"project": project, "tokens": tokens, "team": team, "channel": channel}


class Watch:
    """Everything a page must not do: log a console error, throw, open a dialog, ask another host."""

    def __init__(self, served: str) -> None:
        self.host = served.split("/")[2]
        self.problems: list[str] = []
        self.hosts: set[str] = set()
        self.urls: list[str] = []
        self.expected: list[str] = []  # console errors a step provokes on purpose (a refused request)

    def attach(self, page: Page, who: str) -> Page:
        page.on("console", lambda m: self._console(who, m))
        page.on("pageerror", lambda e: self.problems.append(f"{who} page error: {e}"))
        page.on("dialog", lambda d: (self.problems.append(f"{who} dialog: {d.message}"), d.dismiss()))
        page.on("request", self._request)
        return page

    def _console(self, who: str, message) -> None:
        if message.type not in ("error", "warning"):
            return
        for i, wanted in enumerate(self.expected):
            if wanted in message.text:
                del self.expected[i]
                return
        self.problems.append(f"{who} console {message.type}: {message.text}")

    def _request(self, request) -> None:
        self.hosts.add(request.url.split("/")[2])
        self.urls.append(request.url)


def _sign_in(browser, served: str, watch: Watch, who: str, token: str, landing: str) -> Page:
    return _sign_in_context(browser.new_context(viewport={"width": 1280, "height": 860}), served, watch, who, token,
                            landing)


def _sign_in_context(context, served: str, watch: Watch, who: str, token: str, landing: str) -> Page:
    """Sign in through the form in a browser context of its own (its own cookie jar: one person)."""
    page = watch.attach(context.new_page(), who)
    response = page.goto(f"{served}/tagging")
    assert response.status == 200 and response.headers["content-security-policy"] == CSP
    page.fill("#token", token)
    with page.expect_navigation():
        page.click("#signin-button")
    assert page.url.endswith(landing), page.url
    cookie = [c for c in page.context.cookies() if c["name"] == "chronicle_tagging"][0]
    assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"], cookie["value"]) == (True, "Strict", "/tagging",
                                                                                        token)
    return page


def _expect_item(page: Page, watch: Watch, seq: int) -> None:
    """Wait until the page shows item `seq` (a page loads its item after it rendered)."""
    try:
        page.wait_for_selector(f"#item-card[data-seq='{seq}']", timeout=15_000)
    except PlaywrightTimeout as exc:
        raise AssertionError(f"item {seq} not shown: the page shows {page.get_attribute('#item-card', 'data-seq')!r}"
                             f", status {page.inner_text('#status')!r}; {watch.problems}") from exc


def _shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"tagging-{name}.png"), full_page=True)


def _table(page: Page, table: str, key: str) -> dict[str, dict[str, str]]:
    rows = page.eval_on_selector_all(
        f"#{table} tbody tr[data-{key}]",
        "rows => rows.map(r => Object.fromEntries([...r.cells].map(c => [c.dataset.col, c.textContent])))")
    return {r[key]: r for r in rows}


def test_two_taggers_and_a_reviewer_work_through_a_project(db, served, browser, tagging_project, app):
    project, tokens = tagging_project["project"], tagging_project["tokens"]
    base = f"/tagging/projects/{project}"
    watch = Watch(served)
    started = time.monotonic()
    submitted: dict[int, dict[str, list[str]]] = {}  # what this test submitted, by item: the expected figures

    # -- signing in: unknown and global admin tokens are refused on pages --------------------------------------
    probe = watch.attach(browser.new_context().new_page(), "probe")
    probe.goto(f"{served}/tagging")
    _shot(probe, "signin")
    for bad in ("tg_not-a-token", "test-admin-token"):
        probe.fill("#token", bad)
        watch.expected.append("status of 401")
        with probe.expect_navigation() as nav:
            probe.click("#signin-button")
        assert nav.value.status == 401
        expect(probe.locator("#signin-error")).to_contain_text("Unknown token")
    _shot(probe, "signin-refused")
    probe.goto(f"{served}{base}/tag")
    assert probe.url == f"{served}/tagging"  # no cookie: back to sign in
    probe.context.close()

    # -- two taggers hold different items at once ----------------------------------------------------------------
    worker.run_once(db, project)
    ann = _sign_in(browser, served, watch, "ann", tokens["ann"], f"{base}/tag")
    _expect_item(ann, watch, 0)
    worker.run_once(db, project)
    bob = _sign_in(browser, served, watch, "bob", tokens["bob"], f"{base}/tag")
    _expect_item(bob, watch, 1)
    expect(ann.locator("#item-text")).to_have_text(MESSAGES[0][2])
    expect(ann.locator("#item-author")).to_have_text("dana")
    expect(ann.locator("#item-channel")).to_have_text("#ops-chat")
    expect(ann.locator("#item-time")).to_have_text("2026-02-10 09:00 UTC")
    expect(ann.locator("#who-user")).to_have_text("ann")
    expect(ann.locator("#lease")).to_have_text(re.compile(r"^(09:[45]\d|10:00)$"))
    assert ann.locator("#shortcut-list").inner_text().count("\n") >= 5  # the shortcuts are listed on the page

    # a tagger may not open the QA page
    forbidden = watch.attach(ann.context.new_page(), "ann-forbidden")
    watch.expected.append("status of 403")
    response = forbidden.goto(f"{served}{base}/qa")
    assert response.status == 403 and response.headers["content-security-policy"] == CSP
    expect(forbidden.locator("#forbidden-message")).to_contain_text("tagger cannot open the review page")
    _shot(forbidden, "forbidden")
    forbidden.close()

    # -- ann tags item 0: a click, a digit shortcut, subcategories, two new keywords, Ctrl+Enter ----------------
    ann.click("label.choice:has(input[value=incident])")
    ann.keyboard.press("3")  # toggles category 3 (announcement) ...
    ann.keyboard.press("3")  # ... and back
    ann.keyboard.press("2")  # question
    ann.click("label.choice:has(input[value=deploy])")
    ann.click("label.choice:has(input[value=billing])")
    ann.fill("#keyword-input", "rollback")
    ann.keyboard.press("Enter")
    ann.fill("#keyword-input", "  Billing   API ")
    ann.keyboard.press("Enter")
    expect(ann.locator("#keyword-chips li")).to_have_count(2)
    _shot(ann, "tag-ann")
    ann.keyboard.press("Control+Enter")
    expect(ann.locator("#status")).to_contain_text("Submitted item #0")
    expect(ann.locator("#item-status")).to_have_text("Tagged")
    submitted[0] = {"user": ["ann"], "categories": ["incident", "question"], "subcategories": ["billing", "deploy"],
                    "keywords": ["rollback", "billing api"]}

    # -- bob reloads: the same item comes back; its thread context is shown --------------------------------------
    bob.reload()
    _expect_item(bob, watch, 1)
    expect(bob.locator("#item-text")).to_have_text(MESSAGES[1][2])
    expect(bob.locator("#item-kind")).to_have_text("Slack reply in a thread")
    expect(bob.locator("#thread-list li")).to_have_count(1)
    expect(bob.locator("#thread-list li .thread-text")).to_have_text(MESSAGES[0][2])
    expect(bob.locator("#thread-list li strong")).to_have_text("dana")

    # keyword completion offers the keyword ann created
    bob.click("#keyword-input")
    bob.keyboard.type("rol")
    suggestion = bob.locator("#keyword-suggestions li[data-keyword='rollback']")
    expect(suggestion).to_be_visible()
    _shot(bob, "tag-bob-completion")
    suggestion.click()
    expect(bob.locator("#keyword-chips li[data-keyword='rollback']")).to_be_visible()
    bob.fill("#keyword-input", "Error Rate")
    bob.keyboard.press("Enter")
    bob.keyboard.press("Escape")  # leave the field: digits are shortcuts again
    bob.keyboard.press("1")  # incident
    bob.click("label.choice:has(input[value=deploy])")
    bob.click("#submit-button")
    expect(bob.locator("#status")).to_contain_text("Submitted item #1")
    submitted[1] = {"user": ["bob"], "categories": ["incident"], "subcategories": ["deploy"],
                    "keywords": ["rollback", "error rate"]}

    # -- ann's next item is hostile text: shown as text, nothing runs ---------------------------------------------
    worker.run_once(db, project)
    ann.keyboard.press("n")
    _expect_item(ann, watch, 2)
    expect(ann.locator("#item-text")).to_have_text(HOSTILE)
    assert ann.locator("#item-text img, #item-text script").count() == 0
    assert ann.locator("#item-status").inner_text() == "InProgress"
    ann.keyboard.press("5")  # other
    ann.fill("#keyword-input", "xss")
    ann.keyboard.press("Enter")
    ann.click("label.choice:has(input[value=question])")
    _shot(ann, "tag-hostile")
    ann.click("#submit-button")
    expect(ann.locator("#status")).to_contain_text("Submitted item #2")
    submitted[2] = {"user": ["ann"], "categories": ["other", "question"], "subcategories": [], "keywords": ["xss"]}

    # -- bob: a deleted source is shown as missing and reported ----------------------------------------------------
    worker.run_once(db, project)
    bob.click("#next-button")
    _expect_item(bob, watch, 3)
    expect(bob.locator("#item-missing")).to_be_visible()
    expect(bob.locator("#item-text")).to_be_hidden()
    expect(bob.locator("#item-author-row")).to_be_hidden()  # nothing is known of a deleted message
    expect(bob.locator("#submit-button")).to_be_disabled()
    _shot(bob, "tag-missing")
    bob.click("#report-missing")
    expect(bob.locator("#status")).to_contain_text("Reported item #3 as source missing")
    expect(bob.locator("#item-status")).to_have_text("SourceMissing")

    # -- bob: an admin disables the item he holds; his submit is refused with the reason (409) -------------------
    worker.run_once(db, project)
    bob.keyboard.press("n")
    _expect_item(bob, watch, 4)
    client = app.test_client()
    admin = {"Authorization": f"Bearer {tokens['ada']}"}
    assert client.post(f"{base}/items/4/disable", headers=admin).status_code == 200
    bob.keyboard.press("4")  # social
    watch.expected.append("status of 409")
    bob.keyboard.press("Control+Enter")
    expect(bob.locator("#status")).to_contain_text("409: an admin disabled this item")
    expect(bob.locator("#next-button")).to_be_enabled()
    expect(bob.locator("#item-status")).to_have_text("Lease lost")
    _shot(bob, "tag-409")

    # -- bob skips the next one with the keyboard: it goes back, and the queue is empty for now ------------------
    worker.run_once(db, project)
    bob.keyboard.press("n")
    _expect_item(bob, watch, 5)
    bob.keyboard.press("s")
    expect(bob.locator("#status")).to_contain_text("Skipped item #5")
    expect(bob.locator("#item-empty")).to_contain_text("queue is empty")
    expect(bob.locator("#lease")).to_have_text("--:--")

    # -- quinn (QA) verifies: one Correct, one Incorrect; verified items leave the list ---------------------------
    worker.run_once(db, project)  # submitted items join the review lane
    quinn = _sign_in(browser, served, watch, "quinn", tokens["quinn"], f"{base}/qa")
    expect(quinn.locator("#review-list > li")).to_have_count(3)
    assert [int(s) for s in quinn.eval_on_selector_all("#review-list > li", "els => els.map(e => e.dataset.seq)")] \
        == [0, 1, 2]
    hostile_card = quinn.locator("#review-list > li[data-seq='2']")
    expect(hostile_card.locator(".item-text")).to_have_text(HOSTILE)
    expect(quinn.locator("#review-list > li[data-seq='1'] .thread li")).to_have_count(1)
    expect(quinn.locator("#review-list > li[data-seq='0'] .chip.kw")).to_have_text(["rollback", "billing api"])
    _shot(quinn, "review")
    first = quinn.locator("#review-list > li[data-seq='0']")
    first.locator("input.note").fill("good, thorough")
    first.locator("button.correct").click()
    expect(quinn.locator("#status")).to_contain_text("Item #0 marked Correct")
    second = quinn.locator("#review-list > li[data-seq='1']")
    second.locator("input.note").fill("an error rate report is not an incident")
    second.locator("button.incorrect").click()
    expect(quinn.locator("#status")).to_contain_text("Item #1 marked Incorrect")
    expect(quinn.locator("#review-list > li")).to_have_count(1)
    quinn.reload()
    expect(quinn.locator("#review-list > li")).to_have_count(1)  # the server agrees: only item 2 waits
    verified = {0: "Correct", 1: "Incorrect"}
    stored = client.get(f"{base}/items/1", headers=admin).get_json()["item"]
    assert (stored["status"], stored["verification"], stored["verifier"], stored["note"]) == \
        ("QAVerified", "Incorrect", "quinn", "an error rate report is not an incident")
    assert client.get(f"{base}/items/0", headers=admin).get_json()["item"]["categories"] == ["incident", "question"]

    # -- the dashboard (the admin lands on it) shows what this test did ------------------------------------------
    worker.run_once(db, project)  # the worker applies the effort log to the figures
    ada = _sign_in(browser, served, watch, "ada", tokens["ada"], f"{base}/dashboard")
    tagged = len(submitted)
    expected_project = {"total": len(MESSAGES), "tagged": tagged, "verified": len(verified),
                        "correct": list(verified.values()).count("Correct"),
                        "incorrect": list(verified.values()).count("Incorrect"), "disabled": 1, "source_missing": 1,
                        "remaining": len(MESSAGES) - tagged - 2, "queued": 1}
    for figure, value in expected_project.items():
        expect(ada.locator(f"#project-figures [data-figure={figure}] .v")).to_have_text(str(value))
    claims = {"ann": [0, 2], "bob": [1, 3, 4, 5]}  # every item each one was handed
    team_of = {"ann": "red", "bob": "blue"}
    finished = Counter(s["user"][0] for s in submitted.values())
    correct = Counter(submitted[i]["user"][0] for i, r in verified.items() if r == "Correct")
    incorrect = Counter(submitted[i]["user"][0] for i, r in verified.items() if r == "Incorrect")
    # a team uses a unit per item held or finished: bob's missing, disabled and skipped items gave theirs back
    used = {"red": finished["ann"], "blue": finished["bob"]}
    ada.wait_for_selector("#users-table tbody tr[data-user='bob']")
    users = _table(ada, "users-table", "user")
    teams = _table(ada, "teams-table", "team")
    assert set(users) == {"ann", "bob"}  # figures are about taggers
    for user in ("ann", "bob"):
        row = users[user]
        assert (row["team"], row["assigned"], row["finished"], row["correct"], row["incorrect"]) == (
            team_of[user], str(len(claims[user])), str(finished[user]), str(correct[user]), str(incorrect[user]))
        assert row["average_seconds"] != "–"
    figures = client.get(f"{base}/stats", headers=admin).get_json()
    for row in figures["users"]:  # claim to submit, each within this test's run
        assert 0 < row["average_seconds"] <= time.monotonic() - started
    for user, team in team_of.items():
        row = teams[team]
        assert (row["assigned"], row["finished"], row["correct"], row["incorrect"], row["used"]) == (
            str(len(claims[user])), str(finished[user]), str(correct[user]), str(incorrect[user]), str(used[team]))
    assert (teams["red"]["quota"], teams["blue"]["quota"]) == ("no limit", "10")

    def top(field: str) -> list[list]:
        counts = Counter(x for s in submitted.values() for x in s[field])
        return [[n, str(c)] for n, c in sorted(counts.items(), key=lambda nc: (-nc[1], nc[0]))[:5]]

    for field in ("categories", "subcategories", "keywords"):
        shown = ada.eval_on_selector_all(f"#top-{field} li[data-name]",
                                         "els => els.map(e => [e.dataset.name, e.dataset.count])")
        assert shown == top(field), field
    expect(ada.locator("#online")).to_have_text("4")  # ann, bob, quinn and ada were active just now
    # the page refreshes by itself every 5 s
    loaded = ada.get_attribute("body", "data-loaded")
    expect(ada.locator("body")).not_to_have_attribute("data-loaded", loaded, timeout=12_000)
    _shot(ada, "dashboard")

    # -- signing out clears the cookie --------------------------------------------------------------------------
    ann.click("#signout")
    ann.wait_for_url(f"{served}/tagging")
    assert [c for c in ann.context.cookies() if c["name"] == "chronicle_tagging"] == []
    ann.goto(f"{served}{base}/tag")
    assert ann.url == f"{served}/tagging"

    # -- the lease countdown runs out in the browser's (fake) clock: "lease expired" -----------------------------
    late = browser.new_context(viewport={"width": 1280, "height": 860})
    late.clock.install()
    late_page = _sign_in_context(late, served, watch, "bob-late", tokens["bob"], f"{base}/tag")
    _expect_item(late_page, watch, 5)  # the skipped item, queued again by a worker pass
    expect(late_page.locator("#lease")).to_have_text(re.compile(r"^(09:[45]\d|10:00)$"))
    late.clock.fast_forward(LEASE_SECONDS * 1000 + 2000)
    expect(late_page.locator("#lease")).to_have_text("lease expired")
    _shot(late_page, "tag-lease-expired")

    # every page, script and stylesheet came from Chronicle itself, and the hostile <img src=x> never loaded
    assert watch.hosts == {watch.host}
    assert not [u for u in watch.urls if u.rstrip("/").endswith("/x")]
    assert watch.problems == []
    assert watch.expected == []  # each refusal provoked on purpose was seen, as the only console error
    for page in (ann, bob, quinn, ada, late_page):
        page.context.close()


def test_pages_send_security_headers_and_static_files(client, tagging_project):
    """Every response of the pages blueprint carries the CSP and friends; the assets are served by Chronicle."""
    for path in ("/tagging", "/tagging/static/tag.js", "/tagging/static/tagging.css"):
        r = client.get(path)
        assert r.status_code == 200, path
        assert r.headers["Content-Security-Policy"] == CSP
        assert r.headers["X-Content-Type-Options"] == "nosniff" and r.headers["Referrer-Policy"] == "same-origin"
    assert client.get("/tagging/static/tag.js").mimetype in ("text/javascript", "application/javascript")
    r = form_post(client, "/tagging/signin", {"token": tagging_project["tokens"]["quinn"]}, page="/tagging")
    assert r.status_code == 303 and r.headers["Location"].endswith(f"/projects/{tagging_project['project']}/qa")
    assert "HttpOnly" in r.headers["Set-Cookie"] and "SameSite=Strict" in r.headers["Set-Cookie"]
    assert "Secure" not in r.headers["Set-Cookie"]  # plain HTTP here
    r = client.get(f"/tagging/projects/{tagging_project['project']}/tag")
    assert r.status_code == 403  # a QA reviewer does not tag
    r = client.get("/tagging/projects/someone-elses/dashboard")
    assert r.status_code == 403
    assert client.get("/tagging/signout").status_code == 405  # POST only, with the page's CSRF token
    r = form_post(client, "/tagging/signout", page=f"/tagging/projects/{tagging_project['project']}/qa")
    assert r.status_code == 303 and "chronicle_tagging=;" in r.headers["Set-Cookie"]
