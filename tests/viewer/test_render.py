"""api/viewer/render.py: Slack mrkdwn -> safe HTML (pure, no database).

Expected HTML is written by hand from Slack's formatting rules. Hostile and random inputs go through an
independent checker built on html.parser: only allowed tags and attributes, safe hrefs, balanced tags,
balanced bidi controls per text node, and every word of the input still visible.
"""

from __future__ import annotations

import re
import time
import unicodedata
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markupsafe import Markup

from api.viewer.render import MAX_ELEMENTS, channel_ids, emoji, message_html, user_ids

USERS = {"U1": "Ann", "U2AB": "Bo Li"}
CHANNELS = {"C1": "general", "C2": "random"}
LINK = 'rel="noopener noreferrer" target="_blank"'


def channel_url(channel_id: str) -> str:
    return f"/slack/channels/{channel_id}"


def render(text: str | None, *, with_urls: bool = True) -> str:
    out = message_html(text, users=USERS, channels=CHANNELS, channel_url=channel_url if with_urls else None)
    assert isinstance(out, Markup)
    return str(out)


# --- each construct, by hand -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "body"), [
    ("plain words", "plain words"),
    ("*bold*", "<b>bold</b>"),
    ("_italic_", "<i>italic</i>"),
    ("~strike~", "<s>strike</s>"),
    ("a *b c* d", "a <b>b c</b> d"),
    ("*bold*, then", "<b>bold</b>, then"),
    ("(_x_)", "(<i>x</i>)"),
    ("*bold _and italic_*", "<b>bold <i>and italic</i></b>"),
    ("_*both*_", "<i><b>both</b></i>"),
    ("`code`", "<code>code</code>"),
    ("`*not bold* _nor_ :smile:`", "<code>*not bold* _nor_ :smile:</code>"),
    ("x `a` y `b` z", "x <code>a</code> y <code>b</code> z"),
    ("*`code in bold`*", "<b><code>code in bold</code></b>"),
    ("```pre *x*```", "<pre>pre *x*</pre>"),
    ("```\nline 1\n  line _2_\n```", "<pre>line 1\n  line _2_</pre>"),
    ("before ```mid``` after", "before <pre>mid</pre> after"),
    ("a\n```b```\nc", "a<br><pre>b</pre>c"),
    ("```a```\n\nb", "<pre>a</pre><br>b"),
    ("```\n\nblank first```", "<pre>\n\nblank first</pre>"),
    ("line 1\nline 2", "line 1<br>line 2"),
    ("a\n\nb", "a<br><br>b"),
    ("&gt; quoted", "<blockquote>quoted</blockquote>"),
    ("> raw quote", "<blockquote>raw quote</blockquote>"),
    ("&gt;no space", "<blockquote>no space</blockquote>"),
    ("&gt; q1\n&gt; q2\nafter", "<blockquote>q1<br>q2</blockquote>after"),
    ("before\n&gt; q", "before<br><blockquote>q</blockquote>"),
    ("&gt; *bold quote*", "<blockquote><b>bold quote</b></blockquote>"),
    ("&gt;&gt;&gt; all\nof this", "<blockquote>all<br>of this</blockquote>"),
    ("intro\n&gt;&gt;&gt;\nrest\n&gt; still", "intro<br><blockquote>rest<br>&gt; still</blockquote>"),
    ("a &gt; b", "a &gt; b"),
    ("&amp; &lt; &gt;", "&amp; &lt; &gt;"),
    ("&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    ("&amp;lt;b&amp;gt;", "&amp;lt;b&amp;gt;"),
    ("&quot; &#60; &nbsp;", "&amp;quot; &amp;#60; &amp;nbsp;"),
    ("'single' \"double\"", "&#39;single&#39; &#34;double&#34;"),
])
def test_formatting(text: str, body: str) -> None:
    assert render(text) == body


