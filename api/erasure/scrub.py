"""What stays of another person's data once it no longer names the erased one: their id replaced by Slack's
placeholder user, their mentions read as a neutral name, and lists of people (a channel's members, a
reaction's users) without them. Pure functions over text and Slack JSON."""

from __future__ import annotations

import re
from typing import Any

PLACEHOLDER_USER = "USLACKBOT"  # whom Slack's own tombstones name
NEUTRAL_NAME = "former member"  # what a mention of an erased person reads as


def _mention(user_id: str) -> re.Pattern[str]:
    # <@U123>, <@U123|label>: Slack's user mention markup
    return re.compile(rf"<@{re.escape(user_id)}(\|[^>]*)?>")


def text(value: str | None, user_id: str) -> str | None:
    """A text with every mention of the person (markup, or their bare id) replaced by the neutral name."""
    if value is None:
        return None
    out = _mention(user_id).sub(f"@{NEUTRAL_NAME}", value)
    return out.replace(user_id, PLACEHOLDER_USER) if user_id in out else out


def names(value: str | None, user_id: str) -> bool:
    return value is not None and user_id in value


def json_value(value: Any, user_id: str) -> Any:
    """Slack JSON without the person: lists lose elements that are the person's id (members, reaction users),
    a reaction whose only user was the person goes, strings are scrubbed as `text`."""
    if isinstance(value, dict):
        out = {k: json_value(v, user_id) for k, v in value.items()}
        if "users" in value and isinstance(value.get("users"), list) and "count" in value:  # a reaction
            out["count"] = len(out["users"])
        return out
    if isinstance(value, list):
        kept = [json_value(v, user_id) for v in value if v != user_id]
        return [v for v in kept if not (isinstance(v, dict) and "users" in v and "count" in v and not v["users"])]
    if isinstance(value, str):
        return text(value, user_id)
    return value


def json_names(value: Any, user_id: str) -> bool:
    if isinstance(value, dict):
        return any(json_names(k, user_id) or json_names(v, user_id) for k, v in value.items())
    if isinstance(value, list):
        return any(json_names(v, user_id) for v in value)
    return isinstance(value, str) and user_id in value
