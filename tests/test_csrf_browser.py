"""The cross-site request forgeries of issue 28 replayed in a real headless Chromium (Debian's chromium, driven by
Playwright) from a page of ANOTHER origin: a tiny http.server on another loopback port (same host, so the same
site: SameSite=Strict cookies still go along, the hardest case), and once from `localhost` (another site). Each
attack is refused and changes nothing; the legitimate flows (sign in and out of the archive and of tagging, the tag
page's calls) still work and send the page's real Origin. Screenshots: test-artifacts/csrf-*.png.
Rules one by one through Flask's test client: tests/test_csrf.py."""

from __future__ import annotations

import html
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import BrowserContext, Page, expect
from playwright.sync_api import Error as PlaywrightError

from api.tagging import service
from tests.browser import ARTIFACTS
from tests.test_csrf import make_tagging_project, statuses


@dataclass
class Attacker:
    """The attacker's web server: `pages[path]` is the HTML it serves."""

    port: int
    pages: dict[str, str] = field(default_factory=dict)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture(scope="module")
def attacker() -> Iterator[Attacker]:
    pages: dict[str, str] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = pages.get(self.path.split("?")[0])
            data = (body or "not here").encode()
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield Attacker(server.server_port, pages)
    server.shutdown()


@pytest.fixture(scope="module")
def tagging(db) -> dict:
    made = make_tagging_project(db)
    made["tokens"]["bob"] = service.add_member(db, made["project"], "bob", "red", "tagger")
    return made


def _shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"csrf-{name}.png"), full_page=True)


def _cookie(context: BrowserContext, name: str) -> str | None:
    found = [c["value"] for c in context.cookies() if c["name"] == name]
    return found[0] if found else None


