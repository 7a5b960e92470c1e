"""Hostile input never reaches a 500 (docs/security.md "Hostile input").

Every route of the app's URL map is sent malformed requests through Flask's test client (no HTTP): bodies
(nesting 5,000 deep, invalid UTF-8, numbers of 5,000 digits, wrong JSON types, truncated JSON, NUL bytes,
surrogate escapes), headers (wrong Content-Type, bad and valid Slack signatures over hostile bodies, bad
Authorization values, bad X-Read-Consistency) and query strings (dates past Python's calendar, garbled cursors
and validly signed cursors holding forged positions, huge limits, Unicode junk), with path parameters both
valid (the sample workspace and network, a tagging project) and hostile, without a token and with each kind of
token (read, admin, tagging, the archive pages' cookie). Every answer must be below 500, and no log record at
ERROR level (the unhandled-exception handler logs a traceback there) may appear.

Two parts: `test_every_route_sweep` sends every fixed hostile case to every route (the cases rotate through
the credentials), `test_hypothesis_requests` draws requests from the strategies below. `bench/hostile_input.py`
reuses `World`, `sweep` and `hostile_request` with a bigger budget (>= 20,000 requests).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import re
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.paging import sign_cursor
from api.slack import search as slack_search
from api.slack.http import index_scope, thread_scope, timeline_scope, users_scope
from tests.helpers import ADMIN_TOKEN, READ_TOKEN

EVENTS_PATH = "/slack/events"
HOSTILE_TEAM = "T0HOSTILE"  # signed events with hostile fields are sent as this workspace (never the sample's)
HOSTILE_NETWORK = "hostilenet"  # the sample network loaded again under this name: the fuzz writes only here
BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")

# -- fixed hostile values ---------------------------------------------------------------------------------------

DEEP = [b"[" * 5000, b'{"a":' * 3000, b"[" * 65 + b"]" * 65, b'{"text": ' + b"[" * 2000 + b"1" + b"]" * 2000 + b"}"]
HUGE_NUMBERS = [b'{"limit": ' + b"9" * 5000 + b"}", b"[-" + b"1" * 4400 + b"]", b'{"limit": 1e999}',
                b'{"limit": -1e400, "count": 1.7976931348623157e309}', b'{"limit": NaN, "x": Infinity}',
                b'{"post_id": 99999999999999999999999999999}']
BAD_UTF8 = [b'{"text": "\xff\xfe\xfd"}', b"\xc3\x28", b'{"type": "url_verification", "challenge": "\xed\xa0\x80"}',
            b"\xff" * 32]
TRUNCATED = [b'{"text": "abc', b'{"type": "event_callback", "event": {', b"[1, 2,", b'{"a": tru', b'"', b"{"]
NUL = [b'{"text": "a\x00b"}', b"\x00" * 64, b'{"text": "\\u0000", "name": "\\u0000\\u0000"}']
WRONG_TYPES = [b"[1, 2, 3]", b'"just a string"', b"null", b"true", b"12",
               b'{"text": ["x"], "limit": {"a": 1}, "author_id": "x", "posted_at": 5, "category": null}',
               b'{"text": "\\ud800", "name": "\\udfff"}', b"{}", b""]
FIXED_BODIES = DEEP + HUGE_NUMBERS + BAD_UTF8 + TRUNCATED + NUL + WRONG_TYPES

CONTENT_TYPES = ["application/json", "text/plain", "multipart/form-data", "multipart/form-data; boundary=x",
                 "application/x-www-form-urlencoded", "application/json; charset=utf-16", "application/vnd.x+json",
                 "\x00/\x00", "", "application/json; boundary=\"", "text/html; charset=latin-1"]

HOSTILE_DATES = ["after:9999-12-31", "before:0001-01-01", "on:9999-12-31", "during:0000", "during:9999",
                 "during:9999-12", "during:0000-00", "on:0001-01-01", "before:9999-12-31", "after:0001-01-01",
                 "on:2024-02-30", "during:2024-13", "on:99999-01-01", "after:", "during:-1", "on:+002024-01-01"]
HOSTILE_TEXT = ["", " ", "..", "../../../../tagging/signout", "%00", "\x00", "a" * 5000, "ü" * 300, "\u202e\u0000",
                "\ud800", "<script>", "' OR 1=1 --", "1e999", "-1", "99999999999999999999999999999", "NaN",
                "true", "[]", "{}", "%ff%fe", "\U0001f4a9" * 50, "\r\n", "T1/../T2", "CSAMPLEGEN\n", "０"]
HOSTILE_INTS = ["-1", "0", "99999999999999999999999999999", "1e9", "abc", "", "9223372036854775808", "１", "0x10",
                "-0", "1.5", "NaN"]
AUTH_VALUES = ["Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Bearer " + "x" * 5000, "bearer token-all",
               "Bearer token-all extra", "Bearer\ttoken-all", "Bearer \xff\xfe", "Token token-all", "Bearer ,,,"]
FORGED_POSITIONS: list[dict[str, Any]] = [
    {"p": 10**30}, {"p": -1}, {"p": 2**63}, {"p": 2**62 + 1}, {"p": True}, {"p": 1.5}, {"p": "x"}, {"p": None},
    {}, {"p": [1]}, {"p": {"x": 1}}, {"p": float("inf")}, {"p": float("nan")},
    {"a": "../x"}, {"a": 10**30}, {"b": 10**30, "a": "U1"}, {"b": -1, "a": "U1"}, {"b": 0, "a": "\x00"},
    {"d": 10**30}, {"d": 5, "t": 10**30, "c": 5}, {"d": -5, "t": -1}, {"d": 2**31, "t": None, "c": ""},
    {"m": 10**30, "t": 10**30, "p": 10**30}, {"m": "2024-01", "t": 1e308, "p": 1},
    {"m": [], "t": -(10**17), "p": 2**63},
    {"r": 10**30}, {"r": "x" * 1000}, {"r": None},
]


# -- the world: routes, valid-looking values, credentials ---------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Target:
    rule: str
    endpoint: str
    methods: tuple[str, ...]
    params: tuple[str, ...]
    int_params: frozenset[str]


@dataclasses.dataclass(frozen=True)
class Hostile:
    """One malformed request."""

    method: str
    path: str
    query: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    endpoint: str = ""


@dataclasses.dataclass
class World:
    """What the generators draw from: the app's routes and values that reach past routing and authorisation."""

    app: Flask
    cursor_secret: bytes
    signing_secret: str
    valid: dict[str, list[str]]          # path parameter name -> valid-looking values
    writes: dict[str, list[str]]         # the same for requests that change state (their own workspace, network)
    credentials: list[tuple[tuple[str, str], ...]]  # header sets: none, tokens, cookies
    body_fields: dict[str, list[str]]    # endpoint -> JSON field names its body schema has
    best: dict[str, tuple[tuple[str, str], ...]] = dataclasses.field(default_factory=dict)  # see best_credentials
    targets: list[Target] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.targets = targets(self.app)

    def __repr__(self) -> str:  # hypothesis prints the strategy's arguments with a failure: keep it short
        return f"World({len(self.targets)} routes)"


