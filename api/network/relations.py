"""Follower relations (both directions, as in the seed) and follow / unfollow, which keep the counts, the
rankings' source rows, the celebrity set and the home caches right."""

from __future__ import annotations

from typing import Any

from api.db import Database, Statement
from api.network import accounts, timelines
from api.network.posts import posts_of_author
from api.network.settings import network_settings

PUT_RELATION = Statement(
    "INSERT INTO follower_relations_by_account (network, account_id, rel_type, target_id, target_username) "
    "VALUES (?, ?, ?, ?, ?)")
DELETE_RELATION = Statement(
    "DELETE FROM follower_relations_by_account WHERE network = ? AND account_id = ? AND rel_type = ? "
    "AND target_id = ?")
COUNT_RELATIONS = Statement(
    "SELECT COUNT(*) AS n FROM follower_relations_by_account WHERE network = ? AND account_id = ? "
    "AND rel_type = ?")
LIST_RELATIONS = Statement(
    "SELECT target_id, target_username FROM follower_relations_by_account WHERE network = ? AND account_id = ? "
    "AND rel_type = ?")
HAS_RELATION = Statement(
    "SELECT target_id FROM follower_relations_by_account WHERE network = ? AND account_id = ? AND rel_type = ? "
    "AND target_id = ?")


def count_relations(db: Database, network: str, account_id: int, rel_type: str) -> int:
    return db.execute(COUNT_RELATIONS, (network, account_id, rel_type), timeout=30).one().n


def list_relations(db: Database, network: str, account_id: int, rel_type: str, limit: int
                   ) -> list[dict[str, Any]]:
    rows = db.execute(LIST_RELATIONS, (network, account_id, rel_type), fetch_size=min(limit, 5000))
    out = []
    for r in rows:
        out.append({"account_id": r.target_id, "username": r.target_username})
        if len(out) >= limit:
            break
    return out


def follows(db: Database, network: str, follower_id: int, followee_id: int) -> bool:
    return db.execute(HAS_RELATION, (network, follower_id, "follows", followee_id)).one() is not None


def _recount(db: Database, network: str, follower: dict[str, Any], followee: dict[str, Any]) -> None:
    ns = network_settings()
    before = followee["follower_count"]
    accounts.set_follower_count(db, ns, network, followee, count_relations(db, network, followee["account_id"],
                                                                              "follower"))
    follows_count = count_relations(db, network, follower["account_id"], "follows")
    accounts.set_follows_count(db, network, follower["account_id"], follows_count)
    follower["follows_count"] = follows_count
    if ns.is_celebrity(before) and not ns.is_celebrity(followee["follower_count"]):
        _stop_merging(db, network, followee)


def _stop_merging(db: Database, network: str, author: dict[str, Any]) -> None:
    """An author fell below the hybrid threshold: its followers' caches lack its posts, so fan them out now
    (rows older than a cache's cutoff are ignored by reads, so adding the newest `cap` is enough)."""
    ns = network_settings()
    for post in posts_of_author(db, network, author["account_id"], ns.cache_cap):
        timelines.fan_out(db, network, post, author_followers=author["follower_count"])


def follow(db: Database, network: str, follower: dict[str, Any], followee: dict[str, Any]) -> bool:
    """follower starts following followee; returns False when it already did (nothing changes)."""
    # Rows and counts are (re)written even when the relation exists: a retry repairs a half-done follow.
    existed = follows(db, network, follower["account_id"], followee["account_id"])
    db.execute(PUT_RELATION, (network, followee["account_id"], "follower", follower["account_id"],
                              follower["username"]))
    db.execute(PUT_RELATION, (network, follower["account_id"], "follows", followee["account_id"],
                              followee["username"]))
    _recount(db, network, follower, followee)
    if not existed and followee["account_id"] not in accounts.celebrities(db, network_settings(), network):
        timelines.add_author_to_cache(db, network, follower["account_id"], followee["account_id"])
    return not existed


def unfollow(db: Database, network: str, follower: dict[str, Any], followee: dict[str, Any]) -> bool:
    existed = follows(db, network, follower["account_id"], followee["account_id"])
    db.execute(DELETE_RELATION, (network, follower["account_id"], "follows", followee["account_id"]))
    db.execute(DELETE_RELATION, (network, followee["account_id"], "follower", follower["account_id"]))
    _recount(db, network, follower, followee)
    # The unfollowed author's posts must leave the cache and older posts of others come back in: rebuild.
    if existed:
        timelines.invalidate_cache(db, network, follower["account_id"])
    return existed
