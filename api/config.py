"""Settings from environment variables. Every variable, its default and meaning is listed in README."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from cassandra import ConsistencyLevel

PROJECT_ROOT = Path(__file__).resolve().parents[1]


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
            cursor_secret=env("CHRONICLE_CURSOR_SECRET", "dev-cursor-secret-change-me").encode(),
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
        )

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
