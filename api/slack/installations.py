"""Slack app installations (docs/slack-app.md): who installed Chronicle where, with which bot token, and the OAuth
states of installs in progress. The owner of `slack_installations` and `slack_oauth_states` (cql/0200).

* `bot_token(db, team_id, enterprise_id=None)` is the one token lookup of every Web API caller (backfill, the file
  worker, report posting): the installed, decrypted token, rotated first when it expires within
  CHRONICLE_SLACK_TOKEN_ROTATE_BEFORE; else the environment's (CHRONICLE_SLACK_BOT_TOKEN(S)); `NoToken` when
  neither, or when the app was uninstalled from the workspace or its tokens revoked (the environment token of
  that workspace is then revoked too: it is not tried).
* Tokens are stored encrypted with Fernet (CHRONICLE_SLACK_TOKEN_KEYS, newest first: the first encrypts, all
  decrypt; `reencrypt` moves every row to the first key). They never appear in a log line or an error message.
* An uninstall or a revocation sets the row's `state`: nothing is deleted, the archive stays, a reinstall
  overwrites the row.
* `CassandraInstallationStore` and `CassandraOAuthStateStore` put these tables behind slack-sdk's interfaces.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from typing import Any

import structlog
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.oauth.installation_store import Bot, Installation, InstallationStore
from slack_sdk.oauth.state_store import OAuthStateStore

from api.config import SlackSettings
from api.db import Database, Statement, was_applied, without_none

log = structlog.get_logger("chronicle.slack.installations")

TABLES = frozenset({"slack_installations", "slack_oauth_states"})

ACTIVE, UNINSTALLED, REVOKED = "active", "uninstalled", "revoked"
LIFECYCLE_EVENTS = frozenset({"app_uninstalled", "tokens_revoked"})
_CACHE_SECONDS = 5.0  # how long a process reuses an installation it read (an uninstall reaches others this late)
LISTING_LIMIT = 10_000  # installations one listing reads (one row per workspace: far above any deployment)

_COLUMNS = ("install_key, team_id, team_name, enterprise_id, enterprise_name, is_enterprise_install, app_id, bot_id, "
            "bot_user_id, bot_scopes, bot_token, bot_refresh_token, bot_token_expires_at, installer_user_id, "
            "installed_at, state, state_changed_at")
INSERT_INSTALLATION = Statement(
    f"INSERT INTO slack_installations ({_COLUMNS}) VALUES "
    "(:install_key, :team_id, :team_name, :enterprise_id, :enterprise_name, :is_enterprise_install, :app_id, "
    ":bot_id, :bot_user_id, :bot_scopes, :bot_token, :bot_refresh_token, :bot_token_expires_at, :installer_user_id, "
    ":installed_at, :state, :state_changed_at)")
SELECT_INSTALLATION = Statement(f"SELECT {_COLUMNS} FROM slack_installations WHERE install_key = ?")
# A workspace of an org (Enterprise Grid), as its events name it: no token, only where to look.
REMEMBER_ORG = Statement("INSERT INTO slack_installations (install_key, team_id, enterprise_id) VALUES (?, ?, ?)")
LIST_INSTALLATIONS = Statement(f"SELECT {_COLUMNS} FROM slack_installations LIMIT {LISTING_LIMIT}")
# Rotation: only the process that read the current refresh token writes the new pair (others re-read it).
ROTATE_TOKEN = Statement(
    "UPDATE slack_installations SET bot_token = ?, bot_refresh_token = ?, bot_token_expires_at = ? "
    "WHERE install_key = ? IF bot_refresh_token = ?", idempotent=False)
REENCRYPT_TOKEN = Statement(
    "UPDATE slack_installations SET bot_token = ?, bot_refresh_token = ? WHERE install_key = ? IF bot_token = ?",
    idempotent=False)
# An uninstall/revocation older than the install it would end (a late redelivery after a reinstall) applies not.
SET_STATE = Statement(
    "UPDATE slack_installations SET state = ?, state_changed_at = ? WHERE install_key = ? IF installed_at <= ?",
    idempotent=False)
INSERT_STATE = Statement("INSERT INTO slack_oauth_states (state, issued_at) VALUES (?, ?) USING TTL ?")
# Single use: the delete applies once, and only to a state issued after `oldest` (unexpired by the clock).
CONSUME_STATE = Statement("DELETE FROM slack_oauth_states WHERE state = ? IF issued_at >= ?", idempotent=False)


class NoToken(Exception):
    """No bot token for a workspace: none installed or configured, the app was uninstalled or its tokens revoked,
    or rotation failed. The message says which (never the token); `transient` when trying later may work."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


