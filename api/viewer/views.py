"""View-models of archived Slack messages for the archive pages: what `viewer/_message.html` shows of a message
(author name, local time, rendered text, reactions with who reacted, files, thread and edit links).

Every read goes through the tables' owners (users, channels, messages), bounded by what one page shows: the
profiles of the ids on the page (read concurrently), the channel index (one partition per workspace), the
reply authors of the page's thread heads (one small partition each, read concurrently).

Every piece of data a view shows (author, channel and file names, reactions, who reacted, a subtype's note) goes
through render.shown: controls replaced, bidi balanced (a file name's bidi controls removed), names and reactions
cut at render.NAME_LIMIT characters with the whole value in a `*_title` for the template's title attribute. The
message's texts (its text or blocks, attachments, extras) share one render.Budget of inline elements.

Other pages reuse this: build `MessageView`s with `message_views(...)` and render each with the
`message` macro of `viewer/_message.html` (`{% from "viewer/_message.html" import message %}`).
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime, tzinfo
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

from flask import current_app
from markupsafe import Markup

from api.context import get_db
from api.db import Database
from api.slack import search, users
from api.slack.messages import Message
from api.slack.timeutil import us_to_ts
from api.viewer import render, rich

T = TypeVar("T")
R = TypeVar("R")

_POOL_THREADS = 16


def concurrently(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """`fn` over `items` on a small shared thread pool (the owners' reads are synchronous; a page needs a few
    dozen of them at once): the Database's, created on first use, after gunicorn forked."""
    listed = list(items)
    if len(listed) <= 1:
        return [fn(item) for item in listed]
    return list(get_db().executor("archive-pages", _POOL_THREADS).map(fn, listed))


# -- URLs ------------------------------------------------------------------------------------------------------

def _q(include_deleted: bool) -> str:
    return "?include_deleted=1" if include_deleted else ""


def _seg(value: Any) -> str:
    """One path segment built from data: percent-encoded whole (a `/`, `..`, `?` or `#` in an id cannot leave
    its segment; ids are checked at ingest too, api/slack/payloads.py)."""
    return quote(str(value), safe="")


def channel_url(team_id: str, channel_id: str, include_deleted: bool = False) -> str:
    return f"/archive/teams/{_seg(team_id)}/channels/{_seg(channel_id)}{_q(include_deleted)}"


def user_url(team_id: str, user_id: str) -> str:
    return f"/archive/teams/{_seg(team_id)}/users/{_seg(user_id)}"


def thread_url(team_id: str, channel_id: str, thread_ts: str, include_deleted: bool = False) -> str:
    return (f"/archive/teams/{_seg(team_id)}/channels/{_seg(channel_id)}/threads/{_seg(thread_ts)}"
            f"{_q(include_deleted)}")


def history_url(team_id: str, channel_id: str, ts: str, include_deleted: bool = False) -> str:
    return (f"/archive/teams/{_seg(team_id)}/channels/{_seg(channel_id)}/messages/{_seg(ts)}/history"
            f"{_q(include_deleted)}")


def file_url(team_id: str, channel_id: str, ts: str, file_id: str, include_deleted: bool = False) -> str:
    return (f"/archive/teams/{_seg(team_id)}/files/{_seg(channel_id)}/{_seg(ts)}/{_seg(file_id)}"
            f"{_q(include_deleted)}")


def safe_link(url: Any) -> str | None:
    """An archived URL fit for an href: http(s) or mailto only (no javascript:, data:, relative tricks)."""
    if not isinstance(url, str) or len(url) > 4000 or any(ord(c) < 0x20 for c in url):
        return None
    scheme = urlsplit(url.strip()).scheme.lower()
    return url.strip() if scheme in ("http", "https", "mailto") else None


# -- names -----------------------------------------------------------------------------------------------------

def display_name(profile: Mapping[str, Any] | None, fallback: str) -> str:
    """What Slack shows for a person: display name, else real name, else user name, else the id."""
    if not profile:
        return fallback
    return profile.get("display_name") or profile.get("real_name") or profile.get("name") or fallback


