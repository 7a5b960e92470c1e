"""The archive's Slack pages through Flask's test client: sign-in and the cookie, the REST API's access rules,
the security headers, the timeline's pages and cursors (the REST API's own), threads, edit histories, deleted
messages, stored files, hostile text, the workspace and user pages. What each page must show is computed from
the planned archive (tests/viewer/viewer_data.py), not from what the code stored."""

from __future__ import annotations

import re
import zoneinfo
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from api.slack.timeutil import ts_to_us
from api.viewer import render
from tests.fakes.slack_file_host import content_for
from tests.helpers import SAME_ORIGIN, csrf_token_of, form_post
from tests.viewer.html_tree import Element, parse
from tests.viewer.viewer_data import BIG_TEXT, READER_ZONE, Archive

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
       "base-uri 'none'; form-action 'self'")


def signed_in(app, token: str, zone: str = READER_ZONE):
    client = app.test_client()
    r = form_post(client, "/archive", {"token": token, "tz": zone})
    assert r.status_code == 303, r.data
    return client


@pytest.fixture(scope="module")
def reader(app, filled: Archive):
    """A test client signed in with the token of the workspace that may read private channels."""
    return signed_in(app, filled.token_private)


@pytest.fixture(scope="module")
def public_reader(app, filled: Archive):
    return signed_in(app, filled.token_public)


def page(client, path: str, status: int = 200) -> Element:
    r = client.get(path)
    assert r.status_code == status, (path, r.status_code, r.data[:500])
    return parse(r.data)


def shown_ts(tree: Element) -> list[str]:
    """The ts of every message the timeline shows, top to bottom."""
    return [li.get("data-ts") for li in tree.find_all("li", class_="message")]


# -- sign-in, cookie, sign-out ----------------------------------------------------------------------------------

def test_sign_in_sets_a_strict_httponly_cookie_and_sign_out_removes_it(app, filled):
    client = app.test_client()
    form = page(client, "/archive")
    assert form.by_id("tz").get("type") == "hidden" and form.by_id("token").get("type") == "password"
    script = form.find("script")  # fills the zone; no inline code
    assert script is not None and script.get("src").startswith("/archive/static/archive.js?v=") and not script.text()

    r = form_post(client, "/archive", {"token": "not-a-token", "tz": READER_ZONE})
    assert r.status_code == 401 and "Unknown token" in parse(r.data).by_id("signin-error").text()
    assert "Set-Cookie" not in r.headers

    r = form_post(client, "/archive", {"token": filled.token_private, "tz": READER_ZONE})
    assert r.status_code == 303 and r.headers["Location"] == f"/archive/teams/{filled.team}"  # its one workspace
    cookies = {c.split("=", 1)[0]: c for c in r.headers.getlist("Set-Cookie")}
    session = cookies["chronicle_archive"]
    assert session.startswith(f"chronicle_archive={filled.token_private};")
    for attribute in ("HttpOnly", "SameSite=Strict", "Path=/archive"):
        assert attribute in session and attribute in cookies["chronicle_tz"]
    assert "Secure" not in session  # plain HTTP here; over HTTPS it is Secure (below)
    assert cookies["chronicle_tz"].startswith(f"chronicle_tz={READER_ZONE};")
    assert page(client, f"/archive/teams/{filled.team}").by_id("who-scope").text().endswith(READER_ZONE)

    r = form_post(client, "/archive/signout", page="/archive")
    assert r.status_code == 303 and r.headers["Location"] == "/archive"
    assert all("Expires=Thu, 01 Jan 1970" in c for c in r.headers.getlist("Set-Cookie"))
    r = client.get(f"/archive/teams/{filled.team}/channels/{filled.general}")
    assert r.status_code == 303
    assert r.headers["Location"] == f"/archive?next=%2Farchive%2Fteams%2F{filled.team}%2Fchannels%2F{filled.general}"

    secure_client = app.test_client()
    token = csrf_token_of(secure_client, "/archive")
    secure = secure_client.post("/archive", data={"token": filled.token_public, "csrf_token": token},
                                base_url="https://localhost", headers={"Origin": "https://localhost"})
    assert secure.status_code == 303 and all("Secure" in c for c in secure.headers.getlist("Set-Cookie"))
    # a form posted by another site signs nobody in (or out): tests/test_csrf.py has every rule
    r = form_post(app.test_client(), "/archive", {"token": filled.token_public},
                  headers={"Origin": "https://evil.example"})
    assert r.status_code == 403 and "chronicle_archive" not in str(r.headers.getlist("Set-Cookie"))
    r = app.test_client().post("/archive/signout", headers={**SAME_ORIGIN, "Origin": "https://evil.example"})
    assert r.status_code == 403
    assert form_post(app.test_client(), "/archive", {"token": filled.token_public}).status_code == 303


