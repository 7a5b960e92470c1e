"""Enterprise-scale channel-days (issue 30, finding 5): a 100k-message bot day and a 20k-message channel day.

    .venv/bin/python -m bench.scale_slack_days [--bot-messages 10000] [--channel-messages 2000] [--days 3]
                                               [--full] [--hot-day-messages N] [--seconds 4] [--no-scan] [--keep]

`--full` is the issue's size (100,000 bot messages and 20,000 channel messages a day, 3 days each: 360,000
messages, ~40 minutes of loading here at ~160 messages/s through the whole ingest path); the defaults (a tenth of
it, ~4 minutes) scale the hot threshold by the same tenth (CHRONICLE_SLACK_HOT_DAY_MESSAGES x bot messages /
100,000), so the layout is the full size's in miniature.

In one scratch keyspace (bench/scale_common.py; dropped after unless `--keep`):

1. Load, through the project's live ingest path (`ingest.message_rows`, what `events.handle` writes for a
   message event: message row, listings, raw event, thread index, search postings, activity) sent with
   `Database.execute_many`, then `ingest.note_stored`, with the process clock following the messages' own
   times (as a live archive's does), `--days` consecutive UTC days of:
   - a bot posting `--bot-messages` a day in one channel (Block Kit content, a ~1 KB raw event each);
   - a busy channel of 40 people posting `--channel-messages` a day, 15% of them thread replies.
2. Reads, p50/p99 at concurrency 1 and 8 (`scale_common.measure`, threads): the newest timeline page (50), a
   timeline page at a random position of the loaded days (newest first and oldest first), the viewer's channel
   page (`listings.channel_page`, thread replies left out) at a random position, a thread page.
3. Partitions: `scale_common.largest_partitions` (nodetool tablestats/tablehistograms, sstablepartitions) of
   slack_messages, slack_message_raw, slack_channel_days, slack_thread_replies; the layout of each loaded day
   (its split, buckets, rows per partition); tombstone warnings in the node's log since the start.

Prints one JSON object and writes it under bench/results/.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any

from api.db import Database
from api.node.common import NodeError
from api.slack import ingest, listings, messages
from api.slack.messages import NewMessage
from api.slack.timeutil import US_PER_DAY, day_of, us_to_ts
from bench.scale_common import (
    largest_partitions,
    local_node,
    log_offset,
    measure,
    scratch_keyspace,
    tombstone_warnings,
    write_result,
)

US = 1_000_000
FIRST_DAY_START = int(datetime(2026, 10, 12, tzinfo=UTC).timestamp()) * US
TEAM, BOT_CHANNEL, BUSY_CHANNEL = "TSCALEDAYS", "CBOTFEED", "CBUSY"
TABLES = ["slack_messages", "slack_message_raw", "slack_channel_days", "slack_thread_replies"]


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class FollowClock:
    """The process clock of a live archive: it reads the time of the message being written (set by the
    loader), so a hot day is split as it would be live, SPLIT_MARGIN_US ahead of "now"."""

    def __init__(self, start_us: int) -> None:
        self.now_us = start_us
        self._lock = threading.Lock()

    def set(self, us: int) -> None:
        with self._lock:
            self.now_us = max(self.now_us, us)

    def time(self) -> float:
        return self.now_us / US

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def _bot_message(rnd: random.Random, ts: int, n: int) -> tuple[NewMessage, dict[str, Any]]:
    text = f"build {n} of service-{rnd.randrange(40)}: {'passed' if rnd.random() < 0.9 else 'FAILED'}"
    content = {"blocks": [{"type": "section", "block_id": f"b{n}", "text": {"type": "mrkdwn", "text": text}},
                          {"type": "context", "elements": [{"type": "mrkdwn", "text": f"commit {rnd.getrandbits(64):x}"
                                                                                    f" by U{rnd.randrange(400)}"}]}],
               "bot_profile": {"id": "BBOT", "name": "ci", "app_id": "A1", "team_id": TEAM}}
    msg = NewMessage(TEAM, BOT_CHANNEL, ts, us_to_ts(ts), text=text, subtype="bot_message", bot_id="BBOT",
                     username="ci", content=content)
    return msg, {"text": text, **content}


def _human_message(rnd: random.Random, ts: int, n: int, heads: list[int]) -> tuple[NewMessage, dict[str, Any]]:
    words = " ".join(rnd.choice(("deploy", "latency", "review", "lunch", "incident", "ship", "cafe", "db"))
                     for _ in range(rnd.randrange(5, 40)))
    thread = rnd.choice(heads) if heads and rnd.random() < 0.15 else None
    msg = NewMessage(TEAM, BUSY_CHANNEL, ts, us_to_ts(ts), user=f"U{rnd.randrange(40):03d}", text=f"{n}: {words}",
                     thread_ts=thread)
    return msg, {"text": msg.text, "user": msg.user}


def load(db: Database, clock: FollowClock, channel: str, per_day: int, days: int, seed: int,
         chunk: int = 2000) -> dict[str, Any]:
    """`per_day` messages a day for `days` days, spread evenly (with jitter) in time order."""
    rnd = random.Random(seed)
    heads: list[int] = []
    started = time.perf_counter()
    step = US_PER_DAY // per_day
    for day in range(days):
        start = FIRST_DAY_START + day * US_PER_DAY
        pending: list[Any] = []
        written: list[NewMessage] = []
        for n in range(per_day):
            ts = start + n * step + rnd.randrange(step)
            if channel == BOT_CHANNEL:
                msg, event = _bot_message(rnd, ts, n)
            else:
                msg, event = _human_message(rnd, ts, n, heads)
                if msg.thread_ts is None and rnd.random() < 0.05:
                    heads = [*heads[-49:], ts]
            clock.set(ts)
            raw = {"token": "x", "team_id": TEAM, "api_app_id": "A1", "type": "event_callback",
                   "event_id": f"Ev{rnd.getrandbits(48):X}", "event_time": ts // US,
                   "event": {"type": "message", "channel": channel, "channel_type": "channel", "ts": msg.msg_ts,
                             "event_ts": msg.msg_ts, **event},
                   "authorizations": [{"team_id": TEAM, "user_id": "UBOT", "is_bot": True}]}
            pending.extend(ingest.message_rows(db, msg, write_ts=ts, original=True, raw=raw))
            written.append(msg)
            if len(written) >= chunk:
                db.execute_many(pending, concurrency=256)
                for m in written:
                    ingest.note_stored(db, m)
                pending, written = [], []
        db.execute_many(pending, concurrency=256)
        for m in written:
            ingest.note_stored(db, m)
    return {"messages": per_day * days, "seconds": round(time.perf_counter() - started, 1), "thread_heads": heads}


def layout(db: Database, channel: str, days: int) -> list[dict[str, Any]]:
    """Each loaded day: its split, its hour buckets and the rows of each of its partitions."""
    out = []
    for k in range(days):
        day = day_of(FIRST_DAY_START) + k
        row = db.execute_raw("SELECT split_us, buckets FROM slack_channel_days WHERE team_id=%s AND channel_id=%s "
                             "AND day=%s", (TEAM, channel, day)).one()
        parts = messages.day_parts(day, row.split_us, row.buckets) if row is not None else [day]
        rows = {p: db.execute_raw("SELECT COUNT(*) FROM slack_messages WHERE team_id=%s AND channel_id=%s AND day=%s",
                                  (TEAM, channel, p), timeout=60).one()[0] for p in parts}
        out.append({"day": day, "split_at": us_to_ts(row.split_us) if row and row.split_us else None,
                    "partitions": len(parts), "rows_own_partition": rows.get(day, 0),
                    "rows_largest_bucket": max((v for p, v in rows.items() if p != day), default=0),
                    "rows": sum(rows.values())})
    return out


def cql_figures(db: Database, channel: str, days: int) -> dict[str, Any]:
    """What the largest partitions hold, read back with CQL (independent of nodetool): rows and value bytes
    (text, content, files and the other columns' values as stored) of the largest slack_messages partition and
    of the largest slack_message_raw partition, and what the largest day would have held with its raw events in
    the row and no split (the layout before cql/0190)."""
    largest_part = (0, 0)
    largest_day_old = (0, 0)
    largest_raw = (0, 0)
    for k in range(days):
        day = day_of(FIRST_DAY_START) + k
        row = db.execute_raw("SELECT split_us, buckets FROM slack_channel_days WHERE team_id=%s AND channel_id=%s "
                             "AND day=%s", (TEAM, channel, day)).one()
        day_rows = day_bytes = 0
        for part in messages.day_parts(day, row.split_us, row.buckets):
            rows = n = 0
            for r in db.execute_raw("SELECT * FROM slack_messages WHERE team_id=%s AND channel_id=%s AND day=%s",
                                    (TEAM, channel, part), timeout=120):
                rows += 1
                n += sum(len(v) if isinstance(v, str | bytes) else 8 for v in r if v is not None)
            largest_part = max(largest_part, (n, rows))
            day_rows, day_bytes = day_rows + rows, day_bytes + n
        raw_bytes = 0
        for hour in range(day * 24, day * 24 + 24):
            rows = n = 0
            for r in db.execute_raw("SELECT raw FROM slack_message_raw WHERE team_id=%s AND channel_id=%s AND "
                                    "hour=%s", (TEAM, channel, hour), timeout=120):
                rows += 1
                n += len(r.raw)
            largest_raw = max(largest_raw, (n, rows))
            raw_bytes += n
        largest_day_old = max(largest_day_old, (day_bytes + raw_bytes, day_rows))
    return {"largest_messages_partition": {"value_bytes": largest_part[0], "rows": largest_part[1]},
            "largest_raw_partition": {"value_bytes": largest_raw[0], "rows": largest_raw[1]},
            "largest_day_in_the_old_layout": {"value_bytes": largest_day_old[0], "rows": largest_day_old[1]}}


def reads(db: Database, channel: str, heads: list[int], days: int, seconds: float) -> dict[str, Any]:
    rnd = random.Random(5)
    lo, hi = FIRST_DAY_START, FIRST_DAY_START + days * US_PER_DAY

    def newest() -> None:
        messages.timeline(db, TEAM, [channel], limit=50)

    def anywhere_desc() -> None:
        messages.timeline(db, TEAM, [channel], limit=50, upper=rnd.randrange(lo, hi))

    def anywhere_asc() -> None:
        messages.timeline(db, TEAM, [channel], limit=50, lower=rnd.randrange(lo, hi), ascending=True)

    def viewer_page() -> None:
        listings.channel_page(db, TEAM, [channel], limit=50, upper=rnd.randrange(lo, hi), include_deleted=False)

    def thread_page() -> None:
        head = rnd.choice(heads)
        messages.find(db, TEAM, [channel], head, include_deleted=False)
        messages.thread(db, TEAM, [channel], head, limit=50, after=head, include_deleted=False)

    cases = {"timeline_newest": newest, "timeline_at_random_desc": anywhere_desc,
             "timeline_at_random_asc": anywhere_asc, "viewer_channel_page": viewer_page}
    if heads:
        cases["thread_page"] = thread_page
    out: dict[str, Any] = {}
    for name, fn in cases.items():
        for concurrency in (1, 8):
            m = measure(fn, seconds=seconds, concurrency=concurrency)
            out[f"{name}_c{concurrency}"] = {k: m[k] for k in ("p50_ms", "p99_ms", "max_ms", "rate", "errors")}
            say(f"  {channel} {name} c={concurrency}: p50 {m['p50_ms']:.1f} ms, p99 {m['p99_ms']:.1f} ms")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bot-messages", type=int, default=10_000, help="messages of the bot a day")
    parser.add_argument("--channel-messages", type=int, default=2_000, help="messages of the busy channel a day")
    parser.add_argument("--days", type=int, default=3, help="consecutive days of each")
    parser.add_argument("--full", action="store_true", help="the issue's size: 100,000 and 20,000 a day")
    parser.add_argument("--hot-day-messages", type=int, default=None,
                        help="the hot threshold (default: CHRONICLE_SLACK_HOT_DAY_MESSAGES scaled by "
                             "bot messages / 100,000)")
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds per read measurement")
    parser.add_argument("--no-scan", action="store_true", help="skip sstablepartitions (nodetool figures only)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch keyspace")
    args = parser.parse_args(argv)
    if args.full:
        args.bot_messages, args.channel_messages = 100_000, 20_000
    node = local_node()
    offset = log_offset(node)
    result: dict[str, Any] = {"args": vars(args)}
    with scratch_keyspace("hotdays", keep=args.keep, request_timeout=60.0) as base:
        result["keyspace"] = base.keyspace
        slack = base.settings.slack
        threshold = args.hot_day_messages or max(1, slack.hot_day_messages * min(args.bot_messages, 100_000)
                                                  // 100_000)
        slack = dataclasses.replace(slack, hot_day_messages=threshold)
        result["hot_day_messages"] = slack.hot_day_messages
        clock = FollowClock(FIRST_DAY_START)
        db = Database(dataclasses.replace(base.settings, slack=slack, slack_keep_raw_events=True), clock=clock)
        try:
            say(f"loading {args.days} days of {args.bot_messages:,} bot messages ...")
            bot = load(db, clock, BOT_CHANNEL, args.bot_messages, args.days, seed=1)
            say(f"  {bot['seconds']} s; {args.days} days of {args.channel_messages:,} channel messages ...")
            busy = load(db, clock, BUSY_CHANNEL, args.channel_messages, args.days, seed=2)
            say(f"  {busy['seconds']} s")
            result["load"] = {"bot": {k: v for k, v in bot.items() if k != "thread_heads"},
                              "busy": {k: v for k, v in busy.items() if k != "thread_heads"}}
            result["layout"] = {"bot": layout(db, BOT_CHANNEL, args.days), "busy": layout(db, BUSY_CHANNEL,
                                                                                          args.days)}
            say(f"layout: {result['layout']}")
            result["reads"] = {"bot": reads(db, BOT_CHANNEL, [], args.days, args.seconds),
                               "busy": reads(db, BUSY_CHANNEL, busy["thread_heads"], args.days, args.seconds)}
        finally:
            db.close()
        say("partitions ...")
        result["partitions_by_cql"] = {"bot": cql_figures(base, BOT_CHANNEL, args.days),
                                       "busy": cql_figures(base, BUSY_CHANNEL, args.days)}
        say(f"  by CQL: {result['partitions_by_cql']}")
        for _attempt in range(4):  # nodetool over JMX fails now and then on a node this busy ("not initialized")
            try:
                result["partitions"] = largest_partitions(node, base.keyspace, TABLES, scan=not args.no_scan)
                break
            except NodeError as exc:
                say(f"  nodetool failed ({str(exc).splitlines()[-1][:120]})")
                result["partitions_error"] = str(exc).splitlines()[-1][:300]
                time.sleep(20)
        result["tombstone_warnings"] = tombstone_warnings(node, offset)
        limit_bytes, limit_rows = 100 * 1024**2, 100_000
        result["targets_met"] = {
            table: {"bytes": p["max_partition_bytes"] <= limit_bytes,
                    **({"rows": p["max_rows"] <= limit_rows} if "max_rows" in p else {})}
            for table, p in result.get("partitions", {}).items()}
    write_result("scale_slack_days", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