# -- encryption -------------------------------------------------------------------------------------------

def new_key() -> str:
    """A fresh Fernet key for CHRONICLE_SLACK_TOKEN_KEYS."""
    return Fernet.generate_key().decode()


def _cipher(db: Database) -> MultiFernet:
    keys = db.settings.slack_app.token_keys
    if not keys:
        raise NoToken("CHRONICLE_SLACK_TOKEN_KEYS is empty: installed tokens cannot be stored or read")
    return db.held(("slack.token_cipher", keys), lambda: MultiFernet([Fernet(k.encode()) for k in keys]))


def _encrypt(db: Database, value: str | None) -> bytes | None:
    return None if not value else _cipher(db).encrypt(value.encode())


def _decrypt(db: Database, value: bytes | None) -> str | None:
    if not value:
        return None
    try:
        return _cipher(db).decrypt(value).decode()
    except InvalidToken:
        raise NoToken("a stored token does not decrypt with any key of CHRONICLE_SLACK_TOKEN_KEYS (a key was "
                      "dropped before `chronicle slack reencrypt-tokens` ran?)") from None


# -- installations ----------------------------------------------------------------------------------------

def install_key(team_id: str | None, enterprise_id: str | None = None, *, org: bool = False) -> str:
    """'E:<enterprise>' for an org-wide install, else 'T:<team>'."""
    if org:
        if not enterprise_id:
            raise ValueError("an org-wide install names its enterprise")
        return f"E:{enterprise_id}"
    if not team_id:
        raise ValueError("a workspace install names its team")
    return f"T:{team_id}"


def save(db: Database, installation: Installation) -> None:
    """Store (or overwrite: a reinstall) an installation, active, its tokens encrypted."""
    org = bool(installation.is_enterprise_install)
    now = int(db.clock.time())
    db.execute(INSERT_INSTALLATION, without_none({
        "install_key": install_key(installation.team_id, installation.enterprise_id, org=org),
        "team_id": installation.team_id, "team_name": installation.team_name,
        "enterprise_id": installation.enterprise_id, "enterprise_name": installation.enterprise_name,
        "is_enterprise_install": org, "app_id": installation.app_id, "bot_id": installation.bot_id,
        "bot_user_id": installation.bot_user_id,
        "bot_scopes": ",".join(installation.bot_scopes or []) or None,
        "bot_token": _encrypt(db, installation.bot_token),
        "bot_refresh_token": _encrypt(db, installation.bot_refresh_token),
        "bot_token_expires_at": installation.bot_token_expires_at,
        "installer_user_id": installation.user_id, "installed_at": now, "state": ACTIVE, "state_changed_at": now,
    }))
    _forget(db)
    log.info("slack_app_installed", team_id=installation.team_id, enterprise_id=installation.enterprise_id,
             org_install=org, scopes=len(installation.bot_scopes or []),
             rotating=installation.bot_refresh_token is not None)


def _row(db: Database, key: str) -> Any:
    return db.execute(SELECT_INSTALLATION, (key,)).one()


def _lookup(db: Database, team_id: str | None, enterprise_id: str | None) -> Any:
    """The row serving a workspace: its own install, else its org's (Enterprise Grid: the org named, or the one
    its events named, `remember_org`); None without either."""
    keys = ([f"T:{team_id}"] if team_id else []) + ([f"E:{enterprise_id}"] if enterprise_id else [])
    for key in keys:
        row = _row(db, key)
        if row is not None:
            return row
    if team_id and not enterprise_id:
        member = _row(db, f"M:{team_id}")
        if member is not None and member.enterprise_id:
            return _row(db, f"E:{member.enterprise_id}")
    return None


