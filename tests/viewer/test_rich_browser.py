"""Every part of a real Slack message in a real headless Chromium (api/viewer/rich.py through the pages): a bot's
attachment card, a link unfurl, a Block Kit message, modern and legacy (2015-era `file`) files, a file comment,
a huddle, a canvas update and a hostile card, posted as signed Events API requests into a channel of its own
(in the viewer tests' second workspace, so the first one's counts stay as its tests expect). The cards are
visible, buttons are inert, nothing is loaded from another host (every image is a link), no console error.
Screenshots: test-artifacts/viewer-rich-*.png."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.slack.helpers import created, msg, post_event
from tests.viewer.test_viewer_browser import Watch, _sign_in
from tests.viewer.viewer_data import SCRIPT, Archive

BOT = "B0JL6RASU"


def _rich_messages(channel: str, start: datetime) -> dict[str, dict[str, Any]]:
    """Message events as Slack sends them (shapes from Slack's references), by key, oldest first."""
    def ts(i: int) -> str:
        return f"{int((start + timedelta(minutes=i)).timestamp())}.000100"

    attachment = {
        "mrkdwn_in": ["text"], "color": "#36a64f", "pretext": "Deploy finished for *api*",
        "author_name": "ci-runner", "author_link": "https://ci.example.com/runner",
        "author_icon": "https://ci.example.com/icon.png", "title": "Build #1234",
        "title_link": "https://ci.example.com/builds/1234", "text": "All `42` checks passed, approved by <@URICK>",
        "fields": [{"title": "Environment", "value": "production", "short": True},
                   {"title": "Duration", "value": "3 min 42 s", "short": True},
                   {"title": "Changes", "value": "• fix login\n• faster search", "short": False}],
        "thumb_url": "https://ci.example.com/thumb.png", "footer": "CI",
        "footer_icon": "https://ci.example.com/footer.png", "ts": int(start.timestamp()),
        "fallback": "Build #1234 passed"}
    unfurl = {"service_name": "Example News", "service_icon": "https://news.example.com/favicon.ico",
              "title": "Archive everything", "title_link": "https://news.example.com/story",
              "text": "Why chat history matters.", "from_url": "https://news.example.com/story",
              "original_url": "https://news.example.com/story", "image_url": "https://news.example.com/story.jpg",
              "fallback": "Example News: Archive everything"}
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": "Weekly report :bar_chart:", "emoji": True}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "*Sales* are up, thanks <@UROSA>"},
         "fields": [{"type": "mrkdwn", "text": "*Region*\nEMEA"}, {"type": "mrkdwn", "text": "*Growth*\n+12%"}],
         "accessory": {"type": "image", "image_url": "https://charts.example.com/c.png", "alt_text": "sales chart"}},
        {"type": "context", "elements": [{"type": "image", "image_url": "https://charts.example.com/i.png",
                                          "alt_text": "icon"},
                                         {"type": "mrkdwn", "text": "Updated by <@URICK>"}]},
        {"type": "divider"},
        {"type": "actions", "elements": [
            {"type": "button", "text": {"type": "plain_text", "text": "Approve"}, "style": "primary", "value": "ok"},
            {"type": "button", "text": {"type": "plain_text", "text": "Open dashboard"},
             "url": "https://dash.example.com/"},
            {"type": "static_select", "placeholder": {"type": "plain_text", "text": "Pick a quarter"}}]},
        {"type": "rich_text", "elements": [
            {"type": "rich_text_section", "elements": [
                {"type": "text", "text": "Notes "}, {"type": "text", "text": "bold", "style": {"bold": True}},
                {"type": "text", "text": ", "}, {"type": "text", "text": "code", "style": {"code": True}},
                {"type": "text", "text": ", "}, {"type": "emoji", "name": "wave", "skin_tone": 2},
                {"type": "text", "text": " "}, {"type": "emoji", "name": "partyparrot"},
                {"type": "text", "text": " "}, {"type": "broadcast", "range": "here"},
                {"type": "text", "text": " on "},
                {"type": "date", "timestamp": int(start.timestamp()), "format": "{date_short} at {time}",
                 "fallback": "a date"}]},
            {"type": "rich_text_list", "style": "ordered", "indent": 0, "elements": [
                {"type": "rich_text_section", "elements": [{"type": "text", "text": "first item"}]},
                {"type": "rich_text_section", "elements": [{"type": "text", "text": "second item"}]}]},
            {"type": "rich_text_list", "style": "bullet", "indent": 1, "elements": [
                {"type": "rich_text_section", "elements": [{"type": "text", "text": "nested bullet"}]}]},
            {"type": "rich_text_quote", "elements": [{"type": "text", "text": "a quoted line"}]},
            {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": "make deploy\nmake check"}]}]},
    ]
    legacy_file = {"id": "F0LEGACY01", "created": 1440000000, "name": "spec-2015.pdf", "title": "Spec 2015",
                   "mimetype": "application/pdf", "filetype": "pdf", "user": "UROSA", "mode": "hosted",
                   "size": 48213, "url_private": "https://files.slack.com/files-pri/T1-F0LEGACY01/spec-2015.pdf",
                   "permalink": "https://example.slack.com/files/UROSA/F0LEGACY01/spec-2015.pdf"}
    hostile = {"color": "#fff;}body{display:none", "title": SCRIPT, "title_link": "javascript:alert('title')",
               "author_name": "\u202eevil author", "author_link": "data:text/html,<script>alert(1)</script>",
               "image_url": "javascript:alert('img')", "text": f"{SCRIPT} <javascript:alert(1)|click>",
               "footer_icon": "http://tracker.example.net/pixel.gif"}
    return {
        "card": msg(channel, ts(0), "", user=None, subtype="bot_message", bot_id=BOT, username="deploy-hook",
                    bot_profile={"id": BOT, "name": "Deploy Bot", "app_id": "A0DEPLOY", "deleted": False},
                    attachments=[attachment]),
        "unfurl": msg(channel, ts(1), "Read <https://news.example.com/story>", user="UROSA", attachments=[unfurl]),
        "blocks": msg(channel, ts(2), "Weekly report (fallback text)", user="URICK", blocks=blocks),
        "files": msg(channel, ts(3), "Files of the week", user="UROSA", subtype="file_share", files=[
            {"id": "F0TOMB0001", "mode": "tombstone"},
            {"id": "F0LIMIT001", "mode": "hidden_by_limit"},
            {"id": "F0GDOC0001", "name": "Roadmap", "title": "Roadmap", "mode": "external", "is_external": True,
             "external_type": "gdrive", "external_url": "https://docs.example.com/roadmap"},
            {"id": "F0NOTE0001", "name": "notes.txt", "title": "notes.txt", "mimetype": "text/plain", "size": 12,
             "url_private": "https://files.slack.com/files-pri/T1-F0NOTE0001/notes.txt"}]),
        "legacy": msg(channel, ts(4), "<@UROSA|rosa> uploaded a file: <https://example.slack.com/files/UROSA/"
                                     "F0LEGACY01/spec-2015.pdf|Spec 2015>", user="UROSA", subtype="file_share",
                      file=legacy_file, upload=True),
        "comment": msg(channel, ts(5), "<@URICK|rick> commented on <@UROSA|rosa>'s file <https://example.slack.com/"
                                      "files/UROSA/F0LEGACY01/spec-2015.pdf|Spec 2015>: Looks great",
                       user="URICK", subtype="file_comment", file=legacy_file,
                       comment={"id": "Fc0COMMENT1", "created": 1440000100, "timestamp": 1440000100,
                                "user": "URICK", "comment": "Looks great, *ship it*"}),
        "huddle": msg(channel, ts(6), "", user="UROSA", subtype="huddle_thread", room={
            "id": "R0HUDDLE01", "name": "", "created_by": "UROSA", "date_start": int(start.timestamp()) + 360,
            "date_end": int(start.timestamp()) + 2160, "participants": [], "participant_history": ["UROSA", "URICK"],
            "has_ended": True, "call_family": "huddle"}),
        "canvas": msg(channel, ts(7), "", user="URICK", subtype="channel_canvas_updated"),
        "hostile": msg(channel, ts(8), "", user=None, subtype="bot_message", bot_id="B0EVIL0001",
                       username=SCRIPT, attachments=[hostile]),
    }


@pytest.fixture(scope="module")
def rich_channel(app, viewer_archive: Archive) -> tuple[str, dict[str, dict[str, Any]]]:
    """A channel of the second workspace holding one message of each kind, posted through the Events API."""
    a = viewer_archive
    client = app.test_client()
    channel = f"CX{uuid.uuid4().hex[:9].upper()}"
    start = (datetime.now(UTC) - timedelta(hours=3)).replace(second=0, microsecond=0)

    def post(event: dict[str, Any]) -> None:
        r = post_event(client, a.other_team, event)
        assert r.status_code == 200 and r.json["outcome"] == "stored", (event.get("subtype"), r.json)

    setup = f"{int((start - timedelta(minutes=5)).timestamp())}.000000"
    for user, name in (("UROSA", "Rosa"), ("URICK", "Rick")):
        post({"type": "team_join", "event_ts": setup, "user": {
            "id": user, "name": name.lower(), "updated": 1_700_000_000, "profile": {"display_name": name}}})
    post(created(channel, "rich-content", setup))
    events = _rich_messages(channel, start)
    for event in events.values():
        if event.get("user") is None:
            del event["user"]
        post(event)
    return channel, events


def _li(page: Page, event: dict[str, Any]):
    return page.locator(f"#timeline li.message[data-ts='{event['ts']}']")


def test_cards_blocks_and_files_show_and_load_nothing_from_elsewhere(browser, served, viewer_archive: Archive,
                                                                     rich_channel, artifacts: Path):
    channel, events = rich_channel
    team = viewer_archive.other_team
    watch = Watch(served)
    context, page = _sign_in(browser, served, watch, viewer_archive.token_other, f"/archive/teams/{team}")
    page.goto(f"{served}/archive/teams/{team}/channels/{channel}")
    expect(page.locator("#channel-name")).to_have_text("#rich-content")

    # the bot's attachment-only message: named from its profile, an "app" badge, the whole card
    card = _li(page, events["card"])
    expect(card.locator(".author")).to_have_text("Deploy Bot")
    expect(card.locator(".badge")).to_have_text("app")
    expect(card.locator(".attachment-pretext")).to_have_text("Deploy finished for api")
    expect(card.locator(".attachment.bar-rgb-121")).to_be_visible()
    expect(card.locator(".attachment-title a")).to_have_attribute("href", "https://ci.example.com/builds/1234")
    expect(card.locator(".attachment-text")).to_have_text("All 42 checks passed, approved by @Rick")
    expect(card.locator(".attachment-field")).to_have_count(3)
    boxes = [card.locator(".attachment-field").nth(i).bounding_box() for i in range(3)]
    assert boxes[0]["y"] == boxes[1]["y"] and boxes[1]["x"] > boxes[0]["x"]  # short fields side by side
    assert boxes[2]["y"] > boxes[0]["y"]
    expect(card.locator(".attachment-footer")).to_contain_text("CI · ")
    bar = card.locator(".attachment").evaluate("el => getComputedStyle(el).borderLeftColor")
    assert bar == "rgb(85, 170, 85)"
    card.scroll_into_view_if_needed()
    card.screenshot(path=str(artifacts / "viewer-rich-card.png"))

    unfurl = _li(page, events["unfurl"])
    expect(unfurl.locator(".attachment-service")).to_have_text("Example News")
    expect(unfurl.locator(".attachment-images a")).to_have_count(2)

    # Block Kit: shown instead of the fallback text; buttons inert; the dashboard button a plain link
    block = _li(page, events["blocks"])
    expect(block.locator(".block-header")).to_have_text("Weekly report 📊")
    expect(block.locator(".message-text")).not_to_contain_text("fallback text")
    expect(block.locator("button.block-button")).to_be_disabled()
    expect(block.locator("a.block-button")).to_have_attribute("href", "https://dash.example.com/")
    expect(block.locator(".block-select")).to_have_text("Pick a quarter ▾")
    expect(block.locator(".block-fields .block-field")).to_have_count(2)
    expect(block.locator("ol.rt-list li")).to_have_text(["first item", "second item"])
    expect(block.locator("ul.rt-list li")).to_have_text(["nested bullet"])
    expect(block.locator(".rt-section").first).to_contain_text("👋🏻 :partyparrot: @here on ")
    assert block.locator("pre.rt-pre").inner_text() == "make deploy\nmake check"  # the <br> a line break
    block.scroll_into_view_if_needed()
    block.screenshot(path=str(artifacts / "viewer-rich-blocks.png"))

    # files: deleted, hidden by the plan, external (links out), not stored yet; the legacy single `file` too
    files = _li(page, events["files"])
    expect(files.locator("li.file")).to_have_count(4)
    expect(files.locator("li.file-deleted")).to_contain_text("This file was deleted.")
    expect(files.locator("li.file-hidden")).to_contain_text("hidden by the workspace's plan limit")
    expect(files.locator("li.file-external a")).to_have_attribute("href", "https://docs.example.com/roadmap")
    legacy = _li(page, events["legacy"])
    expect(legacy.locator("li.file")).to_contain_text("Spec 2015")
    comment = _li(page, events["comment"])
    expect(comment.locator(".file-comment")).to_have_text("@Rick commented: Looks great, ship it")
    huddle = _li(page, events["huddle"])
    expect(huddle.locator(".huddle")).to_contain_text("🎧 Huddle")
    expect(huddle.locator(".huddle")).to_contain_text("with @Rosa, @Rick")
    expect(_li(page, events["canvas"]).locator(".message-note")).to_have_text("updated the channel canvas")
    files.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "viewer-rich-files.png"))

    # the hostile card: no script, no handler, no unsafe link, no image, the colour a default class
    hostile = _li(page, events["hostile"])
    expect(hostile.locator(".attachment.bar-default")).to_be_visible()
    expect(hostile.locator(".attachment-title")).to_contain_text("<script>")
    found = page.evaluate("""() => ({
        active: document.querySelectorAll(
            '#timeline script, #timeline img, #timeline svg, #timeline iframe, #timeline form, #timeline input, '
            + '#timeline [style], #timeline video').length,
        handlers: Array.from(document.querySelectorAll('#timeline *')).filter(
            el => Array.from(el.attributes).some(a => a.name.startsWith('on'))).length,
        hrefs: Array.from(document.querySelectorAll('#timeline a[href]')).map(a => a.protocol),
        live: Array.from(document.querySelectorAll('#timeline button.block-button')).filter(b => !b.disabled).length,
    })""")
    assert found == {"active": 0, "handlers": 0, "hrefs": found["hrefs"], "live": 0}
    assert set(found["hrefs"]) <= {"http:", "https:"}
    page.screenshot(path=str(artifacts / "viewer-rich-channel.png"), full_page=True)

    assert watch.hosts == {watch.host}  # every image was a link: nothing asked of another host
    assert watch.problems == []
    context.close()
