"""Activity days' settings in force: `Settings.activity` (api/config.py reads CHRONICLE_ACTIVITY_DELAY and
CHRONICLE_ACTIVITY_BATCH) of the process's Database.

The follower network's days are cut in CHRONICLE_NETWORK_TIME_ZONE (`Settings.network`); a Slack user's in
their own time zone from the users table (UTC when unknown).
"""

from __future__ import annotations

from api.config import ActivitySettings
from api.db import get_db, replace_settings

__all__ = ["ActivitySettings", "activity_settings", "set_activity_settings"]


def activity_settings() -> ActivitySettings:
    """The settings of the process's Database."""
    return get_db().settings.activity


def set_activity_settings(settings: ActivitySettings | None) -> None:
    """Replace the installed Database's activity settings (None: those of the environment again)."""
    replace_settings(activity=settings or ActivitySettings.from_env())
