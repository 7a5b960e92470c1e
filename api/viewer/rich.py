"""The rest of a Slack message -> safe HTML for the archive viewer: Block Kit blocks, secondary attachments
(cards and link unfurls), file comments and huddles, and the bot's name. Pure: no database, no network.

Input is the message's `content()` as Slack sent it (api/slack/messages.py), untrusted in every field: any JSON
type at any depth. Shapes follow Slack's Block Kit and "Secondary message attachments" references:

* blocks: section (text, fields, accessory), context, header, divider, image, actions, rich_text (section, list
  with style/indent/offset/border, quote, preformatted; inline text with bold/italic/strike/code/underline,
  link, user, channel, usergroup, broadcast, emoji with `unicode`/`skin_tone`, date, color, team), video, file,
  markdown, input. Text objects: `mrkdwn` goes through render.message_html, `plain_text` through
  render.text_html (`emoji` not false: known :shortcodes: become emoji). Unknown block types show their `text`
  if they have one, else nothing.
* interactive elements (buttons, selects, date pickers, checkboxes, ...) are inert: a disabled <button> or a
  <span>; a button's http(s) `url` becomes a plain link. Never a form, never a link that acts on anything.
* attachments: pretext, colour bar, service line, author (linked if http(s)), title (linked if http(s)), text or
  blocks (a shared message's `message_blocks` too), fields (`short` ones side by side), legacy action buttons
  (inert), image/thumb/icon URLs, footer with its `ts` as a date, the unfurled URL; `fallback` only when an
  attachment shows nothing else.

Safety rules, by construction:

* No image, video, iframe, style or script is ever emitted: every image URL (image_url, thumb_url, author_icon,
  service_icon, footer_icon, image blocks, accessories) is shown as a link, so the page makes no request to
  another host. `video_html`, `fields` of unknown shape and everything else not listed above are ignored.
* The tags are the ones written here plus render.py's: div, span, ul, ol, li, blockquote, pre, code, b, i, s,
  u, br, hr, a, button. Attributes: `class` (fixed names, or names built from a validated enum/int: never input
  text), `href`/`rel`/`target` on <a>, `type`/`disabled` on <button>, `start` (an int) on <ol>. No inline
  style: the page's CSP forbids it, so the colour bar is a class: good/warning/danger, or a `#rgb`/`#rrggbb`
  colour (strictly matched) quantised to a 4x4x4 palette class `bar-rgb-XYZ`; anything else is the default.
* Links only for http(s) URLs (render.link_url: the browser's reading of the URL; mailto is not taken from
  attachment or block URL fields); href attribute-escaped; rel="noopener noreferrer" target="_blank". A link
  never contains another link: labels are plain text.
* Every text reaches the page through render.message_html or render.text_html: controls replaced, bidi
  controls balanced per text run, escaped. Ids become names only through the lookups in `Names`, and only ids
  matching [A-Z0-9]+ are looked up; an emoji's `unicode` is used only if every code point is an emoji-range
  character (no controls, no bidi controls, no ASCII but keycap bases).
* Bounded markup: a message's texts share one render.Budget (MAX_ELEMENTS inline elements: the main text's, the
  blocks', the attachments' and the extras' when views.py passes the same one); a rich_text style (b, i, s, u,
  code) spends from it too, and once it is spent text is shown plain. Names (a bot's, an author's) are data
  shown through render.shown by views.py.
* Bounded and linear: at most 50 attachments, 100 blocks, 100 items per list (fields, elements, options), 8
  levels of nesting, and 5000 rendered nodes per call; past a cap the rest is counted ("N more not shown") or
  dropped. Each string is handled in linear time by render.py. Any shape (wrong types, missing fields) renders
  as much as it can and never raises.

`user_ids(content)` gives the user ids these renderers may look up, so a page reads only the names it needs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Callable, Mapping
from typing import Any

from markupsafe import Markup, escape

from api.viewer import render
from api.viewer.emoji import TABLE as _EMOJI
from api.viewer.emoji import with_skin_tone

__all__ = ["Names", "attachments_html", "blocks_html", "bot_name", "extras_html", "user_ids"]

MAX_ATTACHMENTS = 50
MAX_BLOCKS = 100
MAX_ITEMS = 100  # elements of one container: fields, list items, inline elements, options
MAX_DEPTH = 8
MAX_NODES = 5000  # rendered nodes per call, whatever the shape

_ID_RE = re.compile(r"[A-Z0-9]{1,64}")
_HEX_RE = re.compile(r"#?([0-9a-fA-F]{6}|[0-9a-fA-F]{3})")
_NAMED_COLOURS = {"good": "bar-good", "warning": "bar-warning", "danger": "bar-danger"}
_UNICODE_RE = re.compile(r"[0-9a-fA-F]{1,6}(?:-[0-9a-fA-F]{1,6}){0,9}")
_DATE_TOKEN_RE = re.compile(r"\{([a-z_]{1,24})\}")
_BROADCASTS = frozenset({"here", "channel", "everyone"})
_LINK_ATTRS = 'rel="noopener noreferrer" target="_blank"'
_SELECTS = frozenset({"static_select", "external_select", "users_select", "conversations_select",
                      "channels_select", "multi_static_select", "multi_external_select", "multi_users_select",
                      "multi_conversations_select", "multi_channels_select"})


@dataclasses.dataclass(frozen=True)
class Names:
    """Name lookups, as render.message_html takes them; `zone` for dates (the reader's)."""

    users: Mapping[str, str]
    channels: Mapping[str, str]
    channel_url: Callable[[str], str] | None = None
    zone: dt.tzinfo = dt.UTC


class _Ctx:
    """One call's state: the names, the node budget, and whether anything visible was written."""

    def __init__(self, names: Names, markup: render.Budget | None = None) -> None:
        self.names = names
        self.budget = MAX_NODES
        self.markup = markup if markup is not None else render.Budget()  # inline elements (render.py's)
        self.visible = False

    def spend(self) -> bool:
        """False once the call's node budget is used up: the caller renders nothing more."""
        self.budget -= 1
        return self.budget >= 0

    # -- text ----------------------------------------------------------------------------------------------

    def plain(self, text: Any, *, emoji_codes: bool = False) -> str:
        if not isinstance(text, str) or not text:
            return ""
        if text.strip():
            self.visible = True
        return str(render.text_html(text, emoji_codes=emoji_codes))

    def mrkdwn(self, text: Any) -> str:
        if not isinstance(text, str) or not text:
            return ""
        html = str(render.message_html(text, users=self.names.users, channels=self.names.channels,
                                       channel_url=self.names.channel_url, budget=self.markup))
        if html and text.strip():
            self.visible = True
        return html

    def text_object(self, obj: Any) -> str:
        """A composition text object ({"type": "mrkdwn"|"plain_text", "text": ...}); a bare string as plain."""
        if isinstance(obj, str):
            return self.plain(obj)
        if not isinstance(obj, dict):
            return ""
        if obj.get("type") == "mrkdwn":
            return self.mrkdwn(obj.get("text"))
        return self.plain(obj.get("text"), emoji_codes=obj.get("emoji") is not False)

    # -- links ---------------------------------------------------------------------------------------------

    def link(self, url: Any, label_html: str, css: str | None = None) -> str:
        """label_html as a link to url if it is http(s); else the label alone (in a span when classed)."""
        href = _http_url(url)
        cls = f' class="{css}"' if css else ""
        if href is None:
            return f"<span{cls}>{label_html}</span>" if css else label_html
        return f'<a href="{escape(href)}" {_LINK_ATTRS}{cls}>{label_html}</a>'

    def image(self, url: Any, alt: Any, kind: str = "image", *, show_url: bool = True) -> str:
        """An image as a link to it (never loaded): 🖼 and its alt text, else where it is (not for icons)."""
        href = _http_url(url)
        label = alt if isinstance(alt, str) and alt.strip() else (_short_url(href) if href and show_url else "")
        if href is None and not label:
            return ""  # nothing to show, nothing to link
        self.visible = True
        return self.link(href, f"🖼 {kind}: " + str(render.text_html(label)) if label else f"🖼 {kind}",
                         "image-link")

    def mention(self, ref: str) -> str:
        """A Slack reference (`@U1`, `#C1`, `!here`) shown exactly as render.py shows it in text."""
        self.visible = True
        return self.mrkdwn(f"<{ref}>")

    def date(self, seconds: Any, fmt: str = "{date_short} {time}") -> str | None:
        """A Unix time in the reader's zone, Slack's {tokens} in fmt replaced; None if not a sane time."""
        when = _time(seconds, self.names.zone)
        if when is None:
            return None
        tokens = {
            "date_num": when.strftime("%Y-%m-%d"), "date": when.strftime("%d %B %Y"),
            "date_short": when.strftime("%d %b %Y"), "date_long": when.strftime("%A, %d %B %Y"),
            "date_pretty": when.strftime("%d %B %Y"), "date_short_pretty": when.strftime("%d %b %Y"),
            "date_long_pretty": when.strftime("%A, %d %B %Y"), "time": when.strftime("%H:%M"),
            "time_secs": when.strftime("%H:%M:%S"), "ago": when.strftime("%d %b %Y %H:%M"),
            "day_divider_pretty": when.strftime("%A, %d %B %Y"),
        }
        return _DATE_TOKEN_RE.sub(lambda m: tokens.get(m.group(1), m.group(0)), fmt)


# --- public entry points ---------------------------------------------------------------------------------------

def blocks_html(blocks: Any, names: Names, budget: render.Budget | None = None) -> Markup:
    """The blocks as safe HTML; empty Markup when they show nothing visible (the caller then shows `text`).
    `budget`: the message's inline elements left (render.Budget), shared with its other texts."""
    ctx = _Ctx(names, budget)
    html = _blocks(ctx, blocks, 0)
    return Markup(html) if ctx.visible else Markup("")


def attachments_html(attachments: Any, names: Names, budget: render.Budget | None = None) -> Markup:
    """The attachments as cards (safe HTML); empty Markup when there are none or they show nothing."""
    ctx = _Ctx(names, budget)
    items = attachments if isinstance(attachments, list) else []
    out = [_attachment(ctx, a, 0) for a in items[:MAX_ATTACHMENTS]]
    out.append(_more(len(items) - MAX_ATTACHMENTS, "attachments"))
    html = "".join(out)
    return Markup(html) if ctx.visible else Markup("")


def extras_html(content: Any, names: Names, budget: render.Budget | None = None) -> Markup:
    """What some subtypes carry besides text: a file comment (`comment`), a huddle (`room`)."""
    if not isinstance(content, dict):
        return Markup("")
    ctx = _Ctx(names, budget)
    out = []
    comment = content.get("comment")
    if isinstance(comment, dict) and isinstance(comment.get("comment"), str) and comment["comment"].strip():
        who = comment.get("user")
        author = ctx.mention("@" + who) + " " if isinstance(who, str) and _ID_RE.fullmatch(who) else ""
        out.append(f'<div class="file-comment">{author}<span class="muted">commented:</span> '
                   f'{ctx.mrkdwn(comment["comment"])}</div>')
    room = content.get("room")
    if isinstance(room, dict):
        out.append(_huddle(ctx, room))
    html = "".join(out)
    return Markup(html) if ctx.visible else Markup("")


def bot_name(content: Any, username: str | None) -> str | None:
    """A bot's name as Slack shows it: `bot_profile.name`, else the message's `username`; None if neither."""
    profile = content.get("bot_profile") if isinstance(content, dict) else None
    name = profile.get("name") if isinstance(profile, dict) else None
    if isinstance(name, str) and name.strip():
        return name.strip()
    if username and username.strip():
        return username.strip()
    return None


def user_ids(content: Any) -> set[str]:
    """Every user id the renderers above may look up (a superset): user elements and initial users of blocks,
    `<@U...>` in any string of blocks/attachments, the file comment's author, a huddle's people."""
    found: set[str] = set()
    if not isinstance(content, dict):
        return found
    budget = [MAX_NODES * 4]

    def walk(value: Any, depth: int) -> None:
        budget[0] -= 1
        if budget[0] < 0 or depth > MAX_DEPTH * 3:
            return
        if isinstance(value, str):
            if "<@" in value:
                found.update(render.user_ids(value))
        elif isinstance(value, list):
            for item in value[:MAX_ITEMS * 2]:
                walk(item, depth + 1)
        elif isinstance(value, dict):
            for key in ("user_id", "initial_user"):
                if isinstance(value.get(key), str) and _ID_RE.fullmatch(value[key]):
                    found.add(value[key])
            for item in value.values():
                walk(item, depth + 1)

    for key in ("blocks", "attachments"):
        walk(content.get(key), 0)
    comment = content.get("comment")
    if isinstance(comment, dict):
        walk(comment.get("comment"), 0)
        if isinstance(comment.get("user"), str) and _ID_RE.fullmatch(comment["user"]):
            found.add(comment["user"])
    room = content.get("room")
    if isinstance(room, dict):
        found.update(_room_people(room))
    return found


# --- blocks --------------------------------------------------------------------------------------------------

def _blocks(ctx: _Ctx, blocks: Any, depth: int) -> str:
    if not isinstance(blocks, list) or depth > MAX_DEPTH:
        return ""
    out = [_block(ctx, b, depth + 1) for b in blocks[:MAX_BLOCKS]]
    out.append(_more(len(blocks) - MAX_BLOCKS, "blocks"))
    return "".join(out)


def _block(ctx: _Ctx, block: Any, depth: int) -> str:
    if not isinstance(block, dict) or not ctx.spend():
        return ""
    kind = block.get("type")
    if kind == "section":
        parts = []
        parts.append(_div("block-text", ctx.text_object(block.get("text"))))
        fields = _items(block.get("fields"))
        if fields:
            inner = "".join(f'<div class="block-field">{ctx.text_object(f)}</div>' for f in fields)
            parts.append(f'<div class="block-fields">{inner}</div>')
        accessory = _element(ctx, block.get("accessory"), depth)
        if accessory:
            parts.append(f'<div class="block-accessory">{accessory}</div>')
        return _div("block block-section", "".join(parts))
    if kind == "header":
        return _div("block block-header", ctx.text_object(block.get("text")))
    if kind == "divider":
        return '<hr class="block-divider">'
    if kind == "context":
        inner = "".join(f'<div class="context-item">{_context_item(ctx, e, depth)}</div>'
                        for e in _items(block.get("elements")))
        return _div("block block-context", inner)
    if kind == "image":
        title = _text_of(block.get("title"))
        url = block.get("image_url") or _dict(block.get("slack_file")).get("url")
        return _div("block block-image", ctx.image(url, title or block.get("alt_text")))
    if kind == "actions":
        inner = " ".join(_element(ctx, e, depth) for e in _items(block.get("elements")))
        return _div("block block-actions", inner)
    if kind == "rich_text":
        inner = "".join(_rich_block(ctx, e, depth) for e in _items(block.get("elements")))
        return _div("block block-rich-text", inner)
    if kind == "video":
        title = _text_of(block.get("title")) or block.get("alt_text")
        url = block.get("title_url") or block.get("video_url")
        return _div("block block-video", ctx.image(url, title, "video"))
    if kind == "file":
        # A remote file: Slack shows its card; the archive has only its id.
        external = block.get("external_id") if isinstance(block.get("external_id"), str) else ""
        return _div("block block-file", ctx.plain("📎 remote file " + external) if external else "")
    if kind == "markdown":
        return _div("block block-markdown", ctx.plain(block.get("text")))
    if kind == "input":
        label = ctx.text_object(block.get("label"))
        return _div("block block-input", label + " " + _element(ctx, block.get("element"), depth))
    # Unknown: its text, if it has one (Slack adds block types; an archive outlives the renderer).
    return _div("block", ctx.text_object(block.get("text"))) if block.get("text") is not None else ""


def _context_item(ctx: _Ctx, element: Any, depth: int) -> str:
    if isinstance(element, dict) and element.get("type") == "image":
        url = element.get("image_url") or _dict(element.get("slack_file")).get("url")
        return ctx.image(url, element.get("alt_text"))
    return ctx.text_object(element)


def _element(ctx: _Ctx, element: Any, depth: int) -> str:
    """An interactive or image element, inert."""
    if not isinstance(element, dict) or not ctx.spend():
        return ""
    kind = element.get("type")
    if kind == "image":
        url = element.get("image_url") or _dict(element.get("slack_file")).get("url")
        return ctx.image(url, element.get("alt_text"))
    if kind in ("button", "workflow_button"):
        label = ctx.text_object(element.get("text")) or "button"
        style = element.get("style")
        css = "block-button" + (f" {style}" if style in ("primary", "danger") else "")
        if _http_url(element.get("url")) is not None:
            return ctx.link(element.get("url"), label, css)
        return f'<button type="button" class="{css}" disabled>{label}</button>'
    if kind == "overflow":
        return _inert("⋯")
    if kind in _SELECTS:
        chosen = [_text_of(o.get("text")) for o in _items(element.get("initial_options")) if isinstance(o, dict)]
        chosen.append(_text_of(_dict(element.get("initial_option")).get("text")))
        for key, sigil in (("initial_user", "@"), ("initial_channel", "#"), ("initial_conversation", "#")):
            value = element.get(key)
            if isinstance(value, str) and _ID_RE.fullmatch(value):
                return _inert(ctx.mention(sigil + value) + " ▾")
        shown = ", ".join(c for c in chosen if c) or _text_of(element.get("placeholder")) or "select"
        return _inert(ctx.plain(shown) + " ▾")
    if kind in ("checkboxes", "radio_buttons"):
        picked = {_text_of(o.get("text")) for o in _items(element.get("initial_options"))
                  + [element.get("initial_option")] if isinstance(o, dict)}
        options = []
        for o in _items(element.get("options")):
            label = _text_of(o.get("text")) if isinstance(o, dict) else ""
            if label:
                mark = "☑" if label in picked else "☐"
                options.append(_inert(ctx.plain(f"{mark} {label}")))
        return " ".join(options)
    if kind in ("datepicker", "timepicker", "datetimepicker"):
        value = element.get("initial_date") or element.get("initial_time")
        if not isinstance(value, str):
            value = ctx.date(element.get("initial_date_time"), "{date_num} {time}") or ""
        return _inert(ctx.plain(value or _text_of(element.get("placeholder")) or kind))
    if kind in ("plain_text_input", "email_text_input", "url_text_input", "number_input", "rich_text_input"):
        return _inert(ctx.plain(_text_of(element.get("placeholder")) or "…"))
    return ctx.text_object(element.get("text")) if element.get("text") is not None else ""


def _inert(label_html: str) -> str:
    return f'<span class="block-select">{label_html}</span>'


# --- rich text -------------------------------------------------------------------------------------------------

def _rich_block(ctx: _Ctx, element: Any, depth: int) -> str:
    if not isinstance(element, dict) or not ctx.spend():
        return ""
    kind = element.get("type")
    border = " border" if element.get("border") in (1, True) else ""
    if kind == "rich_text_section":
        return _div("rt-section", _inlines(ctx, element.get("elements"), pre=False))
    if kind == "rich_text_quote":
        return f'<blockquote class="rt-quote{border}">{_inlines(ctx, element.get("elements"), pre=False)}</blockquote>'
    if kind == "rich_text_preformatted":
        return f'<pre class="rt-pre{border}">{_inlines(ctx, element.get("elements"), pre=True)}</pre>'
    if kind == "rich_text_list":
        indent = element.get("indent")
        indent = indent if isinstance(indent, int) and not isinstance(indent, bool) and 0 <= indent <= 8 else 0
        ordered = element.get("style") == "ordered"
        tag = "ol" if ordered else "ul"
        offset = element.get("offset")
        start = (f' start="{offset + 1}"' if ordered and isinstance(offset, int) and not isinstance(offset, bool)
                 and 0 < offset < 100_000 else "")
        items = "".join(f"<li>{_list_item(ctx, e, depth)}</li>" for e in _items(element.get("elements")))
        return f'<{tag} class="rt-list indent-{indent}{border}"{start}>{items}</{tag}>'
    return ""


def _list_item(ctx: _Ctx, element: Any, depth: int) -> str:
    if isinstance(element, dict) and element.get("type") == "rich_text_section":
        return _inlines(ctx, element.get("elements"), pre=False)
    return _rich_block(ctx, element, depth + 1) if depth < MAX_DEPTH else ""


def _inlines(ctx: _Ctx, elements: Any, *, pre: bool) -> str:
    items = elements if isinstance(elements, list) else []
    out = [_inline(ctx, e, pre) for e in items[:MAX_ITEMS * 5]]  # a long paragraph has many runs
    out.append(_more(len(items) - MAX_ITEMS * 5, "parts"))
    return "".join(out)


def _inline(ctx: _Ctx, element: Any, pre: bool) -> str:
    if not isinstance(element, dict) or not ctx.spend():
        return ""
    kind = element.get("type")
    html = ""
    if kind == "text":
        html = ctx.plain(element.get("text"))
    elif kind == "link":
        url = element.get("url")
        label = element.get("text") if isinstance(element.get("text"), str) and element["text"] else url
        html = ctx.link(url, ctx.plain(label)) if isinstance(label, str) else ""
    elif kind in ("user", "channel", "usergroup", "team"):
        key, sigil = {"user": ("user_id", "@"), "channel": ("channel_id", "#"),
                      "usergroup": ("usergroup_id", "!subteam^"), "team": ("team_id", "")}[kind]
        value = element.get(key)
        if isinstance(value, str) and _ID_RE.fullmatch(value):
            html = ctx.mention(sigil + value) if sigil else ctx.plain(value)
    elif kind == "broadcast":
        if element.get("range") in _BROADCASTS:
            html = ctx.mention("!" + element["range"])
    elif kind == "emoji":
        html = ctx.plain(_emoji(element))
    elif kind == "date":
        fmt = element.get("format") if isinstance(element.get("format"), str) else "{date_short} {time}"
        shown = ctx.date(element.get("timestamp"), fmt[:200])
        if shown is None:
            shown = element.get("fallback") if isinstance(element.get("fallback"), str) else ""
        html = ctx.link(element.get("url"), ctx.plain(shown)) if shown else ""
    elif kind == "color":
        html = ctx.plain(element.get("value"))
    elif isinstance(element.get("text"), str):
        html = ctx.plain(element["text"])
    if not html or pre:
        return html
    return _styled(ctx, html, element.get("style"))


def _styled(ctx: _Ctx, html: str, style: Any) -> str:
    """html in the style's tags, each spending one of the message's inline elements (none left: plain)."""
    if not isinstance(style, dict):
        return html
    for key, tag in (("code", "code"), ("strike", "s"), ("italic", "i"), ("bold", "b"), ("underline", "u")):
        if style.get(key) is True and ctx.markup.take():
            html = f"<{tag}>{html}</{tag}>"
    return html


def _emoji(element: dict[str, Any]) -> str:
    """An emoji element's character(s): the table's by name, else its `unicode` if sane, else `:name:`."""
    name = element.get("name") if isinstance(element.get("name"), str) else ""
    base, _, tone_part = name.partition("::skin-tone-")
    tone = element.get("skin_tone")
    tone = str(tone) if isinstance(tone, int) and not isinstance(tone, bool) else tone_part
    char = _EMOJI.get(base) or _unicode(element.get("unicode"))
    if char is None:
        return f":{name[:100]}:" if name else ""
    if tone in ("2", "3", "4", "5", "6"):
        char = with_skin_tone(char, tone) or char
    return char


def _unicode(value: Any) -> str | None:
    """"1f44d" / "1f468-200d-1f4bb" as text, if every code point is one an emoji may use."""
    if not isinstance(value, str) or not _UNICODE_RE.fullmatch(value):
        return None
    chars = []
    for part in value.split("-"):
        cp = int(part, 16)
        keycap_base = cp in (0x23, 0x2A) or 0x30 <= cp <= 0x39
        joiner = cp in (0x200D, 0x20E3, 0xFE0F, 0xA9, 0xAE)
        pictograph = 0x2100 <= cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF and not 0xFFF0 <= cp <= 0xFFFF \
            and not 0x2400 <= cp <= 0x243F
        if not (keycap_base or joiner or pictograph):
            return None
        chars.append(chr(cp))
    return "".join(chars)


# --- attachments ----------------------------------------------------------------------------------------------

def _attachment(ctx: _Ctx, a: Any, depth: int) -> str:
    if not isinstance(a, dict) or not ctx.spend():
        return ""
    seen_before = ctx.visible
    ctx.visible = False
    parts = []
    service = ctx.plain(a.get("service_name"))
    if service:
        parts.append(f'<div class="attachment-service">{service}</div>')
    author = ctx.plain(a.get("author_name"))
    if author:
        sub = ctx.plain(a.get("author_subname"))
        line = ctx.link(a.get("author_link"), author) + (f' <span class="muted">{sub}</span>' if sub else "")
        parts.append(f'<div class="attachment-author">{line}</div>')
    title = ctx.plain(a.get("title"))
    if title:
        parts.append(f'<div class="attachment-title">{ctx.link(a.get("title_link"), title)}</div>')
    body = _blocks(ctx, a.get("blocks"), depth + 1)
    for shared in _items(a.get("message_blocks"))[:5]:  # a shared or forwarded message's own blocks
        body += _blocks(ctx, _dict(_dict(shared).get("message")).get("blocks"), depth + 1)
    if not body.strip():
        body = ctx.mrkdwn(a.get("text"))
    if body:
        parts.append(f'<div class="attachment-text">{body}</div>')
    fields = []
    for f in _items(a.get("fields")):
        if not isinstance(f, dict):
            continue
        ft, fv = ctx.plain(f.get("title")), ctx.mrkdwn(f.get("value"))
        if ft or fv:
            css = "attachment-field short" if f.get("short") is True else "attachment-field"
            fields.append(f'<div class="{css}"><div class="field-title">{ft}</div>'
                          f'<div class="field-value">{fv}</div></div>')
    if fields:
        parts.append(f'<div class="attachment-fields">{"".join(fields)}</div>')
    actions = " ".join(_element(ctx, x, depth) for x in _items(a.get("actions")))  # legacy buttons: inert
    if actions.strip():
        parts.append(f'<div class="block-actions">{actions}</div>')
    images = [ctx.image(a.get("image_url"), None), ctx.image(a.get("thumb_url"), None, "thumbnail")]
    images += [ctx.image(a.get(k), None, label, show_url=False) for k, label in
               (("author_icon", "author icon"), ("service_icon", "service icon"), ("footer_icon", "footer icon"))]
    images = [i for i in images if i]
    if images:
        parts.append(f'<div class="attachment-images">{" ".join(images)}</div>')
    link = a.get("original_url") or a.get("from_url")
    if _http_url(link) is not None and link not in (a.get("title_link"), a.get("author_link")):
        parts.append(f'<div class="attachment-url">{ctx.link(link, ctx.plain(_short_url(link)))}</div>')
    footer = ctx.mrkdwn(a.get("footer"))
    when = ctx.date(a.get("ts"))
    if footer or when:
        sep = " · " if footer and when else ""
        parts.append(f'<div class="attachment-footer">{footer}{sep}{ctx.plain(when) if when else ""}</div>')
    if not ctx.visible:
        fallback = ctx.mrkdwn(a.get("fallback"))
        if fallback:
            parts = [f'<div class="attachment-text">{fallback}</div>']
    shown = ctx.visible
    pretext = ctx.mrkdwn(a.get("pretext"))
    ctx.visible = seen_before or shown or bool(pretext)
    if not shown and not pretext:
        return ""
    pre = f'<div class="attachment-pretext">{pretext}</div>' if pretext else ""
    card = f'<div class="attachment {_bar_class(a.get("color"))}">{"".join(parts)}</div>' if shown else ""
    return f'<div class="attachment-wrap">{pre}{card}</div>'


def _bar_class(color: Any) -> str:
    """A fixed class for the colour bar: named, a hex colour quantised to 64 classes, or the default."""
    if not isinstance(color, str):
        return "bar-default"
    if color in _NAMED_COLOURS:
        return _NAMED_COLOURS[color]
    m = _HEX_RE.fullmatch(color)
    if m is None:
        return "bar-default"
    digits = m.group(1)
    if len(digits) == 3:
        digits = "".join(c * 2 for c in digits)
    levels = "".join(str(round(int(digits[i:i + 2], 16) / 85)) for i in (0, 2, 4))
    return f"bar-rgb-{levels}"


# --- huddles ----------------------------------------------------------------------------------------------------

def _room_people(room: dict[str, Any]) -> list[str]:
    people: list[str] = []
    for key in ("participant_history", "participants", "created_by"):
        value = room.get(key)
        for who in (value if isinstance(value, list) else [value])[:MAX_ITEMS]:
            if isinstance(who, str) and _ID_RE.fullmatch(who) and who not in people:
                people.append(who)
    return people


def _huddle(ctx: _Ctx, room: dict[str, Any]) -> str:
    parts = ['<span class="huddle-title">🎧 Huddle</span>']
    name = ctx.plain(room.get("name"))
    if name:
        parts.append(name)
    start, end = ctx.date(room.get("date_start")), ctx.date(room.get("date_end"))
    if start:
        parts.append(ctx.plain(f"started {start}"))
    if end and room.get("date_end"):
        parts.append(ctx.plain(f"ended {end}"))
    elif room.get("has_ended") is False:
        parts.append(ctx.plain("ongoing"))
    people = _room_people(room)
    if people:
        parts.append('<span class="muted">with</span> ' + ", ".join(ctx.mention("@" + u) for u in people))
    ctx.visible = True
    return f'<div class="huddle">{" · ".join(parts)}</div>'


# --- small helpers -----------------------------------------------------------------------------------------

def _div(css: str, inner: str) -> str:
    return f'<div class="{css}">{inner}</div>' if inner else ""


def _items(value: Any) -> list[Any]:
    return value[:MAX_ITEMS] if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _more(count: int, what: str) -> str:
    return f'<div class="muted">({count} more {what} not shown)</div>' if count > 0 else ""


def _text_of(obj: Any) -> str:
    """The raw text of a text object (or a string), for labels shown as plain text."""
    if isinstance(obj, str):
        return obj
    if isinstance(obj, dict) and isinstance(obj.get("text"), str):
        return obj["text"]
    return ""


def _http_url(url: Any) -> str | None:
    """url cleaned as a browser reads it, if http(s); else None (no mailto: these fields name pages)."""
    if not isinstance(url, str) or len(url) > 4000:
        return None
    cleaned = render.link_url(url)
    return cleaned if cleaned is not None and cleaned[:4].lower() == "http" else None


def _short_url(url: str) -> str:
    """Where a URL points, shortened for a label: host and path, no scheme."""
    rest = url.split("://", 1)[-1]
    return rest if len(rest) <= 80 else rest[:77] + "…"


def _time(seconds: Any, zone: dt.tzinfo) -> dt.datetime | None:
    if isinstance(seconds, str):
        try:
            seconds = float(seconds)
        except ValueError:
            return None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds < 32_503_680_000:
        return None
    try:
        return dt.datetime.fromtimestamp(seconds, zone)
    except (OverflowError, OSError, ValueError):
        return None
