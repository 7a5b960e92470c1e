"""Domain errors and their one mapping to HTTP (api/errors.py): domain code raises BadCursor / BadPosition /
NotFound / InvalidQuery with a reason, the JSON routes answer them as {"code", "status", "message"}, the pages
as pages with the same status; the shared reads (api/slack/listings.py) refuse the same cursors for both; the
workspace's private channel set is one function with one cache (api/slack/channels.py)."""

from __future__ import annotations

import ast
import uuid
from pathlib import Path

import pytest
from flask import Blueprint, Flask
from markupsafe import escape
from werkzeug.exceptions import HTTPException

from api.db import Database
from api.errors import (
    BadCursor,
    BadPosition,
    DomainError,
    InvalidInput,
    InvalidQuery,
    NotFound,
    http_status,
    register_error_handlers,
)
from api.pages import PageError, error_pages
from api.paging import BAD_POSITION, INVALID_CURSOR, sign_cursor, verify_cursor
from api.slack import channels, listings, search
from tests.clocks import ManualClock
from tests.helpers import READ_TOKEN
from tests.slack.helpers import msg, post_event

ROOT = Path(__file__).resolve().parents[1]
READ = {"Authorization": f"Bearer {READ_TOKEN}"}
COOKIE = {"Cookie": f"chronicle_archive={READ_TOKEN}; chronicle_tz=UTC"}
SECRET = b"test-cursor-secret"  # tests/conftest.py's settings


# -- the mapping -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("exc", "status"), [
    (NotFound("x"), 404), (BadCursor("x"), 400), (BadPosition("x"), 400), (InvalidInput("x"), 400),
    (InvalidQuery("x"), 422), (search.SearchError("x"), 422), (DomainError("x"), 400)])
def test_each_domain_error_has_one_status(exc: DomainError, status: int):
    assert http_status(exc) == status
    assert not isinstance(exc, HTTPException | ValueError)  # no `except ValueError` swallows a refusal


def test_verify_cursor_raises_a_domain_error_with_its_reason():
    cursor = sign_cursor({"p": 1}, SECRET, "a")
    for bad in (cursor, "garbled", "x" * 3000):
        with pytest.raises(BadCursor) as info:
            verify_cursor(bad, SECRET, "b")
        assert info.value.reason == INVALID_CURSOR


def _app_raising(exc: Exception) -> Flask:
    app = Flask("domain-errors-test")
    register_error_handlers(app)

    @app.get("/json")
    def _json():
        raise exc

    pages = Blueprint("pages", __name__)
    error_pages(pages, lambda e: (f"{e.status}|{e.title}|{e.message}", e.status))

    @pages.get("/page")
    def _page():
        raise exc

    app.register_blueprint(pages)
    return app


@pytest.mark.parametrize(("exc", "status", "phrase"), [
    (NotFound("no thread 1.2 in channel C1"), 404, "Not Found"),
    (BadCursor(INVALID_CURSOR), 400, "Bad Request"),
    (BadPosition(BAD_POSITION), 400, "Bad Request"),
    (InvalidQuery("has: takes file, link or reaction"), 422, "Unprocessable Entity")])
def test_json_routes_and_pages_answer_domain_errors_alike(exc: DomainError, status: int, phrase: str):
    client = _app_raising(exc).test_client()
    r = client.get("/json")
    # The body flask_smorest.abort(status, message=reason) gave before domain code stopped raising HTTP errors.
    assert (r.status_code, r.get_json()) == (status, {"code": status, "status": phrase, "message": exc.reason})
    r = client.get("/page")
    assert (r.status_code, r.get_data(as_text=True)) == (status, f"{status}|{phrase}|{exc.reason}")


def test_page_errors_still_win_on_pages():
    r = _app_raising(PageError(403, "Not allowed", "nope")).test_client().get("/page")
    assert (r.status_code, r.get_data(as_text=True)) == (403, "403|Not allowed|nope")


# -- the code model: domain code raises no HTTP errors; the pages do not import the REST blueprint --------------

