"""The codec study of activity days (issue 11, seed 002): size and time of every candidate codec on the seed's
day and on Chronicle activity days.

    .venv/bin/python -m bench.codecs [--rounds 100] [--json out.json]

Each codec is timed from the in-memory event list to bytes (compress: JSON or columnar encoding included) and
back to the event list (decompress: parsing included), `rounds` times; the median is reported. Every decode is
checked equal to the input. Days:

- seed: seed 002's day exactly as its text describes it: MOTION, NOISE and LIGHT events, one a minute each from
  midnight, 3 x 1,440 = 4,320 events, each with an account id, type, start and end time (ms) and a value; the
  raw JSON is 489,601 bytes in the seed and ~490 kB here.
- quiet, busy, bot: Slack users' days as Chronicle builds them (api/activity/events.py): 12, 500 and 5,000
  events (the bot posts every ~17 s into 3 channels).
- celebrity: a follower-network account's day with 300 posts' worth of likes received (20,000 events).

zstd with a trained dictionary is trained on 200 other days of the same kind (not the measured one).
No target is asserted here: the figures go into README and docs/activity.md.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import json
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import cramjam
import zstandard

from api.activity import codec
from api.activity import events as ev

Events = list[dict[str, Any]]
DAY0 = int(datetime(2026, 11, 16, tzinfo=UTC).timestamp() * 1_000_000)


def seed_day(rng: random.Random) -> Events:
    """Seed 002's test day: 3 event types x 1,440 one-minute events from midnight."""
    start = int(datetime(2016, 1, 1, tzinfo=UTC).timestamp() * 1000)
    out, noise = [], 45
    for minute in range(1440):
        hour = minute // 60
        asleep = hour < 7 or hour >= 23
        for kind in ("MOTION", "NOISE", "LIGHT"):
            if kind == "MOTION":
                value = rng.choice((0, 0, 0, 0, 1, 2, 3, 5)) if asleep else rng.randint(0, 60)
            elif kind == "NOISE":
                noise = max(25, min(90, noise + rng.randint(-2, 2)))
                value = noise
            else:
                value = rng.randint(0, 3) if asleep else rng.randint(80, 450)
            begin = start + minute * 60_000
            out.append({"account_id": "a3f9c2e1-7b4d-4e8a-9c6f-2d1b8e5a7c30", "event_type": kind,
                        "start_time": begin, "end_time": begin + 60_000, "value": value})
    return out


def slack_day(rng: random.Random, n: int, *, bot: bool = False) -> Events:
    channels = [f"C0{rng.randrange(10**8):08d}" for _ in range(3 if bot else 12)]
    people = [f"U0{rng.randrange(10**8):08d}" for _ in range(40)]
    emoji = ["+1", "eyes", "tada", "white_check_mark", "joy", "heart", "rocket", "pray"]
    out: Events = []
    at = DAY0 + rng.randrange(6 * 3600) * 1_000_000
    threads: list[tuple[str, int]] = []
    for _ in range(n):
        at += int(rng.expovariate(n / (16 * 3600)) * 1_000_000) + rng.randrange(1_000_000)
        channel = rng.choice(channels)
        roll = rng.random()
        if bot:
            out.append(ev.event(at, ev.MESSAGE, channel=channel, ts=at, words=rng.randint(8, 40),
                                subtype="bot_message"))
        elif roll < 0.35:
            out.append(ev.event(at, ev.MESSAGE, channel=channel, ts=at, words=rng.randint(1, 60)))
            threads.append((channel, at))
        elif roll < 0.55 and threads:
            channel, head = rng.choice(threads)
            out.append(ev.event(at, ev.REPLY, channel=channel, ts=at, thread_ts=head, words=rng.randint(1, 40)))
        elif roll < 0.62 and threads:
            channel, ts = rng.choice(threads)
            out.append(ev.event(at, ev.EDIT, channel=channel, ts=ts))
        elif roll < 0.80:
            ts = at - rng.randrange(1, 3 * 86_400) * 1_000_000
            out.append(ev.event(at, ev.REACTION_GIVEN, channel=channel, ts=ts, emoji=rng.choice(emoji),
                                user=rng.choice(people)))
        elif roll < 0.95 and threads:
            channel, ts = rng.choice(threads)
            out.append(ev.event(at, ev.REACTION_RECEIVED, channel=channel, ts=ts, emoji=rng.choice(emoji),
                                user=rng.choice(people)))
        else:
            out.append(ev.event(at, ev.FILE_SHARE, channel=channel, ts=at, words=rng.randint(0, 10),
                                files=rng.randint(1, 3)))
    return ev.in_order(out)


def celebrity_day(rng: random.Random, n: int = 20_000) -> Events:
    posts = [10**15 + rng.randrange(10**12) for _ in range(300)]
    out: Events = []
    for _ in range(n):
        at = DAY0 + rng.randrange(86_400 * 1_000_000)
        roll = rng.random()
        if roll < 0.9:
            out.append(ev.event(at, ev.LIKE_RECEIVED, user=str(rng.randrange(1, 5_000_000)), post=rng.choice(posts)))
        elif roll < 0.99:
            out.append(ev.event(at, ev.FOLLOWED, user=str(rng.randrange(1, 5_000_000))))
        else:
            out.append(ev.event(at, ev.UNFOLLOWED, user=str(rng.randrange(1, 5_000_000))))
    for post in posts[:12]:
        out.append(ev.event(DAY0 + rng.randrange(86_400 * 1_000_000), ev.POST, post=post))
    return ev.in_order(out)


