"""Message tables: statements, the rows a message event writes, and the reads behind the timeline, thread and
message endpoints; the file worker records its outcome on the message here too.

Owner of slack_messages, slack_channel_days, slack_thread_replies and slack_message_versions. Ingest (ingest.py)
sends `message_writes` together with the file queue's rows in one round; nothing here imports another owner.

Every event-derived write carries `USING TIMESTAMP <event time µs>`: the message itself at its ts, an edit at
its edit time, a delete at the delete time, a reaction at the reaction's event time. Cassandra keeps the
newest value per cell, so any arrival order of the same events converges to the in-order state.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from cassandra import ConsistencyLevel

from api.caches import Cache
from api.db import Database, Params, Statement, without_none
from api.errors import CASSANDRA_UNAVAILABLE
from api.slack import mrkdwn
from api.slack.codec import compress_json, decode_json, decompress_json, encode_json
from api.slack.content import with_content_text
from api.slack.timeutil import US_PER_DAY, day_of, us_to_ts

TABLES = frozenset({"slack_messages", "slack_channel_days", "slack_thread_replies", "slack_message_versions",
                    "slack_message_raw"})

Write = tuple[Statement, Params]

# What the API shows of a message; the one-message read adds what history needs. Fewer columns = less decoding
# per row on a 50-row timeline page.
# A thread head's reply count is Cassandra 5.0's collection_count of its replies map: the map is not shipped.
_PAGE_COLUMNS = ("channel_id, ts, msg_ts, user_id, text, subtype, bot_id, username, thread_ts, edited_ts, "
                 "deleted, deleted_ts, files, files_stored, files_fetch_failed, files_fetch_error, reactions, "
                 "collection_count(replies) AS reply_count, content")
_COLUMNS = f"team_id, original_text, {_PAGE_COLUMNS}"

UPSERT_MESSAGE = Statement(
    "UPDATE slack_messages USING TIMESTAMP :wt SET msg_ts = :msg_ts, user_id = :user_id, text = :text, "
    "subtype = :subtype, bot_id = :bot_id, username = :username, thread_ts = :thread_ts, files = :files, "
    "edited_ts = :edited_ts, original_text = :original_text, word_count = :word_count, "
    "mentions = :mentions, parent_user_id = :parent_user_id, content = :content "
    "WHERE team_id = :team_id AND channel_id = :channel_id AND day = :day AND ts = :ts",
    name="UPSERT slack_messages")
# A reply on its thread head's row (reply ts -> author), at the reply's own ts: the head's reply pairs and count
# come with the head. Removed at the delete time when the reply is deleted (a later delete wins any redelivery).
ADD_REPLY_TO_HEAD = Statement(
    "UPDATE slack_messages USING TIMESTAMP ? SET replies[?] = ? WHERE team_id = ? AND channel_id = ? AND day = ? "
    "AND ts = ?", name="REPLY+ slack_messages")
REMOVE_REPLY_FROM_HEAD = Statement(
    "DELETE replies[?] FROM slack_messages USING TIMESTAMP ? WHERE team_id = ? AND channel_id = ? AND day = ? "
    "AND ts = ?", name="REPLY- slack_messages")
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
    "INSERT INTO slack_thread_replies (team_id, channel_id, thread_ts, ts, user_id) "
    "VALUES (:team_id, :channel_id, :thread_ts, :ts, :user_id)")
# A delete seen by history (the message is gone, or a tombstone): when it happened is not known, so only the
# flag is written (at the time it was observed); a live delete event still records its own deleted_ts.
MARK_DELETED_SEEN = Statement(
    "UPDATE slack_messages USING TIMESTAMP ? SET deleted = true "
    "WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?", name="DELETE-SEEN slack_messages")
ADD_EDIT_TIME = Statement(
    "UPDATE slack_messages USING TIMESTAMP ? SET edit_times = edit_times + ? "
    "WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?", name="EDIT-TIME+ slack_messages")
INSERT_VERSION = Statement(
    "INSERT INTO slack_message_versions (team_id, channel_id, ts, version_ts, text) VALUES (?, ?, ?, ?, ?) "
    "USING TIMESTAMP ?")

# A day's listing row says where its messages are (docs/slack-messages.md, "Partition sizes"): without
# split_us, all in the day's partition; with it, those from split_us on in the hour buckets `buckets` lists.
SELECT_DAYS_DESC = Statement(
    "SELECT day, split_us, buckets FROM slack_channel_days WHERE team_id = ? AND channel_id = ? AND day <= ? "
    "AND day >= ? LIMIT ?")
SELECT_DAYS_ASC = Statement(
    "SELECT day, split_us, buckets FROM slack_channel_days WHERE team_id = ? AND channel_id = ? AND day <= ? "
    "AND day >= ? ORDER BY day ASC LIMIT ?")
SELECT_DAY_STATES = Statement(
    "SELECT day, split_us, buckets FROM slack_channel_days WHERE team_id = ? AND channel_id = ? AND day IN ?",
    name="SELECT slack_channel_days (states)")
# What a writer routes by: read at LOCAL_QUORUM, so that a split decided (LWT, QUORUM commit) is seen.
SELECT_DAY_STATE = Statement(
    "SELECT split_us, buckets FROM slack_channel_days WHERE team_id = ? AND channel_id = ? AND day = ?",
    name="SELECT slack_channel_days (state)", consistency=ConsistencyLevel.LOCAL_QUORUM)
# The one decision of a hot day: first writer wins, every other one reads the winner's value back.
SPLIT_DAY = Statement(
    "UPDATE slack_channel_days SET split_us = ? WHERE team_id = ? AND channel_id = ? AND day = ? "
    "IF split_us = null", name="SPLIT slack_channel_days")
LIST_BUCKET = Statement(
    "UPDATE slack_channel_days SET buckets = buckets + ? WHERE team_id = ? AND channel_id = ? AND day = ?",
    name="BUCKET+ slack_channel_days")
# The newest ts of a day's own partition (clustering DESC: one row): a split starts after it.
SELECT_NEWEST_TS = Statement(
    "SELECT ts FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ? LIMIT 1",
    name="SELECT slack_messages (newest ts)", consistency=ConsistencyLevel.LOCAL_QUORUM)
# The raw event of a message (CHRONICLE_SLACK_KEEP_RAW), out of the timeline row: written at the event's time
# (the newest event of the message wins, as the column did), read by ts only.
INSERT_RAW = Statement(
    "INSERT INTO slack_message_raw (team_id, channel_id, hour, ts, raw) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?")
SELECT_RAW = Statement(
    "SELECT raw FROM slack_message_raw WHERE team_id = ? AND channel_id = ? AND hour = ? AND ts = ?")
# A timeline page over a group of a channel's days (and its earlier ids): one statement, merged in ts order by
# the coordinator. Cassandra pages no query with both IN on the partition key and ORDER BY: LIMIT bounds it.
SELECT_GROUP_DESC = Statement(
    f"SELECT {_PAGE_COLUMNS} FROM slack_messages WHERE team_id = ? AND channel_id IN ? AND day IN ? "
    "AND ts < ? AND ts > ? ORDER BY ts DESC LIMIT ?", name="SELECT slack_messages (page of days)", unpaged=True)
SELECT_GROUP_ASC = Statement(
    f"SELECT {_PAGE_COLUMNS} FROM slack_messages WHERE team_id = ? AND channel_id IN ? AND day IN ? "
    "AND ts < ? AND ts > ? ORDER BY ts ASC LIMIT ?", name="SELECT slack_messages (page of days asc)",
    unpaged=True)
SELECT_ONE = Statement(
    f"SELECT {_COLUMNS} FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?",
    name="SELECT slack_messages (one)")
SELECT_SOME = Statement(
    f"SELECT {_PAGE_COLUMNS} FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ? AND ts IN ?",
    name="SELECT slack_messages (in)")
SELECT_REPLIES = Statement(
    "SELECT ts FROM slack_thread_replies WHERE team_id = ? AND channel_id = ? AND thread_ts = ? AND ts > ? "
    "LIMIT ?")
SELECT_REPLY_AUTHORS = Statement(
    "SELECT ts, user_id FROM slack_thread_replies WHERE team_id = ? AND channel_id = ? AND thread_ts = ?",
    name="SELECT slack_thread_replies (authors)")
# Search candidates of one channel-day (search.py confirms them): what a result shows.
SELECT_CANDIDATES = Statement(
    f"SELECT {_PAGE_COLUMNS} FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ? AND ts IN ?",
    name="SELECT slack_messages (search candidates)")
# What history compares with what it fetched: the stored messages of a time range of one day.
SELECT_STORED_RANGE = Statement(
    "SELECT ts, msg_ts, thread_ts, deleted, reactions FROM slack_messages WHERE team_id = ? AND channel_id = ? "
    "AND day = ? AND ts >= ? AND ts < ?", name="SELECT slack_messages (stored range)")
# A few whole days of a channel in one request (export): a bounded set of partitions, sorted by the reader.
SELECT_DAYS_IN = Statement(
    f"SELECT {_PAGE_COLUMNS} FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day IN ?",
    name="SELECT slack_messages (days in)")
# What a report counts of a message (issue 10): a channel's days of the period, no text; a head's replies as
# their count (Cassandra 5.0's collection_count: the map is not shipped or decoded).
SELECT_REPORT_DAYS = Statement(
    "SELECT ts, msg_ts, user_id, subtype, bot_id, thread_ts, deleted, word_count, mentions, reactions, "
    "parent_user_id, collection_count(replies) AS reply_count FROM slack_messages "
    "WHERE team_id = ? AND channel_id = ? AND day IN ?", name="SELECT slack_messages (report days)")
# Analytics of rows archived before they existed (migration 0060): recomputed from the text, written at the
# text's own write time, so a newer edit (written later, at its own time) always wins.
SELECT_TEXT_DAY = Statement(
    "SELECT ts, msg_ts, user_id, bot_id, text, thread_ts, deleted, word_count, writetime(text) AS text_written, "
    "content FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ?",
    name="SELECT slack_messages (text day)")
SET_ANALYTICS = Statement(
    "UPDATE slack_messages USING TIMESTAMP ? SET word_count = ?, mentions = ? "
    "WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?", name="ANALYTICS slack_messages")
# Activity days (api/slack/activity.py): everything one day partition says about who did what when; the
# reactions' write times are their event times (each element is written USING TIMESTAMP <reaction time>).
SELECT_ACTIVITY = Statement(
    "SELECT ts, user_id, subtype, thread_ts, edited_ts, edit_times, deleted, deleted_ts, files, word_count, "
    "reactions, writetime(reactions) AS reaction_times FROM slack_messages "
    "WHERE team_id = ? AND channel_id = ? AND day = ?",
    name="SELECT slack_messages (activity)")
SELECT_ACTIVITY_RANGE = Statement(
    "SELECT ts, user_id, subtype, thread_ts, edited_ts, edit_times, deleted, deleted_ts, files, word_count, "
    "reactions, writetime(reactions) AS reaction_times FROM slack_messages "
    "WHERE team_id = ? AND channel_id = ? AND day = ? AND ts >= ? AND ts < ?",
    name="SELECT slack_messages (activity hours)")
SELECT_VERSION_TIMES = Statement(
    "SELECT version_ts FROM slack_message_versions WHERE team_id = ? AND channel_id = ? AND ts = ? LIMIT 1000",
    name="SELECT slack_message_versions (times)")
SELECT_VERSIONS = Statement(
    "SELECT version_ts, text FROM slack_message_versions WHERE team_id = ? AND channel_id = ? AND ts = ? "
    "LIMIT 1000")
# The file worker's view of a message: which files are stored, and its outcome per file. Read at LOCAL_QUORUM:
# it must see what another worker recorded (at LOCAL_QUORUM) a moment ago, or that file is fetched twice.
SELECT_FILES_STORED = Statement(
    "SELECT files_stored, files_fetch_error FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ? "
    "AND ts = ?", name="SELECT slack_messages (files_stored)", consistency=ConsistencyLevel.LOCAL_QUORUM)
RECORD_FILE_STORED = Statement(
    "UPDATE slack_messages SET files_stored[?] = ? WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?",
    name="FILES slack_messages")
RECORD_FILE_FAILED = Statement(
    "UPDATE slack_messages SET files_fetch_failed = true, files_fetch_error[?] = ? "
    "WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?", name="FILES-FAILED slack_messages")


@dataclasses.dataclass(frozen=True)
class NewMessage:
    """A message as posted (or as it reads after an edit), normalised from a Slack payload (payloads.py)."""

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
    parent_user_id: str | None = None  # a reply's thread author, as Slack sends it
    content: dict[str, Any] | None = None  # everything else Slack sent (payloads.message_content)

    def searchable_text(self) -> str | None:
        """The text search indexes: the message text, and the words its attachments and blocks show."""
        return with_content_text(self.text, self.content)


# What Slack shows in place of a deleted thread head whose replies remain (its export's `tombstone` message).
TOMBSTONE_USER = "USLACKBOT"
TOMBSTONE_TEXT = "This message was deleted."


@dataclasses.dataclass(slots=True)  # not frozen: that triples the cost of building 50 per page; never mutated
class Message:
    """A stored message as the API shows it: built from a row in `from_row`, shown as JSON in `to_json`."""

    ts: int
    channel_id: str
    user: str | None
    text: str | None
    subtype: str | None
    bot_id: str | None
    username: str | None
    thread_ts: int | None
    edited_ts: int | None
    deleted: bool
    deleted_ts: int | None
    files: list[dict] | None
    files_stored: dict[str, str] | None
    files_fetch_failed: bool
    files_fetch_error: dict[str, str] | None
    reactions: tuple[tuple[str, tuple[str, ...]], ...]  # (emoji, users), by emoji then user
    reply_count: int  # replies of a thread head that are not deleted (0 for any other message)
    content_blob: bytes | None = None  # compressed `content` (decoded on demand: most pages never need it)
    decoded: dict[str, Any] | None = None  # `content()` once decoded (a page reads it for names, then renders)

    @classmethod
    def from_row(cls, row: Any) -> Message | None:
        """None for a row that holds only state that came before its message (a reaction, a delete)."""
        if row.msg_ts is None:
            return None
        # Positional: this runs for every row of a 50-message page.
        return cls(
            row.ts, row.channel_id, row.user_id, row.text, row.subtype, row.bot_id, row.username, row.thread_ts,
            row.edited_ts, bool(row.deleted), row.deleted_ts,
            json.loads(row.files) if row.files else None,
            dict(row.files_stored) if row.files_stored else None,
            bool(row.files_fetch_failed),
            dict(row.files_fetch_error) if row.files_fetch_error else None,
            _grouped(row.reactions) if row.reactions else (),
            row.reply_count or 0,
            row.content,
        )

    def content(self) -> dict[str, Any]:
        """Everything Slack sent beyond the columns (attachments, blocks, full file objects, profiles, ...),
        as Slack's JSON; {} when nothing."""
        if self.decoded is None:
            self.decoded = decoded_content(self.content_blob)
        return self.decoded

    def shown(self, include_deleted: bool) -> bool:
        return include_deleted or not self.deleted

    def visible(self, include_deleted: bool) -> Message | None:
        """The message as a reader sees it: itself; a deleted thread head whose replies remain (or a tombstone
        an export brought) as Slack's tombstone placeholder, with nothing of the deleted content; else None."""
        if include_deleted or not self.deleted:
            return self
        if self.subtype == "tombstone" and self.user == TOMBSTONE_USER and self.text == TOMBSTONE_TEXT:
            return dataclasses.replace(self, deleted=False, deleted_ts=None)  # Slack's own, as history brought it
        # Otherwise never the row's own cells: a tombstone that history brought may share the row with the
        # message it replaced (the message's cells win there), and nothing of a deleted message is shown.
        if self.reply_count > 0 or self.subtype == "tombstone":
            return Message(self.ts, self.channel_id, TOMBSTONE_USER, TOMBSTONE_TEXT, "tombstone", None, None,
                           self.thread_ts, None, False, None, None, None, False, None, (), self.reply_count)
        return None

    def to_json(self) -> dict[str, Any]:
        """The documented form (schemas.MessageSchema): Slack ts strings, absent fields left out."""
        out: dict[str, Any] = {
            "ts": us_to_ts(self.ts), "channel_id": self.channel_id, "user": self.user, "text": self.text,
            "subtype": self.subtype, "bot_id": self.bot_id, "username": self.username,
            "thread_ts": us_to_ts(self.thread_ts) if self.thread_ts is not None else None,
            "edited_ts": us_to_ts(self.edited_ts) if self.edited_ts is not None else None,
            "files": self.files, "files_stored": self.files_stored,
            "files_fetch_failed": True if self.files_fetch_failed else None,
            "files_fetch_error": self.files_fetch_error,
            "reactions": [{"name": e, "users": list(u), "count": len(u)} for e, u in self.reactions] or None,
        }
        if self.deleted:
            out["deleted"] = True
            out["deleted_ts"] = us_to_ts(self.deleted_ts) if self.deleted_ts is not None else None
        if self.reply_count:
            out["reply_count"] = self.reply_count
        shown = {k: v for k, v in out.items() if v is not None}
        if self.content_blob:
            # Slack's own fields under their own names; the columns win a clash, except `files`: the full
            # objects Slack sent, where the column keeps only what the file worker needs.
            content = {k: v for k, v in self.content().items() if v is not None}
            if isinstance(content.get("files"), list):
                shown.pop("files", None)
            return {**content, **shown}
        return shown


