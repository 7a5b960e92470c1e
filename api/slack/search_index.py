"""The search index of the Slack archive: postings by (term, UTC day), the days each term occurs on, and the
progress of indexing messages archived before search existed.

Owner of slack_search_postings, slack_search_term_days and slack_search_backfill. Ingest (ingest.py) sends
`message_posting_writes` with a message's other rows (live posts, edits, the Web API backfill, export imports)
and `reaction_posting_writes` with a reaction, and calls `note_indexed` once they are all written; the search
(search.py) reads `start_term_days` and `start_postings`. Nothing is ever deleted here: an edit adds the
postings of its new text, and search.py confirms each candidate against the message row. A message's posting
under its author (`from:`) and its channel (`in:`) carries the filter of its text's terms (term_filter.py),
rewritten by each edit at the edit's time, so a search driven by them drops most candidates without lookups.

Besides its words, a message is posted under `from:<user>`, `in:<channel>` and the flags that hold for it:
`has:file`, `has:link`, `has:reaction` (written when a reaction arrives, or with a history message that has
some) and `is:thread` (a reply; and its thread head, written with the reply at the head's ts). A flag that
stops holding (a reaction removed, the only reply deleted) leaves a stale posting that confirmation drops.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from api.caches import Cache
from api.db import Database, Params, Statement, without_none
from api.slack import content, search_terms, term_filter
from api.slack.timeutil import day_of

TABLES = frozenset({"slack_search_postings", "slack_search_term_days", "slack_search_backfill"})

Write = tuple[Statement, Params]

INSERT_POSTING = Statement(
    "INSERT INTO slack_search_postings (team_id, term, day, ts, channel_id) VALUES (?, ?, ?, ?, ?)")
# The author's and the channel's postings carry the filter of the text's terms (term_filter.py), at the text
# version's own time: a redelivered older event never replaces a newer text's filter.
INSERT_FILTERED_POSTING = Statement(
    "INSERT INTO slack_search_postings (team_id, term, day, ts, channel_id, terms_filter) VALUES (?, ?, ?, ?, ?, ?) "
    "USING TIMESTAMP ?")
INSERT_TERM_DAY = Statement("INSERT INTO slack_search_term_days (team_id, term, day) VALUES (?, ?, ?)")
SELECT_TERM_DAYS = Statement(
    "SELECT day FROM slack_search_term_days WHERE team_id = ? AND term = ? AND day <= ? AND day >= ? LIMIT ?")
SELECT_POSTINGS = Statement(
    "SELECT day, ts, channel_id, terms_filter FROM slack_search_postings WHERE team_id = ? AND term = ? AND day = ? "
    "AND ts < ? AND ts >= ? LIMIT ?")
SELECT_POSTINGS_OF_DAYS = Statement(
    "SELECT day, ts, channel_id, terms_filter FROM slack_search_postings WHERE team_id = ? AND term = ? "
    "AND day IN ? AND ts < ? AND ts >= ? PER PARTITION LIMIT ? LIMIT ?", unpaged=True, tuples=True)
# Several days' candidates in one read: every ts is looked for in every day's partition (days x ts point reads,
# kept to LOOKUP), worth it when a day has few candidates left (after the filters) and a statement costs more
# than a point read.
SELECT_POSTINGS_AT_DAYS = Statement(
    "SELECT day, ts, channel_id FROM slack_search_postings WHERE team_id = ? AND term = ? AND day IN ? AND ts IN ?",
    unpaged=True)
WHOLE = 1_000_000  # the LIMIT of a whole-partition read (partitions are bounded by design, far below this)
SELECT_PROGRESS = Statement(
    "SELECT channel_id, next_day, messages, version, flags_only, filters_only FROM slack_search_backfill "
    "WHERE team_id = ?")
UPDATE_PROGRESS = Statement(
    "UPDATE slack_search_backfill SET next_day = :next_day, messages = :messages, updated_at = :updated_at, "
    "version = :version, flags_only = :flags_only, filters_only = :filters_only "
    "WHERE team_id = :team_id AND channel_id = :channel_id")
# What `chronicle slack index-search` writes: 1 the words, from: and in: (schema 0090); 2 also the has:/is: flags
# (0180); 3 the from: and in: postings with their terms' filters (0310).
BACKFILL_VERSION = 3

HAS_FILE, HAS_LINK, HAS_REACTION, IS_THREAD = "has:file", "has:link", "has:reaction", "is:thread"
FLAGS = (HAS_FILE, HAS_LINK, HAS_REACTION, IS_THREAD)


def author_term(user_id: str) -> str:
    return f"from:{user_id.casefold()}"


def channel_term(channel_id: str) -> str:
    return f"in:{channel_id.casefold()}"


def driving_terms(channel_id: str, user_id: str | None) -> list[str]:
    """The terms whose postings carry the message's terms filter: its author's and its channel's."""
    return [author_term(user_id), channel_term(channel_id)] if user_id else [channel_term(channel_id)]


