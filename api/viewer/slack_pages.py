"""The archive's Slack pages (/archive/...): a workspace's channels and users, a channel's timeline newest first
with "load older" paging, a thread in a side panel, a message's edit history, a user's profile with their
activity calendar and recent messages, and stored files streamed after the same access checks.

Server-rendered (Jinja, api/templates/viewer/); the plain JS in api/static/viewer/ fetches the fragments
(older page, thread, history) and puts them in the page. Access is the REST API's (api/slack/http.py): the
cookie's token must allow the workspace, a private(-converted) channel needs the private scope, and the reads go
through the same domain functions with the same signed cursors (api/slack/listings.py: a timeline cursor of the
REST API pages this timeline too). Their refusals (api/errors.py) become pages through `api.pages.error_pages`.
Message text is rendered by api/viewer/render.py only; everything else is escaped by Jinja.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from flask import Blueprint, Response, current_app, g, make_response, render_template, request, send_file

from api import conditional
from api.activity import calendar, codec, service
from api.activity import events as ev
from api.config import Settings
from api.context import get_db
from api.csrf import csrf_token
from api.errors import BadPosition, NotFound
from api.pages import PageError, error_pages, secure
from api.slack import activity_index, channels, files, listings, messages, search, users, versions
from api.slack.codec import is_slack_id
from api.slack.messages import Message
from api.slack.timeutil import is_ts, ts_to_us
from api.viewer import render, views
from api.viewer.session import Reader, allow_workspace, current_reader, signin_redirect

_API_DIR = Path(__file__).resolve().parents[1]

bp = Blueprint("archive_pages", __name__, url_prefix="/archive", template_folder=str(_API_DIR / "templates"),
               static_folder=str(_API_DIR / "static" / "viewer"), static_url_path="/static")
bp.add_app_template_filter(render.shown, "shown")  # data shown by the templates: viewer/_names.html, render.py
bp.add_app_template_global(views.message_html, "message")  # one message's HTML, kept per process (views.py)

PAGE_SIZE = 50  # timeline messages per page (the REST API's default limit)
THREAD_PAGE = 100
INDEX_PAGE = 100  # channels and users per page of the workspace page
CALENDAR_WEEKS = 12
RECENT_MESSAGES = 20
SEARCH_PAGE = 20  # results per page of the search page
_BAD_CURSOR = "invalid cursor: use the page's own 'load older' button"



# A stored file is sent as a download with a CSP of its own (no scripts, sandboxed): whatever was uploaded to
# Slack never runs as a page of Chronicle's origin.
FILE_CSP = "default-src 'none'; sandbox; frame-ancestors 'none'"


@bp.after_request
def _headers(response: Response) -> Response:
    secure(response)
    if request.endpoint != "archive_pages.static" and "ETag" not in response.headers:
        # Every answer holds scoped archive data. A page with an ETag is kept by the browser and revalidated
        # (`private, no-cache`); signing out clears the browser's copies (api/viewer/session.py).
        response.headers["Cache-Control"] = "no-store"
    if request.endpoint == "archive_pages.stored_file" and response.status_code == 200:
        response.headers["Content-Security-Policy"] = FILE_CSP
    return response


def _page_error(exc: PageError) -> Response | tuple[str, int]:
    reader = g.get("archive_reader")
    if exc.status == 401 and not g.get("archive_fragment"):
        return signin_redirect()
    template = "viewer/fragment_error.html" if g.get("archive_fragment") else "viewer/error.html"
    return render_template(template, error=exc, reader=reader, team=g.get("archive_team")), exc.status


error_pages(bp, _page_error)


@bp.errorhandler(BadPosition)
def _bad_position(exc: BadPosition) -> Response | tuple[str, int]:
    # A signed cursor this listing refuses: the reader is told what to use instead (other BadCursors keep the
    # reason api/paging.py gives, through error_pages).
    return _page_error(PageError(400, "Bad request", _BAD_CURSOR))




# -- access -----------------------------------------------------------------------------------------------------

def _settings() -> Settings:
    return current_app.config["CHRONICLE_SETTINGS"]


def signed_in_reader(*, fragment: bool = False) -> Reader:
    """The signed-in reader; a PageError(401) otherwise (a page then redirects to the sign-in form, a fragment
    answers 401). Call it first in every archive view: it also says whether refusals are pages or fragments."""
    g.archive_fragment = fragment
    reader = current_reader()
    if reader is None:
        raise PageError(401, "Signed out", "Sign in again: your session ended or the token is no longer valid.")
    g.archive_reader = reader
    return reader


def allow_channel(reader: Reader, team_id: str, channel_id: str, *, full: bool = False) -> list[Any]:
    """The channel's id chain after the REST API's checks: a channel converted to private needs the private
    scope (api/slack/http.py `_channel_version`: the same owner calls)."""
    allow_workspace(reader, team_id)
    if not is_slack_id(channel_id):
        raise PageError(404, "Not found", "That is not a Slack channel id.")
    chain = channels.id_chain(get_db(), team_id, channel_id, full=full)
    if channels.is_private(chain) and not reader.grant.private:
        raise PageError(403, "Private channel",
                        f"Channel {channel_id} was made private. This token lacks the private scope, so its "
                        "messages are not shown.")
    return chain


def _ts(value: str) -> int:
    if not is_ts(value):
        raise PageError(404, "Not found", "That is not a Slack message timestamp.")
    return ts_to_us(value)


def _include_deleted() -> bool:
    """`?include_deleted=1`. The REST API has no scope for deleted messages: any token that may read a channel
    may ask for them (api/slack/http.py, TimelineArgs), and so may a signed-in reader here."""
    return request.args.get("include_deleted", "").lower() in ("1", "true", "yes", "on")


def _secret() -> bytes:
    return _settings().cursor_secret


# -- workspace ---------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ChannelEntry:
    channel_id: str
    name: str
    private: bool
    archived: bool
    deleted: bool
    previous_names: tuple[str, ...]

    @property
    def title(self) -> str:
        return "Previously: " + ", ".join(self.previous_names) if self.previous_names else ""


def _channel_entries(team_id: str, entries: list[dict[str, Any]]) -> list[ChannelEntry]:
    """Index entries with what the index does not hold (archived, previous names): the channels' metadata, read
    concurrently for the page's channels only."""
    db = get_db()

    def details(entry: dict[str, Any]) -> ChannelEntry:
        channel_id = entry["channel_id"]
        meta = channels.metadata(db, team_id, channel_id, channels.id_chain(db, team_id, channel_id, full=True))
        meta = meta or {}
        name = meta.get("name") or entry["name"].removeprefix("deleted_" if entry.get("deleted") else "")
        previous = tuple(dict.fromkeys(n["name"] for n in meta.get("names_history", ()) if n["name"] != name))
        return ChannelEntry(channel_id, name, entry.get("visibility") == "private", bool(meta.get("archived")),
                            bool(entry.get("deleted")), previous)

    found = views.concurrently(details, entries)
    return sorted(found, key=lambda c: (c.deleted, c.archived, c.name.casefold(), c.channel_id))


