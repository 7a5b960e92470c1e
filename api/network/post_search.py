"""Q6, post search: the term index (search.py) confirmed against the posts' current like counts (posts.py), and
the term top lists it relies on, rebuilt by a job when a search finds one missing or outgrown."""

from __future__ import annotations

from typing import Any

from api.caches import Cache
from api.db import Database
from api.network import jobs, posts, search

_REBUILD_ASKED_EVERY = 60.0  # seconds: a process asks at most this often per term (searches may be frequent)
_REBUILDS_REMEMBERED = 10_000  # terms; one forgotten early is asked for again, and a duplicate job does nothing


def _rebuilds_asked(db: Database) -> Cache:
    """(network, term) -> True for the top-list rebuilds this process queued in the last minute."""
    return db.caches.ttl("network.term_rebuilds_asked", maxsize=_REBUILDS_REMEMBERED, ttl=_REBUILD_ASKED_EVERY)


def search_posts(db: Database, network: str, terms: list[str], limit: int = 25) -> search.Found:
    """Q6: the `limit` most-liked posts holding every term, confirmed against the posts. A search whose driving
    term has no top list, or an outgrown or old one, queues its rebuild."""
    found = search.search(db, network, terms, lambda ids: posts.like_counts(db, network, ids), limit)
    if found.rebuild is not None:
        asked, key = _rebuilds_asked(db), (network, found.rebuild)
        if key not in asked:
            asked.set(key, True)
            jobs.enqueue(db, network, jobs.TERM_TOP, found.rebuild)
    return found


def rebuild_term_top(db: Database, network: str, term: str, *, dry_run: bool = False) -> dict[str, Any]:
    """Rebuild one common term's top list (an admin command, and the loader after a load)."""
    return search.rebuild_top(db, network, term, lambda ids: posts.like_counts(db, network, ids), dry_run=dry_run)


def refresh_term_top(db: Database, network: str, term: str) -> dict[str, Any]:
    """The term-top job: rebuild the list only when it is missing, outgrown or old (a duplicate job does
    nothing)."""
    postings = search.term_counts(db, network, [term])[term]
    now = db.clock.time()
    state = search.usable(search.top_states(db, network, [term]).get(term), now)
    if not search.needs_top(postings, state, now, db.settings.network.term_top_max_age):
        return {"term": term, "postings": postings, "unchanged": True}
    return rebuild_term_top(db, network, term)
