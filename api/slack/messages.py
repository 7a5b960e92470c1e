"""Message tables: statements, ingest writes and the reads behind the timeline, thread and message endpoints.

Every event-derived write carries `USING TIMESTAMP <event time µs>`: the message itself at its ts, an edit at
its edit time, a delete at the delete time, a reaction at the reaction's event time. Cassandra keeps the
newest value per cell, so any arrival order of the same events converges to the in-order state.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from api.db import Database, Statement, without_none
from api.slack.store import ID_RE, Write, compress_json, run_concurrently
from api.slack.timeutil import US_PER_DAY, day_of, ts_to_us, us_to_ts

FILE_SHARDS = 16  # fixed: the worker reads these 16 partitions of slack_files_pending
_FILE_FIELDS = ("id", "name", "title", "mimetype", "filetype", "size", "url_private", "url_private_download",
                "permalink", "is_external", "external_type", "external_url", "mode", "created", "user")

# What the API shows of a message; the one-message read adds what history needs. Fewer columns = less decoding
# per row on a 50-row timeline page.
_PAGE_COLUMNS = ("channel_id, ts, msg_ts, user_id, text, subtype, bot_id, username, thread_ts, edited_ts, "
                 "deleted, deleted_ts, files, files_stored, files_fetch_failed, files_fetch_error, reactions")
_COLUMNS = f"team_id, original_text, {_PAGE_COLUMNS}"

UPSERT_MESSAGE = Statement(
    "UPDATE slack_messages USING TIMESTAMP :wt SET msg_ts = :msg_ts, user_id = :user_id, text = :text, "
    "subtype = :subtype, bot_id = :bot_id, username = :username, thread_ts = :thread_ts, files = :files, "
    "edited_ts = :edited_ts, original_text = :original_text, raw = :raw "
    "WHERE team_id = :team_id AND channel_id = :channel_id AND day = :day AND ts = :ts",
    name="UPSERT slack_messages")
MARK_DELETED = Statement(
    "UPDATE slack_messages USING TIMESTAMP :wt SET deleted = true, deleted_ts = :deleted_ts "
    "WHERE team_id = :team_id AND channel_id = :channel_id AND day = :day AND ts = :ts",
    name="DELETE-FLAG slack_messages")
ADD_REACTION = Statement(
    "UPDATE slack_messages USING TIMESTAMP :wt SET reactions = reactions + :r "
    "WHERE team_id = :team_id AND channel_id = :channel_id AND day = :day AND ts = :ts",
    name="REACTION+ slack_messages")
REMOVE_REACTION = Statement(
    "UPDATE slack_messages USING TIMESTAMP :wt SET reactions = reactions - :r "
    "WHERE team_id = :team_id AND channel_id = :channel_id AND day = :day AND ts = :ts",
    name="REACTION- slack_messages")
INSERT_DAY = Statement("INSERT INTO slack_channel_days (team_id, channel_id, day) VALUES (?, ?, ?)")
INSERT_REPLY = Statement(
    "INSERT INTO slack_thread_replies (team_id, channel_id, thread_ts, ts) VALUES (?, ?, ?, ?)")
INSERT_VERSION = Statement(
    "INSERT INTO slack_message_versions (team_id, channel_id, ts, version_ts, text) VALUES (?, ?, ?, ?, ?) "
    "USING TIMESTAMP ?")
# Written at the event's time: the worker's later DELETE (at wall-clock time) wins over any redelivery.
INSERT_PENDING_FILE = Statement(
    "INSERT INTO slack_files_pending (shard, team_id, channel_id, ts, file_id, day, url_private, mimetype, name) "
    "VALUES (:shard, :team_id, :channel_id, :ts, :file_id, :day, :url_private, :mimetype, :name) "
    "USING TIMESTAMP :wt")

SELECT_DAYS_DESC = Statement(
    "SELECT day FROM slack_channel_days WHERE team_id = ? AND channel_id = ? AND day <= ? AND day >= ? LIMIT ?")
SELECT_DAYS_ASC = Statement(
    "SELECT day FROM slack_channel_days WHERE team_id = ? AND channel_id = ? AND day <= ? AND day >= ? "
    "ORDER BY day ASC LIMIT ?")
SELECT_PAGE_DESC = Statement(
    f"SELECT {_PAGE_COLUMNS} FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ? "
    "AND ts < ? AND ts > ? LIMIT ?", name="SELECT slack_messages (page)")
SELECT_PAGE_ASC = Statement(
    f"SELECT {_PAGE_COLUMNS} FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ? "
    "AND ts < ? AND ts > ? ORDER BY ts ASC LIMIT ?", name="SELECT slack_messages (page asc)")
SELECT_ONE = Statement(
    f"SELECT {_COLUMNS} FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?",
    name="SELECT slack_messages (one)")
SELECT_SOME = Statement(
    f"SELECT {_PAGE_COLUMNS} FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ? AND ts IN ?",
    name="SELECT slack_messages (in)")
SELECT_REPLIES = Statement(
    "SELECT ts FROM slack_thread_replies WHERE team_id = ? AND channel_id = ? AND thread_ts = ? AND ts > ? "
    "LIMIT ?")
SELECT_VERSIONS = Statement(
    "SELECT version_ts, text FROM slack_message_versions WHERE team_id = ? AND channel_id = ? AND ts = ? "
    "LIMIT 1000")


@dataclasses.dataclass
class NewMessage:
    """A message as posted (or as it reads after an edit), normalised from a Slack payload."""

    team_id: str
    channel_id: str
    ts: int
    msg_ts: str
    user: str | None = None
    text: str | None = None
    subtype: str | None = None
    bot_id: str | None = None
    username: str | None = None
    thread_ts: int | None = None
    files: list[dict] | None = None


def _key(team_id: str, channel_id: str, ts: int) -> dict[str, Any]:
    return {"team_id": team_id, "channel_id": channel_id, "day": day_of(ts), "ts": ts}


def slim_files(files: Iterable[dict]) -> list[dict]:
    """The subset of Slack file metadata kept on the message (no thumbnails, no share lists)."""
    # File ids name storage paths: only Slack-shaped ids are kept.
    return [{k: f[k] for k in _FILE_FIELDS if k in f} for f in files
            if isinstance(f, dict) and isinstance(f.get("id"), str) and ID_RE.match(f["id"])]


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def file_shard(team_id: str, channel_id: str, ts: int) -> int:
    # A stable hash (not Python's salted hash()) so every process picks the same shard.
    return (sum(team_id.encode()) * 31 + sum(channel_id.encode()) + ts) % FILE_SHARDS


def write_message(db: Database, msg: NewMessage, *, write_ts: int, edited_ts: int | None = None,
                  version_text: list[tuple[int, str]] | None = None, original: bool = False,
                  raw: Any = None) -> None:
    """Store a new message (write_ts = its ts, original=True) or its edited form (write_ts = edit time).

    All rows go out in one concurrent round; each is one whole-row write, so no reader ever sees half a
    message. If any write fails the endpoint answers 503 and Slack's retry (same keys, same timestamps)
    completes the set; a message row whose day is not yet listed is simply not on the timeline until then.
    """
    key = _key(msg.team_id, msg.channel_id, msg.ts)
    writes: list[Write] = [(UPSERT_MESSAGE, without_none({
        **key, "wt": write_ts, "msg_ts": msg.msg_ts, "user_id": msg.user, "text": msg.text,
        "original_text": msg.text if original else None,
        "subtype": msg.subtype, "bot_id": msg.bot_id, "username": msg.username, "thread_ts": msg.thread_ts,
        "files": json.dumps(msg.files, separators=(",", ":")) if msg.files else None,
        "edited_ts": edited_ts, "raw": compress_json(raw) if raw is not None else None,
    }))]
    day_key = (db.keyspace, msg.team_id, msg.channel_id, key["day"])
    if day_key not in _known_days:
        writes.append((INSERT_DAY, (msg.team_id, msg.channel_id, key["day"])))
    if msg.thread_ts is not None and msg.thread_ts != msg.ts:
        writes.append((INSERT_REPLY, (msg.team_id, msg.channel_id, msg.thread_ts, msg.ts)))
    for version_ts, text in version_text or ():
        writes.append((INSERT_VERSION, (msg.team_id, msg.channel_id, msg.ts, version_ts, text, version_ts)))
    for f in msg.files or ():
        # External files (no url_private, or is_external) stay links in `files`: nothing to fetch.
        if isinstance(f.get("url_private"), str) and f["url_private"] and not f.get("is_external"):
            writes.append((INSERT_PENDING_FILE, without_none({
                **key, "shard": file_shard(msg.team_id, msg.channel_id, msg.ts), "file_id": f["id"],
                "url_private": f["url_private"], "mimetype": _str(f.get("mimetype")), "name": _str(f.get("name")),
                "wt": write_ts})))
    run_concurrently(db, writes)
    _remember_day(day_key)


# Days this process has written to slack_channel_days: the row is insert-only (never deleted), so once
# written it need not be written again; saves one write per message on a busy channel.
_known_days: dict[tuple, None] = {}
_KNOWN_DAYS_MAX = 100_000


def _remember_day(day_key: tuple) -> None:
    if len(_known_days) >= _KNOWN_DAYS_MAX:
        _known_days.clear()
    _known_days[day_key] = None


def mark_deleted(db: Database, team_id: str, channel_id: str, ts: int, *, deleted_at: int) -> None:
    db.execute(MARK_DELETED, {**_key(team_id, channel_id, ts), "wt": deleted_at, "deleted_ts": deleted_at})


def set_reaction(db: Database, team_id: str, channel_id: str, ts: int, emoji: str, user: str, *,
                 added: bool, at: int) -> None:
    """One (emoji, user) element of the reactions set, added or removed at the event's time."""
    stmt = ADD_REACTION if added else REMOVE_REACTION
    db.execute(stmt, {**_key(team_id, channel_id, ts), "wt": at, "r": {(emoji, user)}})


