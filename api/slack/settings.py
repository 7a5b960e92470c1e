"""Slack's settings (read with every other setting by api/config.py, as `Settings.slack`) and the check of
the hosts a bot token may be sent to.

Every variable, its default and meaning is listed in docs/slack.md.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from api.config import DEFAULT_FILE_HOSTS, SlackSettings

__all__ = ["DEFAULT_FILE_HOSTS", "SlackSettings", "file_host_refusal"]


def _host_pattern(entry: str) -> re.Pattern[str]:
    return re.compile("".join("[a-z0-9-]+" if part == "*" else re.escape(part) for part in re.split(r"(\*)", entry))
                      + r"\Z")


def file_host_refusal(url: str, allowed: tuple[str, ...]) -> str | None:
    """None when `url` is https (or http to a loopback address) on a host of `allowed` (`host` matches any
    port, `host:port` only that one); otherwise why not, naming the host."""
    try:
        parts = urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        return "not a valid URL"
    if parts.scheme not in ("https", "http") or not host:
        return f"not an http(s) URL ({parts.scheme or 'no scheme'})"
    if parts.username is not None or parts.password is not None:
        return f"the URL names credentials for host {host!r}"
    if parts.scheme == "http" and not _loopback(host):
        return f"plain http to host {host!r} (only https is allowed)"
    with_port = f"{host}:{port}" if port is not None else host
    for entry in allowed:
        if _host_pattern(entry).match(with_port if ":" in entry else host):
            return None
    return f"host {with_port!r} is not one of Slack's file hosts (CHRONICLE_SLACK_FILE_HOSTS)"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
