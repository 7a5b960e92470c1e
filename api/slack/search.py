"""Archive search over a Slack workspace (GET /slack/teams/{team}/search, the viewer's search page): Slack's
query syntax, answered from the search index (search_index.py) and confirmed against the messages.

Query syntax (docs/slack-search.md): words (all required), `"exact phrase"`, `-word` / `-"phrase"` (left out),
`in:#channel` (or a channel id; several in: are alternatives), `from:@user` (a name, a display name or a user
id; several from: are alternatives), `@user` / `#channel` (messages mentioning them), `before:` / `after:` /
`on:` a date (YYYY-MM-DD) and `during:` a year, month or day, in the reader's time zone, `has:file`,
`has:link`, `has:reaction`, `is:thread`. Words are found in a message's text and in the text of its
attachments and blocks (content.py). Results are newest first, paged with cursors.

The plan, bounded per request:
1. Every word, phrase word, mention, in: and from: becomes a clause: a set of index terms of which a message
   must hold at least one. The days on which all clauses occur are found by intersecting each term's day
   listing (newest first, a page of days at a time); a day where some clause never occurs is never read.
2. For each such day (a few at a time, concurrently) the postings of the driving clauses (in:, from:,
   mentions) are read up to PROBE (one bounded partition per term and day; the other clauses' too where none
   fits); the clauses known whole are intersected, and every other clause's terms are looked up at the
   candidates' ts only (`ts IN` reads), so a common word's day is never read: what is left are candidates.
3. Candidates are confirmed, newest first and only as many as the page needs, against the message row: the
   current text must still hold every word and phrase (an edit may have removed one: postings are never
   deleted), the message must not be deleted, and has:/is:/dates must hold. Channels a grant may not read are
   left out before anything is read.
has:file, has:link, has:reaction and is:thread are index terms too (search_index.flag_terms), so they drive
like a word; confirmation still checks them on the row (a reaction removed leaves a stale posting).

A request spends at most MAX_ROWS of read budget: a posting (read, or a ts looked up) costs 1, a message row
read to confirm a candidate CONFIRM_COST. The budget is checked before every read, not between batches: a
batch reads only as many days as it can afford, a day on which no clause fits in PROBE is read in slices the
budget affords, and candidates are confirmed a chunk at a time. A page cut short there (or at MAX_DAYS days)
still has a cursor, to the exact place it stopped (a day, or a ts inside it), and says up to which day it
searched: a rare combination of common words is paged, never a long request.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import re
import secrets
from calendar import monthrange
from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any

from api.activity.calendar import window, zone
from api.db import Database
from api.errors import BadPosition, InvalidQuery
from api.paging import BAD_POSITION, in_range, sign_cursor, verify_cursor
from api.slack import channels, content, messages, search_index, search_terms, term_filter, users
from api.slack.messages import Message
from api.slack.search_index import HAS_FILE, HAS_LINK, HAS_REACTION, IS_THREAD
from api.slack.search_terms import Token
from api.slack.timeutil import day_of

MAX_DAYS = 400          # candidate days one request reads before it answers with what it found
MAX_ROWS = 100_000      # read budget of one request: postings, plus CONFIRM_COST per message row confirmed
CONFIRM_COST = 10       # a message row (text, content, reactions) against a key-only posting row
DAY_PAGE = 128          # days of one term listed per read
PROBE = 256             # postings of a term and day read first: a clause that fits is not read whole
LOOKUP = 128            # candidate ts looked up in one read of a term's day (an IN list)
# Days of one term probed by one statement: a batch's days go out as several concurrent reads, so the node reads
# them on all its cores (an author's 64 busy days, 11,000 rows: 44 ms as one read, 26 ms as four, measured).
PROBE_DAYS = 16
WINDOW = 128            # days of one batch at most
MAX_CLAUSES = 12        # words, phrases and modifiers in one query
MAX_ALTERNATIVES = 16   # channels or users one in:/from:/mention may stand for
DIRECTORY_TTL = 30.0    # seconds a workspace's channel and user names are cached (db.caches)
FIRST_DAY, LAST_DAY = 0, 2**31 - 1
_MAX_US = 2**63 - 1

_MODIFIER = re.compile(r"^(in|from|before|after|on|during|has|is):(.*)$", re.IGNORECASE)
_PART = re.compile(r'(-?)"([^"]*)(?:"|$)|(\S+)')
_USER_REF = re.compile(r"^<@([UW][A-Z0-9]{2,})(?:\|[^>]*)?>$")
_CHANNEL_REF = re.compile(r"^<#([CGD][A-Z0-9]{2,})(?:\|[^>]*)?>$")
_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{2,}$")


class SearchError(InvalidQuery):
    """A query that cannot be answered as written (the reason is shown to the user: 422)."""


@dataclasses.dataclass
class Query:
    """A parsed query, before names are resolved to ids."""

    words: list[list[Token]] = dataclasses.field(default_factory=list)      # each in sequence (phrase)
    excluded: list[list[Token]] = dataclasses.field(default_factory=list)
    mentioned_users: list[str] = dataclasses.field(default_factory=list)    # as typed, without @
    mentioned_channels: list[str] = dataclasses.field(default_factory=list)
    in_channels: list[str] = dataclasses.field(default_factory=list)
    from_users: list[str] = dataclasses.field(default_factory=list)
    first: date | None = None     # inclusive, local dates
    last: date | None = None
    has_file: bool = False
    has_reaction: bool = False
    has_link: bool = False
    is_thread: bool = False

    def describe(self) -> dict[str, Any]:
        """What the query was understood as (shown with the results, so a reader sees how it was read)."""
        out = {
            "words": [" ".join(w) for w in self.words], "excluded": [" ".join(w) for w in self.excluded],
            "mentions": [f"@{u}" for u in self.mentioned_users] + [f"#{c}" for c in self.mentioned_channels],
            "in": self.in_channels, "from": self.from_users,
            "after": self.first.isoformat() if self.first else None,
            "before": self.last.isoformat() if self.last else None,
            "has": [h for h, on in (("file", self.has_file), ("link", self.has_link),
                                    ("reaction", self.has_reaction)) if on],
            "is": ["thread"] if self.is_thread else [],
        }
        return {k: v for k, v in out.items() if v}


def _date(value: str, modifier: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise SearchError(f"{modifier}: takes a date as YYYY-MM-DD, not {value[:40]!r}") from None


def _during(value: str) -> tuple[date, date]:
    if re.fullmatch(r"\d{4}", value):
        year = int(value)
        if not date.min.year <= year <= date.max.year:
            raise SearchError(f"during: {value!r} is not a year (0001 to 9999)")
        return date(year, 1, 1), date(year, 12, 31)
    if re.fullmatch(r"\d{4}-\d{2}", value):
        try:
            first = date(int(value[:4]), int(value[5:]), 1)
        except ValueError:
            raise SearchError(f"during: {value!r} is not a month") from None
        return first, first.replace(day=monthrange(first.year, first.month)[1])
    day = _date(value, "during")
    return day, day


def _narrow(query: Query, first: date | None, last: date | None) -> None:
    if first is not None and (query.first is None or first > query.first):
        query.first = first
    if last is not None and (query.last is None or last < query.last):
        query.last = last


def _nothing(query: Query) -> None:
    """A date range no day can be in (`after:9999-12-31`, `before:0001-01-01`): an empty range, which later
    modifiers cannot widen. Date arithmetic past Python's calendar (years 1..9999) is never done."""
    _narrow(query, date.max, date.min)


