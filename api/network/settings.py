"""The follower network's settings in force: `Settings.network` (api/config.py reads CHRONICLE_NETWORK_*,
each listed in docs/configuration.md) of the process's Database; tests and benchmarks replace them there."""

from __future__ import annotations

from api.config import NetworkSettings
from api.db import get_db, replace_settings

__all__ = ["NetworkSettings", "network_settings", "set_network_settings"]


def network_settings() -> NetworkSettings:
    """The settings of the process's Database (the app factory, the CLI root or a test installed it)."""
    return get_db().settings.network


def set_network_settings(settings: NetworkSettings | None) -> None:
    """Replace the installed Database's network settings (None: those of the environment again)."""
    replace_settings(network=settings or NetworkSettings.from_env())
