"""Erasure of a person from a Slack workspace (docs/retention.md, "Erasure").

Where they are: the activity index names every channel-day holding their posts, their reactions and their
threads (every year of it), and the search index names every message that mentions them or that they wrote
(archives indexed before the activity index). Each such channel-day is read once, and each row in it:

- their own message goes with every copy: stored files, search postings of every text it ever had, versions,
  raw event, its place in its thread; the row itself, or, for a thread head others replied to, Slack's own
  tombstone ("This message was deleted.", USLACKBOT) so the replies stay whole;
- another person's message loses their reactions, and its texts (current, original, versions, attachments and
  blocks, the raw event) read "@former member" where they were mentioned; a reply in their thread names the
  placeholder as its parent's author; its search postings follow the new text;
- the days others' activity showed them in are rebuilt (dirty marks).

Then what is theirs alone: their index rows and posts (whole partitions), their stored activity days, their
profile (deleted above any write time, so no replay or re-import brings it back), the channels they created
or belonged to (creator, member lists), and every stored report that names them, generated again.

Every message changed is written to the ledger (erasure_touched) before it is changed, so the proof knows
where to look; every step is idempotent, so a stopped request is finished by running it again. A legal hold on
the workspace or the person refuses the request (state `held`); a channel hold keeps that channel's messages,
and the request's report says so.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import pickle
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import date
from typing import Any

import structlog

from api.activity import dirty
from api.activity import store as activity_store
from api.db import Database, Params, Statement
from api.erasure import ledger, proof, scrub
from api.errors import NotFound
from api.retention import policies
from api.slack import activity_index, channels, messages, search_index, users
from api.slack.codec import compress_json
from api.slack.content import with_content_text
from api.slack.files import ObjectStore, object_key
from api.slack.reports import service as reports
from api.slack.reports import store as report_store
from api.slack.reports.period import Period
from api.slack.timeutil import day_of

log = structlog.get_logger("chronicle.erasure")

Write = tuple[Statement, Params]
DAY_US = 86_400_000_000
EPOCH = date(1970, 1, 1)
PARALLEL = 8  # channel-days erased side by side
_BATCH = 10
_TERM_DAYS = 100_000  # days of one of the person's terms read at most
_CHUNK = 200  # channel-days handed to a child process at a time


def archive_of(team_id: str) -> str:
    return f"slack:{team_id}"


@dataclasses.dataclass
class Found:
    """Where the person is: channel -> message days, and the UTC hours of their posts' index."""

    days: dict[str, set[int]] = dataclasses.field(default_factory=dict)
    post_hours: set[int] = dataclasses.field(default_factory=set)

    def add(self, channel_id: str, day: int) -> None:
        self.days.setdefault(channel_id, set()).add(day)


def _today(db: Database) -> int:
    return day_of(int(db.clock.time() * 1_000_000))