def test_sign_in_goes_back_only_to_archive_pages_and_unknown_zones_are_utc(app, filled):
    client = app.test_client()
    target = f"/archive/teams/{filled.team}/channels/{filled.general}?include_deleted=1"
    form = page(client, "/archive?next=" + target.replace("?", "%3F").replace("=", "%3D"))
    assert form.find("input", name="next").get("value") == target
    r = form_post(client, "/archive", {"token": filled.token_private, "tz": "Mars/Olympus_Mons", "next": target})
    assert r.headers["Location"] == target
    assert any(c.startswith("chronicle_tz=UTC;") for c in r.headers.getlist("Set-Cookie"))
    for hostile in ("//evil.example/archive/x", "https://evil.example/archive/", "/archive\\..\\x", "/tagging",
                    "/archive/../slack/teams"):
        r = form_post(app.test_client(), "/archive", {"token": filled.token_private, "next": hostile})
        assert r.headers["Location"] in (f"/archive/teams/{filled.team}", "/archive/../slack/teams"), hostile
        assert not r.headers["Location"].startswith(("//", "http"))
    # a token for every workspace lands on the workspace picker, which opens a workspace by id
    everything = signed_in(app, "token-all")
    assert everything.get("/archive").status_code == 200
    r = everything.get(f"/archive/open?team={filled.team.lower()}")
    assert r.status_code == 303 and r.headers["Location"] == f"/archive/teams/{filled.team}"


# -- access: the REST API's scopes ------------------------------------------------------------------------------

def test_access_follows_the_token_scopes(app, filled, reader, public_reader):
    t, general, private = filled.team, filled.general, filled.private_channel
    anonymous = app.test_client()
    # no cookie: pages go to the sign-in form, fragments answer 401 (the script then goes there itself)
    assert anonymous.get(f"/archive/teams/{t}").status_code == 303
    r = anonymous.get(f"/archive/teams/{t}/channels/{general}/threads/{filled.by_key('g100').ts}")
    assert r.status_code == 401 and parse(r.data).find(class_="fragment-error").get("data-status") == "401"
    forged = app.test_client()
    forged.set_cookie("chronicle_archive", "token-that-was-never-issued", path="/archive")
    assert forged.get(f"/archive/teams/{t}").status_code == 303

    # a token of another workspace: 403 pages that say why, for every page of the workspace
    other = signed_in(app, filled.token_other)
    for path in (f"/archive/teams/{t}", f"/archive/teams/{t}/channels/{general}", f"/archive/teams/{t}/users/UANN",
                 f"/archive/teams/{t}/files/{general}/{filled.by_key('g110').ts}/FVIEWREPORT"):
        tree = page(other, path, 403)
        assert f"may not read workspace {t}" in tree.by_id("error-message").text()
        assert filled.other_team in tree.by_id("error-message").text()
    assert page(other, f"/archive/teams/{filled.other_team}/channels/{filled.other_channel}").find(
        class_="message") is not None

    # a channel converted to private: 403 without the private scope (page, fragments, files), 200 with it
    plan = filled.by_key("private0")
    for path in (f"/archive/teams/{t}/channels/{private}", f"/archive/teams/{t}/channels/{private}/threads/{plan.ts}",
                 f"/archive/teams/{t}/channels/{private}/messages/{plan.ts}/history"):
        r = public_reader.get(path)
        assert r.status_code == 403, path
        assert "private scope" in r.get_data(as_text=True)
    tree = page(reader, f"/archive/teams/{t}/channels/{private}")
    assert tree.by_id("badge-private").text() == "private"
    assert [m.current_text for m in filled.visible_top_level(private)] == [
        li.find(class_="message-text").text() for li in tree.find_all("li", class_="message")]
    # ... nor is it listed, nor named in mentions, for the public token
    listed = {li.get("data-channel") for li in page(public_reader, f"/archive/teams/{t}").find_all("li",
                                                                                              class_="channel-entry")}
    assert private not in listed and general in listed
    assert private in {li.get("data-channel") for li in page(reader, f"/archive/teams/{t}").find_all(
        "li", class_="channel-entry")}

    # not found: unknown channel, bad ids and timestamps (404 pages, never a 500)
    page(reader, f"/archive/teams/{t}/channels/CNOSUCHCHANNEL", 404)
    page(reader, f"/archive/teams/{t}/channels/not-an-id", 404)
    page(reader, "/archive/teams/lower-case", 404)
    page(reader, f"/archive/teams/{t}/users/UNOBODY", 404)
    assert reader.get(f"/archive/teams/{t}/channels/{general}/threads/12.34.56").status_code == 404
    assert reader.get(f"/archive/teams/{t}/channels/{general}/threads/1.000001").status_code == 404


# -- headers ----------------------------------------------------------------------------------------------------

