"""Likes as who liked which post: likes_by_post and likes_by_user. A post's like count is the number of its
likes_by_post rows, re-counted after each like/unlike, so repeating a like (or retrying it) changes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from api.db import Database, Statement

PUT_LIKE_BY_POST = Statement("INSERT INTO likes_by_post (network, post_id, user_id, liked_at) VALUES (?, ?, ?, ?)")
PUT_LIKE_BY_USER = Statement("INSERT INTO likes_by_user (network, user_id, post_id, liked_at) VALUES (?, ?, ?, ?)")
DELETE_LIKE_BY_POST = Statement("DELETE FROM likes_by_post WHERE network = ? AND post_id = ? AND user_id = ?")
DELETE_LIKE_BY_USER = Statement("DELETE FROM likes_by_user WHERE network = ? AND user_id = ? AND post_id = ?")
DELETE_LIKES_OF_POST = Statement("DELETE FROM likes_by_post WHERE network = ? AND post_id = ?")
LIKERS = Statement("SELECT user_id FROM likes_by_post WHERE network = ? AND post_id = ?")
COUNT_LIKES = Statement("SELECT COUNT(*) AS n FROM likes_by_post WHERE network = ? AND post_id = ?")
LIKES_OF_USER = Statement("SELECT post_id, liked_at FROM likes_by_user WHERE network = ? AND user_id = ? LIMIT ?")


def count_likes(db: Database, network: str, post_id: int) -> int:
    return db.execute(COUNT_LIKES, (network, post_id), timeout=30).one().n


def _apply(db: Database, network: str, post: dict[str, Any]) -> int:
    from api.network import posts, timelines

    count = count_likes(db, network, post["post_id"])
    if count != post["like_count"]:
        old = post["like_count"]
        timelines.update_like_count(db, network, post, count)
        posts.set_like_count(db, network, post, count)
        assert post["like_count"] == count != old
    return count


def like(db: Database, network: str, post: dict[str, Any], user_id: int) -> int:
    """Record that `user_id` likes `post`; returns the post's like count. Idempotent."""
    now = datetime.now(UTC)
    db.execute(PUT_LIKE_BY_USER, (network, user_id, post["post_id"], now))
    db.execute(PUT_LIKE_BY_POST, (network, post["post_id"], user_id, now))
    return _apply(db, network, post)


def unlike(db: Database, network: str, post: dict[str, Any], user_id: int) -> int:
    db.execute(DELETE_LIKE_BY_POST, (network, post["post_id"], user_id))
    db.execute(DELETE_LIKE_BY_USER, (network, user_id, post["post_id"]))
    return _apply(db, network, post)


def delete_likes_of_post(db: Database, network: str, post_id: int) -> None:
    likers = [r.user_id for r in db.execute(LIKERS, (network, post_id), fetch_size=5000)]
    db.execute_many(DELETE_LIKE_BY_USER, [(network, u, post_id) for u in likers])
    db.execute(DELETE_LIKES_OF_POST, (network, post_id))


def likes_of_user(db: Database, network: str, user_id: int, limit: int = 100) -> list[dict[str, Any]]:
    return [{"post_id": r.post_id, "liked_at": r.liked_at} for r in db.execute(LIKES_OF_USER,
                                                                               (network, user_id, limit))]
