"""Cross-site request forgery (api/csrf.py, docs/security.md "CSRF") through Flask's test client: each rule on the
archive's and tagging's sign-in and sign-out forms and on the tagging REST routes the pages' cookie authenticates
(Origin, Sec-Fetch-Site, the token and its binding, the content type, POST-only sign-out), bearer calls untouched,
refusals 403/415 with a reason and never a 500, and the legitimate flows. The same attacks from a page of another
origin in Chromium: tests/test_csrf_browser.py."""

from __future__ import annotations

import re
import types
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from flask import Blueprint, Flask

from api import csrf
from api.network import posts
from api.network.values import Post
from api.tagging import service, worker
from tests.helpers import ADMIN_TOKEN, SAME_ORIGIN, csrf_token_of, form_post

SIGNINS = {"archive": ("/archive", "/archive", "chronicle_archive", "token-all"),
           "tagging": ("/tagging/signin", "/tagging", "chronicle_tagging", None)}  # path, form page, cookie, token


def make_tagging_project(db, items: int = 4) -> dict:
    """A project over `items` archived network posts, its queue filled, with a tagger `ann` and an attacker's own
    tagger `mallory` (another project: her token signs her into that one)."""
    network = f"csrfnet{uuid.uuid4().hex[:8]}"
    base = datetime(2026, 1, 1, tzinfo=UTC)
    made = [Post(9_000_000 + i, 9, base + timedelta(minutes=i), "user9", content=f"post {i}") for i in range(items)]
    db.execute_many(w for p in made for w in posts.post_writes(network, p))
    tokens = {}
    names = {}
    for who in ("victim", "attacker"):
        project = f"csrf{who}{uuid.uuid4().hex[:8]}"
        service.create_project(db, project, f"CSRF {who}", {"kind": "network", "network": network, "authors": [9]},
                               ["news", "other"], ["local"], teams={"red": None}, queue_size=items)
        user = "ann" if who == "victim" else "mallory"
        tokens[user] = service.add_member(db, project, user, "red", "tagger")
        worker.run_once(db, project)
        names[who] = project
    return {"project": names["victim"], "attacker_project": names["attacker"], "tokens": tokens, "items": items}


