"""Where a Slack user's activity lives (slack_user_activity): for each UTC day, the slack_messages partitions
(channel, message day) holding what the user did or had done to their messages that day.

History's reactions (export import, Web API backfill: no reaction time) are indexed at their message's day,
with the time history wrote them at (`history_at`), which tells the rebuild to date them at their message.

Rows are insert-only and idempotent; this process remembers the ones it wrote (after they were written), so a
busy user in a busy channel costs one index write per channel and day, not one per message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import date

from cassandra.cluster import ResponseFuture

from api.caches import Cache
from api.db import Database, Params, Statement
from api.slack.timeutil import day_of

TABLES = frozenset({"slack_user_activity", "slack_user_activity_hours"})

# Written: slack_user_activity_hours (cql/0220), the UTC hour of the message day holding the message concerned
# added to the row's hours (a rebuild reads only those hours); the UPDATE makes the row when it is new, and set
# additions leave no tombstone. History's reactions carry no time: the row of the message's day also names the
# times history wrote them at in that partition.
PUT_TOUCH = Statement(
    "UPDATE slack_user_activity_hours SET msg_hours = msg_hours + ? WHERE team_id = ? AND user_id = ? AND year = ? "
    "AND day = ? AND channel_id = ? AND msg_day = ?")
PUT_HISTORY_TOUCH = Statement(
    "UPDATE slack_user_activity_hours SET history_at = history_at + ?, msg_hours = msg_hours + ? WHERE team_id = ? "
    "AND user_id = ? AND year = ? AND day = ? AND channel_id = ? AND msg_day = ?")
SELECT_SOURCES = Statement(
    "SELECT day, channel_id, msg_day, history_at, msg_hours FROM slack_user_activity_hours WHERE team_id = ? "
    "AND user_id = ? AND year = ? AND day >= ? AND day <= ?")
SELECT_LATEST = Statement(
    "SELECT day, channel_id FROM slack_user_activity_hours WHERE team_id = ? AND user_id = ? AND year = ? "
    "ORDER BY day DESC LIMIT ?", name="SELECT slack_user_activity_hours (latest)")
# Read only: the rows written before cql/0220 (no hours: their channel-days are read whole).
SELECT_OLD_SOURCES = Statement(
    "SELECT day, channel_id, msg_day, history_at FROM slack_user_activity WHERE team_id = ? AND user_id = ? "
    "AND year = ? AND day >= ? AND day <= ?")
SELECT_OLD_LATEST = Statement(
    "SELECT day, channel_id FROM slack_user_activity WHERE team_id = ? AND user_id = ? AND year = ? "
    "ORDER BY day DESC LIMIT ?", name="SELECT slack_user_activity (latest)")
MAX_YEARS_BACK = 40  # years `latest_day` looks through (one small read each, concurrently)
LATEST_SCAN = 500  # newest rows of a year looked through for one outside hidden channels

# (team, user, UTC day, channel, message day, message's UTC hour), and for a reaction history showed, the time
# it was written at
Touch = tuple[str, str, int, str, int, int] | tuple[str, str, int, str, int, int, int]
HOUR_US = 3_600_000_000

# Index rows this process has written (insert-only rows: forgetting one only costs a redundant write).
_WRITTEN = "slack.activity_touches_written"
_WRITTEN_MAX = 40_000  # ~10 MB (5-tuple keys): the current channel-days of the import fit


def _written(db: Database) -> Cache:
    return db.caches.lru(_WRITTEN, maxsize=_WRITTEN_MAX)


def year_of_day(day: int) -> int:
    """The UTC year of a day number (days since 1970-01-01)."""
    return date.fromordinal(_EPOCH_ORDINAL + day).year


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


def touch(team_id: str, user_id: str, at: int, channel_id: str, msg_ts: int, history_at: int | None = None
          ) -> Touch:
    """`user_id` acted (or was acted upon) at `at` (µs) on the message `msg_ts` of `channel_id`; `history_at`:
    a reaction history showed, written at that time and dated at its message (`at` is then the message's ts)."""
    hour = msg_ts // HOUR_US % 24
    if history_at is None:
        return (team_id, user_id, day_of(at), channel_id, day_of(msg_ts), hour)
    return (team_id, user_id, day_of(at), channel_id, day_of(msg_ts), hour, history_at)


def touch_writes(db: Database, touches: Iterable[Touch]) -> tuple[list[tuple[Statement, Params]], list[tuple]]:
    """The index rows of `touches` this process has not written yet, and the keys to pass to `note_written`
    once they are written."""
    keys = _written(db).missing(dict.fromkeys(touches))
    writes: list[tuple[Statement, Params]] = []
    for team_id, user_id, day, channel_id, msg_day, hour, *history_at in keys:
        where = (team_id, user_id, year_of_day(day), day, channel_id, msg_day)
        if history_at:
            writes.append((PUT_HISTORY_TOUCH, ({history_at[0]}, {hour}, *where)))
        else:
            writes.append((PUT_TOUCH, ({hour}, *where)))
    return writes, keys


def note_written(db: Database, keys: Iterable[tuple]) -> None:
    _written(db).add_all(keys)


def start_sources(db: Database, team_id: str, user_id: str, first_day: int, last_day: int) -> list[ResponseFuture]:
    """Reads of the user's index rows for UTC days [first_day, last_day]: one per UTC year touched and table."""
    futures = []
    for year in range(year_of_day(first_day), year_of_day(last_day) + 1):
        for statement in (SELECT_SOURCES, SELECT_OLD_SOURCES):
            futures.append(db.execute_async(statement, (team_id, user_id, year, first_day, last_day)))
    return futures


def latest_day(db: Database, team_id: str, user_id: str, first_year: int, last_year: int, *,
               hidden_channels: frozenset[str] = frozenset()) -> int | None:
    """The newest UTC day (days since 1970-01-01) in [first_year, last_year] on which the user acted or was acted
    upon outside `hidden_channels`, else None. One read per UTC year (its partition's newest row; the newest
    LATEST_SCAN rows when channels are hidden), at most MAX_YEARS_BACK years, in flight together."""
    years = range(last_year, max(first_year, last_year - MAX_YEARS_BACK + 1) - 1, -1)
    limit = LATEST_SCAN if hidden_channels else 1
    futures = [(db.execute_async(SELECT_LATEST, (team_id, user_id, year, limit)),
                db.execute_async(SELECT_OLD_LATEST, (team_id, user_id, year, limit))) for year in years]
    for pair in futures:
        days = [row.day for future in pair for row in future.result() if row.channel_id not in hidden_channels]
        if days:
            return max(days)
    return None


@dataclasses.dataclass
class Source:
    """A channel-day the index names: the times history wrote reactions at there (see `touch`), and the UTC hours
    holding the messages concerned (None: a row written before cql/0220, the whole day is read)."""

    history_at: set[int] = dataclasses.field(default_factory=set)
    hours: set[int] | None = dataclasses.field(default_factory=set)


def sources_from(futures: list[ResponseFuture]) -> dict[tuple[str, int], Source]:
    """The (channel, message day) partitions the index rows name, merged over the rows (of both tables) that name
    each."""
    found: dict[tuple[str, int], Source] = {}
    for future in futures:
        for row in future.result():
            source = found.setdefault((row.channel_id, row.msg_day), Source())
            if row.history_at:
                source.history_at.update(row.history_at)
            hours = getattr(row, "msg_hours", None)
            if hours is None:
                source.hours = None  # a row of slack_user_activity (before cql/0220): its hours are not known
            elif source.hours is not None:
                source.hours.update(hours)
    return found