def remember_org(db: Database, team_id: str, enterprise_id: str) -> None:
    """Record that a workspace belongs to an org (a row 'M:<team>'), as its events say, so that callers that know
    only the workspace (the file worker, reports, backfill) find the org-wide install's token. Written once per
    workspace and org per process."""
    seen = db.caches.lru("slack.org_members", maxsize=4096)
    if seen.get((team_id, enterprise_id)) is None:
        db.execute(REMEMBER_ORG, (f"M:{team_id}", team_id, enterprise_id))
        seen.set((team_id, enterprise_id), True)
        _forget(db)


def _cache(db: Database) -> Any:
    return db.caches.ttl("slack.installations", maxsize=4096, ttl=_CACHE_SECONDS)


def _forget(db: Database) -> None:
    _cache(db).clear()


def describe(row: Any) -> dict[str, Any]:
    """What may be shown of an installation (no token, encrypted or not)."""
    return {"team_id": row.team_id, "team_name": row.team_name, "enterprise_id": row.enterprise_id,
            "org_install": bool(row.is_enterprise_install), "state": row.state, "installed_at": row.installed_at,
            "state_changed_at": row.state_changed_at, "bot_user_id": row.bot_user_id,
            "scopes": (row.bot_scopes or "").split(",") if row.bot_scopes else [],
            "token_expires_at": row.bot_token_expires_at}


def installation(db: Database, team_id: str | None, enterprise_id: str | None = None) -> dict[str, Any] | None:
    """The installation serving a workspace, as `describe` shows it; None when Chronicle was never installed."""
    row = _lookup(db, team_id, enterprise_id)
    return None if row is None else describe(row)


def installations(db: Database) -> Iterator[dict[str, Any]]:
    """Every installation (one row per workspace or org; at most LISTING_LIMIT), as `describe` shows it."""
    for row in db.execute(LIST_INSTALLATIONS):
        if not row.install_key.startswith("M:"):  # an org's workspace: its install is the org's row
            yield describe(row)


def bot_token(db: Database, team_id: str, enterprise_id: str | None = None, *,
              env: SlackSettings | None = None) -> str:
    """The bot token to call Slack with for a workspace: the installed one (decrypted; rotated first when it
    expires within the rotation margin), else the environment's (`env`, default `db.settings.slack`). NoToken
    when there is none, or the app was uninstalled or its tokens revoked (docs/slack-app.md)."""
    cache = _cache(db)
    row = cache.get((team_id, enterprise_id))
    if row is None:
        row = _lookup(db, team_id, enterprise_id) or False
        cache.set((team_id, enterprise_id), row)
    if row is False:
        token = (env or db.settings.slack).token_for(team_id)
        if not token:
            raise NoToken(f"no bot token for workspace {team_id}: install the app (/slack/install) or set "
                          f"CHRONICLE_SLACK_BOT_TOKENS={team_id}=xoxb-...")
        return token
    if row.state != ACTIVE:
        raise NoToken(f"the Slack app was {row.state} in workspace {team_id}: its tokens no longer work "
                      "(the archive is kept; reinstall to resume)")
    expires = row.bot_token_expires_at
    if expires is not None and row.bot_refresh_token and expires <= db.clock.time() + \
            db.settings.slack_app.rotate_before:
        row = _rotate(db, row)
        cache.set((team_id, enterprise_id), row)
    token = _decrypt(db, row.bot_token)
    if not token:
        raise NoToken(f"the installation of workspace {team_id} holds no bot token")
    return token


def refreshing(client: WebClient, db: Database, team_id: str, enterprise_id: str | None = None) -> WebClient:
    """`client` (a long run's, e.g. a backfill's) asking `bot_token` before every call: a token rotated meanwhile
    is picked up (a rotation is due 2 hours before expiry), and an uninstall stops the run with NoToken."""
    call = client.api_call

    def api_call(*args: Any, **kwargs: Any) -> Any:
        client.token = bot_token(db, team_id, enterprise_id)
        return call(*args, **kwargs)

    client.api_call = api_call  # type: ignore[method-assign]
    return client


def _web_client(db: Database) -> WebClient:
    # Its own logger, never below INFO: slack-sdk logs request bodies and responses (tokens) at DEBUG.
    quiet = logging.getLogger("chronicle.slack.oauth_client")
    quiet.setLevel(logging.INFO)
    return WebClient(base_url=db.settings.slack.api_url, timeout=15, logger=quiet)