def test_every_response_sends_the_security_headers(app, filled, reader):
    t, general = filled.team, filled.general
    head = filled.by_key("g100").ts
    responses = {
        "sign-in": app.test_client().get("/archive"),
        "team": reader.get(f"/archive/teams/{t}"),
        "channel": reader.get(f"/archive/teams/{t}/channels/{general}"),
        "thread": reader.get(f"/archive/teams/{t}/channels/{general}/threads/{head}"),
        "history": reader.get(f"/archive/teams/{t}/channels/{general}/messages/{filled.by_key('g120').ts}/history"),
        "user": reader.get(f"/archive/teams/{t}/users/UANN"),
        "403": signed_in(app, filled.token_other).get(f"/archive/teams/{t}"),
        "404": reader.get(f"/archive/teams/{t}/channels/CNOSUCH"),
        "400": reader.get(f"/archive/teams/{t}/channels/{general}/older?cursor=forged"),
        "redirect": app.test_client().get(f"/archive/teams/{t}"),
    }
    for name, r in responses.items():
        assert r.headers["Content-Security-Policy"] == CSP, name
        assert r.headers["X-Content-Type-Options"] == "nosniff", name
        # Scoped data is never stored, except a page with an ETag: kept privately, revalidated each time.
        stored = "private, no-cache" if name == "channel" else "no-store"
        assert r.headers["Cache-Control"] == stored and ("ETag" in r.headers) == (name == "channel"), name
        assert r.headers["Referrer-Policy"] == "same-origin", name
    for asset in ("/archive/static/archive.js", "/archive/static/viewer.css", "/common/static/chronicle.css"):
        r = app.test_client().get(asset)
        assert r.status_code == 200 and r.headers["Content-Security-Policy"] == CSP, asset
        assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert app.test_client().get("/archive/static/archive.js").mimetype in ("text/javascript",
                                                                            "application/javascript")
    # no page holds inline script or style, nor an inline event handler
    for name, r in responses.items():
        html = r.get_data(as_text=True)
        assert not re.search(r"<script(?![^>]*\bsrc=)", html), name
        assert "<style" not in html and " style=" not in html, name
        assert not re.search(r"<[a-z]+[^>]*\son[a-z]+=", html), name


# -- the timeline -----------------------------------------------------------------------------------------------

def _older(client, filled: Archive, cursor: str, channel: str | None = None, **params) -> Element:
    r = client.get(f"/archive/teams/{filled.team}/channels/{channel or filled.general}/older",
                   query_string={"cursor": cursor, **params})
    assert r.status_code == 200, r.data[:300]
    return parse(r.data).find(class_="older-fragment")


def test_the_timeline_pages_back_to_the_first_message_newest_first(app, filled, reader):
    """Pages of 50 messages the channel shows (thread replies live in their panel, so they do not take a page's
    places); every visible top-level message once, newest first; day separators in the reader's zone."""
    first = page(reader, f"/archive/teams/{filled.team}/channels/{filled.general}")
    top_level = [m.ts for m in filled.visible_top_level(filled.general)]
    assert shown_ts(first) == top_level[:50]
    sizes, seen, days = [len(shown_ts(first))], shown_ts(first), [
        s.get("data-day") for s in first.find_all("section", class_="day")]
    cursor = first.by_id("load-older").get("data-cursor")
    while cursor:
        fragment = _older(reader, filled, cursor)
        sizes.append(len(shown_ts(fragment)))
        seen += shown_ts(fragment)
        days += [s.get("data-day") for s in fragment.find_all("section", class_="day")]
        cursor = fragment.get("data-next-cursor")
    assert len(top_level) > 100 and sizes[:-1] == [50] * (len(sizes) - 1) and sizes[-1] == len(top_level) % 50
    assert seen == top_level
    # a day continued on the next page repeats its separator in the fragment; the script merges them
    assert list(dict.fromkeys(days)) == [d.isoformat() for d in filled.local_days(filled.general)]
    tz = zoneinfo.ZoneInfo(READER_ZONE)
    newest = filled.visible_top_level(filled.general)[0]
    time = first.find("li", class_="message").find("time")
    assert time.text() == newest.at.astimezone(tz).strftime("%H:%M")
    assert time.get("datetime").startswith(newest.at.astimezone(tz).strftime("%Y-%m-%dT%H:%M:%S"))

    # the same day boundaries in another reader's zone
    tokyo = signed_in(app, filled.token_private, "Asia/Tokyo")
    first_days = [s.get("data-day") for s in page(tokyo, f"/archive/teams/{filled.team}/channels/{filled.general}")
                  .find_all("section", class_="day")]
    assert first_days == list(dict.fromkeys(
        m.at.astimezone(zoneinfo.ZoneInfo("Asia/Tokyo")).date().isoformat()
        for m in filled.visible_top_level(filled.general)[:50]))


