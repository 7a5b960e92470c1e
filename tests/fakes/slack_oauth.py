"""The OAuth side of the loopback fake Slack (tests/fakes/slack_web_api.py holds one as `fake.oauth`):
Slack's consent page and oauth.v2.access, with token rotation, and token revocation.

  GET /oauth/v2/authorize?client_id&scope&state[&redirect_uri]: a consent page with "Allow" (id=allow: back to the
  redirect URL with ?code=&state=) and "Cancel" (id=deny: ?error=access_denied&state=). An unknown client_id is
  refused on the page itself, as Slack does.
  oauth.v2.access: client credentials as HTTP Basic (what slack-sdk sends) or client_id/client_secret args
  (invalid_client_id, bad_client_secret); either a code (single use: invalid_code; bad_redirect_uri when the
  redirect differs from the authorize request's) or grant_type=refresh_token (invalid_refresh_token for an
  unknown or used one). With `rotation` on, bot tokens are `xoxe.xoxb-` tokens with expires_in and a refresh
  token (each refresh token works once); every issued token gets `scopes`.
  `org_install`: the next installs are Enterprise Grid org installs (team null, enterprise set).
  `revoke(token)`: the token answers token_revoked from then on; `revoke_on_issue`: tokens are revoked as soon as
  they are issued (an install whose token dies before Chronicle checks it).
Every exchange lands in `exchanges` as (grant, ok).
"""

from __future__ import annotations

import html
import itertools
from typing import Any
from urllib.parse import urlencode

CLIENT_ID = "1111.2222"
CLIENT_SECRET = "fake-client-secret-0123456789"
INSTALL_SCOPES = frozenset({"channels:read", "channels:history", "groups:read", "groups:history", "users:read",
                            "chat:write", "files:read", "reactions:read"})


class FakeSlackOAuth:
    def __init__(self, fake: Any) -> None:
        self.fake = fake
        self.client_id, self.client_secret = CLIENT_ID, CLIENT_SECRET
        self.rotation = True
        self.expires_in = 43_200
        self.scopes = set(INSTALL_SCOPES)
        self.org_install = False
        self.enterprise_id, self.enterprise_name = "E0FAKE", "Fake Org"
        self.installer = "U0INSTALLER"
        self.revoke_on_issue = False
        self.revoked: set[str] = set()
        self.default_redirect_uri = ""
        self.exchanges: list[tuple[str, bool]] = []
        self._codes: dict[str, str] = {}  # code -> redirect_uri of its authorize request
        self._refresh: set[str] = set()
        self._serial = itertools.count(1)

    # -- helpers tests call -------------------------------------------------------------------------------

    def revoke(self, token: str) -> None:
        with self.fake.lock:
            self.revoked.add(token)

    def issued_tokens(self) -> list[str]:
        with self.fake.lock:
            return [t for t in self.fake.tokens if t.startswith(("xoxb-inst-", "xoxe.xoxb-"))]

    # -- the consent page ---------------------------------------------------------------------------------

    def authorize_page(self, args: dict[str, str]) -> tuple[int, str]:
        with self.fake.lock:
            if args.get("client_id") != self.client_id:
                return 400, "<!doctype html><title>Error</title><h1>Invalid client_id parameter</h1>"
            redirect = args.get("redirect_uri") or self.default_redirect_uri
            code = f"code-{next(self._serial)}"
            self._codes[code] = args.get("redirect_uri") or ""
            state = args.get("state", "")
            allow = f"{redirect}?{urlencode({'code': code, 'state': state})}"
            deny = f"{redirect}?{urlencode({'error': 'access_denied', 'state': state})}"
            scopes = html.escape(args.get("scope", ""))
            return 200, (f"<!doctype html><title>Fake Slack: install</title><h1>{html.escape(self.fake.team_name)}"
                         f"</h1><p id=scopes>{scopes}</p><a id=allow href=\"{html.escape(allow)}\">Allow</a> "
                         f"<a id=deny href=\"{html.escape(deny)}\">Cancel</a>")

    # -- the Web API --------------------------------------------------------------------------------------

    def intercept(self, method: str, args: dict[str, Any], token: str | None) -> tuple[int, dict, dict] | None:
        """oauth.v2.access (no bearer token), and token_revoked for a revoked token; None: the fake goes on."""
        if method == "oauth.v2.access":
            answer = self._access(args)
            self.exchanges.append((str(args.get("grant_type") or "code"), bool(answer.get("ok"))))
            return 200, answer, {}
        if token and token in self.revoked:
            return 200, {"ok": False, "error": "token_revoked"}, {}
        return None

    def _access(self, args: dict[str, Any]) -> dict[str, Any]:
        if args.get("client_id") != self.client_id:
            return {"ok": False, "error": "invalid_client_id"}
        if args.get("client_secret") != self.client_secret:
            return {"ok": False, "error": "bad_client_secret"}
        if args.get("grant_type") == "refresh_token":
            refresh = str(args.get("refresh_token") or "")
            if refresh not in self._refresh:
                return {"ok": False, "error": "invalid_refresh_token"}
            self._refresh.discard(refresh)
            return {"ok": True, **self._issue(rotated=True)}
        code = str(args.get("code") or "")
        if code not in self._codes:
            return {"ok": False, "error": "invalid_code"}
        if self._codes.pop(code) != str(args.get("redirect_uri") or ""):
            return {"ok": False, "error": "bad_redirect_uri"}
        return {"ok": True, **self._issue(rotated=False)}

    def _issue(self, *, rotated: bool) -> dict[str, Any]:
        n = next(self._serial)
        token = f"xoxe.xoxb-{n}-secretbot{n:06d}" if self.rotation else f"xoxb-inst-{n}-secretbot{n:06d}"
        self.fake.tokens[token] = set(self.scopes)
        if self.revoke_on_issue:
            self.revoked.add(token)
        answer: dict[str, Any] = {"access_token": token, "token_type": "bot", "scope": ",".join(sorted(self.scopes)),
                                  "bot_user_id": self.fake.bot_user_id, "app_id": "A0FAKEAPP"}
        if self.rotation:
            refresh = f"xoxe-1-secretrefresh{n:06d}"
            self._refresh.add(refresh)
            answer.update(refresh_token=refresh, expires_in=self.expires_in)
        if rotated:
            return answer
        org = self.org_install
        answer.update(
            team=None if org else {"id": self.fake.team_id, "name": self.fake.team_name},
            enterprise={"id": self.enterprise_id, "name": self.enterprise_name} if org else None,
            is_enterprise_install=org, authed_user={"id": self.installer})
        return answer
