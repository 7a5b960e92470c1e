"""A follower network's retention run at size (issue 32): the accounts it reads and its time, the first run (every
account read, the period listings written) against a later one (the listed accounts only), each expiring the same
share of the posts.

    .venv/bin/python -m bench.retention_network [--accounts 20000] [--authors 1000] [--posts 24000] [--keep]

In one scratch keyspace (bench/scale_common.py; dropped after unless `--keep`):

1. Load through `chronicle network load`'s function (api/network/loader.py) `--accounts` accounts (each with its
   count row, as a load gives every account), of which `--authors` post: `--posts` posts spread evenly over 24
   months ending last month, 2% of them liked by one of 200 likers.
2. A policy that expires the first 6 months; run 1 (the network's first: it walks every account). Then the same
   policy dated 6 months later: run 2 expires the next 6 months (about the same posts) through the listings.
3. Checks: each run deleted exactly the posts of its months (counted from the generated files), every later post
   still there (counted by the node), 0 tombstone warnings.

Prints one JSON object and writes it under bench/results/.
"""

from __future__ import annotations

import argparse
import csv
import random
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from api.db import Database
from api.network import loader
from api.network.cleaning import CLEAN_POST_COLUMNS
from api.retention import network as retention
from api.retention import policies
from bench.scale_common import local_node, log_offset, scratch_keyspace, settle, tombstone_warnings, write_result

NETWORK = "retbench"
MONTHS = 24


def _month_start(months_back: int, today: date) -> date:
    index = today.year * 12 + today.month - 1 - months_back
    return date(index // 12, index % 12 + 1, 1)


def write_files(directory: Path, *, accounts: int, authors: int, posts: int, today: date, seed: int = 32
                ) -> list[date]:
    """accounts.csv, relations.csv (none), posts.csv and likes.csv; returns each post's UTC day."""
    rnd = random.Random(seed)
    first = _month_start(MONTHS, today)
    span = (_month_start(0, today) - first).days
    with (directory / "accounts.csv").open("w", newline="") as out:
        rows = csv.writer(out)
        rows.writerow(["account_id", "username", "follower_count", "follows_count"])
        rows.writerows([a, f"rb_{a}", 0, 0] for a in range(1, accounts + 1))
    with (directory / "relations.csv").open("w", newline="") as out:
        csv.writer(out).writerow(["account_id", "account_username", "rel_type", "target_id", "target_username"])
    days: list[date] = []
    with (directory / "posts.csv").open("w", newline="", encoding="utf-8") as pout, \
            (directory / "likes.csv").open("w", newline="") as lout:
        post_rows, like_rows = csv.writer(pout), csv.writer(lout)
        post_rows.writerow(CLEAN_POST_COLUMNS)
        like_rows.writerow(["post_id", "user_id"])
        for n in range(posts):
            author = 1 + rnd.randrange(authors)
            posted = datetime.combine(first, datetime.min.time(), UTC) + timedelta(
                seconds=rnd.randrange(span * 86_400))
            days.append(posted.date())
            post_rows.writerow([10_000_000 + n, author, f"rb_{author}", "", "", posted.isoformat().replace(
                "+00:00", "Z"), f"zqret word{n % 97} other{n % 13}", "en", "", "", "", 0, 0])
            if rnd.random() < 0.02:
                like_rows.writerow([10_000_000 + n, authors + 1 + rnd.randrange(200)])
    return days


def timed_run(db: Database, today: date) -> dict[str, Any]:
    started = time.perf_counter()
    report, found = retention.run(db, NETWORK, today=today)
    return {"seconds": round(time.perf_counter() - started, 2), "cutoff": str(date(1970, 1, 1) + timedelta(
        found.cutoff)), "counts": dict(report.counts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--accounts", type=int, default=20_000)
    parser.add_argument("--authors", type=int, default=1_000)
    parser.add_argument("--posts", type=int, default=24_000)
    parser.add_argument("--keep", action="store_true", help="keep the scratch keyspace")
    args = parser.parse_args()
    node = local_node()
    today = datetime.now(UTC).date()
    out: dict[str, Any] = {"bench": "retention_network", "args": vars(args)}
    with scratch_keyspace("retnet", keep=args.keep, request_timeout=60.0) as db, \
            tempfile.TemporaryDirectory() as tmp:
        out["keyspace"] = db.keyspace
        days = write_files(Path(tmp), accounts=args.accounts, authors=args.authors, posts=args.posts, today=today)
        started = time.perf_counter()
        loader.load_network(db, NETWORK, Path(tmp))
        out["load_seconds"] = round(time.perf_counter() - started, 1)
        out["settled_seconds"] = settle(node, db.keyspace)
        offset = log_offset(node)
        # Cutoffs: the start of month 6, then of month 12, of the 24 (keep_days counted from `today`).
        first_cut, second_cut = _month_start(MONTHS - 6, today), _month_start(MONTHS - 12, today)
        runs = []
        for cut, dated in ((first_cut, today), (second_cut, today + (second_cut - first_cut))):
            policies.set_policy(db, f"network:{NETWORK}", policies.WHOLE, (dated - cut).days, by="bench")
            runs.append(timed_run(db, dated))
        expected = [sum(1 for d in days if d < first_cut), sum(1 for d in days if first_cut <= d < second_cut)]
        left = db.execute_raw(f"SELECT COUNT(*) AS n FROM {db.keyspace}.posts_by_id WHERE network = %s "
                              "ALLOW FILTERING", (NETWORK,), timeout=120).one().n
        out["runs"] = runs
        out["checks"] = {"posts expired as generated": [r["counts"].get("posts", 0) for r in runs] == expected,
                         "posts left": left, "posts left expected": sum(1 for d in days if d >= second_cut),
                         "tombstone warnings": tombstone_warnings(node, offset)}
        out["ratio"] = round(runs[0]["seconds"] / runs[1]["seconds"], 1) if runs[1]["seconds"] else None
    write_result("retention-network", out)


if __name__ == "__main__":
    main()