def test_timeline_cursors_are_the_rest_apis(app, filled, reader):
    rest = app.test_client().get(f"/slack/teams/{filled.team}/channels/{filled.general}/messages",
                                 headers={"Authorization": f"Bearer {filled.token_private}"})
    assert rest.status_code == 200
    second = app.test_client().get(f"/slack/teams/{filled.team}/channels/{filled.general}/messages",
                                   query_string={"cursor": rest.json["next_cursor"]},
                                   headers={"Authorization": f"Bearer {filled.token_private}"}).json
    fragment = _older(reader, filled, rest.json["next_cursor"])
    older = [m["ts"] for m in second["messages"] if m.get("thread_ts") in (None, m["ts"])]
    assert shown_ts(fragment)[:len(older)] == older  # then on, to 50 the channel shows
    # ... and the page's own cursor pages the REST API: from just below the last message the page shows
    first = page(reader, f"/archive/teams/{filled.team}/channels/{filled.general}")
    cursor = first.by_id("load-older").get("data-cursor")
    again = app.test_client().get(f"/slack/teams/{filled.team}/channels/{filled.general}/messages",
                                  query_string={"cursor": cursor},
                                  headers={"Authorization": f"Bearer {filled.token_private}"})
    below = shown_ts(first)[-1]
    reference = sorted((m.ts for m in filled.messages if m.channel == filled.general and not m.deleted_at
                        and ts_to_us(m.ts) < ts_to_us(below)), key=ts_to_us, reverse=True)[:50]
    assert again.status_code == 200 and [m["ts"] for m in again.json["messages"]] == reference
    # a cursor of another listing or a forged one: 400, as a fragment
    for bad, params in ((cursor, {"include_deleted": "1"}), ("forged.cursor", {}), ("", {})):
        r = reader.get(f"/archive/teams/{filled.team}/channels/{filled.general}/older",
                       query_string={"cursor": bad, **params})
        assert r.status_code == 400 and parse(r.data).find(class_="fragment-error") is not None
    r = reader.get(f"/archive/teams/{filled.team}/channels/{filled.hostile}/older", query_string={"cursor": cursor})
    assert r.status_code == 400


def test_deleted_messages_are_hidden_or_greyed_with_include_deleted(filled, reader):
    deleted = filled.by_key("g125")
    plain = page(reader, f"/archive/teams/{filled.team}/channels/{filled.general}")
    assert deleted.ts not in shown_ts(plain) and "deleted later" not in plain.text()
    with_deleted = page(reader, f"/archive/teams/{filled.team}/channels/{filled.general}?include_deleted=1")
    item = with_deleted.find("li", data_ts=deleted.ts)
    assert "deleted" in item.classes and item.find(class_="deleted-badge") is not None
    assert item.find(class_="message-text").text() == deleted.text
    assert shown_ts(with_deleted) == [
        m.ts for m in sorted((m for m in filled.messages if m.channel == filled.general), key=lambda m: m.ts,
                             reverse=True) if not m.is_reply][:50]
    # the links of the page keep include_deleted (threads, histories, the older page)
    assert with_deleted.by_id("channel").get("data-include-deleted") == "1"
    assert with_deleted.find("button", class_="replies").get("data-thread-url").endswith("?include_deleted=1")
    assert with_deleted.by_id("toggle-deleted").get("href").endswith(f"/channels/{filled.general}")


def test_thread_panel_shows_the_parent_and_its_replies(filled, reader):
    head = filled.by_key("g100")
    replies = [m for m in filled.messages if m.thread_ts == head.ts]
    timeline = page(reader, f"/archive/teams/{filled.team}/channels/{filled.general}")
    item = timeline.find("li", data_ts=head.ts)
    button = item.find("button", class_="replies")
    assert button.text().strip() == f"{sum(1 for m in replies if not m.deleted_at)} replies"
    panel = page(reader, button.get("data-thread-url"))
    assert panel.find(class_="thread-fragment").get("data-title") == "Thread in #general"
    assert shown_ts(panel.find("ol", class_="thread-parent")) == [head.ts]
    assert shown_ts(panel.find("ol", class_="thread-replies")) == [m.ts for m in replies if not m.deleted_at]
    assert [li.find(class_="author").text() for li in panel.find("ol", class_="thread-replies").find_all(
        "li", class_="message")] == ["Bob", "Bob"]
    with_deleted = page(reader, f"{button.get('data-thread-url')}?include_deleted=1")
    greyed = [li.get("data-ts") for li in with_deleted.find_all("li", class_="deleted")]
    assert greyed == [m.ts for m in replies if m.deleted_at]
    assert page(reader, f"/archive/teams/{filled.team}/channels/{filled.general}/threads/1.000001",
                404).find(class_="fragment-error") is not None


def test_edit_history_lists_every_version_newest_first(filled, reader):
    edited = filled.by_key("g120")
    item = page(reader, f"/archive/teams/{filled.team}/channels/{filled.general}").find("li", data_ts=edited.ts)
    assert item.find(class_="message-text").text() == "Final version of the announcement 👋"
    button = item.find("button", class_="edited")
    history = page(reader, button.get("data-history-url"))
    versions = history.find_all("li", class_="version")
    assert [v.find(class_="message-text").text() for v in versions] == [
        "Final version of the announcement 👋", "Second version of the announcement", edited.text]
    assert [v.find(class_="badge").text() for v in versions] == ["current", "edit 1", "original"]
    tz = zoneinfo.ZoneInfo(READER_ZONE)
    assert versions[-1].find("time").get("datetime").startswith(edited.at.astimezone(tz).strftime("%Y-%m-%dT%H:%M"))