@bp.get("/teams/<team_id>")
def team_page(team_id: str) -> tuple[str, int]:
    """A workspace: its channels (current names; archived, deleted and private marked; previous names on hover)
    and its users, a page of each at a time."""
    reader = signed_in_reader()
    allow_workspace(reader, team_id)
    db = get_db()
    index_scope = listings.index_scope(team_id, True, reader.grant.private)
    channels_cursor = request.args.get("channels")
    after = listings.index_position(channels_cursor, _secret(), index_scope) if channels_cursor else ""
    entries, next_channel = channels.index_page(db, team_id, limit=INDEX_PAGE, after=after, include_deleted=True,
                                                include_private=reader.grant.private)
    users_scope = listings.users_scope(team_id)
    users_cursor = request.args.get("users")
    bucket, user_after = listings.users_position(users_cursor, _secret(), users_scope) if users_cursor else (0, "")
    people, next_user = users.page(db, team_id, limit=INDEX_PAGE, bucket=bucket, after=user_after)
    people.sort(key=lambda u: views.display_name(u, u["user_id"]).casefold())
    return render_template(
        "viewer/team.html", reader=reader, team=team_id, channels=_channel_entries(team_id, entries),
        people=people, display_name=views.display_name,
        next_channels=listings.sign_index_position(next_channel or None, _secret(), index_scope),
        next_users=listings.sign_users_position(next_user or None, _secret(), users_scope),
        users_cursor=request.args.get("users", ""), channels_cursor=request.args.get("channels", "")), 200