def _rotate(db: Database, row: Any) -> Any:
    """Refresh an expiring bot token (oauth.v2.access, grant_type=refresh_token: what slack-sdk's TokenRotator
    sends; done here so the clock decides when, and so only one process writes the new pair). Returns the row
    as stored afterwards."""
    app = db.settings.slack_app
    refresh = _decrypt(db, row.bot_refresh_token)
    try:
        answer = _web_client(db).oauth_v2_access(client_id=app.client_id, client_secret=app.client_secret,
                                                 grant_type="refresh_token", refresh_token=refresh)
    except SlackApiError as exc:
        error = exc.response.get("error") if exc.response is not None else "unknown"
        log.warning("slack_token_rotation_failed", team_id=row.team_id, error=error)
        raise NoToken(f"rotating the bot token of workspace {row.team_id} failed: Slack answered {error}",
                      transient=error in ("ratelimited", "internal_error", "fatal_error")) from None
    except (SlackClientError, OSError) as exc:
        raise NoToken(f"rotating the bot token of workspace {row.team_id} failed: {type(exc).__name__}",
                      transient=True) from None
    if answer.get("token_type") != "bot" or not answer.get("access_token"):
        raise NoToken(f"rotating the bot token of workspace {row.team_id}: Slack answered no bot token")
    expires_at = int(db.clock.time()) + int(answer.get("expires_in") or 43_200)
    new_refresh = answer.get("refresh_token") or refresh
    applied = was_applied(db.execute(ROTATE_TOKEN, (
        _encrypt(db, answer["access_token"]), _encrypt(db, new_refresh), expires_at, row.install_key,
        row.bot_refresh_token)))
    log.info("slack_token_rotated", team_id=row.team_id, enterprise_id=row.enterprise_id, stored=applied,
             expires_at=expires_at)
    return _row(db, row.install_key)  # ours, or the pair another process stored first


def set_state(db: Database, team_id: str | None, enterprise_id: str | None, state: str, *, at: int) -> bool:
    """Mark the installation serving a workspace (its own, else its org's) uninstalled or revoked, unless it was
    installed after `at` (Unix seconds). Nothing is deleted. Returns whether a row changed."""
    row = _lookup(db, team_id, enterprise_id)
    if row is None or row.state == state:
        return False
    applied = was_applied(db.execute(SET_STATE, (state, int(db.clock.time()), row.install_key, at)))
    _forget(db)
    log.info("slack_app_state", team_id=team_id, enterprise_id=enterprise_id, state=state, applied=applied)
    return applied


def reencrypt(db: Database) -> dict[str, int]:
    """Every stored token encrypted again with the first key of CHRONICLE_SLACK_TOKEN_KEYS (after a new key
    was put first); the old key may be dropped once this has run. Returns counts."""
    cipher, done, same = _cipher(db), 0, 0
    for row in db.execute(LIST_INSTALLATIONS):
        if not row.bot_token:
            continue
        token = cipher.rotate(row.bot_token)
        refresh = cipher.rotate(row.bot_refresh_token) if row.bot_refresh_token else None
        if was_applied(db.execute(REENCRYPT_TOKEN, (token, refresh, row.install_key, row.bot_token))):
            done += 1
        else:
            same += 1  # rotated meanwhile: the new pair was written with the first key already
    _forget(db)
    return {"reencrypted": done, "changed_meanwhile": same}


# -- OAuth states -----------------------------------------------------------------------------------------

def issue_state(db: Database) -> str:
    """A new OAuth state, valid once for CHRONICLE_SLACK_OAUTH_STATE_TTL seconds."""
    state = secrets.token_urlsafe(24)
    ttl = db.settings.slack_app.state_ttl
    db.execute(INSERT_STATE, (state, int(db.clock.time()), ttl + 60))  # the clock decides; the TTL cleans up
    return state


