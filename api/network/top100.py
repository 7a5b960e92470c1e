"""Q2 and Q3 computed: the accounts with the most followers (from every count, accounts.py) and the accounts
following the most of them (relations.py), appended as a snapshot to the time series that rankings.py owns.
A job: it reads every count of the network."""

from __future__ import annotations

import collections
import time
from typing import Any

from api.db import Database
from api.network import accounts, rankings, relations
from api.network.common import heaviest


def top_accounts(db: Database, network: str, limit: int = 100) -> list[dict[str, Any]]:
    """Q2: the `limit` accounts with the most followers (ties: lower id first), from every count (a job)."""
    counts = {a: f for a, f, _ in accounts.all_counts(db, network) if f > 0}
    top = heaviest(counts, limit)
    names = {a: accounts.start_get_account(db, network, a) for a, _ in top}
    out = []
    for a, n in top:
        found = accounts.account_from(names[a])
        out.append({"account_id": a, "username": found.username if found else None, "follower_count": n})
    return out


def top_followers(db: Database, network: str, top: list[dict[str, Any]], limit: int = 100
                  ) -> list[dict[str, Any]]:
    """Q3: the accounts following the most of `top` (ties: lower id first)."""
    counts: collections.Counter = collections.Counter()
    names: dict[int, str | None] = {}
    for follower_id, name in relations.each_follower(db, network, [a["account_id"] for a in top]):
        counts[follower_id] += 1
        names[follower_id] = name
    return [{"account_id": a, "username": names[a], "follows_top": n} for a, n in heaviest(counts, limit)]


def compute_rankings(db: Database, network: str, limit: int = 100, *, dry_run: bool = False) -> dict[str, Any]:
    """Compute Q2 and Q3 now and append both to the time series (a dry run appends nothing)."""
    started = time.perf_counter()
    top = top_accounts(db, network, limit)
    followers = top_followers(db, network, top, limit)
    taken = {"dry_run": True} if dry_run else rankings.store_snapshot(db, network, top, followers)
    return {**taken, "accounts": top, "followers": followers, "seconds": round(time.perf_counter() - started, 3)}