def test_rendered_text_reactions_and_mentions(filled, reader):
    rich = filled.by_key("g123")
    item = page(reader, f"/archive/teams/{filled.team}/channels/{filled.general}").find("li", data_ts=rich.ts)
    text = item.find(class_="message-text")
    assert [el.text() for el in text.find_all("b")] == ["bold"] and [el.text() for el in text.find_all("i")] == [
        "italics"]
    link = text.find("a", href="https://example.com/page?a=1&b=2")
    assert link is not None and link.get("rel") == "noopener noreferrer" and link.text() == "a link"
    assert "@Bob" in [el.text() for el in text.find_all(class_="mention")]
    channel_link = text.find("a", class_="mention")
    assert channel_link.text() == "#hostile-input"
    assert channel_link.get("href") == f"/archive/teams/{filled.team}/channels/{filled.hostile}"
    assert "🎉" in text.text()
    reacted = page(reader, f"/archive/teams/{filled.team}/channels/{filled.general}").find(
        "li", data_ts=filled.by_key("g128").ts)
    chips = {li.get("data-emoji"): li for li in reacted.find_all("li", class_="reaction")}
    assert chips["tada"].get("title") == "Ann, Bob reacted with :tada:" and chips["tada"].find(
        class_="count").text() == "2"
    assert chips["+1"].get("title") == "Bob reacted with :+1:" and chips["+1"].find(class_="emoji").text() == "👍"