def _modifier(query: Query, key: str, value: str) -> None:
    if not value:
        raise SearchError(f"{key}: needs a value, e.g. {key}:{_EXAMPLES[key]}")
    if key == "in":
        query.in_channels.append(value)
    elif key == "from":
        query.from_users.append(value)
    elif key == "before":
        day = _date(value, key)
        if day == date.min:
            _nothing(query)
        else:
            _narrow(query, None, day - timedelta(days=1))
    elif key == "after":
        day = _date(value, key)
        if day == date.max:
            _nothing(query)
        else:
            _narrow(query, day + timedelta(days=1), None)
    elif key == "on":
        day = _date(value, key)
        _narrow(query, day, day)
    elif key == "during":
        _narrow(query, *_during(value))
    elif key == "has":
        if value.casefold() not in ("file", "reaction", "link"):
            raise SearchError(f"has: takes file, link or reaction, not {value[:40]!r}")
        setattr(query, f"has_{value.casefold()}", True)
    elif value.casefold() == "thread":  # is:
        query.is_thread = True
    else:
        raise SearchError(f"is: takes thread, not {value[:40]!r}")


_EXAMPLES = {"in": "#general", "from": "@ann", "before": "2024-05-01", "after": "2024-05-01", "on": "2024-05-01",
             "during": "2024-05", "has": "file", "is": "thread"}


def parse(q: str) -> Query:
    """The query `q` as clauses and filters; SearchError for a modifier it cannot read."""
    query = Query()
    for match in _PART.finditer(q):
        negated, phrase, bare = match.groups()
        if bare is None:  # a quoted phrase
            words = search_terms.tokens(phrase)
            if words:
                (query.excluded if negated else query.words).append(words)
            continue
        if bare.startswith("-") and len(bare) > 1:
            words = search_terms.tokens(bare[1:])
            if words:
                query.excluded.append(words)
            continue
        modifier = _MODIFIER.match(bare)
        if modifier:
            _modifier(query, modifier.group(1).casefold(), modifier.group(2))
        elif (ref := _USER_REF.match(bare)) or (bare.startswith("@") and len(bare) > 1):
            query.mentioned_users.append(ref.group(1) if ref else bare[1:])
        elif (ref := _CHANNEL_REF.match(bare)) or (bare.startswith("#") and len(bare) > 1):
            query.mentioned_channels.append(ref.group(1) if ref else bare[1:])
        else:
            # A token with punctuation inside (`e-mail`, `v1.2`, `東京都`) asks for its words in sequence.
            words = search_terms.tokens(bare)
            if words:
                query.words.append(words)
    return query


# -- names -> ids ----------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Directory:
    """A workspace's channels and users by id and by name, as search resolves and shows them."""

    channel_names: dict[str, str]              # channel id -> current name
    channels_by_name: dict[str, list[str]]     # case-folded name -> channel ids (current ids)
    chains: dict[str, list[str]]               # current channel id -> it and its previous ids
    private: frozenset[str]                    # channels.private_channels: ids whose messages need the private scope
    user_names: dict[str, str]                 # user id -> display name
    users_by_name: dict[str, list[str]]        # case-folded name / display name / real name -> user ids
    snapshot: str = ""                         # which load of the names this is (a page's ETag names it)


