"""An experiment of bench/viewer.py (`--what-if names,channels`), not a change of the app: gunicorn serves
api.wsgi's app with the archive pages' lookups of names cached per process, to measure what such a cache would buy
before anyone writes it in api/viewer/views.py.

CHRONICLE_BENCH_WHATIF (comma-separated) picks what is cached, each entry for CACHE_SECONDS:
- `names`: views.user_profiles (the profiles of a page's users, one read per user);
- `channels`: views.channel_names (the workspace's channel index, one partition read per page).

    gunicorn -c gunicorn.conf.py bench.viewer_whatif:app
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from typing import Any

from api.db import Database
from api.viewer import views
from api.wsgi import app

CACHE_SECONDS = 60.0
_lock = threading.Lock()
_profiles: dict[tuple[str, str, str], tuple[float, Any]] = {}
_channels: dict[tuple[str, str, bool], tuple[float, dict[str, str]]] = {}
_read_profiles = views.user_profiles
_read_channels = views.channel_names


def cached_profiles(db: Database, team_id: str, user_ids: Iterable[str]) -> dict[str, dict[str, Any] | None]:
    now = time.monotonic()
    out: dict[str, dict[str, Any] | None] = {}
    missing = []
    for user_id in {u for u in user_ids if u}:
        hit = _profiles.get((db.keyspace, team_id, user_id))
        if hit is not None and hit[0] > now:
            out[user_id] = hit[1]
        else:
            missing.append(user_id)
    if missing:
        found = _read_profiles(db, team_id, missing)
        with _lock:
            for user_id, profile in found.items():
                _profiles[(db.keyspace, team_id, user_id)] = (now + CACHE_SECONDS, profile)
        out.update(found)
    return out


def cached_channel_names(db: Database, team_id: str, *, include_private: bool) -> dict[str, str]:
    now = time.monotonic()
    key = (db.keyspace, team_id, include_private)
    hit = _channels.get(key)
    if hit is not None and hit[0] > now:
        return hit[1]
    names = _read_channels(db, team_id, include_private=include_private)
    with _lock:
        _channels[key] = (now + CACHE_SECONDS, names)
    return names


_WANTED = {w.strip() for w in os.environ.get("CHRONICLE_BENCH_WHATIF", "").split(",") if w.strip()}
if "names" in _WANTED:
    views.user_profiles = cached_profiles
if "channels" in _WANTED:
    views.channel_names = cached_channel_names

__all__ = ["app"]
