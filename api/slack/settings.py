"""Slack-specific settings the foundation's Settings does not carry: bot tokens, object storage, file worker.

Every variable, its default and meaning is listed in docs/slack.md.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from urllib.parse import urlsplit

from api.config import env, parse_mapping, state_dir

# Where Slack serves url_private (files.slack.com/files-pri/...; GovSlack: files.slack-gov.com) and the hosts it
# may redirect a download to (files-*.slack.com, *.slack-edge.com). `*` is one DNS label. The bot token is sent
# to these hosts only, over HTTPS (plain HTTP only to a loopback address: the tests' stand-in file host).
DEFAULT_FILE_HOSTS = ("files.slack.com", "files-*.slack.com", "*.slack-edge.com", "files.slack-gov.com")


@dataclasses.dataclass(frozen=True)
class SlackSettings:
    # Bot tokens used to download url_private: one per workspace (T1=xoxb-...,T2=...) and/or a shared one.
    bot_tokens: dict[str, str]
    bot_token: str
    # The Web API (backfill): Slack's own, or a stand-in on loopback in tests.
    api_url: str
    # Reports (issue 10): where the workspace report is posted; users who opted in to a personal DM.
    report_channel: str
    report_dm_users: tuple[str, ...]
    # Object storage: local directory by default, S3 (or any S3-compatible store) when a bucket is set.
    files_root: str
    s3_bucket: str
    s3_endpoint: str
    s3_region: str
    s3_prefix_uri: str
    # File worker knobs.
    max_attempts: int
    backoff_seconds: float
    backoff_max_seconds: float
    download_timeout: float
    max_file_bytes: int
    batch_size: int
    concurrency: int
    # Hosts the file worker downloads from (and sends the bot token to): `host` or `host:port`, `*` = one label.
    file_hosts: tuple[str, ...] = DEFAULT_FILE_HOSTS

    @classmethod
    def from_env(cls) -> SlackSettings:
        return cls(
            bot_tokens=parse_mapping(env("CHRONICLE_SLACK_BOT_TOKENS", "")),
            bot_token=env("CHRONICLE_SLACK_BOT_TOKEN", ""),
            api_url=env("CHRONICLE_SLACK_API_URL", "https://slack.com/api/"),
            report_channel=env("CHRONICLE_SLACK_REPORT_CHANNEL", "chronicle-stats"),
            report_dm_users=tuple(u for u in env("CHRONICLE_SLACK_REPORT_DM_USERS", "").replace(" ", "").split(",")
                                  if u),
            files_root=env("CHRONICLE_FILES_ROOT", str(state_dir() / "slack-files")),
            s3_bucket=env("CHRONICLE_FILES_S3_BUCKET", ""),
            s3_endpoint=env("CHRONICLE_FILES_S3_ENDPOINT", ""),
            s3_region=env("CHRONICLE_FILES_S3_REGION", "us-east-1"),
            s3_prefix_uri=env("CHRONICLE_FILES_S3_URI_SCHEME", "s3"),
            max_attempts=int(env("CHRONICLE_FILES_MAX_ATTEMPTS", "5")),
            backoff_seconds=float(env("CHRONICLE_FILES_BACKOFF_SECONDS", "2")),
            backoff_max_seconds=float(env("CHRONICLE_FILES_BACKOFF_MAX_SECONDS", "600")),
            download_timeout=float(env("CHRONICLE_FILES_TIMEOUT", "30")),
            max_file_bytes=int(env("CHRONICLE_FILES_MAX_BYTES", str(1024 * 1024 * 1024))),
            batch_size=int(env("CHRONICLE_FILES_BATCH", "100")),
            concurrency=int(env("CHRONICLE_FILES_CONCURRENCY", "16")),
            file_hosts=tuple(h.strip().lower() for h in env("CHRONICLE_SLACK_FILE_HOSTS", "").split(",")
                             if h.strip()) or DEFAULT_FILE_HOSTS,
        )

    def file_host_refusal(self, url: str) -> str | None:
        """Why the bot token must not be sent to `url` (None: one of Slack's file hosts, `file_hosts`)."""
        return file_host_refusal(url, self.file_hosts)

    def token_for(self, team_id: str) -> str:
        return self.bot_tokens.get(team_id) or self.bot_token


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
