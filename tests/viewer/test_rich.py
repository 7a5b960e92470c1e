"""api/viewer/rich.py: Block Kit blocks, attachment cards, file comments, huddles -> safe HTML (pure, no database).

Inputs are Slack's documented shapes, written by hand from the Block Kit and "Secondary message attachments"
references. Hostile and random inputs go through an independent allow-list checker (html.parser): only the
allowed tags, attributes and class names, hrefs that are http(s) (or a same-site channel path), inert buttons,
balanced tags, balanced bidi controls per text node, no image or style anywhere.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markupsafe import Markup

from api.slack.codec import compress_json
from api.slack.messages import Message
from api.viewer import views
from api.viewer.rich import (
    MAX_ATTACHMENTS,
    MAX_BLOCKS,
    Names,
    attachments_html,
    blocks_html,
    bot_name,
    extras_html,
    user_ids,
)
from tests.viewer.html_tree import Element, parse

USERS = {"U1": "Ann", "U2": "Bo"}
CHANNELS = {"C1": "general"}
NAMES = Names(USERS, CHANNELS, lambda c: f"/archive/teams/T1/channels/{c}")
LINK = 'rel="noopener noreferrer" target="_blank"'


def blocks(items: Any, names: Names = NAMES) -> str:
    out = blocks_html(items, names)
    assert isinstance(out, Markup)
    check(str(out))
    return str(out)


def cards(items: Any, names: Names = NAMES) -> str:
    out = attachments_html(items, names)
    assert isinstance(out, Markup)
    check(str(out))
    return str(out)


def rich_text(*elements: Any) -> list[dict[str, Any]]:
    return [{"type": "rich_text", "elements": [{"type": "rich_text_section", "elements": list(elements)}]}]


def section_html(*elements: Any) -> str:
    """The inside of the one rich_text_section these elements make."""
    out = blocks(rich_text(*elements))
    m = re.fullmatch(r'<div class="block block-rich-text"><div class="rt-section">(.*)</div></div>', out, re.S)
    assert m is not None, out
    return m.group(1)


# --- the independent checker -------------------------------------------------------------------------------

ALLOWED_ATTRS = {
    "div": {"class"}, "span": {"class"}, "ul": {"class"}, "ol": {"class", "start"}, "li": set(),
    "blockquote": {"class"}, "pre": {"class"}, "code": set(), "b": set(), "i": set(), "s": set(), "u": set(),
    "br": set(), "hr": {"class"}, "a": {"href", "rel", "target", "class"}, "button": {"type", "class", "disabled"},
}
CLASSES = {
    "block", "block-section", "block-text", "block-fields", "block-field", "block-accessory", "block-header",
    "block-divider", "block-context", "context-item", "block-image", "block-actions", "block-rich-text",
    "block-video", "block-file", "block-markdown", "block-input", "block-button", "primary", "danger",
    "block-select", "image-link", "rt-section", "rt-quote", "rt-pre", "rt-list", "border", "mention", "muted",
    "attachment-wrap", "attachment-pretext", "attachment", "attachment-service", "attachment-author",
    "attachment-title", "attachment-text", "attachment-fields", "attachment-field", "short", "field-title",
    "field-value", "attachment-images", "attachment-url", "attachment-footer", "bar-default", "bar-good",
    "bar-warning", "bar-danger", "file-comment", "huddle", "huddle-title",
}
CLASS_PATTERNS = re.compile(r"bar-rgb-[0-3]{3}|indent-[0-8]")
OPENERS = {"\u202a": "E", "\u202b": "E", "\u202d": "E", "\u202e": "E", "\u2066": "I", "\u2067": "I", "\u2068": "I"}
VOID = {"br", "hr"}


class Checked(HTMLParser):
    """Parses rendered HTML, collecting everything outside the allow-list as problems."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.texts: list[str] = []
        self.links: list[dict[str, str]] = []
        self.problems: list[str] = []
        self._node: list[str] = []

    def _end_node(self) -> None:
        node = "".join(self._node)
        self._node.clear()
        bidi: list[str] = []
        for ch in node + "\n":
            if ch in OPENERS:
                bidi.append(OPENERS[ch])
            elif ch in "\u202c\u2069":
                if not bidi or bidi.pop() != ("E" if ch == "\u202c" else "I"):
                    self.problems.append(f"unmatched bidi closer in {node!r}")
            elif ch == "\n" and bidi:
                self.problems.append(f"open bidi control at end of {node!r}")
                bidi.clear()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._end_node()
        if tag not in ALLOWED_ATTRS:
            self.problems.append(f"tag {tag}")
            return
        names = [k for k, _ in attrs]
        if len(set(names)) != len(names) or not set(names) <= ALLOWED_ATTRS[tag]:
            self.problems.append(f"attributes {attrs} on {tag}")
        values = {k: v or "" for k, v in attrs}
        for cls in values.get("class", "").split():
            if cls not in CLASSES and not CLASS_PATTERNS.fullmatch(cls):
                self.problems.append(f"class {cls!r}")
        if tag == "a":
            self._check_link(values)
        if tag == "button" and (values.get("type") != "button" or "disabled" not in values):
            self.problems.append(f"live button {values}")
        if tag == "ol" and "start" in values and not values["start"].isdigit():
            self.problems.append(f"ol start {values['start']!r}")
        if tag not in VOID:
            self.stack.append(tag)

    def _check_link(self, values: dict[str, str]) -> None:
        if "a" in self.stack or "button" in self.stack:
            self.problems.append("nested link")
        href = values.get("href", "")
        seen = re.sub(r"[\t\n\r]", "", href.strip("".join(chr(c) for c in range(0x21)))).lower()
        if values.get("class") == "mention":
            if not (seen.startswith("/") and not seen.startswith(("//", "/\\"))):
                self.problems.append(f"channel href {href!r}")
        else:
            if not re.match(r"(https?|mailto):", seen):
                self.problems.append(f"href scheme {href!r}")
            if values.get("rel") != "noopener noreferrer" or values.get("target") != "_blank":
                self.problems.append(f"external link attributes {values}")
        self.links.append(values)

    def handle_endtag(self, tag: str) -> None:
        self._end_node()
        if tag in VOID or not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> with open {self.stack}")
        else:
            self.stack.pop()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.problems.append(f"self-closing <{tag}/>")

    def handle_data(self, data: str) -> None:
        self.texts.append(data)
        self._node.append(data)

    def handle_comment(self, data: str) -> None:
        self.problems.append("comment")

    def handle_decl(self, decl: str) -> None:
        self.problems.append("declaration")

    def unknown_decl(self, data: str) -> None:
        self.problems.append("unknown declaration")

    def handle_pi(self, data: str) -> None:
        self.problems.append("processing instruction")