# -- reads ------------------------------------------------------------------------------------------------

def row_to_message(row: Any, *, include_deleted: bool) -> dict[str, Any] | None:
    """The API form of a message row; None for a row to hide (deleted, or only early state, no message yet)."""
    if row.msg_ts is None or (row.deleted and not include_deleted):
        return None
    reactions: dict[str, list[str]] = {}
    for emoji, user in sorted(row.reactions or ()):
        reactions.setdefault(emoji, []).append(user)
    out: dict[str, Any] = {
        "ts": us_to_ts(row.ts), "channel_id": row.channel_id, "user": row.user_id, "text": row.text,
        "subtype": row.subtype, "bot_id": row.bot_id, "username": row.username,
        "thread_ts": us_to_ts(row.thread_ts) if row.thread_ts is not None else None,
        "edited_ts": us_to_ts(row.edited_ts) if row.edited_ts is not None else None,
        "files": json.loads(row.files) if row.files else None,
        "files_stored": dict(row.files_stored) if row.files_stored else None,
        "files_fetch_failed": True if row.files_fetch_failed else None,
        "files_fetch_error": dict(row.files_fetch_error) if row.files_fetch_error else None,
        "reactions": [{"name": e, "users": u, "count": len(u)} for e, u in reactions.items()] or None,
    }
    if row.deleted:
        out["deleted"] = True
        out["deleted_ts"] = us_to_ts(row.deleted_ts) if row.deleted_ts is not None else None
    return {k: v for k, v in out.items() if v is not None}


def get_message_row(db: Database, team_id: str, channels: list[str], ts: int) -> Any | None:
    """The row of message `ts` in the first channel of the id chain that has it (new id, then older ids)."""
    for channel_id in channels:
        row = db.execute(SELECT_ONE, (team_id, channel_id, day_of(ts), ts)).one()
        if row is not None and row.msg_ts is not None:
            return row
    return None


def versions(db: Database, row: Any) -> list[dict[str, str]]:
    """Every version of the message's text with the time it became current, oldest first: the original (kept
    on the message row) plus the versions recorded by edits (each edit stores its new and previous text)."""
    found = {r.version_ts: r.text for r in db.execute(SELECT_VERSIONS, (row.team_id, row.channel_id, row.ts))}
    if row.original_text is not None:
        found.setdefault(row.ts, row.original_text)
    if not found and row.text is not None:
        found[row.ts] = row.text
    return [{"ts": us_to_ts(t), "text": found[t]} for t in sorted(found)]


# Bounds on one timeline request: days listed per channel id, rows read in all. A page stops early (with a
# cursor) rather than reading without bound through days full of deleted messages.
_DAYS_PER_REQUEST = 64
_ROW_BUDGET = 2000
_PIPELINE_DEPTH = 8
MIN_US, MAX_US = 0, 2**62


def start_day_listing(db: Database, team_id: str, channel_id: str, *, upper: int = MAX_US, lower: int = MIN_US,
                      ascending: bool = False) -> Any:
    """Start reading a channel's day listing (a future), so it overlaps other reads of the request."""
    stmt = SELECT_DAYS_ASC if ascending else SELECT_DAYS_DESC
    return db.execute_async(stmt, (team_id, channel_id, day_of(max(upper - 1, 0)), day_of(lower + 1),
                                   _DAYS_PER_REQUEST))


def timeline(db: Database, team_id: str, channels: list[str], *, limit: int, upper: int = MAX_US,
             lower: int = MIN_US, ascending: bool = False, include_deleted: bool = False,
             prefetched: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], int | None]:
    """Messages with lower < ts < upper, newest first (or oldest first), over the channel's id chain.

    Returns (page, next position): the exclusive ts bound of the next page, None when there is no more.
    Reads only the days listed in slack_channel_days, never empty buckets, and at most _ROW_BUDGET rows.
    """
    day_hi, day_lo = day_of(max(upper - 1, 0)), day_of(lower + 1)
    days_stmt = SELECT_DAYS_ASC if ascending else SELECT_DAYS_DESC
    page_stmt = SELECT_PAGE_ASC if ascending else SELECT_PAGE_DESC
    # `ahead(a, b)`: a comes before b in the requested order.
    def ahead(a: int, b: int) -> bool:
        return a < b if ascending else a > b

    by_day: dict[int, list[str]] = {}
    horizon: int | None = None  # a truncated day listing: days past it are not known in this request
    prefetched = prefetched or {}
    for channel_id in channels:
        future = prefetched.get(channel_id)
        result = future.result() if future is not None else db.execute(
            days_stmt, (team_id, channel_id, day_hi, day_lo, _DAYS_PER_REQUEST))
        listed = [r.day for r in result]
        if len(listed) == _DAYS_PER_REQUEST and (horizon is None or ahead(listed[-1], horizon)):
            horizon = listed[-1]
        for day in listed:
            by_day.setdefault(day, []).append(channel_id)
    days = sorted(by_day, reverse=not ascending)
    if horizon is not None:
        days = [d for d in days if not ahead(horizon, d)]

    page: list[dict[str, Any]] = []
    scanned = 0
    # The first read of each (day, channel) is pipelined: up to `depth` days in flight, the depth doubling
    # each time a day turns out to hold fewer rows than asked (a quiet channel), so a page over 50 quiet days
    # costs a few round trips, while a busy channel (one day fills the page) reads one day only.
    tasks = [(day, channel_id) for day in days for channel_id in by_day[day]]
    first_want = min(limit + 1, 500)  # the page and one more (to know there is a next page)
    in_flight: dict[tuple[int, str], Any] = {}
    state = {"next": 0, "depth": 1}

    def top_up() -> None:
        while state["next"] < len(tasks) and len(in_flight) < state["depth"]:
            day, channel_id = tasks[state["next"]]
            state["next"] += 1
            in_flight[(day, channel_id)] = db.execute_async(
                page_stmt, (team_id, channel_id, day, upper, lower, first_want))

    top_up()
    for day in days:
        day_rows: list[Any] = []
        floor: int | None = None  # rows past this bound were not all read in this day (some channel stopped)
        for channel_id in by_day[day]:
            hi, lo = upper, lower
            visible = 0
            want = first_want
            rows = list(in_flight.pop((day, channel_id)).result())
            while True:
                scanned += len(rows)
                day_rows.extend(rows)
                visible += sum(1 for r in rows if _visible(r, include_deleted))
                if len(rows) < want:
                    state["depth"] = min(state["depth"] * 2, _PIPELINE_DEPTH)
                    break  # this channel's day is exhausted
                last = rows[-1].ts
                if visible >= limit + 1 - len(page) or scanned >= _ROW_BUDGET:
                    if floor is None or ahead(floor, last):
                        floor = last  # the least advanced stop point bounds what is complete
                    break
                lo, hi = (last, hi) if ascending else (lo, last)
                want = min(limit + 1 - len(page) - visible + 5, 500)
                rows = list(db.execute(page_stmt, (team_id, channel_id, day, hi, lo, want)))
            top_up()
        day_rows.sort(key=lambda r: r.ts, reverse=not ascending)
        for row in day_rows:
            if floor is not None and ahead(floor, row.ts):
                break
            item = row_to_message(row, include_deleted=include_deleted)
            if item is None:
                continue
            if len(page) == limit:
                return page, ts_us(page[-1])
            page.append(item)
        if floor is not None:  # stopped inside this day: continue from the stop point
            return page, floor
    if horizon is not None:
        return page, (horizon * US_PER_DAY if not ascending else (horizon + 1) * US_PER_DAY - 1)
    return page, None


def _visible(row: Any, include_deleted: bool) -> bool:
    return row.msg_ts is not None and (include_deleted or not row.deleted)


def ts_us(message: dict[str, Any]) -> int:
    return ts_to_us(message["ts"])


def thread(db: Database, team_id: str, channels: list[str], thread_ts: int, *, limit: int, after: int,
           include_deleted: bool) -> tuple[list[dict[str, Any]], int | None]:
    """Replies of a thread with ts > after, oldest first: one partition read of slack_thread_replies per
    channel id, then the message rows by primary key (one `ts IN` query per day the page spans)."""
    reply_ts: set[tuple[int, str]] = set()
    for channel_id in channels:
        for r in db.execute(SELECT_REPLIES, (team_id, channel_id, thread_ts, after, limit + 1)):
            reply_ts.add((r.ts, channel_id))
    ordered = sorted(reply_ts)[: limit + 1]
    more = len(ordered) > limit
    ordered = ordered[:limit]
    groups: dict[tuple[str, int], list[int]] = {}
    for ts, channel_id in ordered:
        groups.setdefault((channel_id, day_of(ts)), []).append(ts)
    futures = [db.execute_async(SELECT_SOME, (team_id, ch, day, tss)) for (ch, day), tss in groups.items()]
    rows = [row for f in futures for row in f.result()]
    rows.sort(key=lambda r: r.ts)
    page = [m for m in (row_to_message(r, include_deleted=include_deleted) for r in rows) if m]
    return page, (ordered[-1][0] if more and ordered else None)
