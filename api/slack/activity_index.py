"""Where a Slack user's activity lives (slack_user_activity): for each UTC day, the slack_messages partitions
(channel, message day) holding what the user did or had done to their messages that day.

History's reactions (export import, Web API backfill: no reaction time) are indexed at their message's day,
with the time history wrote them at (`history_at`), which tells the rebuild to date them at their message.

Rows are insert-only and idempotent; this process remembers the ones it wrote (after they were written), so a
busy user in a busy channel costs one index write per channel and day, not one per message.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date

from cassandra.cluster import ResponseFuture

from api.caches import Cache
from api.db import Database, Params, Statement
from api.slack.timeutil import day_of

TABLES = frozenset({"slack_user_activity"})

PUT_TOUCH = Statement(
    "INSERT INTO slack_user_activity (team_id, user_id, year, day, channel_id, msg_day) VALUES (?, ?, ?, ?, ?, ?)")
# History's reactions carry no time: the index row of the message's day names the times history wrote them at
# in that partition (added to the set: no tombstone; the UPDATE makes the row when it is new).
PUT_HISTORY_TOUCH = Statement(
    "UPDATE slack_user_activity SET history_at = history_at + ? WHERE team_id = ? AND user_id = ? AND year = ? "
    "AND day = ? AND channel_id = ? AND msg_day = ?")
SELECT_SOURCES = Statement(
    "SELECT day, channel_id, msg_day, history_at FROM slack_user_activity WHERE team_id = ? AND user_id = ? "
    "AND year = ? AND day >= ? AND day <= ?")
SELECT_LATEST = Statement(
    "SELECT day, channel_id FROM slack_user_activity WHERE team_id = ? AND user_id = ? AND year = ? "
    "ORDER BY day DESC LIMIT ?", name="SELECT slack_user_activity (latest)")
MAX_YEARS_BACK = 40  # years `latest_day` looks through (one small read each, concurrently)
LATEST_SCAN = 500  # newest rows of a year looked through for one outside hidden channels

# (team, user, UTC day, channel, message day), and for a reaction history showed, the time it was written at
Touch = tuple[str, str, int, str, int] | tuple[str, str, int, str, int, int]

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
    if history_at is None:
        return (team_id, user_id, day_of(at), channel_id, day_of(msg_ts))
    return (team_id, user_id, day_of(at), channel_id, day_of(msg_ts), history_at)


def touch_writes(db: Database, touches: Iterable[Touch]) -> tuple[list[tuple[Statement, Params]], list[tuple]]:
    """The index rows of `touches` this process has not written yet, and the keys to pass to `note_written`
    once they are written."""
    keys = _written(db).missing(dict.fromkeys(touches))
    writes: list[tuple[Statement, Params]] = []
    for team_id, user_id, day, channel_id, msg_day, *history_at in keys:
        if history_at:
            writes.append((PUT_HISTORY_TOUCH, ({history_at[0]}, team_id, user_id, year_of_day(day), day, channel_id,
                                               msg_day)))
        else:
            writes.append((PUT_TOUCH, (team_id, user_id, year_of_day(day), day, channel_id, msg_day)))
    return writes, keys


def note_written(db: Database, keys: Iterable[tuple]) -> None:
    _written(db).add_all(keys)


def start_sources(db: Database, team_id: str, user_id: str, first_day: int, last_day: int) -> list[ResponseFuture]:
    """Reads of the user's index rows for UTC days [first_day, last_day]: one per UTC year touched."""
    futures = []
    for year in range(year_of_day(first_day), year_of_day(last_day) + 1):
        futures.append(db.execute_async(SELECT_SOURCES, (team_id, user_id, year, first_day, last_day)))
    return futures


def latest_day(db: Database, team_id: str, user_id: str, first_year: int, last_year: int, *,
               hidden_channels: frozenset[str] = frozenset()) -> int | None:
    """The newest UTC day (days since 1970-01-01) in [first_year, last_year] on which the user acted or was acted
    upon outside `hidden_channels`, else None. One read per UTC year (its partition's newest row; the newest
    LATEST_SCAN rows when channels are hidden), at most MAX_YEARS_BACK years, in flight together."""
    years = range(last_year, max(first_year, last_year - MAX_YEARS_BACK + 1) - 1, -1)
    limit = LATEST_SCAN if hidden_channels else 1
    futures = [db.execute_async(SELECT_LATEST, (team_id, user_id, year, limit)) for year in years]
    for future in futures:
        for row in future.result():
            if row.channel_id not in hidden_channels:
                return row.day
    return None


def sources_from(futures: list[ResponseFuture]) -> dict[tuple[str, int], set[int]]:
    """The (channel, message day) partitions the index rows name, each with the times history wrote reactions at
    there (see `touch`)."""
    found: dict[tuple[str, int], set[int]] = {}
    for future in futures:
        for row in future.result():
            times = found.setdefault((row.channel_id, row.msg_day), set())
            if row.history_at:
                times.update(row.history_at)
    return found
