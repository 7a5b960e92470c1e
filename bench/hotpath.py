"""The hot reads through the API as a ratio to the raw driver, measured in the same run (issue 14, section 1).

    .venv/bin/python -m bench.hotpath [--keyspace chronicle_bench_hotpath] [--skip-load] [--refill]
                                      [--messages 600] [--flat-messages 600]
                                      [--targets timeline,thread,q1,q4-newest,q4-likes,q6,activity,tagging-next,floor]
                                      [--variants 16] [--seconds 10] [--warmup 2] [--concurrency 1,16]
                                      [--rates 100,200,300,400] [--open-seconds 10] [--connections 64]
                                      [--workers 3] [--threads 8] [--load-procs 2]
                                      [--raw-mode concurrent|rounds] [--raw-rows tuple|named]
                                      [--wait-quiet 120] [--profile [timeline,...]] [--quiet-logs]
                                      [--ab-audit ROUNDS [--ab-same]]

The full measurement (about 20 minutes on a quiet machine; the first run also loads the data, ~1 minute):

    .venv/bin/python -m bench.hotpath --seconds 20 --warmup 3 --open-seconds 20 --wait-quiet 300 \
        --profile timeline,q4-newest,q4-likes

Targets (issue 14): API pages/s >= 0.4 x the raw driver's for the timeline page and Q4 (newest and most-liked)
at concurrency 16; Q4 order=likes p99 <= 15 ms at concurrency 1; worker CPU <= 1.2 ms per timeline page;
open-loop p99 <= 20 ms at 300 timeline pages/s offered.

1. Data, in a keyspace of its own kept between runs (`--skip-load` reuses it as it is), written through the
   project's own functions:
   - Slack: bench/viewer.py's workspace (viewer.make_plan + viewer.prepare: profiles, channel snapshots and every
     message through ingest.history_rows, as the backfill writes them): a channel without threads of
     `--flat-messages` messages (every page of 50 shows 50: the timeline target) and one of `--messages` with
     threads (the thread target); then every user's activity days over the messages' span
     (api.activity.service.rebuild_days) for the activity target;
   - network: 40 authors with 80 posts each and 32 readers following all of them, written as cleaned files
     (api.network.cleaning's columns) and loaded by api.network.loader.load_network (accounts, both directions of
     every follow, posts with their term postings, likes and counters, top lists of common terms); posts are
     dated 2026-07..10 and hold words of a fixed vocabulary ("cassandra" in ~75% of posts: a common term with a
     top list), liked 0-16 times each;
   - every run: each reader's home cache is built again (api.network.home.build_cache: 800 of its 3,200
     followed posts), so a Q4 read finds a full cache built minutes ago; a fresh tagging project over two
     authors' posts (api.tagging.service.create_project, queue filled by api.tagging.worker.run_once) with 32
     taggers (add_member) that each hold one item.
2. Targets and their variants (requests cycled through): `timeline` GET /slack/teams/T/channels/C/messages?limit=50
   (the first page and the pages its cursors lead to); `thread` GET .../threads/<ts> (the threads with the most
   replies); `q1` GET /networks/N/accounts/<author>/posts; `q4-newest` and `q4-likes` GET .../accounts/<reader>/home
   (?order=likes); `q6` GET /networks/N/search?q= (a common term, common + rarer, two rarer ones, ...); `activity`
   GET /slack/teams/T/users/<user>/activity?from=&to= (31 days); `tagging-next` POST /tagging/projects/P/next by
   a tagger who holds an item (the reload case: the held item, its lease renewed with a lightweight transaction
   that applies again on every replay; claiming new items is measured by bench/tagging.py); `floor` GET /healthz
   (no CQL: gunicorn, Flask and the app's per-request work alone; no raw phase, no ratio).
3. Recording. The app (api.app.create_app, the same settings as the served one) serves each variant in this
   process through Flask's test client: once untimed (per-process caches filled, prepared statements made; for
   a tagger, the claim), then once with a recorder on the Database's driver Session (`Recorder`): every call
   the app hands to `Session.execute_async` (where Database.execute, execute_async, execute_many and
   execute_conditional_batch all end up) with its statement, values as bound and consistency levels as sent,
   and every further page the driver fetches for it (ResponseFuture.start_fetching_next_page), each with the
   time it was sent and answered. The recording goes to a pickle; `recorded` in the result lists, per target,
   the statements of a request and how many rounds of round trips they took (bench/hotpath_replay.rounds).
4. Measurement, per target, one phase after the other with gunicorn (gunicorn.conf.py, `--workers` x
   `--threads`, production logging: the INFO request log and no gunicorn access log, as gunicorn.conf.py
   serves by default; `--quiet-logs` WARNING, `--access-log` adds gunicorn's access log) running
   throughout, the machine left to become quiet before each phase (`--wait-quiet`, bench.viewer.wait_quiet):
   - raw: bench/hotpath_replay.py in a process of its own replays the target's recorded requests with the plain
     driver (every CQL prepared once, 16 requests in flight, the same consistency levels; all calls of a request
     sent at once unless `--raw-mode rounds`; rows decoded as tuples unless `--raw-rows named`; see its doc) at
     concurrency 1 and 16: pages/s, p50/p99, driver and node CPU per page;
   - API: bench/network_loadgen.py in its own process(es), closed loop at each `--concurrency` (a keep-alive
     connection per client thread): pages/s, p50/p90/p99; worker CPU per request = the gunicorn workers' CPU
     seconds (/proc/<pid>/stat utime + stime, before and after the generator ran) / the requests it got answered
     (its warm-up included); the node's likewise;
   - ratio = API pages/s / raw pages/s at the highest concurrency.
   Then the open loop for the timeline page: each `--rates` offered rate for `--open-seconds` (requests sent on a
   fixed schedule whatever the answers, latency from the scheduled time: network_loadgen.open_loop): p50/p99/max,
   late and failed requests, beside the closed-loop maximum.
5. `--profile [targets]` (default: timeline): py-spy records one gunicorn worker during the target's c16 API
   phase: a flame graph of the samples holding the GIL (the worker's Python CPU) written to
   docs/flamegraphs/<target>.svg, and all threads' raw stacks summarised in the result (the share of
   request-thread samples waiting and the functions running most: bench.viewer.py_spy_summary).

Prints a Markdown table on stderr and one JSON object on stdout, written under bench/results/hotpath-<UTC>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import json
import logging
import os
import pickle
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from cassandra.cluster import EXEC_PROFILE_DEFAULT, ResponseFuture
from cassandra.query import UNSET_VALUE, BatchStatement, BoundStatement

from api.activity import service as activity
from api.config import Settings
from api.db import Database, Statement
from api.migrations import migrate
from api.network import home, loader
from api.network.cleaning import CLEAN_POST_COLUMNS
from api.observability import configure_logging
from api.slack.timeutil import ts_to_us
from api.tagging import service as tagging
from api.tagging import worker as tagging_worker
from bench import viewer
from bench.hotpath_replay import Call, Recording, rounds
from bench.network_loadgen import ANSWERED, Request
from bench.scale_common import BIN, ROOT, local_node, scratch_settings, served, write_result
from bench.tagging import _children, cpu_seconds

PY_SPY = Path(sys.executable).parent / "py-spy"
FLAMEGRAPHS = ROOT / "docs" / "flamegraphs"
TOKEN = "bench-hotpath-token"
ADMIN_TOKEN = "bench-hotpath-admin"
TEAM = viewer.TEAM
NETWORK = "hotpath"
AUTHORS = [1001 + a for a in range(40)]
READERS = [2001 + r for r in range(32)]
POSTS_PER_AUTHOR = 80
POSTS_FROM = datetime(2026, 7, 1, tzinfo=UTC)
POSTS_SPAN = timedelta(days=120)
# Words of the posts: "cassandra" in ~75% (more postings than search.RARE_POSTINGS: a common term with a top
# list), the others from ~35% down to ~3%.
VOCABULARY = [("cassandra", 0.75), ("latency", 0.35), ("compaction", 0.25), ("replica", 0.15), ("gossip", 0.08),
              ("tombstone", 0.05), ("hinted", 0.03)]
FILLER = ["the", "node", "was", "slow", "after", "we", "moved", "it", "today", "again", "and", "then", "fixed"]
SEARCHES = ["cassandra", "cassandra latency", "latency compaction", "replica gossip", "tombstone", "compaction",
            "cassandra hinted", "gossip"]
TAGGERS = 32
CATEGORIES = ["news", "opinion", "question", "other"]
TARGETS = ["timeline", "timeline-304", "thread", "q1", "q4-newest", "q4-likes", "q6", "activity", "tagging-next",
           "floor"]
RATIO_TARGETS = ("timeline", "q4-newest", "q4-likes")


def _note(part: str, figures: Any) -> None:
    print(f"{part}: {json.dumps(figures, default=str)}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ data

def network_files(directory: Path) -> dict[str, int]:
    """The network as the cleaning scripts would leave it: accounts.csv, relations.csv, posts.csv, likes.csv."""
    directory.mkdir(parents=True, exist_ok=True)
    name = {**{a: f"hp_author_{i:02d}" for i, a in enumerate(AUTHORS)},
            **{r: f"hp_reader_{i:02d}" for i, r in enumerate(READERS)}}
    with (directory / "accounts.csv").open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["account_id", "username", "follower_count", "follows_count"])
        writer.writerows([a, name[a], len(READERS), 0] for a in AUTHORS)
        writer.writerows([r, name[r], 0, len(AUTHORS)] for r in READERS)
    with (directory / "relations.csv").open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["account_id", "account_username", "rel_type", "target_id", "target_username"])
        writer.writerows([a, name[a], "follower", r, name[r]] for a in AUTHORS for r in READERS)
        writer.writerows([r, name[r], "follows", a, name[a]] for r in READERS for a in AUTHORS)
    total = len(AUTHORS) * POSTS_PER_AUTHOR
    likes = 0
    with (directory / "posts.csv").open("w", newline="", encoding="utf-8") as pout, \
            (directory / "likes.csv").open("w", newline="") as lout:
        posts_writer, likes_writer = csv.writer(pout), csv.writer(lout)
        posts_writer.writerow(CLEAN_POST_COLUMNS)
        likes_writer.writerow(["post_id", "user_id"])
        for g in range(total):  # g: the post's place in time over all authors
            author = AUTHORS[g % len(AUTHORS)]
            post_id = 10_000_000 + author * 1_000 + g // len(AUTHORS)
            rng = random.Random(post_id)
            words = [w for w, share in VOCABULARY if rng.random() < share] + rng.sample(FILLER, 5)
            rng.shuffle(words)
            posted = POSTS_FROM + POSTS_SPAN * g / total
            posts_writer.writerow([post_id, author, name[author], name[author], post_id,
                                   posted.isoformat().replace("+00:00", "Z"), " ".join(words), "en", "", "", "", 0,
                                   g % 5])
            for j in range(g * 7 % 17):
                likes_writer.writerow([post_id, READERS[(g + j) % len(READERS)]])
                likes += 1
    return {"accounts": len(AUTHORS) + len(READERS), "follows": len(AUTHORS) * len(READERS), "posts": total,
            "likes": likes}


def plans(args: argparse.Namespace) -> dict[str, viewer.Plan]:
    return {"threaded": viewer.make_plan(args.messages), "flat": viewer.make_plan(args.flat_messages, threads=False)}


def message_days(plan: viewer.Plan) -> tuple[date, date]:
    """The first and last UTC day of a plan's messages."""
    stamps = [ts_to_us(m["ts"]) for m in plan.messages]
    return tuple(datetime.fromtimestamp(us / 1e6, UTC).date() for us in (min(stamps), max(stamps)))


