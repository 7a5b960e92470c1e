"""The install in a real headless Chromium (Debian's chromium, Playwright): the front door's "Add to Slack", the
install page, the fake Slack's consent page on its own origin, back to Chronicle's redirect, installed; then the
same link used again is refused with a page. No console error on Chronicle's pages. Screenshots:
test-artifacts/install-*.png."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from api.slack import installations
from tests.browser import ARTIFACTS, serve
from tests.fakes.slack_web_api import FakeSlackWebApi
from tests.slack.install_helpers import oauth_app


@pytest.fixture
def fake():
    with FakeSlackWebApi(team_id=f"TB{uuid.uuid4().hex[:10].upper()}", team_name="Browser Co") as f:
        yield f


def test_install_from_the_front_door_in_chromium(settings, db, fake, clock, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    with oauth_app(settings, fake, clock) as (app, oauth_db):
        server = serve(app)
        base = next(server)
        try:
            fake.oauth.default_redirect_uri = f"{base}/slack/oauth_redirect"
            context = browser.new_context(viewport={"width": 1200, "height": 800})
            page = context.new_page()
            problems: list[str] = []
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" and base in page.url else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(f"{base}/")
            expect(page.locator("#front-links")).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "install-front-door.png"), full_page=True)
            page.click("#add-to-slack")
            expect(page).to_have_url(f"{base}/slack/install")
            page.click("#add-to-slack")
            expect(page.locator("#scopes")).to_contain_text("files:read")  # Slack's consent page (the fake's)
            page.click("#allow")
            expect(page.locator("#install-done")).to_contain_text("Browser Co")
            page.screenshot(path=str(ARTIFACTS / "install-done.png"), full_page=True)
            done_url = page.url
            assert installations.installation(oauth_db, fake.team_id)["state"] == "active"
            # The same redirect again (back button, a shared link): refused with a page, nothing changes.
            response = page.goto(done_url)
            assert response is not None and response.status == 400
            expect(page.locator("#install-error")).to_contain_text("start again")
            page.screenshot(path=str(ARTIFACTS / "install-refused.png"), full_page=True)
            problems = [p for p in problems if "400" not in p]  # the refused page's own status, on purpose
            assert problems == []
            context.close()
        finally:
            next(server, None)
