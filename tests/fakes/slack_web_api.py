"""A stand-in for Slack's Web API (https://slack.com/api/) on 127.0.0.1: a real HTTP/1.1 server in a thread.

slack_sdk talks to it unchanged: `WebClient(token=..., base_url=fake.base_url)` (base_url ends with /api/).

Model: plain data that tests change between runs; the helpers take `lock`, so they are safe while clients run.
  team_id, team_name, and `tokens`: each valid token -> its scopes
  `channels`: id -> conversation object as conversations.list returns it (add_channel, set_members)
  `users`: id -> user object as users.list returns it (add_user)
  messages of each channel, top-level and replies, ordered by ts (post, edit, delete, react, unreact; read copies
  back with messages(channel) / message(channel, ts)). Threads keep Slack's bookkeeping on the parent
  (thread_ts, reply_count, reply_users, reply_users_count, latest_reply); a deleted parent that still has
  replies stays as a hidden "tombstone" until its last reply goes.

Methods: auth.test, conversations.list, conversations.info, conversations.members, conversations.history,
conversations.replies, users.list, chat.postMessage, apps.connections.open; any other answers {"ok": false,
"error": "unknown_method"}. OAuth (`fake.oauth`, tests/fakes/slack_oauth.py): the consent page at
GET /oauth/v2/authorize, oauth.v2.access (codes, token rotation), revoked tokens answering token_revoked.
  - args come from the query string, a form body or a JSON body (slack_sdk always POSTs a form body)
  - token from "Authorization: Bearer" or a `token` arg: none -> not_authed, unknown -> invalid_auth; a scope
    missing -> missing_scope with needed/provided
  - cursors are opaque base64: history/replies name the next ts (they survive posts between pages), the lists
    an offset; a bad one -> invalid_cursor
  - history: newest first; top-level messages, thread broadcasts and tombstones; oldest/latest exclusive unless
    inclusive, latest defaults to now; unknown channel -> channel_not_found, a private channel the bot is not
    in -> not_in_channel (public channels are readable without joining, unlike real bot tokens)
  - replies: the parent first on every page (as Slack does), then up to `limit` replies oldest first (the parent
    does not count toward limit); a ts that is not a message of the channel -> thread_not_found
  - conversations.list shows private channels only when the bot is a member
  - chat.postMessage (scope chat:write): `channel` is a channel id, a `#name` or `name` of a known channel, or a
    user id (a DM with the app); blocks are checked against Block Kit's limits (at most 50 blocks, section text
    3,000 characters, 10 fields of 2,000, header 150) -> invalid_blocks; every accepted post lands in `posted`
    as {"channel": id, "ts", "text", "blocks"}
  - apps.connections.open (Socket Mode): only an app-level token (`xapp-...`, else not_allowed_token_type) with
    scope connections:write (add it: `fake.tokens[APP_TOKEN] = {"connections:write"}`); answers a one-use URL of
    the stand-in WebSocket server set as `fake.socket_mode` (tests/fakes/slack_socket_mode.py)
Rate limits and faults (attributes; change them between runs):
  rate_per_minute[method], else default_rate_per_minute (None = unlimited): accepted requests per window_seconds
  (default 60), a sliding window per token and method. Over it -> HTTP 429 {"ok": false, "error": "ratelimited"}
  with Retry-After = whole seconds until a slot frees (at least 1). SLACK_TIER_RATES holds Slack's tiers.
  force_429_every = N: every Nth authenticated request (counted from when it is set) -> 429 with
  Retry-After: retry_after_seconds
  drop_next(method, n): the connection is closed without an answer; fail_next(method, n, status=500) answers
  {"ok": false, "error": "fatal_error"}; both come before the auth check
  latency_seconds: slept before every answer (outside the lock)
Every request lands in `requests` as (time.monotonic(), method, status), status 0 for a dropped connection;
count(method, status) sums them for a benchmark, reset_counters() clears them and the rate-limit windows.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import math
import threading
import time
from bisect import bisect_left, bisect_right, insort
from collections import Counter, deque
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.fakes.slack_oauth import FakeSlackOAuth

DEFAULT_TOKEN = "xoxb-fake"
DEFAULT_SCOPES = frozenset({"channels:read", "channels:history", "groups:read", "groups:history", "users:read",
                            "chat:write"})
# Block Kit limits chat.postMessage enforces (Slack answers invalid_blocks / msg_too_long past them).
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_SECTION_FIELDS = 10
MAX_FIELD_TEXT = 2000
MAX_HEADER_TEXT = 150
# Slack's published tiers (requests per minute): Tier 2 = 20, Tier 3 = 50, Tier 4 = 100 (auth.test is "special").
# Opt in with `fake.rate_per_minute = dict(SLACK_TIER_RATES)`.
SLACK_TIER_RATES: dict[str, int] = {
    "auth.test": 100,
    "conversations.list": 20,
    "conversations.info": 50,
    "conversations.members": 100,
    "conversations.history": 50,
    "conversations.replies": 50,
    "users.list": 20,
}
FIRST_TS = 1_700_000_000_000_100  # micro-seconds; auto ts start here and step one second
_STEP = 1_000_000
TOMBSTONE_TEXT = "This message was deleted."
Reply = tuple[int, dict[str, Any], dict[str, str]]  # HTTP status, JSON body, extra headers


class _Fail(Exception):
    """Ends a method with {"ok": false, "error": ...} (plus extra fields)."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.payload = {"ok": False, "error": error, **extra}