def test_stored_files_are_served_after_the_access_checks(app, filled, reader, public_reader):
    plan = filled.by_key("g110")
    item = page(reader, f"/archive/teams/{filled.team}/channels/{filled.general}?include_deleted=1").find(
        "li", data_ts=plan.ts) or page(reader, f"/archive/teams/{filled.team}/channels/{filled.general}").find(
        "li", data_ts=plan.ts)
    stored = item.find("a", class_="file-link", data_file_id="FVIEWREPORT")
    assert stored.text() == "Quarterly report"
    r = reader.get(stored.get("href"))
    assert r.status_code == 200 and r.data == content_for("FVIEWREPORT")
    assert r.headers["Content-Disposition"] == "attachment; filename=report.txt"
    assert r.mimetype == "text/plain" and r.headers["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in r.headers["Content-Security-Policy"] and r.headers["Cache-Control"] == "no-store"
    # the external file whose link is javascript: is shown as text, never as a link
    external = next(li for li in item.find_all("li", class_="file") if "file-external" in li.classes)
    assert external.find("a") is None and "<script>" in external.text()
    # not stored / not a file of this message / no cookie / wrong workspace
    base = f"/archive/teams/{filled.team}/files/{filled.general}/{plan.ts}"
    assert reader.get(f"{base}/FVIEWEXT").status_code == 404
    assert reader.get(f"{base}/FNOSUCHFILE").status_code == 404
    assert reader.get(f"/archive/teams/{filled.team}/files/{filled.general}/{filled.by_key('g111').ts}/"
                      "FVIEWREPORT").status_code == 404
    assert reader.get(f"{base}/..%2F..%2Fetc").status_code == 404
    assert app.test_client().get(stored.get("href")).status_code == 303
    assert signed_in(app, filled.token_other).get(stored.get("href")).status_code == 403
    assert public_reader.get(stored.get("href")).status_code == 200  # #general is public


# -- hostile text -------------------------------------------------------------------------------------------------

def test_hostile_messages_are_text(filled, reader):
    r = reader.get(f"/archive/teams/{filled.team}/channels/{filled.hostile}")
    assert r.status_code == 200
    html = r.get_data(as_text=True)
    tree = parse(html)
    texts = {li.get("data-ts"): li.find(class_="message-text") for li in tree.find_all("li", class_="message")}
    by_key = {m.key.removeprefix("hostile-"): texts[m.ts] for m in filled.messages if m.channel == filled.hostile}
    assert len(by_key) == 6
    # every tag inside a message is one render.py writes; none carries an event handler or a script URL
    allowed = {"span", "b", "i", "s", "code", "pre", "blockquote", "a", "br"}
    for key, text in by_key.items():
        for el in text.iter():
            assert el.tag in allowed, (key, el.tag)
            assert not any(name.startswith("on") for name in el.attrs), (key, el.attrs)
            if el.tag == "a":
                assert re.match(r"(https?:|mailto:|/archive/)", el.get("href") or ""), (key, el.attrs)
    assert html.count("<script") == 1  # the page's own archive.js
    assert "<img" not in html and "<svg" not in html and "javascript:" not in re.sub(r">[^<]*<", "><", html)
    assert "alert('script tag')" in by_key["script"].text()  # shown as text
    assert by_key["js-link"].find("a") is None
    assert by_key["big"].text() == BIG_TEXT  # the whole 100 KB
    assert by_key["rtl"].text().startswith("\u202eTHIS SHOULD STAY")
    # the author's hostile display name and the hostile reaction name are text too
    author = tree.find("li", class_="message").find(class_="author")
    # render.shown: the name's right-to-left override closed at its end (docs/viewer.md, "Rendering limits")
    assert author.text() == render.shown(filled.users[2]["profile"]["display_name"])
    assert author.text().endswith("\u202eevil\u202c")
    assert author.find("img") is None


# -- workspace and user pages ---------------------------------------------------------------------------------------

def test_workspace_page_lists_channels_and_people(filled, reader):
    tree = page(reader, f"/archive/teams/{filled.team}")
    entries = {li.get("data-channel"): li for li in tree.find_all("li", class_="channel-entry")}
    assert set(entries) == set(filled.channels)
    renamed = entries[filled.renamed_channel]
    assert renamed.find("a").text() == "#new-name" and renamed.find("a").get("title") == "Previously: old-name"
    assert "is-archived" in renamed.classes and "archived" in renamed.text()
    assert "is-deleted" in entries[filled.deleted_channel].classes
    assert entries[filled.deleted_channel].find("a").text() == "#gone"
    assert "is-deleted" not in entries[filled.general].classes and "is-archived" not in entries[filled.general].classes
    people = {li.get("data-user"): li.find("a").text() for li in tree.find_all("li", class_="user-entry")}
    assert people == {"UANN": "Ann", "UBOB": "Bob", "UEVIL": render.shown(filled.users[2]["profile"]["display_name"])}
    search = tree.find("form", role="search")
    assert search.get("action") == f"/archive/teams/{filled.team}/search" and search.get("method") == "get"
    assert search.find("input", name="q") is not None


def _expected_activity(filled: Archive, user: str, channels: set[str]) -> Counter:
    """The user's events per local day (their zone), by the activity format (docs/activity.md): each post, edit
    and delete of theirs, each reaction they gave, each reaction their messages received."""
    tz = zoneinfo.ZoneInfo(next(u["tz"] for u in filled.users if u["id"] == user))

    def day(ts: str) -> str:
        return datetime.fromtimestamp(ts_to_us(ts) / 1e6, tz).date().isoformat()

    counts: Counter = Counter()
    for m in filled.messages:
        if m.channel not in channels:
            continue
        if m.user == user:
            for at in [m.ts, *(at for at, _text in m.edits), *([m.deleted_at] if m.deleted_at else [])]:
                counts[day(at)] += 1
        for _emoji, reactor, at in m.reactions:
            counts[day(at)] += (reactor == user) + (m.user == user)
    return counts


def _expected_until(filled: Archive, user: str, channels: set[str], zone: zoneinfo.ZoneInfo):
    """The last day the user page's calendar shows by default: the Sunday ending the week of the user's latest
    activity (its UTC day, the day after in a zone east of UTC: the activity index is by UTC day), not after
    today in the user's zone."""
    times = [ts_to_us(at) for m in filled.messages if m.channel in channels
             for at in ([m.ts, *(a for a, _t in m.edits), *([m.deleted_at] if m.deleted_at else [])]
                        if m.user == user else []) + [a for _e, r, a in m.reactions if user in (r, m.user)]]
    last = datetime.fromtimestamp(max(times) / 1e6, UTC).date()
    if zone.utcoffset(datetime.combine(last, datetime.min.time())) > timedelta(0):
        last += timedelta(days=1)
    return min(datetime.now(zone).date(), last + timedelta(days=6 - last.weekday()))


@pytest.mark.parametrize("private_scope", [True, False])
def test_user_page_profile_calendar_and_recent_messages(app, filled, private_scope):
    client = signed_in(app, filled.token_private if private_scope else filled.token_public)
    tree = page(client, f"/archive/teams/{filled.team}/users/UANN")
    assert tree.by_id("user-name").text() == "Ann"
    visible = set(filled.channels) if private_scope else set(filled.channels) - {filled.private_channel}
    expected = _expected_activity(filled, "UANN", visible)
    cells = {li.get("data-date"): int(li.get("data-count")) for li in tree.by_id("calendar").find_all(
        "li", class_="cell") if li.get("data-date")}
    until = _expected_until(filled, "UANN", visible, zoneinfo.ZoneInfo("Europe/Berlin"))  # today, but near midnight
    assert max(cells) == until.isoformat() and len(cells) == 7 * 11 + until.weekday() + 1  # 12 weeks to it
    assert {d: n for d, n in cells.items() if n} == dict(+expected)  # +: days with only others' reactions count 0
    ann = [m for m in filled.messages if m.user == "UANN" and not m.deleted_at and m.channel in visible]
    recent = sorted(ann, key=lambda m: m.ts, reverse=True)[:20]
    assert shown_ts(tree.by_id("recent-messages")) == [m.ts for m in recent]
    newest = recent[0].at.astimezone(zoneinfo.ZoneInfo(READER_ZONE))  # a list across days: each time has its day
    assert tree.by_id("recent-messages").find("time").text() == f"{newest.day} {newest:%b %Y, %H:%M}"
    names = {li.find(class_="in-channel").find("a").text() for li in tree.by_id("recent-messages").find_all(
        "li", class_="message")}
    assert names == ({"#general", "#secret-plans"} if private_scope else {"#general"})
    first = min((m for m in filled.messages if m.user == "UANN"), key=lambda m: m.ts)
    assert shown_ts(tree.find("ol", class_="first-post")) == [first.ts]
    # the calendar moves by 12 weeks; an empty stretch says so
    earlier = page(client, f"/archive/teams/{filled.team}/users/UANN{tree.by_id('calendar-earlier').get('href')}")
    assert earlier.find(id="recent-empty") is not None
    page(client, f"/archive/teams/{filled.team}/users/UANN?until=yesterday", 400)


def test_a_user_with_an_unknown_zone_and_hostile_names(filled, reader):
    tree = page(reader, f"/archive/teams/{filled.team}/users/UEVIL")
    assert tree.by_id("user-name").text() == render.shown(filled.users[2]["profile"]["display_name"])  # RLO closed
    assert tree.by_id("user-name").find("img") is None
    assert "Not/AZone" in tree.text()  # shown as recorded; the days are cut in UTC
    assert "days in UTC" in tree.find("section", class_="activity").text()
    until = _expected_until(filled, "UEVIL", set(filled.channels), zoneinfo.ZoneInfo("UTC")).isoformat()
    assert max(li.get("data-date") for li in tree.by_id("calendar").find_all("li", class_="cell")
               if li.get("data-date")) == until
    hostile = [m.ts for m in filled.visible_top_level(filled.hostile)]
    assert shown_ts(tree.by_id("recent-messages")) == hostile


def test_object_stores_give_back_what_they_stored(tmp_path):
    """The read side of the file worker's stores (what the file route streams from): the bytes put, FileNotFoundError
    for a key never stored, and no way out of a local store's root."""
    import boto3
    from moto.server import ThreadedMotoServer

    from api.slack.files import LocalStore, S3Store

    local = LocalStore(tmp_path)
    local.put("slack/T/C/1.000000/F1", b"local bytes", "text/plain")
    with local.open("slack/T/C/1.000000/F1") as body:
        assert body.read() == b"local bytes"
    for missing in ("slack/T/C/1.000000/F2", "slack/T/C/1.000000"):  # absent; a directory is no object
        with pytest.raises(FileNotFoundError):
            local.open(missing)
    with pytest.raises(ValueError):
        local.open("../outside")

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{server.get_host_and_port()[1]}",
                          region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
        s3.create_bucket(Bucket="viewer-files")
        store = S3Store("viewer-files", client=s3)
        store.put("slack/T/C/1.000000/F1", b"s3 bytes", "text/plain")
        body = store.open("slack/T/C/1.000000/F1")
        assert body.read() == b"s3 bytes"
        body.close()
        with pytest.raises(FileNotFoundError):
            store.open("slack/T/C/1.000000/F2")
    finally:
        server.stop()


# -- an archive of a past year, imported from an export ---------------------------------------------------------

OLD_CHANNEL = "C2016GENERAL"
OLD_ZONE = "Europe/Berlin"
# (ts, text, edited ts or None) of UOLD's messages in the export: an edited message carries only its edited text
OLD_MESSAGES = [("1456920000.000100", "a message of March 2016", None),
                ("1462968000.000200", "the text as edited", "1462968300.000000")]
# A message whose edits arrive live, the first one never seen: the previous text is itself an edit
LIVE_TS, LIVE_EDITS = "1459512000.000300", [("1459512060.000000", "second text"), ("1459512120.000000", "third text")]


@pytest.fixture(scope="module")
def old_workspace(app, db, tmp_path_factory) -> str:
    """A 2016 workspace imported from a Slack export (users.json, channels.json, two day files), one message of it
    edited through live events, and the activity days of its author built. Returns the team id."""
    import json
    import uuid
    import zipfile
    from datetime import date

    from api.activity import calendar, service
    from api.slack import zip_import
    from tests.slack.helpers import edit, post_event

    team = f"T{uuid.uuid4().hex[:12].upper()}"
    path = tmp_path_factory.mktemp("old-export") / "2016.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("users.json", json.dumps([
            {"id": "UOLD", "team_id": team, "name": "olga", "tz": OLD_ZONE, "profile": {"display_name": "Olga"}},
            {"id": "UOTHER", "team_id": team, "name": "otto", "tz": "UTC", "profile": {"display_name": "Otto"}}]))
        zf.writestr("channels.json", json.dumps([{"id": OLD_CHANNEL, "name": "general", "created": 1451606400}]))
        for ts, text, edited in OLD_MESSAGES:
            day = datetime.fromtimestamp(float(ts), UTC).date().isoformat()
            m = {"type": "message", "user": "UOLD", "text": text, "ts": ts}
            if edited:
                m["edited"] = {"user": "UOLD", "ts": edited}
            zf.writestr(f"general/{day}.json", json.dumps([m]))
    report = zip_import.import_export(db, str(path), team_id=team)
    assert report.messages == len(OLD_MESSAGES)
    client = app.test_client()
    (first_at, first_text), (second_at, second_text) = LIVE_EDITS
    r = post_event(client, team, edit(OLD_CHANNEL, LIVE_TS, second_text, first_text, second_at, user="UOTHER",
                                      prev_edited=first_at))
    assert r.status_code == 200 and r.json["outcome"] == "stored", r.json
    service.rebuild_days(db, service.Archive.slack(team), {
        "UOLD": calendar.date_range(date(2016, 1, 1), date(2016, 12, 31))})
    return team