def load(settings: Settings, args: argparse.Namespace, logs: Path) -> dict[str, Any]:
    """The Slack workspace (resumable: bench.viewer.prepare skips a complete channel), activity days and the
    network (idempotent loads)."""
    # bench/viewer.py's fill sends messages in batches of 20 rows, over the node's 5 KiB batch warning: not ours.
    quiet = logging.getLogger("cassandra.protocol")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        out: dict[str, Any] = {"slack": viewer.prepare(settings, settings.keyspace, plans(args), refill=args.refill)}
    finally:
        quiet.setLevel(level)
    db = Database(settings)
    try:
        started = time.perf_counter()
        first, last = message_days(plans(args)["threaded"])
        days = [first + timedelta(days=d) for d in range(-1, (last - first).days + 2)]
        written = activity.rebuild_days(db, activity.Archive.slack(TEAM), {u: days for u in viewer.USERS})
        out["activity"] = {"users": len(viewer.USERS), "days": len(days), "days_written": written,
                           "seconds": round(time.perf_counter() - started, 1)}
        started = time.perf_counter()
        directory = logs / "network"
        out["network"] = {"files": network_files(directory),
                          "rows_written": loader.load_network(db, NETWORK, directory),
                          "seconds": round(time.perf_counter() - started, 1)}
    finally:
        db.close()
    _note("loaded", out)
    return out


