"""Q2 and Q3 computed: the accounts with the most followers (from every count, accounts.py) and the accounts
following the most of them (relations.py), appended as a snapshot to the time series that rankings.py owns.
A job (jobs.py kind `rankings`, queued by POST /networks/{n}/rankings): it reads every count of the network
and every follower of the top 100.

Memory stays bounded whatever the sizes: Q2 keeps a heap of 100 while the counts stream past; Q3 counts one
slice of the follower-id hash space at a time (relations.slot_of: a follower's every relation to the top 100
falls into the same slice, so its count is final within its slice), keeping the best 100 across slices. Slices
are sized so that one holds about `SLICE_ROWS` relations; followers of the accounts still in their legacy
partition (below the bucketing line: small by design) are read once and binned as 8-byte ids.
"""

from __future__ import annotations

import array
import collections
import heapq
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from api.db import Database
from api.network import accounts, jobs, rankings, relations
from api.network.common import heaviest

SLICE_ROWS = 500_000  # relations counted per slice of Q3 (a Counter of at most this many followers)


def top_accounts(db: Database, network: str, limit: int = 100) -> list[dict[str, Any]]:
    """Q2: the `limit` accounts with the most followers (ties: lower id first), from every count (a job); the
    counts stream past a heap of `limit`."""
    top = heapq.nsmallest(limit, ((a, f) for a, f, _ in accounts.all_counts(db, network) if f > 0),
                          key=lambda kv: (-kv[1], kv[0]))
    names = {a: accounts.start_get_account(db, network, a) for a, _ in top}
    out = []
    for a, n in top:
        found = accounts.account_from(names[a])
        out.append({"account_id": a, "username": found.username if found else None, "follower_count": n})
    return out


def top_followers(db: Database, network: str, top: list[dict[str, Any]], limit: int = 100,
                  slice_rows: int = SLICE_ROWS) -> list[dict[str, Any]]:
    """Q3: the accounts following the most of `top` (ties: lower id first), one hash slice at a time."""
    ids = [a["account_id"] for a in top]
    total = sum(a["follower_count"] for a in top)
    slices = 1 << max(0, (total // max(1, slice_rows)).bit_length())  # a power of two, >= total / slice_rows
    slices = min(slices, relations.SLOTS)
    width = relations.SLOTS // slices
    layouts = relations.layouts(db, network, ids)
    small = [a for a in ids if layouts[a].buckets == 0]
    big = [a for a in ids if layouts[a].buckets]
    binned = [array.array("q") for _ in range(slices)]  # followers of the small sets, by slice
    for follower_id, _name in relations.each_follower(db, network, small, known=layouts):
        binned[relations.slot_of(follower_id) // width].append(follower_id)
    best: list[tuple[int, int]] = []
    for i in range(slices):
        counts: collections.Counter = collections.Counter(binned[i])
        binned[i] = array.array("q")
        if big:  # re-read per slice: a layout move that flipped meanwhile is followed
            now = relations.layouts(db, network, big)
            for follower_id, _name in relations.each_follower(db, network, big, slots=(i * width, (i + 1) * width),
                                                              known=now):
                counts[follower_id] += 1
        best = heaviest(dict(best) | dict(heaviest(counts, limit)), limit)
    names = {a: accounts.start_get_account(db, network, a, counts=False) for a, _ in best}
    out = []
    for a, n in best:
        found = accounts.account_from(names[a])
        out.append({"account_id": a, "username": found.username if found else None, "follows_top": n})
    return out


def compute_rankings(db: Database, network: str, limit: int = 100, *, dry_run: bool = False) -> dict[str, Any]:
    """Compute Q2 and Q3 now and append both to the time series (a dry run appends nothing)."""
    started = time.perf_counter()
    top = top_accounts(db, network, limit)
    followers = top_followers(db, network, top, limit)
    taken = {"dry_run": True} if dry_run else rankings.store_snapshot(db, network, top, followers)
    return {**taken, "accounts": top, "followers": followers, "seconds": round(time.perf_counter() - started, 3)}


def latest_top(db: Database, network: str) -> list[tuple[int, int]]:
    """(account id, follower count) of the latest Q2 snapshot (empty before the first)."""
    found = rankings.snapshots(db, network, "accounts", limit=1)
    return [(a["account_id"], a["follower_count"]) for a in found[0]["accounts"]] if found else []


def request_rankings(db: Database, network: str) -> dict[str, Any]:
    """Queue a Q2+Q3 job (its status row and its queue item in one round) and return its status at once."""
    now = datetime.fromtimestamp(db.clock.time(), UTC)
    job_id, writes = rankings.new_job(network, now)
    db.execute_many(writes + jobs.job_writes(network, jobs.RANKINGS, str(job_id), clock=db.clock))
    return {"job_id": str(job_id), "network": network, "status": "queued", "requested_at": now, "attempts": 0}


def run_job(db: Database, network: str, job_id: uuid.UUID) -> dict[str, Any]:
    """The queued Q2+Q3 job: mark it running, compute and append the snapshot, mark it done with the snapshot's
    id (or failed with the error, raised again so the worker retries it). A job already done is not run again
    (delivery is at least once)."""
    before = rankings.job_started(db, network, job_id, datetime.now(UTC))
    if before is not None and before["status"] == "done":
        return {"job_id": str(job_id), "already_done": True}
    try:
        result = compute_rankings(db, network)
    except Exception as exc:
        rankings.job_failed(db, network, job_id, repr(exc), datetime.now(UTC))
        raise
    rankings.job_done(db, network, job_id, result["snapshot_id"], result["seconds"], datetime.now(UTC))
    return {"job_id": str(job_id), "snapshot_id": result["snapshot_id"], "seconds": result["seconds"],
            "accounts": len(result["accounts"]), "followers": len(result["followers"])}
