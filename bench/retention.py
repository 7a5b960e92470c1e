"""A Slack workspace's retention run at scale (issue 32): how fast expired messages leave every table, and what
the run does to timeline reads beside it.

    .venv/bin/python -m bench.retention [--messages 200000] [--days 180] [--channels 20] [--keep-days 90]
                                        [--seconds 10] [--read-rate R] [--channel-keep C:N ...] [--parallel 8]
                                        [--pace N] [--nice N] [--in-flight N]
                                        [--then KEEP_DAYS:PARALLEL[:PACE[:NICE[:IN_FLIGHT]]] ...] [--keep]

In one scratch keyspace (bench/scale_common.py; dropped after unless `--keep`):

1. Load `--messages` messages spread evenly over `--days` UTC days ending yesterday, across `--channels` channels
   and 400 users, through the ingest's history path (`ingest.history_rows`: what an export import writes:
   message rows, listings, search postings of 6-14 Zipf words, activity index, posts index, marks), 12% thread
   replies, 8% with a reaction.
2. Quiet timeline reads: the newest page (50) of a random channel, `messages.timeline`, p50/p99 from 4 threads
   of a process of their own (as the API's are: the run's Python does not share their GIL) for `--seconds`: a
   closed loop, as many reads as the machine serves. With `--read-rate R` the reads beside the runs are an open
   loop of R reads a second instead (a service's steady traffic, latency counted from when each read was due),
   measured quiet too; R over the closed loop's rate is the share of the machine's capacity they ask for.
3. The retention run (`--keep-days` for the workspace; `--channel-keep C:N` gives channel policies) while the
   same reads run beside it: the run's wall time, messages deleted per second, the reads' p50/p99 during the
   run. Each `--then KEEP_DAYS:PARALLEL[:PACE]` runs again with a shorter policy (the days between the two
   cutoffs expire), its own parallelism and pace (`--pace`: at most N messages a second): several runs compared
   on one load, e.g. at 60,000 messages a day (what "5M of a 10M workspace expire under a 90-day policy" means:
   ~55,000 a day) with `--messages 240000 --days 4 --channels 50 --keep-days 3 --parallel 2 --then 2:2:9000
   --then 1:8`.
   The node is flushed and left to finish its compactions after the load and before each run.
4. Checks: the messages left (counted by the node, channel-day by channel-day) equal those of the kept days; a
   sample of expired messages' words finds nothing in search; tombstone warnings in the node's log since start.

Prints one JSON object and writes it under bench/results/.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import multiprocessing
import os
import queue
import random
import sys
import threading
import time
from datetime import UTC, date, datetime, timedelta
from typing import Any

from api.db import Database
from api.node.common import NodeError
from api.retention import policies
from api.retention import slack as retention
from api.slack import ingest, messages, search
from api.slack.messages import NewMessage
from api.slack.payloads import HistoryMessage
from api.slack.timeutil import US_PER_DAY, day_of, us_to_ts
from bench.scale_common import local_node, log_offset, scratch_keyspace, settle, tombstone_warnings, write_result

TEAM = "TRETBENCH"
WARMUP = 2.0  # seconds of reads not timed when a reading process starts
US = 1_000_000


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _vocabulary(rnd: random.Random, size: int = 5_000) -> tuple[list[str], list[float]]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = sorted({"".join(rnd.choice(letters) for _ in range(rnd.randrange(3, 10))) for _ in range(size * 2)})
    words = words[:size]
    return words, [1 / (rank + 1) for rank in range(len(words))]


def load(db: Database, *, messages_total: int, days: int, channels: list[str], today: date, seed: int = 7,
         chunk: int = 2_000) -> dict[str, Any]:
    """Messages over `days` UTC days before `today`, through the history write path; returns the per-day counts
    (day -> messages) and a sample of (word, day) of each message's own word."""
    rnd = random.Random(seed)
    words, weights = _vocabulary(rnd)
    first = (today - timedelta(days=days) - date(1970, 1, 1)).days * US_PER_DAY
    step = days * US_PER_DAY // messages_total
    per_day: dict[int, int] = {}
    samples: list[tuple[str, int]] = []
    heads: dict[str, list[int]] = {c: [] for c in channels}
    started = time.perf_counter()
    pending: list[Any] = []
    written: list[NewMessage] = []
    observed = int(datetime.combine(today, datetime.min.time(), UTC).timestamp() * US)
    for n in range(messages_total):
        ts = first + n * step + rnd.randrange(step)
        channel = channels[n % len(channels)]
        unique = f"w{n:x}q"  # a word of this message alone: what search must stop finding once it expired
        text = " ".join([*rnd.choices(words, weights, k=rnd.randrange(6, 15)), unique])
        thread = rnd.choice(heads[channel]) if heads[channel] and rnd.random() < 0.12 else None
        msg = NewMessage(TEAM, channel, ts, us_to_ts(ts), user=f"U{rnd.randrange(400):04d}", text=text,
                         thread_ts=thread)
        if thread is None and rnd.random() < 0.1:
            heads[channel] = (heads[channel] + [ts])[-20:]
        reactions = frozenset({("tada", f"U{rnd.randrange(400):04d}")} if rnd.random() < 0.08 else ())
        pending += ingest.history_rows(db, HistoryMessage(msg, None, reactions, False, False), observed_at=observed)
        written.append(msg)
        per_day[day_of(ts)] = per_day.get(day_of(ts), 0) + 1
        if n % 997 == 0:
            samples.append((unique, day_of(ts)))
        if len(written) >= chunk:
            db.execute_many(pending, concurrency=256)
            for m in written:
                ingest.note_stored(db, m)
            pending, written = [], []
            if n % 20_000 < chunk:
                say(f"  {n + 1:,} messages, {(n + 1) / (time.perf_counter() - started):,.0f}/s")
    db.execute_many(pending, concurrency=256)
    for m in written:
        ingest.note_stored(db, m)
    return {"per_day": per_day, "samples": samples, "seconds": round(time.perf_counter() - started, 1)}


