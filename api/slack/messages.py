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
import itertools
import json
from collections.abc import Iterable
from typing import Any

from cassandra import ConsistencyLevel

from api.caches import Cache
from api.db import Database, Params, Statement, without_none
from api.slack import mrkdwn
from api.slack.codec import compress_json, decode_json, encode_json
from api.slack.content import with_content_text
from api.slack.timeutil import US_PER_DAY, day_of, us_to_ts

TABLES = frozenset({"slack_messages", "slack_channel_days", "slack_thread_replies", "slack_message_versions"})

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
    "edited_ts = :edited_ts, original_text = :original_text, raw = :raw, word_count = :word_count, "
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

SELECT_DAYS_DESC = Statement(
    "SELECT day FROM slack_channel_days WHERE team_id = ? AND channel_id = ? AND day <= ? AND day >= ? LIMIT ?")
SELECT_DAYS_ASC = Statement(
    "SELECT day FROM slack_channel_days WHERE team_id = ? AND channel_id = ? AND day <= ? AND day >= ? "
    "ORDER BY day ASC LIMIT ?")
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


def _key(team_id: str, channel_id: str, ts: int) -> dict[str, Any]:
    return {"team_id": team_id, "channel_id": channel_id, "day": day_of(ts), "ts": ts}


# -- writes -----------------------------------------------------------------------------------------------

def message_writes(db: Database, msg: NewMessage, *, write_ts: int, edited_ts: int | None = None,
                   versions: Iterable[tuple[int, str]] = (), original: bool = False, raw: Any = None
                   ) -> list[Write]:
    """The rows of a new message (write_ts = its ts, original=True) or of its edited form (write_ts = edit
    time): the message row, its day in the listing, its place in the thread, the text versions.

    Each is one whole-row write, so no reader ever sees half a message. The caller sends them in one round
    (ingest.store_message) and calls `note_stored` once they are all written.
    """
    key = _key(msg.team_id, msg.channel_id, msg.ts)
    writes: list[Write] = [(UPSERT_MESSAGE, without_none({
        **key, "wt": write_ts, "msg_ts": msg.msg_ts, "user_id": msg.user, "text": msg.text,
        "original_text": msg.text if original else None,
        "subtype": msg.subtype, "bot_id": msg.bot_id, "username": msg.username, "thread_ts": msg.thread_ts,
        "files": json.dumps(msg.files, separators=(",", ":")) if msg.files else None,
        "edited_ts": edited_ts, "raw": compress_json(raw) if raw is not None else None,
        "word_count": mrkdwn.word_count(msg.text) if msg.text is not None else None,
        "mentions": mrkdwn.mentioned_users(msg.text, msg.user) if msg.text is not None else None,
        "parent_user_id": msg.parent_user_id,
        # An edit always writes it (b"" = nothing more): the edited message replaces the content whole.
        "content": encode_json(msg.content) if msg.content else (None if original else b""),
    }))]
    if not day_listed(db, msg):
        writes.append((INSERT_DAY, (msg.team_id, msg.channel_id, key["day"])))
    if msg.thread_ts is not None and msg.thread_ts != msg.ts:
        writes.append((INSERT_REPLY, without_none({
            "team_id": msg.team_id, "channel_id": msg.channel_id, "thread_ts": msg.thread_ts, "ts": msg.ts,
            "user_id": msg.user})))
        # At the reply's ts whatever the write is (post or edit): a delete of the reply, later, always wins.
        writes.append((ADD_REPLY_TO_HEAD, (msg.ts, msg.ts, msg.user or msg.bot_id or "", msg.team_id,
                                           msg.channel_id, day_of(msg.thread_ts), msg.thread_ts)))
    for version_ts, text in versions:
        writes.append((INSERT_VERSION, (msg.team_id, msg.channel_id, msg.ts, version_ts, text, version_ts)))
        if version_ts > msg.ts:  # an edit (the original version is at the message's ts)
            writes.append((ADD_EDIT_TIME, (version_ts, {version_ts}, msg.team_id, msg.channel_id, key["day"],
                                           msg.ts)))
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
    """The writes of `message_writes` all succeeded: the message's day is listed from now on."""
    _known_days(db).set((msg.team_id, msg.channel_id, day_of(msg.ts)), None)