def check(html: str) -> Checked:
    parser = Checked()
    parser.feed(html)
    parser.close()
    parser._end_node()
    assert not parser.problems, parser.problems[:5]
    assert parser.stack == [], f"unclosed {parser.stack}"
    assert "<" not in "".join(parser.texts) or "&lt;" in html  # a literal < only ever as text
    return parser


def visible(html: str) -> str:
    return parse(html).text()


def tree(html: str) -> Element:
    return parse(html)


# --- attachments, by hand --------------------------------------------------------------------------------------

DOC_ATTACHMENT = {  # Slack's reference example, every field
    "mrkdwn_in": ["text"], "color": "#36a64f", "pretext": "Optional pre-text that appears above the attachment block",
    "author_name": "author_name", "author_link": "http://flickr.com/bobby/",
    "author_icon": "https://placeimg.com/16/16/people", "title": "title", "title_link": "https://api.slack.com/",
    "text": "Optional `text` that appears within the attachment",
    "fields": [{"title": "A field's title", "value": "This field's value", "short": False},
               {"title": "A short field's title", "value": "A short field's value", "short": True},
               {"title": "A second short field's title", "value": "A second short field's value", "short": True}],
    "thumb_url": "http://placekitten.com/g/200/200", "footer": "footer",
    "footer_icon": "https://platform.slack-edge.com/img/default_application_icon.png", "ts": 123456789,
}


def test_reference_attachment_shows_every_part() -> None:
    out = cards([DOC_ATTACHMENT])
    root = tree(out)
    assert root.find(class_="attachment-pretext").text() == DOC_ATTACHMENT["pretext"]
    card = root.find(class_="attachment")
    assert card.classes == {"attachment", "bar-rgb-121"}  # #36a64f quantised
    author = card.find(class_="attachment-author").find("a")
    assert (author.get("href"), author.text()) == ("http://flickr.com/bobby/", "author_name")
    title = card.find(class_="attachment-title").find("a")
    assert (title.get("href"), title.text()) == ("https://api.slack.com/", "title")
    text = card.find(class_="attachment-text")
    assert text.find("code").text() == "text" and text.text() == "Optional text that appears within the attachment"
    fields = card.find_all(class_="attachment-field")
    assert [f.classes for f in fields] == [{"attachment-field"}, {"attachment-field", "short"},
                                           {"attachment-field", "short"}]
    assert [(f.find(class_="field-title").text(), f.find(class_="field-value").text()) for f in fields] == [
        (x["title"], x["value"]) for x in DOC_ATTACHMENT["fields"]]
    images = card.find(class_="attachment-images").find_all("a")
    assert [(a.get("href"), a.text()) for a in images] == [
        ("http://placekitten.com/g/200/200", "🖼 thumbnail: placekitten.com/g/200/200"),
        ("https://placeimg.com/16/16/people", "🖼 author icon"),
        ("https://platform.slack-edge.com/img/default_application_icon.png", "🖼 footer icon")]
    assert card.find(class_="attachment-footer").text() == "footer · 29 Nov 1973 21:33"
    assert "<img" not in out and "style" not in out


def test_footer_date_is_in_the_readers_zone() -> None:
    import zoneinfo

    names = Names(USERS, CHANNELS, None, zoneinfo.ZoneInfo("America/New_York"))
    out = cards([{"footer": "CI", "ts": "1700000000.5"}], names)
    assert tree(out).find(class_="attachment-footer").text() == "CI · 14 Nov 2023 17:13"


@pytest.mark.parametrize(("color", "css"), [
    ("good", "bar-good"), ("warning", "bar-warning"), ("danger", "bar-danger"),
    ("#36a64f", "bar-rgb-121"), ("36a64f", "bar-rgb-121"), ("#FFF", "bar-rgb-333"), ("#000000", "bar-rgb-000"),
    ("#439FE0", "bar-rgb-123"), (None, "bar-default"), ("", "bar-default"), ("red", "bar-default"),
    ("Good", "bar-default"), ("#12345", "bar-default"), ("#1234567", "bar-default"), (" #ffffff", "bar-default"),
    ("#fff;}body{display:none", "bar-default"), ('#fff" onmouseover="alert(1)', "bar-default"),
    ("expression(alert(1))", "bar-default"), ("url(javascript:alert(1))", "bar-default"),
    ("#ffffff\n", "bar-default"), (123456, "bar-default"), (["#fff"], "bar-default"), ({"c": 1}, "bar-default"),
])
def test_colour_bar_is_a_fixed_class(color: Any, css: str) -> None:
    out = cards([{"text": "x", "color": color}])
    assert tree(out).find(class_="attachment").classes == {"attachment", css}
    assert "style" not in out and "onmouseover" not in out.replace("&#34;", "")