def _form(action: str, fields: dict[str, str], *, no_referrer: bool = True, method: str = "post",
          enctype: str | None = None) -> str:
    """An attacker's page that submits a form to `action` as soon as it loads."""
    inputs = "".join(f'<input name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in fields.items())
    meta = '<meta name="referrer" content="no-referrer">' if no_referrer else ""
    enc = f' enctype="{enctype}"' if enctype else ""
    return (f'<!doctype html><html><head>{meta}<title>Win a prize</title></head><body>'
            f'<form id="f" method="{method}" action="{html.escape(action)}"{enc}>{inputs}</form>'
            '<script>document.getElementById("f").submit()</script></body></html>')


def _attack(page: Page, url: str, target: str, method: str = "POST"):
    """Open the attacker's page and wait for the request it makes to Chronicle (`target`): its response."""
    with page.expect_response(lambda r: r.url.split("?")[0] == target and r.request.method == method) as caught:
        try:
            page.goto(url, wait_until="commit")
        except PlaywrightError as exc:  # the attacker's form navigated away before its own page committed
            if "interrupted by another navigation" not in str(exc):
                raise
    return caught.value


def _sign_in_archive(context: BrowserContext, served: str, token: str) -> Page:
    """The legitimate sign-in: the page's own form sends its real Origin and its token."""
    page = context.new_page()
    page.goto(f"{served}/archive")
    page.fill("#token", token)
    with page.expect_response(lambda r: r.url == f"{served}/archive" and r.request.method == "POST") as signin:
        page.click("#signin-button")
    sent = signin.value.request.all_headers()
    assert signin.value.status == 303
    assert sent.get("origin") == served and sent.get("sec-fetch-site") == "same-origin"
    page.wait_for_load_state()
    assert _cookie(context, "chronicle_archive") == token
    return page


# -- archive ----------------------------------------------------------------------------------------------------------

def test_archive_sign_in_and_sign_out_from_another_origin_are_refused(browser, served, attacker):
    victim = browser.new_context(viewport={"width": 1100, "height": 700})
    page = _sign_in_archive(victim, served, "token-all")
    _shot(page, "archive-signed-in")

    # issue 28, finding 1: a page on another port replaces the reader's cookie with the attacker's token
    attacker.pages["/swap"] = _form(f"{served}/archive", {"token": "token-t1", "tz": "UTC"})
    evil = victim.new_page()
    response = _attack(evil, attacker.url("/swap"), f"{served}/archive")
    sent = response.request.all_headers()
    assert (sent.get("origin"), sent.get("sec-fetch-site")) == ("null", "same-site")  # what the attack looks like
    assert response.status == 403
    expect(evil.locator("#signin-error")).to_contain_text("cross-site request forgery")
    _shot(evil, "archive-swap-refused")
    assert _cookie(victim, "chronicle_archive") == "token-all"

    # the same form without the no-referrer trick (a real foreign Origin)
    attacker.pages["/swap-origin"] = _form(f"{served}/archive", {"token": "token-t1"}, no_referrer=False)
    response = _attack(evil, attacker.url("/swap-origin"), f"{served}/archive")
    assert response.request.all_headers().get("origin") == attacker.url("")
    assert response.status == 403 and _cookie(victim, "chronicle_archive") == "token-all"

    # ... and with a CSRF token the attacker got from their own visit of the sign-in page
    other = browser.new_context()
    own = other.new_page()
    own.goto(f"{served}/archive")
    stolen = own.locator("input[name=csrf_token]").input_value()
    other.close()
    attacker.pages["/swap-token"] = _form(f"{served}/archive", {"token": "token-t1", "csrf_token": stolen},
                                          no_referrer=False)
    assert _attack(evil, attacker.url("/swap-token"), f"{served}/archive").status == 403
    assert _cookie(victim, "chronicle_archive") == "token-all"

    # from another site altogether (localhost is not 127.0.0.1's site)
    response = _attack(evil, attacker.url("/swap", host="localhost"), f"{served}/archive")
    assert response.request.all_headers().get("sec-fetch-site") == "cross-site" and response.status == 403
    assert _cookie(victim, "chronicle_archive") == "token-all"

    # signing the reader out from there
    attacker.pages["/signout"] = _form(f"{served}/archive/signout", {})
    response = _attack(evil, attacker.url("/signout"), f"{served}/archive/signout")
    assert response.status == 403
    expect(evil.locator("#error-title")).to_have_text("Sign-out refused")
    _shot(evil, "archive-signout-refused")
    assert _cookie(victim, "chronicle_archive") == "token-all"
    attacker.pages["/signout-get"] = (f'<!doctype html><meta name="referrer" content="no-referrer">'
                                      f'<script>location.href = "{served}/archive/signout"</script>')
    assert _attack(evil, attacker.url("/signout-get"), f"{served}/archive/signout", "GET").status == 405
    assert _cookie(victim, "chronicle_archive") == "token-all"

    # the reader's own page still works: a page reload, then the sign-out button (a real Origin, the token)
    page.reload()
    with page.expect_response(lambda r: r.url == f"{served}/archive/signout") as signout:
        page.click("#signout")
    assert signout.value.status == 303 and signout.value.request.all_headers().get("origin") == served
    page.wait_for_url(f"{served}/archive")
    assert _cookie(victim, "chronicle_archive") is None
    victim.close()


def test_archive_login_csrf_on_a_signed_out_browser_is_refused(browser, served, attacker):
    victim = browser.new_context()
    victim.new_page().goto(f"{served}/archive")  # has visited Chronicle: its CSRF cookie is there
    attacker.pages["/login"] = _form(f"{served}/archive", {"token": "token-t1"})
    evil = victim.new_page()
    assert _attack(evil, attacker.url("/login"), f"{served}/archive").status == 403
    assert _cookie(victim, "chronicle_archive") is None
    victim.close()


# -- tagging ----------------------------------------------------------------------------------------------------------

def test_tagging_pages_work_and_every_forgery_is_refused(browser, served, attacker, tagging, app):
    project, tokens = tagging["project"], tagging["tokens"]
    admin = app.test_client()

    # the legitimate flow: ann signs in through the form; the tag page's script leases her an item
    ann = browser.new_context(viewport={"width": 1280, "height": 860})
    page = ann.new_page()
    page.goto(f"{served}/tagging")
    page.fill("#token", tokens["ann"])
    with page.expect_response(lambda r: r.url == f"{served}/tagging/projects/{project}/next") as leased:
        page.click("#signin-button")
    call = leased.value
    assert call.status == 200 and call.request.method == "POST", call.text()
    assert call.request.all_headers().get("origin") == served and call.request.all_headers().get("x-csrf-token")
    assert call.request.all_headers().get("sec-fetch-site") == "same-origin"
    expect(page.locator("#item-seq")).to_have_text(f"#{call.json()['item']['seq']}")
    _shot(page, "tagging-tag-page")

    # bob is signed in too (his cookie, as the sign-in sets it), on no page: he holds nothing
    bob = browser.new_context()
    bob.add_cookies([{"name": "chronicle_tagging", "value": tokens["bob"], "domain": "127.0.0.1",
                      "path": "/tagging", "httpOnly": True, "sameSite": "Strict"}])
    bob_page = bob.new_page()
    bob_page.goto(f"{served}/tagging")  # a page of Chronicle: the browser's CSRF cookie
    before = statuses(admin, project, tagging["items"])

    # issue 28, finding 2: a page on another port leases an item as bob with a text/plain fetch ...
    next_url = f"{served}/tagging/projects/{project}/next"
    attacker.pages["/lease"] = (
        '<!doctype html><meta name="referrer" content="no-referrer"><script>'
        f'fetch("{next_url}", {{method: "POST", mode: "no-cors", credentials: "include", '
        'headers: {"Content-Type": "text/plain"}, body: "{}"}).then(() => { document.title = "sent"; });'
        '</script>')
    evil = bob.new_page()
    response = _attack(evil, attacker.url("/lease"), next_url)
    assert response.status == 403  # (the Origin is null, and the cookie went along: same site)
    # ... with its real Origin
    attacker.pages["/lease-origin"] = attacker.pages["/lease"].replace(
        '<meta name="referrer" content="no-referrer">', "")
    assert _attack(evil, attacker.url("/lease-origin"), next_url).status == 403
    # ... as a text/plain form
    attacker.pages["/lease-form"] = _form(next_url, {'{"x": "': '"}'}, enctype="text/plain")
    response = _attack(evil, attacker.url("/lease-form"), next_url)
    assert response.status == 403
    expect(evil.locator("body")).to_contain_text("cross-site request forgery")
    _shot(evil, "tagging-lease-refused")
    # ... as JSON with a made-up token: the browser asks first (CORS preflight), Chronicle allows nothing
    attacker.pages["/lease-json"] = (
        '<!doctype html><script>'
        f'fetch("{next_url}", {{method: "POST", credentials: "include", headers: {{"Content-Type": '
        '"application/json", "X-CSRF-Token": "x"}, body: "{}"}).then(() => { document.title = "leased"; }, '
        '() => { document.title = "blocked"; });</script>')
    evil.goto(attacker.url("/lease-json"))
    expect(evil).to_have_title("blocked")
    assert statuses(admin, project, tagging["items"]) == before  # nothing leased

    # login CSRF: the attacker signs bob in as mallory (her own project), with or without her own CSRF token
    mallory = browser.new_context()
    own = mallory.new_page()
    own.goto(f"{served}/tagging")
    stolen = own.locator("input[name=csrf_token]").input_value()
    mallory.close()
    for path, fields in (("/login", {"token": tokens["mallory"]}),
                         ("/login-token", {"token": tokens["mallory"], "csrf_token": stolen})):
        attacker.pages[path] = _form(f"{served}/tagging/signin", fields)
        response = _attack(evil, attacker.url(path), f"{served}/tagging/signin")
        assert response.status == 403, path
        assert _cookie(bob, "chronicle_tagging") == tokens["bob"]
    expect(evil.locator("#signin-error")).to_contain_text("cross-site request forgery")
    _shot(evil, "tagging-login-refused")

    # sign-out: GET (a link or an image from anywhere) is 405; a foreign POST is refused
    attacker.pages["/signout-get"] = f'<!doctype html><script>location.href = "{served}/tagging/signout"</script>'
    assert _attack(evil, attacker.url("/signout-get"), f"{served}/tagging/signout", "GET").status == 405
    attacker.pages["/signout"] = _form(f"{served}/tagging/signout", {})
    assert _attack(evil, attacker.url("/signout"), f"{served}/tagging/signout").status == 403
    assert _cookie(bob, "chronicle_tagging") == tokens["bob"]
    assert statuses(admin, project, tagging["items"]) == before

    # ann's own page still works: skip (a POST with her page's token), then sign out with the button
    with page.expect_response(lambda r: r.url.endswith("/skip")) as skipped:
        page.click("#skip-button")
    assert skipped.value.status == 200, skipped.value.text()
    with page.expect_response(lambda r: r.url == f"{served}/tagging/signout") as signout:
        page.click("#signout")
    assert signout.value.status == 303 and signout.value.request.all_headers().get("origin") == served
    page.wait_for_url(f"{served}/tagging")
    assert _cookie(ann, "chronicle_tagging") is None
    for context in (ann, bob):
        context.close()