def consume_state(db: Database, state: str) -> str:
    """Use a state: "ok" the first time within its lifetime; "expired" when issued too long ago; "unknown" when
    never issued or used already (a lightweight transaction: two redirects with one state cannot both pass)."""
    if not state or len(state) > 100:
        return "unknown"
    oldest = int(db.clock.time()) - db.settings.slack_app.state_ttl
    result = db.execute(CONSUME_STATE, (state, oldest))
    if was_applied(result):
        return "ok"
    row = result.one()
    return "expired" if row is not None and getattr(row, "issued_at", None) is not None else "unknown"


# -- slack-sdk's interfaces -------------------------------------------------------------------------------

class CassandraOAuthStateStore(OAuthStateStore):
    """slack-sdk's OAuthStateStore over `slack_oauth_states`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @property
    def logger(self) -> logging.Logger:
        return logging.getLogger("chronicle.slack.installations")

    def issue(self, *args: Any, **kwargs: Any) -> str:
        return issue_state(self.db)

    def consume(self, state: str) -> bool:
        return consume_state(self.db, state) == "ok"


class CassandraInstallationStore(InstallationStore):
    """slack-sdk's InstallationStore (bot installations) over `slack_installations`. Deleting marks the
    installation uninstalled: the archive of a workspace outlives its install."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @property
    def logger(self) -> logging.Logger:
        return logging.getLogger("chronicle.slack.installations")

    def save(self, installation: Installation) -> None:
        save(self.db, installation)

    def save_bot(self, bot: Bot) -> None:
        raise NotImplementedError("installations are saved whole (save)")

    def find_bot(self, *, enterprise_id: str | None, team_id: str | None,
                 is_enterprise_install: bool | None = False) -> Bot | None:
        found = self.find_installation(enterprise_id=enterprise_id, team_id=team_id,
                                       is_enterprise_install=is_enterprise_install)
        return None if found is None else found.to_bot()

    def find_installation(self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None,
                          is_enterprise_install: bool | None = False) -> Installation | None:
        row = (_row(self.db, install_key(None, enterprise_id, org=True)) if is_enterprise_install
               else _lookup(self.db, team_id, enterprise_id))
        if row is None or row.state != ACTIVE:
            return None
        return Installation(
            app_id=row.app_id, enterprise_id=row.enterprise_id, enterprise_name=row.enterprise_name,
            team_id=row.team_id, team_name=row.team_name, bot_token=_decrypt(self.db, row.bot_token),
            bot_id=row.bot_id, bot_user_id=row.bot_user_id, bot_scopes=row.bot_scopes or "",
            bot_refresh_token=_decrypt(self.db, row.bot_refresh_token),
            bot_token_expires_at=row.bot_token_expires_at, user_id=row.installer_user_id or "",
            is_enterprise_install=bool(row.is_enterprise_install), installed_at=row.installed_at)

    def delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        set_state(self.db, team_id, enterprise_id, UNINSTALLED, at=int(self.db.clock.time()))

    def delete_installation(self, *, enterprise_id: str | None, team_id: str | None,
                            user_id: str | None = None) -> None:
        set_state(self.db, team_id, enterprise_id, UNINSTALLED, at=int(self.db.clock.time()))


# -- lifecycle events -------------------------------------------------------------------------------------

def handle_event(db: Database, envelope: dict[str, Any]) -> str:
    """app_uninstalled / tokens_revoked (the raw envelope): mark the workspace's installation so every worker
    stops using its tokens; its archive is kept. tokens_revoked that names no bot token (only user tokens) changes
    nothing. Returns the outcome."""
    event = envelope.get("event") or {}
    kind = event.get("type")
    team_id = envelope.get("team_id") if isinstance(envelope.get("team_id"), str) else None
    enterprise_id = envelope.get("enterprise_id") if isinstance(envelope.get("enterprise_id"), str) else None
    at = envelope.get("event_time") if isinstance(envelope.get("event_time"), int) else int(db.clock.time())
    if kind == "tokens_revoked":
        bots = (event.get("tokens") or {}).get("bot") if isinstance(event.get("tokens"), dict) else None
        if not bots:
            return "ignored: no bot token revoked"
        state = REVOKED
    elif kind == "app_uninstalled":
        state = UNINSTALLED
    else:
        return "ignored: event type"
    changed = set_state(db, team_id, enterprise_id, state, at=at)
    return "stored" if changed else "ignored: no active installation"
