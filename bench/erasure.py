"""Erasure of a person at scale (issue 32: 100k messages across 500 channels in <= 5 minutes).

    .venv/bin/python -m bench.erasure [--person-messages 100000] [--channels 500] [--others 100000] [--days 365]
                                      [--parallel 8] [--processes 1] [--keep]

In one scratch keyspace (bench/scale_common.py; dropped after unless `--keep`):

1. Load, through the ingest's history path (`ingest.history_rows`, what an export import writes: message rows,
   listings, search postings of 6-14 Zipf words, activity index, posts index, marks), `--person-messages` posts of
   the person spread over `--channels` channels and `--days` days (12% replies in their own threads), and
   `--others` posts of 400 other people in the same channels, 5% of them mentioning the person (`<@U…>`), 5%
   with the person's reaction, 10% replies in the person's threads.
2. The node flushed and left to finish its compactions; then `chronicle erase`'s function: wall time (the proof
   included), messages erased per second, the proof's verdict; the proof run again alone (its share).
3. Checks: a sample of the person's own words finds nothing in search, the others' words still find their
   messages, the person's author term finds nothing; tombstone warnings in the node's log since start.

Prints one JSON object and writes it under bench/results/.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import UTC, date, datetime, timedelta
from typing import Any

from api.db import Database
from api.erasure import slack as erasure
from api.node.common import NodeError
from api.slack import ingest, search
from api.slack.messages import NewMessage
from api.slack.payloads import HistoryMessage
from api.slack.timeutil import US_PER_DAY, us_to_ts
from bench.retention import _vocabulary, say
from bench.scale_common import local_node, log_offset, scratch_keyspace, settle, tombstone_warnings, write_result

TEAM = "TERASEBENCH"
PERSON = "UPERSON01"
US = 1_000_000


def load(db: Database, *, person: int, others: int, channels: list[str], days: int, today: date, seed: int = 5,
         chunk: int = 2_000) -> dict[str, Any]:
    rnd = random.Random(seed)
    words, weights = _vocabulary(rnd)
    first = (today - timedelta(days=days) - date(1970, 1, 1)).days * US_PER_DAY
    total = person + others
    step = days * US_PER_DAY // total
    observed = int(datetime.combine(today, datetime.min.time(), UTC).timestamp() * US)
    heads: dict[str, list[int]] = {c: [] for c in channels}
    pending: list[Any] = []
    written: list[NewMessage] = []
    samples: dict[str, list[str]] = {"person": [], "others": []}
    started = time.perf_counter()
    theirs = set(rnd.sample(range(total), person))
    for n in range(total):
        ts = first + n * step + rnd.randrange(step)
        channel = channels[n % len(channels)]
        unique = f"e{n:x}q"
        text = " ".join(rnd.choices(words, weights, k=rnd.randrange(6, 15)))
        reactions: frozenset = frozenset()
        if n in theirs:
            user = PERSON
            thread = rnd.choice(heads[channel]) if heads[channel] and rnd.random() < 0.12 else None
            if thread is None and rnd.random() < 0.1:
                heads[channel] = (heads[channel] + [ts])[-20:]
        else:
            user = f"U{rnd.randrange(400):04d}"
            thread = rnd.choice(heads[channel]) if heads[channel] and rnd.random() < 0.1 else None
            if rnd.random() < 0.05:
                text += f" <@{PERSON}>"
            if rnd.random() < 0.05:
                reactions = frozenset({("tada", PERSON)})
        msg = NewMessage(TEAM, channel, ts, us_to_ts(ts), user=user, text=f"{text} {unique}", thread_ts=thread,
                         parent_user_id=PERSON if thread is not None else None)
        pending += ingest.history_rows(db, HistoryMessage(msg, None, reactions, False, False), observed_at=observed)
        written.append(msg)
        if n % 1999 == 0:
            samples["person" if user == PERSON else "others"].append(unique)
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
    return {"samples": samples, "seconds": round(time.perf_counter() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--person-messages", type=int, default=100_000)
    parser.add_argument("--others", type=int, default=100_000)
    parser.add_argument("--channels", type=int, default=500)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--parallel", type=int, default=erasure.PARALLEL)
    parser.add_argument("--processes", type=int, default=1, help="processes the channel-days are shared out over")
    parser.add_argument("--keep", action="store_true", help="keep the scratch keyspace")
    args = parser.parse_args(argv)
    node = local_node()
    offset = log_offset(node)
    today = datetime.now(UTC).date()
    channels = [f"CERB{i:04d}" for i in range(args.channels)]
    result: dict[str, Any] = {"args": vars(args), "today": today.isoformat()}
    with scratch_keyspace("erasure", keep=args.keep, request_timeout=60.0) as db:
        result["keyspace"] = db.keyspace
        say(f"loading {args.person_messages:,} + {args.others:,} messages in {args.channels} channels ...")
        loaded = load(db, person=args.person_messages, others=args.others, channels=channels, days=args.days,
                      today=today)
        result["load_seconds"] = loaded["seconds"]
        result["settled_after_load_seconds"] = settle(node, db.keyspace)  # no compaction running when it starts
        started = time.perf_counter()
        done = erasure.erase(db, TEAM, PERSON, requested_by="bench", files=None, parallel=args.parallel,
                             processes=args.processes)
        seconds = time.perf_counter() - started
        erased = done.counts.get("messages_erased", 0) + done.counts.get("messages_tombstoned", 0)
        result["erasure"] = {**done.to_json(), "seconds": round(seconds, 1),
                             "messages_per_second": round(erased / seconds, 1)}
        say(f"erasure: {seconds:.1f} s, {done.counts}, proof {done.proof}")
        started = time.perf_counter()  # the proof alone, again (`chronicle erase --check`): its share of the above
        again = erasure.prove(db, TEAM, PERSON, files=None)
        result["proof_again"] = {"seconds": round(time.perf_counter() - started, 1), "clean": again.proof["clean"]}
        person, others = loaded["samples"]["person"][:50], loaded["samples"]["others"][:50]
        result["search_check"] = {
            "person_words_found": sum(1 for w in person if search.search(db, TEAM, w).hits),
            "person_words_checked": len(person),
            "other_words_found": sum(1 for w in others if search.search(db, TEAM, w).hits),
            "other_words_checked": len(others),
            "author_term_hits": len(search.search(db, TEAM, f"from:<@{PERSON}>").hits)}
    try:
        result["tombstone_warnings"] = tombstone_warnings(node, offset)
    except NodeError as exc:
        result["tombstone_warnings_error"] = str(exc)
    path = write_result("erasure", result)
    say(f"written {path}")
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
