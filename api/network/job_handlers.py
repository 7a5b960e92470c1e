"""What each queued network job does: jobs.py queues them and runs the worker loop, `run_job` does one."""

from __future__ import annotations

import uuid
from typing import Any

from api.db import Database
from api.network import accounts, celebrities, jobs, likes, post_search, relations, top100
from api.network.settings import NetworkSettings, network_settings


def run_job(db: Database, network: str, kind: str, subject: str) -> dict[str, Any]:
    """Run one queued network job (jobs.py lists the kinds)."""
    if kind == jobs.CELEBRITY:
        settled = celebrities.settle_celebrity(db, network, int(subject))
        return {**settled, **settle_followers(db, network, int(subject))}
    if kind == jobs.PURGE_LIKES:
        return {"post_id": int(subject), "likes_removed": likes.delete_likes_of_post(db, network, int(subject))}
    if kind == jobs.TERM_TOP:
        return post_search.refresh_term_top(db, network, subject)
    if kind == jobs.RANKINGS:
        try:
            job_id = uuid.UUID(subject)
        except ValueError:
            raise ValueError(f"malformed rankings job id {subject!r}") from None
        summary = top100.run_job(db, network, job_id)
        return {**summary, "layout_jobs": queue_layout_moves(db, network)}
    if kind == jobs.FOLLOWER_BUCKETS:
        return settle_followers(db, network, int(subject))
    raise ValueError(f"unknown network job kind {kind!r}")


def _wanted(ns: NetworkSettings, followers: int, current: int) -> int:
    line = ns.hybrid_threshold if ns.hybrid else ns.follower_bucket_rows
    return relations.wanted_buckets(followers, current, line=line, hysteresis=ns.hybrid_hysteresis,
                                    bucket_rows=ns.follower_bucket_rows)


def settle_followers(db: Database, network: str, account_id: int, ns: NetworkSettings | None = None
                     ) -> dict[str, Any]:
    """The follower-buckets job: move the account's followers into the layout its current follower count wants
    (re-read at LOCAL_QUORUM: a duplicate or late job moves nothing)."""
    ns = ns or network_settings()
    followers = accounts.fresh_counts(db, network, [account_id])[account_id][0]
    current = relations.layout(db, network, account_id)
    wanted = _wanted(ns, followers, current.buckets)
    if wanted == current.buckets and not current.moving:
        return {"buckets": wanted}
    moved = relations.move_followers(db, network, account_id, wanted, settle=ns.follower_move_settle,
                                     clock=db.clock)
    return {"buckets": wanted, "followers_moved": moved["moved"]}


def queue_layout_moves(db: Database, network: str, ns: NetworkSettings | None = None) -> int:
    """After a ranking: queue a follower-buckets job for each top account whose layout is behind its count
    (the largest follower sets are all in the top 100). Returns the jobs queued."""
    ns = ns or network_settings()
    latest = top100.latest_top(db, network)
    current = relations.layouts(db, network, [a for a, _ in latest])
    behind = [a for a, n in latest if _wanted(ns, n, current[a].buckets) != current[a].buckets or current[a].moving]
    for a in behind:
        jobs.enqueue(db, network, jobs.FOLLOWER_BUCKETS, a)
    return len(behind)