@pytest.mark.parametrize(("text", "body"), [
    ("<http://example.com|Example>", f'<a href="http://example.com" {LINK}>Example</a>'),
    ("<https://example.com/a?b=1&amp;c=2>",
     f'<a href="https://example.com/a?b=1&amp;c=2" {LINK}>https://example.com/a?b=1&amp;c=2</a>'),
    ("<HTTPS://EXAMPLE.COM|up>", f'<a href="HTTPS://EXAMPLE.COM" {LINK}>up</a>'),
    ("<mailto:ann@example.com|mail Ann>", f'<a href="mailto:ann@example.com" {LINK}>mail Ann</a>'),
    ("<mailto:ann@example.com>", f'<a href="mailto:ann@example.com" {LINK}>ann@example.com</a>'),
    ("<http://x.io|a &lt;b&gt; &amp; c>", f'<a href="http://x.io" {LINK}>a &lt;b&gt; &amp; c</a>'),
    ("<http://x.io|*not bold*>", f'<a href="http://x.io" {LINK}>*not bold*</a>'),
    ("*see <http://x.io|this>*", f'<b>see <a href="http://x.io" {LINK}>this</a></b>'),
    ("<@U1>", '<span class="mention">@Ann</span>'),
    ("<@U2AB|old name>", '<span class="mention">@Bo Li</span>'),
    ("<@U9|label>", '<span class="mention">@label</span>'),
    ("<@U9>", '<span class="mention">@U9</span>'),
    ("<@W42>", '<span class="mention">@W42</span>'),
    ("hi <@U1>!", 'hi <span class="mention">@Ann</span>!'),
    ("<#C1|old-name>", '<a class="mention" href="/slack/channels/C1">#general</a>'),
    ("<#C1>", '<a class="mention" href="/slack/channels/C1">#general</a>'),
    ("<#C7|seven>", '<a class="mention" href="/slack/channels/C7">#seven</a>'),
    ("<!here>", '<span class="mention">@here</span>'),
    ("<!channel>", '<span class="mention">@channel</span>'),
    ("<!everyone>", '<span class="mention">@everyone</span>'),
    ("<!here|@here>", '<span class="mention">@here</span>'),
    ("<!subteam^S123|@team>", '<span class="mention">@team</span>'),
    ("<!subteam^S123>", '<span class="mention">@S123</span>'),
    ("<!date^1392734382^{date_num} {time_secs}|Posted 2014-02-18 6:39:42 AM>", "Posted 2014-02-18 6:39:42 AM"),
    ("<!date^1392734382^{date_num}>", "2014-02-18 14:39 UTC"),
    ("`<@U1>`", '<code><span class="mention">@Ann</span></code>'),
    ("```see <http://x.io|x>```", f'<pre>see <a href="http://x.io" {LINK}>x</a></pre>'),
    (":smile:", "\U0001F604"),
    ("yes :+1: :tada:", "yes \U0001F44D \U0001F389"),
    (":+1::skin-tone-2:", "\U0001F44D\U0001F3FB"),
    (":v::skin-tone-6:", "\u270C\U0001F3FF"),
    (":heart:", "\u2764\ufe0f"),
    (":white_check_mark: done", "\u2705 done"),
    (":not_a_known_emoji:", ":not_a_known_emoji:"),
    (":smile::smile:", "\U0001F604\U0001F604"),
    (":nope:smile:", ":nope\U0001F604"),
    (":SMILE:", ":SMILE:"),
    ("*:fire:*", "<b>\U0001F525</b>"),
])
def test_references_and_emoji(text: str, body: str) -> None:
    assert render(text) == body


def test_channel_without_url_is_a_span() -> None:
    assert render("<#C2>", with_urls=False) == '<span class="mention">#random</span>'


def test_unsafe_channel_url_is_not_linked() -> None:
    out = message_html("<#C1>", users={}, channels=CHANNELS, channel_url=lambda c: "javascript:alert(1)")
    assert str(out) == '<span class="mention">#general</span>'
    out = message_html("<#C1>", users={}, channels=CHANNELS, channel_url=lambda c: "//evil.example/x")
    assert str(out) == '<span class="mention">#general</span>'