def test_fallback_only_when_nothing_else() -> None:
    out = cards([{"fallback": "Plain fallback", "color": "good"}])
    assert visible(out) == "Plain fallback"
    out = cards([{"fallback": "Plain fallback", "title": "A title"}])
    assert "fallback" not in visible(out) and visible(out) == "A title"
    assert cards([{"color": "good"}]) == "" and cards([]) == "" and cards(None) == ""


def test_pretext_alone_has_no_empty_card() -> None:
    out = cards([{"pretext": "*Heads up*"}])
    assert out == '<div class="attachment-wrap"><div class="attachment-pretext"><b>Heads up</b></div></div>'


def test_link_unfurl() -> None:
    unfurl = {"service_name": "Example News", "service_icon": "https://example.com/favicon.ico",
              "title": "A story", "title_link": "https://example.com/story", "text": "What happened",
              "from_url": "https://example.com/story?utm=1", "original_url": "https://example.com/story?utm=1",
              "image_url": "https://example.com/story.jpg", "image_width": 800, "fallback": "Example News: A story",
              "video_html": '<iframe src="https://evil.example/"></iframe>'}
    out = cards([unfurl])
    root = tree(out)
    assert root.find(class_="attachment-service").text() == "Example News"
    assert root.find(class_="attachment-url").find("a").get("href") == "https://example.com/story?utm=1"
    hrefs = [a.get("href") for a in root.find(class_="attachment-images").find_all("a")]
    assert hrefs == ["https://example.com/story.jpg", "https://example.com/favicon.ico"]
    assert "iframe" not in out and "evil.example" not in out and "Example News: A story" not in visible(out)


def test_attachment_text_is_mrkdwn_with_names() -> None:
    out = cards([{"text": "*deploy* done by <@U1> in <#C1>, see <https://ci.example/1|build 1>",
                  "fields": [{"title": "Env", "value": "_prod_", "short": True}]}])
    assert ('<div class="attachment-text"><b>deploy</b> done by <span class="mention">@Ann</span> in '
            '<a class="mention" href="/archive/teams/T1/channels/C1">#general</a>, see '
            f'<a href="https://ci.example/1" {LINK}>build 1</a></div>') in out
    assert '<div class="field-value"><i>prod</i></div>' in out


def test_attachment_with_blocks_and_shared_message() -> None:
    shared = {"author_name": "Ann", "text": "the text fallback", "footer": "Posted in #general",
              "message_blocks": [{"team": "T1", "channel": "C1", "ts": "1.2",
                                  "message": {"blocks": rich_text({"type": "text", "text": "forwarded words"})}}]}
    out = cards([shared])
    assert "forwarded words" in visible(out) and "the text fallback" not in visible(out)
    out = cards([{"blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "*in a card*"}}],
                  "color": "danger"}])
    assert "<b>in a card</b>" in out


def test_legacy_attachment_actions_are_inert() -> None:
    out = cards([{"text": "Approve?", "callback_id": "x", "actions": [
        {"name": "ok", "text": "Approve", "type": "button", "value": "ok", "style": "primary"},
        {"name": "no", "text": "Reject", "type": "button", "value": "no", "style": "danger",
         "confirm": {"title": "Sure?"}},
        {"name": "go", "text": "Open", "type": "button", "url": "https://example.com/go"}]}])
    buttons = tree(out).find_all("button")
    assert [(b.text(), b.classes, "disabled" in b.attrs) for b in buttons] == [
        ("Approve", {"block-button", "primary"}, True), ("Reject", {"block-button", "danger"}, True)]
    assert tree(out).find("a", class_="block-button").get("href") == "https://example.com/go"
    assert "form" not in out


# --- blocks, by hand --------------------------------------------------------------------------------------------

def test_section_with_fields_and_accessories() -> None:
    out = blocks([{"type": "section", "text": {"type": "mrkdwn", "text": "*Hello* <@U2>"},
                   "fields": [{"type": "mrkdwn", "text": "*Priority*\nHigh"},
                              {"type": "plain_text", "text": "Due :tada:", "emoji": True}],
                   "accessory": {"type": "image", "image_url": "https://example.com/cat.png", "alt_text": "a cat"}}])
    assert out == (
        '<div class="block block-section"><div class="block-text"><b>Hello</b> <span class="mention">@Bo</span>'
        '</div><div class="block-fields"><div class="block-field"><b>Priority</b><br>High</div>'
        '<div class="block-field">Due 🎉</div></div><div class="block-accessory">'
        f'<a href="https://example.com/cat.png" {LINK} class="image-link">🖼 image: a cat</a></div></div>')
    out = blocks([{"type": "section", "text": {"type": "plain_text", "text": "Pick"},
                   "accessory": {"type": "button", "text": {"type": "plain_text", "text": "Click Me"},
                                 "value": "click_me_123", "action_id": "button-action"}}])
    assert '<button type="button" class="block-button" disabled>Click Me</button>' in out


def test_plain_text_emoji_flag() -> None:
    assert blocks([{"type": "header", "text": {"type": "plain_text", "text": "Ship it :rocket:", "emoji": True}}]) \
        == '<div class="block block-header">Ship it 🚀</div>'
    assert blocks([{"type": "header", "text": {"type": "plain_text", "text": ":rocket: *x*", "emoji": False}}]) \
        == '<div class="block block-header">:rocket: *x*</div>'


