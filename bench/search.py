"""Slack archive search (issue 13) at 1,000,000 messages: load throughput and the ingest cost of postings, bytes
on disk, search latency through gunicorn and in-process, a correctness check against the generator, and where
the time goes.

    .venv/bin/python -m bench.search [--messages 1000000] [--keyspace chronicle_bench_search] [--workers 2]
                                     [--requests 300] [--ab-messages 20000] [--skip-load] [--compact]

What it does:

1. Load (resumable). A workspace is generated deterministically from `--seed`: `--channels` public channels and
   `--users` users (profiles written through api/slack/users.py, so from:@name resolves), `--messages` messages
   over `--days` UTC days from 2025-01-01 (weekends at a third of a weekday), each of 5-25 words drawn from a
   Zipf-distributed vocabulary (`--vocab` made-up words, exponent `--zipf`), 15% with one of 500 recurring
   two-word phrases, 6% with a user mention `<@U…>`, 4% with a link `<https://docs.example.org/word|label>`, ~10%
   thread replies (to an earlier message of the same channel and day), 5% with a file, 20% with reactions.
   Every message is written through the real bulk path: `ingest.history_rows` (which is `ingest.message_rows`
   plus the reactions: message row, day listing, thread index, file queue item, activity index and marks, the
   search postings) sent with `Database.execute_many(batch_size=50)` as the export import does, then
   `ingest.note_stored`, in `--workers` forked processes, one chunk (up to `--chunk` messages of one day) at a
   time. A chunk is recorded as loaded in the bench's own table `search_bench_chunks` once all its rows are
   written, so a re-run loads only what is missing (the keyspace is migrated with api/migrations.py, never
   dropped). Throughput: messages / wall seconds of this run's load, with the CPU seconds of the node and of the
   loaders.
2. Ingest cost of search. In a scratch keyspace (dropped after), `--ab-messages` messages of the same generator
   loaded four times (with, without, with, without the postings; a new workspace each pass, fresh processes),
   "without" = `search_index.message_posting_writes` patched to return ([], []) in the loader processes: messages/s,
   rows per message, node and loader CPU per message, and the ratio.
3. Bytes on disk. `nodetool flush`, then wait (up to `--settle-seconds`) for the node's compactions (optionally
   `--compact`: a major compaction of the three tables first), then nodetool tablestats "Space used (live)" of
   slack_search_postings, slack_search_term_days and slack_messages, per message.
4. Latency. gunicorn (gunicorn.conf.py, `--gunicorn-workers` x `--gunicorn-threads`) on the bench keyspace;
   `--requests` requests per query class at concurrency 1 and 8 (keep-alive http.client connections, one per
   thread), each class cycling through `--variants` concrete queries of the same shape:
   - word_common: one word of Zipf rank 1-10; word_mid: rank ~1,000; word_rare: rank ~15,000;
   - three_words_in_after: `w1 w2 w3 in:#channel after:YYYY-MM-DD` (words of rank 2-30, a busy channel, the last
     ~2 months);
   - two_words_from_has: `w1 w2 from:@user has:reaction` (words of rank 2-30, an active user);
   - phrase: `"w1 w2"` (one of the recurring phrases);
   - page2_common: the second page (next_cursor of the first) of word_common.
   Server time is the app's Server-Timing header (`app;dur=`, api/slack/http.py `_server_timing`: from the
   request's start in api/observability.py to the response built); client time is the loopback round trip.
   Then the same requests by calling api.slack.search.search in this process (threads for concurrency 8). One
   untimed pass over every variant first (connections, prepared statements, the directory cache).
   p50/p90/p99/max/mean per class and concurrency; result counts per class from the generator's model.
5. Correctness. The generator's model of every message (regenerated from the seed, in `--workers` processes)
   gives every variant's total count and its newest 40 answers (a variant without answers is not timed): each
   variant's first 40 answers through HTTP (pages 1 and 2, and any page after one cut short by the read budget)
   must equal the model's, in order. Bounded queries (`word in:#channel
   on:YYYY-MM-DD`, `from:@user on:...`, `has:file in:... on:...`, `is:thread in:... on:...`) are paged to the end
   and compared with a brute force over that one day, regenerated.
6. Where the time goes: per class, in-process with the reads counted (term-day listings, posting partitions,
   message reads: round trips and rows) and the time split (names, day listings + parse, candidates =
   postings read + intersected, confirmation), and a cProfile of the slowest classes (top functions).

Prints a summary table on stderr and one JSON object on stdout, written under bench/results/search-*.json,
with the commit and a hash of the search modules measured, and the machine's 1-minute load average around each
timed run (the node, gunicorn and this process share 2 cores with whatever else runs). The keyspace is kept
(re-measure with --skip-load --ab-messages 0; a full re-run skips the loaded chunks). On the 2-core machine:
~30 min to load 1,000,000 messages with --workers 2, ~25 min for the rest.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import hashlib
import http.client
import json
import logging
import multiprocessing
import os
import pstats
import random
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from api.config import Settings
from api.db import Database, Statement
from api.migrations import migrate
from api.node.process import read_pid
from api.node.tools import nodetool
from api.observability import configure_logging
from api.slack import ingest, messages, search, search_index, users
from api.slack.messages import NewMessage
from api.slack.payloads import HistoryMessage
from api.slack.timeutil import ts_to_us, us_to_ts
from bench.scale_common import _percentile, local_node, scratch_keyspace, scratch_settings, served, settle, write_result
from bench.tagging import cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
TEAM = "TSRCHBENCH"
TOKEN = "bench-search-token"
FIRST_DATE = date(2025, 1, 1)
DAY_US = 86_400_000_000
TARGET_MS = 50.0
LIMIT = 20
KEEP = 2 * LIMIT            # newest answers of each variant the model keeps (pages 1 and 2)
RESERVED = frozenset({"https", "docs", "example", "org", "files", "invalid"})  # words of the links and files
EMOJI = ["thumbsup", "tada", "eyes", "rocket", "heart", "white_check_mark", "joy", "pray"]
ONSETS = ["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "st",
          "tr", "pl", "gr", "sh", "ch", "th"]
VOWELS = ["a", "e", "i", "o", "u", "ai", "ou", "ea"]
CODAS = ["", "", "", "n", "r", "s", "l", "t", "m", "x", "nd", "st"]

# The bench's own bookkeeping, declared here (no product table: nothing in api/ reads them).
BENCH_DDL = [
    "CREATE TABLE IF NOT EXISTS search_bench_spec (team text PRIMARY KEY, spec text)",
    "CREATE TABLE IF NOT EXISTS search_bench_chunks (team text, chunk int, messages int, rows int, seconds double, "
    "PRIMARY KEY ((team), chunk))",
    "CREATE TABLE IF NOT EXISTS search_bench_loads (team text, started timestamp, messages int, seconds double, "
    "workers int, messages_per_s double, PRIMARY KEY ((team), started))",
]
SELECT_SPEC = Statement("SELECT spec FROM search_bench_spec WHERE team = ?")
INSERT_SPEC = Statement("INSERT INTO search_bench_spec (team, spec) VALUES (?, ?)")
SELECT_CHUNKS = Statement("SELECT chunk FROM search_bench_chunks WHERE team = ?")
INSERT_CHUNK = Statement(
    "INSERT INTO search_bench_chunks (team, chunk, messages, rows, seconds) VALUES (?, ?, ?, ?, ?)")
INSERT_LOAD = Statement("INSERT INTO search_bench_loads (team, started, messages, seconds, workers, messages_per_s) "
                        "VALUES (?, ?, ?, ?, ?, ?)")
SELECT_LOADS = Statement("SELECT started, messages, seconds, workers, messages_per_s FROM search_bench_loads "
                         "WHERE team = ?")


def _note(part: str, figures: Any) -> None:
    print(f"{part}: {figures}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ generator

@dataclasses.dataclass(frozen=True)
class Spec:
    """What the generated workspace is made of: the same spec always gives the same messages."""

    team: str
    messages: int
    days: int
    channels: int
    users: int
    vocab: int
    zipf: float
    seed: int
    chunk: int

    def key(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


@dataclasses.dataclass
class Gen:
    """One generated message, and the generator's own record of what a search should find it by."""

    channel: str
    ts: int
    user: str
    text: str
    tokens: tuple[str, ...]      # the searchable words in order (mentions are not words; a link: label, address)
    thread_ts: int | None = None
    files: bool = False
    reactions: frozenset = frozenset()
    replies: int = 0
    parent_user: str | None = None


