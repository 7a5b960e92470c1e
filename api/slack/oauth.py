"""The OAuth v2 install of Chronicle's Slack app (docs/slack-app.md): what /slack/install and
/slack/oauth_redirect (install_http.py) call.

`start` issues a single-use state (installations.py, a TTL'd row) and the authorize URL (slack-sdk's
AuthorizeUrlGenerator, the manifest's bot scopes). `finish` checks the state (bound to the browser that started:
the state cookie must name it; issued, unexpired and consumed once), then exchanges the code (oauth.v2.access),
checks the new bot token (auth.test: a token revoked meanwhile stores nothing) and saves the installation with
its token encrypted. Every refusal is an `InstallRefused` with a status and what to do; nothing is stored.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import structlog
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.oauth import AuthorizeUrlGenerator
from slack_sdk.oauth.installation_store import Installation

from api.db import Database
from api.slack import installations, manifest

log = structlog.get_logger("chronicle.slack.oauth")


class InstallRefused(Exception):
    """An install that did not complete: the page's status, title and explanation (never a token)."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


@dataclasses.dataclass(frozen=True)
class Installed:
    team_id: str | None
    team_name: str | None
    enterprise_id: str | None
    enterprise_name: str | None
    org_install: bool
    rotating: bool


def configured(db: Database) -> bool:
    """Whether "Add to Slack" is offered: a client id, a client secret and a token key are set."""
    app = db.settings.slack_app
    return bool(app.client_id and app.client_secret and app.token_keys)


def _require(db: Database) -> None:
    if not configured(db):
        raise InstallRefused(404, "Slack install not configured",
                             "This Chronicle has no Slack app configured (CHRONICLE_SLACK_CLIENT_ID, "
                             "CHRONICLE_SLACK_CLIENT_SECRET, CHRONICLE_SLACK_TOKEN_KEYS): see docs/slack-app.md.")


def start(db: Database) -> tuple[str, str]:
    """A new state and the URL of Slack's consent page for it."""
    _require(db)
    app = db.settings.slack_app
    state = installations.issue_state(db)
    generator = AuthorizeUrlGenerator(client_id=app.client_id, redirect_uri=app.redirect_url or None,
                                      scopes=manifest.bot_scopes(), authorization_url=app.authorize_url)
    return state, generator.generate(state)


def finish(db: Database, *, state: str | None, browser_state: str | None, code: str | None,
           error: str | None) -> Installed:
    """Complete an install from Slack's redirect (see the module docstring); InstallRefused otherwise."""
    _require(db)
    if not state:
        raise InstallRefused(400, "Missing state", "Slack's redirect carries no state: start again from "
                                                   "“Add to Slack”.")
    if not browser_state or browser_state != state:
        raise InstallRefused(400, "Wrong state", "This install link was used already, or was started in another "
                                                 "browser: start again from “Add to Slack”.")
    outcome = installations.consume_state(db, state)
    if outcome == "expired":
        raise InstallRefused(400, "Install link expired", "The install took longer than "
                             f"{db.settings.slack_app.state_ttl // 60} minutes: start again from “Add to Slack”.")
    if outcome != "ok":
        raise InstallRefused(400, "Install link already used", "This install link was used already or is unknown: "
                                                               "start again from “Add to Slack”.")
    if error:
        reason = "you cancelled" if error == "access_denied" else f"Slack answered {error}"
        raise InstallRefused(403, "Install cancelled", f"Chronicle was not installed ({reason}). Nothing was "
                                                       "stored; you can start again from “Add to Slack”.")
    if not code:
        raise InstallRefused(400, "Missing code", "Slack's redirect carries no code: start again.")
    answer = _exchange(db, code)
    return _save(db, answer)


def _exchange(db: Database, code: str) -> dict[str, Any]:
    app = db.settings.slack_app
    client = installations._web_client(db)  # noqa: SLF001 - the one quiet client (tokens never logged)
    try:
        answer = client.oauth_v2_access(client_id=app.client_id, client_secret=app.client_secret, code=code,
                                        redirect_uri=app.redirect_url or None).data
    except SlackApiError as exc:
        error = exc.response.get("error") if exc.response is not None else "unknown"
        log.info("slack_install_refused", step="oauth.v2.access", error=error)
        raise InstallRefused(400, "Slack refused the install", f"Slack refused the authorisation code ({error}). "
                                                               "Nothing was stored: start again.") from None
    except (SlackClientError, OSError) as exc:
        raise InstallRefused(502, "Slack did not answer", f"Exchanging the code failed ({type(exc).__name__}). "
                                                          "Nothing was stored: try again.") from None
    if not isinstance(answer, dict) or answer.get("token_type") != "bot" or not answer.get("access_token"):
        raise InstallRefused(400, "No bot token", "Slack answered without a bot token. Nothing was stored.")
    try:
        auth = client.auth_test(token=answer["access_token"]).data
    except SlackApiError as exc:
        error = exc.response.get("error") if exc.response is not None else "unknown"
        log.info("slack_install_refused", step="auth.test", error=error)
        raise InstallRefused(400, "Slack refused the new token", f"The bot token Slack issued does not work "
                                                                 f"({error}). Nothing was stored: install again.") \
            from None
    except (SlackClientError, OSError) as exc:
        raise InstallRefused(502, "Slack did not answer", f"Checking the new token failed ({type(exc).__name__}). "
                                                          "Nothing was stored: try again.") from None
    answer["_bot_id"] = auth.get("bot_id") if isinstance(auth, dict) else None
    return answer


def _save(db: Database, answer: dict[str, Any]) -> Installed:
    team = answer.get("team") or {}
    enterprise = answer.get("enterprise") or {}
    org = bool(answer.get("is_enterprise_install"))
    expires_in = answer.get("expires_in")
    installation = Installation(
        app_id=answer.get("app_id"), enterprise_id=enterprise.get("id"), enterprise_name=enterprise.get("name"),
        team_id=None if org else team.get("id"), team_name=None if org else team.get("name"),
        bot_token=answer["access_token"], bot_id=answer.get("_bot_id"), bot_user_id=answer.get("bot_user_id"),
        bot_scopes=answer.get("scope") or "", bot_refresh_token=answer.get("refresh_token"),
        bot_token_expires_at=int(db.clock.time()) + int(expires_in) if expires_in else None,
        user_id=(answer.get("authed_user") or {}).get("id") or "", is_enterprise_install=org,
        token_type="bot")
    if not org and not installation.team_id:
        raise InstallRefused(400, "No workspace", "Slack's answer names no workspace. Nothing was stored.")
    installations.save(db, installation)
    return Installed(team_id=installation.team_id, team_name=installation.team_name,
                     enterprise_id=installation.enterprise_id, enterprise_name=installation.enterprise_name,
                     org_install=org, rotating=installation.bot_refresh_token is not None)