# -- channel -----------------------------------------------------------------------------------------------------

def _timeline_views(reader: Reader, team_id: str, channel_id: str, shown: list[Message], include_deleted: bool,
                    names_map: dict[str, str] | None = None) -> list[views.MessageView]:
    """A page of the channel's own messages (`listings.channel_page`) as views; each head shows its reply count."""
    db = get_db()
    if names_map is None:
        names_map = views.channel_names(db, team_id, include_private=reader.grant.private)
    return views.message_views(db, team_id, shown, zone=reader.zone, page_channel_id=channel_id,
                               include_deleted=include_deleted, channel_names_map=names_map)


@bp.get("/teams/<team_id>/channels/<channel_id>")
def channel_page(team_id: str, channel_id: str) -> Response:
    """A channel's timeline, newest first, a page at a time; deleted messages greyed with include_deleted. Its
    ETag: the versions of what it shows (read before any of it), the names' load, and what is the reader's."""
    reader = signed_in_reader()
    allow_workspace(reader, team_id)
    db = get_db()
    shown_scopes = [versions.CHANNELS, versions.USERS]
    seen = versions.read(db, team_id, [channel_id, *shown_scopes]) if is_slack_id(channel_id) else ()
    chain = allow_channel(reader, team_id, channel_id, full=True)
    ids = channels.chain_ids(chain, channel_id)
    if len(ids) > 1:
        seen = versions.read(db, team_id, [*ids, *shown_scopes])
    found = search.directory(db, team_id)
    tag = conditional.etag(ids, seen, found.snapshot, sorted(found.private), reader.zone_name, reader.scope_label,
                           reader.grant.private, csrf_token())
    if (unchanged := conditional.not_modified(tag)) is not None:
        return unchanged
    include_deleted = _include_deleted()
    meta = channels.metadata(db, team_id, channel_id, chain)
    page, nxt = listings.channel_page(db, team_id, channels.chain_ids(chain, channel_id), limit=PAGE_SIZE,
                                      include_deleted=include_deleted)
    if meta is None and not page:
        raise PageError(404, "Not found", f"No channel {channel_id} in workspace {team_id}.")
    names_map = views.channel_names(db, team_id, include_private=reader.grant.private)
    shown = _timeline_views(reader, team_id, channel_id, page, include_deleted, names_map)
    meta = meta or {"channel_id": channel_id, "name": names_map.get(channel_id, channel_id)}
    previous = [n["name"] for n in meta.get("names_history", ())[1:]]
    return conditional.tagged(make_response(render_template(
        "viewer/channel.html", reader=reader, team=team_id, channel=meta, channel_id=channel_id,
        previous_names=list(dict.fromkeys(previous)), groups=views.with_days(shown), include_deleted=include_deleted,
        next_cursor=listings.sign_ts_position(
            nxt, _secret(), listings.timeline_scope(team_id, channel_id, include_deleted=include_deleted)),
        older_url=f"/archive/teams/{team_id}/channels/{channel_id}/older",
        channel_url=views.channel_url, zone_name=reader.zone_name)), tag)


@bp.get("/teams/<team_id>/channels/<channel_id>/older")
def older_fragment(team_id: str, channel_id: str) -> tuple[str, int]:
    """The next (older) page of a channel's timeline as an HTML fragment; its root carries the next cursor."""
    reader = signed_in_reader(fragment=True)
    chain = allow_channel(reader, team_id, channel_id)
    include_deleted = _include_deleted()
    cursor = request.args.get("cursor", "")
    if not cursor:
        raise PageError(400, "Bad request", "cursor is required")
    scope = listings.timeline_scope(team_id, channel_id, include_deleted=include_deleted)
    upper = listings.ts_position(cursor, _secret(), scope)
    page, nxt = listings.channel_page(get_db(), team_id, channels.chain_ids(chain, channel_id), limit=PAGE_SIZE,
                                      upper=upper, include_deleted=include_deleted)
    shown = _timeline_views(reader, team_id, channel_id, page, include_deleted)
    return render_template("viewer/older.html", groups=views.with_days(shown),
                           next_cursor=listings.sign_ts_position(nxt, _secret(), scope)), 200