def test_context_divider_image_header() -> None:
    out = blocks([
        {"type": "header", "text": {"type": "plain_text", "text": "Budget Performance"}},
        {"type": "divider"},
        {"type": "context", "elements": [
            {"type": "image", "image_url": "https://example.com/p.png", "alt_text": "profile"},
            {"type": "mrkdwn", "text": "*Ann* has approved"}, {"type": "plain_text", "text": "Last updated"}]},
        {"type": "image", "title": {"type": "plain_text", "text": "Chart"}, "image_url": "https://example.com/c.png",
         "alt_text": "a chart"},
        {"type": "image", "slack_file": {"url": "https://files.slack.com/files-pri/T1-F1/x.png"},
         "alt_text": "slack file"}])
    root = tree(out)
    assert root.find(class_="block-header").text() == "Budget Performance"
    assert root.find("hr").classes == {"block-divider"}
    items = root.find_all(class_="context-item")
    assert [i.text() for i in items] == ["🖼 image: profile", "Ann has approved", "Last updated"]
    images = root.find_all(class_="block-image")
    assert [(i.find("a").get("href"), i.text()) for i in images] == [
        ("https://example.com/c.png", "🖼 image: Chart"),
        ("https://files.slack.com/files-pri/T1-F1/x.png", "🖼 image: slack file")]


def test_actions_are_inert() -> None:
    out = blocks([{"type": "actions", "elements": [
        {"type": "button", "text": {"type": "plain_text", "text": "Approve"}, "style": "primary", "value": "a"},
        {"type": "button", "text": {"type": "plain_text", "text": "Docs"}, "url": "https://example.com/docs"},
        {"type": "button", "text": {"type": "plain_text", "text": "Evil"}, "url": "javascript:alert(1)"},
        {"type": "static_select", "placeholder": {"type": "plain_text", "text": "Pick a fruit"},
         "options": [{"text": {"type": "plain_text", "text": "Apple"}, "value": "a"}]},
        {"type": "static_select", "initial_option": {"text": {"type": "plain_text", "text": "Pear"}, "value": "p"}},
        {"type": "users_select", "initial_user": "U1"},
        {"type": "overflow", "options": []},
        {"type": "datepicker", "initial_date": "1990-04-28"},
        {"type": "checkboxes", "options": [{"text": {"type": "mrkdwn", "text": "one"}, "value": "1"},
                                           {"text": {"type": "mrkdwn", "text": "two"}, "value": "2"}],
         "initial_options": [{"text": {"type": "mrkdwn", "text": "two"}, "value": "2"}]}]}])
    root = tree(out)
    buttons = root.find_all("button")
    assert [b.text() for b in buttons] == ["Approve", "Evil"]
    assert all(b.get("type") == "button" and "disabled" in b.attrs for b in buttons)
    assert [a.get("href") for a in root.find_all("a")] == ["https://example.com/docs"]
    assert [s.text() for s in root.find_all("span", class_="block-select")] == [
        "Pick a fruit ▾", "Pear ▾", "@Ann ▾", "⋯", "1990-04-28", "☐ one", "☑ two"]
    assert "<form" not in out and "<input" not in out and "<select" not in out


def test_rich_text_styles_and_mentions() -> None:
    assert section_html(
        {"type": "text", "text": "Hello "}, {"type": "text", "text": "bold", "style": {"bold": True}},
        {"type": "text", "text": " "}, {"type": "text", "text": "it", "style": {"italic": True}},
        {"type": "text", "text": "gone", "style": {"strike": True}},
        {"type": "text", "text": "x = 1", "style": {"code": True}},
        {"type": "text", "text": "all", "style": {"bold": True, "italic": True, "strike": True}},
    ) == "Hello <b>bold</b> <i>it</i><s>gone</s><code>x = 1</code><b><i><s>all</s></i></b>"
    assert section_html(
        {"type": "user", "user_id": "U1"}, {"type": "channel", "channel_id": "C1"},
        {"type": "usergroup", "usergroup_id": "S0614TZR7"}, {"type": "broadcast", "range": "here"},
        {"type": "link", "url": "https://example.com", "text": "site"}, {"type": "link", "url": "https://x.io"},
        {"type": "user", "user_id": "U9", "style": {"bold": True}},
    ) == ('<span class="mention">@Ann</span><a class="mention" href="/archive/teams/T1/channels/C1">#general</a>'
          '<span class="mention">@S0614TZR7</span><span class="mention">@here</span>'
          f'<a href="https://example.com" {LINK}>site</a><a href="https://x.io" {LINK}>https://x.io</a>'
          '<b><span class="mention">@U9</span></b>')