class Erasure:
    """One request: `run()` erases, `counts` / `held` say what it did and what holds kept."""

    def __init__(self, db: Database, team_id: str, user_id: str, request: ledger.Request | None, *,
                 files: ObjectStore | None, progress: Callable[[int], None] | None = None,
                 parallel: int = PARALLEL, processes: int = 1) -> None:
        self.db, self.team_id, self.user_id, self.request, self.files = db, team_id, user_id, request, files
        self.progress = progress or (lambda _n: None)
        self.parallel = parallel
        self.archive = archive_of(team_id)
        self.dry_run = request is None  # count what would change, write nothing
        self.counts: Counter[str] = Counter()
        self.held: Counter[str] = Counter()
        self._lock = threading.Lock()
        # Every write's timestamp: later than any event's, and than the rows written at the writer's own clock
        # (a thread's reply list, the index): the later of the two clocks.
        self.at = max(int(db.clock.time() * 1_000_000), int(time.time() * 1_000_000))
        self.own_hours: set[int] = set()  # hours of their posts erased (their posts index partitions)
        self.channel_holds = False  # a channel hold keeps some of their messages (set by `run`)
        self.processes = processes
        # (term, day) partitions whose postings of words this request deleted: read once at the end, dropped with
        # their listing row when nothing is left (a word of their messages alone is content).
        self.word_days: set[tuple[str, int]] = set()
        self._author_days: set[int] = set()  # the days whose author-term partition this process dropped

    # -- where the person is ------------------------------------------------------------------------------------

    def find(self) -> Found:
        found = Found()
        today = _today(self.db)
        first = (date(activity_index.person_years(today)[0], 1, 1) - EPOCH).days
        sources = activity_index.sources_from(
            activity_index.start_sources(self.db, self.team_id, self.user_id, first, today + 1))
        for (channel_id, msg_day), source in sources.by_partition.items():
            found.add(channel_id, msg_day)
            found.post_hours.update(msg_day * 24 + hour for hour in source.post_hours)  # hours of the day
        for term in proof.person_terms(self.user_id):
            days = search_index.start_term_days(self.db, self.team_id, term, newest=today + 1, oldest=0,
                                                limit=_TERM_DAYS).result()
            for listed in days:
                postings = search_index.start_postings(self.db, self.team_id, term, listed.day, below=2**63 - 1,
                                                       at_least=0, limit=1_000_000).result()
                for posting in postings:
                    found.add(posting.channel_id, day_of(posting.ts))
        return found

    # -- the run ------------------------------------------------------------------------------------------------

    def run(self) -> None:
        found = self.find()
        held = policies.held(self.db, self.archive)
        self.channel_holds = bool(held.channels)
        channel_days = [(c, d) for c in sorted(found.days) for d in sorted(found.days[c])]
        kept = [(c, d) for c, d in channel_days if c in held.channels]
        if kept:
            self.held["channel_days (channel hold)"] += len(kept)
        wanted = [(c, d) for c, d in channel_days if c not in held.channels]
        if self.request is not None:
            ledger.add_channels(self.db, self.request, {c for c, _d in wanted})
        if self.processes > 1 and wanted:
            self._in_processes(wanted)
        else:
            pool = self.db.executor(f"erasure-{self.parallel}", self.parallel)
            for future in [pool.submit(self.channel_day, c, d) for c, d in wanted]:
                future.result()
        if not self.dry_run:
            self._empty_word_days()
            self._person(found, whole=not kept)

    def _in_processes(self, wanted: list[tuple[str, int]]) -> None:
        """The channel-days shared out over `processes` processes (each its own driver and interpreter: one
        process's statements are bound by its interpreter, not by the node), a chunk of channels at a time; each
        hands back what it counted and where it deleted postings."""
        by_channel: dict[str, list[int]] = {}
        for channel_id, day in wanted:
            by_channel.setdefault(channel_id, []).append(day)
        chunks, chunk = [], []
        for channel_id, days in sorted(by_channel.items()):
            chunk += [(channel_id, d) for d in days]
            if len(chunk) >= _CHUNK:
                chunks.append(chunk)
                chunk = []
        if chunk:
            chunks.append(chunk)
        context = multiprocessing.get_context("spawn")  # a child builds its own driver, never a forked one
        args = (self.db.settings, self.team_id, self.user_id, self.request, self.at, self.parallel,
                self.channel_holds, _portable(self.files))
        with context.Pool(self.processes, initializer=_child_start, initargs=args) as pool:
            for counts, hours, word_days, done in pool.imap_unordered(_child_chunk, chunks):
                self.counts.update(counts)
                self.own_hours.update(hours)
                self.word_days.update(word_days)
                self.progress(done)

    def _empty_word_days(self) -> None:
        """The (term, day) partitions of words whose postings this request deleted: those left empty go with
        their listing row. Read at the end (many messages and channels share a word's day), a day's terms by IN
        lists (search_index.empty_day_terms_writes)."""
        by_day: dict[int, list[str]] = {}
        for term, day in self.word_days:
            by_day.setdefault(day, []).append(term)
        pool = self.db.executor(f"erasure-{self.parallel}", self.parallel)
        futures = [pool.submit(search_index.empty_day_terms_writes, self.db, self.team_id, day, terms)
                   for day, terms in sorted(by_day.items())]
        writes = [w for future in futures for w in future.result()]
        self.db.execute_many(writes, batch_size=_BATCH)
        self.counts["word_days_dropped"] += sum(len(params[1]) for stmt, params in writes
                                                if stmt is search_index.DELETE_TERMS_DAY)

    def channel_day(self, channel_id: str, day: int) -> None:
        rows = messages.erasing_rows(self.db, self.team_id, channel_id, day)
        touched: list[tuple[int, int, str]] = []
        writes: list[Write] = []
        marks: set[dirty.Mark] = set()
        counts: Counter[str] = Counter()
        for part, row in rows:
            if row.user_id == self.user_id:
                writes += self._own(channel_id, part, row, touched, marks, counts)
            elif self._names(row):
                writes += self._others(channel_id, part, row, touched, marks, counts)
        if self.request is None:  # a dry run: what would change
            with self._lock:
                self.counts.update(counts)
                self.counts["channel_days"] += 1
            return
        if touched:
            # The ledger first: a request stopped after it knows what it was changing.
            self.db.execute_many(ledger.touched_writes(self.request, channel_id, touched), batch_size=_BATCH)
        mark_writes, keys = dirty.mark_writes(self.db, marks)
        self.db.execute_many([*writes, *mark_writes], batch_size=_BATCH)
        dirty.note_marked(self.db, keys)
        with self._lock:
            self.counts.update(counts)
            self.counts["channel_days"] += 1
        self.progress(1)

    def _names(self, row: Any) -> bool:
        u = self.user_id
        return (any(reactor == u for _emoji, reactor in row.reactions or ())
                or scrub.names(row.text, u) or scrub.names(row.original_text, u)
                or u in (row.mentions or ()) or row.parent_user_id == u
                or bool(row.content) and scrub.json_names(messages.decoded_content(row.content), u)
                or bool(row.edited_ts or row.edit_times))  # an earlier version may name them

    def _own(self, channel_id: str, part: int, row: Any, touched: list, marks: set, counts: Counter) -> list[Write]:
        team, day = self.team_id, day_of(row.ts)
        for file_id in row.files_stored or {}:  # first: a file must not outlive the row that names it
            touched.append((day, row.ts, f"file:{file_id}"))
            if self.files is not None:
                self.files.delete(object_key(team, channel_id, row.ts, file_id))
            counts["files"] += 1
        is_head = row.thread_ts is None or row.thread_ts == row.ts
        others_replied = is_head and any(author != self.user_id for author in (row.replies or {}).values())
        touched.append((day, row.ts, "tombstone" if others_replied else "erased"))
        if row.thread_ts is not None and row.thread_ts != row.ts:
            touched.append((day_of(row.thread_ts), row.thread_ts, f"reply:{row.ts}"))
        edited = row.edited_ts is not None or bool(row.edit_times)
        texts = [messages.searchable_text(row), row.original_text,
                 *(text for _v, text in (messages.versions(self.db, team, channel_id, row.ts) if edited else ()))]
        terms = search_index.every_term(channel_id, self.user_id, texts)
        # Words are content: a (term, day) partition left empty goes with its listing row (`_empty_word_days`, at
        # the end). A channel's or a flag's posting names no content: its listing may stay. Their author term's
        # day holds only their messages: dropped whole, unless a channel hold keeps some of them.
        author = search_index.author_term(self.user_id)
        structural = {search_index.channel_term(channel_id), *search_index.FLAGS}
        words = sorted(terms - structural - {author})
        writes = search_index.delete_posting_writes(team, channel_id, [(t, row.ts) for t in [*words, *structural]])
        with self._lock:
            self.word_days.update((t, day) for t in words)
            first_of_day = day not in self._author_days
            self._author_days.add(day)
        if self.channel_holds:
            writes += search_index.delete_posting_writes(team, channel_id, [(author, row.ts)])
        elif first_of_day:  # once a day: every message of theirs that day is in it
            writes += search_index.drop_term_day_writes(team, author, day)
        if is_head and not others_replied and row.replies:
            writes.append((messages.DELETE_THREAD, (team, channel_id, row.ts)))
        if row.thread_ts is not None and row.thread_ts != row.ts:
            writes.append(messages.reply_removed_write(team, channel_id, row.thread_ts, row.ts, at=self.at,
                                                       db=self.db))
        writes += messages.erase_writes(team, channel_id, part, row, keep_head=others_replied, at=self.at)
        for (_emoji, reactor), at in zip(row.reactions or (), row.reaction_times or (), strict=False):
            if reactor != self.user_id:  # the reactions they gave are gone from their days
                marks.update({dirty.whole_day(self.archive, reactor, at), dirty.whole_day(self.archive, reactor,
                                                                                        day * DAY_US)})
        counts["messages_tombstoned" if others_replied else "messages_erased"] += 1
        with self._lock:
            self.own_hours.add(row.ts // activity_index.HOUR_US)
        return writes

    def _others(self, channel_id: str, part: int, row: Any, touched: list, marks: set, counts: Counter
                ) -> list[Write]:
        team, u, day = self.team_id, self.user_id, day_of(row.ts)
        writes: list[Write] = []
        theirs = {(emoji, reactor) for emoji, reactor in row.reactions or () if reactor == u}
        if theirs:
            touched.append((day, row.ts, "reaction"))
            writes.append(messages.reactions_write(team, channel_id, row.ts, theirs, at=self.at, added=False,
                                                   db=self.db))
            if len(theirs) == len(row.reactions or ()):  # no reaction left: no longer found by has:reaction
                writes += search_index.expire_posting_writes(self.db, team, channel_id,
                                                             [(search_index.HAS_REACTION, row.ts)],
                                                             whole_before=None)
            counts["reactions_removed"] += len(theirs)
        content = messages.decoded_content(row.content) if row.content else None
        versions = messages.versions(self.db, team, channel_id, row.ts) if row.edited_ts or row.edit_times else []
        named_versions = [(v, scrub.text(t, u)) for v, t in versions if scrub.names(t, u)]
        raw = messages.raw_event(self.db, team, channel_id, row.ts)
        rewrite = (scrub.names(row.text, u) or scrub.names(row.original_text, u) or u in (row.mentions or ())
                   or row.parent_user_id == u or (content is not None and scrub.json_names(content, u))
                   or bool(named_versions))
        if rewrite:
            touched.append((day, row.ts, "mention"))
            new_text, new_original = scrub.text(row.text, u), scrub.text(row.original_text, u)
            new_content = scrub.json_value(content, u) if content else None
            writes += messages.rewrite_writes(
                team, channel_id, part, row.ts, at=self.at, text=new_text, original_text=new_original,
                content=new_content, mentions=set(row.mentions or ()) - {u} if row.mentions else None,
                parent_user_id=scrub.PLACEHOLDER_USER if row.parent_user_id == u else None,
                version_texts=named_versions, raw=scrub.json_value(raw, u) if raw is not None else None)
            # Postings follow the text: the terms only the old texts had go, the new text's are written.
            new_searchable = with_content_text(new_text, new_content)
            old_terms = search_index.every_term(channel_id, None, [messages.searchable_text(row), row.original_text,
                                                                   *(t for _v, t in versions)])
            new_terms = search_index.every_term(channel_id, None, [new_searchable, new_original,
                                                                   *(scrub.text(t, u) for _v, t in versions)])
            gone = sorted(old_terms - new_terms)
            writes += search_index.delete_posting_writes(team, channel_id, [(t, row.ts) for t in gone])
            with self._lock:
                self.word_days.update((t, day) for t in gone)
            added, _keys = search_index.posting_writes(self.db, team, channel_id, row.ts, row.user_id,
                                                       new_searchable, written_at=self.at)
            writes += added
            counts["messages_rewritten"] += 1
        elif raw is not None and scrub.json_names(raw, u):  # only the raw event names them (a reaction)
            writes.append((messages.INSERT_RAW, (team, channel_id, row.ts // messages.US_PER_HOUR, row.ts,
                                                 compress_json(scrub.json_value(raw, u)), self.at)))
        if row.user_id is not None:
            marks.add(dirty.whole_day(self.archive, row.user_id, day * DAY_US))
            for (_emoji, reactor), at in zip(row.reactions or (), row.reaction_times or (), strict=False):
                if reactor == u:
                    marks.add(dirty.whole_day(self.archive, row.user_id, at))
        return writes

    # -- what is theirs alone -----------------------------------------------------------------------------------

    def _person(self, found: Found, *, whole: bool) -> None:
        """Their index, stored days, profile, channels and reports. `whole`: no hold kept any of their days
        (else their index stays, naming the held days, and the request says so)."""
        team, u = self.team_id, self.user_id
        years = activity_index.person_years(_today(self.db))
        writes: list[Write] = []
        if whole:
            writes += activity_index.erase_person_writes(team, u, years, found.post_hours | self.own_hours)
            writes += self._person_terms()
        writes += activity_store.erase_account_writes(self.archive, u, range(years[0], years[-1] + 2))
        writes.append(users.erase_write(team, u))
        for channel_id, (creator, raw, listed) in sorted(channels.people_rows(self.db, team).items()):
            if creator == u or scrub.json_names(raw, u) or scrub.json_names(listed, u):
                writes.append(channels.rewrite_people_write(
                    team, channel_id, self.at, creator=scrub.PLACEHOLDER_USER if creator == u else None,
                    raw=scrub.json_value(raw, u) if raw is not None else None,
                    listed=scrub.json_value(listed, u) if listed is not None else None))
                self.counts["channels_rewritten"] += 1
        self.db.execute_many(writes, batch_size=_BATCH)
        self.counts["profile_erased"] = 1
        self._reports()

    def _person_terms(self) -> list[Write]:
        """The day listings of their terms (author, mention) left without postings: per-channel deletes left them
        when other channels' postings shared the day."""
        today = _today(self.db)
        writes: list[Write] = []
        for term in proof.person_terms(self.user_id):
            days = search_index.start_term_days(self.db, self.team_id, term, newest=today + 1, oldest=0,
                                                limit=_TERM_DAYS).result()
            writes += search_index.empty_term_day_writes(self.db, self.team_id, term, [r.day for r in days])
        return writes

    def _reports(self) -> None:
        """Every stored report that names the person, generated again from what the archive now holds."""
        before = "~"
        while True:
            entries, before = report_store.listing(self.db, self.team_id, limit=100, before=before)
            for entry in entries:
                stored = report_store.generations(self.db, self.team_id, entry["report_id"])
                if any(scrub.json_names(document, self.user_id) for document in stored):
                    period = Period(date.fromisoformat(entry["start"]), int(entry["days"]))
                    reports.generate(self.db, self.team_id, period,
                                     include_private=any(bool(d.get("include_private")) for d in stored))
                    report_store.drop_previous(self.db, self.team_id, entry["report_id"])
                    self.counts["reports_regenerated"] += 1
            if before is None:
                return


# -- child processes (`processes` > 1) ----------------------------------------------------------------------------
_CHILD: Erasure | None = None


_FROM_SETTINGS = "from settings"


def _portable(files: ObjectStore | None) -> ObjectStore | str | None:
    """The store itself when it can go to a child process (a local folder), else how to build it there (an S3
    client cannot be pickled: the child makes its own from the settings)."""
    if files is None:
        return None
    try:
        pickle.dumps(files)
    except Exception:  # noqa: BLE001 - any reason it cannot be pickled
        return _FROM_SETTINGS
    return files


def _child_start(settings: Any, team_id: str, user_id: str, request: ledger.Request | None, at: int, parallel: int,
                 channel_holds: bool, files: ObjectStore | str | None) -> None:
    global _CHILD
    from api.slack.files import store_from_settings

    db = Database(settings)
    store = store_from_settings(settings.slack) if files == _FROM_SETTINGS else files
    _CHILD = Erasure(db, team_id, user_id, request, files=store, parallel=parallel)  # type: ignore[arg-type]
    _CHILD.at, _CHILD.channel_holds = at, channel_holds  # the parent's: one request, one write time


def _child_chunk(channel_days: list[tuple[str, int]]) -> tuple[Counter[str], set[int], set[tuple[str, int]], int]:
    job = _CHILD
    assert job is not None
    pool = job.db.executor(f"erasure-{job.parallel}", job.parallel)
    for future in [pool.submit(job.channel_day, c, d) for c, d in channel_days]:
        future.result()
    with job._lock:
        found = (job.counts, job.own_hours, job.word_days, len(channel_days))
        job.counts, job.own_hours, job.word_days = Counter(), set(), set()
    return found


def erase(db: Database, team_id: str, user_id: str, *, requested_by: str, files: ObjectStore | None,
          progress: Callable[[int], None] | None = None, parallel: int = PARALLEL, processes: int = 1
          ) -> ledger.Request:
    """Erase a person (resuming their unfinished request, if any): the ledger row as it ends, proof included."""
    archive = archive_of(team_id)
    held = policies.held(db, archive)
    previous = ledger.find(db, archive, user_id)
    request = previous if previous is not None and previous.state in (ledger.RUNNING, ledger.FAILED) \
        else ledger.start(db, archive, user_id, requested_by)
    if held.archive or user_id in held.users:
        why = "archive" if held.archive else "user"
        return ledger.finish(db, request, ledger.HELD, {}, {f"request ({why} hold)": 1})
    ledger.set_state(db, request, ledger.RUNNING)
    waited = ledger.settle(db, request)  # every process's guard has the request before anything is read
    if waited:
        log.info("erasure_settled", archive=archive, request=str(request.request_id), seconds=round(waited, 1))
    job = Erasure(db, team_id, user_id, request, files=files, progress=progress, parallel=parallel,
                  processes=processes)
    try:
        job.run()
    except Exception:
        ledger.finish(db, request, ledger.FAILED, job.counts, job.held)
        raise
    # The proof before the state: a request reads `done` only with its proof.
    current = ledger.get(db, archive, request.request_id)
    result = proof.check(db, team_id, user_id, current, files=files)
    ledger.record_proof(db, current, result)
    done = ledger.finish(db, current, ledger.DONE, job.counts, job.held)
    log.info("erasure", archive=archive, request=str(done.request_id), counts=dict(job.counts),
             held=dict(job.held), traces=result["traces"])
    return done


def dry_run(db: Database, team_id: str, user_id: str, *, parallel: int = PARALLEL) -> dict[str, Any]:
    """What an erasure of the person would change (counts), and what holds would keep; nothing is written."""
    held = policies.held(db, archive_of(team_id))
    job = Erasure(db, team_id, user_id, None, files=None, parallel=parallel)
    job.run()
    refused = "archive" if held.archive else "user" if user_id in held.users else None
    return {"counts": dict(sorted(job.counts.items())), "held": dict(sorted(job.held.items())),
            "refused_by_hold": refused}


def prove(db: Database, team_id: str, user_id: str, *, files: ObjectStore | None) -> ledger.Request:
    """Run the proof check again on the person's last request (and record it)."""
    request = ledger.find(db, archive_of(team_id), user_id)
    if request is None:
        raise NotFound(f"no erasure request for this person in {archive_of(team_id)}")
    ledger.record_proof(db, request, proof.check(db, team_id, user_id, request, files=files))
    return ledger.get(db, request.archive, request.request_id)
