"""Archive search against a brute-force reference: a workspace generated through signed Events API requests
(posts, replies, edits that add and remove words, deletes, reactions added and removed, files, a rename, a
private channel, events out of order), and for every query the full paged answer compared with a scan of the
test's own model of the final state (written here from the rules in docs/slack-search.md, not from the code)."""

from __future__ import annotations

import dataclasses
import json
import random
import re
import unicodedata
import zlib
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner

from api.cli import chronicle as cli
from api.db import Statement
from api.slack import search
from tests.slack.helpers import (
    ALL,
    channel_event,
    created,
    delete,
    edit,
    msg,
    post_event,
    reaction,
    rename,
)

TEAM = "TSEARCH1"  # token-search-public (tests/helpers.py) may read it, without the private scope
PUBLIC_ONLY = {"Authorization": "Bearer token-search-public"}
BASE = datetime(2026, 1, 1, tzinfo=UTC)
DAYS = 30
USERS = {"UANN1": ("ann", "Ann Lee"), "UBOB2": ("bob", "Bob Ray"), "UZOE3": ("zoe", "Zoë Kraft")}
CHANNELS = {"CGEN1": "general", "CRND2": "random", "CSEC3": "secret"}
VOCAB = ["deploy", "deployed", "rollback", "incident", "café", "cafe", "naïve", "coffee", "release", "notes",
         "東京都", "京都", "database", "latency", "budget", "alpha", "beta", "gamma"]


@dataclasses.dataclass
class Model:
    channel: str
    ts: int                      # µs
    user: str
    text: str
    thread_ts: int | None = None
    files: bool = False
    reactions: set = dataclasses.field(default_factory=set)
    deleted: bool = False
    replies: int = 0


def _ts(us: int) -> str:
    return f"{us // 1_000_000}.{us % 1_000_000:06d}"


def _text(rng: random.Random, mention: bool) -> str:
    words = rng.sample(VOCAB, rng.randint(1, 5))
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words) + 1), "rolled back")
    if zlib.crc32(" ".join(words).encode()) % 8 == 0:  # a link (has:link; its words are none of VOCAB's),
        words.append("<https://example.org/page|runbook>")  # chosen without drawing from `rng`
    if mention:
        words.append(rng.choice(["<@UANN1>", "<@UBOB2|bob>", "<#CRND2|random>"]))
    return " ".join(words)


@pytest.fixture(scope="module")
def archive(app) -> dict[tuple[str, int], Model]:
    """The generated workspace; returns the model of every message's final state."""
    client = app.test_client()
    rng = random.Random(13)
    start = int(BASE.timestamp() * 1_000_000)

    def send(event: dict[str, Any]) -> None:
        r = post_event(client, TEAM, event)
        assert r.status_code == 200, r.data

    for i, (channel, name) in enumerate(CHANNELS.items()):
        send(created(channel, name, _ts(start - 86_400_000_000 + i)))
    send(channel_event("channel_convert_to_private", "CSEC3", _ts(start - 80_000_000_000)))
    for user, (name, real) in USERS.items():
        send({"type": "team_join", "event_ts": _ts(start - 86_000_000_000), "user": {
            "id": user, "name": name, "real_name": real, "updated": int(BASE.timestamp()) - 86_000,
            "profile": {"display_name": name, "real_name": real}}})

    model: dict[tuple[str, int], Model] = {}
    late: list[dict[str, Any]] = []  # events delivered after everything else (Slack retries, reordering)
    for n in range(260):
        channel = rng.choice(list(CHANNELS))
        ts = start + rng.randrange(DAYS * 86_400) * 1_000_000 + n  # distinct ts
        user = rng.choice(list(USERS))
        heads = [m for m in model.values() if m.channel == channel and m.thread_ts is None and m.ts < ts]
        m = Model(channel, ts, user, _text(rng, rng.random() < 0.15))
        extra: dict[str, Any] = {}
        if heads and rng.random() < 0.2:
            head = rng.choice(heads)
            m.thread_ts = head.ts
            extra["thread_ts"] = _ts(head.ts)
        if rng.random() < 0.15:
            m.files = True
            extra.update(subtype="file_share", files=[{"id": f"F{n:05d}", "name": f"f{n}.txt",
                                                     "mimetype": "text/plain",
                                                     "url_private": "http://127.0.0.1:9/f"}])
        event = msg(channel, _ts(ts), m.text, user=user, **extra)
        send(event)
        model[(channel, ts)] = m
        if m.thread_ts is not None:
            model[(channel, m.thread_ts)].replies += 1
    messages = list(model.values())
    for m in rng.sample(messages, 40):  # edits, some out of order (the newer edit first)
        new_text = _text(rng, False)
        at = m.ts + 3_600_000_000
        event = edit(m.channel, _ts(m.ts), new_text, m.text, _ts(at), user=m.user,
                     **({"thread_ts": _ts(m.thread_ts)} if m.thread_ts else {}))
        if rng.random() < 0.3:
            older = edit(m.channel, _ts(m.ts), "stale words only", m.text, _ts(at - 1_000_000), user=m.user,
                         **({"thread_ts": _ts(m.thread_ts)} if m.thread_ts else {}))
            late.append(older)
        send(event)
        m.text = new_text
    for m in rng.sample(messages, 60):
        for user in rng.sample(list(USERS), rng.randint(1, 2)):
            send(reaction("added", m.channel, _ts(m.ts), "tada", user, _ts(m.ts + 10_000_000)))
            m.reactions.add(user)
        if rng.random() < 0.25:
            for user in list(m.reactions):
                send(reaction("removed", m.channel, _ts(m.ts), "tada", user, _ts(m.ts + 20_000_000)))
            m.reactions.clear()
    for m in rng.sample([m for m in messages if not m.replies], 25):
        event = delete(m.channel, _ts(m.ts), _ts(m.ts + 30_000_000))
        if m.thread_ts is not None:  # as Slack sends a reply's delete: the reply names its thread
            event["previous_message"].update(user=m.user, thread_ts=_ts(m.thread_ts))
        send(event)
        m.deleted = True
        if m.thread_ts is not None:
            model[(m.channel, m.thread_ts)].replies -= 1
    for event in late:
        send(event)
    send(rename("CGEN1", "townhall", _ts(start + DAYS * 86_400_000_000)))
    return model