def statuses(client, project: str, items: int) -> list[str]:
    """Every item's status, read with the admin token (a read changes nothing)."""
    found = []
    for seq in range(items):  # items are numbered from 0
        r = client.get(f"/tagging/projects/{project}/items/{seq}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert r.status_code == 200, r.data
        found.append(r.json["item"]["status"])
    return found


@pytest.fixture(scope="module")
def tagging(db):
    return make_tagging_project(db)


def _token(kind: str, tagging: dict) -> str:
    return SIGNINS[kind][3] or tagging["tokens"]["ann"]


def _session(client, name: str) -> str | None:
    path = "/archive" if name == "chronicle_archive" else "/tagging"
    cookie = client.get_cookie(name, path=path)
    return cookie.value if cookie else None


def _tagging_client(app, tagging: dict):
    """A test client signed in to the tagging pages as ann, and the token of her tag page."""
    client = app.test_client()
    assert form_post(client, "/tagging/signin", {"token": tagging["tokens"]["ann"]}, page="/tagging").status_code == 303
    return client, csrf_token_of(client, f"/tagging/projects/{tagging['project']}/tag")


# -- the token and its cookie -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", SIGNINS)
def test_sign_in_form_carries_a_token_and_sets_the_csrf_cookie(app, kind):
    client = app.test_client()
    page = SIGNINS[kind][1]
    r = client.get(page)
    html = r.get_data(as_text=True)
    field = re.search(r'<input type="hidden" name="csrf_token" value="([^"]+)">', html)
    meta = re.search(r'<meta name="csrf-token" content="([^"]+)">', html)
    assert field and meta and field.group(1) == meta.group(1) and len(field.group(1)) == 43
    assert '<meta name="referrer" content="same-origin">' in html  # the form sends a real Origin, never null
    cookie = [c for c in r.headers.getlist("Set-Cookie") if c.startswith(csrf.COOKIE + "=")]
    assert len(cookie) == 1 and all(a in cookie[0] for a in ("HttpOnly", "SameSite=Lax", "Path=/"))
    # the cookie is kept: the next page does not set another one, and its token is the same
    again = client.get(page)
    assert not [c for c in again.headers.getlist("Set-Cookie") if c.startswith(csrf.COOKIE + "=")]
    assert csrf_token_of(client, page) == field.group(1)
    # another browser gets another cookie and token
    assert csrf_token_of(app.test_client(), page) != field.group(1)


# -- sign-in: Origin, Sec-Fetch-Site, token (login CSRF) ------------------------------------------------------------

@pytest.mark.parametrize("kind", SIGNINS)
def test_sign_in_from_the_page_itself_works(app, tagging, kind):
    path, page, cookie, _ = SIGNINS[kind]
    client = app.test_client()
    r = form_post(client, path, {"token": _token(kind, tagging)}, page=page)
    assert r.status_code == 303 and _session(client, cookie) == _token(kind, tagging)
    # a browser that sends Sec-Fetch-Site: same-origin but no Origin (none does on a POST; allowed)
    client = app.test_client()
    token = csrf_token_of(client, page)
    r = client.post(path, data={"token": _token(kind, tagging), "csrf_token": token},
                    headers={"Sec-Fetch-Site": "same-origin"})
    assert r.status_code == 303


HOSTILE_ORIGINS = {
    "Origin null (a no-referrer page, a sandboxed frame)": {"Origin": "null", "Sec-Fetch-Site": "same-origin"},
    "null without Sec-Fetch-Site": {"Origin": "null"},
    "no Origin and no Sec-Fetch-Site": {},
    "another site": {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
    "another site, no Sec-Fetch-Site": {"Origin": "https://evil.example"},
    "another port of this host (same-site)": {"Origin": "http://localhost:8081", "Sec-Fetch-Site": "same-site"},
    "another port, no Sec-Fetch-Site": {"Origin": "http://localhost:8081"},
    "a sibling host": {"Origin": "http://evil.localhost", "Sec-Fetch-Site": "same-site"},
    "same-site claimed with our own Origin": {"Origin": "http://localhost", "Sec-Fetch-Site": "same-site"},
    "cross-site without Origin": {"Sec-Fetch-Site": "cross-site"},
    "Sec-Fetch-Site none (typed or bookmarked)": {"Origin": "http://localhost", "Sec-Fetch-Site": "none"},
    "a host that only starts like ours": {"Origin": "http://localhost.evil.example"},
    "userinfo trick": {"Origin": "http://localhost@evil.example"},
    "not an origin": {"Origin": "http://[::1"},
    "a path in the Origin": {"Origin": "http://localhost/archive"},
    "javascript scheme": {"Origin": "javascript://localhost"},
    "non-ascii": {"Origin": "http://lоcalhost"},
}


@pytest.mark.parametrize("kind", SIGNINS)
@pytest.mark.parametrize("case", HOSTILE_ORIGINS)
def test_sign_in_from_another_origin_is_refused_even_with_a_valid_token(app, tagging, kind, case):
    path, page, cookie, _ = SIGNINS[kind]
    client = app.test_client()
    token = csrf_token_of(client, page)  # the worst case: the attacker somehow has a valid token and cookie
    headers = {k: v.encode("utf-8").decode("latin-1") for k, v in HOSTILE_ORIGINS[case].items()}
    r = client.post(path, data={"token": _token(kind, tagging), "csrf_token": token}, headers=headers)
    assert r.status_code == 403, (case, r.status_code, r.data[:300])
    assert r.mimetype == "text/html" and "cross-site request forgery" in r.get_data(as_text=True)
    assert 'id="signin-error"' in r.get_data(as_text=True)  # the sign-in form again, with a fresh token
    assert _session(client, cookie) is None and cookie not in str(r.headers.getlist("Set-Cookie"))


BAD_TOKENS = {"missing": None, "empty": "", "wrong": "A" * 43, "short": "abc", "non-ascii": "é" * 43,
              "huge": "x" * 10_000}


@pytest.mark.parametrize("kind", SIGNINS)
@pytest.mark.parametrize("case", BAD_TOKENS)
def test_sign_in_without_the_page_token_is_refused(app, tagging, kind, case):
    path, page, cookie, _ = SIGNINS[kind]
    client = app.test_client()
    csrf_token_of(client, page)
    data = {"token": _token(kind, tagging)}
    if BAD_TOKENS[case] is not None:
        data["csrf_token"] = BAD_TOKENS[case]
    r = client.post(path, data=data, headers=SAME_ORIGIN)
    assert r.status_code == 403, (case, r.data[:300])
    assert "CSRF token" in r.get_data(as_text=True) and _session(client, cookie) is None


@pytest.mark.parametrize("kind", SIGNINS)
def test_a_token_works_only_with_its_own_browser_cookie(app, tagging, kind):
    """Login CSRF with a pair the attacker made on their own browser: their token without their cookie fails."""
    path, page, cookie, _ = SIGNINS[kind]
    attacker, victim = app.test_client(), app.test_client()
    attackers_token = csrf_token_of(attacker, page)
    csrf_token_of(victim, page)  # the victim has a cookie of their own
    r = victim.post(path, data={"token": _token(kind, tagging), "csrf_token": attackers_token}, headers=SAME_ORIGIN)
    assert r.status_code == 403 and _session(victim, cookie) is None
    # and with no CSRF cookie at all (a first visit): refused, the answer sets one and its form works
    fresh = app.test_client()
    r = fresh.post(path, data={"token": _token(kind, tagging), "csrf_token": attackers_token}, headers=SAME_ORIGIN)
    assert r.status_code == 403 and "CSRF cookie is missing" in r.get_data(as_text=True)
    retry = re.search(r'name="csrf_token" value="([^"]+)"', r.get_data(as_text=True)).group(1)
    r = fresh.post(path, data={"token": _token(kind, tagging), "csrf_token": retry}, headers=SAME_ORIGIN)
    assert r.status_code == 303 and _session(fresh, cookie) == _token(kind, tagging)


def test_https_refuses_a_plain_http_origin_and_accepts_a_proxied_https_one(app):
    client = app.test_client()
    token = csrf_token_of(client, "/archive")
    data = {"token": "token-all", "csrf_token": token}
    r = client.post("/archive", data=data, base_url="https://localhost", headers={"Origin": "http://localhost"})
    assert r.status_code == 403 and "plain-HTTP" in r.get_data(as_text=True)
    # behind a TLS-terminating proxy the app sees http while the page was https: same host, accepted
    r = client.post("/archive", data=data, headers={"Origin": "https://localhost"})
    assert r.status_code == 303


# -- sign-out: POST only, same origin, the token bound to the session ------------------------------------------------

def test_archive_sign_out_is_post_only_and_needs_the_token(app):
    client = app.test_client()
    assert form_post(client, "/archive", {"token": "token-all"}).status_code == 303
    pre_session = csrf_token_of(app.test_client(), "/archive")
    assert client.get("/archive/signout").status_code == 405
    for headers, data in (({"Origin": "http://localhost:8081", "Sec-Fetch-Site": "same-site"}, {}),
                          ({"Origin": "null"}, {}), (SAME_ORIGIN, {}), (SAME_ORIGIN, {"csrf_token": pre_session})):
        r = client.post("/archive/signout", data=data, headers=headers)
        assert r.status_code == 403 and "Sign-out refused" in r.get_data(as_text=True), (headers, data)
        assert _session(client, "chronicle_archive") == "token-all"  # still signed in
    # a token of this browser from before the sign-in is not the signed-in session's token
    before = app.test_client()
    old = csrf_token_of(before, "/archive")
    assert form_post(before, "/archive", {"token": "token-all"}).status_code == 303
    r = before.post("/archive/signout", data={"csrf_token": old}, headers=SAME_ORIGIN)
    assert r.status_code == 403 and _session(before, "chronicle_archive") == "token-all"
    # the page's own button works
    r = form_post(client, "/archive/signout", page="/archive")
    assert r.status_code == 303 and _session(client, "chronicle_archive") is None


def test_tagging_sign_out_is_post_only_and_needs_the_token(app, tagging):
    client, token = _tagging_client(app, tagging)
    r = client.get("/tagging/signout")
    assert r.status_code == 405 and _session(client, "chronicle_tagging") == tagging["tokens"]["ann"]
    for headers, data in (({"Origin": "http://localhost:8081", "Sec-Fetch-Site": "same-site"}, {"csrf_token": token}),
                          ({"Origin": "null"}, {"csrf_token": token}), (SAME_ORIGIN, {}),
                          (SAME_ORIGIN, {"csrf_token": "B" * 43})):
        r = client.post("/tagging/signout", data=data, headers=headers)
        assert r.status_code == 403 and 'id="forbidden-message"' in r.get_data(as_text=True), (headers, data)
        assert _session(client, "chronicle_tagging") == tagging["tokens"]["ann"]
    r = client.post("/tagging/signout", data={"csrf_token": token}, headers=SAME_ORIGIN)
    assert r.status_code == 303 and _session(client, "chronicle_tagging") is None


def test_tagging_sign_in_over_a_session_binds_the_new_session(app, tagging):
    """Login CSRF against a signed-in person: the attacker's token (of their own browser) does not replace ann's
    cookie; her own page's token does (she signs in again herself)."""
    client, _ = _tagging_client(app, tagging)
    attacker = app.test_client()
    r = client.post("/tagging/signin", data={"token": tagging["tokens"]["mallory"],
                                              "csrf_token": csrf_token_of(attacker, "/tagging")}, headers=SAME_ORIGIN)
    assert r.status_code == 403 and _session(client, "chronicle_tagging") == tagging["tokens"]["ann"]


# -- tagging REST routes with the cookie ------------------------------------------------------------------------------

def test_tagging_calls_from_the_page_work(app, tagging):
    client, token = _tagging_client(app, tagging)
    project = tagging["project"]
    headers = {**SAME_ORIGIN, csrf.HEADER: token}
    r = client.post(f"/tagging/projects/{project}/next", json={}, headers=headers)
    assert r.status_code == 200 and r.json["item"]["holder"] == "ann", r.data
    seq, lease = r.json["item"]["seq"], r.json["item"]["lease_id"]
    r = client.post(f"/tagging/projects/{project}/items/{seq}/skip", json={"lease_id": lease}, headers=headers)
    assert r.status_code == 200, r.data
    # reads need no token
    assert client.get(f"/tagging/projects/{project}/stats").status_code == 200
    assert client.get("/tagging/me").json["user"] == "ann"


def test_tagging_calls_that_do_not_come_from_the_page_are_refused(app, tagging):
    client, token = _tagging_client(app, tagging)
    project, items = tagging["project"], tagging["items"]
    before = statuses(client, project, items)
    url = f"/tagging/projects/{project}/next"
    refused = {
        "no token": ({**SAME_ORIGIN}, "application/json", 403),
        "wrong token": ({**SAME_ORIGIN, csrf.HEADER: "C" * 43}, "application/json", 403),
        "a token of another session": ({**SAME_ORIGIN, csrf.HEADER: csrf_token_of(app.test_client(), "/tagging")},
                                       "application/json", 403),
        "Origin null": ({"Origin": "null", csrf.HEADER: token}, "application/json", 403),
        "no Origin, no Sec-Fetch-Site": ({csrf.HEADER: token}, "application/json", 403),
        "another port (same-site)": ({"Origin": "http://localhost:8081", "Sec-Fetch-Site": "same-site",
                                      csrf.HEADER: token}, "application/json", 403),
        "cross-site": ({"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, "application/json", 403),
        "text/plain body": ({**SAME_ORIGIN, csrf.HEADER: token}, "text/plain", 415),
        "a form body": ({**SAME_ORIGIN, csrf.HEADER: token}, "application/x-www-form-urlencoded", 415),
        "no content type": ({**SAME_ORIGIN, csrf.HEADER: token}, None, 415),
    }
    for case, (headers, content_type, status) in refused.items():
        r = client.post(url, data="{}", headers=headers, content_type=content_type)
        assert r.status_code == status, (case, r.status_code, r.data[:300])
        assert r.mimetype == "application/json" and r.json["code"] == status, case
        assert ("cross-site request forgery" if status == 403 else "application/json") in r.json["message"], case
    # a text/plain skip and submit too (the routes with a body)
    r = client.post(f"/tagging/projects/{project}/items/1/skip", data='{"lease_id": "x"}', content_type="text/plain",
                    headers={**SAME_ORIGIN, csrf.HEADER: token})
    assert r.status_code == 415
    assert statuses(client, project, items) == before  # nothing leased


def test_bearer_calls_need_no_csrf_token(app, tagging, db):
    """Scripts with the token in a header are not cookie-authenticated: no Origin, no CSRF token, any cookie."""
    client = app.test_client()
    bearer = {"Authorization": f"Bearer {tagging['tokens']['ann']}"}
    r = client.post(f"/tagging/projects/{tagging['project']}/next", headers=bearer)
    assert r.status_code == 200 and r.json["item"]["holder"] == "ann"
    item = r.json["item"]
    r = client.post(f"/tagging/projects/{tagging['project']}/items/{item['seq']}/skip",
                    json={"lease_id": item["lease_id"]}, headers={**bearer, "Origin": "https://elsewhere.example"})
    assert r.status_code == 200
    # a signed-in browser calling with a bearer token as well: the bearer authenticates, not the cookie
    signed, _ = _tagging_client(app, tagging)
    r = signed.post(f"/tagging/projects/{tagging['project']}/next", headers=bearer)
    assert r.status_code == 200
    worker.run_once(db, tagging["project"])


def test_a_cookie_that_authenticates_nothing_is_no_reason_to_refuse(app, tagging):
    """Without the cookie the route's own authentication answers (401), not the CSRF check."""
    r = app.test_client().post(f"/tagging/projects/{tagging['project']}/next", data="{}", content_type="text/plain")
    assert r.status_code == 401


# -- the mechanism for any later route --------------------------------------------------------------------------------

def test_an_undeclared_route_under_a_session_cookie_path_is_checked_too():
    """A route someone adds under /archive without declaring a policy: a state-changing request that carries the
    archive cookie needs the same origin and token; without the cookie, or with a bearer token, it is not
    cookie-authenticated."""
    from api.viewer import session

    app = Flask("csrf-net")
    app.config["CHRONICLE_SETTINGS"] = types.SimpleNamespace(cursor_secret=b"net-secret")
    # The archive's own blueprint declares the /archive policy (its cookie's path) in the app it joins.
    archive = Blueprint("archive_session", __name__)
    csrf.protect(archive, session_cookie=session.COOKIE, cookie_path=session.COOKIE_PATH, body="form", always=True)
    app.register_blueprint(archive)
    later = Blueprint("later_pages", __name__)

    @later.route("/archive/later/action", methods=["GET", "POST", "DELETE"])
    def action() -> str:
        return "done"

    @later.get("/archive/later/form")
    def form() -> str:
        return csrf.csrf_token()

    app.register_blueprint(later)
    client = app.test_client()
    client.set_cookie("chronicle_archive", "session-a", path="/archive")
    for method in ("post", "delete"):
        assert getattr(client, method)("/archive/later/action", headers=SAME_ORIGIN).status_code == 403
    token = client.get("/archive/later/form").get_data(as_text=True)
    assert client.post("/archive/later/action", headers={**SAME_ORIGIN, csrf.HEADER: token}).status_code == 200
    assert client.post("/archive/later/action", data={"csrf_token": token}, headers=SAME_ORIGIN).status_code == 200
    assert client.post("/archive/later/action", headers={"Origin": "null", csrf.HEADER: token}).status_code == 403
    assert client.get("/archive/later/action").status_code == 200  # reads are never checked
    # another session in the same browser (a new sign-in): the old token no longer fits
    client.set_cookie("chronicle_archive", "session-b", path="/archive")
    assert client.post("/archive/later/action", headers={**SAME_ORIGIN, csrf.HEADER: token}).status_code == 403
    assert client.post("/archive/later/action", headers={"Authorization": "Bearer x"}).status_code == 200
    no_cookie = app.test_client()
    assert no_cookie.post("/archive/later/action").status_code == 200