def _zipf_cum(n: int, s: float) -> list[float]:
    cum, total = [], 0.0
    for k in range(1, n + 1):
        total += 1.0 / k ** s
        cum.append(total)
    return cum


def _made_up_words(rng: random.Random, n: int, taken: set[str]) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        word = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) for _ in range(rng.choice((1, 2, 2, 3, 3, 4))))
        word += rng.choice(CODAS)
        if len(word) >= 3 and word not in taken and word not in RESERVED:
            taken.add(word)
            out.append(word)
    return out


class World:
    """The generated workspace: vocabulary by rank, channels, users, phrases, messages per day."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        rng = random.Random(f"world:{spec.seed}")
        taken: set[str] = set()
        # Shorter words are the common ones, as in a real language.
        self.vocab = sorted(_made_up_words(rng, spec.vocab, taken), key=len)
        self.rank = {w: i + 1 for i, w in enumerate(self.vocab)}
        self.word_cum = _zipf_cum(spec.vocab, spec.zipf)
        # Recurring two-word phrases of mid-frequency words ("error budget"), themselves Zipf-distributed.
        self.phrases = [(self.vocab[rng.randrange(50, 3000)], self.vocab[rng.randrange(50, 3000)]) for _ in range(500)]
        self.phrase_cum = _zipf_cum(len(self.phrases), 1.0)
        names = _made_up_words(rng, spec.channels, taken)
        self.channels = [f"CSB{i:04d}" for i in range(spec.channels)]
        self.channel_names = {c: f"{'eng-' if i % 3 == 0 else ''}{names[i]}" for i, c in enumerate(self.channels)}
        self.channel_cum = _zipf_cum(spec.channels, 0.8)
        firsts, lasts = _made_up_words(rng, spec.users, taken), _made_up_words(rng, spec.users, taken)
        self.users = [f"USB{i:04d}" for i in range(spec.users)]
        self.user_names = {u: f"{firsts[i]}.{lasts[i]}" for i, u in enumerate(self.users)}
        self.real_names = {u: f"{firsts[i].title()} {lasts[i].title()}" for i, u in enumerate(self.users)}
        self.user_cum = _zipf_cum(spec.users, 0.7)
        weights = [0.35 if (FIRST_DATE + timedelta(d)).weekday() >= 5 else 1.0 for d in range(spec.days)]
        share = spec.messages / sum(weights)
        counts = [int(w * share) for w in weights]
        for d in range(spec.messages - sum(counts)):
            counts[d % spec.days] += 1
        self.day_counts = counts
        self.chunks: list[tuple[int, int]] = [(d, p) for d, n in enumerate(counts)
                                              for p in range(-(-n // spec.chunk))]

    def day_number(self, day_index: int) -> int:
        """The UTC day (days since 1970-01-01) of a day of the generated range."""
        return (FIRST_DATE - date(1970, 1, 1)).days + day_index

    def chunk_id(self, day_index: int, part: int) -> int:
        return day_index * 10_000 + part

    def day(self, day_index: int) -> list[Gen]:
        """The messages of one day, oldest first (deterministic: seeded by the spec's seed and the day)."""
        spec = self.spec
        rng = random.Random(f"day:{spec.seed}:{day_index}")
        n = self.day_counts[day_index]
        start = self.day_number(day_index) * DAY_US
        # 80% in working hours (07-19 UTC); the rest at any time. +i keeps every ts of the day distinct.
        seconds = sorted(rng.randrange(7 * 3600, 19 * 3600) if rng.random() < 0.8 else rng.randrange(86_400)
                         for _ in range(n))
        heads: dict[str, list[Gen]] = {}
        out: list[Gen] = []
        for i, sec in enumerate(seconds):
            ts = start + sec * 1_000_000 + i
            channel = rng.choices(self.channels, cum_weights=self.channel_cum)[0]
            user = rng.choices(self.users, cum_weights=self.user_cum)[0]
            words = rng.choices(self.vocab, cum_weights=self.word_cum, k=rng.randint(5, 25))
            if rng.random() < 0.15:
                at = rng.randrange(len(words) + 1)
                words[at:at] = rng.choices(self.phrases, cum_weights=self.phrase_cum)[0]
            parts = list(words)
            tokens = list(words)
            parts[0] = parts[0].title()
            if rng.random() < 0.3:
                parts[rng.randrange(len(parts))] += ","
            parts[-1] += rng.choice((".", ".", "?", "!", ""))
            if rng.random() < 0.06:
                parts.insert(rng.randrange(len(parts) + 1), f"<@{rng.choice(self.users)}>")
            if rng.random() < 0.04:
                target, *label = rng.choices(self.vocab, cum_weights=self.word_cum, k=3)
                parts.append(f"<https://docs.example.org/{target}|{' '.join(label)}>")
                tokens += [*label, "https", "docs", "example", "org", target]
            m = Gen(channel, ts, user, " ".join(parts), tuple(tokens))
            if heads.get(channel) and rng.random() < 0.11:
                head = rng.choice(heads[channel][-20:])
                m.thread_ts, m.parent_user = head.ts, head.user
                head.replies += 1
            else:
                heads.setdefault(channel, []).append(m)
            m.files = rng.random() < 0.05
            if rng.random() < 0.2:
                m.reactions = frozenset((rng.choice(EMOJI), rng.choice(self.users)) for _ in range(rng.randint(1, 3)))
            out.append(m)
        return out

    def chunk(self, day_index: int, part: int) -> list[Gen]:
        return self.day(day_index)[part * self.spec.chunk:(part + 1) * self.spec.chunk]


def history_message(world: World, m: Gen) -> HistoryMessage:
    """A generated message as history shows it (what the export import and the backfill write)."""
    files = None
    if m.files:
        files = [{"id": f"F{m.ts:X}", "name": f"notes-{m.ts % 1000}.pdf", "mimetype": "application/pdf",
                  "url_private": f"https://files.example.invalid/F{m.ts:X}"}]
    msg = NewMessage(team_id=world.spec.team, channel_id=m.channel, ts=m.ts, msg_ts=us_to_ts(m.ts), user=m.user,
                     text=m.text, subtype="file_share" if files else None, thread_ts=m.thread_ts, files=files,
                     parent_user_id=m.parent_user)
    return HistoryMessage(message=msg, edited_ts=None, reactions=m.reactions, tombstone=False, hidden=False)


# ------------------------------------------------------------------------------------------------ loading

_loader: dict[str, Any] = {}


class _BatchWarnings(logging.Filter):
    """Counts (and keeps off stderr) the node's "Batch ... exceeding specified threshold" warnings, which the
    import's batch_size=50 draws for slack_messages and work_items rows (reported as a figure instead)."""

    count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if "exceeding specified threshold" in str(record.msg) or "exceeding specified threshold" in str(
                record.args):
            _BatchWarnings.count += 1
            return False
        return True


def _init_loader(settings: Settings, spec: Spec, with_postings: bool, batch_size: int, in_flight: int) -> None:
    """In a forked loader process: its own Database (the parent's did not survive the fork) and the world."""
    if not with_postings:
        search_index.message_posting_writes = lambda *_a, **_k: ([], [])  # the "without search" pass
    for handler in logging.getLogger().handlers:
        handler.addFilter(_BatchWarnings())
    _loader.update(db=Database(settings), world=World(spec), batch_size=batch_size, in_flight=in_flight)


def _load_chunk(chunk: tuple[int, int]) -> tuple[int, int, int, float, int]:
    """Write one chunk's messages through the bulk ingest path; record it as loaded. (chunk id, messages, rows,
    seconds, batch-size warnings)."""
    warned = _BatchWarnings.count
    db: Database = _loader["db"]
    world: World = _loader["world"]
    started = time.perf_counter()
    history = [history_message(world, m) for m in world.chunk(*chunk)]
    rows = [row for hm in history for row in ingest.history_rows(db, hm, observed_at=hm.message.ts + 60_000_000)]
    db.execute_many(rows, batch_size=_loader["batch_size"], concurrency=_loader["in_flight"])
    for hm in history:
        ingest.note_stored(db, hm.message)
    seconds = time.perf_counter() - started
    chunk_id = world.chunk_id(*chunk)
    db.execute(INSERT_CHUNK, (world.spec.team, chunk_id, len(history), len(rows), seconds))
    return chunk_id, len(history), len(rows), seconds, _BatchWarnings.count - warned


def write_directory(db: Database, world: World) -> None:
    """The channels (names, public) and user profiles, at fixed times: writing them again changes nothing."""
    at = world.day_number(0) * DAY_US - DAY_US
    for i, channel in enumerate(world.channels):
        ingest.update_channel(db, world.spec.team, channel, at + i, name=world.channel_names[channel],
                              created_ts=at, creator=world.users[0], visibility="public")
    writes = []
    for user in world.users:
        name = world.user_names[user]
        profile = users.Profile(team_id=world.spec.team, user_id=user, updated=at, name=name,
                                real_name=world.real_names[user], display_name=name, tz="UTC")
        writes += users.profile_writes(profile, seen_at=at)
    db.execute_many(writes)


def prepare_keyspace(settings: Settings) -> Database:
    """Create and migrate the keyspace if needed (api/migrations.py), and the bench's own tables."""
    admin = Database(settings, keyspace="")
    try:
        migrate(admin, settings.keyspace, settings.replication_map(), log=lambda m: _note("migrate", m))
    finally:
        admin.close()
    db = Database(settings)
    for ddl in BENCH_DDL:
        db.execute_raw(ddl, timeout=60)
    return db


def _node_cpu() -> float:
    pid = read_pid(local_node())
    return cpu_seconds(pid) if pid else 0.0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load_chunks(db: Database, world: World, chunks: list[tuple[int, int]], *, workers: int, batch_size: int,
                in_flight: int, with_postings: bool = True, label: str = "load") -> dict[str, Any]:
    """Load `chunks` in `workers` forked processes; wall time, rows and CPU seconds of the run."""
    total = sum(min(world.spec.chunk, world.day_counts[d] - p * world.spec.chunk) for d, p in chunks)
    db.close()  # no driver threads in the parent while it forks (reconnects on next use)
    ctx = multiprocessing.get_context("fork")
    node_before, children_before = _node_cpu(), _children_cpu()
    started = time.perf_counter()
    done = rows = warnings = 0
    next_note = 0.0
    with ctx.Pool(workers, initializer=_init_loader,
                  initargs=(db.settings, world.spec, with_postings, batch_size, in_flight)) as pool:
        for _chunk_id, n, r, _s, w in pool.imap_unordered(_load_chunk, chunks):
            done += n
            rows += r
            warnings += w
            elapsed = time.perf_counter() - started
            if elapsed >= next_note or done == total:
                rate = done / elapsed if elapsed else 0.0
                eta = (total - done) / rate if rate else 0.0
                _note(label, f"{done:,}/{total:,} messages, {rows:,} rows, {rate:,.0f} messages/s, "
                             f"eta {eta / 60:.1f} min")
                next_note = elapsed + 30
        pool.close()
        pool.join()
    wall = time.perf_counter() - started
    node_cpu, loader_cpu = _node_cpu() - node_before, _children_cpu() - children_before
    return {"messages": done, "rows": rows, "seconds": round(wall, 1),
            "messages_per_s": round(done / wall, 1) if wall else None,
            "rows_per_message": round(rows / done, 2) if done else None,
            "node_cpu_ms_per_message": round(node_cpu * 1000 / done, 3) if done else None,
            "loader_cpu_ms_per_message": round(loader_cpu * 1000 / done, 3) if done else None,
            "workers": workers, "with_postings": with_postings, "batch_size_warnings": warnings}


def load(db: Database, world: World, args: argparse.Namespace) -> dict[str, Any]:
    """Load what is missing of the workspace (resumable); this run's figures and earlier runs'."""
    team = world.spec.team
    stored = db.execute(SELECT_SPEC, (team,)).one()
    if stored is not None and stored.spec != world.spec.key():
        raise SystemExit(f"keyspace {db.keyspace} holds workspace {team} generated with {stored.spec}; this run "
                         f"asks for {world.spec.key()}: use another --keyspace")
    if stored is None:
        db.execute(INSERT_SPEC, (team, world.spec.key()))
    write_directory(db, world)
    loaded = {r.chunk for r in db.execute(SELECT_CHUNKS, (team,))}
    todo = [c for c in world.chunks if world.chunk_id(*c) not in loaded]
    out: dict[str, Any] = {"chunks": len(world.chunks), "chunks_loaded_before": len(world.chunks) - len(todo)}
    _note("load", f"{len(todo)} of {len(world.chunks)} chunks to load")
    if todo:
        started = datetime.now(UTC)
        run = load_chunks(db, world, todo, workers=args.workers, batch_size=args.batch_size,
                          in_flight=args.in_flight)
        db.execute(INSERT_LOAD, (team, started, run["messages"], run["seconds"], args.workers,
                                 run["messages_per_s"]))
        out["this_run"] = run
        _note("load done", run)
    out["runs"] = [{"started": r.started, "messages": r.messages, "seconds": r.seconds, "workers": r.workers,
                    "messages_per_s": r.messages_per_s} for r in db.execute(SELECT_LOADS, (team,))]
    loaded = {r.chunk for r in db.execute(SELECT_CHUNKS, (team,))}
    out["complete"] = all(world.chunk_id(*c) in loaded for c in world.chunks)
    return out


def ingest_cost(args: argparse.Namespace) -> dict[str, Any]:
    """Load throughput with and without the search postings, alternating, in a scratch keyspace."""
    per_day = args.messages / args.days
    days = max(1, round(args.ab_messages / per_day))
    passes = []
    with scratch_keyspace("searchab", request_timeout=30.0) as db:
        for ddl in BENCH_DDL:
            db.execute_raw(ddl, timeout=60)
        for i, with_postings in enumerate((True, False, True, False)):
            spec = Spec(team=f"TSRCHAB{i}", messages=args.ab_messages, days=days, channels=args.channels,
                        users=args.users, vocab=args.vocab, zipf=args.zipf, seed=args.seed + 1, chunk=args.chunk)
            world = World(spec)
            write_directory(db, world)
            run = load_chunks(db, world, world.chunks, workers=args.workers, batch_size=args.batch_size,
                              in_flight=args.in_flight, with_postings=with_postings,
                              label=f"ingest {'with' if with_postings else 'without'} postings")
            passes.append(run)
            _note("ingest pass", run)
        keyspace = db.keyspace

    def mean(key: str, flag: bool) -> float:
        values = [p[key] for p in passes if p["with_postings"] is flag]
        return sum(values) / len(values)

    with_rate, without_rate = mean("messages_per_s", True), mean("messages_per_s", False)
    return {
        "keyspace": keyspace, "messages_per_pass": args.ab_messages, "days": days, "passes": passes,
        "with_postings_messages_per_s": round(with_rate, 1), "without_postings_messages_per_s": round(without_rate, 1),
        "throughput_with_over_without": round(with_rate / without_rate, 3),
        "rows_per_message": {"with": round(mean("rows_per_message", True), 2),
                             "without": round(mean("rows_per_message", False), 2)},
        "node_cpu_ms_per_message": {"with": round(mean("node_cpu_ms_per_message", True), 3),
                                    "without": round(mean("node_cpu_ms_per_message", False), 3)},
        "loader_cpu_ms_per_message": {"with": round(mean("loader_cpu_ms_per_message", True), 3),
                                      "without": round(mean("loader_cpu_ms_per_message", False), 3)},
    }


# ------------------------------------------------------------------------------------------------ storage

STORAGE_TABLES = ("slack_search_postings", "slack_search_term_days", "slack_messages")


def storage(db: Database, messages_total: int, *, compact: bool, settle_seconds: float) -> dict[str, Any]:
    """Bytes on disk of the search tables and slack_messages (nodetool tablestats after a flush)."""
    node = local_node()
    out: dict[str, Any] = {}
    if compact:
        nodetool(node, "flush", db.keyspace)
        started = time.perf_counter()
        nodetool(node, "compact", db.keyspace, *STORAGE_TABLES, timeout=7200)
        out["major_compaction_seconds"] = round(time.perf_counter() - started, 1)
    out["settle_seconds"] = settle(node, db.keyspace, limit=settle_seconds)
    stats = json.loads(nodetool(node, "tablestats", "-F", "json", db.keyspace))[db.keyspace]["tables"]
    tables = {}
    for table in STORAGE_TABLES:
        st = stats[table]
        live = int(st["space_used_live"])
        tables[table] = {"space_used_live": live, "mb": round(live / 1e6, 1),
                         "bytes_per_message": round(live / messages_total, 1),
                         "sstables": int(st["sstable_count"]),
                         "compression_ratio": round(float(st["sstable_compression_ratio"]), 3),
                         "partitions_estimate": int(st["number_of_partitions_estimate"])}
    out["tables"] = tables
    messages_bytes = tables["slack_messages"]["space_used_live"]
    search_bytes = tables["slack_search_postings"]["space_used_live"] + tables["slack_search_term_days"][
        "space_used_live"]
    out["search_over_messages"] = round(search_bytes / messages_bytes, 3)
    out["keyspace_space_used_live_mb"] = round(sum(int(t["space_used_live"]) for t in stats.values()) / 1e6, 1)
    return out


# ------------------------------------------------------------------------------------------------ queries

@dataclasses.dataclass(frozen=True)
class Query:
    """A query string and what it means, written from the generator's side (docs/slack-search.md rules)."""

    q: str
    words: tuple[str, ...] = ()
    phrase: tuple[str, ...] = ()
    channel: str | None = None
    user: str | None = None
    after_day: int | None = None   # UTC day number; answers are on later days
    on_day: int | None = None
    has_reaction: bool = False
    has_file: bool = False
    is_thread: bool = False

    def matches(self, m: Gen, day: int) -> bool:
        if self.channel is not None and m.channel != self.channel:
            return False
        if self.user is not None and m.user != self.user:
            return False
        if self.after_day is not None and day <= self.after_day:
            return False
        if self.on_day is not None and day != self.on_day:
            return False
        if self.has_reaction and not m.reactions:
            return False
        if self.has_file and not m.files:
            return False
        if self.is_thread and m.thread_ts is None and not m.replies:
            return False
        if self.words and not all(w in m.tokens for w in self.words):
            return False
        if self.phrase:
            n = len(self.phrase)
            return any(m.tokens[i:i + n] == self.phrase for i in range(len(m.tokens) - n + 1))
        return True


def _iso(world: World, day_index: int) -> str:
    return (FIRST_DATE + timedelta(day_index)).isoformat()


def make_queries(world: World, variants: int, seed: int) -> dict[str, list[Query]]:
    """The timed query classes, `variants` concrete queries each."""
    rng = random.Random(f"queries:{seed}")
    v = world.vocab
    busy_channels = world.channels[:10]      # the Zipf weights make the first channels the busiest
    active_users = world.users[:20]
    after_index = world.spec.days - 61
    after_day = world.day_number(after_index)

    def ranks(lo: int, hi: int, k: int) -> list[str]:
        return [v[r - 1] for r in rng.sample(range(lo, hi + 1), k)]

    common = [Query(w, words=(w,)) for w in [v[(i % 10)] for i in range(variants)]]
    out: dict[str, list[Query]] = {
        "word_common": common,
        "word_mid": [Query(w, words=(w,)) for w in ranks(990, 1010, variants)],
        "word_rare": [Query(w, words=(w,)) for w in ranks(14_990, 15_010, variants)],
        "three_words_in_after": [],
        "two_words_from_has": [],
        "phrase": [],
        "page2_common": common,
    }
    for i in range(variants):
        words = tuple(ranks(2, 30, 3))
        channel = busy_channels[i % len(busy_channels)]
        out["three_words_in_after"].append(Query(
            f"{' '.join(words)} in:#{world.channel_names[channel]} after:{_iso(world, after_index)}", words=words,
            channel=channel, after_day=after_day))
        words = tuple(ranks(2, 30, 2))
        user = active_users[i % len(active_users)]
        out["two_words_from_has"].append(Query(f"{' '.join(words)} from:@{world.user_names[user]} has:reaction",
                                               words=words, user=user, has_reaction=True))
        phrase = world.phrases[i % 20]
        out["phrase"].append(Query(f'"{phrase[0]} {phrase[1]}"', words=phrase, phrase=phrase))
    return out


def bounded_queries(world: World, seed: int) -> list[tuple[int, Query]]:
    """Queries restricted to one day (and mostly one channel): (day index, query), brute-forced over that day."""
    rng = random.Random(f"bounded:{seed}")
    out = []
    for _ in range(3):
        d = rng.randrange(world.spec.days)
        day, iso = world.day_number(d), _iso(world, d)
        channel = world.channels[rng.randrange(5)]
        name = world.channel_names[channel]
        word = world.vocab[rng.randrange(0, 40)]
        user = world.users[rng.randrange(10)]
        out += [
            (d, Query(f"{word} in:#{name} on:{iso}", words=(word,), channel=channel, on_day=day)),
            (d, Query(f"from:@{world.user_names[user]} on:{iso}", user=user, on_day=day)),
            (d, Query(f"has:file in:#{name} on:{iso}", channel=channel, on_day=day, has_file=True)),
            (d, Query(f"is:thread in:#{name} on:{iso}", channel=channel, on_day=day, is_thread=True)),
        ]
    return out


_model: dict[str, Any] = {}


def _init_model(spec: Spec, queries: list[Query]) -> None:
    _model.update(world=World(spec), queries=queries)


def _model_day(day_index: int) -> list[tuple[int, list[tuple[int, str]]]]:
    """Per query: (answers on this day, the newest KEEP of them as (ts, channel))."""
    world: World = _model["world"]
    day = world.day_number(day_index)
    gens = world.day(day_index)
    out = []
    for query in _model["queries"]:
        found = [(m.ts, m.channel) for m in gens if query.matches(m, day)]
        found.sort(key=lambda a: (-a[0], a[1]))
        out.append((len(found), found[:KEEP]))
    return out


def model_answers(world: World, queries: list[Query], workers: int) -> list[tuple[int, list[tuple[int, str]]]]:
    """Every query's total count and newest KEEP answers, from the generator (all days regenerated)."""
    ctx = multiprocessing.get_context("fork")
    totals = [0] * len(queries)
    newest: list[list[tuple[int, str]]] = [[] for _ in queries]
    with ctx.Pool(workers, initializer=_init_model, initargs=(world.spec, queries)) as pool:
        for per_query in pool.imap_unordered(_model_day, range(world.spec.days), chunksize=4):
            for i, (count, found) in enumerate(per_query):
                totals[i] += count
                if found:
                    merged = sorted(newest[i] + found, key=lambda a: (-a[0], a[1]))
                    newest[i] = merged[:KEEP]
    return list(zip(totals, newest, strict=True))


# ------------------------------------------------------------------------------------------------ requests

class Client:
    """One keep-alive connection per thread; the server's Server-Timing `app;dur=` of the last answer."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.local = threading.local()

    def get(self, path: str) -> tuple[int, Any, float | None]:
        conn = getattr(self.local, "conn", None)
        for attempt in range(2):
            if conn is None:
                conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            try:
                conn.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
                response = conn.getresponse()
                body = response.read()
                timing = response.getheader("Server-Timing") or ""
                server = float(timing.split("dur=")[1]) if "dur=" in timing else None
                return response.status, json.loads(body) if body else None, server
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = self.local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


def search_path(q: str, cursor: str | None = None) -> str:
    params = {"q": q, "limit": LIMIT}
    if cursor:
        params["cursor"] = cursor
    return f"/slack/teams/{TEAM}/search?{urlencode(params)}"


def _summary(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    if not ordered:
        return {"count": 0}
    return {"count": len(ordered), "p50_ms": round(_percentile(ordered, 0.50), 2),
            "p90_ms": round(_percentile(ordered, 0.90), 2), "p99_ms": round(_percentile(ordered, 0.99), 2),
            "max_ms": round(ordered[-1], 2), "mean_ms": round(sum(ordered) / len(ordered), 2)}


def timed(items: list[Any], call: Callable[[Any], float | None], concurrency: int) -> dict[str, Any]:
    """`call(item)` for every item from `concurrency` threads (thread i takes items i, i+c, ...); the client
    time of each call, and the server time it returns (ms; None when it has none)."""
    client: list[list[float]] = [[] for _ in range(concurrency)]
    server: list[list[float]] = [[] for _ in range(concurrency)]
    errors: list[str] = []
    barrier = threading.Barrier(concurrency + 1)

    def run(i: int) -> None:
        barrier.wait()
        for item in items[i::concurrency]:
            started = time.perf_counter()
            try:
                answer = call(item)
            except Exception as exc:  # noqa: BLE001 - counted and reported, the run goes on
                errors.append(f"{type(exc).__name__}: {exc}"[:300])
                continue
            client[i].append((time.perf_counter() - started) * 1000)
            if answer is not None:
                server[i].append(answer)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(concurrency)]
    for t in threads:
        t.start()
    load_before = os.getloadavg()[0]
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    flat_client = [x for share in client for x in share]
    # The machine's 1-minute load average around the run: the node and the server share 2 cores with whatever
    # else runs, so a busy machine shows here.
    out = {"concurrency": concurrency, "requests": len(flat_client), "per_s": round(len(flat_client) / wall, 1),
           "client": _summary(flat_client), "errors": len(errors), "first_error": errors[0] if errors else None,
           "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)]}
    flat_server = [x for share in server for x in share]
    if flat_server:
        out["server"] = _summary(flat_server)
    return out


def _answer_ids(body: dict[str, Any]) -> list[tuple[int, str]]:
    return [(ts_to_us(m["ts"]), m["channel_id"]) for m in body.get("messages", [])]


def bench_http(port: int, classes: dict[str, list[Query]], requests: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each class at concurrency 1 and 8 through HTTP; and each variant's first two pages (for the check)."""
    client = Client(port)
    pages: dict[str, Any] = {}
    for queries in classes.values():
        for query in queries:  # untimed: warms every worker's statements and directory; gives the pages
            if query.q in pages:
                continue
            got: list[tuple[int, str]] = []
            cursor, sizes, searched_to, second_cursor = None, [], [], None
            while len(got) < KEEP and len(sizes) < 20:  # a page cut short by the read budget is followed
                status, body, _ = client.get(search_path(query.q, cursor))
                if status != 200:
                    raise RuntimeError(f"{query.q!r}: HTTP {status} {body}")
                got += _answer_ids(body)
                sizes.append(len(body["messages"]))
                searched_to.append(body.get("searched_to"))
                cursor = body.get("next_cursor")
                if len(sizes) == 1:
                    second_cursor = cursor
                if not cursor:
                    break
            pages[query.q] = {"answers": got[:KEEP], "page_sizes": sizes, "searched_to": searched_to,
                              "cursor": second_cursor}
    results: dict[str, Any] = {}
    for name, queries in classes.items():
        paths = []
        for i in range(requests):
            query = queries[i % len(queries)]
            cursor = pages[query.q]["cursor"] if name.startswith("page2") else None
            paths.append(search_path(query.q, cursor))

        def call(path: str) -> float | None:
            status, body, server_ms = client.get(path)
            if status != 200:
                raise RuntimeError(f"HTTP {status}: {str(body)[:200]}")
            return server_ms

        results[name] = {f"c{c}": timed(paths, call, c) for c in (1, 8)}
        _note(f"http {name}", {k: (v.get("server", {}).get("p50_ms"), v.get("server", {}).get("p99_ms"),
                                   v["client"].get("p99_ms")) for k, v in results[name].items()})
    return results, pages


def bench_in_process(db: Database, classes: dict[str, list[Query]], requests: int) -> dict[str, Any]:
    """The same requests by calling search.search in this process (threads for concurrency 8)."""
    positions: dict[str, search.Position | None] = {}
    for queries in classes.values():
        for query in queries:
            positions[query.q] = search.search(db, TEAM, query.q, limit=LIMIT).next_position
    results: dict[str, Any] = {}
    for name, queries in classes.items():
        items = [queries[i % len(queries)] for i in range(requests)]
        page2 = name.startswith("page2")

        def call(query: Query, page2: bool = page2) -> None:
            search.search(db, TEAM, query.q, limit=LIMIT, position=positions[query.q] if page2 else None)

        results[name] = {f"c{c}": timed(items, call, c) for c in (1, 8)}
        _note(f"in-process {name}", {k: (v["client"].get("p50_ms"), v["client"].get("p99_ms"))
                                     for k, v in results[name].items()})
    return results


# ------------------------------------------------------------------------------------------------ correctness

def check_timed_pages(classes: dict[str, list[Query]], pages: dict[str, Any],
                      model: dict[str, tuple[int, list[tuple[int, str]]]]) -> dict[str, Any]:
    """Each variant's first KEEP answers through HTTP (pages followed, also past a page cut short by the read
    budget) against the model's newest KEEP."""
    out: dict[str, Any] = {}
    for name, queries in classes.items():
        if name.startswith("page2"):
            continue
        rows = []
        for query in queries:
            count, newest = model[query.q]
            got = pages[query.q]
            rows.append({"q": query.q, "results": count, "ok": got["answers"] == newest[:KEEP],
                         "page_sizes": got["page_sizes"],
                         "cut_by_budget": sum(1 for s in got["searched_to"] if s is not None)})
        out[name] = {"variants": len(rows), "all_ok": all(r["ok"] for r in rows),
                     "results_min": min(r["results"] for r in rows), "results_max": max(r["results"] for r in rows),
                     "results_median": sorted(r["results"] for r in rows)[len(rows) // 2], "queries": rows}
    return out


def check_bounded(port: int, world: World, bounded: list[tuple[int, Query]]) -> list[dict[str, Any]]:
    """Bounded queries paged to the end through HTTP, against a brute force over their one regenerated day."""
    client = Client(port)
    out = []
    for day_index, query in bounded:
        day = world.day_number(day_index)
        expected = sorted(((m.ts, m.channel) for m in world.day(day_index) if query.matches(m, day)),
                          key=lambda a: (-a[0], a[1]))
        got: list[tuple[int, str]] = []
        cursor, pages = None, 0
        while True:
            status, body, _ = client.get(search_path(query.q, cursor))
            if status != 200:
                raise RuntimeError(f"{query.q!r}: HTTP {status} {body}")
            got += _answer_ids(body)
            pages += 1
            cursor = body.get("next_cursor")
            if not cursor or pages > 200:
                break
        out.append({"q": query.q, "expected": len(expected), "got": len(got), "pages": pages,
                    "ok": got == expected})
    return out


# ------------------------------------------------------------------------------------------------ where the time goes

class _Counted:
    """A future whose rows are counted when read."""

    def __init__(self, future: Any, counter: dict[str, int], kind: str) -> None:
        self.future, self.counter, self.kind = future, counter, kind

    def result(self) -> list[Any]:
        rows = list(self.future.result())
        self.counter[f"{self.kind}_rows"] += len(rows)
        return rows


@contextlib.contextmanager
def instrumented(counter: dict[str, float]) -> Iterator[None]:
    """Count the search's reads (round trips, rows) and time its phases, by wrapping the owners' read functions
    and search.py's phase functions for the duration (this process only)."""
    originals = {(search_index, "start_term_days"): search_index.start_term_days,
                 (search_index, "start_postings"): search_index.start_postings,
                 (search_index, "start_postings_of_days"): search_index.start_postings_of_days,
                 (search_index, "start_postings_at_days"): search_index.start_postings_at_days,
                 (messages, "start_candidates"): messages.start_candidates,
                 (search, "_day_candidates"): search._day_candidates, (search, "_confirm"): search._confirm,
                 (search, "directory"): search.directory}

    def reads(kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **k: Any) -> _Counted:
            counter[f"{kind}_reads"] += 1
            return _Counted(fn(*a, **k), counter, kind)
        return wrapper

    def phase(kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **k: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                counter[f"{kind}_ms"] += (time.perf_counter() - started) * 1000
        return wrapper

    def phase_of_generator(kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **k: Any) -> Iterator[Any]:
            items = fn(*a, **k)
            while True:
                started = time.perf_counter()
                try:
                    item = next(items)
                except StopIteration:
                    return
                finally:
                    counter[f"{kind}_ms"] += (time.perf_counter() - started) * 1000
                yield item
        return wrapper

    search_index.start_term_days = reads("term_days", originals[(search_index, "start_term_days")])
    search_index.start_postings = reads("postings", originals[(search_index, "start_postings")])
    search_index.start_postings_of_days = reads("postings", originals[(search_index, "start_postings_of_days")])
    search_index.start_postings_at_days = reads("lookups", originals[(search_index, "start_postings_at_days")])
    messages.start_candidates = reads("messages", originals[(messages, "start_candidates")])
    search._day_candidates = phase_of_generator("candidates", originals[(search, "_day_candidates")])
    search._confirm = phase("confirm", originals[(search, "_confirm")])
    search.directory = phase("directory", originals[(search, "directory")])
    try:
        yield
    finally:
        for (module, attr), fn in originals.items():
            setattr(module, attr, fn)


def diagnose(db: Database, classes: dict[str, list[Query]], calls: int, profile_classes: list[str]
             ) -> dict[str, Any]:
    """Per class: reads and time split per request (in-process); a cProfile of the classes asked for."""
    out: dict[str, Any] = {}
    for name, queries in classes.items():
        page2 = name.startswith("page2")
        positions = {q.q: search.search(db, TEAM, q.q, limit=LIMIT).next_position for q in queries} if page2 else {}
        counter: dict[str, float] = dict.fromkeys(
            ["term_days_reads", "term_days_rows", "postings_reads", "postings_rows", "lookups_reads", "lookups_rows",
             "messages_reads", "messages_rows", "candidates_ms", "confirm_ms", "directory_ms"], 0.0)
        total_ms = 0.0
        partial = 0
        with instrumented(counter):
            for i in range(calls):
                query = queries[i % len(queries)]
                started = time.perf_counter()
                page = search.search(db, TEAM, query.q, limit=LIMIT, position=positions.get(query.q))
                total_ms += (time.perf_counter() - started) * 1000
                partial += page.searched_to is not None
        per = {k: round(v / calls, 2) for k, v in counter.items()}
        per["total_ms"] = round(total_ms / calls, 2)
        per["listing_parse_and_rest_ms"] = round(per["total_ms"] - per["candidates_ms"] - per["confirm_ms"]
                                                 - per["directory_ms"], 2)
        per["pages_cut_by_budget"] = partial
        out[name] = per
        _note(f"diagnose {name}", per)
    profiles = {}
    for name in profile_classes:
        queries = classes[name]
        page2 = name.startswith("page2")
        positions = {q.q: search.search(db, TEAM, q.q, limit=LIMIT).next_position for q in queries} if page2 else {}
        profiler = cProfile.Profile()
        profiler.enable()
        for i in range(calls):
            query = queries[i % len(queries)]
            search.search(db, TEAM, query.q, limit=LIMIT, position=positions.get(query.q))
        profiler.disable()
        profiles[name] = _top_functions(profiler, calls)
    out["profiles"] = profiles
    return out


def _top_functions(profiler: cProfile.Profile, calls: int, top: int = 15) -> dict[str, list[str]]:
    stats = pstats.Stats(profiler)
    rows = []
    for (path, line, func), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():
        short = "/".join(Path(path).parts[-2:]) if path != "~" else ""
        rows.append((f"{short}:{line}({func})", ncalls / calls, tottime * 1000 / calls, cumtime * 1000 / calls))

    def fmt(r: tuple[str, float, float, float]) -> str:
        return f"{r[2]:8.2f} ms self {r[3]:8.2f} ms cum {r[1]:9.1f} calls  {r[0]}"

    return {"by_self_time_per_request": [fmt(r) for r in sorted(rows, key=lambda r: -r[2])[:top]],
            "by_cumulative_time_per_request": [fmt(r) for r in sorted(rows, key=lambda r: -r[3])[:top]]}


# ------------------------------------------------------------------------------------------------ main

def _table(result: dict[str, Any]) -> None:
    lines = ["", "| class | results (min-max) | HTTP server p50/p90/p99 c1 | c8 | client p99 c1 / c8 | "
                 "in-process p50/p99 c1 | c8 | pages ok |", "|---|---|---|---|---|---|---|---|"]
    http_, inproc, checks = result["latency_http"], result["latency_in_process"], result["correctness"]["timed"]
    for name in http_:
        h1, h8 = http_[name]["c1"], http_[name]["c8"]
        i1, i8 = inproc[name]["c1"]["client"], inproc[name]["c8"]["client"]
        check = checks.get(name, checks.get("word_common"))
        s1, s8 = h1.get("server", {}), h8.get("server", {})
        lines.append(
            f"| {name} | {check['results_min']:,}-{check['results_max']:,} | "
            f"{s1.get('p50_ms')}/{s1.get('p90_ms')}/{s1.get('p99_ms')} | {s8.get('p50_ms')}/{s8.get('p90_ms')}/"
            f"{s8.get('p99_ms')} | {h1['client'].get('p99_ms')} / {h8['client'].get('p99_ms')} | "
            f"{i1.get('p50_ms')}/{i1.get('p99_ms')} | {i8.get('p50_ms')}/{i8.get('p99_ms')} | "
            f"{'yes' if check['all_ok'] else 'NO'} |")
    bounded = result["correctness"]["bounded"]
    lines.append(f"\nbounded queries paged to the end vs brute force: {sum(b['ok'] for b in bounded)}/{len(bounded)} "
                 "equal")
    load = result.get("load", {})
    if load.get("this_run"):
        lines.append(f"load: {load['this_run']}")
    if result.get("ingest_cost"):
        c = result["ingest_cost"]
        lines.append(f"ingest with/without postings: {c['with_postings_messages_per_s']} / "
                     f"{c['without_postings_messages_per_s']} messages/s (ratio {c['throughput_with_over_without']})")
    if result.get("storage"):
        lines.append("on disk: " + ", ".join(f"{t} {v['mb']} MB" for t, v in result["storage"]["tables"].items()))
    lines.append(f"verdict: {result['verdict']}")
    print("\n".join(lines), file=sys.stderr, flush=True)


def code_version() -> dict[str, Any]:
    """Which search code was measured: the commit, and a hash of the search modules as they are on disk (the
    working tree may hold changes not yet committed)."""
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    files = ["api/slack/search.py", "api/slack/search_index.py", "api/slack/search_terms.py", "api/slack/messages.py"]
    return {"commit": git("rev-parse", "--short", "HEAD"),
            "uncommitted": [f for f in files if git("status", "--porcelain", "--", f)],
            "sha256": {f: hashlib.sha256((ROOT / f).read_bytes()).hexdigest()[:16] for f in files},
            "search_constants": {k: getattr(search, k)
                                 for k in ("MAX_DAYS", "MAX_ROWS", "CONFIRM_COST", "DAY_PAGE", "PROBE")
                                 if hasattr(search, k)}}


def run(args: argparse.Namespace) -> dict[str, Any]:
    spec = Spec(team=TEAM, messages=args.messages, days=args.days, channels=args.channels, users=args.users,
                vocab=args.vocab, zipf=args.zipf, seed=args.seed, chunk=args.chunk)
    world = World(spec)
    settings = scratch_settings(args.keyspace, request_timeout=30.0)
    result: dict[str, Any] = {"bench": "search", "args": vars(args), "keyspace": args.keyspace, "team": TEAM,
                              "spec": dataclasses.asdict(spec), "cpus": os.cpu_count(),
                              "command": " ".join([Path(sys.executable).name, "-m", "bench.search", *sys.argv[1:]]),
                              "code": code_version()}
    started = time.perf_counter()
    db = prepare_keyspace(settings)
    try:
        if args.skip_load:
            loaded = {r.chunk for r in db.execute(SELECT_CHUNKS, (TEAM,))}
            result["load"] = {"skipped": True,
                              "complete": all(world.chunk_id(*c) in loaded for c in world.chunks),
                              "runs": [dict(r._asdict()) for r in db.execute(SELECT_LOADS, (TEAM,))]}
        else:
            result["load"] = load(db, world, args)
        if not result["load"]["complete"] and not args.allow_partial:
            raise SystemExit("the workspace is not completely loaded (run without --skip-load)")
        if args.ab_messages:
            result["ingest_cost"] = ingest_cost(args)
            _note("ingest cost", {k: v for k, v in result["ingest_cost"].items() if k != "passes"})
        result["storage"] = storage(db, spec.messages, compact=args.compact, settle_seconds=args.settle_seconds)
        _note("storage", result["storage"])

        classes = make_queries(world, args.variants, args.seed)
        bounded = bounded_queries(world, args.seed)
        unique = {q.q: q for qs in classes.values() for q in qs}
        db.close()
        t0 = time.perf_counter()
        answers = model_answers(world, list(unique.values()), args.workers)
        model = dict(zip(unique, answers, strict=True))
        result["model_seconds"] = round(time.perf_counter() - t0, 1)
        # Only queries with answers are timed (an empty answer is not what the target is about).
        result["dropped_without_answers"] = [q.q for qs in classes.values() for q in qs if model[q.q][0] == 0]
        classes = {name: [q for q in qs if model[q.q][0] > 0] for name, qs in classes.items()}
        classes = {name: qs for name, qs in classes.items() if qs}
        logs = Path(os.environ.get("TMPDIR", "/tmp")) / f"chronicle-bench-search-{os.getpid()}"
        logs.mkdir(parents=True, exist_ok=True)
        env = {"CHRONICLE_API_TOKENS": json.dumps({TOKEN: {"workspaces": [TEAM], "private": False}})}
        with served(settings, logs, workers=args.gunicorn_workers, threads=args.gunicorn_threads, env=env) as srv:
            port = srv.port
            result["latency_http"], pages = bench_http(port, classes, args.requests)
            result["correctness"] = {"timed": check_timed_pages(classes, pages, model),
                                     "bounded": check_bounded(port, world, bounded)}
        _note("correctness", {k: v["all_ok"] for k, v in result["correctness"]["timed"].items()}
              | {"bounded": [b["ok"] for b in result["correctness"]["bounded"]]})
        result["latency_in_process"] = bench_in_process(db, classes, args.requests)
        slow = [name for name, r in result["latency_http"].items()
                if max(r["c1"].get("server", {}).get("p99_ms", 0), r["c8"].get("server", {}).get("p99_ms", 0))
                > TARGET_MS]
        result["where_the_time_goes"] = diagnose(db, classes, args.diagnose_calls,
                                                 slow if args.profile == "slow" else list(classes))
    finally:
        db.close()
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["code_changed_during_run"] = code_version()["sha256"] != result["code"]["sha256"]
    http_ = result["latency_http"]
    result["verdict"] = {
        f"{name}_server_p99_<=_50ms_c1": (http_[name]["c1"].get("server", {}).get("p99_ms") or 1e9) <= TARGET_MS
        for name in http_} | {
        f"{name}_server_p99_<=_50ms_c8": (http_[name]["c8"].get("server", {}).get("p99_ms") or 1e9) <= TARGET_MS
        for name in http_} | {
        "pages_equal_the_model": all(v["all_ok"] for v in result["correctness"]["timed"].values()),
        "bounded_equal_brute_force": all(b["ok"] for b in result["correctness"]["bounded"])}
    _table(result)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages of the workspace")
    parser.add_argument("--days", type=int, default=365, help="UTC days the messages are spread over")
    parser.add_argument("--channels", type=int, default=50)
    parser.add_argument("--users", type=int, default=300)
    parser.add_argument("--vocab", type=int, default=20_000, help="words of the vocabulary (Zipf ranks)")
    parser.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent of the words")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--keyspace", default="chronicle_bench_search",
                        help="created and migrated if missing; kept (a re-run loads only what is missing)")
    parser.add_argument("--workers", type=int, default=2, help="loader processes (also the model's)")
    parser.add_argument("--chunk", type=int, default=1000, help="messages per loaded chunk (at most one day)")
    parser.add_argument("--batch-size", type=int, default=50, help="execute_many batch_size (the import's)")
    parser.add_argument("--in-flight", type=int, default=100, help="execute_many concurrency per loader")
    parser.add_argument("--skip-load", action="store_true", help="measure what is loaded")
    parser.add_argument("--allow-partial", action="store_true", help="measure an incompletely loaded workspace")
    parser.add_argument("--ab-messages", type=int, default=20_000,
                        help="messages per pass of the with/without-postings ingest comparison (0: skip)")
    parser.add_argument("--compact", action="store_true", help="major-compact the measured tables before sizing")
    parser.add_argument("--settle-seconds", type=float, default=900.0,
                        help="longest wait for the node's compactions before measuring")
    parser.add_argument("--requests", type=int, default=300, help="timed requests per class and concurrency")
    parser.add_argument("--variants", type=int, default=10, help="concrete queries per class")
    parser.add_argument("--gunicorn-workers", type=int, default=3)
    parser.add_argument("--gunicorn-threads", type=int, default=8)
    parser.add_argument("--diagnose-calls", type=int, default=40, help="in-process calls per class, instrumented")
    parser.add_argument("--profile", choices=("slow", "all"), default="slow",
                        help="cProfile the classes over the target (slow) or every class")
    args = parser.parse_args(argv)
    if args.chunk < 1 or args.workers < 1 or args.messages < args.days:
        parser.error("--chunk and --workers must be >= 1, --messages >= --days")
    configure_logging("WARNING", stream=sys.stderr)
    write_result("search", run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