def targets(app: Flask) -> list[Target]:
    """Every (rule, methods) of the URL map, in a stable order."""
    out = []
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: (r.rule, r.endpoint)):
        methods = tuple(sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}))
        ints = frozenset(name for name, conv in rule._converters.items() if type(conv).__name__ == "IntegerConverter")
        out.append(Target(rule.rule, rule.endpoint, methods, tuple(rule.arguments), ints))
    return out


_PARAM = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")


def fill(target: Target, values: dict[str, str]) -> str:
    """The rule's path with each parameter replaced by its value, percent-encoded whole."""
    return _PARAM.sub(lambda m: quote(values[m.group(1)].encode("utf-8", "surrogatepass"), safe=""), target.rule)


def _signed_slack(body: bytes, secret: str, timestamp: str | None = None) -> tuple[tuple[str, str], ...]:
    ts = timestamp or str(int(time.time()))
    digest = hmac.new(secret.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
    return (("X-Slack-Request-Timestamp", ts), ("X-Slack-Signature", f"v0={digest}"))


def scopes(world: World, target: Target, values: dict[str, str]) -> list[tuple[str, str]]:
    """(query parameter, cursor scope) of the listings a route pages, for validly signed forged cursors."""
    team, channel = values.get("team_id", ""), values.get("channel_id", "")
    e = target.endpoint
    if e == "slack.channel_timeline":
        return [("cursor", timeline_scope(team, channel))]
    if e in ("slack.get_thread", "archive_pages.thread_fragment"):
        return [("cursor", thread_scope(team, channel, values.get("thread_ts", ""), False))]
    if e == "archive_pages.older_fragment":
        return [("cursor", timeline_scope(team, channel, include_deleted=False))]
    if e == "slack.list_users":
        return [("cursor", users_scope(team))]
    if e == "slack.channel_index":
        return [("cursor", index_scope(team, False, True)), ("cursor", index_scope(team, False, False))]
    if e == "archive_pages.team_page":
        return [("users", users_scope(team)), ("channels", index_scope(team, True, True))]
    if e in ("slack_reports.list_reports", "archive_reports.report_list"):
        return [("cursor", f"reports|{team}")]
    if e in ("network.list_posts", "archive_networks.account_page"):
        return [("cursor", f"q1|{values.get('network', '')}|{values.get('account_id', '')}")]
    return []


SEARCH_Q = "hello"


def search_scopes(world: World, target: Target, values: dict[str, str]) -> list[str]:
    team = values.get("team_id", "")
    if target.endpoint == "slack.search_messages":
        return [slack_search._cursor_scope(team, SEARCH_Q, None)]
    if target.endpoint == "archive_pages.search_page":
        return [slack_search._cursor_scope(team, SEARCH_Q, "UTC")]
    return []


def fixed_queries(world: World, target: Target, values: dict[str, str]) -> list[str]:
    """The fixed hostile query strings for a GET route (forged cursors of its own listings first)."""
    out = []
    # Scopes are built from the path values as the routes would (a lone surrogate cannot be: it never gets there).
    values = {k: v.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for k, v in values.items()}
    for name, scope in scopes(world, target, values):
        out += [urlencode({name: sign_cursor(p, world.cursor_secret, scope)}) for p in FORGED_POSITIONS]
    for scope in search_scopes(world, target, values):
        out += [urlencode({"q": SEARCH_Q, "cursor": sign_cursor(p, world.cursor_secret, scope)})
                for p in FORGED_POSITIONS]
    out += [urlencode({"q": f"hello {d}"}) for d in HOSTILE_DATES]
    out += [
        "cursor=" + quote("x" * 3000), "cursor=e30.AAAA", "cursor=%ff%fe.%00", "cursor=" + "A" * 200 + "." + "B" * 22,
        "limit=99999999999999999999999999", "limit=-1", "limit=abc", "limit=1e9&limit=2", "limit=NaN",
        "q=" + quote("\x00 ü \ud800", errors="surrogatepass"), "q=" + "a%20" * 2000, "tz=../../etc/passwd",
        "tz=%00", "tz=" + "A" * 500, "before=99999999999999999999.1&after=-1", "order=sideways&include_deleted=maybe",
        "from=0000-01-01&to=9999-12-31", "from=9999-12-31", "dates=9999-12-31,0001-01-01,2024-02-30",
        "from=1970-01-01&to=2199-12-31&summary=perhaps", "%ff%fe=%00", "a=%", "anonymise=2&format=%00",
        "next=//evil.example&team=..%2F..", "users=" + quote("x.y"), "channels=%00", "kind=%0d%0a",
    ]
    return out


def credentials(read: str, admin: str, tagging: list[str]) -> list[tuple[tuple[str, str], ...]]:
    creds: list[tuple[tuple[str, str], ...]] = [
        (), (("Authorization", f"Bearer {read}"),), (("Authorization", f"Bearer {admin}"),),
        (("Authorization", "Bearer token-t1"),),
        (("Cookie", f"chronicle_archive={read}; chronicle_tz=UTC"),),
        (("Cookie", "chronicle_archive=" + "x" * 600 + "; chronicle_tz=" + "../" * 30),),
    ]
    for token in tagging:
        creds.append((("Authorization", f"Bearer {token}"),))
        creds.append((("Cookie", f"chronicle_tagging={token}"),))
    creds += [(("Authorization", value),) for value in AUTH_VALUES]
    return creds


def valid_values(world: World, target: Target, method: str) -> dict[str, str]:
    """The first valid-looking value of each path parameter (integers for integer parameters); a request that may
    change state names the test's own workspace and network, never the shared samples."""
    pool = world.valid if method == "GET" else {**world.valid, **world.writes}
    out = {}
    for name in target.params:
        values = pool.get(name, ["1"])
        if name in target.int_params:
            values = [v for v in values if v.isdigit()] or pool["account_id"]
        out[name] = values[0]
    return out


def best_credentials(read: str, admin: str, tagging: list[str]) -> dict[str, tuple[tuple[str, str], ...]]:
    """Endpoint prefix -> the credential that gets a request past authorisation (so the hostile values meet the
    route's own checks, not only the 401): tokens for the REST routes, cookies for the pages."""
    tag_admin = tagging[-1] if tagging else "none"
    return {"slack_events": (), "slack": (("Authorization", f"Bearer {read}"),),
            "activity.slack": (("Authorization", f"Bearer {read}"),),
            "activity": (("Authorization", f"Bearer {admin}"),), "network": (("Authorization", f"Bearer {admin}"),),
            "archive": (("Cookie", f"chronicle_archive={read}; chronicle_tz=UTC"),),
            "tagging_pages": (("Cookie", f"chronicle_tagging={tag_admin}"),),
            "tagging": (("Authorization", f"Bearer {tag_admin}"),)}


def best_for(world: World, endpoint: str) -> tuple[tuple[str, str], ...]:
    for prefix in sorted(world.best, key=len, reverse=True):
        if endpoint.startswith(prefix):
            return world.best[prefix]
    return ()


# -- the deterministic sweep ----------------------------------------------------------------------------------------

def sweep(world: World) -> Iterator[Hostile]:
    """Every fixed case to every route: GET routes get every hostile query (with valid path values, then with
    hostile ones), body routes every hostile body under a rotating Content-Type. Three cases in four carry the
    credential that passes the route's authorisation, the fourth one of all the credentials in turn."""
    n = 0

    def creds() -> tuple[tuple[str, str], ...]:
        nonlocal n
        n += 1
        if n % 4:
            return best_for(world, target.endpoint)
        return world.credentials[(n // 4) % len(world.credentials)]

    for target in world.targets:
        for method in target.methods:
            valid = valid_values(world, target, method)
            path = fill(target, valid)
            if method == "GET":
                for query in fixed_queries(world, target, valid):
                    yield Hostile(method, path, query, creds(), None, target.endpoint)
            else:
                for i, body in enumerate(FIXED_BODIES):
                    headers = (("Content-Type", CONTENT_TYPES[i % len(CONTENT_TYPES)]),) + creds()
                    if target.endpoint.startswith("slack_events"):
                        headers += _signed_slack(body, world.signing_secret)
                    yield Hostile(method, path, "", headers, body, target.endpoint)
            for name in target.params:  # each path parameter hostile in turn
                for value in (HOSTILE_INTS if name in target.int_params else HOSTILE_TEXT):
                    if not value:
                        continue
                    yield Hostile(method, fill(target, {**valid, name: value}), "", creds(),
                                  b"[]" if method in BODY_METHODS else None, target.endpoint)
        # A method the route does not have: 405, never 500.
        other = "PATCH" if "PATCH" not in target.methods else "PUT"
        yield Hostile(other, fill(target, valid_values(world, target, other)), "", creds(), b"[" * 5000,
                      target.endpoint)
    yield from slack_header_cases(world)


def slack_header_cases(world: World) -> Iterator[Hostile]:
    """The Events receiver's headers: signatures and timestamps a verifier could choke on."""
    body = json.dumps({"type": "url_verification", "challenge": "c"}).encode()
    now = str(int(time.time()))
    for ts, sig in [("²", "v0=00"), ("9" * 30, "v0=00"), ("-1", "v0=00"), (now, "v0=\xff\xfe"), (now, "ü" * 64),
                    (now, ""), ("", "v0=00"), (now, "v0=" + "0" * 5000), ("1e9", "v0=00"), (now, "v1=abc"),
                    (" " + now, "v0=00"), (now + "\t", "v0=00")]:
        for payload in (body, b"\xff\xfe" + body, b"[" * 5000):
            headers = (("Content-Type", "application/json"), ("X-Slack-Request-Timestamp", ts),
                       ("X-Slack-Signature", sig))
            yield Hostile("POST", EVENTS_PATH, "", headers, payload, "slack_events.slack_events")
    for payload in BAD_UTF8 + DEEP + HUGE_NUMBERS:  # validly signed hostile bytes
        yield Hostile("POST", EVENTS_PATH, "", (("Content-Type", "application/json"),)
                      + _signed_slack(payload, world.signing_secret), payload, "slack_events.slack_events")
    for event in hostile_events():
        payload = json.dumps(_envelope(event)).encode()
        yield Hostile("POST", EVENTS_PATH, "", (("Content-Type", "application/json"),)
                      + _signed_slack(payload, world.signing_secret), payload, "slack_events.slack_events")


def _envelope(event: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "event_callback", "team_id": HOSTILE_TEAM, "api_app_id": "A1", "event_id": "EvHOSTILE",
            "event_time": 1_700_000_000, "event": event, **extra}


def hostile_events() -> list[Any]:
    """Signed events whose fields are hostile: each is 200 (ignored, stored) or 400 with a reason."""
    base = {"type": "message", "channel": "C0HOSTILE", "channel_type": "channel", "user": "U1", "text": "x",
            "ts": "1700000000.000100"}
    out: list[Any] = [
        {**base, "event_ts": True}, {**base, "event_ts": 10**30}, {**base, "event_ts": [1]},
        {**base, "user": "../../../../tagging/signout"}, {**base, "user": 5}, {**base, "user": ""},
        {**base, "bot_id": "../x"}, {**base, "parent_user_id": "<script>"}, {**base, "inviter": ["U1"]},
        {**base, "channel_type": "im", "channel": "D0HOSTILE", "user": "../x"},
        {**base, "ts": "9" * 40}, {**base, "thread_ts": True}, {**base, "files": [{"id": "../../x"}, 5]},
        {**base, "blocks": "x"}, {**base, "attachments": [[[]]]}, {**base, "text": "\ud800"},
        {**base, "subtype": "message_changed", "message": {"user": "../x", "text": "y", "ts": "1.0"}},
        {**base, "subtype": "message_deleted", "deleted_ts": {"a": 1}},
        {"type": "reaction_added", "user": "../x", "reaction": "x",
         "item": {"type": "message", "channel": "C0HOSTILE", "ts": "1700000000.000100"}, "event_ts": "1.0"},
        {"type": "reaction_added", "user": "U1", "reaction": "x",
         "item": {"type": "message", "channel": "C0HOSTILE", "ts": "1700000000.000100"}, "event_ts": True},
        {"type": "channel_deleted", "channel": "C0HOSTILE", "event_ts": True},
        {"type": "channel_created", "channel": {"id": "C0HOSTILE", "name": "\x00" * 100, "created": 10**40}},
        {"type": "channel_rename", "channel": {"id": "C0HOSTILE", "name": ["x"]}, "event_ts": "1.0"},
        {"type": "user_change", "user": {"id": "../x"}}, {"type": "team_join", "user": {"id": "U1", "tz": "\x00"}},
        {"type": "channel_id_changed", "old_channel_id": "C0HOSTILE", "new_channel_id": "../x"},
        {"type": None}, [], "x", {"type": "message"},
    ]
    return out


# -- hypothesis strategies -----------------------------------------------------------------------------------------

_header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=60)
_junk_text = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=40),
                       st.text(st.characters(codec="utf-8"), min_size=1, max_size=20))
