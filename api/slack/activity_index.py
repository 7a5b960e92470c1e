"""Where a Slack user's activity lives: for each UTC day, the slack_messages partitions (channel, message day)
holding what the user did or had done to their messages that day (slack_user_touches, cql/0240), and the user's
own posts in a narrow index of their own (slack_user_posts, one partition per author and UTC hour).

A touch is a post (the author at their message's ts) or anything else (an edit, a delete, a reaction given or
received, history's reactions). A post's hour goes to `post_hours` and its row to slack_user_posts; the rebuild
counts those by slot (docs/activity.md §4.1) and reads message rows only for `other_hours`. History's reactions
(export import, Web API backfill: no reaction time) are indexed at their message's day, with the time history
wrote them at (`history_at`), which tells the rebuild to date them at their message.

The indexes of before cql/0240 (slack_user_activity_hours: hours without the split; slack_user_activity: no
hours) are read only: a UTC day either names is read the old way, all events from the message rows.

Rows are idempotent (set additions, upserts at the message's write time); this process remembers the touches it
wrote (after they were written), so a busy user in a busy channel costs one touch write per channel and day.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import date

from cassandra.cluster import ResponseFuture

from api.activity import events as ev
from api.caches import Cache
from api.db import Database, Params, Statement, without_none
from api.slack.timeutil import day_of

TABLES = frozenset({"slack_user_touches", "slack_user_posts", "slack_user_activity", "slack_user_activity_hours"})

# Written: the UTC hour of the message day holding the message concerned, added to the row's post or other
# hours; the UPDATE makes the row when it is new, and set additions leave no tombstone. History's reactions carry
# no time: the row of the message's day also names the times history wrote them at in that partition.
PUT_POST_TOUCH = Statement(
    "UPDATE slack_user_touches SET post_hours = post_hours + ? WHERE team_id = ? AND user_id = ? AND year = ? "
    "AND day = ? AND channel_id = ? AND msg_day = ?")
PUT_TOUCH = Statement(
    "UPDATE slack_user_touches SET other_hours = other_hours + ? WHERE team_id = ? AND user_id = ? AND year = ? "
    "AND day = ? AND channel_id = ? AND msg_day = ?")
PUT_HISTORY_TOUCH = Statement(
    "UPDATE slack_user_touches SET history_at = history_at + ?, other_hours = other_hours + ? WHERE team_id = ? "
    "AND user_id = ? AND year = ? AND day = ? AND channel_id = ? AND msg_day = ?")
SELECT_SOURCES = Statement(
    "SELECT day, channel_id, msg_day, history_at, post_hours, other_hours FROM slack_user_touches WHERE team_id = ? "
    "AND user_id = ? AND year = ? AND day >= ? AND day <= ?")
SELECT_LATEST = Statement(
    "SELECT day, channel_id FROM slack_user_touches WHERE team_id = ? AND user_id = ? AND year = ? "
    "ORDER BY day DESC LIMIT ?", name="SELECT slack_user_touches (latest)")
# Read only: the rows written before cql/0240 (with hours, not split) and before cql/0220 (no hours).
SELECT_HOURS_SOURCES = Statement(
    "SELECT day, channel_id, msg_day, history_at, msg_hours FROM slack_user_activity_hours WHERE team_id = ? "
    "AND user_id = ? AND year = ? AND day >= ? AND day <= ?")
SELECT_HOURS_LATEST = Statement(
    "SELECT day, channel_id FROM slack_user_activity_hours WHERE team_id = ? AND user_id = ? AND year = ? "
    "ORDER BY day DESC LIMIT ?", name="SELECT slack_user_activity_hours (latest)")
SELECT_OLD_SOURCES = Statement(
    "SELECT day, channel_id, msg_day, history_at FROM slack_user_activity WHERE team_id = ? AND user_id = ? "
    "AND year = ? AND day >= ? AND day <= ?")
SELECT_OLD_LATEST = Statement(
    "SELECT day, channel_id FROM slack_user_activity WHERE team_id = ? AND user_id = ? AND year = ? "
    "ORDER BY day DESC LIMIT ?", name="SELECT slack_user_activity (latest)")
_SOURCE_READS = (SELECT_SOURCES, SELECT_HOURS_SOURCES, SELECT_OLD_SOURCES)
_LATEST_READS = (SELECT_LATEST, SELECT_HOURS_LATEST, SELECT_OLD_LATEST)

# The author's posts: upserted at the message's write time (an edit's words replace the post's; a late
# redelivery of the post does not undo them).
PUT_POST = Statement(
    "UPDATE slack_user_posts USING TIMESTAMP :wt SET thread_ts = :thread_ts, words = :words, files = :files, "
    "is_file = :is_file, subtype = :subtype WHERE team_id = :team_id AND user_id = :user_id AND hour = :hour "
    "AND slot = :slot AND base_kind = :base_kind AND channel_id = :channel_id AND ts = :ts",
    name="UPSERT slack_user_posts")
# The node counts an hour's posts by slot, kind and channel: a few rows come back whatever the hour holds.
COUNT_POSTS = Statement(
    "SELECT slot, base_kind, channel_id, COUNT(*) AS n, SUM(is_file) AS file_n, MIN(ts) AS first_ts "
    "FROM slack_user_posts WHERE team_id = ? AND user_id = ? AND hour = ? GROUP BY slot, base_kind, channel_id",
    name="COUNT slack_user_posts")
_POST_COLUMNS = "slot, base_kind, channel_id, ts, thread_ts, words, files, is_file, subtype"
SELECT_HOUR_POSTS = Statement(
    f"SELECT {_POST_COLUMNS} FROM slack_user_posts WHERE team_id = ? AND user_id = ? AND hour = ?",
    name="SELECT slack_user_posts (hour)")
SELECT_FIRST_POSTS = Statement(
    f"SELECT {_POST_COLUMNS} FROM slack_user_posts WHERE team_id = ? AND user_id = ? AND hour = ? AND slot = ? "
    "AND base_kind = ? AND channel_id = ? LIMIT ?", name="SELECT slack_user_posts (first of a slot)")
MAX_YEARS_BACK = 40  # years `latest_day` looks through (one small read each, concurrently)
LATEST_SCAN = 500  # newest rows of a year looked through for one outside hidden channels

# (team, user, UTC day, channel, message day, message's UTC hour, is the user's own post), and for a reaction
# history showed, the time it was written at
Touch = tuple[str, str, int, str, int, int, bool] | tuple[str, str, int, str, int, int, bool, int]
HOUR_US = 3_600_000_000
SLOT_US = 900_000_000

# Index rows this process has written (insert-only rows: forgetting one only costs a redundant write).
_WRITTEN = "slack.activity_touches_written"
_WRITTEN_MAX = 40_000  # ~10 MB (7-tuple keys): the current channel-days of the import fit


def _written(db: Database) -> Cache:
    return db.caches.lru(_WRITTEN, maxsize=_WRITTEN_MAX)


def year_of_day(day: int) -> int:
    """The UTC year of a day number (days since 1970-01-01)."""
    return date.fromordinal(_EPOCH_ORDINAL + day).year


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


def touch(team_id: str, user_id: str, at: int, channel_id: str, msg_ts: int, history_at: int | None = None, *,
          post: bool = False) -> Touch:
    """`user_id` acted (or was acted upon) at `at` (µs) on the message `msg_ts` of `channel_id`; `history_at`:
    a reaction history showed, written at that time and dated at its message (`at` is then the message's ts);
    `post`: the user is the message's author and `at` its ts (the post itself)."""
    hour = msg_ts // HOUR_US % 24
    if history_at is None:
        return (team_id, user_id, day_of(at), channel_id, day_of(msg_ts), hour, post)
    return (team_id, user_id, day_of(at), channel_id, day_of(msg_ts), hour, False, history_at)


def touch_writes(db: Database, touches: Iterable[Touch]) -> tuple[list[tuple[Statement, Params]], list[tuple]]:
    """The index rows of `touches` this process has not written yet, and the keys to pass to `note_written`
    once they are written."""
    keys = _written(db).missing(dict.fromkeys(touches))
    writes: list[tuple[Statement, Params]] = []
    for team_id, user_id, day, channel_id, msg_day, hour, post, *history_at in keys:
        where = (team_id, user_id, year_of_day(day), day, channel_id, msg_day)
        if history_at:
            writes.append((PUT_HISTORY_TOUCH, ({history_at[0]}, {hour}, *where)))
        else:
            writes.append((PUT_POST_TOUCH if post else PUT_TOUCH, ({hour}, *where)))
    return writes, keys


def note_written(db: Database, keys: Iterable[tuple]) -> None:
    _written(db).add_all(keys)


def post_write(team_id: str, user_id: str, channel_id: str, ts: int, *, base_kind: str, write_ts: int,
               thread_ts: int | None, words: int | None, files: int, subtype: str | None
               ) -> tuple[Statement, Params]:
    """The author's post in their posts index (written with every write of the message: an edit's words too)."""
    return (PUT_POST, without_none({
        "wt": write_ts, "team_id": team_id, "user_id": user_id, "hour": ts // HOUR_US, "slot": ts // SLOT_US,
        "base_kind": base_kind, "channel_id": channel_id, "ts": ts, "thread_ts": thread_ts, "words": words,
        "files": files, "is_file": 1 if files else 0, "subtype": subtype}))


def start_sources(db: Database, team_id: str, user_id: str, first_day: int, last_day: int
                  ) -> list[tuple[bool, ResponseFuture]]:
    """Reads of the user's index rows for UTC days [first_day, last_day]: one per UTC year touched and table,
    each with whether it reads an index of before cql/0240."""
    futures = []
    for year in range(year_of_day(first_day), year_of_day(last_day) + 1):
        for statement in _SOURCE_READS:
            futures.append((statement is not SELECT_SOURCES,
                            db.execute_async(statement, (team_id, user_id, year, first_day, last_day))))
    return futures


def latest_day(db: Database, team_id: str, user_id: str, first_year: int, last_year: int, *,
               hidden_channels: frozenset[str] = frozenset()) -> int | None:
    """The newest UTC day (days since 1970-01-01) in [first_year, last_year] on which the user acted or was acted
    upon outside `hidden_channels`, else None. One read per UTC year and index (its partition's newest row; the
    newest LATEST_SCAN rows when channels are hidden), at most MAX_YEARS_BACK years, in flight together."""
    years = range(last_year, max(first_year, last_year - MAX_YEARS_BACK + 1) - 1, -1)
    limit = LATEST_SCAN if hidden_channels else 1
    futures = [[db.execute_async(statement, (team_id, user_id, year, limit)) for statement in _LATEST_READS]
               for year in years]
    for reads in futures:
        days = [row.day for future in reads for row in future.result() if row.channel_id not in hidden_channels]
        if days:
            return max(days)
    return None


@dataclasses.dataclass
class Source:
    """A channel-day the index names: the times history wrote reactions at there (see `touch`), the UTC hours
    holding the messages concerned (None: a row written before cql/0220, the whole day is read), and the hours
    holding the user's own posts (read from slack_user_posts unless the day is read the old way)."""

    history_at: set[int] = dataclasses.field(default_factory=set)
    hours: set[int] | None = dataclasses.field(default_factory=set)
    post_hours: set[int] = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class Sources:
    """One user's index rows of a range of UTC days: the channel-days they name, and the UTC days an index of
    before cql/0240 names (read the old way: the user's posts come from the message rows too)."""

    by_partition: dict[tuple[str, int], Source]
    old_days: set[int]


def sources_from(futures: list[tuple[bool, ResponseFuture]]) -> Sources:
    """The (channel, message day) partitions the index rows name, merged over the rows (of every table) naming
    each."""
    found: dict[tuple[str, int], Source] = {}
    old_days: set[int] = set()
    for old, future in futures:
        for row in future.result():
            source = found.setdefault((row.channel_id, row.msg_day), Source())
            if row.history_at:
                source.history_at.update(row.history_at)
            if old:
                old_days.add(row.day)
                hours = getattr(row, "msg_hours", None)
            else:
                hours = set(row.other_hours or ())
                source.post_hours.update(row.post_hours or ())
            if hours is None:
                source.hours = None  # a row of slack_user_activity (before cql/0220): its hours are not known
            elif source.hours is not None:
                source.hours.update(hours)
    return Sources(found, old_days)


def start_post_counts(db: Database, team_id: str, user_id: str, hour: int) -> ResponseFuture:
    """The user's posts of one UTC hour (hours since 1970) counted by the node: (slot, base_kind, channel_id, n,
    file_n, first_ts) rows."""
    return db.execute_async(COUNT_POSTS, (team_id, user_id, hour))


def start_hour_posts(db: Database, team_id: str, user_id: str, hour: int) -> ResponseFuture:
    return db.execute_async(SELECT_HOUR_POSTS, (team_id, user_id, hour))


def start_first_posts(db: Database, team_id: str, user_id: str, hour: int, slot: int, base_kind: str,
                      channel_id: str, limit: int) -> ResponseFuture:
    return db.execute_async(SELECT_FIRST_POSTS, (team_id, user_id, hour, slot, base_kind, channel_id, limit))


# Slack subtypes that are their own kind of post (api/activity/events.py), and the kinds a post can have.
SUBTYPE_KINDS = {"channel_join": ev.JOIN, "channel_leave": ev.LEAVE, "channel_name": ev.RENAME}


def base_kind(subtype: str | None, thread_ts: int | None, ts: int) -> str:
    """A post's kind as fixed when it is posted: a `message` with files counts as `file_share` (`is_file`)."""
    if subtype in SUBTYPE_KINDS:
        return SUBTYPE_KINDS[subtype]
    if thread_ts is not None and thread_ts != ts:
        return ev.REPLY
    return ev.MESSAGE


# -- retention and erasure (api/retention/) -------------------------------------------------------------------

DELETE_TOUCH = Statement(
    "DELETE FROM slack_user_touches WHERE team_id = ? AND user_id = ? AND year = ? AND day = ? AND channel_id = ? "
    "AND msg_day = ?", name="DELETE slack_user_touches (one)")
DELETE_POST = Statement(
    "DELETE FROM slack_user_posts WHERE team_id = ? AND user_id = ? AND hour = ? AND slot = ? AND base_kind = ? "
    "AND channel_id = ? AND ts = ?", name="DELETE slack_user_posts (one)")
DELETE_POST_HOUR = Statement("DELETE FROM slack_user_posts WHERE team_id = ? AND user_id = ? AND hour = ?",
                             name="DELETE slack_user_posts (hour)")
_BEFORE = "WHERE team_id = ? AND user_id = ? AND year = ? AND day < ?"
UNLIST_TOUCHES = Statement(f"DELETE FROM slack_user_touches {_BEFORE}", name="DELETE slack_user_touches (before)")
UNLIST_HOURS = Statement(f"DELETE FROM slack_user_activity_hours {_BEFORE}",
                         name="DELETE slack_user_activity_hours (before)")
UNLIST_OLD = Statement(f"DELETE FROM slack_user_activity {_BEFORE}", name="DELETE slack_user_activity (before)")
UNLIST_TOUCHES_BEFORE = (UNLIST_TOUCHES, UNLIST_HOURS, UNLIST_OLD)


def expire_touch_writes(team_id: str, channel_id: str, touched: Iterable[tuple[str, int, int]]
                        ) -> list[tuple[Statement, Params]]:
    """Row deletes of the index rows (user, UTC day, message day) naming this channel."""
    return [(DELETE_TOUCH, (team_id, user_id, year_of_day(day), day, channel_id, msg_day))
            for user_id, day, msg_day in sorted(set(touched))]


def expire_post_writes(team_id: str, channel_id: str, posts: Iterable[tuple[str, int, str]]
                       ) -> list[tuple[Statement, Params]]:
    """Row deletes of authors' posts (author, ts, base kind) in this channel."""
    return [(DELETE_POST, (team_id, user_id, ts // HOUR_US, ts // SLOT_US, kind, channel_id, ts))
            for user_id, ts, kind in sorted(set(posts))]


def expire_whole_writes(team_id: str, user_id: str, post_hours: Iterable[int], years: Iterable[int],
                        before_day: int) -> list[tuple[Statement, Params]]:
    """Every message of the workspace before `before_day` (UTC) goes: the user's posts of those hours are dropped
    by partition, and their index rows before the day by one range in each UTC year of `years` (the years their
    expired activity was in) and each index table."""
    writes: list[tuple[Statement, Params]] = [(DELETE_POST_HOUR, (team_id, user_id, hour))
                                              for hour in sorted(set(post_hours))]
    for year in sorted(set(years)):
        writes.extend((statement, (team_id, user_id, year, before_day)) for statement in UNLIST_TOUCHES_BEFORE)
    return writes


ERASE_TOUCHES_YEAR = Statement("DELETE FROM slack_user_touches WHERE team_id = ? AND user_id = ? AND year = ?",
                               name="DELETE slack_user_touches (year)")
ERASE_HOURS_YEAR = Statement("DELETE FROM slack_user_activity_hours WHERE team_id = ? AND user_id = ? AND year = ?",
                             name="DELETE slack_user_activity_hours (year)")
ERASE_OLD_YEAR = Statement("DELETE FROM slack_user_activity WHERE team_id = ? AND user_id = ? AND year = ?",
                           name="DELETE slack_user_activity (year)")
ERASE_TOUCHES = (ERASE_TOUCHES_YEAR, ERASE_HOURS_YEAR, ERASE_OLD_YEAR)


def erase_person_writes(team_id: str, user_id: str, years: Iterable[int], post_hours: Iterable[int]
                        ) -> list[tuple[Statement, Params]]:
    """An erased person's index: their rows of every year (each table's partition whole) and their posts'
    hours (partition deletes: no row tombstone in a partition anyone reads again)."""
    writes: list[tuple[Statement, Params]] = [(DELETE_POST_HOUR, (team_id, user_id, hour))
                                              for hour in sorted(set(post_hours))]
    writes += [(statement, (team_id, user_id, year)) for year in sorted(set(years)) for statement in ERASE_TOUCHES]
    return writes


def person_years(today_day: int) -> range:
    """The UTC years an erasure and its proof look through: MAX_YEARS_BACK years up to this one."""
    this_year = year_of_day(today_day)
    return range(this_year - MAX_YEARS_BACK + 1, this_year + 1)


_ANY_TOUCH = Statement("SELECT year FROM slack_user_touches WHERE team_id = ? AND user_id = ? AND year = ? LIMIT 1",
                       name="SELECT slack_user_touches (any)")
_ANY_HOURS = Statement(
    "SELECT year FROM slack_user_activity_hours WHERE team_id = ? AND user_id = ? AND year = ? LIMIT 1",
    name="SELECT slack_user_activity_hours (any)")
_ANY_OLD = Statement("SELECT year FROM slack_user_activity WHERE team_id = ? AND user_id = ? AND year = ? LIMIT 1",
                     name="SELECT slack_user_activity (any)")
_ANY_POST = Statement("SELECT ts FROM slack_user_posts WHERE team_id = ? AND user_id = ? AND hour = ? LIMIT 1",
                      name="SELECT slack_user_posts (any)")


def person_rows(db: Database, team_id: str, user_id: str, years: Iterable[int], post_hours: Iterable[int]
                ) -> dict[str, int]:
    """Partitions of the person that still hold a row, by table (the erasure proof)."""
    futures = [(s.table, db.execute_async(s, (team_id, user_id, year)))
               for year in years for s in (_ANY_TOUCH, _ANY_HOURS, _ANY_OLD)]
    futures += [(_ANY_POST.table, db.execute_async(_ANY_POST, (team_id, user_id, hour))) for hour in post_hours]
    out: dict[str, int] = {}
    for table, future in futures:
        if list(future.result()):
            out[table] = out.get(table, 0) + 1
    return out
