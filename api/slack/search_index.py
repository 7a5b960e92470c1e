"""The search index of the Slack archive: postings by (term, UTC day), the days each term occurs on, and the
progress of indexing messages archived before search existed.

Owner of slack_search_postings, slack_search_term_days and slack_search_backfill. Ingest (ingest.py) sends
`posting_writes` with a message's other rows and calls `note_indexed` once they are all written; the search
(search.py) reads `start_term_days` and `start_postings`. Nothing is ever deleted here: an edit adds the
postings of its new text, and search.py confirms each candidate against the message row.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from api.caches import Cache
from api.db import Database, Params, Statement
from api.slack import search_terms
from api.slack.timeutil import day_of

TABLES = frozenset({"slack_search_postings", "slack_search_term_days", "slack_search_backfill"})

Write = tuple[Statement, Params]

INSERT_POSTING = Statement(
    "INSERT INTO slack_search_postings (team_id, term, day, ts, channel_id) VALUES (?, ?, ?, ?, ?)")
INSERT_TERM_DAY = Statement("INSERT INTO slack_search_term_days (team_id, term, day) VALUES (?, ?, ?)")
SELECT_TERM_DAYS = Statement(
    "SELECT day FROM slack_search_term_days WHERE team_id = ? AND term = ? AND day <= ? AND day >= ? LIMIT ?")
SELECT_POSTINGS = Statement(
    "SELECT ts, channel_id FROM slack_search_postings WHERE team_id = ? AND term = ? AND day = ? AND ts < ? "
    "AND ts >= ? LIMIT ?")
WHOLE = 1_000_000  # the LIMIT of a whole-partition read (partitions are bounded by design, far below this)
SELECT_PROGRESS = Statement(
    "SELECT channel_id, next_day, messages FROM slack_search_backfill WHERE team_id = ?")
UPDATE_PROGRESS = Statement(
    "UPDATE slack_search_backfill SET next_day = ?, messages = ?, updated_at = ? WHERE team_id = ? "
    "AND channel_id = ?")


def author_term(user_id: str) -> str:
    return f"from:{user_id.casefold()}"


def channel_term(channel_id: str) -> str:
    return f"in:{channel_id.casefold()}"


def message_terms(channel_id: str, user_id: str | None, text: str | None) -> list[str]:
    """Every term one message is found by: its text's (search_terms.index_terms), its author, its channel."""
    terms = search_terms.index_terms(text)
    if user_id:
        terms.append(author_term(user_id))
    terms.append(channel_term(channel_id))
    return terms


# (team, term, day) this process has listed in slack_search_term_days: those rows are insert-only, so one write
# per term and day is enough; a common word costs one posting per message, not two. Forgetting one only costs
# a redundant write.
_LISTED = "slack.search_term_days_written"
_LISTED_MAX = 40_000  # ~10 MB; an import walks channel by channel, day by day: the current days fit


def _listed(db: Database) -> Cache:
    return db.caches.lru(_LISTED, maxsize=_LISTED_MAX)


def posting_writes(db: Database, team_id: str, channel_id: str, ts: int, user_id: str | None, text: str | None
                   ) -> tuple[list[Write], list[tuple[str, str, int]]]:
    """The postings of one message (its text as of this write), and the day listings this process has not
    written yet; returns (writes, keys to pass to `note_indexed` once every write succeeded)."""
    day = day_of(ts)
    terms = message_terms(channel_id, user_id, text)
    writes: list[Write] = [(INSERT_POSTING, (team_id, term, day, ts, channel_id)) for term in terms]
    keys = _listed(db).missing([(team_id, term, day) for term in terms])
    writes.extend((INSERT_TERM_DAY, key) for key in keys)
    return writes, keys


def note_indexed(db: Database, keys: Iterable[tuple[str, str, int]]) -> None:
    """The writes of `posting_writes` all succeeded: their day listings need not be written again."""
    _listed(db).add_all(keys)


def start_term_days(db: Database, team_id: str, term: str, *, newest: int, oldest: int, limit: int) -> Any:
    """Future of the days (newest first, within [oldest, newest]) on which `term` occurs."""
    return db.execute_async(SELECT_TERM_DAYS, (team_id, term, newest, oldest, limit))


def start_postings(db: Database, team_id: str, term: str, day: int, *, below: int, at_least: int, limit: int
                   ) -> Any:
    """Future of the first `limit` (ts, channel_id) postings of `term` on `day` with at_least <= ts < below,
    newest first. The partition is bounded by design (one term, one day, one workspace): WHOLE reads it all."""
    return db.execute_async(SELECT_POSTINGS, (team_id, term, day, below, at_least, limit))


def progress(db: Database, team_id: str) -> dict[str, tuple[int, int]]:
    """channel -> (next day to index, messages indexed so far) of `chronicle slack index-search`."""
    return {r.channel_id: (r.next_day, r.messages or 0) for r in db.execute(SELECT_PROGRESS, (team_id,))}


def record_progress(db: Database, team_id: str, channel_id: str, next_day: int, messages: int) -> None:
    db.execute(UPDATE_PROGRESS, (next_day, messages, time.time_ns() // 1000, team_id, channel_id))
