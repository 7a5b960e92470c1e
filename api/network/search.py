"""Q6: the most-liked posts containing a word, or all of several words, from the inverted index posts_by_word.

One word reads the first 25 rows of its partition (clustered by like count, descending). Several words read
the partition of one of them (the longest: long words are rare) in like order and keep the posts whose
content holds every other word, stopping at 25: never a scan of all posts, at most one word's partition.
"""

from __future__ import annotations

from typing import Any

from api.db import Database, Statement
from api.network.common import to_utc, words_of

POSTS_WITH_WORD = Statement(
    "SELECT like_count, post_id, author_id, author_username, posted_at, content FROM posts_by_word "
    "WHERE network = ? AND word = ?")
# The authoritative like count of a candidate: an index row whose count differs (left behind by racing like
# updates) or whose post is gone (deleted after such a race) is not an answer.
CURRENT_LIKES = Statement("SELECT like_count FROM posts_by_id WHERE network = ? AND post_id = ?")


def parse_query(q: str) -> list[str]:
    """The distinct case-folded words of a query, in the order given."""
    seen: list[str] = []
    for token in q.split():
        for w in sorted(words_of(token)):
            if w not in seen:
                seen.append(w)
    return seen


def search(db: Database, network: str, words: list[str], limit: int = 25) -> list[dict[str, Any]]:
    if not words:
        return []
    driver = max(words, key=lambda w: (len(w), w))
    others = set(words) - {driver}
    out: list[dict[str, Any]] = []
    seen: set[int] = set()
    candidates: list[Any] = []
    fetch = limit if not others else 500
    for r in db.execute(POSTS_WITH_WORD, (network, driver), fetch_size=fetch, timeout=30):
        if r.post_id in seen or (others and not others <= words_of(r.content)):
            continue
        candidates.append(r)
        if len(candidates) >= limit - len(out):
            _confirm(db, network, candidates, out, seen)
            candidates = []
            if len(out) >= limit:
                break
    _confirm(db, network, candidates, out, seen)
    return out[:limit]


def _confirm(db: Database, network: str, candidates: list[Any], out: list[dict[str, Any]], seen: set[int]) -> None:
    """Keep the candidates whose index row carries the post's current like count (reads run concurrently)."""
    futures = [db.execute_async(CURRENT_LIKES, (network, r.post_id)) for r in candidates]
    for r, future in zip(candidates, futures, strict=True):
        current = future.result().one()
        if current is None or (current.like_count or 0) != r.like_count or r.post_id in seen:
            continue
        seen.add(r.post_id)
        out.append({"post_id": r.post_id, "author_id": r.author_id, "author_username": r.author_username,
                    "posted_at": to_utc(r.posted_at), "content": r.content, "like_count": r.like_count})