def flag_terms(*, files: Any, text: str | None, message_content: dict[str, Any] | None, ts: int,
               thread_ts: int | None, reacted: bool = False, replied: bool = False) -> list[str]:
    """The has:/is: terms of a message as written: a file (the `files` column: modern files or the legacy
    `file`), a link (content.has_link, as confirmation checks it), a reaction, a thread reply or a head with
    replies (`replied`: the backfill sees them; live, a head becomes `is:thread` through its first reply, whose
    `posting_writes` write the head's posting too)."""
    out = []
    if files:
        out.append(HAS_FILE)
    if content.has_link(text, message_content):
        out.append(HAS_LINK)
    if reacted:
        out.append(HAS_REACTION)
    if replied or (thread_ts is not None and thread_ts != ts):
        out.append(IS_THREAD)
    return out


# (team, term, day) this process has listed in slack_search_term_days: those rows are insert-only, so one write
# per term and day is enough; a common word costs one posting per message, not two. Forgetting one only costs
# a redundant write.
_LISTED = "slack.search_term_days_written"
_LISTED_MAX = 40_000  # ~10 MB; an import walks channel by channel, day by day: the current days fit


def _listed(db: Database) -> Cache:
    return db.caches.lru(_LISTED, maxsize=_LISTED_MAX)


def posting_writes(db: Database, team_id: str, channel_id: str, ts: int, user_id: str | None, text: str | None,
                   *, flags: Iterable[str] = (), thread_ts: int | None = None, words: bool = True,
                   written_at: int | None = None) -> tuple[list[Write], list[tuple[str, str, int]]]:
    """The postings of one message (its text as of this write, its `flags`), and the day listings this process
    has not written yet; returns (writes, keys to pass to `note_indexed` once every write succeeded). A reply
    (`thread_ts` of another message) also posts its thread head under is:thread. The author's and the channel's
    postings carry the filter of the text's terms, written at `written_at` (the text version's time: the
    message's ts, an edit's time; default ts). `words=False`: the flags and those two postings only (the
    backfill of archives an earlier version indexed)."""
    flags = list(flags)
    text_terms = search_terms.index_terms(text)
    driving = driving_terms(channel_id, user_id)
    day = day_of(ts)
    entries = [(term, day, ts) for term in [*(text_terms if words else ()), *flags]]
    if IS_THREAD in flags and thread_ts is not None and thread_ts != ts:
        entries.append((IS_THREAD, day_of(thread_ts), thread_ts))
    writes, keys = _writes(db, team_id, channel_id, entries, driving=[(term, day, ts) for term in driving])
    terms_filter = term_filter.build(text_terms)
    at = ts if written_at is None else written_at
    writes[:0] = [(INSERT_FILTERED_POSTING, (team_id, term, day, ts, channel_id, terms_filter, at))
                  for term in driving]
    return writes, keys


def _writes(db: Database, team_id: str, channel_id: str, entries: list[tuple[str, int, int]], *,
            driving: list[tuple[str, int, int]] = ()) -> tuple[list[Write], list[tuple[str, str, int]]]:
    """The postings `entries` (term, day, ts) and the day listings of those and of `driving` (written by the
    caller, with their filters) this process has not written yet."""
    writes: list[Write] = [(INSERT_POSTING, (team_id, term, day, ts, channel_id)) for term, day, ts in entries]
    keys = _listed(db).missing(list(dict.fromkeys((team_id, term, day) for term, day, _ts in [*entries, *driving])))
    writes.extend((INSERT_TERM_DAY, key) for key in keys)
    return writes, keys