@pytest.mark.parametrize(("text", "body"), [
    ("*unclosed", "*unclosed"),
    ("unopened*", "unopened*"),
    ("**", "**"),
    ("***a***", "**<b>a</b>**"),
    ("* spaced *", "* spaced *"),
    ("snake_case_name", "snake_case_name"),
    ("2*3*4", "2*3*4"),
    ("*a _b* c_", "<b>a _b</b> c_"),
    ("_a *b_ c*", "<i>a *b</i> c*"),
    ("*across\nlines*", "*across<br>lines*"),
    ("`unclosed code", "`unclosed code"),
    ("``", "``"),
    ("` `", "` `"),
    ("```unclosed fence", "```unclosed fence"),
    ("``````", "``````"),
    ("<http://x.io|label", "&lt;http://x.io|label"),
    ("<http://x.io", "&lt;http://x.io"),
    ("a < b > c", "a &lt; b &gt; c"),
    ("<<@U1>", '&lt;<span class="mention">@Ann</span>'),
    ("<@>", "&lt;@&gt;"),
    ("<@u1>", "&lt;@u1&gt;"),
    ("<#>", "&lt;#&gt;"),
    ("<!nonsense>", "&lt;!nonsense&gt;"),
    ("<>", "&lt;&gt;"),
    ("<http://x.io|a\nb>", "&lt;http://x.io|a<br>b&gt;"),
])
def test_malformed_is_literal(text: str, body: str) -> None:
    assert render(text) == body


@pytest.mark.parametrize("text", [
    "<javascript:alert(1)|click>",
    "<javascript:alert(1)>",
    "<JaVaScRiPt:alert(1)|click>",
    "<java\tscript:alert(1)|click>",
    "< javascript:alert(1)|click>",
    "<\u00a0javascript:alert(1)|click>",
    "<data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==|click>",
    "<vbscript:msgbox(1)|click>",
    "<//evil.example/x|click>",
    "<file:///etc/passwd|click>",
    "<ftp://example.com|click>",
    "<http\x01://example.com|click>",
])
def test_unsafe_links_are_literal_text(text: str) -> None:
    out = render(text)
    check(out, text)
    assert "<a " not in out
    assert visible(out) == text.replace("\x01", "\ufffd")  # the whole reference, as typed


def test_link_href_is_attribute_escaped() -> None:
    out = render('<http://x.io/" onmouseover="alert(1)|x>')
    assert out == f'<a href="http://x.io/&#34; onmouseover=&#34;alert(1)" {LINK}>x</a>'
    attrs = check(out, "x").links
    assert attrs == [{"href": 'http://x.io/" onmouseover="alert(1)', "rel": "noopener noreferrer", "target": "_blank"}]


def test_tab_and_spaces_around_safe_url_are_cleaned() -> None:
    out = render("<  http://x.io/a\tb |x>")
    assert out == f'<a href="http://x.io/ab" {LINK}>x</a>'


def test_empty_and_none() -> None:
    assert str(message_html(None, users={}, channels={})) == ""
    assert str(message_html("", users={}, channels={})) == ""


def test_controls_become_replacement_characters() -> None:
    assert render("a\x00b\x07c\x7fd\r\ne\rf\tg") == "a\ufffdb\ufffdc\ufffdd<br>e<br>f\tg"
    assert render("lone \ud800 surrogate") == "lone \ufffd surrogate"
    render("lone \ud800 surrogate").encode("utf-8")  # a page built from it can be sent


def test_bidi_controls_are_balanced_per_text_run() -> None:
    rlo, pdf, rli, pdi = "\u202e", "\u202c", "\u2067", "\u2069"
    assert render(f"{rlo}gnp.exe") == f"{rlo}gnp.exe{pdf}"
    assert render(f"a{pdf}b{pdi}c") == "abc"
    assert render(f"keep {rlo}pair{pdf} ok") == f"keep {rlo}pair{pdf} ok"
    assert render(f"*{rlo}x* after") == f"<b>{rlo}x{pdf}</b> after"
    assert render(f"{rli}a{rlo}b{pdi}c") == f"{rli}a{rlo}b{pdf}{pdi}c"
    out = message_html("<@U1>", users={"U1": f"{rlo}evil"}, channels={})
    assert str(out) == f'<span class="mention">@{rlo}evil{pdf}</span>'


def test_user_and_channel_ids() -> None:
    text = "<@U1> <@U2AB|x> `<@W3>` <@u4> <#C1|general> <#C9> <!here> <http://x.io|<@U5>>"
    # The last "<http://x.io|" never closes before the next "<", so "<@U5>" there is a mention of its own.
    assert user_ids(text) == {"U1", "U2AB", "W3", "U5"}
    assert channel_ids(text) == {"C1", "C9"}
    assert user_ids(None) == set() == channel_ids("")