def _build_directory(db: Database, team_id: str) -> Directory:
    """The names part of the directory; `private` is filled by `directory` (its own cache, channels.py)."""
    rows = {r.channel_id: r for r in channels.every_indexed(db, team_id)}
    channel_names: dict[str, str] = {}
    by_name: dict[str, list[str]] = {}
    chains: dict[str, list[str]] = {}
    for channel_id, row in rows.items():
        if row.next_channel_id and row.next_channel_id in rows:
            continue  # an older id: listed in its newest id's chain
        chain, current = [], channel_id
        while current in rows and current not in chain and len(chain) < channels.MAX_ID_CHAIN:
            chain.append(current)
            current = rows[current].prev_channel_id
        chains[channel_id] = chain
        name = next((rows[c].name for c in chain if rows[c].name), None) or channel_id
        channel_names.update(dict.fromkeys(chain, name))
        by_name.setdefault(name.casefold().lstrip("#"), []).append(channel_id)
    user_names: dict[str, str] = {}
    users_by_name: dict[str, list[str]] = {}
    for row in users.every_user(db, team_id):
        user_names[row.user_id] = row.display_name or row.real_name or row.name or row.user_id
        for name in {row.name, row.display_name, row.real_name} - {None, ""}:
            users_by_name.setdefault(name.casefold(), []).append(row.user_id)
    return Directory(channel_names, by_name, chains, frozenset(), user_names, users_by_name, secrets.token_hex(8))


def directory(db: Database, team_id: str) -> Directory:
    """The workspace's directory: names read at most every DIRECTORY_TTL seconds (one index partition and the 8
    user buckets: bounded by the workspace's size); the private set from `channels.private_channels`, the one
    cache of it, so search, activity and the pages hide the same channels for the same time."""
    cache = db.caches.ttl("slack.search_directory", maxsize=256, ttl=DIRECTORY_TTL)
    names = cache.get_or_load(team_id, lambda: _build_directory(db, team_id))
    return dataclasses.replace(names, private=channels.private_channels(db, team_id))


def _user_ids(found: Directory, value: str, modifier: str) -> list[str]:
    ref = _USER_REF.match(value)
    name = ref.group(1) if ref else value.removeprefix("@")
    if _USER_ID.match(name) and (name in found.user_names or not found.users_by_name.get(name.casefold())):
        return [name]
    ids = found.users_by_name.get(name.casefold())
    if not ids:
        raise SearchError(f"{modifier}: no user named @{name[:80]} in this workspace")
    return ids[:MAX_ALTERNATIVES]


def _channel_ids(found: Directory, value: str, modifier: str) -> list[str]:
    """The channel ids a name or id stands for, each with its previous ids (messages stay under the id they
    were posted with)."""
    ref = _CHANNEL_REF.match(value)
    name = ref.group(1) if ref else value.removeprefix("#")
    if _CHANNEL_ID.match(name) and (name in found.channel_names or not found.channels_by_name.get(name.casefold())):
        current = [c for c, chain in found.chains.items() if name in chain] or [name]
    else:
        current = found.channels_by_name.get(name.casefold(), [])
    if not current:
        raise SearchError(f"{modifier}: no channel named #{name[:80]} in this workspace")
    ids = [c for channel_id in current for c in found.chains.get(channel_id, [channel_id])]
    return ids[:MAX_ALTERNATIVES]


def iso_day(day: int) -> str:
    return (date(1970, 1, 1) + timedelta(days=day)).isoformat()


# -- the plan ----------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Hit:
    message: Message

    @property
    def reply_count(self) -> int:
        return self.message.reply_count


@dataclasses.dataclass(frozen=True)
class Position:
    """Where a page ends: the next page holds what comes after (day, ts, channel) in newest-first order; a
    page cut short by the budget resumes at the top of `day` (ts None)."""

    day: int
    ts: int | None = None
    channel_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"d": self.day, "t": self.ts, "c": self.channel_id}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Position:
        day, ts, channel_id = value.get("d"), value.get("t"), value.get("c", "")
        if not (isinstance(day, int) and not isinstance(day, bool) and FIRST_DAY - 1 <= day <= LAST_DAY):
            raise ValueError("bad day")
        if ts is not None and not in_range(ts, messages.MIN_US, messages.MAX_US):
            raise ValueError("bad ts")
        if not isinstance(channel_id, str):
            raise ValueError("bad channel")
        return cls(day, ts, channel_id)

    def before(self, ts: int, channel_id: str) -> bool:
        """Whether (ts, channel) comes after this position in newest-first order (so belongs to a later page)."""
        if self.ts is None:
            return True
        return ts < self.ts or (ts == self.ts and channel_id > self.channel_id)


@dataclasses.dataclass
class Page:
    hits: list[Hit]
    next_position: Position | None
    searched_to: int | None      # the oldest day read when the budget cut the page short
    query: Query
    directory: Directory


def _cursor_scope(team_id: str, q: str, tz: str | None) -> str:
    """What a search cursor is bound to: the workspace, the query and the time zone."""
    return "search|" + hashlib.sha256(f"{team_id}\0{q}\0{tz or ''}".encode()).hexdigest()[:32]


def sign_position(position: Position | None, secret: bytes, team_id: str, q: str, tz: str | None) -> str | None:
    """The cursor of the page after `position` (None at the end)."""
    return sign_cursor(position.to_json(), secret, _cursor_scope(team_id, q, tz)) if position else None


def read_position(cursor: str, secret: bytes, team_id: str, q: str, tz: str | None) -> Position:
    """The position a cursor of this query carries: BadCursor for a forged one or one of another query (from
    api/paging.py), BadPosition for a signed one that holds no position."""
    position = verify_cursor(cursor, secret, _cursor_scope(team_id, q, tz))
    try:
        return Position.from_json(position)
    except ValueError:
        raise BadPosition(BAD_POSITION) from None