def user_profiles(db: Database, team_id: str, user_ids: Iterable[str]) -> dict[str, dict[str, Any] | None]:
    """The profiles of these users (read concurrently): only the ids a page shows."""
    return users.profiles(db, team_id, sorted({u for u in user_ids if u}))


def user_names(db: Database, team_id: str, user_ids: Iterable[str]) -> dict[str, str]:
    """Names from the workspace directory (every user's name, read at most every 30 s per process: a page
    showed 35-42 profile reads before); a user newer than the directory from their profile."""
    wanted = {u for u in user_ids if u}
    known = search.directory(db, team_id).user_names
    out = {u: known[u] for u in wanted if u in known}
    missing = wanted - out.keys()
    if missing:
        out.update({u: display_name(p, u) for u, p in user_profiles(db, team_id, missing).items()})
    return out


def channel_names(db: Database, team_id: str, *, include_private: bool) -> dict[str, str]:
    """Channel id (and each previous id) -> current name, from the workspace directory (the channel index,
    read at most every 30 s per process); private(-converted) channels only for readers with the private
    scope, so a mention never reveals the name of a channel the reader may not open."""
    found = search.directory(db, team_id)
    return {channel_id: name for channel_id, name in found.channel_names.items()
            if name != channel_id and (include_private or channel_id not in found.private)}


# -- view-models -----------------------------------------------------------------------------------------------

FILE_NAME_LIMIT = 120  # characters of a file name shown (its last FILE_NAME_END kept: the extension)
FILE_NAME_END = 16


@dataclasses.dataclass(frozen=True)
class ReactionView:
    emoji: str  # the Unicode emoji, or :name: for a custom one (cut at render.NAME_LIMIT)
    name: str  # the reaction's name, controls replaced (data-emoji)
    count: int
    title: str  # who reacted, with the whole name


@dataclasses.dataclass(frozen=True)
class FileView:
    file_id: str
    name: str
    size_label: str | None
    url: str | None  # Chronicle's route to the stored bytes
    external_url: str | None  # an external file's link (http(s) only)
    state: str  # stored | external | failed | pending | deleted (Slack's tombstone) | hidden (plan limit)
    title: str = ""  # the whole name (bidi controls removed) when `name` was cut


@dataclasses.dataclass(frozen=True)
class MessageView:
    team_id: str
    channel_id: str  # the channel whose page shows it (the newest id of its channel)
    ts: str
    ts_us: int
    author_id: str | None
    author_name: str
    author_url: str | None
    is_bot: bool
    at: datetime  # in the reader's zone
    html: Markup  # the blocks, as Slack's clients show them, else the text (api/viewer/render.py, rich.py)
    subtype: str | None
    is_reply: bool
    thread_ts: str | None
    reply_count: int
    edited: bool
    edited_title: str
    deleted: bool
    reactions: tuple[ReactionView, ...]
    files: tuple[FileView, ...]
    include_deleted: bool
    channel_name: str | None = None  # shown by pages that list messages of many channels
    attachments: Markup = Markup("")  # attachment cards and link unfurls (api/viewer/rich.py)
    extras: Markup = Markup("")  # a file comment, a huddle (rich.extras_html)
    note: str | None = None  # what an event without any content was ("updated the channel canvas")
    author_title: str = ""  # the whole author name when author_name was cut (render.NAME_LIMIT)
    channel_title: str = ""  # the whole channel name when channel_name was cut

    @property
    def initial(self) -> str:
        """The avatar's letter: the name's first letter or digit (not a bidi control or a mark)."""
        return next((c for c in self.author_name if c.isalnum()), "?").upper()

    @property
    def hue(self) -> int:
        """One of 8 avatar colours, fixed per author."""
        return zlib.crc32((self.author_id or self.author_name).encode()) % 8

    @property
    def day(self) -> date:
        return self.at.date()

    @property
    def anchor(self) -> str:
        return "m-" + self.ts.replace(".", "-")

    @property
    def time_label(self) -> str:
        """The time; with the day too where a list spans days without separators (channel_name shown)."""
        if self.channel_name is None:
            return self.at.strftime("%H:%M")
        return f"{self.at.day} {self.at.strftime('%b %Y, %H:%M')}"

    @property
    def time_title(self) -> str:
        return self.at.strftime("%A %d %B %Y, %H:%M:%S ") + (self.at.tzname() or "")

    @property
    def thread_url(self) -> str | None:
        head = self.thread_ts or (self.ts if self.reply_count else None)
        return thread_url(self.team_id, self.channel_id, head, self.include_deleted) if head else None

    @property
    def history_url(self) -> str:
        return history_url(self.team_id, self.channel_id, self.ts, self.include_deleted)

    @property
    def channel_url(self) -> str:
        return channel_url(self.team_id, self.channel_id, self.include_deleted) + "#" + self.anchor


