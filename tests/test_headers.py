"""One header policy on every response (api/pages.py `secure`, applied app-wide in api/app.py): every route of the
URL map, answered with 200s and with errors, as HTML and as JSON, with and without tokens, carries the CSP
(default-src 'self', frame-ancestors 'none', no inline script), nosniff and the Referrer-Policy; HTML is no-store,
except a page with an ETag: kept privately and revalidated each time (`private, no-cache`; api/conditional.py).
"""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from werkzeug.routing import IntegerConverter

from api.slack.sample import GENERAL, T0, TEAM
from tests.helpers import ADMIN_TOKEN, READ_TOKEN, form_post

READ = {"Authorization": f"Bearer {READ_TOKEN}"}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
# A value for each path argument of the URL map: the sample workspace's (so many answers are 200s).
VALUES = {"team_id": TEAM, "channel_id": GENERAL, "ts": f"{T0 + 10}.000000", "thread_ts": f"{T0 + 20}.000000",
          "user_id": "UALICE", "file_id": "FNOTSTORED", "report_id": "2025-11-16-7", "network": "sample",
          "ranking": "top-accounts", "project": "no-such-project", "project_id": "no-such-project",
          "filename": "chronicle.css"}
INLINE_SCRIPT = re.compile(r"<script\b(?![^>]*\bsrc=)[^>]*>", re.I)


def directives(csp: str) -> dict[str, str]:
    return {part.split()[0]: part.strip() for part in csp.split(";") if part.strip()}


def check(response, what: str) -> None:
    headers = response.headers
    csp = directives(headers.get("Content-Security-Policy", ""))
    assert csp.get("frame-ancestors") == "frame-ancestors 'none'", (what, headers)
    assert csp.get("default-src") in ("default-src 'self'", "default-src 'none'"), what
    scripts = csp.get("script-src", csp["default-src"])
    assert "'unsafe-inline'" not in scripts and "'unsafe-eval'" not in scripts, what
    assert headers.get("X-Content-Type-Options") == "nosniff", what
    assert headers.get("Referrer-Policy") == "same-origin", what
    if response.mimetype == "text/html":
        stored = "private, no-cache" if "ETag" in headers else "no-store"
        assert headers.get("Cache-Control") == stored, what
        assert not INLINE_SCRIPT.search(response.get_data(as_text=True)), f"{what}: inline script"


@pytest.fixture(scope="module")
def sample(db, settings):
    from api.network.sample import load_sample as load_network_sample
    from api.slack.sample import load_sample as load_slack_sample

    load_slack_sample(db, settings)
    load_network_sample(db)


def _url(app, rule) -> str:
    values = {}
    for name, converter in rule._converters.items():
        values[name] = 1 if isinstance(converter, IntegerConverter) else VALUES.get(name, "X1")
    with app.test_request_context():
        return app.url_for(rule.endpoint, **values)