def _json_codec(compress: Callable[[bytes], bytes], decompress: Callable[[bytes], bytes]
                ) -> tuple[Callable[[Events], bytes], Callable[[bytes], Events]]:
    return (lambda events: compress(codec.to_json(events))), (lambda blob: json.loads(decompress(blob)))


def candidates(training: list[Events]) -> dict[str, tuple[Callable[[Events], bytes], Callable[[bytes], Events]]]:
    dictionary = zstandard.train_dictionary(16 * 1024, [codec.to_json(day) for day in training])
    zd_c = zstandard.ZstdCompressor(level=3, dict_data=dictionary)
    zd_d = zstandard.ZstdDecompressor(dict_data=dictionary)
    found: dict[str, tuple[Callable[[Events], bytes], Callable[[bytes], Events]]] = {
        "none (JSON)": _json_codec(lambda b: b, lambda b: b),
        "gzip 6": _json_codec(lambda b: gzip.compress(b, 6, mtime=0), gzip.decompress),
        "bzip2 9": _json_codec(lambda b: bz2.compress(b, 9), bz2.decompress),
        "lz4": _json_codec(lambda b: bytes(cramjam.lz4.compress(b)), lambda b: bytes(cramjam.lz4.decompress(b))),
        "snappy": _json_codec(lambda b: bytes(cramjam.snappy.compress_raw(b)),
                              lambda b: bytes(cramjam.snappy.decompress_raw(b))),
    }
    for level in (1, 3, 9, 19):
        c, d = zstandard.ZstdCompressor(level=level), zstandard.ZstdDecompressor()
        found[f"zstd {level}"] = _json_codec(c.compress, d.decompress)
    found["zstd 3 + dictionary"] = _json_codec(zd_c.compress, zd_d.decompress)
    found["columnar + zstd (stored)"] = (lambda e: codec.encode(e, codec.Codec.COLUMNAR),
                                          lambda b: codec.decode(b, codec.Codec.COLUMNAR))
    return found


def measure(day: Events, encode: Callable[[Events], bytes], decode: Callable[[bytes], Events], rounds: int
            ) -> dict[str, float]:
    enc, dec = [], []
    blob = b""
    for _ in range(rounds):
        t0 = time.perf_counter()
        blob = encode(day)
        t1 = time.perf_counter()
        back = decode(blob)
        t2 = time.perf_counter()
        enc.append(t1 - t0)
        dec.append(t2 - t1)
    if back != day:
        raise AssertionError("decoded day differs from the input")
    return {"bytes": len(blob), "compress_ms": statistics.median(enc) * 1000,
            "decompress_ms": statistics.median(dec) * 1000}


def days(rng: random.Random) -> dict[str, tuple[Events, list[Events]]]:
    """name -> (the measured day, 200 other days of its kind to train a dictionary on)."""
    return {
        "seed": (seed_day(rng), [seed_day(random.Random(i)) for i in range(20)]),
        "quiet": (slack_day(rng, 12), [slack_day(random.Random(i), rng.randint(3, 30)) for i in range(200)]),
        "busy": (slack_day(rng, 500), [slack_day(random.Random(i), 500) for i in range(50)]),
        "bot": (slack_day(rng, 5000, bot=True), [slack_day(random.Random(i), 5000, bot=True) for i in range(10)]),
        "celebrity": (celebrity_day(rng), [celebrity_day(random.Random(i), 2000) for i in range(10)]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--days", default="seed,quiet,busy,bot,celebrity")
    parser.add_argument("--json", dest="json_out", default=None)
    args = parser.parse_args()
    wanted = args.days.split(",")
    results: dict[str, Any] = {}
    for name, (day, training) in days(random.Random(11)).items():
        if name not in wanted:
            continue
        raw = len(codec.to_json(day))
        rows = {label: measure(day, enc, dec, args.rounds) for label, (enc, dec) in candidates(training).items()}
        results[name] = {"events": len(day), "raw_bytes": raw, "codecs": rows}
        print(f"\n## {name}: {len(day):,} events, {raw:,} bytes of JSON ({args.rounds} rounds, medians)\n")
        print("| codec | bytes | ratio | compress ms | decompress ms | total ms |")
        print("|---|---:|---:|---:|---:|---:|")
        for label, r in rows.items():
            total = r["compress_ms"] + r["decompress_ms"]
            print(f"| {label} | {r['bytes']:,} | {raw / r['bytes']:.1f} | {r['compress_ms']:.2f} | "
                  f"{r['decompress_ms']:.2f} | {total:.2f} |")
        col, bz, z3 = rows["columnar + zstd (stored)"], rows["bzip2 9"], rows["zstd 3"]
        speedup = (bz["compress_ms"] + bz["decompress_ms"]) / (col["compress_ms"] + col["decompress_ms"])
        print(f"\ncolumnar vs bzip2: {bz['bytes'] / col['bytes']:.2f}x smaller, {speedup:.1f}x faster "
              f"(compress + decompress); vs zstd 3 on JSON: {z3['bytes'] / col['bytes']:.2f}x smaller")
        results[name]["columnar_vs_bzip2"] = {"size_ratio": bz["bytes"] / col["bytes"], "speedup": speedup}
        results[name]["columnar_vs_zstd3_size_ratio"] = z3["bytes"] / col["bytes"]
    if args.json_out:
        with open(args.json_out, "w") as out:
            json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()