def message_posting_writes(db: Database, msg: Any, *, reacted: bool = False, written_at: int | None = None
                           ) -> tuple[list[Write], list[tuple[str, str, int]]]:
    """`posting_writes` of a message as ingest has it (messages.NewMessage: a live post or edit, or a message
    as history shows it; `reacted`: history shows reactions on it; `written_at`: the time its text is written
    at)."""
    text = msg.searchable_text()
    flags = flag_terms(files=msg.files, text=msg.text, message_content=msg.content, ts=msg.ts,
                       thread_ts=msg.thread_ts, reacted=reacted)
    return posting_writes(db, msg.team_id, msg.channel_id, msg.ts, msg.user, text, flags=flags,
                          thread_ts=msg.thread_ts, written_at=written_at)


def reaction_posting_writes(db: Database, team_id: str, channel_id: str, ts: int
                            ) -> tuple[list[Write], list[tuple[str, str, int]]]:
    """A reaction was added: the message is posted under has:reaction (a removal writes nothing)."""
    return _writes(db, team_id, channel_id, [(HAS_REACTION, day_of(ts), ts)])


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


def start_postings_of_days(db: Database, team_id: str, term: str, days: list[int], *, below: int, at_least: int,
                           limit: int) -> Any:
    """Future of the first `limit` postings of `term` on each of `days` (one read of those partitions; rows
    (day, ts, channel_id), each day's newest first), with at_least <= ts < below."""
    return db.execute_async(SELECT_POSTINGS_OF_DAYS, (team_id, term, days, below, at_least, limit, limit * len(days)))


def start_postings_at_days(db: Database, team_id: str, term: str, days: list[int], ts_values: list[int]) -> Any:
    """Future of the (day, ts, channel_id) postings of `term` on `days` at these ts: each ts is looked for in
    every day's partition (len(days) x len(ts_values) point reads in one statement)."""
    return db.execute_async(SELECT_POSTINGS_AT_DAYS, (team_id, term, days, ts_values))


@dataclasses.dataclass(frozen=True)
class Progress:
    """How far `chronicle slack index-search` came in one channel, and what its run writes."""

    next_day: int        # the next UTC day to index (-1: finished)
    messages: int        # messages indexed so far
    version: int         # BACKFILL_VERSION of the run (1: rows written before schema 0180)
    flags_only: bool     # the words are there (version 1 finished): the flags, author and channel postings
    filters_only: bool   # words and flags are there (version 2 finished): the author and channel postings


def progress(db: Database, team_id: str) -> dict[str, Progress]:
    """channel -> its Progress of `chronicle slack index-search`."""
    return {r.channel_id: Progress(r.next_day, r.messages or 0, r.version or 1, bool(r.flags_only),
                                   bool(r.filters_only))
            for r in db.execute(SELECT_PROGRESS, (team_id,))}


def record_progress(db: Database, team_id: str, channel_id: str, next_day: int, messages: int, *,
                    flags_only: bool = False, filters_only: bool = False) -> None:
    db.execute(UPDATE_PROGRESS, without_none({
        "next_day": next_day, "messages": messages, "updated_at": int(db.clock.time() * 1_000_000),
        "version": BACKFILL_VERSION, "flags_only": flags_only, "filters_only": filters_only, "team_id": team_id,
        "channel_id": channel_id}))


# -- retention and erasure (api/retention/) -------------------------------------------------------------------

DELETE_POSTING = Statement(
    "DELETE FROM slack_search_postings WHERE team_id = ? AND term = ? AND day = ? AND ts = ? AND channel_id = ?",
    name="DELETE slack_search_postings (one)")
DELETE_TERM_DAY_POSTINGS = Statement(
    "DELETE FROM slack_search_postings WHERE team_id = ? AND term = ? AND day = ?",
    name="DELETE slack_search_postings (term-day)")
DELETE_TERM_DAY = Statement("DELETE FROM slack_search_term_days WHERE team_id = ? AND term = ? AND day = ?",
                            name="DELETE slack_search_term_days (one)")