def _history(client, team: str, ts: str) -> list[tuple[str, str, str, bool]]:
    """(badge, text, datetime attribute, unknown) of each version the edit-history panel shows, top to bottom."""
    tree = page(client, f"/archive/teams/{team}/channels/{OLD_CHANNEL}/messages/{ts}/history")
    return [(v.find(class_="badge").text(), v.find(class_="message-text").text(), v.find("time").get("datetime"),
             "version-unknown" in v.classes) for v in tree.find_all("li", class_="version")]


def _local_iso(ts: str) -> str:
    return datetime.fromtimestamp(float(ts), zoneinfo.ZoneInfo(READER_ZONE)).isoformat()


def test_edit_history_of_a_message_archived_only_as_edited_says_the_original_is_unknown(app, old_workspace):
    client = signed_in(app, "token-all")
    ts, text, edited = OLD_MESSAGES[1]
    assert _history(client, old_workspace, ts) == [
        ("edited", text, _local_iso(edited), False),
        ("original", "not archived", _local_iso(ts), True)]  # known to exist, at the message's ts; text unknown
    panel = page(client, f"/archive/teams/{old_workspace}/channels/{OLD_CHANNEL}/messages/{ts}/history")
    assert "The original text is not archived" in panel.find("p").text()
    (first_at, first_text), (second_at, second_text) = LIVE_EDITS
    assert _history(client, old_workspace, LIVE_TS) == [
        ("current", second_text, _local_iso(second_at), False),
        ("edited", first_text, _local_iso(first_at), False),
        ("original", "not archived", _local_iso(LIVE_TS), True)]
    never_edited, text, _ = OLD_MESSAGES[0]  # imported unedited: its text is the original
    assert _history(client, old_workspace, never_edited) == [("original", text, _local_iso(never_edited), False)]