class _TermDays:
    """The days a term occurs on, newest first, read a page at a time."""

    def __init__(self, db: Database, team_id: str, term: str, newest: int, oldest: int) -> None:
        self.db, self.team_id, self.term = db, team_id, term
        self.days: list[int] = []
        self.i = 0
        self.newest, self.oldest = newest, oldest
        self.done = newest < oldest
        self.pending: Any = None

    def prefetch(self) -> None:
        if not self.done and self.i >= len(self.days) and self.pending is None:
            self.pending = search_index.start_term_days(self.db, self.team_id, self.term, newest=self.newest,
                                                        oldest=self.oldest, limit=DAY_PAGE)

    def head(self) -> int | None:
        while self.i >= len(self.days):
            if self.done:
                return None
            self.prefetch()
            self.days, self.i, self.pending = [r.day for r in self.pending.result()], 0, None
            if len(self.days) < DAY_PAGE:
                self.done = True
            if self.days:
                self.newest = self.days[-1] - 1
        return self.days[self.i]

    def skip_to(self, day: int) -> None:
        """Drop the days after `day` (newer than it)."""
        while (head := self.head()) is not None and head > day:
            if self.days[-1] > day:  # the whole page is newer: read from `day` down next
                if self.done:
                    self.i = len(self.days)
                else:
                    self.days, self.i, self.newest = [], 0, min(self.newest, day)
            else:
                self.i += 1


def _common_days(clauses: list[list[_TermDays]]) -> Iterator[int]:
    """The days on which every clause has at least one of its terms, newest first."""
    for alternatives in clauses:
        for term in alternatives:
            term.prefetch()
    while True:
        heads = []
        for alternatives in clauses:
            found = [h for t in alternatives if (h := t.head()) is not None]
            if not found:
                return
            heads.append(max(found))
        target = min(heads)
        if all(h == target for h in heads):
            yield target
            target -= 1
        for alternatives in clauses:
            for term in alternatives:
                term.skip_to(target)
            for term in alternatives:
                term.prefetch()


@dataclasses.dataclass
class _Plan:
    db: Database
    team_id: str
    query: Query
    clauses: list[list[str]]                  # each: index terms, any of which will do
    words: list[list[Token]]
    excluded: list[list[Token]]
    references: list[set[str]]                # mention terms: a hit holds one of each set
    authors: set[str] | None
    channels: set[str] | None                 # in: channels (every id of each)
    lo_us: int
    hi_us: int                                # exclusive
    denied: frozenset[str]                    # channels whose messages this reader may not see
    # the clauses of text terms (words, mentions): those a posting's terms filter can decide
    checkable: frozenset[int] = frozenset()
    # clauses -> their check against a terms filter, made once a request
    checks: dict[tuple[int, ...], term_filter.TermCheck] = dataclasses.field(default_factory=dict)
    # clause -> [candidates looked up, kept] in this request: later stages look the most selective clause up
    # first, so the days it empties read nothing more
    survival: dict[int, list[int]] = dataclasses.field(default_factory=dict)

    def next_lookup(self, left: list[int]) -> int:
        """Of the clauses `left` to look up on a day, the one that kept the fewest candidates so far (in query
        order until measured); removed from `left`."""
        def kept(i: int) -> float:
            looked, held = self.survival.get(i, (0, 0))
            return (held + 1) / (looked + 2)
        best = min(left, key=lambda i: (kept(i), left.index(i)))
        left.remove(best)
        return best

    def check(self, clauses: tuple[int, ...]) -> term_filter.TermCheck:
        """The check of a terms filter against every clause of `clauses` (of `checkable`)."""
        found = self.checks.get(clauses)
        if found is None:
            found = self.checks[clauses] = term_filter.TermCheck(*(self.clauses[i] for i in clauses))
        return found


def _resolve(db: Database, team_id: str, query: Query, *, allow_private: bool, tz_name: str | None) -> _Plan:
    found = directory(db, team_id)
    clauses: list[list[str]] = []
    references: list[set[str]] = []
    for name in query.mentioned_users:
        references.append({f"@{u.casefold()}" for u in _user_ids(found, name, "@")})
    for name in query.mentioned_channels:
        references.append({f"#{c.casefold()}" for c in _channel_ids(found, name, "#")})
    clauses.extend(sorted(terms) for terms in references)
    authors: set[str] | None = None
    if query.from_users:
        authors = {u for value in query.from_users for u in _user_ids(found, value, "from")}
        clauses.append([search_index.author_term(u) for u in sorted(authors)])
    in_ids: set[str] | None = None
    if query.in_channels:
        in_ids = {c for value in query.in_channels for c in _channel_ids(found, value, "in")}
        clauses.append([search_index.channel_term(c) for c in sorted(in_ids)])
    for words in query.words:
        clauses.extend([search_terms.term_of(w)] for w in dict.fromkeys(words))
    # The flags are index terms: a has:/is: clause drives like a word (and may stand alone).
    for flag, wanted in ((HAS_FILE, query.has_file), (HAS_LINK, query.has_link),
                         (HAS_REACTION, query.has_reaction), (IS_THREAD, query.is_thread)):
        if wanted:
            clauses.append([flag])
    unique = list({tuple(sorted(c)): c for c in clauses}.values())
    if not unique:
        raise SearchError("a search needs a word, a \"phrase\", in:#channel, from:@user, a mention, has: or is:")
    if len(unique) > MAX_CLAUSES:
        raise SearchError(f"a search can hold at most {MAX_CLAUSES} words and modifiers, not {len(unique)}")
    tz = zone(tz_name)
    lo_us = window(query.first, tz)[0] if query.first else 0
    hi_us = window(query.last, tz)[1] if query.last else _MAX_US
    checkable = frozenset(i for i, clause in enumerate(unique) if not any(
        term.startswith(("from:", "in:")) or term in search_index.FLAGS for term in clause))
    return _Plan(db, team_id, query, unique, query.words, query.excluded, references, authors, in_ids, lo_us, hi_us,
                 frozenset() if allow_private else found.private, checkable)