@pytest.mark.parametrize(("element", "shown"), [
    ({"type": "emoji", "name": "basketball"}, "🏀"),
    ({"type": "emoji", "name": "wave", "unicode": "1f44b", "skin_tone": 3}, "👋🏼"),
    ({"type": "emoji", "name": "wave::skin-tone-2"}, "👋🏻"),
    ({"type": "emoji", "name": "some_new_one", "unicode": "1f9cc"}, "\U0001F9CC"),
    ({"type": "emoji", "name": "man-technologist", "unicode": "1f468-200d-1f4bb"}, "👨\u200d💻"),
    ({"type": "emoji", "name": "partyparrot"}, ":partyparrot:"),
    ({"type": "emoji", "name": "evil", "unicode": "202e"}, ":evil:"),
    ({"type": "emoji", "name": "lt", "unicode": "3c"}, ":lt:"),
    ({"type": "emoji", "name": "nul", "unicode": "0"}, ":nul:"),
    ({"type": "emoji", "name": "sur", "unicode": "d800"}, ":sur:"),
    ({"type": "emoji", "name": "big", "unicode": "110000"}, ":big:"),
    ({"type": "emoji", "name": "x<b>", "unicode": "zz"}, ":x&lt;b&gt;:"),
    ({"type": "emoji"}, ""),
    ({"type": "date", "timestamp": 1720710212, "format": "{date_num} at {time}", "fallback": "July 11"},
     "2024-07-11 at 15:03"),
    ({"type": "date", "timestamp": 1720710212, "format": "{date_long} {unknown}"}, "Thursday, 11 July 2024 {unknown}"),
    ({"type": "date", "timestamp": "soon", "format": "{date}", "fallback": "some day"}, "some day"),
    ({"type": "date", "timestamp": 1720710212, "format": "{date_num}", "url": "https://example.com/cal"},
     f'<a href="https://example.com/cal" {LINK}>2024-07-11</a>'),
    ({"type": "color", "value": "#F405B3"}, "#F405B3"),
    ({"type": "team", "team_id": "T123"}, "T123"),
    ({"type": "future_thing", "text": "shown anyway"}, "shown anyway"),
    ({"type": "future_thing"}, ""),
])
def test_rich_text_elements(element: dict[str, Any], shown: str) -> None:
    assert section_html({"type": "text", "text": "["}, element, {"type": "text", "text": "]"}) == f"[{shown}]"


def test_rich_text_lists_quote_preformatted() -> None:
    out = blocks([{"type": "rich_text", "elements": [
        {"type": "rich_text_list", "style": "bullet", "indent": 0, "border": 0, "elements": [
            {"type": "rich_text_section", "elements": [{"type": "text", "text": "huddles"}]},
            {"type": "rich_text_section", "elements": [{"type": "text", "text": "canvas"}]}]},
        {"type": "rich_text_list", "style": "bullet", "indent": 1, "elements": [
            {"type": "rich_text_section", "elements": [{"type": "text", "text": "nested"}]}]},
        {"type": "rich_text_list", "style": "ordered", "indent": 0, "offset": 2, "border": 1, "elements": [
            {"type": "rich_text_section", "elements": [{"type": "text", "text": "third"}]}]},
        {"type": "rich_text_quote", "elements": [{"type": "text", "text": "What we need is "},
                                                 {"type": "text", "text": "good", "style": {"italic": True}}]},
        {"type": "rich_text_preformatted", "border": 0, "elements": [
            {"type": "text", "text": "line 1\nline *2*", "style": {"bold": True}},
            {"type": "link", "url": "https://x.io", "text": "x"}]},
    ]}])
    assert out == (
        '<div class="block block-rich-text"><ul class="rt-list indent-0"><li>huddles</li><li>canvas</li></ul>'
        '<ul class="rt-list indent-1"><li>nested</li></ul>'
        '<ol class="rt-list indent-0 border" start="3"><li>third</li></ol>'
        '<blockquote class="rt-quote">What we need is <i>good</i></blockquote>'
        f'<pre class="rt-pre">line 1<br>line *2*<a href="https://x.io" {LINK}>x</a></pre></div>')


def test_blocks_that_show_nothing_are_empty() -> None:
    assert blocks([{"type": "divider"}]) == ""
    assert blocks([{"type": "rich_text", "elements": [{"type": "rich_text_section", "elements": []}]}]) == ""
    assert blocks([{"type": "section", "text": {"type": "mrkdwn", "text": "   "}}]) == ""
    assert blocks([{"type": "call", "call_id": "R1"}]) == ""
    assert blocks([]) == "" and blocks(None) == "" and blocks("text") == "" and blocks({"type": "divider"}) == ""
    assert blocks([{"type": "some_new_block", "text": {"type": "mrkdwn", "text": "*kept*"}}]) == \
        '<div class="block"><b>kept</b></div>'


def test_other_block_kinds() -> None:
    out = blocks([{"type": "video", "title": {"type": "plain_text", "text": "Demo"},
                   "title_url": "https://example.com/v", "video_url": "https://example.com/embed",
                   "thumbnail_url": "https://example.com/t.png", "alt_text": "a demo"},
                  {"type": "markdown", "text": "**bold** <b>"},
                  {"type": "file", "external_id": "ABCD1", "source": "remote"},
                  {"type": "input", "label": {"type": "plain_text", "text": "Name"},
                   "element": {"type": "plain_text_input", "placeholder": {"type": "plain_text", "text": "you"}}}])
    root = tree(out)
    assert root.find(class_="block-video").find("a").get("href") == "https://example.com/v"
    assert root.find(class_="block-markdown").text() == "**bold** <b>"
    assert root.find(class_="block-file").text() == "📎 remote file ABCD1"
    assert root.find(class_="block-input").text() == "Name you"


# --- extras, bot names, ids -----------------------------------------------------------------------------------

