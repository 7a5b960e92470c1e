"""Likes as who liked which post: likes_by_post and likes_by_user. A post's like count is the number of its
likes_by_post rows, re-counted after each like/unlike, so repeating a like (or retrying it) changes nothing.
"""

from __future__ import annotations

from datetime import datetime

from cassandra.query import UNSET_VALUE

from api.db import Database, Params, Statement

TABLES = frozenset({"likes_by_post", "likes_by_user"})

PUT_LIKE_BY_POST = Statement("INSERT INTO likes_by_post (network, post_id, user_id, liked_at) VALUES (?, ?, ?, ?)")
PUT_LIKE_BY_USER = Statement("INSERT INTO likes_by_user (network, user_id, post_id, liked_at) VALUES (?, ?, ?, ?)")
DELETE_LIKE_BY_POST = Statement("DELETE FROM likes_by_post WHERE network = ? AND post_id = ? AND user_id = ?")
DELETE_LIKE_BY_USER = Statement("DELETE FROM likes_by_user WHERE network = ? AND user_id = ? AND post_id = ?")
DELETE_LIKES_OF_POST = Statement("DELETE FROM likes_by_post WHERE network = ? AND post_id = ?")
LIKERS = Statement("SELECT user_id FROM likes_by_post WHERE network = ? AND post_id = ?")
COUNT_LIKES = Statement("SELECT COUNT(*) AS n FROM likes_by_post WHERE network = ? AND post_id = ?")
LIKES_OF_USER = Statement("SELECT post_id, liked_at FROM likes_by_user WHERE network = ? AND user_id = ? LIMIT ?")


def like_writes(network: str, post_id: int, user_id: int, liked_at: datetime | None = None
                ) -> list[tuple[Statement, Params]]:
    """Both rows of one like; an unknown time (imported likes) is left unset."""
    at = UNSET_VALUE if liked_at is None else liked_at
    return [(PUT_LIKE_BY_USER, (network, user_id, post_id, at)), (PUT_LIKE_BY_POST, (network, post_id, user_id, at))]


def add(db: Database, network: str, post_id: int, user_id: int, liked_at: datetime) -> None:
    db.execute_many(like_writes(network, post_id, user_id, liked_at))


def remove(db: Database, network: str, post_id: int, user_id: int) -> None:
    db.execute_many([(DELETE_LIKE_BY_POST, (network, post_id, user_id)),
                     (DELETE_LIKE_BY_USER, (network, user_id, post_id))])


def count(db: Database, network: str, post_id: int) -> int:
    return db.execute(COUNT_LIKES, (network, post_id), timeout=30).one().n


def delete_likes_of_post(db: Database, network: str, post_id: int) -> None:
    likers = [r.user_id for r in db.execute(LIKERS, (network, post_id), fetch_size=5000)]
    db.execute_many((DELETE_LIKE_BY_USER, (network, u, post_id)) for u in likers)
    db.execute(DELETE_LIKES_OF_POST, (network, post_id))


def likes_of_user(db: Database, network: str, user_id: int, limit: int = 100) -> list[dict]:
    """The posts an account liked (post id and time), at most `limit`."""
    return [{"post_id": r.post_id, "liked_at": r.liked_at}
            for r in db.execute(LIKES_OF_USER, (network, user_id, limit))]