def day_label(day: date) -> str:
    return day.strftime("%A, %d %B %Y").replace(" 0", " ")


def _size_label(size: Any) -> str | None:
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return None
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return None


def _files(team_id: str, channel_id: str, msg: Message) -> tuple[FileView, ...]:
    """The message's files; stored ones link to the file route under the page's channel id (whose access rules
    the route applies: the newest id of a channel carries its visibility)."""
    out = []
    stored, failed = msg.files_stored or {}, msg.files_fetch_error or {}
    for f in msg.files or ():
        if not isinstance(f, dict) or not isinstance(f.get("id"), str):
            continue
        file_id = f["id"]
        raw_name = next((f[k] for k in ("title", "name") if isinstance(f.get(k), str) and f[k]), file_id)
        # Bidi controls removed, not balanced: inside one name an override still reverses "gnp.exe" to "exe.png".
        name, title = render.shown_with_title(raw_name, FILE_NAME_LIMIT, strip_bidi=True, keep_end=FILE_NAME_END)
        external = safe_link(f.get("external_url")) if f.get("is_external") else None
        if external is not None and not external.lower().startswith("http"):
            external = None  # an external file links out to a page: http(s) only
        mode = f.get("mode")
        if mode == "tombstone":  # Slack keeps the id of a deleted file, nothing else
            out.append(FileView(file_id, "This file was deleted.", None, None, None, "deleted"))
            continue
        if mode == "hidden_by_limit":
            out.append(FileView(file_id, "File hidden by the workspace's plan limit", None, None, None, "hidden"))
            continue
        if file_id in stored:
            # A deleted message's files are served only with include_deleted, as the message is shown.
            state, url = "stored", file_url(team_id, channel_id, us_to_ts(msg.ts), file_id, msg.deleted)
        elif f.get("is_external"):
            state, url = "external", None
        else:
            state, url = ("failed" if file_id in failed else "pending"), None
        out.append(FileView(file_id, name, _size_label(f.get("size")), url, external, state, title))
    return tuple(out)


def _emoji(name: str) -> str:
    return render.emoji(name) or render.shown(f":{name}:", render.NAME_LIMIT)


def _reaction(name: str, who: Sequence[str], known: Mapping[str, str]) -> ReactionView:
    """A reaction chip: the emoji (a custom one's :name: cut), who reacted (each name cut) in its title."""
    people = ", ".join(render.shown(known.get(u, u), render.NAME_LIMIT) for u in who)
    title = render.shown(f"{people} reacted with :{name}:", render.TITLE_LIMIT)
    return ReactionView(_emoji(name), render.shown(name), len(who), title)


def page_user_ids(msgs: Iterable[Message]) -> set[str]:
    """Every user id a list of messages names: authors, reactors, mentions in the text, the blocks and the
    attachments, file comment authors, huddle participants."""
    ids: set[str] = set()
    for m in msgs:
        if m.user:
            ids.add(m.user)
        for _emoji_name, reactors in m.reactions:
            ids.update(reactors)
        if m.text:
            ids |= render.user_ids(m.text)
        ids |= rich.user_ids(m.content())
    return ids


# What an event shows when it carries nothing else (Slack's clients show a line like these).
_SUBTYPE_NOTES = {
    "channel_canvas_updated": "updated the channel canvas",
    "huddle_thread": "started a huddle",
    "pinned_item": "pinned a message",
    "unpinned_item": "unpinned a message",
    "bot_add": "added an integration",
    "bot_remove": "removed an integration",
    "reminder_add": "set a reminder",
    "channel_join": "joined the channel",
    "channel_leave": "left the channel",
    "file_share": "shared a file",
}