class ReadsBeside:
    """Timeline reads (the newest page of 50 of a random channel, `messages.timeline`) from a process of their own,
    as the API's would be: the run's Python (its GIL) is not theirs. Closed loop (`rate` None): 4 threads reading
    back to back, i.e. as many reads as the machine serves (a saturating load: their latency is their share of the
    CPU). Open loop (`rate`): reads started on a fixed schedule, `rate` a second, by up to 16 threads, each read's
    latency counted from when it was due (a read that waits for a free thread or for the CPU counts its wait: no
    coordinated omission), as a service's steady traffic. Latencies come back at `stop`."""

    def __init__(self, db: Database, channels: list[str], seed: int = 11, rate: float | None = None) -> None:
        ctx = multiprocessing.get_context("fork")
        self._stop = ctx.Event()
        self._receiver, sender = ctx.Pipe(duplex=False)
        self.rate = rate
        settings, keyspace = db.settings, db.keyspace

        def read(rnd: random.Random) -> None:
            messages.timeline(db_module.get_db(), TEAM, [rnd.choice(channels)], limit=50)

        def closed_loop(latencies: list[float], lock: threading.Lock) -> None:
            def loop(n: int) -> None:
                rnd = random.Random(seed + n)
                mine = []
                warm_until = time.perf_counter() + WARMUP  # connections, prepared statements: not timed
                while not self._stop.is_set():
                    started = time.perf_counter()
                    read(rnd)
                    if started >= warm_until:
                        mine.append(time.perf_counter() - started)
                with lock:
                    latencies.extend(mine)

            threads = [threading.Thread(target=loop, args=(n,)) for n in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

        def open_loop(latencies: list[float], lock: threading.Lock) -> None:
            assert rate is not None
            rnd = random.Random(seed)
            due: queue.SimpleQueue[float | None] = queue.SimpleQueue()
            warm_until = time.perf_counter() + WARMUP

            def worker() -> None:
                mine = []
                while (scheduled := due.get()) is not None:
                    read(rnd)
                    if scheduled >= warm_until:
                        mine.append(time.perf_counter() - scheduled)
                with lock:
                    latencies.extend(mine)

            threads = [threading.Thread(target=worker) for _ in range(16)]
            for thread in threads:
                thread.start()
            start = time.perf_counter()
            for n in itertools.count():
                scheduled = start + n / rate
                if self._stop.wait(max(0.0, scheduled - time.perf_counter())):
                    break
                due.put(scheduled)
            for _ in threads:
                due.put(None)
            for thread in threads:
                thread.join()

        def child() -> None:
            db_module.set_db(Database(settings, keyspace=keyspace))  # the parent's driver did not survive the fork
            latencies: list[float] = []
            (closed_loop if rate is None else open_loop)(latencies, threading.Lock())
            sender.send(latencies)

        from api import db as db_module

        self._process = ctx.Process(target=child, daemon=True)
        self._process.start()
        sender.close()
        time.sleep(WARMUP)
        self.started = time.perf_counter()

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        latencies = self._receiver.recv()
        self._process.join(timeout=30)
        result = _percentiles(latencies, time.perf_counter() - self.started)
        result.update({"concurrency": 4} if self.rate is None else {"offered_rate": self.rate, "threads": 16})
        return result


def _percentiles(latencies: list[float], seconds: float) -> dict[str, Any]:
    ordered = sorted(latencies)
    if not ordered:
        return {"requests": 0}
    return {"p50_ms": round(ordered[len(ordered) // 2] * 1000, 2),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2),
            "max_ms": round(ordered[-1] * 1000, 2), "requests": len(ordered),
            "rate": round(len(ordered) / seconds, 1)}


def _niceness(value: int) -> None:
    """Every thread of this process at `value` (as root, back down too; `chronicle retention run --nice` only
    raises it, api/cli/common.yield_cpu)."""
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, int(task), value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--days", type=int, default=180)
    parser.add_argument("--channels", type=int, default=20)
    parser.add_argument("--keep-days", type=int, default=90)
    parser.add_argument("--channel-keep", action="append", default=[], metavar="C:N",
                        help="a channel's own policy (channel number : days), e.g. 3:30")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of quiet reads")
    parser.add_argument("--read-rate", type=float, default=None,
                        help="reads beside the runs in an open loop at this many a second (a service's steady "
                             "traffic; the quiet closed loop's rate says what share of the machine's capacity it "
                             "is); default: a closed loop of 4 threads (saturating)")
    parser.add_argument("--parallel", type=int, default=retention.PARALLEL,
                        help="channel-days expired side by side (the run's --parallel)")
    parser.add_argument("--pace", type=float, default=None, help="the run's pace (messages a second; default: none)")
    parser.add_argument("--in-flight", type=int, default=retention.IN_FLIGHT,
                        help="each channel-day's requests in flight (the run's --in-flight)")
    parser.add_argument("--nice", type=int, default=0,
                        help="the run's niceness (what `chronicle retention run --nice` sets; default 0: as the "
                             "reads beside it)")
    parser.add_argument("--then", action="append", default=[],
                        metavar="KEEP_DAYS:PARALLEL[:PACE[:NICE[:IN_FLIGHT]]]",
                        help="another run after the first, with a shorter workspace policy (the days between the "
                             "two cutoffs expire), its own --parallel, --pace, --nice and --in-flight (empty: "
                             "none, 0, the default); repeatable: several runs of one load")
    parser.add_argument("--keep", action="store_true", help="keep the scratch keyspace")
    args = parser.parse_args(argv)
    node = local_node()
    offset = log_offset(node)
    today = datetime.now(UTC).date()
    channels = [f"CRET{i:04d}" for i in range(args.channels)]
    result: dict[str, Any] = {"args": vars(args), "today": today.isoformat()}
    with scratch_keyspace("retention", keep=args.keep, request_timeout=60.0) as db:
        result["keyspace"] = db.keyspace
        say(f"loading {args.messages:,} messages over {args.days} days in {args.channels} channels ...")
        loaded = load(db, messages_total=args.messages, days=args.days, channels=channels, today=today)
        result["load_seconds"] = loaded["seconds"]
        result["settled_after_load_seconds"] = settle(node, db.keyspace)  # "quiet" means no compaction running
        archive = f"slack:{TEAM}"
        policies.set_policy(db, archive, policies.WHOLE, args.keep_days, by="bench")
        for spec in args.channel_keep:
            number, _, days = spec.partition(":")
            policies.set_policy(db, archive, channels[int(number)], int(days), by="bench")
        say("quiet timeline reads ...")
        quiet = ReadsBeside(db, channels)
        time.sleep(args.seconds)
        result["timeline_quiet"] = quiet.stop()
        if args.read_rate:
            say(f"quiet timeline reads, open loop at {args.read_rate}/s ...")
            quiet = ReadsBeside(db, channels, rate=args.read_rate)
            time.sleep(args.seconds)
            result["timeline_quiet_closed_loop"] = result["timeline_quiet"]
            result["timeline_quiet"] = quiet.stop()
            result["read_rate_share_of_capacity"] = round(
                args.read_rate / result["timeline_quiet_closed_loop"]["rate"], 2)
        steps = [(args.keep_days, args.parallel, args.pace, args.nice, args.in_flight)]
        for spec in args.then:
            keep, parallel, *rest = spec.split(":") + ["", "", ""]
            steps.append((int(keep), int(parallel), float(rest[0]) if rest[0] else None, int(rest[1] or 0),
                          int(rest[2] or retention.IN_FLIGHT)))
        result["runs"] = []
        for keep_days, parallel, pace, nice, in_flight in steps:
            policies.set_policy(db, archive, policies.WHOLE, keep_days, by="bench")
            dry, plan = retention.run(db, TEAM, dry_run=True, files=None, today=today)
            say(f"keep {keep_days} days, parallel {parallel}, pace {pace}, in flight {in_flight}: dry run "
                f"{dry.counts}")
            settled = settle(node, db.keyspace)
            beside = ReadsBeside(db, channels, rate=args.read_rate)
            say(f"running (nice {nice}) ...")
            _niceness(nice)  # after the reads' process started: it keeps the niceness it was forked with
            started = time.perf_counter()
            try:
                done, _plan = retention.run(db, TEAM, dry_run=False, files=None, today=today, parallel=parallel,
                                            pace=pace, in_flight=in_flight)
            finally:
                seconds = time.perf_counter() - started
                _niceness(0)
            run = {"keep_days": keep_days, "parallel": parallel, "pace": pace, "nice": nice, "in_flight": in_flight,
                   "plan": plan.to_json(),
                   "dry_run": dry.to_json(),
                   **done.to_json(), "seconds": round(seconds, 1),
                   "messages_per_second": round(done.counts.get("messages", 0) / seconds, 1),
                   "dry_run_equal": dry.counts.get("messages") == done.counts.get("messages"),
                   "settled_seconds": settled,
                   "timeline_during_run": beside.stop()}
            run["p99_vs_quiet"] = round(run["timeline_during_run"]["p99_ms"] / result["timeline_quiet"]["p99_ms"], 2)
            result["runs"].append(run)
            say(f"run: {run['counts']} in {run['seconds']} s ({run['messages_per_second']}/s), reads beside: "
                f"{run['timeline_during_run']} ({run['p99_vs_quiet']}x the quiet p99)")
        cutoffs = plan.cutoffs
        expected_left = sum(n for day, n in loaded["per_day"].items() if day >= max(cutoffs.values()))
        if len(set(cutoffs.values())) == 1:
            left = 0
            for channel in channels:
                days_left = [r.day for r in messages.days_before(db, TEAM, channel, 0, 1 << 30, 10_000)]
                left += sum(messages.count_rows(db, TEAM, channel, [d]) for d in days_left)
            result["messages_left"] = {"counted": left, "expected": expected_left, "equal": left == expected_left}
        gone = [(w, d) for w, d in loaded["samples"] if d < min(cutoffs.values())][:50]
        kept = [(w, d) for w, d in loaded["samples"] if d >= max(cutoffs.values())][:50]
        result["search_check"] = {
            "expired_words_found": sum(1 for w, _d in gone if search.search(db, TEAM, w).hits),
            "expired_words_checked": len(gone),
            "kept_words_found": sum(1 for w, _d in kept if search.search(db, TEAM, w).hits),
            "kept_words_checked": len(kept)}
    try:
        result["tombstone_warnings"] = tombstone_warnings(node, offset)
    except NodeError as exc:
        result["tombstone_warnings_error"] = str(exc)
    path = write_result("retention", result)
    say(f"written {path}")
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
