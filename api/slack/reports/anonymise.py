"""Stable fake names for sharing a report outside the workspace (seed 000's make_fake).

The same id gets the same fake in every report of a workspace (a keyed hash of team and id), so week-on-week
comparisons still read; ids are replaced too, and links into the workspace (ref, permalink) are dropped.
"""

from __future__ import annotations

import hashlib
from typing import Any

_ADJECTIVES = ("amber", "brave", "calm", "deft", "eager", "fair", "gentle", "hardy", "idle", "jolly", "keen",
               "lively", "merry", "noble", "odd", "plain", "quick", "rapid", "sly", "tidy", "upbeat", "vivid",
               "warm", "young", "zesty", "bold", "crisp", "dusky", "early", "fond", "grand", "humble")
_NOUNS = ("otter", "heron", "lynx", "marten", "finch", "badger", "cedar", "fjord", "glade", "harbor", "island",
          "juniper", "kestrel", "lagoon", "meadow", "nettle", "oriole", "pine", "quail", "raven", "sparrow",
          "thistle", "upland", "valley", "willow", "yarrow", "zephyr", "aspen", "brook", "cliff", "dune", "ember")
_USER_KEYS = ("user", "from", "to")
_DROPPED = ("ref", "permalink")


def _digest(team_id: str, kind: str, value: str) -> bytes:
    return hashlib.sha256(f"{team_id}\x00{kind}\x00{value}".encode()).digest()


def fake_name(team_id: str, kind: str, value: str) -> str:
    """e.g. `brave-otter-17` (users) or `channel-meadow-42` (channels): stable per workspace and id."""
    d = _digest(team_id, kind, value)
    number = int.from_bytes(d[2:4], "big") % 100
    if kind == "channel":
        return f"channel-{_NOUNS[d[0] % len(_NOUNS)]}-{number}"
    return f"{_ADJECTIVES[d[0] % len(_ADJECTIVES)]}-{_NOUNS[d[1] % len(_NOUNS)]}-{number}"


def fake_id(team_id: str, kind: str, value: str) -> str:
    prefix = "C" if kind == "channel" else "U"
    return prefix + _digest(team_id, kind, value).hex()[:10].upper()


def anonymise(document: dict[str, Any]) -> dict[str, Any]:
    """A copy of the report with every user and channel id and name replaced by its stable fake."""
    team = document.get("team_id", "")

    def user(value: str) -> str:
        return fake_id(team, "user", value)

    def channel(value: str) -> str:
        return fake_id(team, "channel", value)

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                if key in _DROPPED:
                    continue
                if key in _USER_KEYS and isinstance(item, str):
                    out[key] = user(item)
                elif key == "channel" and isinstance(item, str):
                    out[key] = channel(item)
                else:
                    out[key] = walk(item)
            return out
        if isinstance(value, list):
            return [walk(item) for item in value]
        return value

    names = document.get("names", {})
    out = walk({k: v for k, v in document.items() if k != "names"})
    for entry in out.get("channels", []):  # the per-channel users table: [user, counts...]
        entry["users"] = [[user(row[0]), *row[1:]] for row in entry.get("users", [])]
    out["names"] = {
        "users": {user(u): fake_name(team, "user", u) for u in names.get("users", {})},
        "channels": {channel(c): fake_name(team, "channel", c) for c in names.get("channels", {})},
    }
    out["anonymised"] = True
    return out