def _confirmed(plan: _Plan, row: Any) -> bool:
    if row.msg_ts is None or row.deleted or not (plan.lo_us <= row.ts < plan.hi_us):
        return False
    if plan.authors is not None and row.user_id not in plan.authors:
        return False
    if plan.channels is not None and row.channel_id not in plan.channels:
        return False
    if plan.query.has_file and not row.files:
        return False
    if plan.query.has_reaction and not row.reactions:
        return False
    if plan.query.is_thread and not (
            (row.thread_ts is not None and row.thread_ts != row.ts) or (row.reply_count or 0) > 0):
        return False
    text = messages.searchable_text(row) if row.content else row.text
    if plan.query.has_link and not content.has_link(row.text, messages.decoded_content(row.content)):
        return False
    if plan.references:
        held = search_terms.references(text)
        if not all(terms & held for terms in plan.references):
            return False
    if plan.words or plan.excluded:
        stream = search_terms.tokens(text)
        if not all(search_terms.matches(words, stream) for words in plan.words):
            return False
        if any(search_terms.matches(words, stream) for words in plan.excluded):
            return False
    return True


class _Budget:
    """What one request may still read: postings cost 1 each, a confirmed message row CONFIRM_COST. Until the
    request has got past its start (`progressed`), one more read is allowed whatever is left: paging always
    ends."""

    def __init__(self, rows: int) -> None:
        self.left = rows
        self.spent = 0
        self.progressed = False
        self.held = 0  # of `left`, what the candidates waiting to be confirmed will cost: not for reading days

    def spend(self, n: int) -> None:
        self.left -= n
        self.spent += n


def _terms(plan: _Plan) -> int:
    return sum(len(clause) for clause in plan.clauses)


def _read_day(plan: _Plan, day: int, start: Position, limit: int) -> list[list[list[tuple[int, str]]]]:
    """Every term's postings of `day` (up to `limit` each, newest first), per clause, read concurrently."""
    futures = [[search_index.start_postings(plan.db, plan.team_id, term, day, below=_below(plan, day, start),
                                            at_least=plan.lo_us, limit=limit) for term in clause]
               for clause in plan.clauses]
    return [[[(r.ts, r.channel_id) for r in future.result()] for future in alternatives] for alternatives in futures]


