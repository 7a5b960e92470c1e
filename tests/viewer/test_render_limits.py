"""Rendering limits (issue 28, finding 8), pure: the markup budget of a message (render.MAX_ELEMENTS: past it the
rest of the message is plain text, still safe), the data shown outside message text (render.shown: controls
replaced, bidi balanced or, in a file name, removed; names and reactions cut with the whole value as a title),
and the views and templates using them. The Chromium side: test_render_limits_browser.py."""

from __future__ import annotations

import re
import time
from datetime import UTC
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import jinja2
import pytest
from markupsafe import Markup

from api.viewer import render, rich, views
from api.viewer.render import MAX_ELEMENTS, NAME_LIMIT, TITLE_LIMIT, Budget, message_html, shown, shown_with_title
from tests.viewer.test_render import CHANNELS, USERS, check, visible
from tests.viewer.test_render import render as render_text
from tests.viewer.test_rich import message, view

TEMPLATES = Path(__file__).resolve().parents[2] / "api" / "templates"
PATHOLOGICAL = "*_" * 25_000  # the finding: ~16,700 elements before the budget, 10.6 s in Chromium
OPEN_TAG_RE = re.compile(r"<(?!/|br>)")


def elements(html: str) -> int:
    """Elements in the HTML, <br> not counted (as the budget does not)."""
    return len(OPEN_TAG_RE.findall(html))