@settings(max_examples=300, deadline=None, derandomize=True)
@given(text=st.deferred(lambda: fuzz_texts))
def test_ids_cover_every_name_the_renderer_looks_up(text: str) -> None:
    class Recording(dict):
        def __init__(self) -> None:
            super().__init__()
            self.asked: set[str] = set()

        def get(self, key: str, default: str | None = None) -> str | None:
            self.asked.add(key)
            return default

    users, channels = Recording(), Recording()
    message_html(text, users=users, channels=channels, channel_url=channel_url)
    assert users.asked <= user_ids(text)
    assert channels.asked <= channel_ids(text)


# --- emoji table -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("code", "char"), [
    ("thumbsup", "\U0001F44D"), ("+1", "\U0001F44D"), ("-1", "\U0001F44E"), ("thumbsdown", "\U0001F44E"),
    ("tada", "\U0001F389"), ("white_check_mark", "\u2705"), ("heart", "\u2764\ufe0f"), ("joy", "\U0001F602"),
    ("eyes", "\U0001F440"), ("fire", "\U0001F525"), ("rocket", "\U0001F680"), ("100", "\U0001F4AF"),
    ("pray", "\U0001F64F"), ("wave", "\U0001F44B"), ("ok_hand", "\U0001F44C"), ("raised_hands", "\U0001F64C"),
    ("clap", "\U0001F44F"), ("thinking_face", "\U0001F914"), ("sweat_smile", "\U0001F605"),
    ("slightly_smiling_face", "\U0001F642"), ("smile", "\U0001F604"), ("smiley", "\U0001F603"),
    ("grinning", "\U0001F600"), ("x", "\u274C"), ("warning", "\u26A0\ufe0f"), ("us", "\U0001F1FA\U0001F1F8"),
    ("one", "1\ufe0f\u20e3"), ("+1::skin-tone-2", "\U0001F44D\U0001F3FB"),
    ("wave::skin-tone-5", "\U0001F44B\U0001F3FE"), ("v::skin-tone-3", "\u270C\U0001F3FC"),
    ("man-shrugging::skin-tone-4", "\U0001F937\U0001F3FD\u200d\u2642\ufe0f"),
])
def test_emoji_known(code: str, char: str) -> None:
    assert emoji(code) == char


@pytest.mark.parametrize("code", ["", "nope", ":smile:", "SMILE", "+1::skin-tone-7", "nope::skin-tone-2",
                                  "+1::skin-tone-", "smile "])
def test_emoji_unknown(code: str) -> None:
    assert emoji(code) is None


def test_emoji_table_is_all_emoji_characters() -> None:
    from api.viewer.emoji import TABLE

    assert len(TABLE) >= 300
    # Joiners, keycap parts and the few emoji that Unicode files as punctuation or letters.
    allowed_chars = {"\ufe0f", "\u200d", "\u20e3", "#", "*", *"0123456789", "\u203c", "\u2049", "\u2139"}
    for code, value in TABLE.items():
        assert re.fullmatch(r"[a-z0-9_+-]+", code), code
        for ch in value:
            assert ch in allowed_chars or unicodedata.category(ch) in ("So", "Sk", "Sm"), (code, ch)


# --- the independent checker -----------------------------------------------------------------------------------

ALLOWED_ATTRS = {"b": set(), "i": set(), "s": set(), "code": set(), "pre": set(), "blockquote": set(),
                 "br": set(), "a": {"href", "rel", "target", "class", "title"}, "span": {"class", "title"}}
BLOCKS = {"pre", "blockquote"}
OPENERS = {"\u202a": "E", "\u202b": "E", "\u202d": "E", "\u202e": "E", "\u2066": "I", "\u2067": "I", "\u2068": "I"}