def session_data(settings: Settings) -> dict[str, Any]:
    """What every run makes fresh: the readers' home caches and a tagging project with its taggers' tokens."""
    db = Database(settings)
    try:
        started = time.perf_counter()
        entries = [home.build_cache(db, NETWORK, r)["entries"] for r in READERS]
        caches = {"readers": len(READERS), "entries": sorted(set(entries)),
                  "seconds": round(time.perf_counter() - started, 1)}
        started = time.perf_counter()
        project = f"hotpath-{datetime.now(UTC):%m%d%H%M%S}-{random.randrange(16 ** 4):04x}"
        tagging.create_project(db, project, project, {"kind": "network", "network": NETWORK, "authors": AUTHORS[:2]},
                               CATEGORIES, [], queue_size=200, lease_seconds=3600, max_held=1, teams={"bench": None})
        tokens = [tagging.add_member(db, project, f"tagger{i:02d}", "bench", "tagger") for i in range(TAGGERS)]
        queued = tagging_worker.run_once(db, project)
        project_figures = {"project": project, "taggers": len(tokens), "first_pass": queued,
                           "seconds": round(time.perf_counter() - started, 1)}
    finally:
        db.close()
    _note("session data", {"caches": caches, "tagging": project_figures})
    return {"caches": caches, "tagging": project_figures, "project": project, "tokens": tokens}


# ------------------------------------------------------------------------------------------------ targets

@dataclasses.dataclass
class Target:
    name: str
    requests: list[Request]


def _get(path: str, token: str | None = TOKEN) -> Request:
    return Request("GET", path, {"Authorization": f"Bearer {token}"} if token else {})


def make_targets(args: argparse.Namespace, data: dict[str, Any], client: Any) -> list[Target]:
    """Each target's variants (`client`: a test client of the app, to walk the timeline's cursors)."""
    n = args.variants
    chosen = set(args.targets)
    flat, threaded = plans(args)["flat"], plans(args)["threaded"]
    out = []
    if chosen & {"timeline", "timeline-304"}:
        base = f"/slack/teams/{TEAM}/channels/{flat.channel_id}/messages"
        requests, revalidations, cursor = [], [], None
        while len(requests) < n:
            path = f"{base}?{urlencode({'limit': 50, **({'cursor': cursor} if cursor else {})})}"
            requests.append(_get(path))
            answer = client.get(path, headers=requests[-1].headers)
            # The same page revalidated with the ETag it was given: answered 304 without reading its rows.
            revalidations.append(Request("GET", path, {**requests[-1].headers,
                                                       "If-None-Match": answer.headers.get("ETag", "")}))
            cursor = answer.get_json().get("next_cursor") if answer.status_code == 200 else None
            if not cursor:
                break
        if "timeline" in chosen:
            out.append(Target("timeline", requests))
        if "timeline-304" in chosen:
            out.append(Target("timeline-304", revalidations))
    if "thread" in chosen:
        heads = sorted((m for m in threaded.messages if m.get("reply_count")), key=lambda m: -m["reply_count"])[:n]
        out.append(Target("thread", [_get(f"/slack/teams/{TEAM}/channels/{threaded.channel_id}/threads/{m['ts']}")
                                     for m in heads]))
    if "q1" in chosen:
        out.append(Target("q1", [_get(f"/networks/{NETWORK}/accounts/{a}/posts", None) for a in AUTHORS[:n]]))
    if "q4-newest" in chosen:
        out.append(Target("q4-newest", [_get(f"/networks/{NETWORK}/accounts/{r}/home", None) for r in READERS[:n]]))
    if "q4-likes" in chosen:
        out.append(Target("q4-likes", [_get(f"/networks/{NETWORK}/accounts/{r}/home?order=likes", None)
                                       for r in READERS[:n]]))
    if "q6" in chosen:
        out.append(Target("q6", [_get(f"/networks/{NETWORK}/search?{urlencode({'q': q})}", None)
                                 for q in SEARCHES[:n]]))
    if "activity" in chosen:
        first, _last = message_days(threaded)
        window = {"from": (first - timedelta(days=1)).isoformat(), "to": (first + timedelta(days=29)).isoformat()}
        out.append(Target("activity", [_get(f"/slack/teams/{TEAM}/users/{u}/activity?{urlencode(window)}")
                                       for u in viewer.USERS[:n]]))
    if "tagging-next" in chosen:
        # Every tagger at most once per slot (>= 16 taggers): two requests of one tagger are never in flight.
        out.append(Target("tagging-next", [
            Request("POST", f"/tagging/projects/{data['project']}/next",
                    {"Authorization": f"Bearer {t}", "Content-Type": "application/json"}, b"{}")
            for t in data["tokens"]]))
    if "floor" in chosen:
        # No CQL at all: what gunicorn, Flask and the app's per-request work (logging, metrics, Server-Timing)
        # cost a request by themselves, the floor under every other target's worker CPU.
        out.append(Target("floor", [_get("/healthz", None)]))
    return out


def write_requests(target: Target, path: Path) -> Path:
    """The target's requests as network_loadgen's --requests-file."""
    with path.open("w") as out:
        for r in target.requests:
            out.write(json.dumps({"method": r.method, "path": r.path, "headers": r.headers,
                                  "body": r.body.decode() if r.body is not None else None}) + "\n")
    return path