def mark_deleted_writes(team_id: str, channel_id: str, ts: int, *, deleted_at: int, thread_ts: int | None = None
                        ) -> list[Write]:
    """The deleted flag at the delete time; a reply (`thread_ts` known) also leaves its head's replies."""
    writes: list[Write] = [(MARK_DELETED, {**_key(team_id, channel_id, ts), "wt": deleted_at,
                                           "deleted_ts": deleted_at})]
    if thread_ts is not None and thread_ts != ts:
        writes.append(reply_removed_write(team_id, channel_id, thread_ts, ts, at=deleted_at))
    return writes


def mark_deleted(db: Database, team_id: str, channel_id: str, ts: int, *, deleted_at: int,
                 thread_ts: int | None = None) -> None:
    db.execute_many(mark_deleted_writes(team_id, channel_id, ts, deleted_at=deleted_at, thread_ts=thread_ts))


def reply_removed_write(team_id: str, channel_id: str, thread_ts: int, ts: int, *, at: int) -> Write:
    return (REMOVE_REPLY_FROM_HEAD, (ts, at, team_id, channel_id, day_of(thread_ts), thread_ts))


def reactions_write(team_id: str, channel_id: str, ts: int, elements: Iterable[tuple[str, str]], *, at: int,
                    added: bool = True) -> Write:
    """(emoji, user) elements added (or removed) at one time: a reaction event, or what history observed at
    `at`."""
    return (ADD_REACTION if added else REMOVE_REACTION,
            {**_key(team_id, channel_id, ts), "wt": at, "r": set(elements)})


def tombstone_writes(db: Database, msg: NewMessage) -> list[Write]:
    """A tombstone as history shows it (a deleted thread head kept for its replies): the placeholder's row,
    written 1 µs before the message's ts so that the message itself, when archived, always wins every cell;
    and its day listed. The caller marks it deleted (`deleted_seen_writes`)."""
    key = _key(msg.team_id, msg.channel_id, msg.ts)
    writes: list[Write] = [(UPSERT_MESSAGE, without_none({
        **key, "wt": msg.ts - 1, "msg_ts": msg.msg_ts, "user_id": msg.user, "text": msg.text,
        "subtype": msg.subtype, "thread_ts": msg.thread_ts,
        "content": encode_json(msg.content) if msg.content else None}))]
    if not day_listed(db, msg):
        writes.append((INSERT_DAY, (msg.team_id, msg.channel_id, key["day"])))
    return writes


def deleted_seen_writes(team_id: str, channel_id: str, ts: int, *, at: int, thread_ts: int | None = None
                        ) -> list[Write]:
    """History found the message gone (or a tombstone): the flag, and a reply leaves its head's replies."""
    writes = [(MARK_DELETED_SEEN, (at, team_id, channel_id, day_of(ts), ts))]
    if thread_ts is not None and thread_ts != ts:
        writes.append(reply_removed_write(team_id, channel_id, thread_ts, ts, at=at))
    return writes


# -- the file worker's outcome on the message ----------------------------------------------------------------

def file_finished(db: Database, team_id: str, channel_id: str, ts: int, file_id: str) -> bool:
    """Whether the message records an outcome for `file_id`: stored, or failed for good. A file enqueued again
    (an edit re-sends the message's files, a redelivered event) is then not fetched again."""
    return files_finished(db, [(team_id, channel_id, ts, file_id)])[0]