class Checked(HTMLParser):
    """Parses rendered HTML, failing on anything outside the allow-list."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags = 0
        self.texts: list[str] = []
        self.links: list[dict[str, str]] = []
        self.problems: list[str] = []
        self._text_node: list[str] = []

    def _end_text_node(self) -> None:
        node = "".join(self._text_node)
        self._text_node.clear()
        bidi: list[str] = []
        for ch in node + "\n":  # every node (and every line of a <pre>) must end balanced
            if ch in OPENERS:
                bidi.append(OPENERS[ch])
            elif ch == "\u202c":
                if not bidi or bidi.pop() != "E":
                    self.problems.append(f"unmatched PDF in {node!r}")
            elif ch == "\u2069":
                if not bidi or bidi.pop() != "I":
                    self.problems.append(f"unmatched PDI in {node!r}")
            elif ch == "\n" and bidi:
                self.problems.append(f"open bidi control at end of {node!r}")
                bidi.clear()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._end_text_node()
        self.tags += 1
        if tag not in ALLOWED_ATTRS:
            self.problems.append(f"tag {tag}")
            return
        names = [k for k, _ in attrs]
        if len(set(names)) != len(names) or not set(names) <= ALLOWED_ATTRS[tag]:
            self.problems.append(f"attributes {attrs} on {tag}")
        values = {k: v or "" for k, v in attrs}
        if tag in BLOCKS and any(t != "blockquote" for t in self.stack):
            self.problems.append(f"<{tag}> inside {self.stack}")
        if tag == "a":
            self._check_link(values)
        if "title" in values and values.get("class") != "mention":  # only a mention whose name was cut
            self.problems.append(f"title on {tag} {values}")
        if tag == "span" and values.get("class") != "mention":
            self.problems.append(f"span attributes {values}")
        if tag != "br":
            self.stack.append(tag)

    def _check_link(self, values: dict[str, str]) -> None:
        if "a" in self.stack:
            self.problems.append("nested <a>")
        href = values.get("href", "")
        # What a browser would make of it: C0 controls and spaces stripped at the ends, tabs/newlines removed.
        seen = re.sub(r"[\t\n\r]", "", href.strip("".join(chr(c) for c in range(0x21)))).lower()
        if values.get("class") == "mention":
            if not (seen.startswith("/") and not seen.startswith(("//", "/\\"))):
                self.problems.append(f"channel href {href!r}")
            if "target" in values or "rel" in values:
                self.problems.append("channel link opens elsewhere")
        else:
            if not re.match(r"(https?|mailto):", seen):
                self.problems.append(f"href scheme {href!r}")
            if values.get("rel") != "noopener noreferrer" or values.get("target") != "_blank":
                self.problems.append(f"external link attributes {values}")
            if "class" in values:
                self.problems.append("class on an external link")
        self.links.append(values)

    def handle_endtag(self, tag: str) -> None:
        self._end_text_node()
        self.tags += 1
        if tag == "br" or not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> with open {self.stack}")
        else:
            self.stack.pop()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.problems.append(f"self-closing <{tag}/>")

    def handle_data(self, data: str) -> None:
        self.texts.append(data)
        self._text_node.append(data)

    def handle_comment(self, data: str) -> None:
        self.problems.append("comment")

    def handle_decl(self, decl: str) -> None:
        self.problems.append("declaration")

    def handle_pi(self, data: str) -> None:
        self.problems.append("processing instruction")

    def unknown_decl(self, data: str) -> None:
        self.problems.append("unknown declaration")


WORD_RE = re.compile(r"[^\W_]+")
# What a reader cannot be promised to see as typed: the inside of a <...> reference (an id, a URL) and a
# :shortcode: (it becomes an emoji). Candidates may overlap (":a:+1:"), so every one is found by a lookahead.
HIDDEN_RE = re.compile(r"(?=(<[^<>]*>|:[a-z0-9_+'-]+:))")


def input_words(text: str) -> set[str]:
    chars = list(text)
    for m in HIDDEN_RE.finditer(text):
        chars[m.start(1):m.end(1)] = " " * (m.end(1) - m.start(1))
    text = "".join(chars)
    text = re.sub(r"&(amp|lt|gt);", lambda m: {"amp": "&", "lt": "<", "gt": ">"}[m.group(1)], text)
    return set(WORD_RE.findall(text))


def visible(html: str) -> str:
    parser = Checked()
    parser.feed(html)
    parser.close()
    return "".join(parser.texts)


def check(html: str, text: str) -> Checked:
    """Fails unless `html` is safe and well-formed and shows every word of `text`."""
    parser = Checked()
    parser.feed(html)
    parser.close()
    parser._end_text_node()
    assert not parser.problems, parser.problems[:5]
    assert parser.stack == [], f"unclosed {parser.stack}"
    # Every < and > in the output belongs to a tag the parser saw: no stray markup-like text.
    assert html.count("<") == parser.tags == html.count(">"), "a < or > outside the tags"
    # Each word must appear in the visible text (as a substring: a date's fallback may abut a word).
    shown = "\n".join(parser.texts)
    missing = {word for word in input_words(text) if word not in shown}
    assert not missing, f"words lost: {sorted(missing)[:10]}"
    return parser


HOSTILE = [
    "<script>alert(1)</script>",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "<img src=x onerror=alert(1)>",
    "&lt;img src=x onerror=alert(1)&gt;",
    '"><script>alert(1)</script>',
    "'><svg onload=alert(1)>",
    '<http://x.io|"><script>alert(1)</script>>',
    '<http://x.io|label" onclick="alert(1)>',
    "<http://x.io|<b>bold</b>>",
    "<javascript:alert(document.cookie)|click me>",
    "javascript:alert(1) bare",
    "data:text/html,<script>alert(1)</script> bare",
    "vbscript:msgbox bare",
    "<JAVASCRIPT:alert(1)>",
    "<java\tscript:alert(1)|tabbed>",
    "<java\nscript:alert(1)|newline>",
    "<\x01javascript:alert(1)|control>",
    "<data:image/svg+xml;base64,PHN2Zz4=|svg>",
    "<//evil.example|protocol relative>",
    "<@U1 onmouseover=alert(1)>",
    "<@U1|<script>>",
    "<#C1|\"><script>alert(1)</script>>",
    "<!subteam^S1|<img src=x>>",
    "<!date^1^x|<script>alert(1)</script>>",
    "<!date^99999999999999999999^x>",
    "&amp;lt;script&amp;gt;",
    "&#x3C;script&#x3E; &#60;script&#62;",
    "*<script>*",
    "`<script>` ```<script>``` ~<script>~",
    "*_~`unbalanced",
    "*a _b ~c* d_ e~",
    "``` ` `` ``` `` `",
    "> ```\n> code\n> ```",
    "&gt;&gt;&gt; ```quoted fence``` *b*\nmore",
    "nul\x00byte and \x1b[31m escape",
    "\u202egnp.exe evil \u202d\u202a\u2066 \u2069\u2069\u202c",
    "\u2067rtl <@U1> *\u202ebold* _\u2066it_ <http://x.io|\u202elabel>",
    "\ufeffbom \u200bzero width \u00a0nbsp",
    ":smile:skin-tone-2: :+1::skin-tone-9: ::: :: :+1:: :-1:",
    ":<script>: :javascript:alert(1):",
    "emoji in `:smile: code` and ```:smile: pre```",
    "<http://x.io|x> <http://y.io|y",
    "<<<<>>>> <<http://x.io>>",
    "<mailto:javascript:alert(1)|mail>",
    "<http://x.io/&lt;script&gt;|escaped>",
    "a\r\nb\rc\n\n\nd",
    "שלום *עולם* <@U1> مرحبا _بالعالم_",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_corpus(text: str) -> None:
    check(render(text), text)
    check(render(text, with_urls=False), text)


def test_hostile_specifics() -> None:
    assert render("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert render("<img src=x onerror=alert(1)>") == "&lt;img src=x onerror=alert(1)&gt;"
    assert render('"><script>') == "&#34;&gt;&lt;script&gt;"
    assert render("<@U1|<script>>") == "&lt;@U1|&lt;script&gt;&gt;"
    assert render("<mailto:javascript:alert(1)|mail>") == f'<a href="mailto:javascript:alert(1)" {LINK}>mail</a>'


def test_checker_catches_bad_html() -> None:
    """The checker is what the fuzz relies on: make sure it fails on what it must reject."""
    bad = [
        "<img src=x>",
        '<a href="javascript:alert(1)" rel="noopener noreferrer" target="_blank">x</a>',
        '<a href=" java\tscript:x" rel="noopener noreferrer" target="_blank">x</a>',
        '<a href="//evil" class="mention">x</a>',
        "<b>unclosed",
        "<b><i>x</b></i>",
        '<span onclick="x">y</span>',
        "a > b",
        "\u202eleft open",
        "<b><pre>x</pre></b>",
        "<!-- comment -->",
    ]
    for html in bad:
        with pytest.raises(AssertionError):
            check(html, "")
    with pytest.raises(AssertionError):
        check("only some", "only some words")


# --- size and pathological inputs ------------------------------------------------------------------------------

PATHOLOGICAL = {
    "stars": "*" * 50_000,
    "less-than": "<" * 50_000,
    "underscore-a": "_a" * 50_000,
    "backticks": "`" * 100_000,
    "fences": "```" * 20_000,
    "fence-x": "````x" * 20_000,
    "colons": ":" * 100_000,
    "colon-words": ":ab" * 40_000,
    "open-links": "<http://x.io|label " * 10_000,
    "open-mentions": "<@U1" * 25_000,
    "no-close": "<" + "a" * 100_000,
    "quotes": "&gt;" * 30_000,
    "quote-lines": "\n&gt; *q*" * 15_000,
    "markers": "*_~`" * 25_000,
    "nesting": "*_~" * 20_000 + "word" + "~_*" * 20_000,
    "word-stars": "a*" * 50_000,
    "star-words": " *a" * 40_000,
    "rlo": "\u202e" * 50_000,
    "isolates": "\u2066\u202e" * 25_000 + "\u2069" * 10_000,
    "emoji": ":+1::skin-tone-2:" * 8_000,
    "amp": "&amp;" * 25_000,
    "newlines": "\n" * 100_000,
}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_pathological_inputs_render_fast(name: str) -> None:
    text = PATHOLOGICAL[name]
    started = time.thread_time()  # this thread's CPU: what other processes of the run take does not count
    html = render(text)
    elapsed = time.thread_time() - started
    # A generous bound: linear code takes well under 0.5 s here; quadratic work on 100 KB would take minutes.
    assert elapsed < 2.0, f"{name}: {elapsed:.2f}s"
    check(html, text)


def test_100kb_message() -> None:
    line = ("Hello *team* <@U1> see <https://example.com/p?q=1&amp;r=2|the doc> and `code` _now_ :tada: "
            "<#C1> ~old~ &lt;tag&gt;\n&gt; quoted reply with :+1::skin-tone-3:\n")
    text = line * (100_000 // len(line) + 1)  # whole lines, just over 100 KB
    assert len(text) >= 100_000
    started = time.thread_time()  # this thread's CPU, as above
    html = render(text)
    elapsed = time.thread_time() - started
    assert elapsed < 2.0, f"{elapsed:.2f}s"
    parser = check(html, text)
    # Past render.MAX_ELEMENTS elements the rest of the message is plain text (test_render_limits.py): the first
    # line pairs (8 elements each) are formatted, then every word is still there, as typed.
    assert MAX_ELEMENTS // 10 <= html.count("<b>team</b>") < text.count("*team*")
    assert len(re.findall(r"<(?!/|br>)", html)) <= MAX_ELEMENTS
    assert 2 * html.count("<b>team</b>") - 1 <= len(parser.links) <= 2 * html.count("<b>team</b>")
    assert html.endswith("&lt;#C1&gt; ~old~ &lt;tag&gt;<br>&gt; quoted reply with :+1::skin-tone-3:<br>")


# --- randomized fuzz -------------------------------------------------------------------------------------------

FRAGMENTS = [
    "*", "_", "~", "`", "```", "<", ">", "|", "&gt;", "&lt;", "&amp;", "&", "&gt; ", "\n", " ", "  ", ":", "::",
    "^", "!", "@", "#", "word", "Foo", "b4r", "smile", ":smile:", ":+1:", ":+1::skin-tone-3:", ":skin-tone-2:",
    "skin-tone-9", ":nope:", "<@U1>", "<@U2AB|Bo>", "<@W9|zed>", "<#C1>", "<#C2|rnd>", "<#C9|nine>", "<!here>",
    "<!channel>", "<!subteam^S1|@team>", "<!date^1392734382^{date}|Feb>", "<http://ex.io/a|link>",
    "<https://ex.io>", "<mailto:a@b.io|mail>", "http://", "javascript:", "<javascript:alert(1)|js>",
    "<data:text/html,x|d>", "vbscript:", "//", "script", "onerror=", '"', "'", "=", "\u202e", "\u202c",
    "\u2066", "\u2069", "\u202a", "\x00", "\t", "\r", "\ufffd", "עב", "ر", "\u00e9t\u00e9", ">>>", "&gt;&gt;&gt;",
]


# Markup fragments in any order, now and then a run of single markup characters; hypothesis shrinks a failing
# text to the fewest fragments that still fail.
fuzz_texts = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(alphabet="*_~`<>|&:;@#!^ \nab", min_size=1,
                                                                    max_size=30)),
                      min_size=1, max_size=40).map("".join)


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(text=fuzz_texts, with_urls=st.booleans())
def test_fuzz(text: str, with_urls: bool) -> None:
    check(render(text, with_urls=with_urls), text)