def _kept_in_order(plan: _Plan, day: int, start: Position, rows: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Of one term's postings of a day (newest first, as the partition holds them), those this reader may see
    after `start`."""
    denied = plan.denied
    if day == start.day:
        return [c for c in rows if c[1] not in denied and start.before(*c)]
    return [c for c in rows if c[1] not in denied] if denied else rows


def _kept(plan: _Plan, day: int, start: Position, rows: set[tuple[int, str]]) -> list[tuple[int, str]]:
    return sorted(_kept_in_order(plan, day, start, list(rows)), key=lambda c: (-c[0], c[1]))


# Terms of an in:, a from: or a mention: a channel's, an author's or a mention's postings of a day are few, so
# these clauses are probed first and, when one fits, drive the day (a common word's day is then never read).
_DRIVING = ("in:", "from:", "@", "#")

Rows = list[list[tuple[int, str]]]  # per term of a clause, its (ts, channel) postings


def _probes(plan: _Plan, days: list[int], start: Position, indexes: list[int], budget: _Budget,
            filters: dict[tuple[int, str], bytes]) -> dict[int, dict[int, Rows]]:
    """day -> clause -> each term's first PROBE postings of that day. A term is read PROBE_DAYS days a statement
    (`day IN`, PER PARTITION LIMIT), but for the day the page resumes in (bounded by its position).
    The terms filters the postings carry (author's and channel's) go to `filters`, by (ts, channel)."""
    resumed = [day for day in days if day == start.day and start.ts is not None]
    rest = [day for day in days if day not in resumed]
    futures: list[tuple[int, int, int | None, Any]] = []  # clause, term, its day (None: the rows name it), read
    for i in indexes:
        for j, term in enumerate(plan.clauses[i]):
            for k in range(0, len(rest), PROBE_DAYS):
                futures.append((i, j, None, search_index.start_postings_of_days(
                    plan.db, plan.team_id, term, rest[k:k + PROBE_DAYS], below=plan.hi_us, at_least=plan.lo_us,
                    limit=PROBE)))
            for day in resumed:
                futures.append((i, j, day, search_index.start_postings(
                    plan.db, plan.team_id, term, day, below=_below(plan, day, start), at_least=plan.lo_us,
                    limit=PROBE)))
    out: dict[int, dict[int, Rows]] = {day: {i: [[] for _term in plan.clauses[i]] for i in indexes} for day in days}
    for i, j, day, future in futures:
        # Rows come a partition (day) after another: the list they go to changes once a day, not once a row.
        at, into = None, None
        for row_day, ts, channel_id, terms_filter in future.result():
            if day is not None:
                row_day = day
            if row_day != at:
                at, into = row_day, out[row_day][i][j]
            key = (ts, channel_id)
            into.append(key)
            if terms_filter is not None:
                filters[key] = terms_filter
    budget.spend(sum(len(rows) for by_clause in out.values() for alternatives in by_clause.values()
                     for rows in alternatives))
    return out


def _fitting(probed: dict[int, Rows]) -> list[int]:
    """The probed clauses known whole: every term of theirs had fewer postings than the probe read."""
    return [i for i, alternatives in probed.items() if all(len(rows) < PROBE for rows in alternatives)]


def _filtered(plan: _Plan, found: dict[int, list[tuple[int, str]]], day: int, todo: list[int],
              filters: dict[tuple[int, str], bytes]) -> list[int]:
    """Drop the day's candidates whose terms filter says their text lacks a word or mention clause of `todo`;
    returns the clauses still to look up: all of them while a candidate has no filter (a posting written before
    schema 0310), else those of flags, authors and channels only."""
    decided = tuple(i for i in todo if i in plan.checkable)
    if not decided:
        return todo
    may_hold = plan.check(decided).may_hold
    get = filters.get
    found[day] = kept = [c for c in found[day] if (candidate_filter := get(c)) is None or may_hold(candidate_filter)]
    if any(get(c) is None for c in kept):
        return todo
    return [i for i in todo if i not in decided]


def _lookup_packs(ts_of: dict[int, list[int]]) -> list[tuple[list[int], list[int]]]:
    """The reads of one clause's term for these days' candidates (day -> ts), as (days, ts) pairs: days with few
    candidates share a read (every ts looked for in every day: at most LOOKUP point reads), a day with many is
    read alone, LOOKUP ts at a time."""
    packs: list[tuple[list[int], list[int]]] = []
    pack_days: list[int] = []
    pack_ts: list[int] = []
    for day in sorted(ts_of):
        values = ts_of[day]
        if len(values) > LOOKUP // 4:
            packs += [([day], values[k:k + LOOKUP]) for k in range(0, len(values), LOOKUP)]
            continue
        if pack_days and (len(pack_days) + 1) * (len(pack_ts) + len(values)) > LOOKUP:
            packs.append((pack_days, pack_ts))
            pack_days, pack_ts = [], []
        pack_days.append(day)
        pack_ts += values
    if pack_days:
        packs.append((pack_days, pack_ts))
    return packs


def _look_up(plan: _Plan, found: dict[int, list[tuple[int, str]]], todo: dict[int, list[int]], budget: _Budget
             ) -> None:
    """Narrow each day's candidates (`found`) by the clauses left for it (`todo`), one clause per stage for all
    the days at once: a clause's terms are read at the candidates' ts only (point reads; the days of a clause
    with few candidates each share a statement, `_lookup_packs`), so a day whose candidates are gone reads
    nothing more. Stops (leaving the rest to confirmation) when the budget cannot afford a stage."""
    while True:
        stage = {day: plan.next_lookup(todo[day]) for day in found if found[day] and todo[day]}
        if not stage:
            return
        packs = {i: _lookup_packs({day: sorted({ts for ts, _channel in found[day]})
                                   for day, clause in stage.items() if clause == i})
                 for i in set(stage.values())}
        cost = sum(len(days) * len(ts) * len(plan.clauses[i]) for i, reads in packs.items() for days, ts in reads)
        if cost > budget.left:
            return
        budget.spend(cost)
        futures = [search_index.start_postings_at_days(plan.db, plan.team_id, term, days, ts)
                   for i, reads in packs.items() for term in plan.clauses[i] for days, ts in reads]
        held = {(r.day, r.ts, r.channel_id) for future in futures for r in future.result()}
        for day, i in stage.items():
            before = len(found[day])
            found[day] = [c for c in found[day] if (day, *c) in held]
            counts = plan.survival.setdefault(i, [0, 0])
            counts[0] += before
            counts[1] += len(found[day])


def _driving(plan: _Plan) -> list[int]:
    """The clauses probed first: in:, from: and mentions (every clause when the query has none)."""
    every = range(len(plan.clauses))
    return [i for i in every if all(term.startswith(_DRIVING) for term in plan.clauses[i])] or list(every)


def _day_candidates(plan: _Plan, days: list[int], start: Position, budget: _Budget
                    ) -> Iterator[tuple[int, list[tuple[int, str]], int | None]]:
    """(day, candidates newest first, cut) for each day in turn: the (ts, channel) that hold every clause's
    postings, after `start`. `cut` is None when the day was read to its end, else a ts: only candidates above it
    are known (the budget ran out inside the day) and the next page resumes at it.

    The days of the batch go through the same stages together. The driving clauses (in:, from:, mentions; every
    clause if there are none) are probed first, up to PROBE postings per term and day (a read per term for all
    the days); where none of them fits, the other clauses are probed too. A clause whose terms all fit is known
    whole: the intersection of the clauses known whole gives the candidates, and every other clause is looked up
    at the candidates' ts only (a point read per candidate in its term's day), a clause at a time, so what is
    left holds every term and confirmation reads only the messages that are answers but for an edit or a flag
    that stopped holding. A day on which no clause fits is read with as many rows per term as the budget
    affords: what every term covers (above the oldest ts of any term cut short) is intersected exactly, the rest
    is left to the next page."""
    every = list(range(len(plan.clauses)))
    driving = _driving(plan)
    filters: dict[tuple[int, str], bytes] = {}
    probed = _probes(plan, days, start, driving, budget, filters)
    unfit = [day for day in days if not _fitting(probed[day])]
    if unfit and len(driving) < len(every):
        # The batch was sized for the driving clauses' probes: the others are probed on as many of the days none
        # of them fits as the budget affords (the rest are read as far as it allows, below).
        others = [i for i in every if i not in driving]
        affordable = (budget.left - budget.held) // (sum(len(plan.clauses[i]) for i in others) * PROBE)
        unfit = unfit[:max(affordable, 0 if budget.progressed else 1)]
        more = _probes(plan, unfit, start, others, budget, filters)
        for day in unfit:
            probed[day].update(more[day])
    found: dict[int, list[tuple[int, str]]] = {}
    todo: dict[int, list[int]] = {}
    for day in days:
        if fitting := _fitting(probed[day]):
            only = probed[day][fitting[0]]
            if len(fitting) == 1 and len(only) == 1:  # one term known whole (a from: or an in:): already in order
                found[day] = _kept_in_order(plan, day, start, only[0])
            else:
                whole = set.intersection(*({row for rows in probed[day][i] for row in rows} for i in fitting))
                found[day] = _kept(plan, day, start, whole)
            todo[day] = _filtered(plan, found, day, [i for i in every if i not in fitting], filters)
    _look_up(plan, found, todo, budget)
    terms = _terms(plan)
    for day in days:
        if day in found:
            yield day, found[day], None
            continue
        # No clause fits: read the day as far as the budget allows (at least one row past the probe per term).
        free = budget.left - budget.held
        if free < terms * (PROBE + 1) and budget.progressed:
            return  # nothing of this day is answered: the page resumes at its top
        limit = min(search_index.WHOLE, max(PROBE + 1, free // terms))
        clauses = _read_day(plan, day, start, limit)
        budget.spend(sum(len(rows) for alternatives in clauses for rows in alternatives))
        cut: int | None = None
        for alternatives in clauses:
            for rows in alternatives:
                if len(rows) >= limit:  # cut short: only rows above its oldest ts are known (ties may be missing)
                    cut = rows[-1][0] if cut is None else max(cut, rows[-1][0])
        common = set.intersection(*({row for rows in alternatives for row in rows} for alternatives in clauses))
        if cut is not None:
            common = {c for c in common if c[0] > cut}
        yield day, _kept(plan, day, start, common), cut


def _below(plan: _Plan, day: int, start: Position) -> int:
    """The exclusive upper ts bound of a day's postings: the query's end, or just after the page's start."""
    return min(plan.hi_us, start.ts + 1 if day == start.day and start.ts is not None else _MAX_US)


