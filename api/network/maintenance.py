"""Admin repairs of a whole network: counters re-counted from the rows they count (`chronicle network
reconcile`), the share index written for posts loaded before it (`chronicle network index-shares`), and a network
dropped table family by table family (`chronicle network drop`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from api.activity import dirty
from api.activity import store as activity_store
from api.db import Database
from api.errors import DomainError
from api.network import (
    accounts,
    actions,
    activity_log,
    likes,
    periods,
    post_requests,
    posts,
    rankings,
    relations,
    search,
    timelines,
)
from api.network.relations import FOLLOWER, FOLLOWS
from api.retention import policies


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


class HeldError(DomainError):
    """A legal hold covers what the command would delete."""


_SHARE_PARALLEL = 8  # accounts read side by side


def index_shares(db: Database, network: str, *, dry_run: bool = False,
                 progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Write the share index (cql/0320: shares by their original author's name, which an erasure reads) of every
    post of the network that has an original author: for posts loaded before it. Every account with a count, its
    posts read month by month; writing a row again changes nothing, so an interrupted run is finished by running it
    again. `progress(n)` is told as accounts are done."""
    pool = db.executor(f"network-index-shares-{_SHARE_PARALLEL}", _SHARE_PARALLEL)

    def one(account_id: int) -> tuple[int, int]:
        _months, own = posts.all_posts_of(db, network, account_id)
        writes = [w for post in own for w in posts.share_writes(network, post)]
        if writes and not dry_run:
            db.execute_many(writes, batch_size=20)
        return len(own), len(writes) // 2

    totals = {"accounts": 0, "posts_read": 0, "shares_indexed": 0}

    def settle(futures: list[Any]) -> None:
        for future in futures:
            read, shared = future.result()
            totals["accounts"] += 1
            totals["posts_read"] += read
            totals["shares_indexed"] += shared
            if progress:
                progress(1)

    pending: list[Any] = []
    for account_id, _followers, _follows in accounts.all_counts(db, network):
        pending.append(pool.submit(one, account_id))
        if len(pending) >= 4 * _SHARE_PARALLEL:  # bounded: accounts come a count bucket at a time
            settle(pending)
            pending = []
    settle(pending)
    return {"network": network, "dry_run": dry_run, **totals}


def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: Callable[[str, int], None] | None = None) -> dict[str, Any]:
    """Delete everything `network` holds, table family by table family (accounts first, so the API stops
    finding the network at once). Scans every partition key of each table: an admin job. Re-running an
    interrupted drop finishes it."""
    held = policies.held(db, dirty.archive_name("network", network))
    if held.archive or held.users:
        what = "the network" if held.archive else f"accounts {', '.join(sorted(held.users))}"
        raise HeldError(f"network {network} is under a legal hold ({what}): release it before dropping the network")
    started = time.perf_counter()
    found: dict[str, int] = {}
    for owner in (accounts, relations, posts, likes, search, timelines, rankings, activity_log, post_requests,
                  periods):
        found.update(owner.drop_network(db, network, dry_run=dry_run, progress=progress))
    found.update(activity_store.drop_archive(db, dirty.archive_name("network", network), dry_run=dry_run,
                                             progress=progress))
    return {"network": network, "dry_run": dry_run, "partitions": found, "total": sum(found.values()),
            "seconds": round(time.perf_counter() - started, 3)}