def test_file_comment_and_huddle() -> None:
    out = str(extras_html({"comment": {"id": "Fc1", "created": 1, "user": "U2", "comment": "nice *chart*"}}, NAMES))
    check(out)
    assert out == ('<div class="file-comment"><span class="mention">@Bo</span> <span class="muted">commented:</span> '
                   'nice <b>chart</b></div>')
    room = {"id": "R1", "name": "", "created_by": "U1", "date_start": 1700000000, "date_end": 1700003600,
            "participants": [], "participant_history": ["U1", "U2"], "has_ended": True}
    out = str(extras_html({"room": room}, NAMES))
    check(out)
    assert visible(out) == "🎧 Huddle · started 14 Nov 2023 22:13 · ended 14 Nov 2023 23:13 · with @Ann, @Bo"
    out = str(extras_html({"room": {"date_start": 1700000000, "date_end": 0, "participants": ["U1"],
                                    "has_ended": False}}, NAMES))
    assert visible(out) == "🎧 Huddle · started 14 Nov 2023 22:13 · ongoing · with @Ann"
    assert str(extras_html({}, NAMES)) == "" and str(extras_html(None, NAMES)) == ""
    assert str(extras_html({"comment": "x", "room": "y"}, NAMES)) == ""


def test_bot_name() -> None:
    assert bot_name({"bot_profile": {"id": "B0JL6RASU", "name": "deploybot"}}, "ignored") == "deploybot"
    assert bot_name({}, "webhook-name") == "webhook-name"
    assert bot_name({"bot_profile": {"name": ["x"]}}, None) is None
    assert bot_name(None, "  ") is None


def test_user_ids_cover_every_name_looked_up() -> None:
    class Recording(dict):
        def __init__(self) -> None:
            super().__init__()
            self.asked: set[str] = set()

        def get(self, key: str, default: str | None = None) -> str | None:
            self.asked.add(key)
            return default

    content = {
        "blocks": [*rich_text({"type": "user", "user_id": "UA"}, {"type": "text", "text": "<@UNOT> as text"}),
                   {"type": "section", "text": {"type": "mrkdwn", "text": "hi <@UB|b>"},
                    "accessory": {"type": "users_select", "initial_user": "UC"}},
                   {"type": "context", "elements": [{"type": "mrkdwn", "text": "<@UD>"}]}],
        "attachments": [{"pretext": "<@UE>", "text": "<@UF>", "footer": "<@UG>",
                         "fields": [{"title": "t", "value": "<@UH>"}],
                         "message_blocks": [{"message": {"blocks": rich_text({"type": "user", "user_id": "UI"})}}]}],
        "comment": {"user": "UJ", "comment": "<@UK>"},
        "room": {"participant_history": ["UL"], "created_by": "UM"},
    }
    users = Recording()
    names = Names(users, {}, None)
    blocks_html(content["blocks"], names)
    attachments_html(content["attachments"], names)
    extras_html(content, names)
    assert users.asked <= user_ids(content)
    # (UF's text is not shown: the shared message's blocks are)
    assert {"UA", "UB", "UC", "UD", "UE", "UG", "UH", "UI", "UJ", "UK", "UL", "UM"} <= users.asked
    assert user_ids(None) == set() and user_ids({"blocks": "x", "attachments": 5}) == set()


# --- hostile ---------------------------------------------------------------------------------------------------

JS_URLS = ["javascript:alert(1)", "JaVaScRiPt:alert(1)", "java\tscript:alert(1)", " javascript:alert(1)",
           "\x01javascript:alert(1)", "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
           "vbscript:msgbox(1)", "//evil.example/x", "/relative", "file:///etc/passwd", "mailto:a@b.c",
           'https://ok.example/" onmouseover="alert(1)', "http\x00://x", ["https://x"], {"u": 1}, 7]
URL_FIELDS = ["author_link", "title_link", "image_url", "thumb_url", "author_icon", "service_icon", "footer_icon",
              "from_url", "original_url"]
SCRIPT = "<script>alert('x')</script><img src=x onerror=alert(1)>"


@pytest.mark.parametrize("url", JS_URLS, ids=range(len(JS_URLS)))
def test_no_unsafe_url_in_any_url_field(url: Any) -> None:
    attachment = {k: url for k in URL_FIELDS} | {
        "author_name": "author", "title": "title", "text": "text",
        "actions": [{"type": "button", "text": "b", "url": url}]}
    block_list = [
        {"type": "image", "image_url": url, "alt_text": "img"},
        {"type": "image", "slack_file": {"url": url}, "alt_text": "img"},
        {"type": "video", "title_url": url, "video_url": url, "title": {"type": "plain_text", "text": "v"}},
        {"type": "context", "elements": [{"type": "image", "image_url": url, "alt_text": "ctx"}]},
        {"type": "actions", "elements": [{"type": "button", "text": {"type": "plain_text", "text": "b"}, "url": url}]},
        {"type": "section", "text": {"type": "plain_text", "text": "s"},
         "accessory": {"type": "image", "image_url": url, "alt_text": "acc"}},
        *rich_text({"type": "link", "url": url, "text": "link"},
                   {"type": "date", "timestamp": 1, "format": "{date_num}", "url": url})]
    for out in (cards([attachment]), blocks(block_list), cards([{"blocks": block_list}])):
        hrefs = [link.get("href") for link in check(out).links]
        if isinstance(url, str) and url.startswith("https://ok.example/"):
            assert all(h == url for h in hrefs)  # escaped in the attribute, so still one harmless URL
        else:
            assert hrefs == [], hrefs
        assert "<button" not in out or 'disabled>' in out


