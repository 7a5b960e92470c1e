"""Slack message text (mrkdwn) -> safe HTML for the archive viewer. Pure: no database, no network.

Supported syntax (as Slack stores message text; see Slack's "Formatting text for app surfaces" reference):

* `*bold*` -> <b>, `_italic_` -> <i>, `~strike~` -> <s>. A marker opens only at the start of a line or after a
  character that is not a letter or digit, and must be followed by a non-space; it closes only after a
  non-space and before the end or a non-letter/digit (so `snake_case` and `2*3*4` stay as they are). Markers
  nest (`*_both_*`); they never span lines. An overlapping or unclosed marker stays literal text.
* `` `code` `` -> <code>, ```` ```pre``` ```` -> <pre> (may span lines; one newline right after the opening
  and right before the closing fence is dropped). No bold/italic/strike/emoji inside either; Slack's `<...>`
  references (links, mentions) inside them are still shown as links and names, as Slack shows them.
* A line starting with `&gt;` (or a raw `>`) is a quote; consecutive quoted lines form one <blockquote>.
  `&gt;&gt;&gt;` quotes the rest of the message. Other newlines -> <br>.
* `&amp;` `&lt;` `&gt;` (how Slack stores literal & < >) are decoded once and escaped again; no other entity
  is decoded (`&quot;` shows as typed). A raw `<` only ever starts one of these references, up to the next `>`
  on the same line with no `<` in between:
  - `<http://x|label>`, `<https://x>`, `<mailto:a@b|label>` -> <a href rel="noopener noreferrer"
    target="_blank">;
  - `<@U123>`, `<@U123|name>` -> <span class="mention">@Name</span> (name from `users`, else the label,
    else the id);
  - `<#C123|name>`, `<#C123>` -> #name (the current name from `channels` wins, else the label, else the id),
    an <a class="mention" href=channel_url(id)> when `channel_url` is given, else a <span class="mention">;
  - `<!here>`, `<!channel>`, `<!everyone>` -> <span class="mention">@here</span> etc.;
    `<!subteam^S123|@team>` -> <span class="mention">@team</span>;
  - `<!date^ts^format|fallback>` -> the fallback text (without one: the time in UTC);
  - anything else (other schemes, malformed references) -> the reference as literal text.
* `:shortcode:` -> the Unicode emoji from api/viewer/emoji.py, `:+1::skin-tone-2:` with the skin tone
  applied; unknown shortcodes (custom emoji) stay as literal text.

Safety rules, by construction rather than by filtering afterwards:

* Every character of the message reaches the output through `markupsafe.escape`; the only tags are the ones
  written here: b, i, s, code, pre, blockquote, a, span, br, with only href/rel/target/class on <a> and class
  on <span> (and title on a mention whose name was cut). Every opened tag is closed in the same call that
  opened it, so the output is well-formed whatever the input. There is no wrapper element: the output contains
  <pre> and <blockquote>, so embed it in a block element (a <div>, not a <p>).
* Links only for http, https and mailto, checked the way a browser reads a URL: leading/trailing C0 controls
  and spaces stripped, tabs and newlines removed, then the scheme compared case-insensitively (so
  `java\tscript:` and `JaVaScRiPt:` are not links; `data:`, `vbscript:` and `//host` neither). A URL with any
  other control character is not a link. href is the cleaned URL, attribute-escaped (quotes included).
  `channel_url`'s result is linked only if it is a same-site path ("/..." but not "//...") or http(s).
* Bounded markup: at most MAX_ELEMENTS (500) elements per message (b, i, s, code, pre, blockquote, a, span; <br>
  is not counted). The element that would exceed the budget is not written: the tags open at that point are
  closed there, and the rest of the message, from that marker on, is shown as typed (Slack's escapes decoded) as
  plain escaped text, controls replaced, bidi balanced per line, newlines as <br>. A browser lays out thousands
  of inline elements in one message slowly (`*_` x 25,000 made ~16,700 and took 10.6 s to show); this keeps a
  message's cost to the length of its text. A caller rendering several texts of one message (rich.py) shares
  one `Budget` between them.
* Linear time: references are found by one regex that cannot backtrack past the next `<`; code fences,
  code spans and emphasis markers are paired in single left-to-right passes with a stack; emoji shortcodes are
  at most 64 characters long. There is no nested quantifier anywhere.
* Control characters: CR/CRLF become newlines; other C0 controls (except tab), DEL, C1 controls and lone
  surrogates become U+FFFD, visibly, so nothing invalid reaches the page (and the response stays encodable).
* Bidi: every text run (the text between two tags, and each line of a <pre>) is balanced on its own: a
  right-to-left embedding/override/isolate (U+202A-U+202E, U+2066-U+2069) left open is closed at the end of
  the run, and a terminator with nothing to close is dropped (it has no effect anyway). Matched pairs are kept
  as sent. So no control can leak out of the message, nor out of a name, a link label or a bold run into the
  text after it. No wrapper with dir="auto" is added on purpose: the page's block around the message should
  carry dir="auto" (viewer/_message.html does), and an inner element with a dir attribute would hide the
  message's text from that block's direction detection (an RTL message would lose its right alignment).

Data shown outside message text (a name, a channel name, a file name, a reaction, a title) goes through `shown`:
one line, every control character (tab and newline too) as U+FFFD, bidi controls balanced (a file name's
removed, with LRM/RLM/ALM: no override may turn `gnp.exe` into `exe.png`), and beyond a limit (NAME_LIMIT for
names and reactions) cut with "…", the whole value (up to TITLE_LIMIT) then given as a title. A mention's name
in message text is cut the same way (its span or link then carries the title).

`user_ids` / `channel_ids` give the ids a text mentions, so a page can look up only the names it needs (a
superset of what `message_html` will look up). `emoji` is for reaction chips.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup, escape

from api.viewer.emoji import TABLE as _EMOJI
from api.viewer.emoji import emoji as emoji  # re-exported: part of this module's interface
from api.viewer.emoji import with_skin_tone

__all__ = ["MAX_ELEMENTS", "NAME_LIMIT", "TITLE_LIMIT", "Budget", "channel_ids", "emoji", "link_url",
           "message_html", "shown", "shown_with_title", "text_html", "user_ids"]

MAX_ELEMENTS = 500  # markup elements per message; beyond them, the rest of the message is plain text
NAME_LIMIT = 80  # characters of a name or a reaction shown; the whole value goes in a title
TITLE_LIMIT = 1000  # characters of a title attribute

# Replaces each reference in the working text of a line. It cannot occur in message text: _clean turns every
# C0 control except tab and newline into U+FFFD first.
_ATOM = "\x00"

_CONTROLS_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_ALL_CONTROLS_RE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")  # one-line data: tab and newline too
_BIDI_ANY_RE = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")  # controls and marks
# A reference: up to the next ">" on the same line, no "<" in between. Each attempt stops at the next "<", so a
# run of unclosed "<" costs linear time.
_REF_RE = re.compile(r"<([^<>\n]*)>")
_SLACK_ESCAPE_RE = re.compile(r"&(amp|lt|gt);")
_SLACK_ESCAPES = {"amp": "&", "lt": "<", "gt": ">"}
_ID_RE = re.compile(r"[A-Z0-9]+")
_EMOJI_RE = re.compile(r":([a-z0-9_+'-]{1,64}):")
_SKIN_RE = re.compile(r":skin-tone-([2-6]):")
_C0_AND_SPACE = "".join(map(chr, range(0x21)))  # what a browser strips from both ends of a URL
_SAFE_SCHEME_RE = re.compile(r"(?:https?|mailto):.", re.IGNORECASE)
_BIDI_CONTROL_RE = re.compile("[\u202a-\u202e\u2066-\u2069]")
_BIDI_RE = re.compile("([\u202a-\u202e\u2066-\u2069\n])")  # split on the controls and on line ends
_EMBEDDINGS = frozenset("\u202a\u202b\u202d\u202e")  # LRE RLE LRO RLO, closed by PDF
_ISOLATES = frozenset("\u2066\u2067\u2068")  # LRI RLI FSI, closed by PDI
_PDF, _PDI = "\u202c", "\u2069"
_EMPHASIS = {"*": ("<b>", "</b>"), "_": ("<i>", "</i>"), "~": ("<s>", "</s>")}
_EMPHASIS_RE = re.compile(r"[*_~]")
_SPECIAL_MENTIONS = frozenset({"here", "channel", "everyone"})
_LINK_ATTRS = 'rel="noopener noreferrer" target="_blank"'


class Budget:
    """How many more markup elements a message may have (MAX_ELEMENTS to start with); shared by the texts of one
    message."""

    def __init__(self, elements: int = MAX_ELEMENTS) -> None:
        self.left = elements

    def take(self, count: int = 1) -> bool:
        """Spend `count` elements if that many are left; False (nothing spent) otherwise."""
        if count > self.left:
            return False
        self.left -= count
        return True


class _Cut(Exception):
    """The budget ran out inside one item of a line: `html` is the item up to there (every tag closed), `rest` the
    item's remaining text as typed (decoded); `end` is set to where the item ends in the cleaned text."""

    def __init__(self, html: str, rest: str) -> None:
        super().__init__()
        self.html, self.rest, self.end = html, rest, 0


