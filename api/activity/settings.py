"""Settings of activity days, from CHRONICLE_ACTIVITY_* environment variables.

| variable | default | meaning |
|---|---|---|
| CHRONICLE_ACTIVITY_DELAY | 60 | seconds within which the worker rebuilds a day that live ingest changed |
| CHRONICLE_ACTIVITY_BATCH | 500 | dirty marks the worker takes per pass |

The follower network's days are cut in CHRONICLE_NETWORK_TIME_ZONE (api/network/settings.py); a Slack user's in
their own time zone from the users table (UTC when unknown).
"""

from __future__ import annotations

import dataclasses

from api.config import env


@dataclasses.dataclass(frozen=True)
class ActivitySettings:
    delay_seconds: float = 60.0
    batch: int = 500

    @classmethod
    def from_env(cls) -> ActivitySettings:
        delay = float(env("CHRONICLE_ACTIVITY_DELAY", "60"))
        if not 1 <= delay <= 86_400:
            raise ValueError(f"CHRONICLE_ACTIVITY_DELAY must be 1..86400 seconds, not {delay}")
        return cls(delay_seconds=delay, batch=int(env("CHRONICLE_ACTIVITY_BATCH", "500")))


_override: ActivitySettings | None = None
_from_env: ActivitySettings | None = None


def activity_settings() -> ActivitySettings:
    """The settings in force: an override (tests) or the environment, read once per process."""
    global _from_env
    if _override is not None:
        return _override
    if _from_env is None:
        _from_env = ActivitySettings.from_env()
    return _from_env


def set_activity_settings(settings: ActivitySettings | None) -> None:
    """Tests replace the settings of this process."""
    global _override
    _override = settings