@bp.get("/teams/<team_id>/channels/<channel_id>/threads/<thread_ts>")
def thread_fragment(team_id: str, channel_id: str, thread_ts: str) -> tuple[str, int]:
    """The side panel of a thread: its parent, then its replies oldest first (a page of THREAD_PAGE; `cursor`
    gives the next page, replies only)."""
    reader = signed_in_reader(fragment=True)
    chain = allow_channel(reader, team_id, channel_id)
    _ts(thread_ts)
    include_deleted = _include_deleted()
    db = get_db()
    cursor = request.args.get("cursor", "")
    try:
        page = listings.thread_page(db, team_id, channel_id, channels.chain_ids(chain, channel_id), thread_ts,
                                    limit=THREAD_PAGE, include_deleted=include_deleted, cursor=cursor or None,
                                    secret=_secret())
    except NotFound:
        raise PageError(404, "Not found", "This thread is not in the archive (or it was deleted).") from None
    parent = page.parent
    names_map = views.channel_names(db, team_id, include_private=reader.grant.private)
    shown = ([parent] if parent is not None else []) + page.replies
    built = views.message_views(db, team_id, shown, zone=reader.zone, page_channel_id=channel_id,
                                include_deleted=include_deleted, channel_names_map=names_map)
    head = built[0] if parent is not None else None
    more_url = None
    if page.next_cursor is not None:
        more_url = (views.thread_url(team_id, channel_id, thread_ts, include_deleted)
                    + ("&" if include_deleted else "?") + "cursor=" + page.next_cursor)
    return render_template("viewer/thread.html", parent=head, replies=built[1:] if head else built,
                           more_url=more_url, continued=bool(cursor),
                           channel_name=names_map.get(channel_id, channel_id)), 200


@bp.get("/teams/<team_id>/channels/<channel_id>/messages/<ts>/history")
def history_fragment(team_id: str, channel_id: str, ts: str) -> tuple[str, int]:
    """Every version of a message's text, newest first, each with the time it became current."""
    reader = signed_in_reader(fragment=True)
    chain = allow_channel(reader, team_id, channel_id)
    ts_us = _ts(ts)
    db = get_db()
    found = messages.find_with_history(db, team_id, channels.chain_ids(chain, channel_id), ts_us,
                                       include_deleted=_include_deleted())
    if found is None:
        raise PageError(404, "Not found", "This message is not in the archive (or it was deleted).")
    message, history = found
    ids: set[str] = {message.user} if message.user else set()
    for version in history:
        ids |= render.user_ids(version["text"] or "")
    names = views.user_names(db, team_id, ids)
    names_map = views.channel_names(db, team_id, include_private=reader.grant.private)

    def link(cid: str) -> str:
        return views.channel_url(team_id, cid) if cid in names_map else ""

    def when(us: int) -> dict[str, Any]:
        at = datetime.fromtimestamp(us / 1_000_000, reader.zone)
        return {"at": at, "time": at.strftime("%d %b %Y, %H:%M:%S ") + (at.tzname() or "")}

    times = [ts_to_us(v["ts"]) for v in history]
    # The original text is known only when a version is at the message's own ts (the original_text column, or the
    # previous text of a live edit of an unedited message). A message archived only as edited (an export, a
    # backfill) has its one version at the edit time. A lone version at the ts of a message marked edited is the
    # row's current text (no version was recorded): shown as the edit it is, at the edit time.
    if len(times) == 1 and times[0] == message.ts and message.edited_ts is not None:
        times = [message.edited_ts]
    original_known = bool(times) and times[0] == message.ts
    versions = []
    if not original_known and history:
        versions.append({"label": "original", "unknown": True, **when(message.ts)})
    for i, (version, us) in enumerate(zip(history, times, strict=True)):
        if original_known:
            label = "original" if i == 0 else ("current" if i == len(history) - 1 else f"edit {i}")
        else:
            label = "current" if len(history) > 1 and i == len(history) - 1 else "edited"
        versions.append({"label": label, **when(us),
                         "html": render.message_html(version["text"] or "", users=names, channels=names_map,
                                                     channel_url=link)})
    author = names.get(message.user, message.user) if message.user else (message.username or message.bot_id or "")
    return render_template("viewer/history.html", versions=list(reversed(versions)), author=author,
                           count=len(history), original_known=original_known or not history), 200