# ------------------------------------------------------------------------------------------------ recording

class Recorder:
    """Records every call one request's handling hands to the Database's driver Session (see the module doc).

    Installed on the Session instance (`Session.execute` calls `self.execute_async`, so synchronous executes are
    seen too) and on ResponseFuture's next-page fetch (class-wide, while installed). Only calls made between
    `request()`'s start and end are kept; whatever thread makes them.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self.session = db.session
        self.original = self.session.execute_async
        self.original_next_page = ResponseFuture.start_fetching_next_page
        self.lock = threading.Lock()
        self.calls: list[Call] | None = None
        self.by_future: dict[int, list[Call]] = {}

    def install(self) -> None:
        recorder = self

        def next_page(future: ResponseFuture) -> Any:
            with recorder.lock:
                earlier = recorder.by_future.get(id(future)) if recorder.calls is not None else None
                if earlier:
                    page = dataclasses.replace(earlier[0], paging_state=future._paging_state,
                                               issued=time.perf_counter(), answered=None, rows=None)
                    earlier.append(page)
                    recorder.calls.append(page)
            return recorder.original_next_page(future)

        self.session.execute_async = self._execute_async
        ResponseFuture.start_fetching_next_page = next_page

    def uninstall(self) -> None:
        with contextlib.suppress(AttributeError):
            del self.session.execute_async
        ResponseFuture.start_fetching_next_page = self.original_next_page

    @contextlib.contextmanager
    def request(self) -> Iterator[list[Call]]:
        """`with recorder.request() as calls:` serve one request; `calls` then holds what it sent, with rounds."""
        calls: list[Call] = []
        with self.lock:
            self.calls, self.by_future = calls, {}
        try:
            yield calls
        finally:
            with self.lock:
                self.calls = None
            deadline = time.monotonic() + 5
            while any(c.answered is None for c in calls) and time.monotonic() < deadline:
                time.sleep(0.005)  # a call the request did not wait for: its answer still counts
            for call, n in zip(calls, rounds(calls), strict=True):
                call.round = n

    def _execute_async(self, *args: Any, **kwargs: Any) -> ResponseFuture:
        issued = time.perf_counter()
        future = self.original(*args, **kwargs)
        if self.calls is None:
            return future
        profile = args[5] if len(args) > 5 else kwargs.get("execution_profile", EXEC_PROFILE_DEFAULT)
        call = self._call(future, profile, issued)
        with self.lock:
            if self.calls is None:
                return future
            self.calls.append(call)
            self.by_future[id(future)] = [call]

        def answered(rows: Any, error: bool = False) -> None:
            now = time.perf_counter()
            with self.lock:
                waiting = next((c for c in self.by_future.get(id(future), []) if c.answered is None), None)
                if waiting is not None:
                    waiting.answered = now
                    if not error and rows is not None:
                        waiting.rows = len(rows)

        future.add_callbacks(answered, lambda _exc: answered(None, True))
        return future

    def _call(self, future: ResponseFuture, profile: Any, issued: float) -> Call:
        # As the driver sends it: a PreparedStatement handed over with its values is bound by then (execute_many's
        # execute_concurrent does that), a string became a SimpleStatement with its parameters inlined.
        query, message = future.query, future.message
        common = {"consistency": message.consistency_level,
                  "serial_consistency": getattr(message, "serial_consistency_level", None),
                  "fetch_size": getattr(message, "fetch_size", None),
                  "paging_state": getattr(message, "paging_state", None),
                  "idempotent": bool(getattr(query, "is_idempotent", False)),
                  "execution_profile": "" if profile is EXEC_PROFILE_DEFAULT else str(profile), "issued": issued}
        if isinstance(query, BoundStatement):
            raw = list(query.raw_values or ())
            unset = [i for i, v in enumerate(raw) if v is UNSET_VALUE]
            values = [None if i in unset else v for i, v in enumerate(raw)]
            cql = query.prepared_statement.query_string
            return Call("bound", Statement(cql).name, cql, values, unset, **common)
        if isinstance(query, BatchStatement):
            entries = []
            known = self.session.cluster._prepared_statements
            for is_prepared, statement, values in query._statements_and_parameters:
                if not is_prepared:
                    raise NotImplementedError("a batch with unprepared statements: not replayable here")
                entries.append((known[statement].query_string, statement, list(values)))
            return Call("batch", f"BATCH {Statement(entries[0][0]).name}", "", [], [], batch=entries,
                        batch_type=query.batch_type, **common)
        return Call("simple", Statement(message.query).name, message.query, [], [], **common)


def record(settings: Settings, args: argparse.Namespace, data: dict[str, Any], logs: Path
           ) -> tuple[list[Target], Path, dict[str, Any]]:
    """Build the targets, serve each variant in-process once untimed and once recorded; the recording's file
    and, per target, what a request sends."""
    from api.app import create_app

    db = Database(settings)
    app = create_app(settings, database=db)
    configure_logging("WARNING", stream=sys.stderr)  # create_app configured the app's; the bench's stay quiet
    client = app.test_client()
    recorder: Recorder | None = None
    recorded: dict[str, list[list[Call]]] = {}
    summary: dict[str, Any] = {}
    protocol = 0
    try:
        targets = make_targets(args, data, client)
        for target in targets:
            requests, sizes = [], []
            for request in target.requests:
                def serve(request: Request = request, target: Target = target) -> Any:
                    answer = client.open(request.path, method=request.method, headers=request.headers,
                                         data=request.body)
                    if answer.status_code not in ANSWERED:
                        raise RuntimeError(f"{target.name}: {request.method} {request.path} answered "
                                           f"{answer.status_code}: {answer.get_data(as_text=True)[:300]}")
                    return answer

                serve()  # untimed: prepared statements, per-process caches; a tagger claims its item
                if recorder is None:
                    recorder = Recorder(db)
                    recorder.install()
                    protocol = db.session.cluster.protocol_version  # as negotiated: the replay uses the same
                with recorder.request() as calls:
                    sizes.append(len(serve().get_data()))
                requests.append(calls)
            recorded[target.name] = requests
            summary[target.name] = recording_summary(requests, sizes)
            _note(f"recorded {target.name}", summary[target.name])
    finally:
        if recorder is not None:
            recorder.uninstall()
        db.close()
    path = logs / "recording.pickle"
    with path.open("wb") as out:
        pickle.dump(Recording(list(settings.contact_points), settings.cassandra_port, settings.keyspace,
                              settings.local_dc or None, protocol, recorded), out)
    return targets, path, summary


def recording_summary(requests: list[list[Call]], sizes: list[int]) -> dict[str, Any]:
    per_request = [len(calls) for calls in requests]
    depth = [max((c.round for c in calls), default=0) for calls in requests]
    names: Counter[str] = Counter(c.name for calls in requests for c in calls)
    return {"variants": len(requests), "calls_per_request": [min(per_request), round(statistics.mean(per_request), 1),
                                                            max(per_request)],
            "rounds_per_request": [min(depth), max(depth)],
            "statements_per_request": {k: round(v / len(requests), 2) for k, v in names.most_common()},
            "kinds": sorted({c.kind for calls in requests for c in calls}),
            "execution_profiles": sorted({c.execution_profile for calls in requests for c in calls} - {""}),
            "answer_bytes_median": int(statistics.median(sizes))}


# ------------------------------------------------------------------------------------------------ phases

def _quiet(args: argparse.Namespace) -> dict[str, Any]:
    waited = viewer.wait_quiet(args.wait_quiet) if args.wait_quiet else 0.0
    return {"waited_for_quiet_s": round(waited), "others_running": viewer.others_running()}


def raw_phase(recording: Path, target: str, concurrency: int, args: argparse.Namespace, node_pid: int
              ) -> dict[str, Any]:
    """The raw-driver replay of `target` in its own process (bench/hotpath_replay.py)."""
    context = _quiet(args)
    command = [sys.executable, "-m", "bench.hotpath_replay", str(recording), "--target", target,
               "--concurrency", str(concurrency), "--seconds", str(args.seconds), "--warmup", str(args.warmup),
               "--mode", args.raw_mode, "--rows", args.raw_rows, "--node-pid", str(node_pid)]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                         timeout=args.seconds + args.warmup + 120)
    if run.returncode != 0:
        raise RuntimeError(f"raw replay of {target} failed: {run.stderr[-2000:]}")
    out = json.loads(run.stdout)
    out.update(context)
    _note(f"raw {target} c{concurrency}", {k: out.get(k) for k in ("pages_per_s", "p50_ms", "p99_ms", "failed",
                                                                    "driver_cpu_ms_per_page", "row_mismatches")})
    return out


def loadgen(port: int, requests_file: Path, args: argparse.Namespace, pids: dict[str, list[int]], *,
            concurrency: int = 16, rate: float = 0.0, seconds: float | None = None, processes: int = 1
            ) -> dict[str, Any]:
    """bench/network_loadgen.py in its own process(es); the CPU the measured processes used per request answered
    (the generator's warm-up included)."""
    seconds = args.seconds if seconds is None else seconds
    command = [sys.executable, "-m", "bench.network_loadgen", "--port", str(port), "--requests-file",
               str(requests_file), "--seconds", str(seconds), "--warmup", str(args.warmup),
               "--processes", str(processes)]
    command += ["--rate", str(rate), "--connections", str(args.connections)] if rate else \
        ["--concurrency", str(concurrency)]
    before = {k: sum(cpu_seconds(p) for p in v) for k, v in pids.items()}
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=seconds + args.warmup + 120)
    after = {k: sum(cpu_seconds(p) for p in v) for k, v in pids.items()}
    if run.returncode != 0:
        raise RuntimeError(f"the load generator failed: {run.stderr[-2000:]}")
    out = json.loads(run.stdout)
    answered = out.get("total_answered") or 0
    out["cpu_ms_per_request"] = {k: round((after[k] - before[k]) * 1000 / answered, 3) if answered else None
                                 for k in pids}
    return out


def api_phase(port: int, target: Target, concurrency: int, args: argparse.Namespace, pids: dict[str, list[int]],
              logs: Path, profile: bool) -> dict[str, Any]:
    context = _quiet(args)
    requests_file = write_requests(target, logs / f"requests-{target.name}.jsonl")
    spies: list[tuple[str, subprocess.Popen]] = []
    if profile:
        spies = start_profile(pids["gunicorn workers"][0], target.name, args.warmup + args.seconds + 1, logs)
    out = loadgen(port, requests_file, args, pids, concurrency=concurrency,
                  processes=1 if concurrency == 1 else args.load_procs)
    if spies:
        out["profile"] = finish_profile(spies, target.name, logs)
    out.update(context)
    _note(f"api {target.name} c{concurrency}",
          {k: out.get(k) for k in ("rps", "p50_ms", "p99_ms", "errors", "cpu_ms_per_request")})
    return out


def open_loop_phase(port: int, target: Target, rate: float, args: argparse.Namespace,
                    pids: dict[str, list[int]], logs: Path) -> dict[str, Any]:
    context = _quiet(args)
    requests_file = write_requests(target, logs / f"requests-{target.name}.jsonl")
    out = loadgen(port, requests_file, args, pids, rate=rate, seconds=args.open_seconds, processes=args.load_procs)
    out.update(context)
    _note(f"open loop {target.name} {rate}/s", {k: out.get(k) for k in ("achieved_rps", "p50_ms", "p99_ms", "max_ms",
                                                                          "late", "failed")})
    return out


# ------------------------------------------------------------------------------------------------ profile

