"""The Slack app manifest: slack/manifest.yml is what `chronicle slack manifest` prints (placeholder host); every
event type the ingest handles is subscribed, every Web API method the code calls is covered by a bot scope of the
manifest, and the install asks for exactly the manifest's scopes."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from click.testing import CliRunner

from api.cli import chronicle as main
from api.slack import installations, manifest, payloads

ROOT = Path(__file__).resolve().parents[2]
# A Web API method passed by name to a call ("conversations.history") or called through a slack-sdk client
# (web.chat_postMessage, client.oauth_v2_access, _web_client(db).auth_test).
_NAMESPACES = "auth|conversations|users|chat|files|reactions|team|oauth|apps|im|pins|bookmarks|emoji|usergroups"
_DOTTED = re.compile(rf'(?:_call|_pages|api_call)\(\s*"((?:{_NAMESPACES})\.[a-zA-Z0-9.]+)"')
_SDK_CALL = re.compile(rf"(?:client|web|\))\.((?:{_NAMESPACES})_[a-zA-Z0-9_]+)\(")


def _methods_called() -> set[str]:
    found = set()
    for path in (ROOT / "api").rglob("*.py"):
        text = path.read_text()
        found |= set(_DOTTED.findall(text))
        for name in _SDK_CALL.findall(text):
            head, _, rest = name.partition("_")
            found.add(f"{head}.{rest.replace('_', '.')}")
    return found


def test_the_checked_in_manifest_is_the_generated_one_and_the_command_fills_in_the_host():
    assert (ROOT / "slack" / "manifest.yml").read_text() == manifest.render()
    result = CliRunner().invoke(main, ["slack", "manifest", "--url", "https://chronicle.acme.test/"])
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(result.output)
    assert doc["oauth_config"]["redirect_urls"] == ["https://chronicle.acme.test/slack/oauth_redirect"]
    assert doc["settings"]["event_subscriptions"]["request_url"] == "https://chronicle.acme.test/slack/events"
    assert doc["settings"]["socket_mode_enabled"] is False and doc["settings"]["token_rotation_enabled"] is True
    socket = yaml.safe_load(CliRunner().invoke(main, ["slack", "manifest", "--url", "https://h.test",
                                                      "--socket-mode"]).output)
    assert socket["settings"]["socket_mode_enabled"] is True
    assert "request_url" not in socket["settings"]["event_subscriptions"]
    refused = CliRunner().invoke(main, ["slack", "manifest", "--url", "http://plain.test"])
    assert refused.exit_code == 2 and "https origin" in refused.output


def test_every_handled_event_type_is_subscribed():
    subscribed = set(yaml.safe_load((ROOT / "slack" / "manifest.yml").read_text())
                     ["settings"]["event_subscriptions"]["bot_events"])
    handled = set(payloads._PARSERS) | installations.LIFECYCLE_EVENTS
    assert handled <= set(manifest.EVENT_SUBSCRIPTIONS), handled - set(manifest.EVENT_SUBSCRIPTIONS)
    for event_type in handled:
        assert set(manifest.EVENT_SUBSCRIPTIONS[event_type]) <= subscribed, event_type


def test_every_web_api_method_called_is_covered_by_a_manifest_scope():
    scopes = set(yaml.safe_load((ROOT / "slack" / "manifest.yml").read_text())["oauth_config"]["scopes"]["bot"])
    called = _methods_called()
    assert {"conversations.history", "chat.postMessage", "users.list", "oauth.v2.access"} <= called  # it sees them
    unknown = called - set(manifest.METHOD_SCOPES)
    assert not unknown, f"Web API methods without a scope entry in api/slack/manifest.py: {unknown}"
    for method in called:
        assert set(manifest.METHOD_SCOPES[method]) <= scopes, method
    assert scopes == set(manifest.bot_scopes())  # the install URL asks for exactly these