# -- files --------------------------------------------------------------------------------------------------------

# Types a browser may be handed as they are; anything else (HTML, SVG, scripts) is sent as octet-stream, and every
# file is a download (Content-Disposition: attachment) with FILE_CSP.
_PASS_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf", "text/plain",
                         "text/csv", "application/zip", "application/json"})


@bp.get("/teams/<team_id>/files/<channel_id>/<ts>/<file_id>")
def stored_file(team_id: str, channel_id: str, ts: str, file_id: str) -> Response:
    """A file of a message as Chronicle stored it, after the message's own access checks; 404 when the file is
    not stored (not fetched yet, failed, external) or the message is not visible."""
    reader = signed_in_reader()
    chain = allow_channel(reader, team_id, channel_id)
    ts_us = _ts(ts)
    if not is_slack_id(file_id):
        raise PageError(404, "Not found", "That is not a Slack file id.")
    message = messages.find(get_db(), team_id, channels.chain_ids(chain, channel_id), ts_us,
                            include_deleted=_include_deleted())
    if message is None or file_id not in (message.files_stored or {}):
        raise PageError(404, "File not stored", "Chronicle has not stored this file (yet).")
    meta = next((f for f in message.files or () if isinstance(f, dict) and f.get("id") == file_id), {})
    try:
        body = files.open_stored(get_db(), _settings().slack, team_id, message.channel_id, message.ts, file_id)
    except (FileNotFoundError, ValueError):
        raise PageError(404, "File not stored", "The stored file is missing from the object store.") from None
    mimetype = meta.get("mimetype") if meta.get("mimetype") in _PASS_TYPES else "application/octet-stream"
    return send_file(body, mimetype=mimetype, as_attachment=True, download_name=files.download_name(meta, file_id),
                     conditional=False, etag=False, max_age=0)


# -- user ---------------------------------------------------------------------------------------------------------

def _last_active_until(team_id: str, user_id: str, profile: dict[str, Any], zone_name: str,
                       hidden: frozenset[str]) -> date:
    """The Sunday ending the week of the user's latest activity outside `hidden` channels (the activity index:
    one small read per year from the user's first post or first sighting on), not after today in the user's
    zone; today when no activity is indexed. So the calendar of a past year's archive opens on that year."""
    zone = calendar.zone(zone_name)
    today = datetime.now(zone).date()
    known = [ts_to_us(t) for t in ((profile.get("first_post") or {}).get("ts"), profile.get("first_seen_ts"))
             if t and is_ts(t)]
    first_year = datetime.fromtimestamp(min(known) / 1_000_000, UTC).year if known else 1970
    last_year = datetime.now(UTC).year
    latest = activity_index.latest_day(get_db(), team_id, user_id, first_year, last_year, hidden_channels=hidden)
    if latest is None:
        return today
    last = date(1970, 1, 1) + timedelta(days=latest)  # a UTC day: east of UTC, its late hours are the next day
    offset = datetime.combine(last, datetime.min.time(), zone).utcoffset()
    if offset is not None and offset > timedelta(0):
        last += timedelta(days=1)
    return min(today, last + timedelta(days=6 - last.weekday()))


def _calendar_until(zone_name: str, default: Callable[[], date] | None = None) -> date:
    """`?until=YYYY-MM-DD`, else `default()`, else today in the user's zone."""
    raw = request.args.get("until", "")
    if raw:
        try:
            until = date.fromisoformat(raw)
        except ValueError:
            raise PageError(400, "Bad request", "until must be a day, YYYY-MM-DD") from None
        if not date(1970, 3, 31) <= until <= date(2199, 12, 31):
            raise PageError(400, "Bad request", "until must be a day from 1970-03-31 to 2199-12-31")
        return until
    return default() if default is not None else datetime.now(calendar.zone(zone_name)).date()