@dataclass(frozen=True)
class _Names:
    users: Mapping[str, str]
    channels: Mapping[str, str]
    channel_url: Callable[[str], str] | None


@dataclass
class _Line:
    quoted: bool
    start: int = 0  # where the line starts in the cleaned text (its quote marker included)
    # ("text", raw, offset) or ("pre", raw, offset), in order; offset: where raw starts in the cleaned text
    items: list[tuple[str, str, int]] = field(default_factory=list)
    dropped: bool = False  # the `>>>` marker's own line when nothing follows it there


def message_html(text: str | None, *, users: Mapping[str, str], channels: Mapping[str, str],
                 channel_url: Callable[[str], str] | None = None, budget: Budget | None = None) -> Markup:
    """The message text as safe HTML (see the module docstring); empty Markup for no text. `budget`: the
    elements the message may still have (shared with its other texts); a fresh MAX_ELEMENTS when not given."""
    if not text:
        return Markup("")
    names = _Names(users, channels, channel_url)
    budget = budget if budget is not None else Budget()
    cleaned = _clean(text)
    out = []
    in_quote = False
    pending_break = False  # the previous line wants a <br> before the next one
    for line in _lines(cleaned):
        if line.dropped:
            continue
        if line.quoted != in_quote:
            if in_quote:
                out.append("</blockquote>")
            else:
                if pending_break:
                    out.append("<br>")
                if not budget.take():
                    out.append(_rest_html(_decode(cleaned[line.start:])))
                    break
                out.append("<blockquote>")
            in_quote = line.quoted
        elif pending_break:
            out.append("<br>")
        try:
            html, ends_with_block = _line_html(line, names, budget)
        except _Cut as cut:
            out.append(cut.html)
            out.append(_rest_html(cut.rest + _decode(cleaned[cut.end:])))
            break
        out.append(html)
        # After a block element (<pre>, </blockquote>) a <br> would add a blank line the sender did not type.
        pending_break = not ends_with_block
    if in_quote:
        out.append("</blockquote>")
    return Markup("".join(out))