def test_markup_in_every_text_field_is_text() -> None:
    attachment = {k: SCRIPT for k in ("pretext", "author_name", "author_subname", "title", "text", "footer",
                                      "service_name", "fallback")}
    attachment["fields"] = [{"title": SCRIPT, "value": SCRIPT, "short": SCRIPT}]
    attachment["color"] = SCRIPT
    plain = {"type": "plain_text", "text": SCRIPT}
    block_list = [
        {"type": "header", "text": plain}, {"type": "section", "text": {"type": "mrkdwn", "text": SCRIPT},
                                            "fields": [plain]},
        {"type": "context", "elements": [plain, {"type": "image", "alt_text": SCRIPT, "image_url": "https://x"}]},
        {"type": "actions", "elements": [{"type": "button", "text": plain, "style": SCRIPT},
                                         {"type": "static_select", "placeholder": plain}]},
        {"type": SCRIPT, "text": plain},
        {"type": "rich_text", "elements": [
            {"type": "rich_text_section", "elements": [{"type": "text", "text": SCRIPT, "style": {SCRIPT: True}},
                                                       {"type": "link", "url": "https://x", "text": SCRIPT},
                                                       {"type": "emoji", "name": SCRIPT},
                                                       {"type": "date", "timestamp": 5, "format": SCRIPT},
                                                       {"type": "user", "user_id": SCRIPT}]},
            {"type": "rich_text_list", "style": SCRIPT, "indent": SCRIPT, "offset": SCRIPT,
             "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": SCRIPT}]}]}]}]
    comment = {"comment": {"user": SCRIPT, "comment": SCRIPT}, "room": {"name": SCRIPT, "participants": [SCRIPT]}}
    for out in (cards([attachment]), blocks(block_list), str(extras_html(comment, NAMES))):
        check(out)
        assert "<script" not in out and "<img" not in out and "onerror=" not in out.replace("onerror=alert", "")
        assert "&lt;script&gt;" in out


def test_bidi_controls_stay_inside_each_text_run() -> None:
    rlo = "\u202eevil\u2067 isolate"
    attachment = {k: rlo for k in ("pretext", "author_name", "title", "text", "footer", "service_name")}
    attachment["fields"] = [{"title": rlo, "value": rlo}]
    block_list = [{"type": "header", "text": {"type": "plain_text", "text": rlo}},
                  *rich_text({"type": "text", "text": rlo, "style": {"bold": True}},
                             {"type": "link", "url": "https://x", "text": rlo},
                             {"type": "text", "text": "\u202c\u2069 stray closers"})]
    for out in (cards([attachment]), blocks(block_list)):
        check(out)  # the checker fails on any run left open or closer without opener


_FUZZ_KEYS = ["type", "text", "elements", "fields", "accessory", "style", "url", "image_url", "title", "title_link",
              "color", "fallback", "blocks", "attachments", "message_blocks", "message", "user_id", "channel_id",
              "range", "name", "unicode", "skin_tone", "timestamp", "format", "indent", "offset", "border", "short",
              "value", "initial_option", "options", "placeholder", "emoji", "ts", "footer", "pretext", "author_link"]
_FUZZ_WORDS = ["section", "rich_text", "rich_text_section", "rich_text_list", "rich_text_quote", "context", "actions",
               "button", "image", "mrkdwn", "plain_text", "text", "link", "user", "emoji", "date", "ordered",
               "javascript:alert(1)", "https://x.io", "#fff", "good", "<@U1>", "*b*", SCRIPT, "\u202e", "", "U1",
               "1f44d", "202e", "{date_num}", "header", "divider", "static_select", "broadcast", "here"]
# Any JSON-like value built from Block Kit's and attachments' own keys and words: what a hostile or broken export
# could hold where blocks and attachments go.
fuzz_values = st.recursive(
    st.one_of(st.sampled_from(_FUZZ_WORDS), st.integers(-5, 10**12), st.none(), st.booleans(),
              st.sampled_from([1.5, float("nan")])),
    lambda inner: st.one_of(st.lists(inner, max_size=6),
                            st.dictionaries(st.sampled_from(_FUZZ_KEYS), inner, max_size=8)),
    max_leaves=60)


@settings(max_examples=1000, deadline=None, derandomize=True)
@given(value=fuzz_values)
def test_fuzz_never_raises_and_stays_in_the_allow_list(value: Any) -> None:
    for fn in (blocks_html, attachments_html):
        check(str(fn(value, NAMES)))
        check(str(fn([value], NAMES)))
    check(str(extras_html({"comment": value, "room": value}, NAMES)))
    user_ids({"blocks": value, "attachments": [value]})


def nested(depth: int) -> Any:
    value: Any = {"type": "text", "text": "bottom"}
    for i in range(depth):
        value = [value] if i % 2 else {"type": "rich_text_list", "elements": value, "blocks": value,
                                       "message_blocks": [{"message": {"blocks": value}}]}
    return value


def test_deep_nesting_is_bounded() -> None:
    deep = nested(5000)
    start = time.perf_counter()
    check(str(blocks_html([{"type": "rich_text", "elements": [deep]}], NAMES)))
    check(str(attachments_html([{"blocks": [deep], "message_blocks": [deep]}], NAMES)))
    user_ids({"blocks": deep, "attachments": deep})
    assert time.perf_counter() - start < 2