def _activity_days(team_id: str, user_id: str, first: date, last: date, hidden: frozenset[str]
                   ) -> list[dict[str, Any]]:
    """The user's activity days (the day blobs, api/activity/) in [first, last]: reads of at most 31 days each,
    in flight together."""
    db = get_db()
    archive = service.Archive.slack(team_id)
    days = calendar.date_range(first, last)
    chunks = [days[i:i + 28] for i in range(0, len(days), 28)]
    found = views.concurrently(
        lambda chunk: service.read(db, archive, user_id, chunk, contiguous=True, summary=False,
                                   hidden_channels=hidden), chunks)
    return [day for chunk in found for day in chunk]


_LEVEL_CUTS = (1, 3, 6, 10)  # events a day from which a calendar cell gets the next shade


def _calendar_weeks(days: list[dict[str, Any]], until: date) -> list[dict[str, Any]]:
    """Weeks (Monday first, the last one holding `until`), each with a month label where a month starts and its
    day cells: date, count, shade level, a title with the counts per kind (None after `until`)."""
    by_date = {d["date"]: d for d in days}
    first = until - timedelta(days=until.weekday()) - timedelta(weeks=CALENDAR_WEEKS - 1)
    weeks: list[dict[str, Any]] = []
    for w in range(CALENDAR_WEEKS):
        cells: list[dict[str, Any] | None] = []
        monday = first + timedelta(weeks=w)
        for d in range(7):
            day = monday + timedelta(days=d)
            if day > until:
                cells.append(None)
                continue
            events = by_date.get(day.isoformat(), {}).get("events", [])
            counts = ev.counts_by_kind(events)
            level = sum(1 for cut in _LEVEL_CUTS if len(events) >= cut)
            kinds = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in counts.items())
            cells.append({"date": day.isoformat(), "count": len(events), "level": level,
                          "title": f"{day.strftime('%a %d %b %Y')}: " + (kinds or "no activity")})
        starts_month = w == 0 or any((monday + timedelta(days=d)).day == 1 for d in range(7))
        label_day = monday if w == 0 else next(
            (monday + timedelta(days=d) for d in range(7) if (monday + timedelta(days=d)).day == 1), monday)
        weeks.append({"month": label_day.strftime("%b") if starts_month else "", "days": cells})
    return weeks


_POSTED = frozenset({ev.MESSAGE, ev.REPLY, ev.FILE_SHARE})


@bp.get("/teams/<team_id>/users/<user_id>")
def user_page(team_id: str, user_id: str) -> tuple[str, int]:
    """A user: profile, first post, activity calendar (the day blobs, in the user's zone) and their recent
    messages (from the same days: the day blobs name each message, the messages' owner reads them by key)."""
    reader = signed_in_reader()
    allow_workspace(reader, team_id)
    if not is_slack_id(user_id):
        raise PageError(404, "Not found", "That is not a Slack user id.")
    db = get_db()
    profile = users.get(db, team_id, user_id)
    if profile is None:
        raise PageError(404, "Not found", f"No user {user_id} in workspace {team_id}.")
    user_zone = calendar.zone_name(profile.get("tz"))
    hidden = frozenset() if reader.grant.private else channels.private_channels(get_db(), team_id)
    until = _calendar_until(user_zone, lambda: _last_active_until(team_id, user_id, profile, user_zone, hidden))
    first = until - timedelta(days=until.weekday()) - timedelta(weeks=CALENDAR_WEEKS - 1)
    try:
        days = _activity_days(team_id, user_id, first, until, hidden)
    except codec.UnknownCodec as exc:
        raise PageError(500, "Unreadable activity", f"A stored activity day cannot be read: {exc}") from None
    names_map = views.channel_names(db, team_id, include_private=reader.grant.private)
    posted = [e for d in reversed(days) for e in reversed(d.get("events", [])) if e.get("kind") in _POSTED]
    # Twice as many candidates as shown: some may have been deleted since.
    wanted = list(dict.fromkeys((e["channel"], e["ts"]) for e in posted if "channel" in e and "ts" in e))
    wanted = wanted[:2 * RECENT_MESSAGES]
    first_post = profile.get("first_post")
    first_key = None
    if first_post and first_post.get("channel_id") and not _hidden_channel(reader, team_id, first_post["channel_id"]):
        first_key = (first_post["channel_id"], ts_to_us(first_post["ts"]))
    keys = wanted + ([first_key] if first_key and first_key not in wanted else [])
    found = views.concurrently(
        lambda key: messages.find(db, team_id, [key[0]], key[1], include_deleted=False), keys)
    by_key = {key: m for key, m in zip(keys, found, strict=True) if m is not None}
    shown = [by_key[k] for k in wanted if k in by_key][:RECENT_MESSAGES]
    extra = [by_key[first_key]] if first_key in by_key else []
    built = views.message_views(db, team_id, shown + extra, zone=reader.zone, page_channel_id=None,
                                include_deleted=False, channel_names_map=names_map, show_channel=True,
                                names={user_id: views.display_name(profile, user_id)})
    recent, first_view = built[:len(shown)], (built[len(shown)] if extra else None)
    name = views.display_name(profile, user_id)
    return render_template(
        "viewer/user.html", reader=reader, team=team_id, user=profile, name=name,
        initial=next((c for c in name if c.isalnum()), "?").upper(), hue=zlib.crc32(user_id.encode()) % 8,
        first_seen_at=_local(profile.get("first_seen_ts"), reader),
        first_post_at=_local(first_post["ts"], reader) if first_post else None,
        weeks=_calendar_weeks(days, until), until=until, user_zone=user_zone,
        earlier=(until - timedelta(weeks=CALENDAR_WEEKS)).isoformat(),
        later=(until + timedelta(weeks=CALENDAR_WEEKS)).isoformat(),
        total=sum(d.get("event_count", 0) for d in days), recent=recent, first_view=first_view,
        first_post=first_post, first_post_channel=(
            names_map.get(first_post["channel_id"]) if first_post else None),
        weekday_labels=["Mon", "", "Wed", "", "Fri", "", ""]), 200