def shown(value: Any, limit: int | None = None, *, strip_bidi: bool = False, keep_end: int = 0) -> str:
    """A piece of data shown as one line of text (a name, a channel name, a file name, a reaction, a title), as a
    str for Jinja to escape: every control character (tab and newline too) and lone surrogate as U+FFFD, bidi
    controls balanced (`strip_bidi`: removed, and the LRM/RLM/ALM marks with them), and past `limit` characters
    cut with "…" (after it the last `keep_end` characters: a file name keeps its extension). Not a str: ""."""
    if not isinstance(value, str) or not value:
        return ""
    text = _ALL_CONTROLS_RE.sub("\ufffd", value)
    if strip_bidi:
        text = _BIDI_ANY_RE.sub("", text)
    if limit is not None and len(text) > limit:
        keep_end = min(max(keep_end, 0), limit // 2)
        text = text[:max(limit - 1 - keep_end, 0)] + "…" + (text[len(text) - keep_end:] if keep_end else "")
    return text if strip_bidi else _balance_bidi(text)


def shown_with_title(value: Any, limit: int = NAME_LIMIT, *, strip_bidi: bool = False,
                     keep_end: int = 0) -> tuple[str, str]:
    """(`shown(value, limit)`, the whole value for a title when that was cut, else "")."""
    short = shown(value, limit, strip_bidi=strip_bidi, keep_end=keep_end)
    if not isinstance(value, str) or len(value) <= limit:
        return short, ""
    return short, shown(value, TITLE_LIMIT, strip_bidi=strip_bidi)


def text_html(text: str | None, *, emoji_codes: bool = False) -> Markup:
    """Plain text (no mrkdwn) as safe HTML: controls cleaned, bidi balanced per line, escaped, newlines as <br>;
    with `emoji_codes` known :shortcodes: become emoji (Block Kit's plain_text with `emoji: true`)."""
    if not text:
        return Markup("")
    lines = _clean(text).split("\n")
    if emoji_codes:
        lines = [_with_emoji(line) for line in lines]
    return Markup("<br>".join(_text(line) for line in lines))


def link_url(url: str) -> str | None:
    """The URL a browser would follow, if its scheme is http, https or mailto; else None (see the module
    docstring: the same check as the message text's links)."""
    return _link_url(url) if isinstance(url, str) else None


def _with_emoji(line: str) -> str:
    found = _emoji_in(line, 0, len(line))
    if not found:
        return line
    out, pos = [], 0
    for start, end, char in found:
        out.append(line[pos:start])
        out.append(char)
        pos = end
    out.append(line[pos:])
    return "".join(out)


def user_ids(text: str | None) -> set[str]:
    """The user ids the text mentions (`<@U123>`, `<@U123|name>`), wherever they appear."""
    return _ref_ids(text, "@")


def channel_ids(text: str | None) -> set[str]:
    """The channel ids the text mentions (`<#C123>`, `<#C123|name>`), wherever they appear."""
    return _ref_ids(text, "#")


def _ref_ids(text: str | None, sigil: str) -> set[str]:
    if not text:
        return set()
    found = set()
    for m in _REF_RE.finditer(_clean(text)):
        head = m.group(1).partition("|")[0]
        if head.startswith(sigil) and _ID_RE.fullmatch(head, 1):
            found.add(head[1:])
    return found


# --- text cleaning, escaping, bidi ---------------------------------------------------------------------------

def _clean(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS_RE.sub("\ufffd", text)


def _decode(raw: str) -> str:
    """Slack's three escapes, decoded once (so `&amp;lt;` is the literal text `&lt;`)."""
    if "&" not in raw:
        return raw
    return _SLACK_ESCAPE_RE.sub(lambda m: _SLACK_ESCAPES[m.group(1)], raw)


def _balance_bidi(s: str) -> str:
    """`s` with its bidi embeddings/overrides/isolates closed by the end of each line, unmatched closers dropped."""
    if _BIDI_CONTROL_RE.search(s) is None:
        return s
    out: list[str] = []
    stack: list[str] = []  # the open openers, innermost last
    open_isolates = 0
    for piece in _BIDI_RE.split(s):
        if piece in _EMBEDDINGS:
            stack.append(piece)
        elif piece in _ISOLATES:
            stack.append(piece)
            open_isolates += 1
        elif piece == _PDF:
            if not stack or stack[-1] not in _EMBEDDINGS:
                continue  # nothing to close: no effect, dropped
            stack.pop()
        elif piece == _PDI:
            if not open_isolates:
                continue
            # A PDI also ends the embeddings opened inside its isolate: close them explicitly.
            while stack[-1] in _EMBEDDINGS:
                stack.pop()
                out.append(_PDF)
            stack.pop()
            open_isolates -= 1
        elif piece == "\n":
            out.append(_closers(stack))
            stack.clear()
            open_isolates = 0
        out.append(piece)
    out.append(_closers(stack))
    return "".join(out)


def _closers(stack: list[str]) -> str:
    return "".join(_PDF if c in _EMBEDDINGS else _PDI for c in reversed(stack))


def _text(s: str) -> str:
    """Literal text as HTML: bidi-balanced, then escaped."""
    return str(escape(_balance_bidi(s)))


def _rest_html(rest: str) -> str:
    """The rest of a message past the element budget: plain text, each line balanced, newlines as <br>."""
    return "<br>".join(_text(line) for line in rest.split("\n"))


# --- structure: code fences, lines, quotes ----------------------------------------------------------------

def _split_fences(text: str) -> list[tuple[str, str, int]]:
    """The text as ("text", raw, offset) and ("pre", raw, offset) parts, fences paired left to right."""
    parts: list[tuple[str, str, int]] = []
    literal_from = 0  # start of the text not yet put in a part
    pos = 0
    while True:
        start = text.find("```", pos)
        if start < 0:
            break
        end = text.find("```", start + 3)
        if end < 0:
            break  # no closing fence after this one: no later fence can open either
        if end == start + 3:
            pos = start + 3  # "``````": empty, the first fence stays literal
            continue
        if start > literal_from:
            parts.append(("text", text[literal_from:start], literal_from))
        parts.append(("pre", text[start + 3:end], start + 3))
        pos = literal_from = end + 3
    if literal_from < len(text):
        parts.append(("text", text[literal_from:], literal_from))
    return parts


def _quote_marker(piece: str) -> tuple[str, bool, bool]:
    """(rest of the line, quoted, quotes the rest of the message) for the first text of a line."""
    for marker, rest_of_message in (("&gt;&gt;&gt;", True), (">>>", True), ("&gt;", False), (">", False)):
        if piece.startswith(marker):
            rest = piece[len(marker):]
            return (rest[1:] if rest.startswith(" ") else rest), True, rest_of_message
    return piece, False, False


def _lines(text: str) -> list[_Line]:
    lines = [_Line(quoted=False)]
    quote_rest = False
    first_part = True
    for kind, raw, offset in _split_fences(text):
        if kind == "pre":
            lines[-1].items.append(("pre", raw, offset))
            first_part = False
            continue
        pieces = raw.split("\n")
        for index, whole in enumerate(pieces):
            if index > 0:
                lines.append(_Line(quoted=quote_rest, start=offset))
            piece, at = whole, offset
            if (index > 0 or first_part) and not quote_rest:
                piece, quoted, quote_rest = _quote_marker(whole)
                at += len(whole) - len(piece)
                lines[-1].quoted = quoted
                # ">>>" alone on its line: the quote starts on the next line.
                lines[-1].dropped = quote_rest and not piece and index < len(pieces) - 1
            if piece:
                lines[-1].items.append(("text", piece, at))
            offset += len(whole) + 1
        first_part = False
    return lines


def _line_html(line: _Line, names: _Names, budget: Budget) -> tuple[str, bool]:
    out = []
    for kind, raw, offset in line.items:
        try:
            out.append(_pre_html(raw, names, budget) if kind == "pre" else _inline_html(raw, names, budget))
        except _Cut as cut:
            cut.html = "".join(out) + cut.html
            cut.end = offset + len(raw)
            raise
    return "".join(out), bool(line.items) and line.items[-1][0] == "pre"


def _pre_html(raw: str, names: _Names, budget: Budget) -> str:
    typed = raw
    if raw.startswith("\n"):
        raw = raw[1:]
    if raw.endswith("\n"):
        raw = raw[:-1]
    work, refs = _extract_refs(raw)
    if not budget.take(1 + len(refs)):
        raise _Cut("", "```" + _decode(typed))  # the whole block as typed, its fences too
    # The HTML parser drops one newline right after <pre>: keep a leading blank line by giving it one to drop.
    lead = "\n" if work.startswith("\n") else ""
    return "<pre>" + lead + _plain_html(work, (_ref_html(r, names) for r in refs)) + "</pre>"


# --- inline: references, code spans, emoji, emphasis ----------------------------------------------------------

def _extract_refs(raw: str) -> tuple[str, list[str]]:
    """(decoded text with _ATOM in place of each reference, each reference's inside as typed, in order)."""
    parts: list[str] = []
    refs: list[str] = []
    pos = 0
    for m in _REF_RE.finditer(raw):
        parts.append(_decode(raw[pos:m.start()]))
        parts.append(_ATOM)
        refs.append(m.group(1))
        pos = m.end()
    parts.append(_decode(raw[pos:]))
    return "".join(parts), refs


def _literal(work: str, refs: list[str]) -> str:
    """Working text back to the text as typed (decoded): each _ATOM the reference it stands for."""
    if _ATOM not in work:
        return work
    pieces = work.split(_ATOM)
    out = [pieces[0]]
    for inner, piece in zip(refs, pieces[1:], strict=False):
        out.append("<" + _decode(inner) + ">")
        out.append(piece)
    return "".join(out)


def _plain_html(work: str, atoms: Iterator[str]) -> str:
    """Text with references and nothing else (code, pre)."""
    if _ATOM not in work:
        return _text(work)
    out = []
    for index, piece in enumerate(work.split(_ATOM)):
        if index:
            out.append(next(atoms))
        out.append(_text(piece))
    return "".join(out)


def _code_spans(work: str) -> list[tuple[int, int]]:
    """(opening, closing) backtick positions: each backtick pairs with the next one unless only spaces are between."""
    ticks = [m.start() for m in re.finditer("`", work)]
    spans = []
    k = 0
    while k + 1 < len(ticks):
        if work[ticks[k] + 1:ticks[k + 1]].strip():
            spans.append((ticks[k], ticks[k + 1]))
            k += 2
        else:
            k += 1
    return spans


def _emoji_in(work: str, start: int, end: int) -> list[tuple[int, int, str]]:
    """(start, end, emoji) for the known shortcodes in work[start:end]."""
    found = []
    pos = start
    while True:
        m = _EMOJI_RE.search(work, pos, end)
        if m is None:
            return found
        char = _EMOJI.get(m.group(1))
        if char is None:
            pos = m.end() - 1  # the closing colon may open the next shortcode
            continue
        stop = m.end()
        tone = _SKIN_RE.match(work, stop, end)
        if tone is not None:
            char = with_skin_tone(char, tone.group(1)) or char
            stop = tone.end()
        found.append((m.start(), stop, char))
        pos = stop


def _emphasis_pairs(work: str, skip: list[tuple[int, int]]) -> dict[int, str]:
    """position -> tag for the emphasis markers that pair up; `skip` are sorted (start, end) spans to ignore."""
    tags: dict[int, str] = {}
    stack: list[tuple[str, int]] = []
    open_count = {"*": 0, "_": 0, "~": 0}
    n = len(work)
    skip_index = 0
    for m in _EMPHASIS_RE.finditer(work):
        p = m.start()
        while skip_index < len(skip) and skip[skip_index][1] <= p:
            skip_index += 1
        if skip_index < len(skip) and skip[skip_index][0] <= p:
            continue  # inside a code span or an emoji
        marker = work[p]
        before = work[p - 1] if p > 0 else " "
        after = work[p + 1] if p + 1 < n else " "
        can_close = not before.isspace() and before != marker and not after.isalnum()
        can_open = not after.isspace() and after != marker and not before.isalnum()
        if can_close and open_count[marker]:
            # Close the innermost open marker of this kind; markers opened inside it stay literal (overlap).
            while True:
                kind, at = stack.pop()
                open_count[kind] -= 1
                if kind == marker:
                    break
            tags[at], tags[p] = _EMPHASIS[marker]
        elif can_open:
            stack.append((marker, p))
            open_count[marker] += 1
    return tags


def _inline_html(raw: str, names: _Names, budget: Budget) -> str:
    work, refs = _extract_refs(raw)
    code = _code_spans(work)
    emojis: list[tuple[int, int, str]] = []
    pos = 0
    for start, end in [*code, (len(work), len(work))]:
        emojis.extend(_emoji_in(work, pos, start))
        pos = end + 1
    skip = sorted([(a, b + 1) for a, b in code] + [(a, b) for a, b, _ in emojis])
    tags = _emphasis_pairs(work, skip)

    events: list[tuple[int, int, str]] = [(a, b + 1, "code") for a, b in code]
    events += [(a, b, char) for a, b, char in emojis]
    events += [(p, p + 1, "tag") for p in tags]
    events.sort()

    out: list[str] = []
    pending: list[str] = []  # literal text not yet balanced and escaped
    closers: list[str] = []  # the end tags of the open emphasis, innermost last
    used = 0  # references written so far

    def flush() -> None:
        if pending:
            out.append(_text("".join(pending)))
            pending.clear()

    def cut(at: int) -> _Cut:
        """The budget ran out at work[at]: what was written, closed, and the rest as typed."""
        flush()
        return _Cut("".join(out) + "".join(reversed(closers)), _literal(work[at:], refs[used:]))

    def add_literal(segment: str, at: int) -> None:
        nonlocal used
        if _ATOM not in segment:
            if segment:
                pending.append(segment)
            return
        for index, piece in enumerate(segment.split(_ATOM)):
            if index:
                if not budget.take():
                    raise cut(at)
                flush()
                out.append(_ref_html(refs[used], names))
                used += 1
                at += 1
            pending.append(piece)
            at += len(piece)

    pos = 0
    for start, end, what in events:
        add_literal(work[pos:start], pos)
        if what == "code":
            inner = work[start + 1:end - 1]
            count = inner.count(_ATOM)
            if not budget.take(1 + count):
                raise cut(start)
            flush()
            out.append("<code>" + _plain_html(inner, (_ref_html(r, names) for r in refs[used:used + count]))
                       + "</code>")
            used += count
        elif what == "tag":
            tag = tags[start]
            if tag.startswith("</"):
                closers.pop()
            elif budget.take():
                closers.append("</" + tag[1:])
            else:
                raise cut(start)
            flush()
            out.append(tag)
        else:
            pending.append(what)  # an emoji is plain text
        pos = end
    add_literal(work[pos:], pos)
    flush()
    return "".join(out)


# --- references ------------------------------------------------------------------------------------------------

def _ref_html(inner: str, names: _Names) -> str:
    """One `<...>` reference as HTML: a link, a mention, a date's fallback, or the literal text."""
    head, _, raw_label = inner.partition("|")
    label = _decode(raw_label)
    sigil, rest = head[:1], head[1:]
    if sigil == "@" and _ID_RE.fullmatch(rest):
        shown, title = _mention_name("@", names.users.get(rest) or label or rest)
        return f'<span class="mention"{title}>{shown}</span>'
    if sigil == "#" and _ID_RE.fullmatch(rest):
        shown, title = _mention_name("#", names.channels.get(rest) or label or rest)
        href = _channel_href(names, rest)
        if href is not None:
            return f'<a class="mention" href="{escape(href)}"{title}>{shown}</a>'
        return f'<span class="mention"{title}>{shown}</span>'
    if sigil == "!":
        special = _special_html(rest, label)
        if special is not None:
            return special
    elif sigil not in ("@", "#"):
        url = _link_url(_decode(head))
        if url is not None:
            shown = label or (url[len("mailto:"):] if url[:7].lower() == "mailto:" else _decode(head))
            return f'<a href="{escape(url)}" {_LINK_ATTRS}>{_text(shown)}</a>'
    return _text("<" + _decode(inner) + ">")


def _mention_name(sigil: str, name: str) -> tuple[str, str]:
    """(the mention's text as HTML, ' title="..."' when the name was cut at NAME_LIMIT, else "")."""
    short, full = shown_with_title(name)
    return _text(sigil + short), (f' title="{escape(sigil + full)}"' if full else "")


def _special_html(command: str, label: str) -> str | None:
    name, _, arg = command.partition("^")
    if name in _SPECIAL_MENTIONS and not arg:
        return f'<span class="mention">{_text("@" + name)}</span>'
    if name == "subteam" and _ID_RE.fullmatch(arg):
        return f'<span class="mention">{_text(label or "@" + arg)}</span>'
    if name == "date" and arg:
        if label:
            return _text(label)
        seconds = arg.partition("^")[0]
        if seconds.isdigit() and len(seconds) <= 11:
            when = dt.datetime.fromtimestamp(int(seconds), dt.UTC)
            return _text(when.strftime("%Y-%m-%d %H:%M UTC"))
    return None


def _link_url(url: str) -> str | None:
    """The URL a browser would follow, if its scheme is http, https or mailto; else None."""
    cleaned = url.strip(_C0_AND_SPACE).replace("\t", "").replace("\n", "")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in cleaned):
        return None
    return cleaned if _SAFE_SCHEME_RE.match(cleaned) else None


def _channel_href(names: _Names, channel_id: str) -> str | None:
    if names.channel_url is None:
        return None
    href = names.channel_url(channel_id)
    if href.startswith("/") and not href.startswith(("//", "/\\")):
        return href
    return _link_url(href) if href[:4].lower() == "http" else None