# Days of a term before a cutoff leave its listing as one range tombstone (the same range from every message of
# a run: the memtable keeps the newest), not one row tombstone per day a search may scan.
UNLIST_TERM_DAYS = Statement("DELETE FROM slack_search_term_days WHERE team_id = ? AND term = ? AND day < ?",
                             name="DELETE slack_search_term_days (before)")
# Whole days (retention): many terms' partitions of one day, and many terms' listings, by one statement each: the
# node applies one mutation per partition as for a batch, the client binds one statement instead of a hundred
# (measured: ~15 -> ~2 us of client CPU a partition, the node's ~10 us unchanged).
DELETE_TERMS_DAY_POSTINGS = Statement(
    "DELETE FROM slack_search_postings WHERE team_id = ? AND term IN ? AND day = ?",
    name="DELETE slack_search_postings (terms of a day)", many_partitions=True)
UNLIST_TERMS_DAYS = Statement("DELETE FROM slack_search_term_days WHERE team_id = ? AND term IN ? AND day < ?",
                              name="DELETE slack_search_term_days (terms, before)", many_partitions=True)
# One message's postings under many terms (erasure): a row in each term's partition of its day.
DELETE_TERMS_POSTING = Statement(
    "DELETE FROM slack_search_postings WHERE team_id = ? AND term IN ? AND day = ? AND ts = ? AND channel_id = ?",
    name="DELETE slack_search_postings (terms of a message)", many_partitions=True)
DELETE_TERMS_DAY = Statement("DELETE FROM slack_search_term_days WHERE team_id = ? AND term IN ? AND day = ?",
                             name="DELETE slack_search_term_days (terms of a day)", many_partitions=True)
# Which of many terms' partitions of one day still hold a posting: a row of each that does.
SELECT_TERMS_HELD = Statement(
    "SELECT term FROM slack_search_postings WHERE team_id = ? AND term IN ? AND day = ? PER PARTITION LIMIT 1",
    name="SELECT slack_search_postings (terms held)")
TERMS_A_DELETE = 200  # partitions of one IN list


def every_term(channel_id: str, user_id: str | None, texts: Iterable[str | None]) -> set[str]:
    """Every term a message can have been posted under: the words of each of its texts (current, original,
    earlier versions), its author and channel, and every has:/is: flag (a flag may have held once: a reaction
    removed, a file deleted)."""
    terms: set[str] = set(FLAGS)
    for text in texts:
        terms.update(search_terms.index_terms(text))
    if user_id:
        terms.add(author_term(user_id))
    terms.add(channel_term(channel_id))
    return terms


def expire_posting_writes(db: Database, team_id: str, channel_id: str, postings: Iterable[tuple[str, int]], *,
                          whole_before: int | None, dropped: set[tuple[str, int]] | None = None,
                          unlisted: set[str] | None = None, in_flight: int | None = None) -> list[Write]:
    """The deletes of postings (term, ts) of one channel. `whole_before` (a UTC day): every message of the
    workspace before it goes, so each (term, day) partition is dropped whole and the term's listing loses the
    days before it. Otherwise each (term, day) partition is read first (before any delete, a little more than
    this channel's postings there): one that holds only these postings is dropped whole with its listing row (a
    word of these messages alone), else these postings are deleted one by one (a row tombstone each, in a
    partition other messages of the day keep). `dropped` / `unlisted` (whole days): the (term, day) partitions
    and terms' listings this run already dropped, left out (a common word is in every channel's day).
    `in_flight`: at most that many reads outstanding at once (a run beside production reads)."""
    by_key: dict[tuple[str, int], set[int]] = {}
    for term, ts in postings:
        by_key.setdefault((term, day_of(ts)), set()).add(ts)
    writes: list[Write] = []
    if whole_before is not None:
        terms_of_day: dict[int, set[str]] = {}
        for term, day in by_key:
            terms_of_day.setdefault(day, set()).add(term)
        for day, day_terms in sorted(terms_of_day.items()):
            writes += expire_day_terms_writes(team_id, day, day_terms, whole_before=whole_before, dropped=dropped,
                                              unlisted=unlisted)
        return writes
    keys = sorted(by_key)
    reads = db.execute_windows(SELECT_POSTINGS, [(team_id, term, day, 2**63 - 1, 0, len(by_key[(term, day)]) + 1)
                                                 for term, day in keys], in_flight)
    for (term, day), result in zip(keys, reads, strict=True):
        mine = by_key[(term, day)]
        found = list(result)
        if len(found) <= len(mine) and all(r.channel_id == channel_id and r.ts in mine for r in found):
            writes += [(DELETE_TERM_DAY_POSTINGS, (team_id, term, day)), (DELETE_TERM_DAY, (team_id, term, day))]
        else:
            writes += [(DELETE_POSTING, (team_id, term, day, ts, channel_id)) for ts in sorted(mine)]
    return writes