def _imported(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


@pytest.mark.parametrize("module", ["api/paging.py", "api/slack/search.py", "api/slack/listings.py",
                                    "api/slack/channels.py", "api/slack/messages.py"])
def test_domain_modules_import_no_http_framework(module: str):
    imported = _imported(ROOT / module)
    assert not {m for m in imported if m.split(".")[0] in ("flask", "flask_smorest", "werkzeug")}, module


def test_the_pages_do_not_import_the_rest_blueprints():
    for path in (ROOT / "api" / "viewer").glob("*.py"):
        imported = _imported(path)
        # `from api.slack import http` is listed as api.slack.http too
        assert not {m for m in imported if m.startswith(("api.slack.http", "api.activity.http"))}, path.name


# -- the shared reads against the node: one refusal, each transport's wording ----------------------------------

def _thread(client) -> tuple[str, str, str]:
    team, channel = "T1", f"C{uuid.uuid4().hex[:12].upper()}"
    parent = "1700000100.000100"
    assert post_event(client, team, msg(channel, parent, "parent", thread_ts=parent)).status_code == 200
    assert post_event(client, team, msg(channel, "1700000200.000100", "reply", thread_ts=parent)).status_code == 200
    return team, channel, parent


def test_thread_page_is_one_read_for_both_transports(client, db):
    team, channel, parent = _thread(client)
    page = listings.thread_page(db, team, channel, [channel], parent, limit=1, include_deleted=False, cursor=None,
                                secret=SECRET)
    assert page.parent is not None and page.parent.text == "parent" and [m.text for m in page.replies] == ["reply"]
    rest = client.get(f"/slack/teams/{team}/channels/{channel}/threads/{parent}", headers=READ,
                      query_string={"limit": 1}).get_json()
    assert [m["text"] for m in rest["replies"]] == ["reply"] and rest["parent"]["text"] == "parent"
    with pytest.raises(NotFound, match="no thread"):
        listings.thread_page(db, team, channel, [channel], "1600000000.000100", limit=5, include_deleted=False,
                             cursor=None, secret=SECRET)


def test_refused_cursors_keep_each_transports_status_and_message(client, db):
    team, channel, parent = _thread(client)
    scope = listings.thread_scope(team, channel, parent, False)
    rest_path = f"/slack/teams/{team}/channels/{channel}/threads/{parent}"
    page_path = f"/archive/teams/{team}/channels/{channel}/threads/{parent}"
    signed_bad = sign_cursor({"p": -5}, SECRET, scope)  # validly signed, outside the message range
    with pytest.raises(BadPosition):
        listings.ts_position(signed_bad, SECRET, scope)
    anon = client.application.test_client(use_cookies=False)
    for cursor, rest_message, page_message in [
        (signed_bad, BAD_POSITION, "invalid cursor: use the page's own 'load older' button"),
        ("forged.cursor", INVALID_CURSOR, INVALID_CURSOR),
        (sign_cursor({"p": 10**30}, SECRET, scope), INVALID_CURSOR, INVALID_CURSOR),
    ]:
        r = anon.get(rest_path, headers=READ, query_string={"cursor": cursor})
        assert (r.status_code, r.get_json()) == (400, {"code": 400, "status": "Bad Request",
                                                       "message": rest_message})
        r = anon.get(page_path, headers=COOKIE, query_string={"cursor": cursor})
        assert r.status_code == 400 and r.mimetype == "text/html"
        assert str(escape(page_message)) in r.get_data(as_text=True)
    r = anon.get(f"/slack/teams/{team}/channels/{channel}/threads/1600000000.000100", headers=READ)
    assert r.status_code == 404 and r.get_json()["message"] == f"no thread 1600000000.000100 in channel {channel}"
    r = anon.get(f"/archive/teams/{team}/channels/{channel}/threads/1600000000.000100", headers=COOKIE)
    assert r.status_code == 404 and "This thread is not in the archive" in r.get_data(as_text=True)


@pytest.mark.parametrize("position", [{"a": "../x"}, {"a": 5}, {}])
def test_index_cursor_positions_are_checked(position):
    scope = listings.index_scope("T1", False, True)
    with pytest.raises(BadPosition):
        listings.index_position(sign_cursor(position, SECRET, scope), SECRET, scope)


@pytest.mark.parametrize("position", [{"b": -1, "a": "U1"}, {"b": 10**6, "a": "U1"}, {"b": True, "a": "U1"},
                                      {"b": 0, "a": None}, {"b": 1.5, "a": "U1"}])
def test_users_cursor_positions_are_checked(position):
    scope = listings.users_scope("T1")
    with pytest.raises(BadPosition):
        listings.users_position(sign_cursor(position, SECRET, scope), SECRET, scope)
    assert listings.users_position(sign_cursor({"b": 1, "a": "U1"}, SECRET, scope), SECRET, scope) == (1, "U1")


def test_search_cursor_without_a_position_is_a_bad_position():
    scope = search._cursor_scope("T1", "hello", None)
    with pytest.raises(BadPosition):
        search.read_position(sign_cursor({"d": "x"}, SECRET, scope), SECRET, "T1", "hello", None)
    with pytest.raises(BadCursor) as info:
        search.read_position("forged", SECRET, "T1", "hello", None)
    assert not isinstance(info.value, BadPosition)


# -- the private channel set: one function, one cache, one lifetime ---------------------------------------------

def test_private_channels_are_one_cache_shared_by_search(settings, db):
    clock = ManualClock()
    own = Database(settings, clock=clock)
    team = f"T{uuid.uuid4().hex[:12].upper()}"
    try:
        def index(channel_id: str, at: int, **fields):
            own.execute_many([channels.index_write(team, channel_id, at, **fields)])

        index("COLD", 1, name="old", visibility="public", next_channel_id="CNEW")
        index("CNEW", 2, name="new", visibility="private", prev_channel_id="COLD")  # converted: older id hidden too
        index("CSELF", 3, name="self", visibility="private", next_channel_id="CNEXT")
        index("CNEXT", 4, name="next", visibility="public", prev_channel_id="CSELF")
        index("CPUB", 5, name="pub", visibility="public")
        expected = frozenset({"COLD", "CNEW", "CSELF"})
        assert channels.private_channels(own, team) == expected
        assert search.directory(own, team).private == expected
        assert channels.PRIVATE_CHANNELS_CACHE in own.caches.names()

        index("CPUB", 6, visibility="private")
        assert channels.private_channels(own, team) == expected  # cached ...
        assert search.directory(own, team).private == expected
        clock.advance(channels.PRIVATE_CHANNELS_TTL + 0.1)  # ... for one lifetime, the same for both readers
        assert channels.private_channels(own, team) == expected | {"CPUB"}
        assert search.directory(own, team).private == expected | {"CPUB"}
    finally:
        own.close()
