"""The paged reads the REST API (api/slack/http.py) and the archive pages (api/viewer/slack_pages.py) share: what
each listing's cursors are bound to, each cursor decoded and checked, a thread with its replies a page at a
time, and the page of messages a channel shows.

Both transports call these, so a cursor of one pages the other and both refuse the same cursors. Domain only:
refusals are api/errors.py's (BadCursor, BadPosition, NotFound), each transport shows them its own way.
"""

from __future__ import annotations

import dataclasses

from api.db import Database
from api.errors import BadPosition, NotFound
from api.paging import BAD_POSITION, int_position, sign_cursor, verify_cursor
from api.slack import messages, users
from api.slack.codec import is_slack_id
from api.slack.messages import Message
from api.slack.timeutil import is_ts, ts_to_us

# -- scopes: what a listing's cursors are bound to (a cursor pages only the listing and parameters that issued it)


def index_scope(team_id: str, include_deleted: bool, private: bool) -> str:
    return f"index|{team_id}|{include_deleted}|{private}"


def timeline_scope(team_id: str, channel_id: str, order: str = "desc", include_deleted: bool = False,
                   before: str | None = None, after: str | None = None) -> str:
    return f"timeline|{team_id}|{channel_id}|{order}|{include_deleted}|{before}|{after}"


def thread_scope(team_id: str, channel_id: str, thread_ts: str, include_deleted: bool) -> str:
    return f"thread|{team_id}|{channel_id}|{thread_ts}|{include_deleted}"


def users_scope(team_id: str) -> str:
    return f"users|{team_id}"


# -- cursors: decoded, then checked as input (a forged position never reaches the driver, docs/security.md) ---

def ts_position(cursor: str, secret: bytes, scope: str) -> int:
    """The message-time bound a timeline or thread cursor carries."""
    return int_position(verify_cursor(cursor, secret, scope).get("p"), messages.MIN_US, messages.MAX_US)


def sign_ts_position(position: int | None, secret: bytes, scope: str) -> str | None:
    return sign_cursor({"p": position}, secret, scope) if position is not None else None


def index_position(cursor: str, secret: bytes, scope: str) -> str:
    """The channel id a channel-index cursor continues after."""
    after = verify_cursor(cursor, secret, scope).get("a")
    if not isinstance(after, str) or not is_slack_id(after):
        raise BadPosition(BAD_POSITION)
    return after


def sign_index_position(after: str | None, secret: bytes, scope: str) -> str | None:
    return sign_cursor({"a": after}, secret, scope) if after is not None else None


def users_position(cursor: str, secret: bytes, scope: str) -> tuple[int, str]:
    """The (bucket, user id) a users cursor continues after."""
    position = verify_cursor(cursor, secret, scope)
    bucket, after = position.get("b"), position.get("a")
    if not isinstance(after, str) or not is_slack_id(after):
        raise BadPosition(BAD_POSITION)
    return int_position(bucket, 0, users.BUCKETS - 1), after


def sign_users_position(position: tuple[int, str] | None, secret: bytes, scope: str) -> str | None:
    return sign_cursor({"b": position[0], "a": position[1]}, secret, scope) if position is not None else None


# -- reads --------------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ThreadPage:
    parent: Message | None     # on the first page only
    replies: list[Message]     # oldest first
    next_cursor: str | None


def thread_page(db: Database, team_id: str, channel_id: str, ids: list[str], thread_ts: str, *, limit: int,
                include_deleted: bool, cursor: str | None, secret: bytes) -> ThreadPage:
    """A thread of channel `channel_id` (stored under `ids`: it and its previous ids): the parent on the first
    page, then `limit` replies oldest first after the cursor's position. NotFound when the first page has
    neither parent nor replies; BadCursor for a cursor of another listing."""
    if not is_ts(thread_ts):
        raise NotFound(f"{thread_ts[:40]!r} is not a Slack message timestamp")
    parent_us = ts_to_us(thread_ts)
    scope = thread_scope(team_id, channel_id, thread_ts, include_deleted)
    after, parent = parent_us, None
    if cursor:
        after = max(after, ts_position(cursor, secret, scope))
    else:
        parent = messages.find(db, team_id, ids, parent_us, include_deleted=include_deleted)
    replies, nxt = messages.thread(db, team_id, ids, parent_us, limit=limit, after=after,
                                   include_deleted=include_deleted)
    if parent is None and not replies and not cursor:
        raise NotFound(f"no thread {thread_ts} in channel {channel_id}")
    return ThreadPage(parent, replies, sign_ts_position(nxt, secret, scope))


def in_channel(m: Message) -> bool:
    """Shown in the channel's own listing: thread replies live in their thread (a reply also sent to the channel
    stays)."""
    return m.thread_ts is None or m.thread_ts == m.ts or m.subtype == "thread_broadcast"


_CHANNEL_PAGE_READS = 4  # timeline reads per page at most: a thread-heavy channel's page may be short, with a cursor


def channel_page(db: Database, team_id: str, ids: list[str], *, limit: int, upper: int = messages.MAX_US,
                 include_deleted: bool) -> tuple[list[Message], int | None]:
    """Up to `limit` messages the channel shows (`in_channel`), newest first, below `upper`, and the next page's
    exclusive upper bound. The timeline counts thread replies, which this listing leaves out: it is read on
    until the page is full."""
    shown: list[Message] = []
    nxt: int | None = None
    for _ in range(_CHANNEL_PAGE_READS):
        page, nxt = messages.timeline(db, team_id, ids, limit=limit, upper=upper, include_deleted=include_deleted)
        shown.extend(m for m in page if in_channel(m))
        if nxt is None or len(shown) >= limit:
            break
        upper = nxt
    if len(shown) > limit:
        shown, nxt = shown[:limit], shown[limit - 1].ts
    return shown, nxt