def _parts(terms: list[str]) -> list[list[str]]:
    return [terms[i:i + TERMS_A_DELETE] for i in range(0, len(terms), TERMS_A_DELETE)]


def empty_term_day_writes(db: Database, team_id: str, term: str, days: Iterable[int]) -> list[Write]:
    """The listing rows (and partitions) of the days of `term` that no longer hold any posting."""
    reads = {day: db.execute_async(SELECT_POSTINGS, (team_id, term, day, 2**63 - 1, 0, 1)) for day in days}
    writes: list[Write] = []
    for day, future in sorted(reads.items()):
        if not list(future.result()):
            writes += [(DELETE_TERM_DAY_POSTINGS, (team_id, term, day)), (DELETE_TERM_DAY, (team_id, term, day))]
    return writes


def expire_day_terms_writes(team_id: str, day: int, terms: set[str], *, whole_before: int,
                            dropped: set[tuple[str, int]] | None = None, unlisted: set[str] | None = None
                            ) -> list[Write]:
    """Every message of the workspace before `whole_before` goes: the (term, day) partitions of `terms` on `day`
    are dropped whole (IN lists), and each term's listing loses its days before the cutoff (one range each).
    `dropped` / `unlisted`: what this run already dropped, left out and updated."""
    fresh = sorted(terms - {t for t in terms if (t, day) in dropped}) if dropped is not None else sorted(terms)
    writes: list[Write] = [(DELETE_TERMS_DAY_POSTINGS, (team_id, part, day)) for part in _parts(fresh)]
    unlist = fresh
    if unlisted is not None:
        unlist = [t for t in fresh if t not in unlisted]
        unlisted.update(unlist)
    writes += [(UNLIST_TERMS_DAYS, (team_id, part, whole_before)) for part in _parts(unlist)]
    if dropped is not None:
        dropped.update((t, day) for t in fresh)
    return writes


def empty_day_terms_writes(db: Database, team_id: str, day: int, terms: Iterable[str]) -> list[Write]:
    """Of `terms`' partitions of one day, those no longer holding any posting, with their listing rows: one read
    and two deletes per TERMS_A_DELETE terms."""
    parts = _parts(sorted(set(terms)))
    reads = [(part, db.execute_async(SELECT_TERMS_HELD, (team_id, part, day))) for part in parts]
    writes: list[Write] = []
    for part, future in reads:
        held = {row.term for row in future.result()}
        empty = [term for term in part if term not in held]
        if empty:
            writes += [(DELETE_TERMS_DAY_POSTINGS, (team_id, empty, day)), (DELETE_TERMS_DAY, (team_id, empty, day))]
    return writes


def delete_posting_writes(team_id: str, channel_id: str, postings: Iterable[tuple[str, int]]) -> list[Write]:
    """Row deletes of postings (term, ts) of one channel, without reading, one statement per message (its terms
    in one IN list): for terms that name no content (a channel, a flag), whose day listing may stay (it then
    leads to a partition with nothing of these)."""
    terms_of: dict[int, list[str]] = {}
    for term, ts in sorted(set(postings)):
        terms_of.setdefault(ts, []).append(term)
    return [(DELETE_TERMS_POSTING, (team_id, part, day_of(ts), ts, channel_id))
            for ts, terms in terms_of.items() for part in _parts(terms)]


def drop_term_day_writes(team_id: str, term: str, day: int) -> list[Write]:
    """A (term, day) partition and its listing row, whole (every posting in it is known to go)."""
    return [(DELETE_TERM_DAY_POSTINGS, (team_id, term, day)), (DELETE_TERM_DAY, (team_id, term, day))]
