"""Likes: likes_by_user and likes_by_post (who liked what) and post_like_counts (one counter per post).

A like is an INSERT IF NOT EXISTS on the liker's own likes_by_user row, an unlike a DELETE IF EXISTS: the
Paxos round sits in the liker's partition (never in a 200k-like post's), and only the request whose
transaction applied moves the counter, so repeating or retrying a like changes nothing. No request counts a
post's likes; `chronicle network reconcile` re-counts them (a job) to repair a request that died between its
transaction and its increment.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime

from cassandra import ConsistencyLevel
from cassandra.query import UNSET_VALUE

from api import partitions
from api.db import Database, Params, Statement, was_applied

TABLES = frozenset({"likes_by_post", "likes_by_user", "post_like_counts"})

PUT_LIKE_BY_POST = Statement("INSERT INTO likes_by_post (network, post_id, user_id, liked_at) VALUES (?, ?, ?, ?)")
PUT_LIKE_BY_USER = Statement("INSERT INTO likes_by_user (network, user_id, post_id, liked_at) VALUES (?, ?, ?, ?)")
LIKE_IF_NEW = Statement(
    "INSERT INTO likes_by_user (network, user_id, post_id, liked_at) VALUES (?, ?, ?, ?) IF NOT EXISTS",
    name="INSERT likes_by_user IF NOT EXISTS", idempotent=False)
UNLIKE_IF_EXISTS = Statement(
    "DELETE FROM likes_by_user WHERE network = ? AND user_id = ? AND post_id = ? IF EXISTS",
    name="DELETE likes_by_user IF EXISTS", idempotent=False)
DELETE_LIKE_BY_POST = Statement("DELETE FROM likes_by_post WHERE network = ? AND post_id = ? AND user_id = ?")
DELETE_LIKE_BY_USER = Statement("DELETE FROM likes_by_user WHERE network = ? AND user_id = ? AND post_id = ?")
DELETE_LIKES_OF_POST = Statement("DELETE FROM likes_by_post WHERE network = ? AND post_id = ?")
LIKERS = Statement("SELECT user_id FROM likes_by_post WHERE network = ? AND post_id = ?")
COUNT_LIKES = Statement("SELECT COUNT(*) AS n FROM likes_by_post WHERE network = ? AND post_id = ?")
LIKES_OF_USER = Statement("SELECT post_id, liked_at FROM likes_by_user WHERE network = ? AND user_id = ? LIMIT ?")
ADD_LIKES = Statement("UPDATE post_like_counts SET likes = likes + ? WHERE network = ? AND post_id = ?",
                      idempotent=False)
GET_LIKES_FRESH = Statement("SELECT likes FROM post_like_counts WHERE network = ? AND post_id = ?",
                            name="SELECT post_like_counts (fresh)", consistency=ConsistencyLevel.LOCAL_QUORUM)
# Erasure of an account (api/erasure/network.py).
DROP_LIKES_OF_USER = Statement("DELETE FROM likes_by_user WHERE network = ? AND user_id = ?",
                               name="DELETE likes_by_user (all of one account)")
DELETE_COUNT = Statement("DELETE FROM post_like_counts WHERE network = ? AND post_id = ?")
ALL_LIKES_OF_USER = Statement("SELECT post_id FROM likes_by_user WHERE network = ? AND user_id = ?",
                              name="SELECT likes_by_user (all)")


def like_writes(network: str, post_id: int, user_id: int, liked_at: datetime | None = None
                ) -> list[tuple[Statement, Params]]:
    """Both rows of one like (the loader's bulk path: counts are set with `set_count`); an unknown time
    (imported likes) is left unset."""
    at = UNSET_VALUE if liked_at is None else liked_at
    return [(PUT_LIKE_BY_USER, (network, user_id, post_id, at)), (PUT_LIKE_BY_POST, (network, post_id, user_id, at))]


def claim_like(db: Database, network: str, post_id: int, user_id: int, liked_at: datetime) -> bool:
    """The liker's own likes_by_user row, by lightweight transaction: True when this call created the like
    (only then may the caller move the counter). `like_done_writes` completes it."""
    return was_applied(db.execute(LIKE_IF_NEW, (network, user_id, post_id, liked_at)))


def like_done_writes(network: str, post_id: int, user_id: int, liked_at: datetime) -> list[tuple[Statement, Params]]:
    """The post-side row of a like, written whether or not the transaction applied: a retry completes a
    half-done like."""
    return [(PUT_LIKE_BY_POST, (network, post_id, user_id, liked_at))]


def count_change(network: str, post_id: int, delta: int) -> tuple[Statement, Params]:
    """Move the post's counter: only by a call whose transaction applied."""
    return ADD_LIKES, (delta, network, post_id)


def claim_unlike(db: Database, network: str, post_id: int, user_id: int) -> bool:
    """Delete the liker's own likes_by_user row by lightweight transaction: True when this call removed it."""
    return was_applied(db.execute(UNLIKE_IF_EXISTS, (network, user_id, post_id)))


def unlike_done_writes(network: str, post_id: int, user_id: int) -> list[tuple[Statement, Params]]:
    return [(DELETE_LIKE_BY_POST, (network, post_id, user_id))]


def start_count(db: Database, network: str, post_id: int):
    return db.execute_async(GET_LIKES_FRESH, (network, post_id))


def count_from(future) -> int:
    row = future.result().one()
    return (row.likes or 0) if row is not None else 0


def count(db: Database, network: str, post_id: int) -> int:
    """The post's like counter, read at LOCAL_QUORUM (after this request's own increment)."""
    return count_from(start_count(db, network, post_id))


def recount(db: Database, network: str, post_id: int) -> int:
    """Count the post's likes_by_post rows: the reconcile job's truth (proportional to the likes: never in a
    request)."""
    return db.execute(COUNT_LIKES, (network, post_id), timeout=60).one().n


def set_count(db: Database, network: str, post_id: int, wanted: int) -> int:
    """Bring the post's counter to `wanted` by adding the difference (bulk loads, reconcile); returns it."""
    delta = wanted - count(db, network, post_id)
    if delta:
        db.execute(ADD_LIKES, (delta, network, post_id))
    return delta


def set_count_writes(network: str, deltas: Iterable[tuple[int, int]]) -> Iterator[tuple[Statement, Params]]:
    """Counter additions (post id, delta) for a bulk path that knows the counters' current values."""
    return ((ADD_LIKES, (delta, network, post_id)) for post_id, delta in deltas if delta)


def delete_likes_of_post(db: Database, network: str, post_id: int) -> int:
    """Remove every like of a deleted post (a job: proportional to its likes). Returns the likes removed."""
    likers = [r.user_id for r in db.execute(LIKERS, (network, post_id), fetch_size=5000, timeout=60)]
    db.execute_many((DELETE_LIKE_BY_USER, (network, u, post_id)) for u in likers)
    db.execute(DELETE_LIKES_OF_POST, (network, post_id))
    return len(likers)


def likes_of_user(db: Database, network: str, user_id: int, limit: int = 100) -> list[dict]:
    """The posts an account liked (post id and time), at most `limit`."""
    return [{"post_id": r.post_id, "liked_at": r.liked_at}
            for r in db.execute(LIKES_OF_USER, (network, user_id, limit))]


def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: partitions.Progress | None = None) -> dict[str, int]:
    """Delete every partition of this module's tables that belongs to `network` (admin; see api/partitions.py)."""
    return partitions.drop(db, TABLES, "network", network, dry_run=dry_run, progress=progress)


# -- erasure of an account -----------------------------------------------------------------------------------------
def liked_by(db: Database, network: str, user_id: int) -> list[int]:
    """Every post the account likes (paged: bounded by what one account liked)."""
    return [r.post_id for r in db.execute(ALL_LIKES_OF_USER, (network, user_id), fetch_size=5000, timeout=60)]


def likers(db: Database, network: str, post_id: int) -> list[int]:
    return [r.user_id for r in db.execute(LIKERS, (network, post_id), fetch_size=5000, timeout=60)]


def erase_post_writes(network: str, post_id: int, post_likers: Iterable[int]) -> list[tuple[Statement, Params]]:
    """An erased post's likes on both sides and its counter."""
    return [*((DELETE_LIKE_BY_USER, (network, u, post_id)) for u in post_likers),
            (DELETE_LIKES_OF_POST, (network, post_id)), (DELETE_COUNT, (network, post_id))]


def erase_account_writes(network: str, user_id: int) -> list[tuple[Statement, Params]]:
    """The account's own likes list (each like's other side is the caller's: unlikes)."""
    return [(DROP_LIKES_OF_USER, (network, user_id))]


def rows_of(db: Database, network: str, *, user_id: int | None = None, post_id: int | None = None) -> int:
    """Rows left of an account's likes list, or of a post's likes and counter (the erasure proof)."""
    if user_id is not None:
        return len(liked_by(db, network, user_id))
    return len(likers(db, network, post_id)) + len(list(db.execute(GET_LIKES_FRESH, (network, post_id))))