def test_every_route_answers_with_the_policy(app, client, sample):
    reader = app.test_client()
    signed_in = form_post(reader, "/archive", {"token": READ_TOKEN})
    assert signed_in.status_code in (302, 303), signed_in.get_data(as_text=True)[:300]
    seen, statuses = 0, set()
    for rule in app.url_map.iter_rules():
        url = _url(app, rule)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            if method == "GET":
                tries = [(client, {}), (client, READ), (client, ADMIN), (reader, {})]
            else:  # refused (no token, a read token, no CSRF token): never changes anything here
                tries = [(client, {}), (client, READ)]
            for who, headers in tries:
                response = who.open(url, method=method, headers=headers, json={} if method != "GET" else None)
                check(response, f"{method} {url} {headers or ('cookie' if who is reader else 'anonymous')} "
                                f"-> {response.status_code}")
                statuses.add((response.status_code // 100, response.mimetype))
                seen += 1
    assert seen > 150
    # Both kinds of answers, both kinds of bodies were checked.
    assert {(2, "text/html"), (2, "application/json"), (4, "text/html"), (4, "application/json")} <= statuses


@pytest.mark.parametrize("path", ["/archive/no/such/page", "/archive/teams", "/nope", "/slack/teams/T1/nope",
                                  "/tagging/no/such/page", "/docs/nope", "/common/static/nope.css"])
def test_unmatched_paths_answer_404_with_the_policy(client, path):
    response = client.get(path)
    assert response.status_code == 404
    check(response, path)


def test_method_not_allowed_and_too_large_answers_have_the_policy(client, settings):
    check(client.get("/slack/events"), "405")
    big = client.post("/slack/events", data=b"x" * (settings.max_body_bytes + 1),
                      headers={"Content-Type": "application/json"})
    assert big.status_code == 413
    check(big, "413")


def test_a_server_error_has_the_policy(settings, db):
    from api.app import create_app

    app = create_app(settings, database=db)

    @app.get("/boom")
    def boom():
        raise RuntimeError("boom")

    response = app.test_client().get("/boom")
    assert response.status_code == 500 and response.mimetype == "application/json"
    check(response, "500")


def test_docs_has_no_inline_script_and_serves_its_own_files(client):
    page = client.get("/docs")
    assert page.status_code == 200 and page.mimetype == "text/html"
    check(page, "/docs")
    html = page.get_data(as_text=True)
    assert directives(page.headers["Content-Security-Policy"])["script-src"] == "script-src 'self'"
    sources = re.findall(r'<script[^>]*\bsrc="([^"]+)"', html) + re.findall(r'<link[^>]*\bhref="(/[^"]+)"', html)
    assert len(sources) == 3 and all(s.startswith("/docs/") for s in sources), sources  # local, no CDN
    for source in sources:
        asset = client.get(source)
        assert asset.status_code == 200, source
        check(asset, source)
    init = client.get(next(s for s in sources if "init" in s)).get_data(as_text=True)
    assert "SwaggerUIBundle" in init
    assert re.search(r'data-spec-url="/openapi.json"', html)


def test_the_rest_report_served_as_html_has_the_policy(client, db, sample):
    from api.slack.reports import jobs, service

    made = client.post(f"/slack/teams/{TEAM}/reports", json={"start": "2025-11-16", "days": 7}, headers=ADMIN)
    assert made.status_code == 202, made.get_data(as_text=True)[:300]  # queued: the report worker makes it
    jobs.ReportWorker(db, service.run_job).run(until_idle=True)
    report_id = made.json["report_id"]
    for path, headers in ((f"/slack/teams/{TEAM}/reports/{report_id}.html", READ),
                          (f"/slack/teams/{TEAM}/reports/{report_id}", {**READ, "Accept": "text/html"})):
        page = client.get(path, headers=headers)
        assert page.status_code == 200 and page.mimetype == "text/html", path
        check(page, path)
        # Its one <style> is allowed by hash (the same page is a standalone file from the CLI); no inline script.
        style = re.search(r"<style>(.*?)</style>", page.get_data(as_text=True), re.S).group(1)
        digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
        assert directives(page.headers["Content-Security-Policy"])["style-src"] == \
            f"style-src 'self' 'sha256-{digest}'"


def test_docs_works_in_chromium_under_its_csp(browser, served):
    """Swagger UI renders the API's operations with the page's CSP: no violation, no error, nothing from another
    host."""
    from urllib.parse import urlsplit

    page = browser.new_page()
    problems, hosts = [], set()
    page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    page.on("request", lambda r: hosts.add(urlsplit(r.url).netloc) if r.url.startswith("http") else None)
    try:
        page.goto(f"{served}/docs")
        page.wait_for_selector(".opblock-summary-path", timeout=20_000)
        paths = page.locator(".opblock-summary-path").all_inner_texts()
        assert any("/slack/teams/{team_id}/channels" in p.replace("\u200b", "") for p in paths), paths[:5]
    finally:
        page.close()
    assert problems == [] and hosts == {urlsplit(served).netloc}, (problems, hosts)