_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
                       _junk_text, st.sampled_from([10**40, -(10**40), 2**63, 1e308]))
_json_value = st.recursive(_json_leaf, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=12)


@st.composite
def json_body(draw: st.DrawFn, fields: list[str]) -> bytes:
    """A JSON object over the route's own field names (wrong types, hostile values), sometimes mangled."""
    names = fields or ["text", "limit", "name"]
    obj = draw(st.dictionaries(st.sampled_from(names), _json_value, max_size=len(names)))
    raw = json.dumps(obj, allow_nan=True).encode("utf-8", "surrogatepass")
    mangle = draw(st.sampled_from(["none", "none", "truncate", "nul", "utf8", "deep"]))
    if mangle == "truncate" and raw:
        return raw[:draw(st.integers(0, len(raw) - 1))]
    if mangle == "nul":
        at = draw(st.integers(0, len(raw)))
        return raw[:at] + b"\x00" + raw[at:]
    if mangle == "utf8":
        return raw + b"\xff\xfe"
    if mangle == "deep":
        depth = draw(st.integers(60, 6000))
        return b"[" * depth + raw + b"]" * draw(st.integers(0, depth))
    return raw


def body_strategy(world: World, target: Target) -> st.SearchStrategy[bytes]:
    return st.one_of(st.sampled_from(FIXED_BODIES), json_body(world.body_fields.get(target.endpoint, [])),
                     st.binary(max_size=64))