def start_profile(pid: int, name: str, seconds: float, logs: Path) -> list[tuple[str, subprocess.Popen]]:
    """py-spy on one worker for `seconds`, two samplers side by side (--nonblocking: the worker is read, never
    stopped): a flame graph (SVG) of the samples of threads holding the GIL (--gil: where the worker's Python CPU
    goes, waits left out), and all threads' raw stacks (bench.viewer.py_spy) for the summary."""
    if not PY_SPY.exists():
        return []
    FLAMEGRAPHS.mkdir(parents=True, exist_ok=True)
    svg = subprocess.Popen([str(PY_SPY), "record", "--pid", str(pid), "--duration", str(int(seconds + 0.5)),
                            "--rate", "100", "--format", "flamegraph", "--output", str(FLAMEGRAPHS / f"{name}.svg"),
                            "--gil", "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    raw = viewer.py_spy(pid, seconds, logs / f"py-spy-{name}.txt")
    return [("svg", svg)] + ([("raw", raw)] if raw is not None else [])


def finish_profile(spies: list[tuple[str, subprocess.Popen]], name: str, logs: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, proc in spies:
        try:
            _stdout, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            _stdout, err = proc.communicate()
        if proc.returncode != 0:
            out[f"{kind}_error"] = err.decode(errors="replace")[-500:]
    svg = FLAMEGRAPHS / f"{name}.svg"
    if svg.exists():
        out["flamegraph"] = str(svg.relative_to(ROOT))
    raw = logs / f"py-spy-{name}.txt"
    if raw.exists():
        out.update(viewer.py_spy_summary(raw, top=15))
    return out


# ------------------------------------------------------------------------------------------------ main

def code_state() -> dict[str, Any]:
    """Which code was measured: others change api/ while benches run."""
    def git(*words: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *words], capture_output=True, text=True).stdout

    return {"commit": git("rev-parse", "HEAD").strip(),
            "modified": git("status", "--short", "api", "gunicorn.conf.py").splitlines()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    node = local_node()
    load_settings = scratch_settings(args.keyspace, node=node, request_timeout=60.0)
    tokens = json.dumps({TOKEN: {"workspaces": [TEAM]}})
    # The recorder's app: the served app's settings (tokens, cursor secret, consistency), its own log quiet, and
    # no pages kept by their ETag: the raw driver replays what building a page reads, not what a kept page does.
    app_settings = scratch_settings(args.keyspace, node=node, api_tokens=tokens, admin_token=ADMIN_TOKEN,
                                    log_level="WARNING", page_cache_bytes=0)
    result: dict[str, Any] = {"bench": "hotpath", "args": vars(args), "cpus": os.cpu_count(),
                              "started": datetime.now(UTC).isoformat(), "code": code_state(),
                              "command": " ".join(["python", "-m", "bench.hotpath", *sys.argv[1:]]),
                              "others_at_start": viewer.others_running(), "loadavg_at_start": os.getloadavg()}
    logs = Path(tempfile.gettempdir()) / f"chronicle-bench-hotpath-{os.getpid()}"
    logs.mkdir(parents=True, exist_ok=True)
    result["logs"] = str(logs)
    if args.skip_load:
        # What is loaded stays; the schema is brought up to date (a keyspace loaded before a new migration
        # would keep gunicorn's /readyz at 503).
        admin = Database(load_settings, keyspace="")
        try:
            applied = migrate(admin, load_settings.keyspace, load_settings.replication_map(),
                              log=lambda m: print(m, file=sys.stderr))
        finally:
            admin.close()
        result["load"] = {"skipped": True, "migrations_applied": applied}
    else:
        result["load"] = load(load_settings, args, logs)
    data = session_data(load_settings)
    result["session_data"] = {"caches": data["caches"], "tagging": data["tagging"]}
    targets, recording, result["recorded"] = record(app_settings, args, data, logs)
    env = {"CHRONICLE_API_TOKENS": tokens, "CHRONICLE_ADMIN_TOKEN": ADMIN_TOKEN}
    if not args.quiet_logs:  # the production default: the INFO request log (gunicorn's access log is off)
        env.update(CHRONICLE_LOG_LEVEL="INFO")
    if args.access_log:
        env.update(CHRONICLE_ACCESS_LOG=str(logs / "access.log"))
    if args.ab_audit:
        result["ab_audit"] = ab_audit(app_settings, args, targets, env, logs)
        table_ab(result["ab_audit"])
        return result
    profiled = set(args.profile or ())
    if profiled and not (BIN / "py-spy").exists():
        raise SystemExit("--profile needs py-spy (a dev dependency: .venv/bin/pip install -e '.[dev]')")
    phases: dict[str, dict[str, Any]] = {}
    with served(app_settings, logs, workers=args.workers, threads=args.threads, env=env, app_log="app.log") as srv:
        workers = _children(srv.master.pid)
        node_pid = viewer.node_pid(node)
        viewer._MINE.update([srv.master.pid, *workers, node_pid])  # left out of others_running()
        pids = {"gunicorn workers": workers, "cassandra": [node_pid]}
        result["gunicorn"] = {"workers": len(workers), "threads": args.threads}
        # Untimed: every worker's connection, prepared statements and caches, for every target.
        warm = Target("all", [r for t in targets for r in t.requests])
        loadgen(srv.port, write_requests(warm, logs / "requests-all.jsonl"), args, pids,
                concurrency=min(len(warm.requests), 8), seconds=max(2.0, args.warmup * 2))
        top = max(args.concurrency)
        for target in targets:
            entry: dict[str, Any] = {"raw": {}, "api": {}}
            for c in args.concurrency if target.name != "floor" else ():  # the floor sends no CQL to replay
                entry["raw"][f"c{c}"] = raw_phase(recording, target.name, c, args, node_pid)
            for c in args.concurrency:
                pids["gunicorn workers"] = _children(srv.master.pid)
                entry["api"][f"c{c}"] = api_phase(srv.port, target, c, args, pids, logs,
                                                  profile=c == top and target.name in profiled)
                if srv.master.poll() is not None:
                    raise RuntimeError(f"gunicorn exited ({srv.master.returncode}); see {logs / 'gunicorn.log'}")
            raw_rate = entry["raw"].get(f"c{top}", {}).get("pages_per_s")
            entry["ratio"] = round(entry["api"][f"c{top}"]["rps"] / raw_rate, 3) if raw_rate else None
            entry["ratio_at"] = f"c{top}"
            phases[target.name] = entry
        if "timeline" in phases and args.rates:
            timeline = next(t for t in targets if t.name == "timeline")
            result["open_loop"] = {"target": "timeline", "closed_loop_max_rps": max(
                p["rps"] for p in phases["timeline"]["api"].values()),
                "rates": [open_loop_phase(srv.port, timeline, rate, args, pids, logs) for rate in args.rates]}
    result["phases"] = phases
    result["others_at_end"] = viewer.others_running()
    result["loadavg_at_end"] = os.getloadavg()
    result["verdict"] = verdict(result)
    table(result)
    return result


def ab_audit(app_settings: Settings, args: argparse.Namespace, targets: list[Target], env: dict[str, str],
             logs: Path) -> dict[str, Any]:
    """The access audit log's cost (issue 32: <= 5% of the timeline page's worker CPU), A/B in one run: two
    gunicorns on the same node and keyspace, one with CHRONICLE_AUDIT=off, served side by side; closed-loop phases
    of the timeline target at the top concurrency alternate between them (off, on, on, off, ...) for
    `--ab-audit` rounds, so both see the machine's drift alike. Worker CPU per page of each phase; the verdict
    compares the medians."""
    timeline = next(t for t in targets if t.name == "timeline")
    top = max(args.concurrency)
    requests_file = write_requests(timeline, logs / "requests-timeline.jsonl")
    samples: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    with contextlib.ExitStack() as stack:
        servers = {name: stack.enter_context(served(app_settings, logs / f"audit-{name}", workers=args.workers,
                                                    threads=args.threads, app_log="app.log",
                                                    env={**env, "CHRONICLE_AUDIT": "off" if args.ab_same else name}))
                   for name in ("off", "on")}
        pids = {name: {"gunicorn workers": _children(srv.master.pid)} for name, srv in servers.items()}
        for name, srv in servers.items():  # untimed: connections, prepared statements, caches
            loadgen(srv.port, requests_file, args, pids[name], concurrency=8, seconds=max(2.0, args.warmup * 2))
        for round_no in range(args.ab_audit):
            order = ("off", "on") if round_no % 2 == 0 else ("on", "off")
            for name in order:
                _quiet(args)
                out = loadgen(servers[name].port, requests_file, args, pids[name], concurrency=top,
                              processes=args.load_procs)
                samples[name].append({"rps": out["rps"], "p99_ms": out["p99_ms"], "errors": out.get("errors"),
                                      "cpu_ms": out["cpu_ms_per_request"]["gunicorn workers"]})
                _note(f"ab audit {name} round {round_no}", samples[name][-1])
    medians = {name: statistics.median(s["cpu_ms"] for s in found) for name, found in samples.items()}
    added = medians["on"] / medians["off"] - 1
    # Each round's two phases ran back to back: their ratio cancels most of the machine's drift between rounds.
    paired = statistics.median(on["cpu_ms"] / off["cpu_ms"] - 1 for on, off in zip(samples["on"], samples["off"],
                                                                                      strict=True))
    return {"concurrency": top, "rounds": args.ab_audit, "both_off": args.ab_same, "samples": samples,
            "median_cpu_ms": {k: round(v, 3) for k, v in medians.items()}, "paired_added_median": round(paired, 4),
            "median_rps": {name: statistics.median(s["rps"] for s in found) for name, found in samples.items()},
            "added_share": round(added, 4), "verdict": {"audit adds <= 5% worker CPU per timeline page": added <= 0.05,
                                                        "every answer 200": all(not s["errors"] for found in
                                                                                samples.values() for s in found)}}


def table_ab(ab: dict[str, Any]) -> None:
    lines = ["", f"audit A/B, timeline page c{ab['concurrency']}, {ab['rounds']} rounds alternated:", "",
             "| audit | worker CPU ms/page (each round) | median | pages/s median |", "|---|---|---|---|"]
    for name in ("off", "on"):
        lines.append(f"| {name} | {', '.join(str(s['cpu_ms']) for s in ab['samples'][name])} | "
                     f"{ab['median_cpu_ms'][name]} | {ab['median_rps'][name]} |")
    lines.append(f"added: {ab['added_share']:.1%} (medians), {ab['paired_added_median']:.1%} (median of each round's "
                 f"on/off); verdict: {ab['verdict']}")
    print("\n".join(lines), file=sys.stderr, flush=True)


def verdict(result: dict[str, Any]) -> dict[str, bool]:
    phases = result["phases"]
    out: dict[str, bool] = {}
    answers = [p for e in phases.values() for p in e["api"].values()]
    answers += result.get("open_loop", {}).get("rates", [])
    out["every API answer 200"] = all(not p.get("errors") and not p.get("failed") for p in answers)
    out["every raw page answered"] = all(not p.get("failed") for e in phases.values() for p in e["raw"].values())
    for name in RATIO_TARGETS:
        if name in phases and phases[name]["ratio"] is not None:
            out[f"{name}: API / raw >= 0.4 at {phases[name]['ratio_at']}"] = phases[name]["ratio"] >= 0.4
    if "q4-likes" in phases and "c1" in phases["q4-likes"]["api"]:
        out["q4-likes: p99 <= 15 ms at c1"] = phases["q4-likes"]["api"]["c1"]["p99_ms"] <= 15
    if "timeline-304" in phases:
        top = phases["timeline-304"]["api"][phases["timeline-304"]["ratio_at"]]
        cpu = top["cpu_ms_per_request"].get("gunicorn workers")
        out["timeline-304: worker CPU <= 1 ms per revalidation"] = cpu is not None and cpu <= 1.0
        out["timeline-304: every answer 304"] = all(
            set(p.get("statuses", {})) <= {"304"} for p in phases["timeline-304"]["api"].values())
    if "timeline" in phases:
        top = phases["timeline"]["api"][phases["timeline"]["ratio_at"]]
        cpu = top["cpu_ms_per_request"].get("gunicorn workers")
        out[f"timeline: worker CPU <= 1.2 ms per page ({phases['timeline']['ratio_at']})"] = \
            cpu is not None and cpu <= 1.2
    for rate in result.get("open_loop", {}).get("rates", []):
        if rate["offered_rate"] == 300:
            out["timeline: open-loop p99 <= 20 ms at 300/s"] = rate["p99_ms"] <= 20 and rate["failed"] == 0
    return out


def table(result: dict[str, Any]) -> None:
    lines = ["", "| endpoint | calls/page | raw pages/s c16 | API pages/s c16 | ratio | API c1 p50 / p99 ms | "
                 "API c16 p50 / p99 ms | raw c1 p50 / p99 ms | worker CPU ms/request (c16) | "
                 "node CPU ms/page raw / API |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, e in result["phases"].items():
        top = e["ratio_at"]
        raw, api = e["raw"].get(top, {}), e["api"][top]
        c1, raw1 = e["api"].get("c1", {}), e["raw"].get("c1", {})
        lines.append(f"| {name} | {raw.get('calls_per_page', 0)} | {raw.get('pages_per_s')} | {api['rps']} | "
                     f"{e['ratio']} | "
                     f"{c1.get('p50_ms')} / {c1.get('p99_ms')} | {api['p50_ms']} / {api['p99_ms']} | "
                     f"{raw1.get('p50_ms')} / {raw1.get('p99_ms')} | "
                     f"{api['cpu_ms_per_request'].get('gunicorn workers')} | "
                     f"{raw.get('node_cpu_ms_per_page')} / {api['cpu_ms_per_request'].get('cassandra')} |")
    if result["phases"] and any(e["ratio_at"] != "c16" for e in result["phases"].values()):
        lines.append("(c16 columns: the highest --concurrency measured)")
    open_loop = result.get("open_loop")
    if open_loop:
        lines += ["", f"open loop, timeline page (closed-loop maximum {open_loop['closed_loop_max_rps']} pages/s):",
                  "", "| offered/s | answered/s | p50 ms | p99 ms | max ms | late | failed | worker CPU ms/page |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in open_loop["rates"]:
            lines.append(f"| {r['offered_rate']:g} | {r['achieved_rps']} | {r['p50_ms']} | {r['p99_ms']} | "
                         f"{r['max_ms']} | {r['late']} | {r['failed']} | "
                         f"{r['cpu_ms_per_request'].get('gunicorn workers')} |")
    for name, e in result["phases"].items():
        for phase in e["api"].values():
            if "profile" in phase:
                lines.append(f"profile {name}: {phase['profile'].get('flamegraph')}, waiting share "
                             f"{phase['profile'].get('waiting_share')}")
    lines.append(f"verdict: {result['verdict']}")
    print("\n".join(lines), file=sys.stderr, flush=True)


def _list(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keyspace", default="chronicle_bench_hotpath", help="kept between runs")
    parser.add_argument("--skip-load", action="store_true", help="reuse the keyspace's data as it is")
    parser.add_argument("--refill", action="store_true", help="write the Slack channels again even if complete")
    parser.add_argument("--messages", type=int, default=600, help="top-level messages of the channel with threads")
    parser.add_argument("--flat-messages", type=int, default=600, help="messages of the channel without threads")
    parser.add_argument("--targets", type=_list, default=TARGETS, help=f"comma-separated: {','.join(TARGETS)}")
    parser.add_argument("--variants", type=int, default=16, help="most requests cycled through per target")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per closed-loop phase")
    parser.add_argument("--warmup", type=float, default=2.0, help="untimed seconds before each phase's window")
    parser.add_argument("--concurrency", type=lambda s: [int(c) for c in _list(s)], default=[1, 16],
                        help="closed-loop concurrencies; the ratio is taken at the highest")
    parser.add_argument("--rates", type=lambda s: [float(r) for r in _list(s)], default=[100.0, 200.0, 300.0, 400.0],
                        help="open-loop offered timeline pages/s ('' to skip the open loop)")
    parser.add_argument("--open-seconds", type=float, default=10.0, help="measured seconds per offered rate")
    parser.add_argument("--connections", type=int, default=64, help="open loop: the generator's connections")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers (gunicorn.conf.py's default)")
    parser.add_argument("--threads", type=int, default=8, help="threads per worker (gunicorn.conf.py's default)")
    parser.add_argument("--load-procs", type=int, default=2, help="load-generator processes above concurrency 1")
    parser.add_argument("--raw-mode", choices=["concurrent", "rounds"], default="concurrent",
                        help="raw replay: a request's calls all at once, or in the endpoint's rounds")
    parser.add_argument("--raw-rows", choices=["tuple", "named"], default="tuple",
                        help="raw replay's row factory: plain tuples or the driver's default named tuples")
    parser.add_argument("--wait-quiet", type=float, default=120.0, help="before each phase, wait up to this many "
                        "seconds for the machine to be quiet (< 15%% busy); 0: don't wait")
    parser.add_argument("--profile", type=_list, nargs="?", const=["timeline"], default=None,
                        help="py-spy on one worker during these targets' top-concurrency API phase "
                             "(default: timeline): docs/flamegraphs/<target>.svg")
    parser.add_argument("--ab-audit", type=int, default=0, metavar="ROUNDS",
                        help="only the audit log's cost: timeline at the top concurrency, audit off and on served "
                             "side by side, alternated for ROUNDS rounds (issue 32)")
    parser.add_argument("--ab-same", action="store_true",
                        help="with --ab-audit: both servers with the audit off (the A/B's own noise: a null result)")
    parser.add_argument("--quiet-logs", action="store_true",
                        help="serve with WARNING logs (default: INFO, the request log's production level)")
    parser.add_argument("--access-log", action="store_true",
                        help="also gunicorn's access log, a second line per request (off by default in "
                             "gunicorn.conf.py: the app logs every request it answers)")
    args = parser.parse_args(argv)
    unknown = set(args.targets) - set(TARGETS)
    if unknown:
        parser.error(f"unknown targets {sorted(unknown)}; known: {', '.join(TARGETS)}")
    if args.profile and set(args.profile) - set(args.targets):
        parser.error("--profile names a target that is not measured")
    configure_logging("WARNING", stream=sys.stderr)
    # A SIGTERM unwinds like an exception, so the gunicorn this run started is stopped too.
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))
    write_result("hotpath", run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
