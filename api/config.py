"""Settings from environment variables. Every variable, its default and meaning is listed in README."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import secrets
from pathlib import Path

from cassandra import ConsistencyLevel

PROJECT_ROOT = Path(__file__).resolve().parents[1]

# CHRONICLE_ENV=development (set by `bash bootstrap.sh serve` and the test suite) lets the service start without
# real secrets; any other value is production, where Settings.validate() refuses missing or published ones.
DEVELOPMENT = "development"
# Values that were ever published as development defaults (README, bootstrap.sh, compose): refused as secrets.
_PUBLISHED_SECRETS = frozenset({
    "dev-cursor-secret-change-me", "dev-token", "dev-admin-token", "dev-signing-secret",  # development defaults
    "change-me", "changeme", "secret", "test",  # placeholders: refused outside development
})
MIN_SECRET_CHARS = 16  # a shorter cursor secret or admin token is refused outside development


class ConfigError(ValueError):
    """A setting the service refuses to start with; the message names the variable and says what to do."""


def env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _consistency(name: str, default: str) -> int:
    value = env(name, default).upper()
    try:
        return ConsistencyLevel.name_to_value[value]
    except KeyError:
        raise ValueError(f"{name}={value!r} is not a Cassandra consistency level") from None


def _csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def parse_mapping(value: str) -> dict[str, str]:
    """`A=x,B=y` -> {"A": "x", "B": "y"}."""
    out = {}
    for item in _csv(value):
        key, sep, val = item.partition("=")
        if not sep:
            raise ValueError(f"expected KEY=VALUE, got {item!r}")
        out[key.strip()] = val.strip()
    return out


@dataclasses.dataclass(frozen=True)
class Settings:
    contact_points: list[str]
    cassandra_port: int
    keyspace: str
    local_dc: str
    replication: str
    read_consistency: int
    write_consistency: int
    request_timeout: float
    connect_timeout: float
    cursor_secret: bytes
    max_body_bytes: int
    log_level: str
    # Slack ingest: one signing secret per workspace (team_id=secret,...) and/or one shared secret.
    slack_signing_secrets: dict[str, str]
    slack_signing_secret: str
    slack_events_path: str
    slack_keep_raw_events: bool
    # API tokens for read endpoints: token=team1|team2[+private],...
    api_tokens: str
    admin_token: str
    # The driver: protocol v4 (v5 frames every message in segments checksummed in pure Python, about 12% of a
    # timeline page's CPU); a second replica asked after this delay when the first is slow (idempotent
    # statements only: a frozen node then costs this delay, not the request timeout).
    protocol_version: int = 4
    speculative_delay: float = 0.1
    speculative_attempts: int = 2
    # CHRONICLE_ENV: "development" relaxes the secret checks of validate(); anything else is production.
    environment: str = "production"

    @property
    def development(self) -> bool:
        return self.environment == DEVELOPMENT

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            contact_points=_csv(env("CHRONICLE_CASSANDRA_HOSTS", "127.0.0.1")),
            cassandra_port=int(env("CHRONICLE_CASSANDRA_PORT", "9042")),
            keyspace=env("CHRONICLE_KEYSPACE", "chronicle"),
            local_dc=env("CHRONICLE_LOCAL_DC", "datacenter1"),
            replication=env("CHRONICLE_REPLICATION", "SimpleStrategy:1"),
            read_consistency=_consistency("CHRONICLE_READ_CONSISTENCY", "LOCAL_ONE"),
            write_consistency=_consistency("CHRONICLE_WRITE_CONSISTENCY", "LOCAL_QUORUM"),
            request_timeout=float(env("CHRONICLE_REQUEST_TIMEOUT", "2.0")),
            connect_timeout=float(env("CHRONICLE_CONNECT_TIMEOUT", "2.0")),
            cursor_secret=_cursor_secret(env("CHRONICLE_CURSOR_SECRET", ""), env("CHRONICLE_ENV", "")),
            max_body_bytes=int(env("CHRONICLE_MAX_BODY_BYTES", str(1024 * 1024))),
            log_level=env("CHRONICLE_LOG_LEVEL", "INFO"),
            slack_signing_secrets=parse_mapping(env("CHRONICLE_SLACK_SIGNING_SECRETS", "")),
            slack_signing_secret=env("CHRONICLE_SLACK_SIGNING_SECRET", ""),
            slack_events_path=env("CHRONICLE_SLACK_EVENTS_PATH", "/slack/events"),
            slack_keep_raw_events=env("CHRONICLE_SLACK_KEEP_RAW", "true").lower() in ("1", "true", "yes"),
            api_tokens=env("CHRONICLE_API_TOKENS", ""),
            admin_token=env("CHRONICLE_ADMIN_TOKEN", ""),
            protocol_version=int(env("CHRONICLE_PROTOCOL_VERSION", "4")),
            speculative_delay=float(env("CHRONICLE_SPECULATIVE_DELAY", "0.1")),
            speculative_attempts=int(env("CHRONICLE_SPECULATIVE_ATTEMPTS", "2")),
            environment=env("CHRONICLE_ENV", "production").strip().lower() or "production",
        )

    def validate(self) -> Settings:
        """Refuse to serve with settings that would be unsafe or fail later: called once when the app is created
        (gunicorn's master also calls it before forking, so a bad value stops the start, not a request). Outside
        development every secret must be set, not a published default, and long enough; CHRONICLE_API_TOKENS
        must be valid JSON in every mode. Raises ConfigError naming the variable."""
        api_token_grants(self.api_tokens)
        if self.development:
            return self
        problems = []
        cursor = self.cursor_secret.decode("utf-8", "replace")
        problems += _secret_problems("CHRONICLE_CURSOR_SECRET", cursor)
        problems += _secret_problems("CHRONICLE_ADMIN_TOKEN", self.admin_token)
        if not self.slack_signing_secret and not self.slack_signing_secrets:
            problems.append("CHRONICLE_SLACK_SIGNING_SECRET (or CHRONICLE_SLACK_SIGNING_SECRETS) is empty: set the "
                            "Slack app's signing secret")
        if self.slack_signing_secret:
            problems += _secret_problems("CHRONICLE_SLACK_SIGNING_SECRET", self.slack_signing_secret, min_chars=1)
        for team, secret in self.slack_signing_secrets.items():
            problems += _secret_problems(f"CHRONICLE_SLACK_SIGNING_SECRETS ({team})", secret, min_chars=1)
        for token in api_token_grants(self.api_tokens):
            if token in _PUBLISHED_SECRETS:
                problems.append(f"CHRONICLE_API_TOKENS holds the published token {token!r}: generate a new one")
        if problems:
            raise ConfigError("refusing to start outside development (CHRONICLE_ENV=development): "
                              + "; ".join(problems) + ". See docs/deployment.md#secrets")
        return self

    def replication_map(self) -> dict[str, object]:
        """`SimpleStrategy:1` or `NetworkTopologyStrategy:dc1:3[,dc2:3]` -> CQL replication map."""
        strategy, _, rest = self.replication.partition(":")
        if strategy == "SimpleStrategy":
            return {"class": "SimpleStrategy", "replication_factor": int(rest or "1")}
        if strategy == "NetworkTopologyStrategy":
            out: dict[str, object] = {"class": "NetworkTopologyStrategy"}
            for item in _csv(rest):
                dc, _, rf = item.rpartition(":")
                out[dc or self.local_dc] = int(rf)
            return out
        raise ValueError(f"CHRONICLE_REPLICATION={self.replication!r}: use SimpleStrategy:N or "
                         "NetworkTopologyStrategy:dc:N")


def _cursor_secret(value: str, environment: str) -> bytes:
    """CHRONICLE_CURSOR_SECRET as bytes. Left empty in development, a random one for this process (cursors then
    do not survive a restart); left empty in production, empty, and Settings.validate() refuses to start."""
    if not value and environment.strip().lower() == DEVELOPMENT:
        return _process_secret()
    return value.encode()


def share_development_secret() -> None:
    """In development without CHRONICLE_CURSOR_SECRET: one random secret for this process and every process it
    starts (gunicorn's master calls this before forking: a cursor or form token of one worker holds on another)."""
    if env("CHRONICLE_ENV", "").strip().lower() == DEVELOPMENT and not env("CHRONICLE_CURSOR_SECRET", ""):
        os.environ["CHRONICLE_CURSOR_SECRET"] = _process_secret().decode()


@functools.cache
def _process_secret() -> bytes:
    return secrets.token_hex(32).encode()


def _secret_problems(name: str, value: str, *, min_chars: int = MIN_SECRET_CHARS) -> list[str]:
    if not value.strip():
        return [f"{name} is empty: generate one (e.g. `openssl rand -hex 32`)"]
    if value.strip().lower() in _PUBLISHED_SECRETS:
        return [f"{name} is a published default (refused): generate one (e.g. `openssl rand -hex 32`)"]
    if len(value) < min_chars:
        return [f"{name} is shorter than {min_chars} characters: generate one (e.g. `openssl rand -hex 32`)"]
    return []


def api_token_grants(raw: str) -> dict[str, dict]:
    """CHRONICLE_API_TOKENS checked: {"<token>": {"workspaces": ["T1"] | ["*"], "private": bool}}; ConfigError
    naming the variable and what is wrong (so a bad value stops the start, not the first request)."""
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"CHRONICLE_API_TOKENS is not valid JSON ({exc}): expected "
                          '{"<token>": {"workspaces": ["T123"], "private": false}}') from None
    if not isinstance(parsed, dict):
        raise ConfigError("CHRONICLE_API_TOKENS must be a JSON object of token -> grant")
    for token, grant in parsed.items():
        where = f"CHRONICLE_API_TOKENS token #{list(parsed).index(token) + 1}"
        if not token.strip():
            raise ConfigError(f"{where} is empty")
        if not isinstance(grant, dict) or set(grant) - {"workspaces", "private"}:
            raise ConfigError(f'{where}: the grant must be an object with "workspaces" (and "private")')
        workspaces = grant.get("workspaces", [])
        if not isinstance(workspaces, list) or not all(isinstance(w, str) and w for w in workspaces):
            raise ConfigError(f'{where}: "workspaces" must be a list of workspace ids or ["*"]')
        if not isinstance(grant.get("private", False), bool):
            raise ConfigError(f'{where}: "private" must be true or false')
    return parsed


def cache_dir() -> Path:
    """Where fetched Cassandra distributions live, outside the repository so every checkout reuses them."""
    base = env("CHRONICLE_CACHE_DIR", "") or os.path.join(
        env("XDG_CACHE_HOME", "") or os.path.expanduser("~/.cache"), "chronicle"
    )
    return Path(base)


def state_dir() -> Path:
    """The one ignored project-local folder holding node configs, data, commit logs, logs and local files."""
    return Path(env("CHRONICLE_STATE_DIR", "") or PROJECT_ROOT / ".chronicle")


@dataclasses.dataclass(frozen=True)
class NodeSettings:
    """What the Cassandra node manager (api/node/) takes from the environment; read once per command."""

    native_port: int
    storage_port: int
    jmx_port: int
    heap: str
    heap_new: str
    cache_dir: Path
    state_dir: Path
    # A Maven settings.xml for the fetch (mirrors, proxies, another local repository); empty: Maven's own.
    maven_settings: str

    @classmethod
    def from_env(cls) -> NodeSettings:
        return cls(
            native_port=int(env("CHRONICLE_CASSANDRA_PORT", "9042")),
            storage_port=int(env("CHRONICLE_CASSANDRA_STORAGE_PORT", "7000")),
            jmx_port=int(env("CHRONICLE_CASSANDRA_JMX_PORT", "7199")),
            heap=env("CHRONICLE_CASSANDRA_HEAP", "1G"),
            heap_new=env("CHRONICLE_CASSANDRA_HEAP_NEW", "256M"),
            cache_dir=cache_dir(),
            state_dir=state_dir(),
            maven_settings=env("CHRONICLE_MAVEN_SETTINGS", ""),
        )