def files_finished(db: Database, files: list[tuple[str, str, int, str]]) -> list[bool]:
    """`file_finished` for many (team, channel, ts, file_id) at once: one concurrent round of reads."""
    futures = [db.execute_async(SELECT_FILES_STORED, (team, channel, day_of(ts), ts))
               for team, channel, ts, _ in files]
    out = []
    for (_, _, _, file_id), future in zip(files, futures, strict=True):
        row = future.result().one()
        out.append(row is not None and any(file_id in (m or {}) for m in (row.files_stored, row.files_fetch_error)))
    return out


def record_file_stored(db: Database, team_id: str, channel_id: str, ts: int, file_id: str, uri: str) -> None:
    db.execute(RECORD_FILE_STORED, (file_id, uri, team_id, channel_id, day_of(ts), ts))


def record_file_failed(db: Database, team_id: str, channel_id: str, ts: int, file_id: str, error: str) -> None:
    db.execute(RECORD_FILE_FAILED, (file_id, error, team_id, channel_id, day_of(ts), ts))


# -- reads ------------------------------------------------------------------------------------------------

def _row(db: Database, team_id: str, channels: list[str], ts: int) -> Any | None:
    """The row of message `ts` in the first channel of the id chain that has it (new id, then older ids)."""
    for channel_id in channels:
        row = db.execute(SELECT_ONE, (team_id, channel_id, day_of(ts), ts)).one()
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
    of that range (one partition read per day, concurrently). History bounds the range (its refetch window)."""
    days: list[int] = []
    hi = day_of(max(upper - 1, 0))
    while True:
        listed = [r.day for r in db.execute(SELECT_DAYS_DESC, (team_id, channel_id, hi, day_of(lower),
                                                                _DAYS_PER_REQUEST))]
        days.extend(listed)
        if len(listed) < _DAYS_PER_REQUEST:
            break
        hi = listed[-1] - 1
    futures = [db.execute_async(SELECT_STORED_RANGE, (team_id, channel_id, day, lower, upper)) for day in days]
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


def report_rows(db: Database, team_id: str, channel_days: Iterable[tuple[str, list[int]]], *,
                in_flight: int = 32) -> Iterable[tuple[str, Any]]:
    """(channel_id, row) for every row of the given channels' listed days (a report's bounded set: at most 62
    days a channel), one `day IN` request per channel, `in_flight` channels at a time; rows of one channel come
    together, channels in the order given."""
    pending: collections.deque[tuple[str, Any]] = collections.deque()
    source = iter(channel_days)

    def start(channel_id: str, days: list[int]) -> None:
        pending.append((channel_id, db.execute_async(SELECT_REPORT_DAYS, (team_id, channel_id, days))))

    for channel_id, days in itertools.islice(source, in_flight):
        start(channel_id, days)
    while pending:
        channel_id, future = pending.popleft()
        result = future.result()
        nxt = next(source, None)
        if nxt is not None:
            start(*nxt)
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
    for r in db.execute(SELECT_TEXT_DAY, (team_id, channel_id, day)):
        if r.msg_ts is None:
            continue
        if r.text is not None and r.word_count is None:
            writes.append((SET_ANALYTICS, (r.text_written, mrkdwn.word_count(r.text),
                                           mrkdwn.mentioned_users(r.text, r.user_id), team_id, channel_id, day, r.ts)))
        if r.thread_ts is not None and r.thread_ts != r.ts and not r.deleted:
            writes.append((ADD_REPLY_TO_HEAD, (r.ts, r.ts, r.user_id or r.bot_id or "", team_id, channel_id,
                                               day_of(r.thread_ts), r.thread_ts)))
    return writes


def texts_of_day(db: Database, team_id: str, channel_id: str, day: int) -> list[Any]:
    """(ts, msg_ts, user_id, text, ...) of every row of one channel-day (indexing archived messages for search)."""
    return list(db.execute(SELECT_TEXT_DAY, (team_id, channel_id, day)))


def start_days_between(db: Database, team_id: str, channel_id: str, first_day: int, last_day: int) -> Any:
    """Start reading the listed days of a channel in [first_day, last_day] (a future; a report's window)."""
    return db.execute_async(SELECT_DAYS_ASC, (team_id, channel_id, last_day, first_day, last_day - first_day + 1))


def start_days_read(db: Database, team_id: str, channel_id: str, days: list[int]) -> Any:
    """Start reading whole days of a channel (a future; rows in no particular order: the caller sorts)."""
    return db.execute_async(SELECT_DAYS_IN, (team_id, channel_id, days))


# Bounds on one timeline request: days listed per channel id, rows read in all. A page stops early (with a
# cursor) rather than reading without bound through days full of deleted messages.
_DAYS_PER_REQUEST = 64
_ROW_BUDGET = 2000
_FIRST_GROUP, _LAST_GROUP = 4, 32  # days per read of a timeline page: the first read's, and at most
_MAX_ROWS_PER_READ = 500
MIN_US, MAX_US = 0, 2**62


def start_day_listing(db: Database, team_id: str, channel_id: str, *, upper: int = MAX_US, lower: int = MIN_US,
                      ascending: bool = False) -> Any:
    """Start reading a channel's day listing (a future), so it overlaps other reads of the request."""
    stmt = SELECT_DAYS_ASC if ascending else SELECT_DAYS_DESC
    return db.execute_async(stmt, (team_id, channel_id, day_of(max(upper - 1, 0)), day_of(lower + 1),
                                   _DAYS_PER_REQUEST))


def timeline(db: Database, team_id: str, channels: list[str], *, limit: int, upper: int = MAX_US,
             lower: int = MIN_US, ascending: bool = False, include_deleted: bool = False,
             prefetched: dict[str, Any] | None = None) -> tuple[list[Message], int | None]:
    """Messages with lower < ts < upper, newest first (or oldest first), over the channel's id chain.

    Returns (page, next position): the exclusive ts bound of the next page, None when there is no more.
    Reads only the days listed in slack_channel_days, never empty buckets, and at most _ROW_BUDGET rows.
    """
    day_hi, day_lo = day_of(max(upper - 1, 0)), day_of(lower + 1)
    days_stmt = SELECT_DAYS_ASC if ascending else SELECT_DAYS_DESC
    group_stmt = SELECT_GROUP_ASC if ascending else SELECT_GROUP_DESC
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

    # The listed days are read in groups, each group in one statement (`day IN`, `channel_id IN`, ORDER BY ts:
    # the coordinator merges the partitions in order and returns only what the page lacks, plus one row to
    # know a next page exists). Groups grow 4, 8, 16, 32 days: a busy channel's page costs one read, a page
    # over 50 quiet days a few; the row budget bounds a stretch of deleted messages.
    page: list[Message] = []
    scanned = 0
    hi, lo = upper, lower
    first, size = 0, _FIRST_GROUP
    while first < len(days):
        group = days[first:first + size]
        ids = sorted({c for d in group for c in by_day[d]})
        want = min(limit + 1 - len(page), _MAX_ROWS_PER_READ)
        rows = db.execute(group_stmt, (team_id, ids, group, hi, lo, want)).all()
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
    page = [v for m in map(Message.from_row, rows) if m is not None
            and (v := m.visible(include_deleted)) is not None]
    return page, (ordered[-1][0] if more and ordered else None)


def start_activity_day(db: Database, team_id: str, channel_id: str, day: int) -> Any:
    """The rows of one channel-day partition as activity needs them (SELECT_ACTIVITY)."""
    return db.execute_async(SELECT_ACTIVITY, (team_id, channel_id, day))


def start_candidates(db: Database, team_id: str, channel_id: str, day: int, ts_list: list[int]) -> Any:
    """Future of the rows of some messages of one channel-day (search confirmation, reply counts)."""
    return db.execute_async(SELECT_CANDIDATES, (team_id, channel_id, day, ts_list))


def start_version_times(db: Database, team_id: str, channel_id: str, ts: int) -> Any:
    """When each text version of a message became current (the original at its ts, each edit at its time)."""
    return db.execute_async(SELECT_VERSION_TIMES, (team_id, channel_id, ts))
