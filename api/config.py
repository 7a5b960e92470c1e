"""Settings from environment variables: the one module that reads the environment. Every variable, its default
and meaning is listed in docs/configuration.md; a bad value stops the start with a ConfigError naming it."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import secrets
import zoneinfo
from pathlib import Path

from cassandra import ConsistencyLevel
from cryptography.fernet import Fernet

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


def env_int(name: str, default: int, *, low: int | None = None, high: int | None = None) -> int:
    """An integer variable; ConfigError naming it when it is not one or out of [low, high]."""
    raw = env(name, str(default)).strip()
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None
    _check_range(name, value, low, high)
    return value


def env_float(name: str, default: float, *, low: float | None = None, high: float | None = None) -> float:
    """A number variable; ConfigError naming it when it is not a finite number or out of [low, high]."""
    raw = env(name, str(default)).strip()
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if value != value or value in (float("inf"), float("-inf")):
        raise ConfigError(f"{name}={raw!r} is not a number")
    _check_range(name, value, low, high)
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = env(name, "true" if default else "false").strip().lower()
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}={raw!r} is not true or false")


def _check_range(name: str, value: float, low: float | None, high: float | None) -> None:
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"{low if low is not None else '-inf'}..{high if high is not None else 'inf'}"
        raise ConfigError(f"{name}={value} is outside {bounds}")


def _consistency(name: str, default: str) -> int:
    value = env(name, default).upper()
    try:
        return ConsistencyLevel.name_to_value[value]
    except KeyError:
        raise ConfigError(f"{name}={value!r} is not a Cassandra consistency level") from None


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


# -- the feature settings, nested in Settings ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class NetworkSettings:
    """The follower network (CHRONICLE_NETWORK_*; every variable in docs/configuration.md)."""

    hybrid_threshold: int = 10000  # authors with this many followers are merged at read time (0: hybrid off)
    hybrid_hysteresis: float = 0.1  # merged again only below threshold x (1 - hysteresis): no flapping
    cache_cap: int = 800  # home-timeline entries kept per account
    cache_ttl: int = 7 * 24 * 3600  # seconds a home-timeline entry lives
    fanout_concurrency: int = 256
    fanout_batch: int = 10
    page_size: int = 25
    likes_rank_max_age: float = 10.0  # seconds a reader's likes-ranked home window is reused (0: every read)
    time_zone: str = "UTC"  # the IANA zone network activity days are cut in
    follower_bucket_rows: int = 50_000  # followers per bucket of a bucketed follower set (split at twice that)
    follower_move_settle: float = 30.0  # seconds a follower-layout move waits for writers of the old layout
    # Q6: a common term's top list this old (seconds) is rebuilt by the next search of the term (it never expires).
    term_top_max_age: float = 7 * 24 * 3600.0
    # Q4: seconds a process keeps the celebrities' last post times it read or wrote (0: read every page).
    celebrity_cache_ttl: float = 1.0

    @property
    def hybrid(self) -> bool:
        return self.hybrid_threshold > 0

    @property
    def demote_below(self) -> int:
        """Follower count under which a celebrity is fanned out again (with hybrid off: any count)."""
        if not self.hybrid:
            return 2**62  # hybrid off: any celebrity left over is demoted on its next unfollow
        return int(self.hybrid_threshold * (1 - self.hybrid_hysteresis))

    def is_celebrity(self, follower_count: int | None) -> bool:
        return self.hybrid and (follower_count or 0) >= self.hybrid_threshold

    @classmethod
    def from_env(cls) -> NetworkSettings:
        return cls(
            hybrid_threshold=env_int("CHRONICLE_NETWORK_HYBRID_THRESHOLD", 10000, low=0),
            hybrid_hysteresis=env_float("CHRONICLE_NETWORK_HYBRID_HYSTERESIS", 0.1, low=0.0, high=1.0),
            cache_cap=env_int("CHRONICLE_NETWORK_CACHE_CAP", 800, low=1),
            cache_ttl=env_int("CHRONICLE_NETWORK_CACHE_TTL", 7 * 24 * 3600, low=1),
            fanout_concurrency=env_int("CHRONICLE_NETWORK_FANOUT_CONCURRENCY", 256, low=1),
            fanout_batch=env_int("CHRONICLE_NETWORK_FANOUT_BATCH", 10, low=1),
            page_size=env_int("CHRONICLE_NETWORK_PAGE_SIZE", 25, low=1, high=1000),
            likes_rank_max_age=env_float("CHRONICLE_NETWORK_LIKES_RANK_MAX_AGE", 10.0, low=0.0),
            time_zone=env_zone("CHRONICLE_NETWORK_TIME_ZONE", "UTC"),
            follower_bucket_rows=env_int("CHRONICLE_NETWORK_FOLLOWER_BUCKET_ROWS", 50_000, low=100, high=1_000_000),
            follower_move_settle=env_float("CHRONICLE_NETWORK_FOLLOWER_MOVE_SETTLE", 30.0, low=0.0, high=3600.0),
            term_top_max_age=env_float("CHRONICLE_NETWORK_TERM_TOP_MAX_AGE", 7 * 24 * 3600.0, low=1.0),
            celebrity_cache_ttl=env_float("CHRONICLE_NETWORK_CELEBRITY_CACHE_TTL", 1.0, low=0.0, high=60.0),
        )


@dataclasses.dataclass(frozen=True)
class ActivitySettings:
    """Activity days (CHRONICLE_ACTIVITY_*)."""

    delay_seconds: float = 60.0  # within which the worker rebuilds a day live ingest changed
    batch: int = 500  # dirty marks the worker takes per pass

    @classmethod
    def from_env(cls) -> ActivitySettings:
        return cls(delay_seconds=env_float("CHRONICLE_ACTIVITY_DELAY", 60.0, low=1.0, high=86_400.0),
                   batch=env_int("CHRONICLE_ACTIVITY_BATCH", 500, low=1))


# Where Slack serves url_private (files.slack.com/files-pri/...; GovSlack: files.slack-gov.com) and the hosts it
# may redirect a download to (files-*.slack.com, *.slack-edge.com). `*` is one DNS label. The bot token is sent
# to these hosts only, over HTTPS (plain HTTP only to a loopback address: the tests' stand-in file host).
DEFAULT_FILE_HOSTS = ("files.slack.com", "files-*.slack.com", "*.slack-edge.com", "files.slack-gov.com")


@dataclasses.dataclass(frozen=True)
class SlackSettings:
    """Bot tokens, the Web API, reports, object storage and the file worker (docs/slack.md lists each)."""

    # Bot tokens used to download url_private: one per workspace (T1=xoxb-...,T2=...) and/or a shared one.
    bot_tokens: dict[str, str]
    bot_token: str
    # The Web API (backfill): Slack's own, or a stand-in on loopback in tests.
    api_url: str
    # Reports: where the workspace report is posted; users who opted in to a personal DM.
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
    # Messages one process writes to a channel-day before the day's later hours go to hour buckets of their own
    # (docs/slack-messages.md, "Partition sizes"); small in tests.
    hot_day_messages: int = 10_000
    # Socket Mode (docs/slack.md, "Socket Mode"): events over a WebSocket the app opens, no public URL. The
    # app-level token (xapp-..., scope connections:write) is a secret: never logged, left out of repr.
    app_token: str = dataclasses.field(default="", repr=False)
    socket_mode: bool = False  # `serve` starts `chronicle slack socket-mode` beside gunicorn
    socket_ping_interval: float = 5.0  # seconds between WebSocket pings (slack-sdk's; stale after 4 missed)
    socket_concurrency: int = 8  # envelopes stored at once (slack-sdk's listener threads)

    @classmethod
    def from_env(cls) -> SlackSettings:
        app_token = env("CHRONICLE_SLACK_APP_TOKEN", "").strip()
        if app_token and not app_token.startswith("xapp-"):
            raise ConfigError("CHRONICLE_SLACK_APP_TOKEN is not an app-level token (xapp-...): create one under the "
                              "Slack app's Basic Information, scope connections:write")
        socket_mode = env_bool("CHRONICLE_SLACK_SOCKET_MODE", False)
        if socket_mode and not app_token:
            raise ConfigError("CHRONICLE_SLACK_SOCKET_MODE is on but CHRONICLE_SLACK_APP_TOKEN is empty: set the "
                              "app-level token (xapp-...)")
        return cls(
            bot_tokens=parse_mapping(env("CHRONICLE_SLACK_BOT_TOKENS", "")),
            bot_token=env("CHRONICLE_SLACK_BOT_TOKEN", ""),
            api_url=env("CHRONICLE_SLACK_API_URL", "https://slack.com/api/"),
            report_channel=env("CHRONICLE_SLACK_REPORT_CHANNEL", "chronicle-stats"),
            report_dm_users=tuple(_csv(env("CHRONICLE_SLACK_REPORT_DM_USERS", "").replace(" ", ""))),
            files_root=env("CHRONICLE_FILES_ROOT", str(state_dir() / "slack-files")),
            s3_bucket=env("CHRONICLE_FILES_S3_BUCKET", ""),
            s3_endpoint=env("CHRONICLE_FILES_S3_ENDPOINT", ""),
            s3_region=env("CHRONICLE_FILES_S3_REGION", "us-east-1"),
            s3_prefix_uri=env("CHRONICLE_FILES_S3_URI_SCHEME", "s3"),
            max_attempts=env_int("CHRONICLE_FILES_MAX_ATTEMPTS", 5, low=1),
            backoff_seconds=env_float("CHRONICLE_FILES_BACKOFF_SECONDS", 2.0, low=0.0),
            backoff_max_seconds=env_float("CHRONICLE_FILES_BACKOFF_MAX_SECONDS", 600.0, low=0.0),
            download_timeout=env_float("CHRONICLE_FILES_TIMEOUT", 30.0, low=0.1),
            max_file_bytes=env_int("CHRONICLE_FILES_MAX_BYTES", 1024 * 1024 * 1024, low=1),
            batch_size=env_int("CHRONICLE_FILES_BATCH", 100, low=1),
            concurrency=env_int("CHRONICLE_FILES_CONCURRENCY", 16, low=1),
            file_hosts=tuple(h.lower() for h in _csv(env("CHRONICLE_SLACK_FILE_HOSTS", ""))) or DEFAULT_FILE_HOSTS,
            hot_day_messages=env_int("CHRONICLE_SLACK_HOT_DAY_MESSAGES", 10_000, low=1, high=90_000),
            app_token=app_token,
            socket_mode=socket_mode,
            socket_ping_interval=env_float("CHRONICLE_SLACK_SOCKET_PING_INTERVAL", 5.0, low=0.1, high=60.0),
            socket_concurrency=env_int("CHRONICLE_SLACK_SOCKET_CONCURRENCY", 8, low=1, high=64),
        )

    def token_for(self, team_id: str) -> str:
        return self.bot_tokens.get(team_id) or self.bot_token


@dataclasses.dataclass(frozen=True)
class SlackAppSettings:
    """The installable Slack app (docs/slack-app.md): OAuth v2 install into many workspaces, bot tokens stored
    encrypted (CHRONICLE_SLACK_CLIENT_ID, _CLIENT_SECRET, _TOKEN_KEYS, ...). OAuth is on when a client id is set."""

    client_id: str = ""
    client_secret: str = ""
    # Fernet keys (urlsafe base64 of 32 bytes), newest first: the first encrypts, every one decrypts (rotation).
    token_keys: tuple[str, ...] = ()
    redirect_url: str = ""  # https://host/slack/oauth_redirect, as the manifest lists it ("" = Slack's default)
    authorize_url: str = "https://slack.com/oauth/v2/authorize"  # a loopback stand-in in tests
    state_ttl: int = 600  # seconds an "Add to Slack" click may take to come back
    rotate_before: int = 7200  # rotate a bot token this many seconds before it expires (TokenRotator's default)

    @property
    def oauth(self) -> bool:
        return bool(self.client_id)

    @classmethod
    def from_env(cls) -> SlackAppSettings:
        return cls(
            client_id=env("CHRONICLE_SLACK_CLIENT_ID", "").strip(),
            client_secret=env("CHRONICLE_SLACK_CLIENT_SECRET", ""),
            token_keys=tuple(_csv(env("CHRONICLE_SLACK_TOKEN_KEYS", ""))),
            redirect_url=env("CHRONICLE_SLACK_REDIRECT_URL", "").strip(),
            authorize_url=env("CHRONICLE_SLACK_AUTHORIZE_URL", "https://slack.com/oauth/v2/authorize").strip(),
            state_ttl=env_int("CHRONICLE_SLACK_OAUTH_STATE_TTL", 600, low=30, high=3600),
            rotate_before=env_int("CHRONICLE_SLACK_TOKEN_ROTATE_BEFORE", 7200, low=60, high=43_200),
        )

    def problems(self, development: bool) -> list[str]:
        """What is wrong with these settings: malformed keys always; outside development, with OAuth on, a
        missing or published client secret or no encryption key."""
        out = []
        for i, key in enumerate(self.token_keys, 1):
            try:
                Fernet(key.encode())
            except (ValueError, TypeError):
                out.append(f"CHRONICLE_SLACK_TOKEN_KEYS key #{i} is not a Fernet key (generate one with "
                           "`chronicle slack token-key`)")
        if self.oauth and not development:
            out += _secret_problems("CHRONICLE_SLACK_CLIENT_SECRET", self.client_secret, min_chars=1)
            if not self.token_keys:
                out.append("CHRONICLE_SLACK_TOKEN_KEYS is empty: bot tokens are stored encrypted (generate a key "
                           "with `chronicle slack token-key`)")
        return out


@dataclasses.dataclass(frozen=True)
class RequestLimits:
    """What gunicorn's worker class (api/server_worker.py) allows one request (CHRONICLE_REQUEST_*)."""

    head_timeout: float = 10.0
    body_timeout: float = 30.0
    max_body_bytes: int = 1024 * 1024
    buffer_bytes: int = 64 * 1024 * 1024

    @classmethod
    def from_env(cls) -> RequestLimits:
        return cls(head_timeout=env_float("CHRONICLE_REQUEST_HEAD_TIMEOUT", 10.0, low=0.1),
                   body_timeout=env_float("CHRONICLE_REQUEST_BODY_TIMEOUT", 30.0, low=0.1),
                   max_body_bytes=env_int("CHRONICLE_MAX_BODY_BYTES", 1024 * 1024, low=1024),
                   buffer_bytes=env_int("CHRONICLE_REQUEST_BUFFER_BYTES", 64 * 1024 * 1024, low=1024))