def _body(m: Message, content: dict[str, Any], names: rich.Names) -> tuple[Markup, Markup, Markup, str | None]:
    """(main html, attachment cards, extras, note): the blocks as Slack's clients show them, else the text
    (the notification fallback); a note naming the event when none of it shows anything. One budget of inline
    elements (render.MAX_ELEMENTS) for all of it: past it, the rest of each text is plain."""
    budget = render.Budget()
    html = rich.blocks_html(content.get("blocks"), names, budget) if content.get("blocks") else Markup("")
    if not html:
        html = render.message_html(m.text or "", users=names.users, channels=names.channels,
                                   channel_url=names.channel_url, budget=budget)
    cards = rich.attachments_html(content.get("attachments"), names, budget)
    extras = rich.extras_html(content, names, budget)
    note = None
    if not html and not cards and not extras and not m.files:
        note = _SUBTYPE_NOTES.get(m.subtype or "") or (
            render.shown(f"({m.subtype.replace('_', ' ')})", render.NAME_LIMIT) if m.subtype else None)
    return html, cards, extras, note


class _Noted(Mapping[str, str]):
    """A name map that notes each name a rendering looks up (found or not): what the HTML depends on."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self.names = names
        self.looked_up: dict[str, str | None] = {}
        self.listed = False  # the whole map was read: the HTML depends on all of it (not kept)

    def __getitem__(self, key: str) -> str:
        value = self.names.get(key)
        self.looked_up[key] = value
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        value = self.names.get(key)
        self.looked_up[key] = value
        return default if value is None else value

    def __iter__(self) -> Iterator[str]:
        self.listed = True
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


@dataclasses.dataclass(frozen=True)
class _Body:
    html: tuple[Markup, Markup, Markup, str | None]
    users: tuple[tuple[str, str | None], ...]      # the names it looked up, as they were
    channels: tuple[tuple[str, str | None], ...]
    links: tuple[tuple[str, str], ...]             # the channel links it asked for

    def holds(self, users: Mapping[str, str], channels: Mapping[str, str], link: Callable[[str], str]) -> bool:
        return (all(users.get(k) == v for k, v in self.users) and all(channels.get(k) == v for k, v in self.channels)
                and all(link(k) == v for k, v in self.links))


# A message's HTML is a function of its text, content, subtype and files, the reader's zone, and the names it
# looks up: kept per process under the first four and the zone, and used again while every name it looked up
# is still the same (a rename or a channel made private renders it again). An edit or an unfurl changes the
# text or the content, so the key. Messages with large content are rendered each time (the key holds it).
_BODIES = "viewer.message_bodies"
_BODIES_MAX = 4_000
_BODY_KEY_MAX_BYTES = 16_384


def _cached_body(db: Database | None, team_id: str, m: Message, content: dict[str, Any], names: rich.Names
                 ) -> tuple[Markup, Markup, Markup, str | None]:
    link = names.channel_url
    if db is None or link is None or len(m.text or "") + len(m.content_blob or b"") > _BODY_KEY_MAX_BYTES:
        return _body(m, content, names)
    cache = db.caches.lru(_BODIES, maxsize=_BODIES_MAX)
    key = (team_id, names.zone, m.text, m.content_blob, m.subtype, bool(m.files))
    found = cache.get(key)
    if found is not None and found.holds(names.users, names.channels, link):
        return found.html
    users, channels, links = _Noted(names.users), _Noted(names.channels), {}

    def noted_link(channel_id: str) -> str:
        links[channel_id] = link(channel_id)
        return links[channel_id]

    html = _body(m, content, rich.Names(users, channels, noted_link, names.zone))
    if not users.listed and not channels.listed:
        cache.set(key, _Body(html, tuple(users.looked_up.items()), tuple(channels.looked_up.items()),
                             tuple(links.items())))
    return html


def message_views(db: Database | None, team_id: str, msgs: Sequence[Message], *, zone: tzinfo,
                  page_channel_id: str | None, include_deleted: bool, channel_names_map: Mapping[str, str],
                  names: Mapping[str, str] | None = None, show_channel: bool = False) -> list[MessageView]:
    """The view of each message, in the order given. `page_channel_id` is the channel whose URLs the links use
    (None: each message's own channel); a thread head shows its stored reply count;
    `names` user names already known (the rest are read; `db` None: none to read, and no HTML kept)."""
    known = dict(names or {})
    missing = page_user_ids(msgs) - known.keys()
    if missing:
        known.update(user_names(db, team_id, missing))

    def channel_link(channel_id: str) -> str:
        # A channel the reader may not open (or unknown) is named, not linked ("" is no link for render).
        return channel_url(team_id, channel_id) if channel_id in channel_names_map else ""

    out = []
    for m in msgs:
        channel_id = page_channel_id or m.channel_id
        ts = us_to_ts(m.ts)
        content = m.content()
        # A bot is named as Slack names it (its profile, the username it posted with), never by its B... id.
        bot = rich.bot_name(content, m.username) if m.bot_id or not m.user else None
        if m.user:
            author_name = known.get(m.user, m.user)
            if author_name == m.user and bot:  # an app's bot user the directory does not know
                author_name = bot
        else:
            author_name = bot or m.bot_id or "unknown"
        html, cards, extras, note = _cached_body(db, team_id, m, content,
                                                 rich.Names(known, channel_names_map, channel_link, zone))
        reactions = tuple(_reaction(name, who, known) for name, who in m.reactions)
        author_name, author_title = render.shown_with_title(author_name)
        channel_name, channel_title = (render.shown_with_title(channel_names_map.get(m.channel_id, m.channel_id))
                                       if show_channel else (None, ""))
        is_reply = m.thread_ts is not None and m.thread_ts != m.ts
        out.append(MessageView(
            team_id=team_id, channel_id=channel_id, ts=ts, ts_us=m.ts, author_id=m.user or m.bot_id,
            author_name=author_name, author_url=user_url(team_id, m.user) if m.user else None,
            is_bot=m.user is None or m.subtype == "bot_message" or bool(m.bot_id),
            at=datetime.fromtimestamp(m.ts / 1_000_000, zone),
            html=html,
            subtype=m.subtype, is_reply=is_reply,
            thread_ts=us_to_ts(m.thread_ts) if is_reply else None,
            reply_count=m.reply_count,
            edited=m.edited_ts is not None,
            edited_title=("edited " + datetime.fromtimestamp(m.edited_ts / 1_000_000, zone)
                          .strftime("%d %b %Y %H:%M")) if m.edited_ts is not None else "",
            deleted=m.deleted, reactions=reactions, files=_files(team_id, channel_id, m),
            include_deleted=include_deleted,
            channel_name=channel_name, channel_title=channel_title,
            attachments=cards, extras=extras, note=note, author_title=author_title,
        ))
    return out


# The `message` macro's HTML of a view, kept per process under the view itself: a frozen value of everything the
# macro shows (its text's HTML, names, the local time and its zone, reactions, files, reply count), so any change
# to what is shown is another key. What a page shows again is rendered once per process.
_MESSAGE_HTML = "viewer.message_html"
_MESSAGE_HTML_MAX = 2_000


def message_html(view: MessageView, in_panel: bool = False) -> Markup:
    """viewer/_message.html's `message(view, in_panel)`, the templates' `message` (registered by slack_pages)."""
    cache = get_db().caches.lru(_MESSAGE_HTML, maxsize=_MESSAGE_HTML_MAX)
    # Aware datetimes compare (and hash) by instant: the zone goes in the key, as the time shown is local.
    key = (view, view.at.tzinfo, in_panel)
    html = cache.get(key)
    if html is None:
        macro = current_app.jinja_env.get_template("viewer/_message.html").module.message  # type: ignore[attr-defined]
        html = Markup(macro(view, in_panel=in_panel))
        cache.set(key, html)
    return html


def with_days(views: Sequence[MessageView]) -> list[tuple[date, str, list[MessageView]]]:
    """The views grouped by the reader's local day, in the order given: (day, label, views) for each run."""
    groups: list[tuple[date, str, list[MessageView]]] = []
    for view in views:
        if not groups or groups[-1][0] != view.day:
            groups.append((view.day, day_label(view.day), []))
        groups[-1][2].append(view)
    return groups
