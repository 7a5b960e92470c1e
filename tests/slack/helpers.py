"""Plain helpers of the Slack tests: signed Events API requests, event builders (shapes as documented by
Slack) and small reads. Fixtures live in conftest.py."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from typing import Any

EVENTS_PATH = "/slack/events"  # the default CHRONICLE_SLACK_EVENTS_PATH
SHARED_SECRET = "shared-test-secret"
TEAM_SECRETS = {"T2": "t2-secret"}
ALL = {"Authorization": "Bearer token-all"}
T1_ONLY = {"Authorization": "Bearer token-t1"}

_event_ids = itertools.count(1)


def sign(body: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """Slack's v0 signature, computed here independently of slack_sdk."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}",
            "Content-Type": "application/json"}


def envelope(team: str, event: dict[str, Any], *, event_id: str | None = None,
             event_time: int | None = None) -> dict[str, Any]:
    ets = event.get("event_ts") or event.get("ts") or "1700000000.000000"
    return {"type": "event_callback", "team_id": team, "api_app_id": "A1",
            "event_id": event_id or f"Ev{next(_event_ids):08d}",
            "event_time": event_time or _seconds(ets), "event": event}


def _seconds(ts: str) -> int:
    try:
        return int(float(ts))
    except ValueError:
        return 1700000000


def post_event(client, team: str, event: dict[str, Any], **kw: Any):
    body = json.dumps(envelope(team, event, **kw)).encode()
    secret = TEAM_SECRETS.get(team, SHARED_SECRET)
    return client.post(EVENTS_PATH, data=body, headers=sign(body, secret))


def post_envelope(client, env: dict[str, Any], secret: str | None = None, headers: dict | None = None):
    body = json.dumps(env).encode()
    signed = sign(body, secret or TEAM_SECRETS.get(env.get("team_id"), SHARED_SECRET))
    return client.post(EVENTS_PATH, data=body, headers={**signed, **(headers or {})})


# -- event builders (shapes as documented by Slack) ------------------------------------------------------

def msg(channel: str, ts: str, text: str, user: str = "U1", **extra: Any) -> dict[str, Any]:
    return {"type": "message", "channel": channel, "channel_type": "channel", "user": user, "text": text,
            "ts": ts, "event_ts": ts, **extra}


def edit(channel: str, ts: str, new_text: str, old_text: str, at: str, user: str = "U1",
         prev_edited: str | None = None, **extra: Any) -> dict[str, Any]:
    prev = {"type": "message", "user": user, "text": old_text, "ts": ts}
    if prev_edited:
        prev["edited"] = {"user": user, "ts": prev_edited}
    return {"type": "message", "subtype": "message_changed", "channel": channel, "channel_type": "channel",
            "hidden": True, "ts": at, "event_ts": at,
            "message": {"type": "message", "user": user, "text": new_text, "ts": ts,
                        "edited": {"user": user, "ts": at}, **extra},
            "previous_message": prev}


def delete(channel: str, ts: str, at: str, thread_ts: str | None = None) -> dict[str, Any]:
    previous = {"type": "message", "user": "U1", "text": "x", "ts": ts}
    if thread_ts is not None:
        previous["thread_ts"] = thread_ts
    return {"type": "message", "subtype": "message_deleted", "channel": channel, "channel_type": "channel",
            "hidden": True, "ts": at, "event_ts": at, "deleted_ts": ts, "previous_message": previous}


def reaction(kind: str, channel: str, ts: str, emoji: str, user: str, at: str) -> dict[str, Any]:
    return {"type": f"reaction_{kind}", "user": user, "reaction": emoji, "item_user": "U1",
            "item": {"type": "message", "channel": channel, "ts": ts}, "event_ts": at}


def channel_event(kind: str, channel: str, at: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "channel": channel, "event_ts": at, **extra}


def created(channel: str, name: str, at: str) -> dict[str, Any]:
    return {"type": "channel_created", "event_ts": at,
            "channel": {"id": channel, "name": name, "created": int(float(at)), "creator": "U1"}}


def rename(channel: str, name: str, at: str) -> dict[str, Any]:
    return {"type": "channel_rename", "event_ts": at,
            "channel": {"id": channel, "name": name, "created": 1600000000}}


# -- reads --------------------------------------------------------------------------------------------------

def workspace_get(client, team: str, path: str, **params: Any) -> Any:
    """GET /slack/teams/{team}{path} (asserting 200), with the team id masked: the only thing allowed to differ
    between workspaces that replay the same scenario."""
    r = client.get(f"/slack/teams/{team}{path}", headers=ALL, query_string=params)
    assert r.status_code == 200, (path, r.json)
    body = r.json
    if isinstance(body, dict) and body.get("team_id") == team:
        body["team_id"] = "<team>"
    return body


def timeline(client, team: str, channel: str, **params: Any) -> list[dict[str, Any]]:
    """The first page of a channel's timeline (asserting 200)."""
    r = client.get(f"/slack/teams/{team}/channels/{channel}/messages", headers=ALL, query_string=params)
    assert r.status_code == 200, r.json
    return r.json["messages"]