def env_zone(name: str, default: str) -> str:
    value = env(name, default)
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"{name}: unknown time zone {value!r} (an IANA name, e.g. Europe/Berlin)") from None
    return value


def log_level() -> str:
    """CHRONICLE_LOG_LEVEL (default INFO)."""
    return env("CHRONICLE_LOG_LEVEL", "INFO")


def tagging_tick() -> float:
    """CHRONICLE_TAGGING_TICK: seconds between two passes of `chronicle tagging worker`."""
    return env_float("CHRONICLE_TAGGING_TICK", 1.0, low=0.01)


def prometheus_multiprocess_dir() -> str:
    """PROMETHEUS_MULTIPROC_DIR (prometheus_client's own variable): set when gunicorn's workers share metrics."""
    return env("PROMETHEUS_MULTIPROC_DIR", "")


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
    # API tokens for read endpoints, JSON: {"<token>": {"workspaces": ["T1"] | ["*"], "private": false}}
    # (checked at start-up by api_token_grants).
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
    # The access audit log (api/audit.py): on by default; its rows expire after this many days.
    audit: bool = True
    audit_retention_days: int = 400
    # An erasure's run starts this long after its request (api/erasure/ledger.settle): every process's guard has
    # seen the request by then (it reads requests every ledger.GUARD_REFRESH seconds) and writes it let through
    # before have landed. Below GUARD_REFRESH, a write of the person's past may outlive the run.
    erasure_settle_seconds: float = 15.0
    # Bytes of JSON pages (timeline, thread, message) a process keeps by their ETag (api/conditional.py); 0: none.
    page_cache_bytes: int = 32 * 1024 * 1024
    # The features' settings, read with the rest (a bad value stops the start, not a request).
    network: NetworkSettings = dataclasses.field(default_factory=NetworkSettings)
    activity: ActivitySettings = dataclasses.field(default_factory=ActivitySettings)
    slack: SlackSettings = dataclasses.field(default_factory=lambda: SlackSettings.from_env())
    slack_app: SlackAppSettings = dataclasses.field(default_factory=SlackAppSettings)
    requests: RequestLimits = dataclasses.field(default_factory=RequestLimits)

    @property
    def development(self) -> bool:
        return self.environment == DEVELOPMENT

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            contact_points=_csv(env("CHRONICLE_CASSANDRA_HOSTS", "127.0.0.1")),
            cassandra_port=env_int("CHRONICLE_CASSANDRA_PORT", 9042, low=1, high=65535),
            keyspace=env("CHRONICLE_KEYSPACE", "chronicle"),
            local_dc=env("CHRONICLE_LOCAL_DC", "datacenter1"),
            replication=env("CHRONICLE_REPLICATION", "SimpleStrategy:1"),
            read_consistency=_consistency("CHRONICLE_READ_CONSISTENCY", "LOCAL_ONE"),
            write_consistency=_consistency("CHRONICLE_WRITE_CONSISTENCY", "LOCAL_QUORUM"),
            request_timeout=env_float("CHRONICLE_REQUEST_TIMEOUT", 2.0, low=0.01),
            connect_timeout=env_float("CHRONICLE_CONNECT_TIMEOUT", 2.0, low=0.01),
            cursor_secret=_cursor_secret(env("CHRONICLE_CURSOR_SECRET", ""), env("CHRONICLE_ENV", "")),
            max_body_bytes=env_int("CHRONICLE_MAX_BODY_BYTES", 1024 * 1024, low=1024),
            log_level=log_level(),
            slack_signing_secrets=parse_mapping(env("CHRONICLE_SLACK_SIGNING_SECRETS", "")),
            slack_signing_secret=env("CHRONICLE_SLACK_SIGNING_SECRET", ""),
            slack_events_path=env("CHRONICLE_SLACK_EVENTS_PATH", "/slack/events"),
            slack_keep_raw_events=env_bool("CHRONICLE_SLACK_KEEP_RAW", True),
            api_tokens=env("CHRONICLE_API_TOKENS", ""),
            admin_token=env("CHRONICLE_ADMIN_TOKEN", ""),
            protocol_version=env_int("CHRONICLE_PROTOCOL_VERSION", 4, low=3, high=5),
            speculative_delay=env_float("CHRONICLE_SPECULATIVE_DELAY", 0.1, low=0.0),
            speculative_attempts=env_int("CHRONICLE_SPECULATIVE_ATTEMPTS", 2, low=0, high=10),
            environment=env("CHRONICLE_ENV", "production").strip().lower() or "production",
            audit=env_bool("CHRONICLE_AUDIT", True),
            audit_retention_days=env_int("CHRONICLE_AUDIT_RETENTION_DAYS", 400, low=1, high=36_500),
            erasure_settle_seconds=env_float("CHRONICLE_ERASURE_SETTLE_SECONDS", 15.0, low=0.0),
            page_cache_bytes=env_int("CHRONICLE_PAGE_CACHE_MB", 32, low=0, high=65_536) * 1024 * 1024,
            network=NetworkSettings.from_env(),
            activity=ActivitySettings.from_env(),
            slack=SlackSettings.from_env(),
            slack_app=SlackAppSettings.from_env(),
            requests=RequestLimits.from_env(),
        )

    def validate(self) -> Settings:
        """Refuse to serve with settings that would be unsafe or fail later: called once when the app is created
        (gunicorn's master also calls it before forking, so a bad value stops the start, not a request). Outside
        development every secret must be set, not a published default, and long enough; CHRONICLE_API_TOKENS
        must be valid JSON in every mode. Raises ConfigError naming the variable."""
        api_token_grants(self.api_tokens)
        app_problems = self.slack_app.problems(self.development)
        if self.development:
            if app_problems:
                raise ConfigError("; ".join(app_problems))
            return self
        problems = list(app_problems)
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
    # The node's timer slack (api/node/process.py, docs/node.md): how late its timed waits may end. Coarser than
    # the kernel's 50 us, Cassandra's shared-pool workers stop spin-waiting between requests sooner.
    timer_slack_us: int
    cache_dir: Path
    state_dir: Path
    # A Maven settings.xml for the fetch (mirrors, proxies, another local repository); empty: Maven's own.
    maven_settings: str

    @classmethod
    def from_env(cls) -> NodeSettings:
        return cls(
            native_port=env_int("CHRONICLE_CASSANDRA_PORT", 9042, low=1, high=65535),
            storage_port=env_int("CHRONICLE_CASSANDRA_STORAGE_PORT", 7000, low=1, high=65535),
            jmx_port=env_int("CHRONICLE_CASSANDRA_JMX_PORT", 7199, low=1, high=65535),
            heap=env("CHRONICLE_CASSANDRA_HEAP", "1G"),
            heap_new=env("CHRONICLE_CASSANDRA_HEAP_NEW", "256M"),
            timer_slack_us=env_int("CHRONICLE_CASSANDRA_TIMER_SLACK_US", 250, low=0, high=100_000),
            cache_dir=cache_dir(),
            state_dir=state_dir(),
            maven_settings=env("CHRONICLE_MAVEN_SETTINGS", ""),
        )