def ts_key(ts: str | float | int) -> int:
    """Slack ts -> micro-seconds as an int, so comparisons are exact (never float)."""
    text = str(ts).strip()
    seconds, _, frac = text.partition(".")
    if not seconds.isdigit() or (frac and not frac.isdigit()):
        raise ValueError(f"not a Slack ts: {ts!r}")
    return int(seconds) * 1_000_000 + int((frac + "000000")[:6])


def ts_str(key: int) -> str:
    return f"{key // 1_000_000}.{key % 1_000_000:06d}"


def _encode_cursor(kind: str, value: int) -> str:
    return base64.b64encode(f"{kind}:{value}".encode()).decode()


def _decode_cursor(cursor: str, kind: str) -> int | None:
    if not cursor:
        return None
    try:
        found, _, value = base64.b64decode(cursor, validate=True).decode().partition(":")
        if found == kind and value.isdigit():
            return int(value)
    except (binascii.Error, UnicodeDecodeError):
        pass
    raise _Fail("invalid_cursor")


def _flag(args: dict[str, Any], name: str) -> bool:
    value = args.get(name, False)
    return value if isinstance(value, bool) else str(value).lower() in ("1", "true")


def _limit(args: dict[str, Any], default: int, most: int) -> int:
    try:
        value = int(args.get("limit") or 0)
    except (TypeError, ValueError):
        raise _Fail("invalid_limit") from None
    return default if value <= 0 else min(value, most)