def decoded_content(blob: bytes | None) -> dict[str, Any]:
    """A row's `content` column as Slack's JSON ({} when unset or empty)."""
    if not blob:
        return {}
    value = decode_json(blob)
    return value if isinstance(value, dict) else {}


def searchable_text(row: Any) -> str | None:
    """What search indexes and confirms of a row that has `text` and `content`: the text and the words of its
    attachments and blocks (content.py)."""
    return with_content_text(row.text, decoded_content(row.content) if row.content else None)


def _grouped(reactions: Iterable[tuple[str, str]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """{(emoji, user)} -> ((emoji, (user, ...)), ...), by emoji then user."""
    by_emoji: dict[str, list[str]] = {}
    for emoji, user in sorted(reactions):
        by_emoji.setdefault(emoji, []).append(user)
    return tuple((emoji, tuple(users)) for emoji, users in by_emoji.items())


# -- where a message's row is (docs/slack-messages.md, "Partition sizes") ----------------------------------

US_PER_HOUR = 3_600 * 1_000_000
# Partition key `day` of an hour bucket: day + (hour + 1) * 2^22. Messages end before the year 10000 (day
# 2,932,896 < 2^22), so a bucket never collides with a day, and the largest key (hour 23) stays an int.
BUCKET_BASE = 1 << 22
# A live split starts at least this long after it is decided: a writer's "not split" may be this old (it is
# read again after that), so no writer can still put a message at or after the split into the day's partition.
SPLIT_MARGIN_US = 5 * 60 * 1_000_000
_STATES = "slack.channel_day_states"  # (team, channel, day) -> (split_us | None, read at µs)
_COUNTS = "slack.channel_day_counts"  # (team, channel, day) -> [rows routed to the day, newest ts, next check]
_KNOWN_BUCKETS = "slack.channel_day_buckets_written"
_STATES_MAX = 40_000


def bucket_part(day: int, hour: int) -> int:
    return day + (hour + 1) * BUCKET_BASE


def part_of(day: int, split_us: int | None, ts: int) -> int:
    """The slack_messages partition (`day` column) of message ts of `day`, given the day's split."""
    if split_us is None or ts < split_us:
        return day
    return bucket_part(day, (ts - day * US_PER_DAY) // US_PER_HOUR)


def day_parts(day: int, split_us: int | None, buckets: Iterable[int] | None, *, lower: int = -1,
              upper: int = 2**63 - 1) -> list[int]:
    """The partitions of a listed day holding ts in (lower, upper), oldest first: the day's own (everything
    before the split) and the listed hour buckets. Their ts ranges do not overlap."""
    start = day * US_PER_DAY
    parts = []
    own_end = split_us if split_us is not None else start + US_PER_DAY  # the day's own partition: [start, own_end)
    if own_end > start and lower < own_end - 1 and upper > start:
        parts.append(day)
    if split_us is not None:
        for hour in sorted(buckets or ()):
            lo = start + hour * US_PER_HOUR
            # A bucket before the split holds nothing of the day (listed by a split that lost the LWT race).
            if lo >= split_us and lower < lo + US_PER_HOUR - 1 and upper > lo:
                parts.append(bucket_part(day, hour))
    return parts


def _now_us(db: Database) -> int:
    return int(db.clock.time() * 1_000_000)


def _split_of(db: Database, team_id: str, channel_id: str, day: int, ts: int) -> int | None:
    """The day's split as a writer routes by: decided splits never change (kept); "not split" is read again once
    it is SPLIT_MARGIN_US old, or for a ts that far past the read (see `_decide_split`)."""
    states = db.caches.lru(_STATES, maxsize=_STATES_MAX)
    key = (team_id, channel_id, day)
    now = _now_us(db)
    entry = states.get(key)
    if entry is not None and (entry[0] is not None or max(now, ts) < entry[1] + SPLIT_MARGIN_US):
        return entry[0]
    row = db.execute(SELECT_DAY_STATE, key).one()
    split = row.split_us if row is not None else None
    states.set(key, (split, now))
    return split


def _route(db: Database, team_id: str, channel_id: str, ts: int) -> int:
    day = day_of(ts)
    return part_of(day, _split_of(db, team_id, channel_id, day, ts), ts)


def _key(db: Database, team_id: str, channel_id: str, ts: int) -> dict[str, Any]:
    return {"team_id": team_id, "channel_id": channel_id, "day": _route(db, team_id, channel_id, ts), "ts": ts}


def _hot_threshold(db: Database) -> int:
    return db.settings.slack.hot_day_messages


def _count_and_split(db: Database, msg: NewMessage, *, live: bool) -> int:
    """Route a new message's row, counting what this process puts in a day's own partition; past the hot
    threshold the day is split (`_decide_split`). Returns the partition."""
    day = day_of(msg.ts)
    split = _split_of(db, msg.team_id, msg.channel_id, day, msg.ts)
    part = part_of(day, split, msg.ts)
    if split is not None or part != day:
        return part
    threshold = _hot_threshold(db)
    counts = db.caches.lru(_COUNTS, maxsize=_STATES_MAX)
    entry = counts.setdefault((msg.team_id, msg.channel_id, day), lambda: [0, 0, threshold])
    entry[0] += 1
    entry[1] = max(entry[1], msg.ts)
    if entry[0] >= entry[2]:
        entry[2] = entry[0] + max(threshold // 10, 1)  # a day that cannot split yet is tried again later
        # Below a split decided here (it starts after the newest routed ts); another writer's may be lower.
        return part_of(day, _decide_split(db, msg.team_id, msg.channel_id, day, routed_max=entry[1], live=live),
                       msg.ts)
    return part


def _decide_split(db: Database, team_id: str, channel_id: str, day: int, *, routed_max: int, live: bool
                  ) -> int | None:
    """Split a hot day at the first hour boundary after every ts already in (or on its way to) its own
    partition, and, for live writes (or a day that is not over), at least SPLIT_MARGIN_US from now: every other
    writer's "not split" is younger than that, so it never routes a message at or after the split to the day's
    partition. History writes (import, backfill) may split a past day earlier; docs/slack-messages.md names the
    race that leaves.
    The lightweight transaction makes the first decision the only one."""
    start = day * US_PER_DAY
    newest = db.execute(SELECT_NEWEST_TS, (team_id, channel_id, day)).one()
    after = max(routed_max, newest.ts if newest is not None else 0) + 1
    now = _now_us(db)
    margin = live or start + US_PER_DAY + SPLIT_MARGIN_US > now  # a day live events may still be written to
    if margin:
        after = max(after, now + SPLIT_MARGIN_US)
    split = start + -(-(after - start) // US_PER_HOUR) * US_PER_HOUR  # the next hour boundary (or `after`)
    if split >= start + US_PER_DAY:
        return None
    try:
        row = db.execute(SPLIT_DAY, (split, team_id, channel_id, day)).one()
    except CASSANDRA_UNAVAILABLE:
        if not margin:
            raise  # a past day's split may have been applied, below what this writer routes: its write fails
        # Applied or not, a split at least the margin ahead is safe to learn later: read again on the next write.
        db.caches.lru(_STATES, maxsize=_STATES_MAX).pop((team_id, channel_id, day))
        return None
    decided = split if row[0] else row.split_us
    if decided is not None:
        db.caches.lru(_STATES, maxsize=_STATES_MAX).set((team_id, channel_id, day), (decided, _now_us(db)))
    return decided


def _listing_writes(db: Database, team_id: str, channel_id: str, ts: int, part: int) -> list[Write]:
    """The day in the channel's listing, and the message's hour bucket in the day's, unless this process
    already wrote them (both are insert-only)."""
    day = day_of(ts)
    writes: list[Write] = []
    if (team_id, channel_id, day) not in _known_days(db):
        writes.append((INSERT_DAY, (team_id, channel_id, day)))
    if part != day:
        hour = (part - day) // BUCKET_BASE - 1
        if (team_id, channel_id, day, hour) not in db.caches.lru(_KNOWN_BUCKETS, maxsize=_STATES_MAX):
            writes.append((LIST_BUCKET, ({hour}, team_id, channel_id, day)))
    return writes


# -- writes -----------------------------------------------------------------------------------------------

def message_writes(db: Database, msg: NewMessage, *, write_ts: int, edited_ts: int | None = None,
                   versions: Iterable[tuple[int, str]] = (), original: bool = False, raw: Any = None,
                   live: bool = True) -> list[Write]:
    """The rows of a new message (write_ts = its ts, original=True) or of its edited form (write_ts = edit
    time): the message row, its day (and hour bucket) in the listing, its place in the thread, the text
    versions, the raw event in its own table. `live`: a live event (False: history, an import or a backfill),
    which decides how a hot day is split.

    Each is one whole-row write, so no reader ever sees half a message. The caller sends them in one round
    (ingest.store_message) and calls `note_stored` once they are all written.
    """
    part = _count_and_split(db, msg, live=live)
    key = {"team_id": msg.team_id, "channel_id": msg.channel_id, "day": part, "ts": msg.ts}
    writes: list[Write] = [(UPSERT_MESSAGE, without_none({
        **key, "wt": write_ts, "msg_ts": msg.msg_ts, "user_id": msg.user, "text": msg.text,
        "original_text": msg.text if original else None,
        "subtype": msg.subtype, "bot_id": msg.bot_id, "username": msg.username, "thread_ts": msg.thread_ts,
        "files": json.dumps(msg.files, separators=(",", ":")) if msg.files else None,
        "edited_ts": edited_ts,
        "word_count": mrkdwn.word_count(msg.text) if msg.text is not None else None,
        "mentions": mrkdwn.mentioned_users(msg.text, msg.user) if msg.text is not None else None,
        "parent_user_id": msg.parent_user_id,
        # An edit always writes it (b"" = nothing more): the edited message replaces the content whole.
        "content": encode_json(msg.content) if msg.content else (None if original else b""),
    }))]
    writes.extend(_listing_writes(db, msg.team_id, msg.channel_id, msg.ts, part))
    if raw is not None:
        writes.append((INSERT_RAW, (msg.team_id, msg.channel_id, msg.ts // US_PER_HOUR, msg.ts, compress_json(raw),
                                    write_ts)))
    if msg.thread_ts is not None and msg.thread_ts != msg.ts:
        writes.append((INSERT_REPLY, without_none({
            "team_id": msg.team_id, "channel_id": msg.channel_id, "thread_ts": msg.thread_ts, "ts": msg.ts,
            "user_id": msg.user})))
        # At the reply's ts whatever the write is (post or edit): a delete of the reply, later, always wins.
        writes.append((ADD_REPLY_TO_HEAD, (msg.ts, msg.ts, msg.user or msg.bot_id or "", msg.team_id,
                                           msg.channel_id, _route(db, msg.team_id, msg.channel_id, msg.thread_ts),
                                           msg.thread_ts)))
    for version_ts, text in versions:
        writes.append((INSERT_VERSION, (msg.team_id, msg.channel_id, msg.ts, version_ts, text, version_ts)))
        if version_ts > msg.ts:  # an edit (the original version is at the message's ts)
            writes.append((ADD_EDIT_TIME, (version_ts, {version_ts}, msg.team_id, msg.channel_id, part, msg.ts)))
    return writes


# Days this process has written to slack_channel_days: the row is insert-only (never deleted), so once
# written it need not be written again; saves one write per message on a busy channel.
_KNOWN_DAYS = "slack.channel_days_written"
_KNOWN_DAYS_MAX = 40_000


def _known_days(db: Database) -> Cache:
    return db.caches.lru(_KNOWN_DAYS, maxsize=_KNOWN_DAYS_MAX)


def day_listed(db: Database, msg: NewMessage) -> bool:
    """Whether this process already listed the message's day (then its channel is known too)."""
    return (msg.team_id, msg.channel_id, day_of(msg.ts)) in _known_days(db)


def note_stored(db: Database, msg: NewMessage) -> None:
    """The writes of `message_writes` all succeeded: the message's day (and hour bucket) is listed from now on."""
    day = day_of(msg.ts)
    _known_days(db).set((msg.team_id, msg.channel_id, day), None)
    part = _route(db, msg.team_id, msg.channel_id, msg.ts)
    if part != day:
        db.caches.lru(_KNOWN_BUCKETS, maxsize=_STATES_MAX).set(
            (msg.team_id, msg.channel_id, day, (part - day) // BUCKET_BASE - 1), None)


def mark_deleted_writes(team_id: str, channel_id: str, ts: int, *, deleted_at: int, thread_ts: int | None = None,
                        db: Database) -> list[Write]:
    """The deleted flag at the delete time; a reply (`thread_ts` known) also leaves its head's replies."""
    writes: list[Write] = [(MARK_DELETED, {**_key(db, team_id, channel_id, ts), "wt": deleted_at,
                                           "deleted_ts": deleted_at})]
    if thread_ts is not None and thread_ts != ts:
        writes.append(reply_removed_write(team_id, channel_id, thread_ts, ts, at=deleted_at, db=db))
    return writes


def mark_deleted(db: Database, team_id: str, channel_id: str, ts: int, *, deleted_at: int,
                 thread_ts: int | None = None) -> None:
    db.execute_many(mark_deleted_writes(team_id, channel_id, ts, deleted_at=deleted_at, thread_ts=thread_ts, db=db))


def reply_removed_write(team_id: str, channel_id: str, thread_ts: int, ts: int, *, at: int, db: Database) -> Write:
    return (REMOVE_REPLY_FROM_HEAD, (ts, at, team_id, channel_id, _route(db, team_id, channel_id, thread_ts),
                                     thread_ts))


def reactions_write(team_id: str, channel_id: str, ts: int, elements: Iterable[tuple[str, str]], *, at: int,
                    added: bool = True, db: Database) -> Write:
    """(emoji, user) elements added (or removed) at one time: a reaction event, or what history observed at
    `at`."""
    return (ADD_REACTION if added else REMOVE_REACTION,
            {**_key(db, team_id, channel_id, ts), "wt": at, "r": set(elements)})


def tombstone_writes(db: Database, msg: NewMessage) -> list[Write]:
    """A tombstone as history shows it (a deleted thread head kept for its replies): the placeholder's row,
    written 1 µs before the message's ts so that the message itself, when archived, always wins every cell;
    and its day listed. The caller marks it deleted (`deleted_seen_writes`)."""
    part = _route(db, msg.team_id, msg.channel_id, msg.ts)
    key = {"team_id": msg.team_id, "channel_id": msg.channel_id, "day": part, "ts": msg.ts}
    writes: list[Write] = [(UPSERT_MESSAGE, without_none({
        **key, "wt": msg.ts - 1, "msg_ts": msg.msg_ts, "user_id": msg.user, "text": msg.text,
        "subtype": msg.subtype, "thread_ts": msg.thread_ts,
        "content": encode_json(msg.content) if msg.content else None}))]
    writes.extend(_listing_writes(db, msg.team_id, msg.channel_id, msg.ts, part))
    return writes


def deleted_seen_writes(team_id: str, channel_id: str, ts: int, *, at: int, thread_ts: int | None = None,
                        db: Database) -> list[Write]:
    """History found the message gone (or a tombstone): the flag, and a reply leaves its head's replies."""
    writes = [(MARK_DELETED_SEEN, (at, team_id, channel_id, _route(db, team_id, channel_id, ts), ts))]
    if thread_ts is not None and thread_ts != ts:
        writes.append(reply_removed_write(team_id, channel_id, thread_ts, ts, at=at, db=db))
    return writes


def raw_event(db: Database, team_id: str, channel_id: str, ts: int) -> Any | None:
    """The kept raw event of message ts (the newest event of it), decoded; None when none was kept."""
    row = db.execute(SELECT_RAW, (team_id, channel_id, ts // US_PER_HOUR, ts)).one()
    return decompress_json(row.raw) if row is not None and row.raw else None


# -- the file worker's outcome on the message ----------------------------------------------------------------

def file_finished(db: Database, team_id: str, channel_id: str, ts: int, file_id: str) -> bool:
    """Whether the message records an outcome for `file_id`: stored, or failed for good. A file enqueued again
    (an edit re-sends the message's files, a redelivered event) is then not fetched again."""
    return files_finished(db, [(team_id, channel_id, ts, file_id)])[0]


def files_finished(db: Database, files: list[tuple[str, str, int, str]]) -> list[bool]:
    """`file_finished` for many (team, channel, ts, file_id) at once: one concurrent round of reads."""
    futures = [db.execute_async(SELECT_FILES_STORED, (team, channel, _route(db, team, channel, ts), ts))
               for team, channel, ts, _ in files]
    out = []
    for (_, _, _, file_id), future in zip(files, futures, strict=True):
        row = future.result().one()
        out.append(row is not None and any(file_id in (m or {}) for m in (row.files_stored, row.files_fetch_error)))
    return out


def record_file_stored(db: Database, team_id: str, channel_id: str, ts: int, file_id: str, uri: str) -> None:
    db.execute(RECORD_FILE_STORED, (file_id, uri, team_id, channel_id, _route(db, team_id, channel_id, ts), ts))


def record_file_failed(db: Database, team_id: str, channel_id: str, ts: int, file_id: str, error: str) -> None:
    db.execute(RECORD_FILE_FAILED, (file_id, error, team_id, channel_id, _route(db, team_id, channel_id, ts), ts))


# -- reads ------------------------------------------------------------------------------------------------
# A reader takes a day's split from its listing row as it is now (never from a cache: a day may turn hot, a
# bucket may be listed, any moment); a day's own partition is read at once, alongside its listing row, since
# every day that is not split from its first hour has one.

def _states(db: Database, team_id: str, channel_id: str, days: Iterable[int]) -> Any:
    """Start reading the listing rows (split, buckets) of some days of a channel (a future)."""
    return db.execute_async(SELECT_DAY_STATES, (team_id, channel_id, sorted(set(days))))


def _parts_by_day(result: Any) -> dict[int, tuple[int | None, Any]]:
    return {r.day: (r.split_us, r.buckets) for r in result}


def _parts(states: dict[int, tuple[int | None, Any]], day: int, **bounds: int) -> list[int]:
    split, buckets = states.get(day, (None, None))
    return day_parts(day, split, buckets, **bounds)


class _DayRows:
    """The rows of one channel-day over its partitions, as a future (`result()`: a list, partitions oldest
    first). The day's own partition and its listing row are read at once; its hour buckets, if any, after."""

    def __init__(self, db: Database, team_id: str, channel_id: str, day: int,
                 read: Callable[[int], tuple[Statement, Params]], **bounds: int) -> None:
        self.db, self.day, self.read, self.bounds = db, day, read, bounds
        self.state = _states(db, team_id, channel_id, [day])
        self.own = db.execute_async(*read(day))

    def result(self) -> list[Any]:
        parts = _parts(_parts_by_day(self.state.result()), self.day, **self.bounds)
        buckets = [self.db.execute_async(*self.read(p)) for p in parts if p != self.day]
        rows = list(self.own.result()) if self.day in parts else []
        for future in buckets:
            rows.extend(future.result())
        return rows


def _row(db: Database, team_id: str, channels: list[str], ts: int) -> Any | None:
    """The row of message `ts` in the first channel of the id chain that has it (new id, then older ids)."""
    day = day_of(ts)
    for channel_id in channels:
        rows = _DayRows(db, team_id, channel_id, day, lambda p, c=channel_id: (SELECT_ONE, (team_id, c, p, ts)),
                        lower=ts - 1, upper=ts + 1).result()
        row = rows[0] if rows else None
        if row is not None and row.msg_ts is not None:
            return row
    return None


def find(db: Database, team_id: str, channels: list[str], ts: int, *, include_deleted: bool) -> Message | None:
    """Message `ts` over the channel's id chain; None when absent (or deleted, unless include_deleted)."""
    row = _row(db, team_id, channels, ts)
    message = Message.from_row(row) if row is not None else None
    return message.visible(include_deleted) if message is not None else None


def find_with_history(db: Database, team_id: str, channels: list[str], ts: int, *, include_deleted: bool
                      ) -> tuple[Message, list[dict[str, str]]] | None:
    """Message `ts` and every version of its text with the time it became current, oldest first: the
    original (kept on the message row) plus the versions recorded by edits (each stores its new and
    previous text)."""
    row = _row(db, team_id, channels, ts)
    message = Message.from_row(row) if row is not None else None
    message = message.visible(include_deleted) if message is not None else None
    if message is None:
        return None
    if message.subtype == "tombstone" and message.deleted is False and row.deleted:
        return message, []  # the placeholder of a deleted head: its history is not shown
    found = {r.version_ts: r.text for r in db.execute(SELECT_VERSIONS, (row.team_id, row.channel_id, row.ts))}
    if row.original_text is not None:
        found.setdefault(row.ts, row.original_text)
    if not found and row.text is not None:
        found[row.ts] = row.text
    return message, [{"ts": us_to_ts(t), "text": found[t]} for t in sorted(found)]


def stored_between(db: Database, team_id: str, channel_id: str, lower: int, upper: int) -> list[Any]:
    """Stored rows (ts, msg_ts, thread_ts, deleted, reactions) with lower <= ts < upper, over the listed days
    of that range (one partition read per day and hour bucket, concurrently). History bounds the range (its
    refetch window)."""
    listed: list[Any] = []
    hi = day_of(max(upper - 1, 0))
    while True:
        page = list(db.execute(SELECT_DAYS_DESC, (team_id, channel_id, hi, day_of(lower), _DAYS_PER_REQUEST)))
        listed.extend(page)
        if len(page) < _DAYS_PER_REQUEST:
            break
        hi = page[-1].day - 1
    futures = [db.execute_async(SELECT_STORED_RANGE, (team_id, channel_id, part, lower, upper))
               for r in listed for part in day_parts(r.day, r.split_us, r.buckets, lower=lower - 1, upper=upper)]
    return [row for f in futures for row in f.result()]


def start_reply_authors(db: Database, team_id: str, channel_id: str, thread_ts: int) -> Any:
    """Start reading (ts, user_id) of every reply of a thread, oldest first (one partition; a future)."""
    return db.execute_async(SELECT_REPLY_AUTHORS, (team_id, channel_id, thread_ts))


def all_days(db: Database, team_id: str, channel_id: str, *, first_day: int = 0, last_day: int = 2**31 - 1
             ) -> Iterable[int]:
    """Every listed day of a channel in [first_day, last_day], oldest first, 64 days per read."""
    lo = first_day
    while True:
        listed = [r.day for r in db.execute(SELECT_DAYS_ASC, (team_id, channel_id, last_day, lo,
                                                               _DAYS_PER_REQUEST))]
        yield from listed
        if len(listed) < _DAYS_PER_REQUEST:
            return
        lo = listed[-1] + 1


# Partitions named in one `day IN` read (a report's or an export's days, with their hour buckets).
_PARTS_PER_READ = 64


def _chunks(parts: list[int]) -> list[list[int]]:
    return [parts[i:i + _PARTS_PER_READ] for i in range(0, len(parts), _PARTS_PER_READ)]


def _days_parts(db: Database, team_id: str, channel_id: str, days: list[int]) -> list[int]:
    states = _parts_by_day(_states(db, team_id, channel_id, days).result())
    return [p for day in sorted(set(days)) for p in _parts(states, day)]


def report_rows(db: Database, team_id: str, channel_days: Iterable[tuple[str, list[int]]], *,
                in_flight: int = 32) -> Iterable[tuple[str, Any]]:
    """(channel_id, row) for every row of the given channels' listed days (a report's bounded set: at most 62
    days a channel), one `day IN` request per channel (per 64 partitions of a channel with hour buckets),
    `in_flight` channels at a time; rows of one channel come together, channels in the order given."""
    pending: collections.deque[tuple[str, list[Any]]] = collections.deque()
    source = iter(channel_days)
    states: collections.deque[tuple[str, list[int], Any]] = collections.deque()

    def start() -> None:
        # Listing rows are read one channel ahead of the rows, so both stay in flight.
        while len(states) < 2:
            nxt = next(source, None)
            if nxt is None:
                break
            states.append((nxt[0], nxt[1], _states(db, team_id, nxt[0], nxt[1])))
        if states:
            channel_id, days, future = states.popleft()
            by_day = _parts_by_day(future.result())
            parts = [p for day in sorted(set(days)) for p in _parts(by_day, day)]
            pending.append((channel_id, [db.execute_async(SELECT_REPORT_DAYS, (team_id, channel_id, chunk))
                                         for chunk in _chunks(parts)]))

    for _ in range(in_flight):
        start()
    while pending:
        channel_id, futures = pending.popleft()
        results = [f.result() for f in futures]
        start()
        for result in results:
            for row in result.current_rows:
                yield channel_id, row
            while result.has_more_pages:  # more than 5,000 rows in the channel's days
                result.fetch_next_page()
                for row in result.current_rows:
                    yield channel_id, row


def analytics_writes(db: Database, team_id: str, channel_id: str, day: int) -> list[Write]:
    """The analytics a channel-day's rows lack (word count, mentions; a reply on its head's replies), computed
    from the stored text at the text's write time: running it again, or after new edits, changes nothing."""
    writes: list[Write] = []
    for part in _days_parts(db, team_id, channel_id, [day]):
        for r in db.execute(SELECT_TEXT_DAY, (team_id, channel_id, part)):
            if r.msg_ts is None:
                continue
            if r.text is not None and r.word_count is None:
                writes.append((SET_ANALYTICS, (r.text_written, mrkdwn.word_count(r.text),
                                               mrkdwn.mentioned_users(r.text, r.user_id), team_id, channel_id,
                                               part, r.ts)))
            if r.thread_ts is not None and r.thread_ts != r.ts and not r.deleted:
                writes.append((ADD_REPLY_TO_HEAD, (r.ts, r.ts, r.user_id or r.bot_id or "", team_id, channel_id,
                                                   _route(db, team_id, channel_id, r.thread_ts), r.thread_ts)))
    return writes


def texts_of_day(db: Database, team_id: str, channel_id: str, day: int) -> list[Any]:
    """(ts, msg_ts, user_id, text, ...) of every row of one channel-day (indexing archived messages for search)."""
    return _DayRows(db, team_id, channel_id, day,
                    lambda p: (SELECT_TEXT_DAY, (team_id, channel_id, p))).result()


def start_days_between(db: Database, team_id: str, channel_id: str, first_day: int, last_day: int) -> Any:
    """Start reading the listed days of a channel in [first_day, last_day] (a future; a report's window)."""
    return db.execute_async(SELECT_DAYS_ASC, (team_id, channel_id, last_day, first_day, last_day - first_day + 1))


class _Joined:
    """Several reads started together, as one future: `result()` is their rows, one read after the other."""

    def __init__(self, futures: list[Any]) -> None:
        self.futures = futures

    def result(self) -> list[Any]:
        return [row for f in self.futures for row in f.result()]


def start_days_read(db: Database, team_id: str, channel_id: str, days: list[int]) -> Any:
    """Start reading whole days of a channel (a future; rows in no particular order: the caller sorts)."""
    return _Joined([db.execute_async(SELECT_DAYS_IN, (team_id, channel_id, chunk))
                    for chunk in _chunks(_days_parts(db, team_id, channel_id, days))])


# Bounds on one timeline request: days listed per channel id, rows read in all. A page stops early (with a
# cursor) rather than reading without bound through days full of deleted messages.
_DAYS_PER_REQUEST = 64
_ROW_BUDGET = 2000
_FIRST_GROUP, _LAST_GROUP = 4, 32  # partitions per read of a timeline page: the first read's, and at most
_MAX_ROWS_PER_READ = 500
MIN_US, MAX_US = 0, 2**62


def start_day_listing(db: Database, team_id: str, channel_id: str, *, upper: int = MAX_US, lower: int = MIN_US,
                      ascending: bool = False) -> Any:
    """Start reading a channel's day listing (a future), so it overlaps other reads of the request."""
    stmt = SELECT_DAYS_ASC if ascending else SELECT_DAYS_DESC
    return db.execute_async(stmt, (team_id, channel_id, day_of(max(upper - 1, 0)), day_of(lower + 1),
                                   _DAYS_PER_REQUEST))


def _units(listed: dict[int, dict[str, Any]], lower: int, upper: int) -> list[tuple[int, int, list[int], list[str]]]:
    """What a timeline reads, oldest first: (day, position, partitions, channel ids). A day split the same way
    under every id of the chain gives one unit per partition (their ts ranges are disjoint, so reading units in
    order reads messages in order); a day split differently under two ids is one unit (read together, merged by
    the coordinator)."""
    units = []
    for day in sorted(listed):
        by_id = {c: day_parts(day, r.split_us, r.buckets, lower=lower, upper=upper) for c, r in listed[day].items()}
        ids = sorted(by_id)
        layouts = {tuple(p) for p in by_id.values()}
        if len(layouts) == 1:
            units.extend((day, i, [p], ids) for i, p in enumerate(layouts.pop()))
        else:
            units.append((day, 0, sorted({p for parts in by_id.values() for p in parts}), ids))
    return units


def timeline(db: Database, team_id: str, channels: list[str], *, limit: int, upper: int = MAX_US,
             lower: int = MIN_US, ascending: bool = False, include_deleted: bool = False,
             prefetched: dict[str, Any] | None = None) -> tuple[list[Message], int | None]:
    """Messages with lower < ts < upper, newest first (or oldest first), over the channel's id chain.

    Returns (page, next position): the exclusive ts bound of the next page, None when there is no more.
    Reads only the days listed in slack_channel_days (and of a split day only its listed hour buckets), never
    empty buckets, and at most _ROW_BUDGET rows.
    """
    day_hi, day_lo = day_of(max(upper - 1, 0)), day_of(lower + 1)
    days_stmt = SELECT_DAYS_ASC if ascending else SELECT_DAYS_DESC
    group_stmt = SELECT_GROUP_ASC if ascending else SELECT_GROUP_DESC
    # `ahead(a, b)`: a comes before b in the requested order.
    def ahead(a: int, b: int) -> bool:
        return a < b if ascending else a > b

    listed: dict[int, dict[str, Any]] = {}
    horizon: int | None = None  # a truncated day listing: days past it are not known in this request
    prefetched = prefetched or {}
    for channel_id in channels:
        future = prefetched.get(channel_id)
        result = list(future.result() if future is not None else db.execute(
            days_stmt, (team_id, channel_id, day_hi, day_lo, _DAYS_PER_REQUEST)))
        if len(result) == _DAYS_PER_REQUEST and (horizon is None or ahead(result[-1].day, horizon)):
            horizon = result[-1].day
        for r in result:
            listed.setdefault(r.day, {})[channel_id] = r
    if horizon is not None:
        listed = {d: v for d, v in listed.items() if not ahead(horizon, d)}
    units = _units(listed, lower, upper)
    if not ascending:
        units.reverse()

    # The listed partitions are read in groups, each group in one statement (`day IN`, `channel_id IN`, ORDER BY
    # ts: the coordinator merges the partitions in order and returns only what the page lacks, plus one row to
    # know a next page exists). Groups grow 4, 8, 16, 32 partitions: a busy channel's page costs one read, a
    # page over 50 quiet days a few; the row budget bounds a stretch of deleted messages.
    page: list[Message] = []
    scanned = 0
    hi, lo = upper, lower
    first, size = 0, _FIRST_GROUP
    while first < len(units):
        group = units[first:first + size]
        parts = sorted({p for u in group for p in u[2]})
        ids = sorted({c for u in group for c in u[3]})
        want = min(limit + 1 - len(page), _MAX_ROWS_PER_READ)
        rows = db.execute(group_stmt, (team_id, ids, parts, hi, lo, want)).all()
        scanned += len(rows)
        for row in rows:
            message = Message.from_row(row)
            message = message.visible(include_deleted) if message is not None else None
            if message is None:
                continue
            if len(page) == limit:
                return page, page[-1].ts
            page.append(message)
        if len(rows) < want:  # the group is read to its end
            first, size = first + size, min(size * 2, _LAST_GROUP)
            continue
        last = rows[-1].ts  # more in this group: hidden rows took room on the page
        if scanned >= _ROW_BUDGET:
            return page, last
        lo, hi = (last, hi) if ascending else (lo, last)
    if horizon is not None:
        return page, (horizon * US_PER_DAY if not ascending else (horizon + 1) * US_PER_DAY - 1)
    return page, None


def thread(db: Database, team_id: str, channels: list[str], thread_ts: int, *, limit: int, after: int,
           include_deleted: bool) -> tuple[list[Message], int | None]:
    """Replies of a thread with ts > after, oldest first: one partition read of slack_thread_replies per
    channel id, then the message rows by primary key (one `ts IN` query per day, or hour bucket, the page
    spans)."""
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
    futures = [_DayRows(db, team_id, ch, day, lambda p, ch=ch, tss=tss: (SELECT_SOME, (team_id, ch, p, tss)),
                        lower=tss[0] - 1, upper=tss[-1] + 1) for (ch, day), tss in groups.items()]
    rows = [row for f in futures for row in f.result()]
    rows.sort(key=lambda r: r.ts)
    page = [v for m in map(Message.from_row, rows) if m is not None
            and (v := m.visible(include_deleted)) is not None]
    return page, (ordered[-1][0] if more and ordered else None)


def start_activity_day(db: Database, team_id: str, channel_id: str, day: int) -> Any:
    """The rows of one channel-day (its partition and hour buckets) as activity needs them (SELECT_ACTIVITY)."""
    return _DayRows(db, team_id, channel_id, day, lambda p: (SELECT_ACTIVITY, (team_id, channel_id, p)))


def start_activity_hours(db: Database, team_id: str, channel_id: str, day: int, hours: Iterable[int] | None
                         ) -> list[Any]:
    """The rows of some UTC hours of one channel-day as activity needs them: one read (its partition slice and
    the hour buckets it overlaps) per run of consecutive hours; the whole day when `hours` is None."""
    if hours is None:
        return [start_activity_day(db, team_id, channel_id, day)]
    start = day * US_PER_DAY
    reads, run = [], []
    for hour in sorted(set(hours)) + [None]:
        if run and (hour is None or hour != run[-1] + 1):
            lo, hi = start + run[0] * US_PER_HOUR, start + (run[-1] + 1) * US_PER_HOUR
            reads.append(_DayRows(db, team_id, channel_id, day,
                                  lambda p, lo=lo, hi=hi: (SELECT_ACTIVITY_RANGE, (team_id, channel_id, p, lo, hi)),
                                  lower=lo - 1, upper=hi))
            run = []
        if hour is not None:
            run.append(hour)
    return reads


def start_candidates(db: Database, team_id: str, channel_id: str, day: int, ts_list: list[int]) -> Any:
    """Future of the rows of some messages of one channel-day (search confirmation, reply counts)."""
    return _DayRows(db, team_id, channel_id, day, lambda p: (SELECT_CANDIDATES, (team_id, channel_id, p, ts_list)),
                    lower=min(ts_list) - 1, upper=max(ts_list) + 1)


def start_version_times(db: Database, team_id: str, channel_id: str, ts: int) -> Any:
    """When each text version of a message became current (the original at its ts, each edit at its time)."""
    return db.execute_async(SELECT_VERSION_TIMES, (team_id, channel_id, ts))


# -- existing keyspaces: raw events out of the rows, hot days of the old layout split (cql/0190) -------------

_SIMPLE = ("msg_ts", "user_id", "text", "original_text", "subtype", "bot_id", "username", "thread_ts", "edited_ts",
           "deleted", "deleted_ts", "files", "files_fetch_failed", "word_count", "mentions", "parent_user_id",
           "content")
_ELEMENTS = ("files_stored", "files_fetch_error", "reactions", "replies", "edit_times")  # per element write times
SELECT_RELAYOUT_DAYS = Statement(
    "SELECT day, split_us, relaid_at FROM slack_channel_days WHERE team_id = ? AND channel_id = ? AND day >= ? "
    "ORDER BY day ASC LIMIT ?", name="SELECT slack_channel_days (relayout)")
SELECT_OLD_RAW = Statement(
    "SELECT ts, raw, writetime(raw) AS raw_written FROM slack_messages WHERE team_id = ? AND channel_id = ? "
    "AND day = ?", name="SELECT slack_messages (old raw)")
SELECT_WHOLE_ROWS = Statement(
    "SELECT ts, " + ", ".join(f"{c}, writetime({c}) AS w_{c}" for c in (*_SIMPLE, *_ELEMENTS))
    + " FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ?", name="SELECT slack_messages (whole)")
MARK_RELAID = Statement(
    "UPDATE slack_channel_days SET relaid_at = ? WHERE team_id = ? AND channel_id = ? AND day = ?",
    name="RELAID slack_channel_days")
COPY_CELLS = Statement(
    "UPDATE slack_messages USING TIMESTAMP :wt SET " + ", ".join(f"{c} = :{c}" for c in _SIMPLE) + ", "
    + ", ".join(f"{c} = {c} + :{c}" for c in _ELEMENTS)
    + " WHERE team_id = :team_id AND channel_id = :channel_id AND day = :day AND ts = :ts",
    name="COPY slack_messages")
# The old partition of a day now split from its first hour: one partition deletion, in front of no reader (a
# day split at its start has no partition of its own in any read's list).
DROP_OLD_DAY = Statement(
    "DELETE FROM slack_messages USING TIMESTAMP ? WHERE team_id = ? AND channel_id = ? AND day = ?",
    name="DROP-OLD-DAY slack_messages")


def _copy_writes(team_id: str, channel_id: str, part: int, row: Any) -> list[Write]:
    """One row of the old layout into partition `part`, every cell (and collection element) at its own write
    time: the copy converges with any event applied to either copy exactly as the original would. One write per
    distinct write time; the columns of other times are left unset."""
    by_time: dict[int, dict[str, Any]] = {}
    for c in _SIMPLE:
        value = getattr(row, c)
        if value is not None:
            by_time.setdefault(getattr(row, f"w_{c}"), {})[c] = value
    for c in _ELEMENTS:
        value, times = getattr(row, c), getattr(row, f"w_{c}")
        if not value:
            continue
        mapping = hasattr(value, "items")
        items = list(value.items()) if mapping else list(value)  # in the node's order, as the write times are
        for item, at in zip(items, times, strict=True):
            cells = by_time.setdefault(at, {})
            if mapping:
                cells.setdefault(c, {})[item[0]] = item[1]
            else:
                cells.setdefault(c, set()).add(item)
    key = {"team_id": team_id, "channel_id": channel_id, "day": part, "ts": row.ts}
    return [(COPY_CELLS, {**key, "wt": at, **cells}) for at, cells in sorted(by_time.items())]


def relayout_day(db: Database, team_id: str, channel_id: str, day: int, *, dry_run: bool = False
                 ) -> dict[str, int]:
    """One channel-day of a keyspace written before cql/0190: its raw events copied into slack_message_raw (at
    their write times), and, when its own partition holds more than the hot threshold and the day is not
    split, the day split from its first hour: each row copied into its hour bucket (every cell at its own write
    time), the buckets listed, the split recorded (LWT), then the old partition dropped (one partition deletion
    that no read lists). Only days that ended a day ago are split: a live write of the day meanwhile would be
    left behind. Idempotent: a second run copies the same cells again. Returns what it did."""
    done = {"rows": 0, "raw": 0, "copied": 0, "split": 0}
    rows = db.execute(SELECT_OLD_RAW, (team_id, channel_id, day), fetch_size=1000)
    raw: list[Write] = []
    for r in rows:
        done["rows"] += 1
        if r.raw:
            raw.append((INSERT_RAW, (team_id, channel_id, r.ts // US_PER_HOUR, r.ts, r.raw, r.raw_written)))
    done["raw"] = len(raw)
    state = db.execute(SELECT_DAY_STATE, (team_id, channel_id, day)).one()
    ended = (day + 2) * US_PER_DAY <= _now_us(db)
    split = done["rows"] > _hot_threshold(db) and ended and (state is None or state.split_us is None)
    if dry_run:
        done["split"] = int(split)
        return done
    db.execute_many(raw)
    if split:
        copies: list[Write] = []
        hours: set[int] = set()
        for r in db.execute(SELECT_WHOLE_ROWS, (team_id, channel_id, day), fetch_size=500):
            hour = (r.ts - day * US_PER_DAY) // US_PER_HOUR
            hours.add(hour)
            copies.extend(_copy_writes(team_id, channel_id, bucket_part(day, hour), r))
            done["copied"] += 1
            if len(copies) >= 5000:
                db.execute_many(copies)
                copies.clear()
        db.execute_many(copies)
        if hours:
            db.execute(LIST_BUCKET, (hours, team_id, channel_id, day))
        applied = db.execute(SPLIT_DAY, (day * US_PER_DAY, team_id, channel_id, day)).one()[0]
        if applied:  # else another process split the day meanwhile: its own partition stays where reads find it
            db.execute(DROP_OLD_DAY, (_now_us(db), team_id, channel_id, day))
            done["split"] = 1
    db.execute(MARK_RELAID, (_now_us(db), team_id, channel_id, day))
    return done


def relayout_channel(db: Database, team_id: str, channel_id: str, *, dry_run: bool = False,
                     progress: Callable[[dict[str, int]], None] | None = None) -> dict[str, int]:
    """`relayout_day` for every listed day of a channel not yet done (resumable: a done day is marked)."""
    total = {"days": 0, "rows": 0, "raw": 0, "copied": 0, "split": 0}
    lo = 0
    while True:
        listed = list(db.execute(SELECT_RELAYOUT_DAYS, (team_id, channel_id, lo, _DAYS_PER_REQUEST)))
        for r in listed:
            if r.relaid_at is not None:
                continue
            done = relayout_day(db, team_id, channel_id, r.day, dry_run=dry_run)
            total["days"] += 1
            for k, v in done.items():
                total[k] += v
            if progress is not None:
                progress(done)
        if len(listed) < _DAYS_PER_REQUEST:
            return total
        lo = listed[-1].day + 1


# -- retention and erasure (api/retention/): what an expiring channel-day holds, and the deletes of its rows ----

# Oldest first: a run resumes where the last one stopped (a day leaves the listing last).
SELECT_DAYS_BEFORE = Statement(
    "SELECT day, split_us, buckets FROM slack_channel_days WHERE team_id = ? AND channel_id = ? AND day >= ? "
    "AND day < ? ORDER BY day ASC LIMIT ?", name="SELECT slack_channel_days (before)")
# Everything a channel-day's rows say about where their copies are: texts (search terms), edits (versions),
# threads, files, reactions and their times (activity), authors.
SELECT_EXPIRING = Statement(
    "SELECT ts, user_id, subtype, thread_ts, text, original_text, edited_ts, edit_times, deleted_ts, files, "
    "files_stored, reactions, writetime(reactions) AS reaction_times, content, "
    "collection_count(replies) AS reply_count FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ?",
    name="SELECT slack_messages (expiring)")
COUNT_PART = Statement(
    "SELECT COUNT(*) AS n FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ?",
    name="COUNT slack_messages")
DELETE_PART = Statement("DELETE FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ?",
                        name="DELETE slack_messages (partition)")
DELETE_VERSIONS = Statement("DELETE FROM slack_message_versions WHERE team_id = ? AND channel_id = ? AND ts = ?",
                            name="DELETE slack_message_versions (message)")
DELETE_THREAD = Statement(
    "DELETE FROM slack_thread_replies WHERE team_id = ? AND channel_id = ? AND thread_ts = ?",
    name="DELETE slack_thread_replies (thread)")
DELETE_RAW_HOUR = Statement("DELETE FROM slack_message_raw WHERE team_id = ? AND channel_id = ? AND hour = ?",
                            name="DELETE slack_message_raw (hour)")
# Runs of consecutive days leave the listing as one range tombstone each (a day kept by a hold cuts a run).
UNLIST_DAYS = Statement(
    "DELETE FROM slack_channel_days WHERE team_id = ? AND channel_id = ? AND day >= ? AND day <= ?",
    name="DELETE slack_channel_days (range)")


def days_before(db: Database, team_id: str, channel_id: str, from_day: int, before_day: int, limit: int
                ) -> list[Any]:
    """The oldest `limit` listed days of a channel in [from_day, before_day) (day, split_us, buckets)."""
    return list(db.execute(SELECT_DAYS_BEFORE, (team_id, channel_id, from_day, before_day, limit)))


def parts_of_listed(listed: Any) -> list[int]:
    """Every slack_messages partition of a listed day (its own and its hour buckets)."""
    return day_parts(listed.day, listed.split_us, listed.buckets)


def expiring_rows(db: Database, team_id: str, channel_id: str, parts: Iterable[int], *,
                  in_flight: int | None = None) -> list[Any]:
    """The rows of these partitions a retention run reads before deleting them; `in_flight`: at most that many
    partitions read at once."""
    reads = db.execute_windows(SELECT_EXPIRING, [(team_id, channel_id, part) for part in parts], in_flight)
    return [row for result in reads for row in result]


def count_rows(db: Database, team_id: str, channel_id: str, parts: Iterable[int]) -> int:
    """Messages in these partitions, counted by the node (a dry run)."""
    futures = [db.execute_async(COUNT_PART, (team_id, channel_id, part)) for part in parts]
    return sum(future.result().one().n for future in futures)


def version_texts(db: Database, team_id: str, channel_id: str, ts: int) -> list[str]:
    return [r.text for r in db.execute(SELECT_VERSIONS, (team_id, channel_id, ts)) if r.text]


def expire_day_writes(team_id: str, channel_id: str, parts: Iterable[int], rows: Iterable[Any]) -> list[Write]:
    """The deletes of a channel-day's copies this module owns, its message partitions last: each message's text
    versions, the reply lists of its threads, its raw events (the hours holding them), then the partitions."""
    writes: list[Write] = []
    raw_hours = set()
    for row in rows:
        if row.edited_ts is not None or row.edit_times:
            writes.append((DELETE_VERSIONS, (team_id, channel_id, row.ts)))
        if row.reply_count and (row.thread_ts is None or row.thread_ts == row.ts):
            writes.append((DELETE_THREAD, (team_id, channel_id, row.ts)))
        raw_hours.add(row.ts // US_PER_HOUR)
    writes.extend((DELETE_RAW_HOUR, (team_id, channel_id, hour)) for hour in sorted(raw_hours))
    writes.extend((DELETE_PART, (team_id, channel_id, part)) for part in parts)
    return writes


def unlist_days_write(team_id: str, channel_id: str, first_day: int, last_day: int) -> Write:
    return (UNLIST_DAYS, (team_id, channel_id, first_day, last_day))


# -- erasure of a person (api/erasure/slack.py): their messages go, others' stop naming them -------------------

# Slack's own placeholder for a deleted thread head that others replied to (what its exports show).
TOMBSTONE_USER = "USLACKBOT"
TOMBSTONE_TEXT = "This message was deleted."
SELECT_ERASING = Statement(
    "SELECT ts, user_id, subtype, thread_ts, text, original_text, edited_ts, edit_times, files, files_stored, "
    "reactions, writetime(reactions) AS reaction_times, content, mentions, parent_user_id, replies "
    "FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ?", name="SELECT slack_messages (erasing)")
# Every write of an erasure carries its own time, later than any event's: a redelivered event (written at its
# event time) cannot bring a deleted cell back.
DELETE_MESSAGE = Statement(
    "DELETE FROM slack_messages USING TIMESTAMP ? WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?",
    name="DELETE slack_messages (one)")
CLEAR_HEAD = Statement(
    "DELETE original_text, files, files_stored, files_fetch_failed, files_fetch_error, reactions, content, "
    "mentions, word_count, edited_ts, edit_times, username, bot_id, raw FROM slack_messages USING TIMESTAMP ? "
    "WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?", name="CLEAR slack_messages (erased head)")
TOMBSTONE_HEAD = Statement(
    f"UPDATE slack_messages USING TIMESTAMP ? SET user_id = '{TOMBSTONE_USER}', text = '{TOMBSTONE_TEXT}', "
    "subtype = 'tombstone', deleted = true WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?",
    name="TOMBSTONE slack_messages")
REWRITE_MESSAGE = Statement(
    "UPDATE slack_messages USING TIMESTAMP :wt SET text = :text, original_text = :original_text, content = :content, "
    "mentions = :mentions, parent_user_id = :parent_user_id WHERE team_id = :team_id AND channel_id = :channel_id "
    "AND day = :day AND ts = :ts", name="REWRITE slack_messages")
CLEAR_RAW_CELL = Statement(
    "DELETE raw FROM slack_messages USING TIMESTAMP ? WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?",
    name="DELETE slack_messages (raw cell)")
DELETE_RAW = Statement(
    "DELETE FROM slack_message_raw USING TIMESTAMP ? WHERE team_id = ? AND channel_id = ? AND hour = ? AND ts = ?",
    name="DELETE slack_message_raw (one)")
DELETE_THREAD_REPLY = Statement(
    "DELETE FROM slack_thread_replies USING TIMESTAMP ? WHERE team_id = ? AND channel_id = ? AND thread_ts = ? "
    "AND ts = ?", name="DELETE slack_thread_replies (one)")
DELETE_VERSIONS_AT = Statement(
    "DELETE FROM slack_message_versions USING TIMESTAMP ? WHERE team_id = ? AND channel_id = ? AND ts = ?",
    name="DELETE slack_message_versions (erased)")
SELECT_THREADS = Statement(
    "SELECT thread_ts, ts FROM slack_thread_replies WHERE team_id = ? AND channel_id = ? AND thread_ts IN ?",
    name="SELECT slack_thread_replies (erasing)", many_partitions=True)


# The proof of an erasure reads what the ledger recorded of a channel by lists of partitions (never batched:
# each is one read of many partitions, Statement.many_partitions), not by a read per day or per message.
_IN_LIST = 200
SELECT_ERASING_PARTS = Statement(
    SELECT_ERASING.cql.replace("AND day = ?", "AND day IN ?"), name="SELECT slack_messages (erasing, parts)",
    many_partitions=True)
SELECT_VERSIONS_OF = Statement(
    "SELECT ts, text FROM slack_message_versions WHERE team_id = ? AND channel_id = ? AND ts IN ? "
    "PER PARTITION LIMIT 1000", name="SELECT slack_message_versions (messages)", many_partitions=True)
SELECT_RAW_HOURS = Statement(
    "SELECT ts, raw FROM slack_message_raw WHERE team_id = ? AND channel_id = ? AND hour IN ?",
    name="SELECT slack_message_raw (hours)", many_partitions=True)


def _in_lists(db: Database, statement: Statement, team_id: str, channel_id: str, keys: Iterable[int]
              ) -> Iterator[Any]:
    """Every row `statement` reads for `keys`, by lists of _IN_LIST keys sent side by side."""
    ordered = sorted(set(keys))
    futures = [db.execute_async(statement, (team_id, channel_id, ordered[i:i + _IN_LIST]))
               for i in range(0, len(ordered), _IN_LIST)]
    for future in futures:
        yield from future.result()


def erasing_rows_of_days(db: Database, team_id: str, channel_id: str, days: Iterable[int]) -> list[Any]:
    """Every row of a channel's `days` (each day's own partition and its hour buckets)."""
    wanted = sorted(set(days))
    listed = {row.day: row for row in _in_lists(db, SELECT_DAY_STATES, team_id, channel_id, wanted)}
    parts = [part for day in wanted for part in (
        day_parts(day, listed[day].split_us, listed[day].buckets) if day in listed else [day])]
    return list(_in_lists(db, SELECT_ERASING_PARTS, team_id, channel_id, parts))


def versions_of(db: Database, team_id: str, channel_id: str, ts_list: Iterable[int]) -> dict[int, list[str]]:
    """The kept version texts of each message in `ts_list` (messages without any are absent)."""
    found: dict[int, list[str]] = {}
    for row in _in_lists(db, SELECT_VERSIONS_OF, team_id, channel_id, ts_list):
        if row.text:
            found.setdefault(row.ts, []).append(row.text)
    return found


def raw_events_of(db: Database, team_id: str, channel_id: str, ts_list: Iterable[int]) -> dict[int, Any]:
    """The kept raw event of each message in `ts_list`, decoded (messages without one are absent)."""
    wanted = set(ts_list)
    return {row.ts: decompress_json(row.raw) for row in _in_lists(
        db, SELECT_RAW_HOURS, team_id, channel_id, {ts // US_PER_HOUR for ts in wanted})
        if row.ts in wanted and row.raw}


def erasing_rows(db: Database, team_id: str, channel_id: str, day: int) -> list[tuple[int, Any]]:
    """Every row of a channel-day, with the partition holding it (the day's own or an hour bucket)."""
    listed = db.execute(SELECT_DAY_STATES, (team_id, channel_id, [day])).one()
    parts = day_parts(day, listed.split_us, listed.buckets) if listed is not None else [day]
    futures = [(part, db.execute_async(SELECT_ERASING, (team_id, channel_id, part))) for part in parts]
    return [(part, row) for part, future in futures for row in future.result()]


def route(db: Database, team_id: str, channel_id: str, ts: int) -> int:
    """The slack_messages partition (day or hour bucket) holding message ts."""
    return _route(db, team_id, channel_id, ts)


def versions(db: Database, team_id: str, channel_id: str, ts: int) -> list[tuple[int, str]]:
    return [(r.version_ts, r.text) for r in db.execute(SELECT_VERSIONS, (team_id, channel_id, ts)) if r.text]


def thread_replies_of(db: Database, team_id: str, channel_id: str, thread_ts_list: Iterable[int]
                      ) -> set[tuple[int, int]]:
    """The (thread_ts, reply ts) pairs listed in the threads of `thread_ts_list`."""
    return {(row.thread_ts, row.ts) for row in _in_lists(db, SELECT_THREADS, team_id, channel_id, thread_ts_list)}


def erase_writes(team_id: str, channel_id: str, part: int, row: Any, *, at: int, keep_head: bool) -> list[Write]:
    """A person's own message gone: its versions, raw event, place in its thread, then the row itself, or, for a
    thread head others replied to (`keep_head`), Slack's tombstone in its place (the replies stay reachable)."""
    writes: list[Write] = [(DELETE_VERSIONS_AT, (at, team_id, channel_id, row.ts)),
                           (DELETE_RAW, (at, team_id, channel_id, row.ts // US_PER_HOUR, row.ts))]
    key = (team_id, channel_id, part, row.ts)
    if row.thread_ts is not None and row.thread_ts != row.ts:
        writes.append((DELETE_THREAD_REPLY, (at, team_id, channel_id, row.thread_ts, row.ts)))
    if keep_head:
        writes += [(CLEAR_HEAD, (at, *key)), (TOMBSTONE_HEAD, (at, *key))]
    else:
        writes.append((DELETE_MESSAGE, (at, *key)))
    return writes


def rewrite_writes(team_id: str, channel_id: str, part: int, ts: int, *, at: int, text: str | None,
                   original_text: str | None, content: dict[str, Any] | None, mentions: set[str] | None,
                   parent_user_id: str | None, version_texts: list[tuple[int, str]], raw: Any | None) -> list[Write]:
    """Another person's message that named the erased one, rewritten (absent values are left as they are)."""
    writes: list[Write] = [(REWRITE_MESSAGE, without_none({
        "wt": at, "team_id": team_id, "channel_id": channel_id, "day": part, "ts": ts, "text": text,
        "original_text": original_text, "content": encode_json(content) if content else None,
        "mentions": mentions, "parent_user_id": parent_user_id})),
        (CLEAR_RAW_CELL, (at, team_id, channel_id, part, ts))]
    writes += [(INSERT_VERSION, (team_id, channel_id, ts, version_ts, version_text, at))
               for version_ts, version_text in version_texts]
    if raw is not None:
        writes.append((INSERT_RAW, (team_id, channel_id, ts // US_PER_HOUR, ts, compress_json(raw), at)))
    return writes