def _confirm(plan: _Plan, candidates: list[tuple[int, str]]) -> list[Hit]:
    """The candidates that are answers, in the order given (one read per channel-day)."""
    groups: dict[tuple[str, int], list[int]] = {}
    for ts, channel_id in candidates:
        groups.setdefault((channel_id, day_of(ts)), []).append(ts)
    futures = {key: messages.start_candidates(plan.db, plan.team_id, key[0], key[1], ts_list)
               for key, ts_list in groups.items()}
    rows: dict[tuple[int, str], Any] = {}
    for (channel_id, _day), future in futures.items():
        for row in future.result():
            rows[(row.ts, channel_id)] = row
    hits = []
    for key in candidates:
        row = rows.get(key)
        if row is not None and _confirmed(plan, row):
            message = Message.from_row(row)
            if message is not None:
                hits.append(Hit(message))
    return hits


def search(db: Database, team_id: str, q: str, *, limit: int = 20, position: Position | None = None,
           allow_private: bool = False, tz: str | None = None) -> Page:
    """One page of the messages matching `q`, newest first, after `position` (None: from the newest)."""
    query = parse(q)
    plan = _resolve(db, team_id, query, allow_private=allow_private, tz_name=tz)
    newest = min(day_of(plan.hi_us - 1), LAST_DAY)
    start = position or Position(newest)
    newest = min(newest, start.day)
    oldest = max(day_of(plan.lo_us), FIRST_DAY)
    streams = [[_TermDays(db, team_id, term, newest, oldest) for term in clause] for clause in plan.clauses]
    days = _common_days(streams)
    hits: list[Hit] = []
    budget = _Budget(MAX_ROWS)
    # What a day of a batch may cost before the budget is checked again: its driving terms' probes and the
    # lookups of as many candidates (each later stage checks the budget before it reads).
    probe_cost = 2 * sum(len(plan.clauses[i]) for i in _driving(plan)) * PROBE
    days_read = 0
    window_size = 1
    done = start  # everything up to here is answered: where a page cut short resumes
    last_day = start.day  # the oldest day read

    def cut_short() -> Page:
        return Page(hits, done, last_day, query, directory(db, team_id))

    while len(hits) <= limit:
        size = min(window_size, budget.left // probe_cost, MAX_DAYS - days_read)
        if size <= 0:
            if budget.progressed:
                return cut_short()
            size = 1
        batch = list(itertools.islice(days, size))
        if not batch:
            return Page(hits, None, None, query, directory(db, team_id))
        days_read += len(batch)
        window_size = min(window_size * 2, WINDOW)
        answered = 0
        # Days whose candidates wait to be confirmed together: one round of reads for several days' few
        # candidates, not a round trip per day.
        pending: list[tuple[int, list[tuple[int, str]], int | None]] = []
        # A day is left pending only while the budget affords the confirmations and another day's reads (a
        # request with little left confirms day by day, so it still gets past its start within one day).
        for day, candidates, cut in itertools.chain(_day_candidates(plan, batch, start, budget), [(None, [], None)]):
            if day is not None:
                answered += 1
                last_day = day
                pending.append((day, candidates, cut))
                want = max(32, 2 * (limit + 1 - len(hits)))
                waiting = sum(len(c) for _d, c, _cut in pending)
                if waiting < want and cut is None and budget.left >= (waiting + want) * CONFIRM_COST + probe_cost:
                    budget.held = waiting * CONFIRM_COST
                    continue
            budget.held = 0
            if not pending:
                break
            queued = [(d, c) for d, candidates_of_day, _cut in pending for c in candidates_of_day]
            i = 0
            while i < len(queued) and len(hits) <= limit:
                want = max(32, 2 * (limit + 1 - len(hits)))
                affordable = budget.left // CONFIRM_COST
                if affordable <= 0:
                    if budget.progressed:
                        return cut_short()
                    affordable = 1
                chunk = queued[i:i + min(want, affordable)]
                budget.spend(len(chunk) * CONFIRM_COST)
                hits.extend(_confirm(plan, [c for _d, c in chunk]))
                i += len(chunk)
                done, budget.progressed = Position(chunk[-1][0], *chunk[-1][1]), True
            if len(hits) > limit:
                break
            last_pending, _c, last_cut = pending[-1]
            done = Position(last_pending - 1) if last_cut is None else Position(last_pending, last_cut, "")
            budget.progressed = True
            pending = []
            if last_cut is not None:
                return cut_short()
        if len(hits) <= limit and answered < len(batch):
            return cut_short()  # the budget ran out before a day of the batch could be read
        if hits:  # the next batch: the days the answers so far say the page still needs, and a quarter more
            window_size = max(1, min(window_size, -(-5 * (limit + 1 - len(hits)) * days_read // (4 * len(hits)))))
    hits = hits[:limit + 1]
    last = hits[limit - 1].message
    return Page(hits[:limit], Position(day_of(last.ts), last.ts, last.channel_id), None, query,
                directory(db, team_id))


# -- indexing what was archived before search existed ------------------------------------------------------------

def index_channel(db: Database, team_id: str, channel_id: str, *, dry_run: bool = False, restart: bool = False,
                  filters_only: bool = False, progress: Any = None) -> tuple[int, int]:
    """Write the postings of every message of one channel, newest day first, recording after each day how far
    it came: a run that stops resumes at that day (`restart` starts over). Postings are insert-only and the same
    message always gives the same rows, so indexing twice changes nothing. Returns (messages, rows written:
    postings and day listings) of this run; `dry_run` counts them and writes nothing. `progress(n)` is called
    with each day's messages.

    Version 2 also writes the has:/is: flags, version 3 (search_index.BACKFILL_VERSION) the author's and the
    channel's postings with the filter of the text's terms. A channel an earlier version finished is walked
    again from the newest day writing only what it lacks: version 1's the flags and those two postings
    (`flags_only`), version 2's those two postings (`filters_only`); one left unfinished is indexed again whole
    (or, left by version 2 in its flags-only walk, walked again flags-only). `filters_only`: a channel never
    indexed here is known to have its words and flags (archived at ingest since schema 0180); a channel this
    command indexed is brought up to date by its recorded version whatever `filters_only` says."""
    recorded = search_index.progress(db, team_id).get(channel_id)
    state = None if restart else recorded
    next_day, total, flags_only = LAST_DAY, 0, False
    filters_only = filters_only and recorded is None
    if state is not None and state.version == search_index.BACKFILL_VERSION:
        next_day, total, flags_only, filters_only = (state.next_day, state.messages, state.flags_only,
                                                     state.filters_only)
    elif state is not None:
        finished = state.next_day < 0
        filters_only = finished and state.version == 2
        flags_only = not filters_only and (finished or state.flags_only)
    indexed = rows = 0
    if next_day < 0:
        return 0, 0
    for day in sorted(messages.all_days(db, team_id, channel_id, last_day=next_day), reverse=True):
        writes, listed, count = [], [], 0
        for row in messages.start_days_read(db, team_id, channel_id, [day]).result():
            if row.msg_ts is None:
                continue
            decoded = messages.decoded_content(row.content) if row.content else None
            flags = [] if filters_only else search_index.flag_terms(
                files=row.files, text=row.text, message_content=decoded, ts=row.ts, thread_ts=row.thread_ts,
                reacted=bool(row.reactions), replied=(row.reply_count or 0) > 0)
            day_writes, keys = search_index.posting_writes(
                db, team_id, channel_id, row.ts, row.user_id, messages.searchable_text(row), flags=flags,
                thread_ts=row.thread_ts, words=not (flags_only or filters_only),
                written_at=max(row.ts, row.edited_ts or 0))
            writes.extend(day_writes)
            listed.extend(keys)
            count += 1
        indexed += count
        writes = list(dict.fromkeys(writes))  # a term's day listing (and a head's is:thread) once per day
        rows += len(writes)
        if not dry_run:
            db.execute_many(writes)
            search_index.note_indexed(db, listed)
            search_index.record_progress(db, team_id, channel_id, day - 1, total + indexed, flags_only=flags_only,
                                         filters_only=filters_only)
        if progress is not None:
            progress(count)
    if not dry_run:
        search_index.record_progress(db, team_id, channel_id, -1, total + indexed, flags_only=flags_only,
                                     filters_only=filters_only)
    return indexed, rows
