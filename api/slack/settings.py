"""Slack-specific settings the foundation's Settings does not carry: bot tokens, object storage, file worker.

Every variable, its default and meaning is listed in docs/slack.md.
"""

from __future__ import annotations

import dataclasses

from api.config import env, parse_mapping, state_dir


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
        )

    def token_for(self, team_id: str) -> str:
        return self.bot_tokens.get(team_id) or self.bot_token