class FakeSlackWebApi:
    def __init__(self, *, team_id: str = "T0FAKE", team_name: str = "Fake Workspace",
                 tokens: dict[str, Iterable[str]] | None = None, bot_user_id: str = "U0FAKEBOT",
                 bot_id: str = "B0FAKEBOT") -> None:
        self.team_id = team_id
        self.team_name = team_name
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.tokens: dict[str, set[str]] = {t: set(s) for t, s in (tokens or {DEFAULT_TOKEN: DEFAULT_SCOPES}).items()}
        self.channels: dict[str, dict[str, Any]] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.members: dict[str, list[str]] = {}
        self.rate_per_minute: dict[str, int] = {}
        self.default_rate_per_minute: int | None = None
        self.window_seconds = 60.0
        self.retry_after_seconds = 1
        self.latency_seconds = 0.0
        self.requests: deque[tuple[float, str, int]] = deque()
        self.posted: list[dict[str, Any]] = []
        self.socket_mode: Any = None  # a FakeSlackSocketMode: what apps.connections.open hands out
        self.lock = threading.RLock()  # one lock for model, faults and counters: answers see a consistent world
        self._messages: dict[str, dict[int, dict[str, Any]]] = {}
        self._order: dict[str, list[int]] = {}  # sorted keys of every message of the channel
        self._replies: dict[str, dict[int, list[int]]] = {}  # channel -> parent key -> sorted reply keys
        self._last_ts = FIRST_TS - _STEP
        self._windows: dict[tuple[str, str], deque[float]] = {}
        self._drops: Counter[str] = Counter()
        self._fails: dict[str, list[int]] = {}
        self._force_429_every: int | None = None
        self._seen_for_429 = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.oauth = FakeSlackOAuth(self)  # the consent page, oauth.v2.access, revocations (slack_oauth.py)

    # -- lifecycle -------------------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self._server is not None, "use `with FakeSlackWebApi() as fake:`"
        return f"http://127.0.0.1:{self._server.server_address[1]}/api/"

    def __enter__(self) -> FakeSlackWebApi:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name="fake-slack-web-api")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    # -- model helpers ---------------------------------------------------------------------------------------

    def add_channel(self, id: str, name: str, *, private: bool = False, member: bool = True, archived: bool = False,
                    created: int = 1_600_000_000, creator: str = "", topic: str | None = None,
                    purpose: str | None = None) -> dict[str, Any]:
        creator = creator or self.bot_user_id
        with self.lock:
            channel = {
                "id": id, "name": name, "name_normalized": name, "is_channel": True, "is_group": False,
                "is_im": False, "is_mpim": False, "is_private": private, "is_archived": archived,
                "is_general": False, "is_shared": False, "is_ext_shared": False, "is_org_shared": False,
                "is_member": member, "created": created, "creator": creator, "updated": created * 1000,
                "context_team_id": self.team_id, "previous_names": [],
                "topic": {"value": topic or "", "creator": creator if topic else "",
                          "last_set": created if topic else 0},
                "purpose": {"value": purpose or "", "creator": creator if purpose else "",
                            "last_set": created if purpose else 0},
                "num_members": len(self.members.get(id, [])),
            }
            self.channels[id] = channel
            self._messages.setdefault(id, {})
            self._order.setdefault(id, [])
            self._replies.setdefault(id, {})
            return copy.deepcopy(channel)

    def add_user(self, id: str, name: str, **fields: Any) -> dict[str, Any]:
        """A users.list member; `fields` override top-level keys, `profile=` is merged into the profile."""
        real_name = fields.get("real_name", name.title())
        user: dict[str, Any] = {
            "id": id, "team_id": self.team_id, "name": name, "deleted": False, "color": "9f69e7",
            "real_name": real_name, "tz": "Europe/London", "tz_label": "Greenwich Mean Time", "tz_offset": 0,
            "is_admin": False, "is_owner": False, "is_bot": False, "is_app_user": False, "updated": 1_600_000_000,
            "profile": {"real_name": real_name, "real_name_normalized": real_name, "display_name": name,
                        "display_name_normalized": name, "title": "", "email": f"{name}@example.com",
                        "image_72": f"https://avatars.example.com/{id}_72.png", "team": self.team_id},
        }
        profile = fields.pop("profile", {})
        user.update(fields)
        user["profile"].update(profile)
        with self.lock:
            self.users[id] = user
        return copy.deepcopy(user)

    def set_members(self, channel: str, user_ids: Iterable[str]) -> None:
        with self.lock:
            channel_object = self._channel(channel)
            self.members[channel] = list(dict.fromkeys(user_ids))
            channel_object["num_members"] = len(self.members[channel])

    def post(self, channel: str, user: str, text: str, *, ts: str | None = None, thread_ts: str | None = None,
             subtype: str | None = None, files: list[dict[str, Any]] | None = None,
             broadcast: bool = False) -> str:
        """Adds a message (a reply when thread_ts names another message) and returns its ts."""
        with self.lock:
            self._channel(channel)
            key = ts_key(ts) if ts is not None else self._last_ts + _STEP
            if key in self._messages[channel]:
                raise ValueError(f"{channel} already has a message at {ts_str(key)}")
            self._last_ts = max(self._last_ts, key)
            msg: dict[str, Any] = {"type": "message", "user": user, "text": text, "ts": ts_str(key),
                                   "team": self.team_id}
            if broadcast:
                subtype = "thread_broadcast"
            if subtype:
                msg["subtype"] = subtype
            if files:
                msg["files"] = copy.deepcopy(files)
            parent_key = ts_key(thread_ts) if thread_ts is not None else key
            if parent_key != key:
                parent = self._messages[channel].get(parent_key)
                if parent is None or self._is_reply(parent):
                    raise ValueError(f"no thread parent {thread_ts} in {channel}")
                msg["thread_ts"] = parent["ts"]
                msg["parent_user_id"] = parent["user"]
            self._messages[channel][key] = msg
            insort(self._order[channel], key)
            if parent_key != key:
                insort(self._replies[channel].setdefault(parent_key, []), key)
                self._update_parent(channel, parent_key, appended=key)
            return msg["ts"]

    def edit(self, channel: str, ts: str, text: str, *, edited_ts: str | None = None) -> None:
        with self.lock:
            msg = self._message(channel, ts)
            if edited_ts is None:
                self._last_ts += _STEP
                edited_ts = ts_str(self._last_ts)
            msg["text"] = text
            msg["edited"] = {"user": msg["user"], "ts": edited_ts}

    def delete(self, channel: str, ts: str) -> None:
        """Removes a message; a thread parent with replies left becomes a tombstone, as in Slack."""
        with self.lock:
            msg = self._message(channel, ts)
            key = ts_key(ts)
            if self._replies[channel].get(key):
                self._messages[channel][key] = {
                    "type": "message", "subtype": "tombstone", "text": TOMBSTONE_TEXT, "user": "USLACKBOT",
                    "hidden": True, "ts": msg["ts"], "team": self.team_id,
                    **{k: msg[k] for k in ("thread_ts", "reply_count", "reply_users", "reply_users_count",
                                           "latest_reply")},
                }
                return
            self._forget(channel, key)
            if self._is_reply(msg):
                parent_key = ts_key(msg["thread_ts"])
                self._replies[channel][parent_key].remove(key)
                self._update_parent(channel, parent_key)

    def react(self, channel: str, ts: str, name: str, user: str) -> None:
        with self.lock:
            reactions = self._message(channel, ts).setdefault("reactions", [])
            entry = next((r for r in reactions if r["name"] == name), None)
            if entry is None:
                entry = {"name": name, "users": [], "count": 0}
                reactions.append(entry)
            if user not in entry["users"]:
                entry["users"].append(user)
                entry["count"] = len(entry["users"])

    def unreact(self, channel: str, ts: str, name: str, user: str) -> None:
        with self.lock:
            msg = self._message(channel, ts)
            for entry in msg.get("reactions", []):
                if entry["name"] == name and user in entry["users"]:
                    entry["users"].remove(user)
                    entry["count"] = len(entry["users"])
            msg["reactions"] = [r for r in msg.get("reactions", []) if r["users"]]
            if not msg["reactions"]:
                del msg["reactions"]

    def messages(self, channel: str) -> list[dict[str, Any]]:
        """Copies of every message of the channel (replies included), oldest first."""
        with self.lock:
            return [copy.deepcopy(self._messages[channel][k]) for k in self._order.get(channel, [])]

    def message(self, channel: str, ts: str) -> dict[str, Any]:
        with self.lock:
            return copy.deepcopy(self._message(channel, ts))

    # -- faults and counters ---------------------------------------------------------------------------------

    @property
    def force_429_every(self) -> int | None:
        return self._force_429_every

    @force_429_every.setter
    def force_429_every(self, every: int | None) -> None:
        with self.lock:
            self._force_429_every = every
            self._seen_for_429 = 0  # count from now, so tests know exactly which request is refused

    def drop_next(self, method: str, n: int = 1) -> None:
        with self.lock:
            self._drops[method] += n

    def fail_next(self, method: str, n: int = 1, status: int = 500) -> None:
        with self.lock:
            self._fails.setdefault(method, []).extend([status] * n)

    def count(self, method: str | None = None, status: int | None = None) -> int:
        with self.lock:
            return sum(1 for _, m, s in self.requests
                       if (method is None or m == method) and (status is None or s == status))

    def reset_counters(self) -> None:
        """Forgets the request log and the rate-limit windows (between benchmark runs)."""
        with self.lock:
            self.requests.clear()
            self._windows.clear()
            self._seen_for_429 = 0

    # -- internals -------------------------------------------------------------------------------------------

    def _channel(self, channel: str) -> dict[str, Any]:
        if channel not in self.channels:
            raise KeyError(f"unknown channel {channel}")
        return self.channels[channel]

    def _message(self, channel: str, ts: str) -> dict[str, Any]:
        msg = self._messages.get(channel, {}).get(ts_key(ts))
        if msg is None:
            raise KeyError(f"no message {ts} in {channel}")
        return msg

    @staticmethod
    def _is_reply(msg: dict[str, Any]) -> bool:
        return "thread_ts" in msg and msg["thread_ts"] != msg["ts"]

    def _forget(self, channel: str, key: int) -> None:
        del self._messages[channel][key]
        self._order[channel].pop(bisect_left(self._order[channel], key))

    def _update_parent(self, channel: str, parent_key: int, appended: int | None = None) -> None:
        parent = self._messages[channel][parent_key]
        keys = self._replies[channel].get(parent_key, [])
        if not keys:
            self._replies[channel].pop(parent_key, None)
            if parent.get("subtype") == "tombstone":
                self._forget(channel, parent_key)  # Slack drops a tombstone with its last reply
                return
            for field in ("thread_ts", "reply_count", "reply_users", "reply_users_count", "latest_reply"):
                parent.pop(field, None)
            return
        if appended is not None and appended == keys[-1] and "reply_users" in parent:
            users = parent["reply_users"]  # the common case (a newest reply): no need to rescan a long thread
            if self._messages[channel][appended]["user"] not in users:
                users.append(self._messages[channel][appended]["user"])
        else:
            users = list(dict.fromkeys(self._messages[channel][k]["user"] for k in keys))
        parent.update(thread_ts=parent["ts"], reply_count=len(keys), reply_users=users,
                      reply_users_count=len(users), latest_reply=ts_str(keys[-1]))

    def _check_rate(self, token: str, method: str, now: float) -> Reply | None:
        limit = self.rate_per_minute.get(method, self.default_rate_per_minute)
        if limit is None:
            return None
        window = self._windows.setdefault((token, method), deque())
        while window and window[0] <= now - self.window_seconds:
            window.popleft()
        if len(window) >= limit:
            wait = max(1, math.ceil(window[0] + self.window_seconds - now))
            return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(wait)}
        window.append(now)
        return None

    def _need(self, token: str, scope: str) -> None:
        if scope not in self.tokens[token]:
            raise _Fail("missing_scope", needed=scope, provided=",".join(sorted(self.tokens[token])))

    def answer(self, method: str, args: dict[str, Any], token: str | None) -> Reply | None:
        """The answer to one request (None = drop the connection); logged in `requests`."""
        with self.lock:
            now = time.monotonic()
            reply = self._answer(method, args, token, now)
            self.requests.append((now, method, 0 if reply is None else reply[0]))
            return reply

    def _answer(self, method: str, args: dict[str, Any], token: str | None, now: float) -> Reply | None:
        if self._drops[method] > 0:
            self._drops[method] -= 1
            return None
        if self._fails.get(method):
            return self._fails[method].pop(0), {"ok": False, "error": "fatal_error"}, {}
        oauth_reply = self.oauth.intercept(method, args, token)
        if oauth_reply is not None:
            return oauth_reply
        if not token:
            return 200, {"ok": False, "error": "not_authed"}, {}
        if token not in self.tokens:
            return 200, {"ok": False, "error": "invalid_auth"}, {}
        handler = _METHODS.get(method)
        if handler is None:
            return 200, {"ok": False, "error": "unknown_method", "req_method": method}, {}
        if self._force_429_every:
            self._seen_for_429 += 1
            if self._seen_for_429 % self._force_429_every == 0:
                return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(self.retry_after_seconds)}
        limited = self._check_rate(token, method, now)
        if limited is not None:
            return limited
        scopes = {"X-OAuth-Scopes": ",".join(sorted(self.tokens[token]))}
        try:
            return 200, {"ok": True, **handler(self, token, args)}, scopes
        except _Fail as fail:
            return 200, fail.payload, scopes

    # -- methods ---------------------------------------------------------------------------------------------

    def _auth_test(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"url": "https://fake.slack.com/", "team": self.team_name, "user": "chronicle",
                "team_id": self.team_id, "user_id": self.bot_user_id, "bot_id": self.bot_id,
                "is_enterprise_install": False}

    def _visible_channel(self, token: str, args: dict[str, Any], scope: str) -> dict[str, Any]:
        channel = self.channels.get(str(args.get("channel", "")))
        if channel is None:
            raise _Fail("channel_not_found")
        self._need(token, f"groups:{scope}" if channel["is_private"] else f"channels:{scope}")
        if channel["is_private"] and not channel["is_member"]:
            raise _Fail("not_in_channel" if scope == "history" else "channel_not_found")
        return channel

    def _conversations_list(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
        types = {t.strip() for t in str(args.get("types") or "public_channel").split(",") if t.strip()}
        if types - {"public_channel", "private_channel", "im", "mpim"}:
            raise _Fail("invalid_types")
        if "public_channel" in types:
            self._need(token, "channels:read")
        if "private_channel" in types:
            self._need(token, "groups:read")
        chosen = [c for c in self.channels.values()
                  if ("private_channel" if c["is_private"] else "public_channel") in types
                  and (c["is_member"] or not c["is_private"])
                  and not (c["is_archived"] and _flag(args, "exclude_archived"))]
        return self._page(args, "channels", chosen, default=100, most=1000)

    def _conversations_info(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"channel": copy.deepcopy(self._visible_channel(token, args, "read"))}

    def _conversations_members(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._visible_channel(token, args, "read")
        return self._page(args, "members", self.members.get(channel["id"], []), default=100, most=1000)

    def _users_list(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
        self._need(token, "users:read")
        users = list(self.users.values())
        # without a limit Slack answers every user at once
        return self._page(args, "members", users, default=max(1, len(users)), most=1000) | {
            "cache_ts": int(time.time())}

    def _page(self, args: dict[str, Any], field: str, items: list[Any], *, default: int, most: int) -> dict[str, Any]:
        start = _decode_cursor(str(args.get("cursor") or ""), "offset") or 0
        if start > len(items):
            raise _Fail("invalid_cursor")
        end = start + _limit(args, default, most)
        return {field: copy.deepcopy(items[start:end]),
                "response_metadata": {"next_cursor": _encode_cursor("offset", end) if end < len(items) else ""}}

    def _bounds(self, args: dict[str, Any]) -> tuple[int, int]:
        """(lowest, highest) keys allowed by oldest/latest/inclusive, both inclusive."""
        inclusive = _flag(args, "inclusive")
        try:
            oldest = ts_key(args.get("oldest") or 0)
        except ValueError:
            raise _Fail("invalid_ts_oldest") from None
        try:
            latest = ts_key(args["latest"]) if args.get("latest") else int(time.time() * 1_000_000)
        except ValueError:
            raise _Fail("invalid_ts_latest") from None
        return (oldest if inclusive else oldest + 1), (latest if inclusive else latest - 1)

    def _conversations_history(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._visible_channel(token, args, "history")["id"]
        lowest, highest = self._bounds(args)
        cursor = _decode_cursor(str(args.get("cursor") or ""), "next_ts")
        if cursor is not None:
            highest = min(highest, cursor)
        limit = _limit(args, 100, 999)
        order, stored = self._order[channel], self._messages[channel]
        found: list[dict[str, Any]] = []
        i = bisect_right(order, highest) - 1
        while i >= 0 and order[i] >= lowest and len(found) <= limit:  # one extra tells has_more
            msg = stored[order[i]]
            if not self._is_reply(msg) or msg.get("subtype") == "thread_broadcast":
                found.append(msg)
            i -= 1
        has_more = len(found) > limit
        next_cursor = _encode_cursor("next_ts", ts_key(found[limit]["ts"])) if has_more else ""
        return {"messages": copy.deepcopy(found[:limit]), "has_more": has_more, "pin_count": 0,
                "channel_actions_ts": None, "channel_actions_count": 0,
                "response_metadata": {"next_cursor": next_cursor}}

    def _conversations_replies(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._visible_channel(token, args, "history")["id"]
        try:
            msg = self._messages[channel].get(ts_key(args.get("ts") or ""))
        except ValueError:
            msg = None
        if msg is None:
            raise _Fail("thread_not_found")
        parent_key = ts_key(msg.get("thread_ts", msg["ts"]))
        parent = self._messages[channel][parent_key]
        lowest, highest = self._bounds(args)
        cursor = _decode_cursor(str(args.get("cursor") or ""), "next_ts")
        if cursor is not None:
            lowest = max(lowest, cursor)
        limit = _limit(args, 100, 1000)
        keys = self._replies[channel].get(parent_key, [])
        start, stop = bisect_left(keys, lowest), bisect_right(keys, highest)
        page = keys[start:min(stop, start + limit)]
        has_more = start + limit < stop
        next_cursor = _encode_cursor("next_ts", keys[start + limit]) if has_more else ""
        found = [parent] + [self._messages[channel][k] for k in page]
        return {"messages": copy.deepcopy(found), "has_more": has_more,
                "response_metadata": {"next_cursor": next_cursor}}

    def _chat_post_message(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
        self._need(token, "chat:write")
        target = args.get("channel")
        if not isinstance(target, str) or not target:
            raise _Fail("channel_not_found")
        name = target.lstrip("#")
        channel = next((c["id"] for c in self.channels.values() if c["id"] == target or c["name"] == name), None)
        if channel is None and target in self.users:
            channel = "D" + target[1:]  # the app's DM with that user
        if channel is None:
            raise _Fail("channel_not_found")
        blocks = args.get("blocks")
        if isinstance(blocks, str):
            try:
                blocks = json.loads(blocks)
            except ValueError:
                raise _Fail("invalid_blocks_format") from None
        text = args.get("text")
        if not blocks and not text:
            raise _Fail("no_text")
        if blocks is not None:
            _check_blocks(blocks)
        self._last_ts += _STEP
        post = {"channel": channel, "ts": ts_str(self._last_ts), "text": text, "blocks": blocks}
        self.posted.append(post)
        return {"channel": channel, "ts": post["ts"], "message": {"type": "message", "text": text, "blocks": blocks,
                                                                  "bot_id": self.bot_id}}


def _check_blocks(blocks: Any) -> None:
    """Block Kit's limits as chat.postMessage enforces them."""
    if not isinstance(blocks, list) or len(blocks) > MAX_BLOCKS:
        raise _Fail("invalid_blocks", errors=[f"must be a list of at most {MAX_BLOCKS} blocks"])
    for i, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "header":
            text = block.get("text", {})
            if text.get("type") != "plain_text" or not 0 < len(text.get("text", "")) <= MAX_HEADER_TEXT:
                raise _Fail("invalid_blocks", errors=[f"header text at [{i}]"])
        elif kind == "section":
            text, fields = block.get("text"), block.get("fields")
            if text is None and not fields:
                raise _Fail("invalid_blocks", errors=[f"section at [{i}] needs text or fields"])
            if text is not None and not 0 < len(text.get("text", "")) <= MAX_SECTION_TEXT:
                raise _Fail("invalid_blocks", errors=[f"section text at [{i}] over {MAX_SECTION_TEXT}"])
            if fields is not None and (len(fields) > MAX_SECTION_FIELDS or any(
                    not 0 < len(f.get("text", "")) <= MAX_FIELD_TEXT for f in fields)):
                raise _Fail("invalid_blocks", errors=[f"section fields at [{i}]"])
        elif kind == "context":
            if not 0 < len(block.get("elements", [])) <= 10:
                raise _Fail("invalid_blocks", errors=[f"context at [{i}]"])
        elif kind != "divider":
            raise _Fail("invalid_blocks", errors=[f"unsupported block type at [{i}]: {kind}"])


def _apps_connections_open(fake: FakeSlackWebApi, token: str, args: dict[str, Any]) -> dict[str, Any]:
    if not token.startswith("xapp-"):
        raise _Fail("not_allowed_token_type")
    fake._need(token, "connections:write")
    if fake.socket_mode is None:
        raise _Fail("socket_mode_not_enabled")  # no stand-in WebSocket server attached
    return {"url": fake.socket_mode.ticket_url()}


_METHODS = {
    "auth.test": FakeSlackWebApi._auth_test,
    "conversations.list": FakeSlackWebApi._conversations_list,
    "conversations.info": FakeSlackWebApi._conversations_info,
    "conversations.members": FakeSlackWebApi._conversations_members,
    "conversations.history": FakeSlackWebApi._conversations_history,
    "conversations.replies": FakeSlackWebApi._conversations_replies,
    "users.list": FakeSlackWebApi._users_list,
    "chat.postMessage": FakeSlackWebApi._chat_post_message,
    "apps.connections.open": _apps_connections_open,
}


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # a benchmark opens many connections at once (urllib never reuses one)
    fake: FakeSlackWebApi


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive for clients that want it (slack_sdk's urllib sends Connection: close)
    timeout = 30  # an idle keep-alive connection must not pin a thread forever
    server: _Server

    def do_POST(self) -> None:
        parts = urlsplit(self.path)
        args: dict[str, Any] = dict(parse_qsl(parts.query, keep_blank_values=True))
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        ctype = (self.headers.get("Content-Type") or "").lower()
        if body and ctype.startswith("application/json"):
            # slack_sdk labels even empty bodies as JSON; only a real one is parsed
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
            args.update(parsed if isinstance(parsed, dict) else {})
        elif body and ctype.startswith("application/x-www-form-urlencoded"):
            args.update(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        auth = self.headers.get("Authorization") or ""
        token = auth[len("Bearer "):].strip() if auth.startswith("Bearer ") else args.get("token")
        if auth.startswith("Basic "):  # oauth.v2.access: client credentials (slack_oauth.py)
            client_id, _, secret = base64.b64decode(auth[6:]).decode("utf-8", "replace").partition(":")
            args.setdefault("client_id", client_id)
            args.setdefault("client_secret", secret)
        method = parts.path[len("/api/"):] if parts.path.startswith("/api/") else parts.path.lstrip("/")
        fake = self.server.fake
        reply = fake.answer(method, args, token)
        if fake.latency_seconds:
            time.sleep(fake.latency_seconds)
        if reply is None:
            self.close_connection = True  # no answer at all: the client sees RemoteDisconnected
            return
        status, payload, headers = reply
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path != "/oauth/v2/authorize":
            return self.do_POST()
        status, page = self.server.fake.oauth.authorize_page(dict(parse_qsl(parts.query)))
        data = page.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet
