"""Posts: posts_by_author (Q1, one partition per author and month), post_months_by_author, posts_by_id and
the Q6 word index posts_by_word; writing and deleting a post keeps all of them, the likes and the home
caches consistent.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from api.db import Database, Statement, without_none
from api.network.common import month_of, new_post_id, to_utc, words_of

_POST_COLS = ("author_username, original_author, content, language, country, latitude, longitude, like_count, "
              "share_count")

PUT_POST_BY_AUTHOR = Statement(
    "INSERT INTO posts_by_author (network, author_id, month, posted_at, post_id, author_username, "
    "original_author, content, language, country, latitude, longitude, like_count, share_count) VALUES "
    "(:network, :author_id, :month, :posted_at, :post_id, :author_username, :original_author, :content, "
    ":language, :country, :latitude, :longitude, :like_count, :share_count)")
PUT_POST_MONTH = Statement(
    "INSERT INTO post_months_by_author (network, author_id, month) VALUES (?, ?, ?)")
PUT_POST_BY_ID = Statement(
    "INSERT INTO posts_by_id (network, post_id, author_id, posted_at, author_username, original_author, "
    "content, language, country, latitude, longitude, like_count, share_count) VALUES "
    "(:network, :post_id, :author_id, :posted_at, :author_username, :original_author, :content, :language, "
    ":country, :latitude, :longitude, :like_count, :share_count)")
PUT_WORD = Statement(
    "INSERT INTO posts_by_word (network, word, like_count, post_id, author_id, author_username, posted_at, "
    "content) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
DELETE_WORD = Statement(
    "DELETE FROM posts_by_word WHERE network = ? AND word = ? AND like_count = ? AND post_id = ?")
GET_POST = Statement(
    f"SELECT post_id, author_id, posted_at, {_POST_COLS} FROM posts_by_id WHERE network = ? AND post_id = ?")
DELETE_POST_BY_ID = Statement("DELETE FROM posts_by_id WHERE network = ? AND post_id = ?")
DELETE_POST_BY_AUTHOR = Statement(
    "DELETE FROM posts_by_author WHERE network = ? AND author_id = ? AND month = ? AND posted_at = ? "
    "AND post_id = ?")
SET_LIKES_BY_AUTHOR = Statement(
    "UPDATE posts_by_author SET like_count = ? WHERE network = ? AND author_id = ? AND month = ? "
    "AND posted_at = ? AND post_id = ?")
SET_LIKES_BY_ID = Statement("UPDATE posts_by_id SET like_count = ? WHERE network = ? AND post_id = ?")
POST_MONTHS = Statement("SELECT month FROM post_months_by_author WHERE network = ? AND author_id = ?")
POSTS_OF_MONTH = Statement(
    f"SELECT post_id, posted_at, {_POST_COLS} FROM posts_by_author "
    "WHERE network = ? AND author_id = ? AND month = ? LIMIT ?")
POSTS_OF_MONTH_BEFORE = Statement(
    f"SELECT post_id, posted_at, {_POST_COLS} FROM posts_by_author "
    "WHERE network = ? AND author_id = ? AND month = ? AND (posted_at, post_id) < (?, ?) LIMIT ?")


def post_dict(row: Any, author_id: int | None = None) -> dict[str, Any]:
    return {
        "post_id": row.post_id,
        "author_id": author_id if author_id is not None else row.author_id,
        "author_username": row.author_username,
        "original_author": row.original_author,
        "posted_at": to_utc(row.posted_at),
        "content": row.content,
        "language": row.language,
        "country": row.country,
        "latitude": row.latitude,
        "longitude": row.longitude,
        "like_count": row.like_count or 0,
        "share_count": row.share_count or 0,
    }


def write_post_rows(db: Database, network: str, post: dict[str, Any]) -> None:
    """Write one post into posts_by_id, posts_by_author, its month index and the word index (idempotent)."""
    params = without_none({**post, "network": network, "month": month_of(post["posted_at"])})
    futures = [
        db.execute_async(PUT_POST_BY_AUTHOR, params),
        db.execute_async(PUT_POST_MONTH, (network, post["author_id"], params["month"])),
        db.execute_async(PUT_POST_BY_ID, {k: v for k, v in params.items() if k != "month"}),
    ]
    futures += [db.execute_async(PUT_WORD, p) for p in word_rows(network, post)]
    for f in futures:
        f.result()


def word_rows(network: str, post: dict[str, Any]) -> Iterator[tuple]:
    for word in sorted(words_of(post.get("content"))):
        yield (network, word, post.get("like_count") or 0, post["post_id"], post["author_id"],
               post.get("author_username"), post["posted_at"], post.get("content"))


def get_post(db: Database, network: str, post_id: int) -> dict[str, Any] | None:
    row = db.execute(GET_POST, (network, post_id)).one()
    return post_dict(row) if row is not None else None


def author_months(db: Database, network: str, author_id: int) -> list[str]:
    return [r.month for r in db.execute(POST_MONTHS, (network, author_id))]


def posts_of_author(db: Database, network: str, author_id: int, limit: int, *,
                    before: tuple[str, datetime, int] | None = None) -> list[dict[str, Any]]:
    """Q1: up to `limit` posts of an author, newest first, optionally strictly before (month, time, id).

    Month partitions are read newest first, a few at a time concurrently (a sparse author has a handful of
    posts per month), until `limit` posts are in hand.
    """
    months = [m for m in author_months(db, network, author_id) if before is None or m <= before[0]]
    out: list[dict[str, Any]] = []
    batch = 2
    i = 0
    while i < len(months) and len(out) < limit:
        chunk = months[i:i + batch]
        futures = []
        for month in chunk:
            if before is not None and month == before[0]:
                futures.append(db.execute_async(POSTS_OF_MONTH_BEFORE, (network, author_id, month, before[1],
                                                                        before[2], limit)))
            else:
                futures.append(db.execute_async(POSTS_OF_MONTH, (network, author_id, month, limit)))
        for f in futures:
            out.extend(post_dict(r, author_id) for r in f.result())
        i += len(chunk)
        batch = min(batch * 2, 16)
    return out[:limit]


def create_post(db: Database, network: str, author: dict[str, Any], content: str, *,
                posted_at: datetime | None = None, language: str | None = None, country: str | None = None,
                latitude: float | None = None, longitude: float | None = None, post_id: int | None = None
                ) -> tuple[dict[str, Any], int]:
    """Q5: write a post, then fan it out to its author's followers' home caches. Returns (post, fanned out)."""
    from api.network import timelines

    post = {
        "post_id": post_id or new_post_id(), "author_id": author["account_id"],
        "author_username": author["username"], "original_author": None,
        "posted_at": to_utc(posted_at or datetime.now().astimezone()).replace(microsecond=0),
        "content": content, "language": language, "country": country, "latitude": latitude,
        "longitude": longitude, "like_count": 0, "share_count": 0,
    }
    # Millisecond precision is what Cassandra stores: keep the returned post identical to the stored one.
    post["posted_at"] = post["posted_at"].replace(microsecond=(post["posted_at"].microsecond // 1000) * 1000)
    write_post_rows(db, network, post)
    fanned = timelines.fan_out(db, network, post, author_followers=author["follower_count"])
    return post, fanned


def delete_post(db: Database, network: str, post: dict[str, Any]) -> int:
    """Remove a post from every timeline, the word index, the likes and the post tables (posts_by_id last,
    so a retried delete still finds it). Returns the number of home caches it was removed from."""
    from api.network import likes, timelines

    removed = timelines.remove_from_caches(db, network, post)
    for word in words_of(post.get("content")):
        db.execute(DELETE_WORD, (network, word, post["like_count"], post["post_id"]))
    likes.delete_likes_of_post(db, network, post["post_id"])
    db.execute(DELETE_POST_BY_AUTHOR, (network, post["author_id"], month_of(post["posted_at"]),
                                       post["posted_at"], post["post_id"]))
    db.execute(DELETE_POST_BY_ID, (network, post["post_id"]))
    return removed


def set_like_count(db: Database, network: str, post: dict[str, Any], new_count: int) -> None:
    """Move a post to a new like count in posts_by_author, the word index and posts_by_id (last)."""
    old = post["like_count"]
    updated = {**post, "like_count": new_count}
    db.execute(SET_LIKES_BY_AUTHOR, (new_count, network, post["author_id"], month_of(post["posted_at"]),
                                     post["posted_at"], post["post_id"]))
    db.execute_many(PUT_WORD, list(word_rows(network, updated)))
    if old != new_count:
        db.execute_many(DELETE_WORD, [(network, w, old, post["post_id"]) for w in words_of(post.get("content"))])
    db.execute(SET_LIKES_BY_ID, (new_count, network, post["post_id"]))
    post["like_count"] = new_count
