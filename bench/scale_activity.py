"""Enterprise-scale activity days (issue 30, findings 1 and 2): hot accounts on the local node.

    .venv/bin/python -m bench.scale_activity [--likes 100000] [--bot-messages 100000] [--quiet-events 1000]
                                             [--seconds 8] [--no-scan] [--keep]

`--likes 1000000 --bot-messages 100000` is the issue's size (a post liked 1M times in a day: ~10 minutes of
loading here); the defaults fit a few minutes on this 2-core machine.

In one scratch keyspace (bench/scale_common.py; dropped after unless `--keep`):

1. Load, through the project's own write paths:
   - a network author whose one post is liked `--likes` times in one UTC day, and a quiet author liked
     `--quiet-events` times that day: `api/network/activity_log.event_writes` (the rows and counts
     `actions.like` sends for an applied like) through `Database.execute_many`;
   - a Slack bot posting `--bot-messages` messages in one channel that day, and a quiet user posting
     `--quiet-events`: `api/slack/ingest.message_rows` (what live ingest and the import write: message rows,
     activity index, dirty marks) through `execute_many`, then `ingest.note_stored`.
2. Rows read per mark: what one dirty mark's rebuild reads (`collect` of the marked account's local day, rows
   counted by table), and the wall time of `service.rebuild_marks` for one hour mark, for the quiet accounts
   (1k events a day) and the hot ones.
3. Reads: each hot day as stored is copied to the 30 days before it (the same events, shifted a day at a time,
   written by `store.day_write`), then the 31-day read (`service.read`, events decoded, and `summary=true`)
   of the hot author and of the bot, p50/p99 at concurrency 1 and 8 (`scale_common.measure`, threads).
4. Partitions: `scale_common.largest_partitions` (nodetool tablestats/tablehistograms, sstablepartitions) of the
   activity tables and slack_messages; tombstone warnings in the node's log since the start.

Prints one JSON object and writes it under bench/results/.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from api.activity import dirty, service, store
from api.activity import events as ev
from api.db import Database
from api.network import activity as network_activity
from api.network import activity_log
from api.node.common import NodeError
from api.slack import activity as slack_activity
from api.slack import ingest
from api.slack.messages import NewMessage
from bench.scale_common import (
    largest_partitions,
    local_node,
    log_offset,
    measure,
    node_cpu_seconds,
    scratch_keyspace,
    tombstone_warnings,
    write_result,
)

US = 1_000_000
DAY = date(2026, 10, 14)
DAY_START = int(datetime(2026, 10, 14, tzinfo=UTC).timestamp()) * US
TABLES = ["network_activity_slots", "network_activity_counts", "activity_days", "slack_user_touches",
          "slack_user_posts", "slack_messages"]


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_likes(db: Database, network: str, author: int, post: int, likes: int, chunk: int = 20_000) -> float:
    """`likes` likes of `post` spread over DAY; returns the seconds taken."""
    started = time.perf_counter()
    step = 86_400 * US // likes
    for first in range(0, likes, chunk):
        writes = []
        for i in range(first, min(likes, first + chunk)):
            writes += activity_log.event_writes(network, "like", 10_000_000 + i, author, DAY_START + i * step + 1,
                                                post)
        db.execute_many(writes, concurrency=256)
    return time.perf_counter() - started


def load_messages(db: Database, team: str, channel: str, user: str, n: int, chunk: int = 2_000) -> float:
    """`n` messages of `user` in `channel` spread over DAY, through ingest.message_rows."""
    started = time.perf_counter()
    step = 86_400 * US // n
    for first in range(0, n, chunk):
        msgs, writes = [], []
        for i in range(first, min(n, first + chunk)):
            ts = DAY_START + i * step + 7
            msg = NewMessage(team, channel, ts, f"{ts // US}.{ts % US:06d}", user=user, text=f"build {i} passed",
                             subtype="bot_message" if user.startswith("B") else None)
            msgs.append(msg)
            writes += ingest.message_rows(db, msg, write_ts=ts, original=True)
        db.execute_many(writes, concurrency=256)
        for msg in msgs:
            ingest.note_stored(db, msg)
    return time.perf_counter() - started


def per_mark(db: Database, archive: service.Archive, account: str, node_cpu: Callable[[], float]
             ) -> dict[str, Any]:
    """Rows one mark's rebuild reads (rows that come back to the client, by table), and the wall time and node
    CPU of the rebuild of one hour mark (median of 5: the node's counting of narrow index rows is not in the
    rows read)."""
    stats: dict[str, int] = {}
    window = {account: (DAY_START, DAY_START + 86_400 * US)}
    source = slack_activity if archive.side == "slack" else network_activity
    source.collect(db, archive.scope, window, stats)
    times, node_times = [], []
    for hour in range(5):
        mark = dirty.Mark(archive.name, account, DAY_START // dirty.HOUR_US + 3 + hour)
        started, node_started = time.perf_counter(), node_cpu()
        service.rebuild_marks(db, archive.name, [mark])
        times.append(time.perf_counter() - started)
        node_times.append(node_cpu() - node_started)
    stored = store.read_days(db, archive.name, account, [DAY], contiguous=True)[DAY]
    return {"rows_read": stats, "rows_read_total": sum(stats.values()), "rebuild_ms_median":
            round(sorted(times)[2] * 1000, 1), "node_cpu_ms_median": round(sorted(node_times)[2] * 1000, 1),
            "day_events": stored.event_count,
            "stored_single_events": sum(1 for e in stored.events if "count" not in e),
            "stored_counted_events": sum(1 for e in stored.events if "count" in e), "stored_bytes": stored.stored_size}


def copy_back(db: Database, archive: service.Archive, account: str, days: int = 30) -> None:
    """The stored hot day copied to the `days` days before it (events shifted), as a month of such days."""
    found = store.read_days(db, archive.name, account, [DAY], contiguous=True)[DAY]
    writes = []
    for k in range(1, days + 1):
        shift = k * 86_400 * US
        shifted = [{**e, "at": e["at"] - shift, **({"ts": e["ts"] - shift} if "ts" in e else {})}
                   for e in found.events]
        writes.append(store.day_write(archive.name, account, DAY - timedelta(days=k), shifted, time_zone="UTC",
                                      built_at_us=store.now_us()))
    db.execute_many(writes)


def reads(db: Database, archive: service.Archive, account: str, seconds: float) -> dict[str, Any]:
    days = [DAY - timedelta(days=k) for k in range(30, -1, -1)]
    out: dict[str, Any] = {}
    for summary in (False, True):
        def read(summary: bool = summary) -> None:
            service.read(db, archive, account, days, contiguous=True, summary=summary)
        for concurrency in (1, 8):
            m = measure(read, seconds=seconds, concurrency=concurrency)
            out[f"{'summary' if summary else 'events'}_c{concurrency}"] = {
                k: m[k] for k in ("p50_ms", "p99_ms", "max_ms", "requests", "rate", "errors")}
            say(f"  {account} {'summary' if summary else 'events'} c={concurrency}: p50 {m['p50_ms']:.1f} ms, "
                f"p99 {m['p99_ms']:.1f} ms")
    events = service.read(db, archive, account, days, contiguous=True, summary=False)
    out["events_in_read"] = sum(len(d["events"]) for d in events)
    out["event_count_in_read"] = sum(d["event_count"] for d in events)
    return out


def partitions(node: Any, keyspace: str, *, scan: bool, attempts: int = 6) -> dict[str, Any]:
    """largest_partitions, again after a pause when nodetool fails ("Server is not initialized yet" came back
    now and then from the loaded shared node's JMX)."""
    out: dict[str, Any] = {}
    for table in TABLES:  # one table at a time: a failure costs that table's calls only
        for attempt in range(attempts):
            try:
                out.update(largest_partitions(node, keyspace, [table], scan=scan))
                break
            except NodeError as exc:
                reason = next((line for line in str(exc).splitlines() if "Exception" in line), str(exc)[-200:])
                say(f"nodetool failed on {table} (attempt {attempt + 1}): {reason}")
                time.sleep(5)
        else:
            out[table] = {"error": f"nodetool failed {attempts} times"}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--likes", type=int, default=100_000, help="likes of the hot author's post in one day")
    parser.add_argument("--bot-messages", type=int, default=100_000, help="messages of the bot in one day")
    parser.add_argument("--quiet-events", type=int, default=1_000, help="events of the quiet accounts' day")
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per read measurement")
    parser.add_argument("--no-scan", action="store_true", help="skip sstablepartitions (nodetool figures only)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch keyspace")
    args = parser.parse_args(argv)
    node = local_node()
    offset = log_offset(node)
    result: dict[str, Any] = {"args": vars(args), "day": DAY.isoformat()}
    with scratch_keyspace("hotact", keep=args.keep, request_timeout=60.0) as db:
        result["keyspace"] = db.keyspace
        network, team = f"hot{uuid.uuid4().hex[:6]}", "TSCALEACT"
        net, slack = service.Archive.network(network), service.Archive.slack(team)
        say(f"loading {args.likes:,} likes of one post and {args.quiet_events:,} of a quiet author ...")
        result["load_seconds"] = {"likes": round(load_likes(db, network, 1, 501, args.likes), 1),
                                  "quiet_likes": round(load_likes(db, network, 2, 502, args.quiet_events), 1)}
        say(f"loading {args.bot_messages:,} bot messages and {args.quiet_events:,} of a quiet user ...")
        result["load_seconds"]["bot_messages"] = round(load_messages(db, team, "CBUILDS", "BBOT",
                                                                     args.bot_messages), 1)
        result["load_seconds"]["quiet_messages"] = round(load_messages(db, team, "CTALK", "UQUIET",
                                                                       args.quiet_events), 1)
        say(f"loaded: {result['load_seconds']}")
        node_cpu = node_cpu_seconds(node)
        result["per_mark"] = {
            "network_quiet": per_mark(db, net, "2", node_cpu), "network_hot": per_mark(db, net, "1", node_cpu),
            "slack_quiet": per_mark(db, slack, "UQUIET", node_cpu),
            "slack_bot": per_mark(db, slack, "BBOT", node_cpu)}
        for name, figures in result["per_mark"].items():
            say(f"per mark, {name}: {figures}")
        copy_back(db, net, "1")
        copy_back(db, slack, "BBOT")
        result["reads_31_days"] = {"network_hot": reads(db, net, "1", args.seconds),
                                   "slack_bot": reads(db, slack, "BBOT", args.seconds)}
        say("partitions ...")
        result["partitions"] = partitions(node, db.keyspace, scan=not args.no_scan)
        result["tombstone_warnings"] = tombstone_warnings(node, offset)
        result["limits"] = {"day_events": ev.DAY_EVENTS, "slot_share": ev.SLOT_SHARE,
                            "slot_seconds": activity_log.SLOT_SECONDS}
    write_result("scale_activity", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