class Depth(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.depth = self.deepest = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag != "br":
            self.depth += 1
            self.deepest = max(self.deepest, self.depth)

    def handle_endtag(self, tag: str) -> None:
        self.depth -= 1


# --- the markup budget --------------------------------------------------------------------------------------------

LIMITED = {
    "star-underscore": PATHOLOGICAL,
    "markers": "*_~`" * 25_000,
    "nesting": "*_~" * 20_000 + "word" + "~_*" * 20_000,
    "bold-words": "*b* " * 20_000,
    "mentions": "<@U1> <#C1> " * 5_000,
    "links": "<https://example.com/x|x> " * 5_000,
    "code": "`c` " * 10_000,
    "fences": "```p``` " * 5_000,
    "quotes": "&gt; q\nplain\n" * 5_000,
    "quote-lines": "\n&gt; *q*" * 15_000,
    "mixed-lines": "Hello *team* <@U1> `code` _now_ ~old~\n&gt; quoted *reply*\n" * 2_000,
}


@pytest.mark.parametrize("name", sorted(LIMITED))
def test_markup_is_capped_and_the_rest_is_text(name: str) -> None:
    text = LIMITED[name]
    started = time.thread_time()  # the render's own CPU: other processes of the run do not count
    html = render_text(text)
    elapsed = time.thread_time() - started
    assert elapsed < 1.0, f"{name}: {elapsed:.2f}s"
    assert elements(html) <= MAX_ELEMENTS
    depth = Depth()
    depth.feed(html)
    assert depth.deepest <= MAX_ELEMENTS
    check(html, text)  # safe, well-formed, bidi balanced per text node, every word of the input shown


def test_the_pathological_message() -> None:
    html = render_text(PATHOLOGICAL)
    assert elements(html) == MAX_ELEMENTS  # 500 pairs: <b>_</b><i>*</i>...
    assert html.startswith("<b>_</b><i>*</i>")
    # Past the budget, the message as typed, markers and all: everything the tags did not take.
    shown_text = visible(html)
    assert len(shown_text) == len(PATHOLOGICAL) - 2 * MAX_ELEMENTS
    assert html.endswith("*_" * 1_000)
    assert PATHOLOGICAL.endswith(shown_text[-10_000:])


def test_the_cut_closes_what_is_open_and_keeps_the_rest_as_typed() -> None:
    text = "*bold " + "<@U1> " * (MAX_ELEMENTS + 5) + "end* &amp; `code` ```pre``` <https://x.io|link>\nnext *line*"
    html = render_text(text)
    check(html, text)
    assert html.startswith("<b>bold <span class=\"mention\">@Ann</span>")
    assert html.count('<span class="mention">') == MAX_ELEMENTS - 1  # the <b> took one
    # the <b> closed at the cut; after it the references as typed, the escape decoded once, lines as <br>
    cut = html.index("</b>")
    rest = html[cut + len("</b>"):]
    assert rest.startswith("&lt;@U1&gt; ")
    assert rest.endswith("end* &amp; `code` ```pre``` &lt;https://x.io|link&gt;<br>next *line*")
    assert "<" not in rest.replace("<br>", "")


def test_a_cut_inside_a_quote_and_before_a_pre() -> None:
    text = "&gt; " + "*q* " * (MAX_ELEMENTS + 10) + "\n&gt; more\nafter"
    html = render_text(text)
    check(html, text)
    assert html.startswith("<blockquote><b>q</b>") and html.endswith("&gt; more<br>after</blockquote>")
    text = "*b* " * MAX_ELEMENTS + "```\ncode *x*\n``` after"  # the <pre> would be element 501
    html = render_text(text)
    check(html, text)
    assert "<pre>" not in html and html.endswith("```\ncode *x*\n``` after".replace("\n", "<br>"))
    text = "*b* " * MAX_ELEMENTS + "\n&gt; quoted"  # the <blockquote> would be element 501
    html = render_text(text)
    check(html, text)
    assert "<blockquote>" not in html and html.endswith("<br>&gt; quoted")


def test_under_the_budget_nothing_changes() -> None:
    text = "*b* " * (MAX_ELEMENTS - 1) + "_last_"
    assert render_text(text).endswith("<i>last</i>")
    assert elements(render_text(text)) == MAX_ELEMENTS


def test_one_budget_for_the_texts_of_a_message() -> None:
    budget = Budget(3)
    first = str(message_html("*a* *b*", users=USERS, channels=CHANNELS, budget=budget))
    second = str(message_html("*c* *d*", users=USERS, channels=CHANNELS, budget=budget))
    assert (first, second) == ("<b>a</b> <b>b</b>", "<b>c</b> *d*")
    assert budget.left == 0
    # rich.py: blocks, cards and rich-text styles spend from the same budget
    budget = Budget(2)
    styled = {"type": "rich_text", "elements": [{"type": "rich_text_section", "elements": [
        {"type": "text", "text": "x", "style": {"bold": True, "italic": True, "code": True}}]}]}
    html = str(rich.blocks_html([styled], rich.Names(USERS, CHANNELS), budget))
    assert html.count("<i>") + html.count("<b>") + html.count("<code>") == 2 and budget.left == 0


def test_a_pathological_message_through_the_views_and_its_cards() -> None:
    content = {"attachments": [{"text": PATHOLOGICAL, "pretext": PATHOLOGICAL, "footer": PATHOLOGICAL}]}
    built = view(message(content, text=PATHOLOGICAL))
    inline = elements(str(built.html)) + len(re.findall(r"<(?:b|i|s|code|a|span)[ >]", str(built.attachments)))
    assert inline <= MAX_ELEMENTS
    assert str(built.attachments).count("*_" * 1_000) >= 3  # each text's rest is there, as text


# --- data shown outside message text --------------------------------------------------------------------------------

def test_shown_replaces_every_control() -> None:
    assert shown("a\x00b\x1bc\td\ne\rf\x7fg\x85h\ud800i") == "a\ufffdb\ufffdc\ufffdd\ufffde\ufffdf\ufffdg\ufffdh\ufffdi"
    assert shown(None) == "" and shown(42) == "" and shown("") == ""


def test_shown_balances_bidi_and_a_file_name_loses_it() -> None:
    assert shown("\u202eevil") == "\u202eevil\u202c"
    assert shown("ok\u202c\u2069") == "ok"
    assert shown("\u2067x\u2069 y") == "\u2067x\u2069 y"
    assert shown("report\u202egnp.exe", strip_bidi=True) == "reportgnp.exe"
    assert shown("\u200f\u2066a\u061c\u200eb\u202a", strip_bidi=True) == "ab"


def test_names_are_cut_with_the_whole_value_as_title() -> None:
    name = "N" * 5_000
    short, title = shown_with_title(name)
    assert short == "N" * (NAME_LIMIT - 1) + "…" and len(short) == NAME_LIMIT
    assert title == "N" * (TITLE_LIMIT - 1) + "…"
    assert shown_with_title("Ann") == ("Ann", "")
    assert shown_with_title("x" * NAME_LIMIT) == ("x" * NAME_LIMIT, "")
    # cut inside an override: still closed
    assert shown_with_title("\u202e" + "y" * 200)[0].endswith("…\u202c")
    # a file name keeps its end
    assert shown("report-" + "a" * 200 + ".exe", 40, keep_end=8) == "report-" + "a" * 24 + "…" + "aaaa.exe"


def test_a_mention_of_a_long_name_is_cut_with_a_title() -> None:
    long = "L" * 5_000 + "\x07"
    html = str(message_html("hi <@U9> and <#C9>", users={"U9": long}, channels={"C9": long},
                            channel_url=lambda c: f"/c/{c}"))
    check(html, "hi and")
    assert f'<span class="mention" title="@{"L" * (TITLE_LIMIT - 1)}…">@{"L" * (NAME_LIMIT - 1)}…</span>' in html
    assert f'<a class="mention" href="/c/C9" title="#{"L" * (TITLE_LIMIT - 1)}…">#{"L" * (NAME_LIMIT - 1)}…</a>' in html
    html = str(message_html("<@U9>", users={"U9": "bell\x07"}, channels={}))
    assert html == '<span class="mention">@bell\ufffd</span>'


def test_views_clean_and_cut_names_files_and_reactions() -> None:
    long = "W" * 5_000
    files = [{"id": "F1", "name": "photo\u202egnp.exe", "size": 10},
             {"id": "F2", "title": "doc-" + "x" * 300 + ".pdf"},
             {"id": "F3", "name": "tab\tand\x00nul"}]
    built = views.message_views(
        None, "T1", [message(None, user="U1", files=files, reactions=((long, ("U1", "U2")), ("ok\x1b", ("U1",))),
                             channel_id="C1")],
        zone=UTC, page_channel_id=None, include_deleted=False,
        channel_names_map={"C1": "chan\x00" + long}, names={"U1": "Ann\x1b" + long, "U2": "\u202eBob"},
        show_channel=True)[0]
    assert built.author_name == "Ann\ufffd" + "W" * (NAME_LIMIT - 5) + "…"
    assert built.author_title.startswith("Ann\ufffdWWW") and len(built.author_title) == TITLE_LIMIT
    assert built.channel_name == "chan\ufffd" + "W" * (NAME_LIMIT - 6) + "…" and built.channel_title
    first, second, third = built.files
    assert (first.name, first.title) == ("photognp.exe", "")
    assert second.name == ("doc-" + "x" * 300)[:103] + "…" + "x" * 12 + ".pdf"
    assert len(second.name) == views.FILE_NAME_LIMIT and views.FILE_NAME_END == 16
    assert second.title == "doc-" + "x" * 300 + ".pdf"
    assert third.name == "tab\ufffdand\ufffdnul"
    big, ok = built.reactions
    assert big.emoji == ":" + "W" * (NAME_LIMIT - 2) + "…" and len(big.emoji) == NAME_LIMIT
    assert len(big.title) <= TITLE_LIMIT and "\u202eBob\u202c" in big.title and "Ann\ufffd" in big.title
    assert ok.name == "ok\ufffd" and ok.emoji == ":ok\ufffd:" and ok.title == "Ann\ufffd" + "W" * (
        NAME_LIMIT - 5) + "… reacted with :ok\ufffd:"


def test_the_message_template_carries_the_titles() -> None:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True)
    env.filters["shown"] = render.shown  # as api/viewer/slack_pages.py registers it
    long = "Z" * 300
    built = views.message_views(
        None, "T1", [message(None, files=[{"id": "F1", "name": "a" * 200 + "\u202e.txt"}])],
        zone=UTC, page_channel_id="C1", include_deleted=False,
        channel_names_map={}, names={"U1": long})[0]
    html = env.from_string('{% from "viewer/_message.html" import message %}{{ message(m) }}').render(m=built)
    names = env.from_string('{% from "viewer/_names.html" import name %}{{ name(n) }}|{{ name(s) }}').render(
        n="Q\x00" + long, s="short\u202e")
    assert f'<bdi title="{long}">{"Z" * (NAME_LIMIT - 1)}…</bdi>' in html
    assert f'title="{"a" * 200}.txt">' in html and "\u202e" not in html
    assert names == (f'<bdi title="Q\ufffd{long}">Q\ufffd{"Z" * (NAME_LIMIT - 3)}…</bdi>|'
                     '<bdi>short\u202e\u202c</bdi>')
    assert isinstance(render.text_html("x"), Markup)
