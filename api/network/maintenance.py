"""Admin repairs of a whole network: counters re-counted from the rows they count (`chronicle network
reconcile`), and a network dropped table family by table family (`chronicle network drop`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from api.db import Database
from api.network import accounts, actions, likes, posts, rankings, relations, search, timelines
from api.network.relations import FOLLOWER, FOLLOWS


def reconcile_counts(db: Database, network: str, account_ids: list[int] | None = None, post_ids: list[int] = (),
                     *, dry_run: bool = False) -> dict[str, Any]:
    """Re-count follower/follows counts from the relation partitions (every account with a count, or the ones
    given) and like counts of the given posts from likes_by_post, and repair the counters that drifted."""
    current = {a: (f, g) for a, f, g in accounts.all_counts(db, network)}
    ids = sorted(current) if account_ids is None else list(account_ids)
    wanted = {a: (relations.count(db, network, a, FOLLOWER), relations.count(db, network, a, FOLLOWS)) for a in ids}
    changed = accounts.set_counts(db, network, wanted, current=current, dry_run=dry_run)
    post_changes = {}
    for post_id in post_ids:
        true = likes.recount(db, network, post_id)
        delta = true - likes.count(db, network, post_id)
        if delta:
            post_changes[post_id] = delta
            if not dry_run:
                likes.set_count(db, network, post_id, true)
                post = posts.get_post(db, network, post_id)
                if post is not None:
                    actions.publish_likes(db, network, post)
    return {"dry_run": dry_run, "accounts_checked": len(ids), "accounts_repaired": changed,
            "posts_repaired": post_changes}


def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: Callable[[str, int], None] | None = None) -> dict[str, Any]:
    """Delete everything `network` holds, table family by table family (accounts first, so the API stops
    finding the network at once). Scans every partition key of each table: an admin job. Re-running an
    interrupted drop finishes it."""
    started = time.perf_counter()
    found: dict[str, int] = {}
    for owner in (accounts, relations, posts, likes, search, timelines, rankings):
        found.update(owner.drop_network(db, network, dry_run=dry_run, progress=progress))
    return {"network": network, "dry_run": dry_run, "partitions": found, "total": sum(found.values()),
            "seconds": round(time.perf_counter() - started, 3)}