@st.composite
def query_strategy(draw: st.DrawFn, world: World, target: Target, values: dict[str, str]) -> str:
    choices = []
    fixed = fixed_queries(world, target, values)
    choices.append(st.sampled_from(fixed))
    names = ["cursor", "limit", "q", "tz", "before", "after", "order", "include_deleted", "from", "to", "dates",
             "summary", "anonymise", "kind", "next", "team", "users", "channels"]
    pairs = st.lists(st.tuples(st.sampled_from(names), st.one_of(_junk_text, st.sampled_from(HOSTILE_INTS))),
                     max_size=4)
    choices.append(pairs.map(lambda p: urlencode([(k, v.encode("utf-8", "surrogatepass")) for k, v in p])))
    q_words = st.lists(st.one_of(st.sampled_from(HOSTILE_DATES), st.from_regex(
        r"\A(before|after|on|during):[0-9-]{0,12}\Z"), _junk_text), min_size=1, max_size=4)
    choices.append(q_words.map(lambda w: urlencode({"q": " ".join(w).encode("utf-8", "surrogatepass")})))
    return draw(st.one_of(choices))


@st.composite
def hostile_request(draw: st.DrawFn, world: World) -> Hostile:
    target = draw(st.sampled_from(world.targets))
    method = draw(st.sampled_from(target.methods))
    values = valid_values(world, target, method)
    for name in target.params:
        hostile = HOSTILE_INTS if name in target.int_params else HOSTILE_TEXT
        values[name] = draw(st.one_of(st.just(values[name]), st.sampled_from(hostile), _junk_text.filter(bool)))
        if method != "GET" and name in world.writes:
            values[name] = world.writes[name][0]  # hostile values of the others only: never the samples' own
        if not values[name]:
            values[name] = "x"
    headers: list[tuple[str, str]] = list(draw(st.one_of(st.just(best_for(world, target.endpoint)),
                                                         st.sampled_from(world.credentials))))
    if draw(st.booleans()):
        headers.append(("Content-Type", draw(st.one_of(st.sampled_from(CONTENT_TYPES), _header_text))))
    if draw(st.integers(0, 9)) == 0:
        headers.append(("X-Read-Consistency", draw(_header_text)))
    if draw(st.integers(0, 9)) == 0:
        headers.append(("Authorization", draw(_header_text)))
    query = draw(query_strategy(world, target, values)) if method == "GET" or draw(st.booleans()) else ""
    body = None
    if method in BODY_METHODS or draw(st.integers(0, 9)) == 0:
        if target.endpoint.startswith("slack_events") and draw(st.booleans()):
            event = draw(st.one_of(st.sampled_from(hostile_events()), _json_value))
            body = json.dumps(_envelope(event), allow_nan=True).encode("utf-8", "surrogatepass")
        else:
            body = draw(body_strategy(world, target))
        if target.endpoint.startswith("slack_events"):
            if draw(st.booleans()):
                headers += _signed_slack(body, world.signing_secret)
            else:
                headers += [("X-Slack-Request-Timestamp", draw(_header_text)),
                            ("X-Slack-Signature", draw(_header_text))]
    return Hostile(method, fill(target, values), query, tuple(headers), body, target.endpoint)