def _local(ts: str | None, reader: Reader) -> datetime | None:
    if not ts or not is_ts(ts):
        return None
    try:  # a Slack ts may name a second past Python's calendar (year 9999): shown as unknown, not a 500
        return datetime.fromtimestamp(ts_to_us(ts) / 1_000_000, reader.zone)
    except (ValueError, OverflowError, OSError):
        return None


def _hidden_channel(reader: Reader, team_id: str, channel_id: str) -> bool:
    """Whether this reader may not open the channel (private without the private scope)."""
    if reader.grant.private:
        return False
    return channels.is_private(channels.id_chain(get_db(), team_id, channel_id, full=False))



# -- search ------------------------------------------------------------------------------------------------------

@bp.get("/teams/<team_id>/search")
def search_page(team_id: str) -> tuple[str, int]:
    """Archive search (api/slack/search.py, docs/slack-search.md): results newest first, SEARCH_PAGE a page, dates
    of before:/after:/on: in the reader's zone; a page cut short by the read budget says how far it searched."""
    reader = signed_in_reader()
    allow_workspace(reader, team_id)
    q = request.args.get("q", "").strip()[:1000]
    context: dict[str, Any] = {"reader": reader, "team": team_id, "query": q, "zone_name": reader.zone_name}
    if not q:
        return render_template("viewer/search.html", **context), 200
    secret = _settings().cursor_secret
    cursor = request.args.get("cursor", "")
    try:
        position = search.read_position(cursor, secret, team_id, q, reader.zone_name) if cursor else None
    except BadPosition:
        raise PageError(400, "Bad request", "That is not a cursor of this search: use its own links.") from None
    db = get_db()
    try:
        page = search.search(db, team_id, q, limit=SEARCH_PAGE, position=position,
                             allow_private=reader.grant.private, tz=reader.zone_name)
    except search.SearchError as exc:
        return render_template("viewer/search.html", **context, error=str(exc)), 422
    found = [hit.message for hit in page.hits]
    shown = views.message_views(
        db, team_id, found, zone=reader.zone, page_channel_id=None, include_deleted=False, show_channel=True,
        channel_names_map=views.channel_names(db, team_id, include_private=reader.grant.private))
    next_cursor = search.sign_position(page.next_position, secret, team_id, q, reader.zone_name)
    return render_template(
        "viewer/search.html", **context, results=shown, understood=page.query.describe(), first_page=not cursor,
        searched_to=search.iso_day(page.searched_to) if page.searched_to is not None else None,
        next_url=f"/archive/teams/{team_id}/search?{urlencode({'q': q, 'cursor': next_cursor})}"
        if next_cursor else None), 200
