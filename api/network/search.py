"""Q6 word index: posts_by_word, the most-liked posts containing a word, or all of several words.

One word reads the first rows of its partition (clustered by like count, descending). Several words read
the partition of one of them (the longest: long words are rare) in like order and keep the posts whose
content holds every other word, stopping at the page size: never a scan of all posts, at most one word's
partition. Every candidate is confirmed against the post's authoritative like count (a function the caller
passes in, so this module reads only its own table): an index row whose count differs (left behind by racing
like updates) or whose post is gone is not an answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from cassandra.query import UNSET_VALUE

from api.db import Database, Params, Statement
from api.network.common import words_of
from api.network.values import Post

TABLES = frozenset({"posts_by_word"})

PUT_WORD = Statement(
    "INSERT INTO posts_by_word (network, word, like_count, post_id, author_id, author_username, posted_at, "
    "content) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
DELETE_WORD = Statement(
    "DELETE FROM posts_by_word WHERE network = ? AND word = ? AND like_count = ? AND post_id = ?")
POSTS_WITH_WORD = Statement(
    "SELECT like_count, post_id, author_id, author_username, posted_at, content FROM posts_by_word "
    "WHERE network = ? AND word = ?")

LikeCounts = Callable[[Iterable[int]], dict[int, int]]  # post ids -> current like count of those that exist


def _u(value: Any) -> Any:
    return UNSET_VALUE if value is None else value


def word_writes(network: str, post: Post, like_count: int | None = None) -> list[tuple[Statement, Params]]:
    """The index rows of a post (one per distinct word), at `like_count` (default: the post's own)."""
    likes = post.like_count if like_count is None else like_count
    return [(PUT_WORD, (network, word, likes, post.post_id, post.author_id, _u(post.author_username),
                        post.posted_at, _u(post.content)))
            for word in sorted(words_of(post.content))]


def move_like_count(db: Database, network: str, post: Post, new_count: int) -> None:
    """Re-file a post's index rows under a new like count (the count is part of the clustering key)."""
    db.execute_many(word_writes(network, post, new_count))
    if new_count != post.like_count:
        delete_words(db, network, post)


def delete_words(db: Database, network: str, post: Post) -> None:
    """Remove the post's index rows at its current like count."""
    db.execute_many((DELETE_WORD, (network, w, post.like_count, post.post_id)) for w in words_of(post.content))


MAX_QUERY_CHARS = 200  # a query is any text up to this length; its words are what it asks for


def parse_query(q: str) -> list[str]:
    """The distinct case-folded words (runs of letters or digits) of a query, in the order given. A query
    without any word asks for nothing, and matches nothing."""
    seen: list[str] = []
    for token in q.split():
        for w in sorted(words_of(token)):
            if w not in seen:
                seen.append(w)
    return seen


def search(db: Database, network: str, words: list[str], like_counts: LikeCounts, limit: int = 25) -> list[Post]:
    """The `limit` most-liked posts containing every word, each confirmed by `like_counts`."""
    if not words:
        return []
    driver = max(words, key=lambda w: (len(w), w))
    others = set(words) - {driver}
    out: list[Post] = []
    seen: set[int] = set()
    candidates: list[Any] = []
    fetch = limit if not others else 500
    for r in db.execute(POSTS_WITH_WORD, (network, driver), fetch_size=fetch, timeout=30):
        if r.post_id in seen or (others and not others <= words_of(r.content)):
            continue
        candidates.append(r)
        if len(candidates) >= limit - len(out):
            _confirm(candidates, like_counts, out, seen)
            candidates = []
            if len(out) >= limit:
                break
    _confirm(candidates, like_counts, out, seen)
    return out[:limit]


def _confirm(candidates: list[Any], like_counts: LikeCounts, out: list[Post], seen: set[int]) -> None:
    """Keep the candidates whose index row carries the post's current like count."""
    current = like_counts(r.post_id for r in candidates)
    for r in candidates:
        if current.get(r.post_id) != r.like_count or r.post_id in seen:
            continue
        seen.add(r.post_id)
        out.append(Post.from_row(r))