def test_edit_history_of_a_message_seen_before_its_edits_knows_the_original(filled, reader):
    edited = filled.by_key("g120")
    history = page(reader, f"/archive/teams/{filled.team}/channels/{filled.general}/messages/{edited.ts}/history")
    assert [v.find(class_="badge").text() for v in history.find_all("li", class_="version")] == [
        "current", "edit 1", "original"]
    assert history.find("li", class_="version-unknown") is None
    assert "not archived" not in history.text() and history.find("p").text().startswith("3 versions")


def test_the_user_page_of_a_past_years_archive_opens_on_the_users_last_active_weeks(app, old_workspace):

    client = signed_in(app, "token-all")
    tree = page(client, f"/archive/teams/{old_workspace}/users/UOLD")
    zone = zoneinfo.ZoneInfo(OLD_ZONE)

    def local_day(ts: str):
        return datetime.fromtimestamp(float(ts), zone).date()

    expected: Counter = Counter()  # a post per message, an edit per edit, on the local day
    for ts, _text, edited in OLD_MESSAGES:
        expected[local_day(ts).isoformat()] += 1
        if edited:
            expected[local_day(edited).isoformat()] += 1
    last = max(local_day(t) for ts, _text, edited in OLD_MESSAGES for t in (ts, edited) if t)
    sunday = last + timedelta(days=6 - last.weekday())  # the window ends with the week of the last activity
    cells = {li.get("data-date"): int(li.get("data-count")) for li in tree.by_id("calendar").find_all(
        "li", class_="cell") if li.get("data-date")}
    assert max(cells) == sunday.isoformat() and len(cells) == 12 * 7
    assert {d: n for d, n in cells.items() if n} == dict(expected)
    assert shown_ts(tree.by_id("recent-messages")) == [ts for ts, _t, _e in reversed(OLD_MESSAGES)]
    # earlier and later move the window by 12 weeks from there; an explicit until is kept as given
    earlier = tree.by_id("calendar-earlier").get("href")
    assert earlier == f"?until={(sunday - timedelta(weeks=12)).isoformat()}"
    assert tree.by_id("calendar-later").get("href") == f"?until={(sunday + timedelta(weeks=12)).isoformat()}"
    before = page(client, f"/archive/teams/{old_workspace}/users/UOLD{earlier}")
    assert before.find(id="recent-empty") is not None
    assert max(li.get("data-date") for li in before.by_id("calendar").find_all("li", class_="cell")
               if li.get("data-date")) == (sunday - timedelta(weeks=12)).isoformat()
    later = page(client, f"/archive/teams/{old_workspace}/users/UOLD{tree.by_id('calendar-later').get('href')}")
    later_cells = {li.get("data-date"): int(li.get("data-count")) for li in later.by_id("calendar").find_all(
        "li", class_="cell") if li.get("data-date")}
    assert max(later_cells) == (sunday + timedelta(weeks=12)).isoformat() and not any(later_cells.values())
    # the other user (in UTC) last acted with the live edits: the week of the last one
    other = page(client, f"/archive/teams/{old_workspace}/users/UOTHER")
    edited_on = datetime.fromtimestamp(float(LIVE_EDITS[-1][0]), UTC).date()
    assert max(li.get("data-date") for li in other.by_id("calendar").find_all("li", class_="cell")
               if li.get("data-date")) == (edited_on + timedelta(days=6 - edited_on.weekday())).isoformat()