# -- sending and judging ----------------------------------------------------------------------------------------------

class ErrorLog(logging.Handler):
    """Collects every log record at ERROR or above (the unhandled-exception handler logs its traceback there)."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclasses.dataclass
class Tally:
    sent: int = 0
    statuses: Counter = dataclasses.field(default_factory=Counter)
    by_route: Counter = dataclasses.field(default_factory=Counter)  # (endpoint, status) -> requests
    server_errors: list[str] = dataclasses.field(default_factory=list)
    error_logs: list[str] = dataclasses.field(default_factory=list)


def send(client: Any, request: Hostile, tally: Tally, errors: ErrorLog) -> int:
    """Send one request; record its status, and any 5xx or ERROR log record it caused, with the request."""
    before = len(errors.records)
    response = client.open(request.path, method=request.method, query_string=request.query,
                           headers=list(request.headers), data=request.body)
    status = response.status_code
    response.close()
    tally.sent += 1
    tally.statuses[status // 100 * 100] += 1
    tally.by_route[(request.endpoint, status)] += 1
    described = f"{request.method} {request.path[:120]}?{request.query[:200]} body={(request.body or b'')[:80]!r}"
    if status >= 500:
        tally.server_errors.append(f"{status} {described}")
    for record in errors.records[before:]:
        tally.error_logs.append(f"{record.levelname} {str(record.msg)[:300]} <- {described}")
    return status


def world_for(app: Flask, db: Any, settings: Any) -> World:
    """Load the sample workspace and network and a tagging project; collect valid-looking path values."""
    import tempfile
    from pathlib import Path

    from api.network import loader
    from api.network.sample import SAMPLE_NETWORK, build_sample_files
    from api.network.sample import load_sample as load_network_sample
    from api.slack import sample as slack_sample
    from api.tagging import service, worker

    slack_sample.load_sample(db, settings)
    load_network_sample(db)
    with tempfile.TemporaryDirectory(prefix="chronicle-hostile-") as tmp:
        build_sample_files(Path(tmp))
        loader.load_network(db, HOSTILE_NETWORK, Path(tmp))
    client = app.test_client()
    read = {"Authorization": f"Bearer {READ_TOKEN}"}
    team, channel = slack_sample.TEAM, slack_sample.GENERAL
    page = client.get(f"/slack/teams/{team}/channels/{channel}/messages", headers=read).get_json()
    stamps = [m["ts"] for m in page["messages"]]
    users = sorted({m["user"] for m in page["messages"] if m.get("user")})
    threads = sorted({m["thread_ts"] for m in page["messages"] if m.get("thread_ts")}) or stamps
    # Authors with posts, and their posts (a test keyspace is small: a token-range read is fine here).
    rows = db.execute_raw("SELECT network, author_id, post_id FROM posts_by_author LIMIT 2000")
    written = [(r.author_id, r.post_id) for r in rows if r.network == HOSTILE_NETWORK]
    accounts = list(dict.fromkeys(str(a) for a, _ in written))[:3] or ["1"]
    post_ids = [str(p) for a, p in written if str(a) == accounts[0]][:3] or ["1"]
    project = f"hostile{int(time.time())}"
    author = int(accounts[0])
    try:
        service.create_project(db, project, "Hostile input", {"kind": "network", "network": HOSTILE_NETWORK,
                                                               "authors": [author]},
                               ["news", "other"], ["local"], teams={"red": None})
        tagging = [service.add_member(db, project, user, "red", role)
                   for user, role in (("ann", "tagger"), ("quinn", "qa"), ("ada", "admin"))]
        worker.run_once(db, project)
    except Exception as exc:  # without a project the tagging routes are still fuzzed (their refusals)
        logging.getLogger(__name__).warning("no tagging project for the hostile-input test: %r", exc)
        tagging = []
    spec = client.get("/openapi.json").get_json()
    return World(
        app=app, cursor_secret=settings.cursor_secret, signing_secret=settings.slack_signing_secret,
        valid={"team_id": [team, "T1", HOSTILE_TEAM], "channel_id": [channel, slack_sample.RANDOM],
               "ts": stamps or ["1700000000.000100"], "thread_ts": threads or ["1700000000.000100"],
               "user_id": users or ["U1"], "file_id": ["F0HOSTILE"],
               "report_id": ["2024-W01", "2024-01"], "network": [SAMPLE_NETWORK, HOSTILE_NETWORK, "nonet"],
               "account_id": accounts, "target_id": accounts[::-1], "post_id": post_ids,
               "project": [project], "project_id": [project], "seq": ["1", "2"],
               "ranking": ["top-accounts", "top-followers"], "filename": ["app.css", "../../../etc/passwd"]},
        writes={"team_id": [HOSTILE_TEAM], "network": [HOSTILE_NETWORK]},
        credentials=credentials(READ_TOKEN, ADMIN_TOKEN, tagging),
        body_fields=body_fields(app, spec), best=best_credentials(READ_TOKEN, ADMIN_TOKEN, tagging))


def body_fields(app: Flask, spec: dict[str, Any]) -> dict[str, list[str]]:
    """endpoint -> the property names of its JSON request body in the OpenAPI document."""
    components = spec.get("components", {}).get("schemas", {})
    by_path: dict[tuple[str, str], list[str]] = {}
    for path, operations in spec.get("paths", {}).items():
        for method, op in operations.items():
            if not isinstance(op, dict):
                continue
            schema = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
            if "$ref" in schema:
                schema = components.get(schema["$ref"].rsplit("/", 1)[-1], {})
            by_path[(re.sub(r"\{([^}]+)\}", r"\1", path), method.upper())] = sorted(schema.get("properties", {}))
    out: dict[str, list[str]] = {}
    for rule in app.url_map.iter_rules():
        key = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"\1", rule.rule)
        for method in rule.methods or ():
            if (key, method) in by_path:
                out.setdefault(rule.endpoint, []).extend(by_path[(key, method)])
    return out


# -- the tests --------------------------------------------------------------------------------------------------------

SWEEP_MAX = 2_500     # fixed cases sent by the test (the bench sends them all, several times over)
HYPOTHESIS_EXAMPLES = 1_200


@pytest.fixture(scope="module")
def world(app, db, settings) -> World:
    return world_for(app, db, settings)


@pytest.fixture(scope="module")
def error_log():
    handler = ErrorLog()
    root = logging.getLogger()
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)


@pytest.fixture(scope="module")
def tally() -> Iterator[Tally]:
    counted = Tally()
    yield counted
    print(f"\nhostile input: {counted.sent} requests, statuses {dict(sorted(counted.statuses.items()))}, "
          f"{len(counted.server_errors)} 5xx, {len(counted.error_logs)} ERROR log records")


def _judge(tally: Tally) -> None:
    assert not tally.server_errors, "\n".join(tally.server_errors[:20])
    assert not tally.error_logs, "\n".join(tally.error_logs[:20])


def test_every_route_sweep(world: World, error_log: ErrorLog, tally: Tally):
    cases = list(sweep(world))
    # Every route is in the sweep, and the sweep is bounded: the cases are spread evenly when there are more.
    assert {c.endpoint for c in cases} >= {t.endpoint for t in world.targets}
    step = max(1, len(cases) // SWEEP_MAX)
    chosen = cases[::step]
    assert {c.endpoint for c in chosen} >= {t.endpoint for t in world.targets}
    client = world.app.test_client(use_cookies=False)
    for case in chosen:
        send(client, case, tally, error_log)
    _judge(tally)


def test_forged_cursors_and_dates_are_client_errors(world: World, error_log: ErrorLog, tally: Tally):
    """The findings of issue 28 one by one: each answer is a 4xx with a reason."""
    client = world.app.test_client(use_cookies=False)
    read = (("Authorization", f"Bearer {READ_TOKEN}"),)
    cookie = (("Cookie", f"chronicle_archive={READ_TOKEN}; chronicle_tz=UTC"),)
    team, channel = world.valid["team_id"][0], world.valid["channel_id"][0]
    thread = world.valid["thread_ts"][0]
    forged = {"p": 10**30}
    for path, scope, headers in [
        (f"/slack/teams/{team}/channels/{channel}/messages", timeline_scope(team, channel), read),
        (f"/slack/teams/{team}/channels/{channel}/threads/{thread}", thread_scope(team, channel, thread, False), read),
        (f"/archive/teams/{team}/channels/{channel}/older", timeline_scope(team, channel), cookie),
        (f"/archive/teams/{team}/channels/{channel}/threads/{thread}", thread_scope(team, channel, thread, False),
         cookie),
    ]:
        query = urlencode({"cursor": sign_cursor(forged, world.cursor_secret, scope)})
        status = send(client, Hostile("GET", path, query, headers), tally, error_log)
        assert status == 400, path
    for modifier in ["after:9999-12-31", "before:0001-01-01", "on:9999-12-31", "during:0000", "during:9999"]:
        for path, headers in [(f"/slack/teams/{team}/search", read), (f"/archive/teams/{team}/search", cookie)]:
            status = send(client, Hostile("GET", path, urlencode({"q": f"hello {modifier}"}), headers),
                          tally, error_log)
            assert status in (200, 422), (path, modifier, status)
    deep = Hostile("POST", EVENTS_PATH, "", (("Content-Type", "application/json"), ("X-Slack-Signature", "v0=1"),
                                             ("X-Slack-Request-Timestamp", "1")), b"[" * 5000)
    response = client.open(deep.path, method="POST", headers=list(deep.headers), data=deep.body)
    assert response.status_code == 400 and "nested deeper" in response.get_json()["message"]
    body = b'{"type": "event_callback", "team_id": "T1", "x": "\xff"}'
    response = client.post(EVENTS_PATH, data=body, headers=[("Content-Type", "application/json"),
                                                            *_signed_slack(body, world.signing_secret)])
    assert response.status_code == 400 and "UTF-8" in response.get_json()["message"]
    for event, reason in [({"type": "channel_deleted", "channel": "C0HOSTILE", "event_ts": True}, "Slack timestamp"),
                          ({"type": "message", "channel": "C0HOSTILE", "channel_type": "channel", "text": "x",
                            "ts": "1700000000.000100", "event_ts": True}, "Slack timestamp"),
                          ({"type": "message", "channel": "C0HOSTILE", "channel_type": "channel", "text": "x",
                            "ts": "1700000000.000200", "user": "../../../../tagging/signout"}, "user id")]:
        payload = json.dumps(_envelope(event)).encode()
        response = client.post(EVENTS_PATH, data=payload, headers=[("Content-Type", "application/json"),
                                                                   *_signed_slack(payload, world.signing_secret)])
        assert response.status_code == 400 and reason in response.get_json()["message"], event
    # In a DM nothing is stored whatever the author: ignored, as before.
    dm = {"type": "message", "channel": "D0HOSTILE", "channel_type": "im", "text": "x", "ts": "1700000000.000300",
          "user": "../x"}
    payload = json.dumps(_envelope(dm)).encode()
    response = client.post(EVENTS_PATH, data=payload, headers=[("Content-Type", "application/json"),
                                                               *_signed_slack(payload, world.signing_secret)])
    assert response.status_code == 200 and response.get_json()["outcome"].startswith("ignored")
    _judge(tally)


@settings(max_examples=HYPOTHESIS_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_hypothesis_requests(world: World, error_log: ErrorLog, tally: Tally, data):
    client = world.app.test_client(use_cookies=False)
    send(client, data.draw(hostile_request(world)), tally, error_log)
    _judge(tally)