@pytest.mark.parametrize("case", ["blocks", "attachments", "fields", "inline", "list", "options"])
def test_ten_thousand_elements_are_capped_and_fast(case: str) -> None:
    n = 10_000
    section = {"type": "rich_text_section", "elements": [{"type": "text", "text": "w "}] * n}
    start = time.perf_counter()
    if case == "blocks":
        out = blocks([{"type": "section", "text": {"type": "mrkdwn", "text": "b"}}] * n)
        assert out.count("block-section") == MAX_BLOCKS and f"({n - MAX_BLOCKS} more blocks not shown)" in out
    elif case == "attachments":
        out = cards([{"text": "a", "color": "good"}] * n)
        assert out.count('class="attachment ') == MAX_ATTACHMENTS
        assert f"({n - MAX_ATTACHMENTS} more attachments not shown)" in out
    elif case == "fields":
        out = cards([{"fields": [{"title": "t", "value": "v", "short": True}] * n}])
        assert out.count("field-title") == 100
    elif case == "inline":
        out = blocks([{"type": "rich_text", "elements": [section]}])
        assert 0 < out.count("w ") <= 5000
    elif case == "list":
        out = blocks([{"type": "rich_text", "elements": [{"type": "rich_text_list", "elements": [section] * n}]}])
        assert 0 < out.count("<li>") <= 100
    else:
        out = blocks([{"type": "actions", "elements": [{"type": "checkboxes", "options": [
            {"text": {"type": "plain_text", "text": "o"}}] * n}] * n}])
        assert 0 < out.count("☐") <= 100 * 100
    assert time.perf_counter() - start < 2
    assert len(out) < 2_000_000


def test_huge_strings_are_linear() -> None:
    big = "<@U1> *a* `b` " * 5_000
    start = time.perf_counter()
    cards([{"text": big, "pretext": big, "fields": [{"title": big, "value": big}]}])
    blocks([{"type": "section", "text": {"type": "mrkdwn", "text": big}}, *rich_text({"type": "text", "text": big})])
    assert time.perf_counter() - start < 5


# --- the views: blocks over text, cards, files, bots -------------------------------------------------------------

def message(content: dict[str, Any] | None, **fields: Any) -> Message:
    base: dict[str, Any] = dict(
        ts=1_700_000_000_000_000, channel_id="C1", user="U1", text="the text", subtype=None, bot_id=None,
        username=None, thread_ts=None, edited_ts=None, deleted=False, deleted_ts=None, files=None,
        files_stored=None, files_fetch_failed=False, files_fetch_error=None, reactions=(), reply_count=0,
        content_blob=compress_json(content) if content else None)
    base.update(fields)
    return Message(**base)


def view(msg: Message) -> views.MessageView:
    [built] = views.message_views(None, "T1", [msg], zone=UTC, page_channel_id="C1", include_deleted=False,
                                  channel_names_map=CHANNELS, names=USERS | {"UX": "UX"})
    return built


def test_blocks_replace_text_and_fall_back_when_empty() -> None:
    shown = view(message({"blocks": rich_text({"type": "text", "text": "from blocks"})}, text="from *text*"))
    assert str(shown.html) == ('<div class="block block-rich-text"><div class="rt-section">from blocks</div></div>')
    shown = view(message({"blocks": [{"type": "divider"}]}, text="from *text*"))
    assert str(shown.html) == "from <b>text</b>"


def test_attachment_only_bot_message_shows_cards_and_names_the_bot() -> None:
    content = {"bot_profile": {"id": "B0JL6RASU", "name": "Deploy Bot", "app_id": "A1"},
               "attachments": [{"color": "good", "title": "Deployed", "text": "v1.2 to prod"}]}
    shown = view(message(content, user=None, text="", subtype="bot_message", bot_id="B0JL6RASU"))
    assert shown.author_name == "Deploy Bot" and shown.is_bot
    assert "Deployed" in visible(str(shown.attachments)) and str(shown.html) == "" and shown.note is None
    shown = view(message({}, user=None, text="hi", subtype="bot_message", bot_id="B0JL6RASU", username="hook"))
    assert shown.author_name == "hook"


def test_files_tombstone_hidden_external() -> None:
    files = [{"id": "F1", "mode": "tombstone"}, {"id": "F2", "mode": "hidden_by_limit", "name": "secret.pdf"},
             {"id": "F3", "name": "doc", "is_external": True, "external_url": "https://docs.example/d"},
             {"id": "F4", "name": "bad", "is_external": True, "external_url": "mailto:x@y.z"},
             {"id": "F5", "name": "stored.txt", "size": 2048}]
    shown = view(message(None, files=files, files_stored={"F5": "key"}))
    assert [(f.name, f.state, f.external_url) for f in shown.files] == [
        ("This file was deleted.", "deleted", None),
        ("File hidden by the workspace's plan limit", "hidden", None),
        ("doc", "external", "https://docs.example/d"), ("bad", "external", None), ("stored.txt", "stored", None)]


def test_file_comment_huddle_and_empty_events_show_something() -> None:
    shown = view(message({"comment": {"user": "U1", "comment": "looks good"}}, subtype="file_comment"))
    assert visible(str(shown.extras)) == "@Ann commented: looks good"
    shown = view(message({"room": {"date_start": 1700000000, "participants": ["U1"]}}, text="",
                         subtype="huddle_thread"))
    assert visible(str(shown.extras)).startswith("🎧 Huddle")
    shown = view(message({}, text="", subtype="channel_canvas_updated"))
    assert shown.note == "updated the channel canvas"
    shown = view(message({}, text="", subtype="some_new_subtype"))
    assert shown.note == "(some new subtype)"


def test_page_user_ids_include_content() -> None:
    msg = message({"blocks": rich_text({"type": "user", "user_id": "UQ"}),
                   "attachments": [{"text": "<@UR>"}]})
    assert {"U1", "UQ", "UR"} <= views.page_user_ids([msg])


def test_message_json_shapes_roundtrip() -> None:
    # The content column is JSON: what the tests above feed is what a stored message gives back.
    content = {"attachments": [DOC_ATTACHMENT]}
    assert message(content).content() == json.loads(json.dumps(content))
    assert datetime.fromtimestamp(123456789, UTC).strftime("%d %b %Y %H:%M") == "29 Nov 1973 21:33"