# -- the reference: rules of docs/slack-search.md, written independently of api/slack/search*.py --------------

def _cjk(ch: str) -> bool:
    return unicodedata.name(ch, "").startswith(("CJK", "HIRAGANA", "KATAKANA", "HANGUL"))


def _words(text: str) -> list[str]:
    text = re.sub(r"<[@#][^>]*>", " ", text)
    text = unicodedata.normalize("NFKC", text).casefold()
    out: list[str] = []
    for word in re.findall(r"\w+", text):
        run = ""
        for ch in word + " ":
            if ch != " " and _cjk(ch):
                run += ch
                continue
            if run:
                out.extend([run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)])
                run = ""
        rest = "".join(" " if _cjk(ch) else ch for ch in word).split()
        # non-CJK parts keep their position only approximately; the vocabulary never mixes scripts in a word
        out.extend(rest)
    return out


def _bare(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", word) if not unicodedata.combining(c))


def _has(m: Model, phrase: str) -> bool:
    query, stream = _words(phrase), _words(m.text)
    def same(q: str, t: str) -> bool:
        return t == q or (_bare(q) == q and _bare(t) == q)
    return any(all(same(q, stream[i + j]) for j, q in enumerate(query)) for i in range(len(stream) - len(query) + 1))


def _day(m: Model, tz: str = "UTC") -> date:
    return datetime.fromtimestamp(m.ts / 1e6, ZoneInfo(tz)).date()


def _mentions(m: Model) -> set[str]:
    return {x.upper() for x in re.findall(r"<[@#]([A-Z0-9]+)", m.text)}


QUERIES: list[tuple[str, Any]] = [
    ("deploy", lambda m: _has(m, "deploy")),
    ("cafe", lambda m: _has(m, "cafe")),
    ("café", lambda m: _has(m, "café")),
    ("CAFÉ naive", lambda m: _has(m, "café") and _has(m, "naive")),
    ("京都", lambda m: _has(m, "京都")),
    ("東京都", lambda m: _has(m, "東京都")),
    ('"rolled back" release', lambda m: _has(m, "rolled back") and _has(m, "release")),
    ('"back rolled"', lambda m: _has(m, "back rolled")),
    ("deploy -budget", lambda m: _has(m, "deploy") and not _has(m, "budget")),
    ("in:#random", lambda m: m.channel == "CRND2"),
    ("in:#townhall latency", lambda m: m.channel == "CGEN1" and _has(m, "latency")),
    ("in:CGEN1 in:#random alpha", lambda m: m.channel in ("CGEN1", "CRND2") and _has(m, "alpha")),
    ("from:@ann", lambda m: m.user == "UANN1"),
    ("from:@zoe beta", lambda m: m.user == "UZOE3" and _has(m, "beta")),
    ("from:UBOB2 from:@zoe gamma", lambda m: m.user in ("UBOB2", "UZOE3") and _has(m, "gamma")),
    ("@ann", lambda m: "UANN1" in _mentions(m)),
    ("#random coffee", lambda m: "CRND2" in _mentions(m) and _has(m, "coffee")),
    ("incident has:reaction", lambda m: _has(m, "incident") and bool(m.reactions)),
    ("has:file in:#random", lambda m: m.files and m.channel == "CRND2"),
    ("is:thread", lambda m: m.thread_ts is not None or m.replies > 0),  # a flag alone drives
    ("has:file", lambda m: m.files),
    ("has:reaction", lambda m: bool(m.reactions)),
    ("has:link", lambda m: "<https://" in m.text),
    ("has:link deploy -budget", lambda m: "<https://" in m.text and _has(m, "deploy") and not _has(m, "budget")),
    ("in:#random is:thread", lambda m: m.channel == "CRND2" and (m.thread_ts is not None or m.replies > 0)),
    ("notes after:2026-01-10 before:2026-01-20",
     lambda m: _has(m, "notes") and date(2026, 1, 10) < _day(m) < date(2026, 1, 20)),
    ("database on:2026-01-05", lambda m: _has(m, "database") and _day(m) == date(2026, 1, 5)),
    ("release during:2026-01", lambda m: _has(m, "release") and _day(m).month == 1),
    ("stale words", lambda m: _has(m, "stale words")),
    ("release 京都 東京都", lambda m: _has(m, "release") and _has(m, "京都") and _has(m, "東京都")),
    # driven by an author or a channel, the other clauses decided by the postings' terms filters
    ("from:@zoe @ann", lambda m: m.user == "UZOE3" and "UANN1" in _mentions(m)),
    ("in:#townhall #random", lambda m: m.channel == "CGEN1" and "CRND2" in _mentions(m)),
    ("in:#random 京都", lambda m: m.channel == "CRND2" and _has(m, "京都")),
    ("from:@zoe cafe", lambda m: m.user == "UZOE3" and _has(m, "cafe")),
    ("from:@zoe café", lambda m: m.user == "UZOE3" and _has(m, "café")),
    ('in:#townhall "rolled back"', lambda m: m.channel == "CGEN1" and _has(m, "rolled back")),
    ("from:@ann deploy -budget", lambda m: m.user == "UANN1" and _has(m, "deploy") and not _has(m, "budget")),
]


def reference(archive: dict, predicate: Any, *, private: bool = True) -> list[tuple[str, str]]:
    found = [m for m in archive.values()
             if not m.deleted and (private or m.channel != "CSEC3") and predicate(m)]
    found.sort(key=lambda m: (-m.ts, m.channel))
    return [(m.channel, _ts(m.ts)) for m in found]


def run_search(client, q: str, *, headers=ALL, limit: int = 7, **params: Any) -> list[dict[str, Any]]:
    """Every page of a search, following next_cursor."""
    out: list[dict[str, Any]] = []
    cursor = None
    for _ in range(200):
        r = client.get(f"/slack/teams/{TEAM}/search", headers=headers,
                       query_string={"q": q, "limit": limit, **({"cursor": cursor} if cursor else {}), **params})
        assert r.status_code == 200, (q, r.json)
        assert len(r.json["messages"]) <= limit
        out.extend(r.json["messages"])
        cursor = r.json.get("next_cursor")
        if not cursor:
            return out
    raise AssertionError("paging did not end")


@pytest.mark.parametrize(("q", "predicate"), [(q, p) for q, p in QUERIES if p is not None])
def test_search_equals_the_brute_force_reference(client, archive, q, predicate):
    expected = reference(archive, predicate)
    got = run_search(client, q)
    assert [(m["channel_id"], m["ts"]) for m in got] == expected
    assert expected or q in ('"back rolled"', "stale words"), f"query {q!r} selects nothing: a weak test"
    for m in got:  # what is shown is the message's current state
        model = archive[(m["channel_id"], int(m["ts"].replace(".", "")))]
        assert m["text"] == model.text and "deleted" not in m


@pytest.mark.parametrize("probe", [1, 3, 12])
def test_days_read_whole_give_the_same_answers(client, archive, monkeypatch, probe):
    """With a tiny first read per term and day, most days are read whole and intersected (the path a common
    word's busy day takes) instead of being confirmed from the one clause that fits; with a small one, an in: or
    from: fits on some days and not on others (its words probed too, or only looked up)."""
    monkeypatch.setattr(search, "PROBE", probe)
    for q, predicate in QUERIES[:18]:
        if predicate is not None:
            assert [(m["channel_id"], m["ts"]) for m in run_search(client, q)] == reference(archive, predicate), q


def test_reader_time_zone_moves_day_boundaries(client, archive):
    # 2026-01-05 in Tokyo is 2026-01-04T15:00Z .. 2026-01-05T15:00Z
    q = "database on:2026-01-05"
    expected = reference(archive, lambda m: _has(m, "database") and _day(m, "Asia/Tokyo") == date(2026, 1, 5))
    assert [(m["channel_id"], m["ts"]) for m in run_search(client, q, tz="Asia/Tokyo")] == expected
    assert expected != reference(archive, lambda m: _has(m, "database") and _day(m) == date(2026, 1, 5))


def test_private_channel_needs_the_private_scope(client, archive):
    expected = reference(archive, lambda m: _has(m, "deploy"), private=False)
    got = run_search(client, "deploy", headers=PUBLIC_ONLY)
    assert [(m["channel_id"], m["ts"]) for m in got] == expected
    assert any(m.channel == "CSEC3" and _has(m, "deploy") and not m.deleted for m in archive.values())


def test_results_carry_channel_names_and_thread_sizes(client, archive):
    got = run_search(client, "in:#townhall", limit=100)
    assert got and {m["channel_name"] for m in got} == {"townhall"}
    heads = [m for m in got if m.get("reply_count")]
    for m in heads:
        assert m["reply_count"] == archive[("CGEN1", int(m["ts"].replace(".", "")))].replies


def test_a_read_budget_cuts_pages_short_and_paging_still_finds_everything(client, archive, monkeypatch):
    monkeypatch.setattr(search, "MAX_DAYS", 2)
    q = "budget rollback"
    expected = reference(archive, lambda m: _has(m, "budget") and _has(m, "rollback"))
    pages, got, cursor = 0, [], None
    while True:
        r = client.get(f"/slack/teams/{TEAM}/search", headers=ALL,
                       query_string={"q": q, "limit": 50, **({"cursor": cursor} if cursor else {})})
        assert r.status_code == 200
        pages += 1
        got.extend(r.json["messages"])
        cursor = r.json.get("next_cursor")
        if r.json.get("searched_to"):
            assert cursor, "a page cut short has a cursor"
        if not cursor:
            break
    assert [(m["channel_id"], m["ts"]) for m in got] == expected
    assert pages > 3


class _Meter:
    """Rows one request reads, counted from the reads themselves: postings returned, message rows asked for."""

    def __init__(self, monkeypatch) -> None:
        from api.slack import messages, search_index
        self.postings = self.confirmed = 0
        self.probes: list[str] = []   # terms whose postings of a day were read
        self.lookups: list[str] = []  # terms looked up at candidates' ts
        self.point_reads = 0          # point reads of those lookups
        start_postings, start_candidates = search_index.start_postings, messages.start_candidates
        start_postings_at_days = search_index.start_postings_at_days
        start_postings_of_days = search_index.start_postings_of_days
        meter = self

        class Counted:
            def __init__(self, future) -> None:
                self.future = future

            def result(self):
                rows = list(self.future.result())
                meter.postings += len(rows)
                return rows

        def candidates(db, team_id, channel_id, day, ts_list):
            meter.confirmed += len(ts_list)
            return start_candidates(db, team_id, channel_id, day, ts_list)

        def looked_up(db, team_id, term, days, ts_values):
            meter.postings += len(days) * len(ts_values)  # a point read per day and value asked for, found or not
            meter.point_reads += len(days) * len(ts_values)
            meter.lookups.append(term)
            return start_postings_at_days(db, team_id, term, days, ts_values)

        def probed(db, team_id, term, *args, **kwargs):
            meter.probes.append(term)
            return Counted(start_postings(db, team_id, term, *args, **kwargs))

        def probed_days(db, team_id, term, *args, **kwargs):
            meter.probes.append(term)
            return Counted(start_postings_of_days(db, team_id, term, *args, **kwargs))

        monkeypatch.setattr(search_index, "start_postings", probed)
        monkeypatch.setattr(search_index, "start_postings_at_days", looked_up)
        monkeypatch.setattr(search_index, "start_postings_of_days", probed_days)
        monkeypatch.setattr(messages, "start_candidates", candidates)

    def take(self) -> tuple[int, int]:
        out, self.postings, self.confirmed = (self.postings, self.confirmed), 0, 0
        return out


@pytest.mark.parametrize(("q", "predicate", "driver", "looked_up"), [
    ("in:#townhall latency alpha", lambda m: m.channel == "CGEN1" and _has(m, "latency") and _has(m, "alpha"),
     "in:cgen1", set()),
    ("from:@zoe beta has:reaction", lambda m: m.user == "UZOE3" and _has(m, "beta") and m.reactions, "from:uzoe3",
     {"has:reaction"}),
])
def test_an_in_or_a_from_drives_and_the_words_are_decided_by_its_filters(client, archive, monkeypatch, q, predicate,
                                                                          driver, looked_up):
    """A channel's or an author's postings of a day are read; their terms filters drop the candidates without
    the words (no word is read by day or looked up), and only flags, which change after the text is written,
    are looked up at the candidates' ts. The messages confirmed are the answers, plus the filters' rare false
    positives and those a deletion or a removed reaction made stale (postings are never deleted)."""
    meter = _Meter(monkeypatch)
    got = run_search(client, q, limit=50)
    expected = reference(archive, predicate)
    assert [(m["channel_id"], m["ts"]) for m in got] == expected and expected
    assert set(meter.probes) == {driver} and set(meter.lookups) == looked_up
    # The archive's 25 deleted and 60 reacted-to messages (a quarter of them un-reacted) may be stale; the
    # filters' false positives (about 0.6% a word) stay below 5.
    assert len(expected) <= meter.confirmed <= len(expected) + 25 + 60 + 5, meter.confirmed
    everyone = [m for m in archive.values() if driver in (f"in:{m.channel.casefold()}", f"from:{m.user.casefold()}")]
    assert meter.confirmed < len(everyone) / 2  # a plan that confirmed every driving posting fails here


def test_the_clause_that_keeps_fewest_candidates_is_looked_up_first(client, archive, monkeypatch):
    """Lookups go clause by clause; after the first days the clause that kept the fewest candidates goes first,
    so the days it empties read nothing more, whatever the query's order. Measured against the query's order
    (the plan before), which looks a common word up on every day. The words' terms filters are left unused, as
    for postings written before schema 0310 (words are then looked up like flags)."""
    zoes = [m for m in archive.values() if m.user == "UZOE3" and not m.deleted]
    by_share = sorted(VOCAB[:10], key=lambda w: sum(_has(m, w) for m in zoes))
    common = "rolled"  # in 30% of the messages (the phrase "rolled back")
    rare = next(w for w in by_share if any(_has(m, w) and _has(m, common) for m in zoes))
    expected = reference(archive, lambda m: m.user == "UZOE3" and _has(m, common) and _has(m, rare))
    assert expected

    def lookups(q: str) -> int:
        meter = _Meter(monkeypatch)
        monkeypatch.setattr(search, "_filtered", lambda plan, found, day, todo, filters: todo)
        got = run_search(client, q, limit=50)
        assert [(m["channel_id"], m["ts"]) for m in got] == expected, q
        monkeypatch.undo()
        return meter.point_reads

    rare_first, common_first = lookups(f"{rare} {common} from:@zoe"), lookups(f"{common} {rare} from:@zoe")
    monkeypatch.setattr(search._Plan, "next_lookup", lambda self, left: left.pop(0))  # the query's order
    in_query_order = lookups(f"{common} {rare} from:@zoe")
    assert common_first <= rare_first * 1.2, (common_first, rare_first)
    assert common_first < in_query_order, (common_first, in_query_order)


@pytest.mark.parametrize(("q", "probe"), [("in:#random", 256), ("deploy -budget", 1), ("has:link deploy", 1)])
def test_the_read_budget_counts_confirmations_and_holds_inside_a_batch(client, archive, monkeypatch, q, probe):
    """A small budget, checked before every read: no request reads more than it (postings, plus CONFIRM_COST per
    message row confirmed), whether the rows are candidates to confirm (in:#random: many per day), days read
    in slices (PROBE 1: no clause fits), or a flag; paging still gives the whole answer."""
    monkeypatch.setattr(search, "MAX_ROWS", 120)
    monkeypatch.setattr(search, "CONFIRM_COST", 10)
    monkeypatch.setattr(search, "PROBE", probe)
    meter = _Meter(monkeypatch)
    predicate = dict(QUERIES)[q] if q in dict(QUERIES) else (lambda m: "<https://" in m.text and _has(m, "deploy"))
    expected = reference(archive, predicate)
    got, cursor, pages = [], None, 0
    while True:
        r = client.get(f"/slack/teams/{TEAM}/search", headers=ALL,
                       query_string={"q": q, "limit": 50, **({"cursor": cursor} if cursor else {})})
        assert r.status_code == 200, r.json
        postings, confirmed = meter.take()
        # the budget, plus what one request may take past it to get anywhere: one day's probes, one row
        assert postings + 10 * confirmed <= 120 + 3 * probe + 10, (postings, confirmed)
        pages += 1
        got.extend(r.json["messages"])
        cursor = r.json.get("next_cursor")
        if not cursor:
            break
        assert pages < 300
    assert [(m["channel_id"], m["ts"]) for m in got] == expected and expected
    assert pages >= 2  # cut short at least once


@pytest.mark.parametrize(("params", "status", "reason"), [
    ({"q": "-deploy"}, 422, "a search needs a word"),
    ({"q": "x from:@nobody"}, 422, "no user named @nobody"),
    ({"q": "x in:#nowhere"}, 422, "no channel named #nowhere"),
    ({"q": "x on:2026-02-30"}, 422, "on: takes a date"),
    ({"q": "x has:star"}, 422, "has: takes file, link or reaction"),
    ({"q": ""}, 422, None),
    ({"q": "x", "limit": 0}, 422, None),
    ({"q": "x" * 1001}, 422, None),
    ({"q": "x", "cursor": "garbage"}, 400, None),
])
def test_bad_queries_get_a_reason(client, archive, params, status, reason):
    r = client.get(f"/slack/teams/{TEAM}/search", headers=ALL, query_string=params)
    assert r.status_code == status, r.json
    assert r.json.get("message") or r.json.get("errors")
    if reason:
        assert reason in r.json["message"]


def test_a_cursor_belongs_to_its_query(client, archive):
    first = client.get(f"/slack/teams/{TEAM}/search", headers=ALL, query_string={"q": "deploy", "limit": 2})
    cursor = first.json["next_cursor"]
    assert cursor
    other = client.get(f"/slack/teams/{TEAM}/search", headers=ALL,
                       query_string={"q": "release", "limit": 2, "cursor": cursor})
    assert other.status_code == 400


def test_access(client, archive):
    assert client.get(f"/slack/teams/{TEAM}/search", query_string={"q": "x"}).status_code == 401
    other = client.get("/slack/teams/T1/search", headers=PUBLIC_ONLY, query_string={"q": "x"})
    assert other.status_code == 403


def test_an_edit_is_searchable_at_once_and_old_words_stop_matching(client, archive):
    ts = _ts(int((BASE + timedelta(days=DAYS + 2)).timestamp() * 1_000_000))
    assert post_event(client, TEAM, msg("CRND2", ts, "zebracorn sighting", user="UANN1")).status_code == 200
    assert [m["ts"] for m in run_search(client, "zebracorn")] == [ts]
    later = _ts(int(ts.replace(".", "")) + 5_000_000)
    assert post_event(client, TEAM, edit("CRND2", ts, "unicornzebra sighting", "zebracorn sighting", later,
                                         user="UANN1")).status_code == 200
    assert run_search(client, "zebracorn") == []
    assert [m["ts"] for m in run_search(client, "unicornzebra sighting")] == [ts]
    assert post_event(client, TEAM, delete("CRND2", ts, _ts(int(later.replace(".", "")) + 1))).status_code == 200
    assert run_search(client, "unicornzebra") == []


def test_a_late_older_edit_does_not_hide_the_newer_text_from_a_driven_search(client, archive):
    """The author's and the channel's postings carry the filter of the text at the text's own time: an older
    edit Slack delivers after a newer one (a retry) must not replace the newer text's filter, or a search driven
    by from: or in: would drop the message for lacking its current words."""
    ts = _ts(int((BASE + timedelta(days=DAYS + 3)).timestamp() * 1_000_000))
    us = int(ts.replace(".", ""))
    assert post_event(client, TEAM, msg("CRND2", ts, "quokka first", user="UANN1")).status_code == 200
    assert post_event(client, TEAM, edit("CRND2", ts, "wombat second", "quokka first", _ts(us + 5_000_000),
                                         user="UANN1")).status_code == 200
    assert post_event(client, TEAM, edit("CRND2", ts, "platypus third", "quokka first", _ts(us + 2_000_000),
                                         user="UANN1")).status_code == 200
    try:
        for q in ("from:@ann wombat", "in:#random wombat", "from:@ann in:#random second"):
            assert [m["ts"] for m in run_search(client, q)] == [ts], q
        for q in ("from:@ann platypus", "in:#random quokka", "wombat platypus"):
            assert run_search(client, q) == [], q
    finally:  # the archive's other tests know only the generated messages
        assert post_event(client, TEAM, delete("CRND2", ts, _ts(us + 9_000_000))).status_code == 200


def test_an_unfurl_at_the_edit_time_leaves_its_words_findable_by_a_driven_search(client, archive):
    """An edit adds a link; Slack's unfurl then arrives as another message_changed whose message still carries the
    edit's `edited.ts`. Written at that time, it tied with the edit's write, and Cassandra kept the greater value
    of each cell: the edit's content (`{"edited":...}` sorts after `{"attachments":...}`), so the row lost the
    unfurl and no search found its words. A change that is not a text change is written at its event's time."""
    ts = _ts(int((BASE + timedelta(days=DAYS + 4)).timestamp() * 1_000_000))
    us = int(ts.replace(".", ""))
    first, linked = "look here", "look here <https://example.org/q3|q3 plan>"
    edited_at, unfurled_at = _ts(us + 5_000_000), _ts(us + 9_000_000)
    unfurl = edit("CRND2", ts, linked, linked, unfurled_at, user="UANN1", prev_edited=edited_at, attachments=[{
        "id": 1, "from_url": "https://example.org/q3", "original_url": "https://example.org/q3",
        "service_name": "example.org", "title": "Narwhal roadmap", "title_link": "https://example.org/q3",
        "text": "Quarterly planning of the narwhal project", "fallback": "example.org: Narwhal roadmap"}])
    unfurl["message"]["edited"] = {"user": "UANN1", "ts": edited_at}
    assert post_event(client, TEAM, msg("CRND2", ts, first, user="UANN1")).status_code == 200
    assert post_event(client, TEAM, edit("CRND2", ts, linked, first, edited_at, user="UANN1")).status_code == 200
    assert post_event(client, TEAM, unfurl).status_code == 200
    try:
        for q in ("narwhal", "from:@ann narwhal", "in:#random narwhal quarterly", "from:@ann in:#random q3"):
            assert [m["ts"] for m in run_search(client, q)] == [ts], q
    finally:  # the archive's other tests know only the generated messages
        assert post_event(client, TEAM, delete("CRND2", ts, _ts(us + 20_000_000))).status_code == 200


# Message rows as the code before schema 0090 wrote them: no postings.
OLD_UPSERT = Statement(
    "UPDATE slack_messages USING TIMESTAMP ? SET msg_ts = ?, user_id = ?, text = ? "
    "WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?")
OLD_REACT = Statement(
    "UPDATE slack_messages SET reactions = reactions + ? WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?")
OLD_DAY = Statement("INSERT INTO slack_channel_days (team_id, channel_id, day) VALUES (?, ?, ?)")
OLD_INDEX = Statement("INSERT INTO slack_channel_index (team_id, channel_id, name) VALUES (?, ?, ?)")
# What version 1 of index-search recorded for a channel it finished (no version column then).
V1_DONE = Statement("UPDATE slack_search_backfill SET next_day = -1, messages = ? WHERE team_id = ? AND channel_id = ?")


def test_index_search_indexes_messages_stored_before_search_and_resumes(client, db, monkeypatch):
    team = "TSEARCHOLD"
    channels = {"COLDA": 3, "COLDB": 2}  # channel -> days with two messages each
    reacted = None
    for channel, days in channels.items():
        db.execute(OLD_INDEX, (team, channel, channel.lower()))
        for day in range(days):
            for k in range(2):
                us = int((BASE + timedelta(days=day, hours=k)).timestamp() * 1_000_000)
                db.execute(OLD_UPSERT, (us, _ts(us), "UOLD1", f"archived fossil {channel} {day}", team, channel,
                                        us // 86_400_000_000, us))
                if channel == "COLDB" and day == 1 and k == 0:
                    db.execute(OLD_REACT, ({("tada", "UOLD2")}, team, channel, us // 86_400_000_000, us))
                    reacted = _ts(us)
            db.execute(OLD_DAY, (team, channel, int((BASE + timedelta(days=day)).timestamp()) // 86_400))
    db.execute(V1_DONE, (4, team, "COLDB"))  # as if version 1 had indexed COLDB's words (here it did not)

    def search_old(q: str) -> list[dict]:
        r = client.get(f"/slack/teams/{team}/search", headers=ALL, query_string={"q": q, "limit": 100})
        assert r.status_code == 200, r.json
        return r.json["messages"]

    def run(*args: str) -> dict:
        result = CliRunner().invoke(cli, ["slack", "index-search", "--team", team, "--no-progress", *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    monkeypatch.setenv("CHRONICLE_KEYSPACE", db.keyspace)
    assert search_old("fossil") == []
    # 10 messages, each with 4 words (archived, fossil, the channel id, the day) plus from: and in: terms, and
    # the day listings of those terms (COLDB, finished by version 1: its flags only)
    counted = run("--dry-run")
    assert counted["messages"] == 10 and counted["rows"] > 6 * 6
    assert search_old("fossil") == []  # a dry run writes nothing
    assert run("--channels", "COLDA")["messages"] == 6
    assert {m["channel_id"] for m in search_old("fossil")} == {"COLDA"}
    assert run()["messages"] == 4  # COLDA is done: resumed, not redone; COLDB walked again for its flags
    assert [m["ts"] for m in search_old("has:reaction")] == [reacted]
    assert {m["channel_id"] for m in search_old("fossil")} == {"COLDA"}  # flags only: v1's words not rewritten
    assert run()["messages"] == 0  # every channel at the current version
    assert run("--restart")["messages"] == 10
    assert len(search_old("fossil")) == 10 and len(search_old("fossil colda 2")) == 2
    assert CliRunner().invoke(cli, ["slack", "index-search"]).exit_code == 2


# Postings as version 2 of index-search (and ingest before schema 0310) wrote them: no terms filter.
V2_POSTING = Statement(
    "INSERT INTO slack_search_postings (team_id, term, day, ts, channel_id) VALUES (?, ?, ?, ?, ?)")
V2_TERM_DAY = Statement("INSERT INTO slack_search_term_days (team_id, term, day) VALUES (?, ?, ?)")
V2_DONE = Statement("UPDATE slack_search_backfill SET next_day = -1, messages = ?, version = 2 "
                    "WHERE team_id = ? AND channel_id = ?")


def test_postings_without_filters_are_looked_up_until_index_search_writes_the_filters(client, db, monkeypatch):
    """Channels whose author and channel postings have no filters (one version 2 of index-search indexed, one
    indexed at ingest before schema 0310) are searched by lookups as before; index-search version 3 walks them
    again writing only those postings, with filters (the first by its recorded version, the second by
    --filters-only); then their words are no longer looked up. The answers are the same throughout."""
    from api.slack import search_index, search_terms
    team = "TSEARCHV2"
    texts = ["walrus seal", "walrus otter", "seal otter", "walrus seal otter"]  # two a day, on two days
    stamps: dict[str, list[str]] = {}
    for channel, user in (("CVTWO", "UVTWO"), ("CVING", "UVING")):
        db.execute(OLD_INDEX, (team, channel, channel.lower()))
        for k, text in enumerate(texts):
            us = int((BASE + timedelta(days=k // 2, hours=k)).timestamp() * 1_000_000)
            day = us // 86_400_000_000
            stamps.setdefault(channel, []).append(_ts(us))
            db.execute(OLD_UPSERT, (us, _ts(us), user, text, team, channel, day, us))
            db.execute(OLD_DAY, (team, channel, day))
            for term in [*search_terms.index_terms(text), f"from:{user.casefold()}", f"in:{channel.casefold()}"]:
                db.execute(V2_POSTING, (team, term, day, us, channel))
                db.execute(V2_TERM_DAY, (team, term, day))
    db.execute(V2_DONE, (len(texts), team, "CVTWO"))
    # A channel version 1 finished (words only, no flags): --filters-only must not skip its flags.
    one_us = int((BASE + timedelta(hours=3)).timestamp() * 1_000_000)
    db.execute(OLD_INDEX, (team, "CVONE", "vone"))
    db.execute(OLD_UPSERT, (one_us, _ts(one_us), "UVONE", "narwhal tusk", team, "CVONE", one_us // 86_400_000_000,
                            one_us))
    db.execute(OLD_REACT, ({("tada", "UVTWO")}, team, "CVONE", one_us // 86_400_000_000, one_us))
    db.execute(OLD_DAY, (team, "CVONE", one_us // 86_400_000_000))
    for term in [*search_terms.index_terms("narwhal tusk"), "from:uvone", "in:cvone"]:
        db.execute(V2_POSTING, (team, term, one_us // 86_400_000_000, one_us, "CVONE"))
        db.execute(V2_TERM_DAY, (team, term, one_us // 86_400_000_000))
    db.execute(V1_DONE, (1, team, "CVONE"))
    expected = {q: want for channel, user in (("CVTWO", "UVTWO"), ("CVING", "UVING")) for q, want in (
        (f"from:{user} walrus seal", [stamps[channel][3], stamps[channel][0]]),
        (f"in:#{channel.lower()} otter -walrus", [stamps[channel][2]]))}

    def searched(q: str) -> tuple[list[str], list[str]]:
        meter = _Meter(monkeypatch)
        r = client.get(f"/slack/teams/{team}/search", headers=ALL, query_string={"q": q, "limit": 10})
        assert r.status_code == 200, r.json
        monkeypatch.undo()
        return [m["ts"] for m in r.json["messages"]], meter.lookups

    for q, want in expected.items():
        assert searched(q)[0] == want, q
    assert set(searched("from:UVTWO walrus seal")[1]) == {"walrus", "seal"}  # no filter: the words are looked up
    monkeypatch.setenv("CHRONICLE_KEYSPACE", db.keyspace)
    result = CliRunner().invoke(cli, ["slack", "index-search", "--team", team, "--no-progress", "--filters-only"])
    assert result.exit_code == 0, result.output
    # per channel: the author's and the channel's posting of each message, and those two terms' listing of each
    # of the 2 days (this process had not written them); no word, no flag. CVONE: its message's two postings,
    # its has:reaction posting and the three terms' listing of its day.
    assert json.loads(result.stdout)["messages"] == 2 * len(texts) + 1
    assert json.loads(result.stdout)["rows"] == 2 * (2 * len(texts) + 2 * 2) + 3 + 3
    for channel in ("CVTWO", "CVING"):
        progress = search_index.progress(db, team)[channel]
        assert (progress.version, progress.next_day, progress.filters_only) == (3, -1, True), channel
    progress = search_index.progress(db, team)["CVONE"]
    assert (progress.version, progress.flags_only, progress.filters_only) == (3, True, False)
    assert searched("has:reaction")[0] == [_ts(one_us)]  # version 1 wrote no flags: this run did
    for q, want in expected.items():
        got, lookups = searched(q)
        assert got == want and lookups == [], q
