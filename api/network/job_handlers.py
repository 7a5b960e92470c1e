"""What each queued network job does: jobs.py queues them and runs the worker loop, `run_job` does one."""

from __future__ import annotations

from typing import Any

from api.db import Database
from api.network import celebrities, jobs, likes, post_search


def run_job(db: Database, network: str, kind: str, subject: str) -> dict[str, Any]:
    """Run one queued network job (jobs.py lists the kinds)."""
    if kind == jobs.CELEBRITY:
        return celebrities.settle_celebrity(db, network, int(subject))
    if kind == jobs.PURGE_LIKES:
        return {"post_id": int(subject), "likes_removed": likes.delete_likes_of_post(db, network, int(subject))}
    if kind == jobs.TERM_TOP:
        return post_search.refresh_term_top(db, network, subject)
    raise ValueError(f"unknown network job kind {kind!r}")
