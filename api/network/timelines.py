"""Home timelines (Q4, Q5): home_timeline_by_account caches fed by fan-out on write, home_cache_state, and the
hybrid merge of authors above the follower threshold at read time.

Invariant of a built cache: it holds every post, newer than or as new as `cutoff`, of every non-celebrity
account the owner follows (a `complete` cache holds all of them). Fan-out and follow only add posts; delete
and unfollow remove them; like updates the count in place. Reads ignore rows older than the cutoff, rows
of celebrity authors (their posts come from posts_by_author) and rows without an author (a like update that
reached a cache not holding the post). When fewer valid rows remain than a page needs, the cache is rebuilt,
so answers equal "the newest `cap` posts of the followed accounts" at all times.
"""

from __future__ import annotations

import heapq
from datetime import UTC, datetime
from typing import Any

from cassandra.concurrent import execute_concurrent
from cassandra.query import UNSET_VALUE, BatchStatement, BatchType

from api.db import Database, Statement
from api.network import accounts
from api.network.common import to_utc
from api.network.posts import POST_MONTHS, POSTS_OF_MONTH, post_dict, posts_of_author
from api.network.settings import NetworkSettings, network_settings

PUT_CACHE = Statement(
    "INSERT INTO home_timeline_by_account (network, account_id, posted_at, post_id, author_id, author_username, "
    "content, language, like_count, share_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?")
SET_CACHE_LIKES = Statement(
    "UPDATE home_timeline_by_account USING TTL ? SET like_count = ? WHERE network = ? AND account_id = ? "
    "AND posted_at = ? AND post_id = ?")
DELETE_CACHE_ROW = Statement(
    "DELETE FROM home_timeline_by_account WHERE network = ? AND account_id = ? AND posted_at = ? AND post_id = ?")
DELETE_CACHE = Statement("DELETE FROM home_timeline_by_account WHERE network = ? AND account_id = ?")
READ_CACHE = Statement(
    "SELECT posted_at, post_id, author_id, author_username, content, language, like_count, share_count "
    "FROM home_timeline_by_account WHERE network = ? AND account_id = ? LIMIT ?")
GET_STATE = Statement(
    "SELECT built_at, cutoff, complete, threshold, cap FROM home_cache_state WHERE network = ? AND account_id = ?")
PUT_STATE = Statement(
    "INSERT INTO home_cache_state (network, account_id, built_at, cutoff, complete, threshold, cap) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) USING TTL ?")
DELETE_STATE = Statement("DELETE FROM home_cache_state WHERE network = ? AND account_id = ?")
RELATIONS = Statement(
    "SELECT target_id FROM follower_relations_by_account WHERE network = ? AND account_id = ? AND rel_type = ?")
FOLLOWS_AMONG = Statement(
    "SELECT target_id FROM follower_relations_by_account WHERE network = ? AND account_id = ? "
    "AND rel_type = 'follows' AND target_id IN ?")

_SLACK = 25  # extra rows read so a few ignorable rows do not force a rebuild


def _u(value: Any) -> Any:
    return UNSET_VALUE if value is None else value


def write_grouped(db: Database, statement: Statement, params: list[tuple], ns: NetworkSettings,
                  partition_of: Any = None) -> int:
    """Run many writes as unlogged batches of `ns.fanout_batch` rows whose partitions live on the same replica
    (so a batch is one local mutation per partition, not a coordinator fan-out), `fanout_concurrency` batches
    in flight. Cuts the per-statement cost of the driver and the node about threefold on a fan-out."""
    if not params:
        return 0
    if ns.fanout_batch <= 1:
        return db.execute_many(statement, params, concurrency=ns.fanout_concurrency)
    prepared = db.prepared(statement)
    groups: dict[Any, list[tuple]] = {}
    hosts = db.cluster.metadata.all_hosts()
    if len(hosts) <= 1:
        groups[None] = params
    else:
        keyspace = db.keyspace
        for p in params:
            replicas = db.cluster.metadata.get_replicas(keyspace, prepared.bind(p).routing_key)
            groups.setdefault(replicas[0].host_id if replicas else None, []).append(p)

    def batches():
        for rows in groups.values():
            for i in range(0, len(rows), ns.fanout_batch):
                batch = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=prepared.consistency_level)
                for p in rows[i:i + ns.fanout_batch]:
                    batch.add(prepared, p)
                yield batch, None

    for _ in execute_concurrent(db.session, batches(), concurrency=max(1, ns.fanout_concurrency // 4),
                                raise_on_first_error=True, results_generator=True):
        pass
    return len(params)


def followers_of(db: Database, network: str, account_id: int) -> list[int]:
    """Follower ids, read 5,000 per page. Collected into a list first: the concurrent writer pulls its
    parameters on the driver's I/O thread, where fetching the next page would deadlock."""
    rows = db.execute(RELATIONS, (network, account_id, "follower"), fetch_size=5000, timeout=60)
    return [row.target_id for row in rows]


def follows_of(db: Database, network: str, account_id: int) -> list[int]:
    return [r.target_id for r in db.execute(RELATIONS, (network, account_id, "follows"), fetch_size=5000)]


def _cache_params(network: str, owner: int, post: dict[str, Any], ttl: int) -> tuple:
    return (network, owner, post["posted_at"], post["post_id"], post["author_id"], _u(post.get("author_username")),
            _u(post.get("content")), _u(post.get("language")), post.get("like_count") or 0,
            post.get("share_count") or 0, ttl)


def fan_out(db: Database, network: str, post: dict[str, Any], *, author_followers: int,
            ns: NetworkSettings | None = None) -> int:
    """Q5: write the post into the home cache of every follower of its author, with concurrent prepared
    writes. Authors above the hybrid threshold are skipped: their posts are merged at read time."""
    ns = ns or network_settings()
    # The celebrity table, not just the count: it also records when the threshold changed, which is what
    # keeps caches built under another threshold from being trusted.
    if ns.is_celebrity(author_followers) or post["author_id"] in accounts.celebrities(db, ns, network):
        return 0
    params = [_cache_params(network, f, post, ns.cache_ttl) for f in followers_of(db, network, post["author_id"])]
    return write_grouped(db, PUT_CACHE, params, ns)


def remove_from_caches(db: Database, network: str, post: dict[str, Any]) -> int:
    ns = network_settings()
    params = [(network, f, post["posted_at"], post["post_id"]) for f in followers_of(db, network, post["author_id"])]
    return write_grouped(db, DELETE_CACHE_ROW, params, ns)


def update_like_count(db: Database, network: str, post: dict[str, Any], count: int) -> int:
    """Carry a new like count into the followers' caches (celebrity posts are not cached: nothing to do)."""
    ns = network_settings()
    if post["author_id"] in accounts.celebrities(db, ns, network):
        return 0
    params = [(ns.cache_ttl, count, network, f, post["posted_at"], post["post_id"])
              for f in followers_of(db, network, post["author_id"])]
    return write_grouped(db, SET_CACHE_LIKES, params, ns)


def newest_posts_of(db: Database, network: str, authors: list[int], cap: int) -> tuple[list[dict[str, Any]], bool]:
    """The newest `cap` posts (plus any tied with the last one) over several authors, and whether that is
    all of their posts. Month buckets are read newest month first, all authors of a month concurrently, and
    reading stops once `cap` posts are in hand: older months hold only older posts."""
    month_futures = [(a, db.execute_async(POST_MONTHS, (network, a))) for a in authors]
    by_month: dict[str, list[int]] = {}
    for author, future in month_futures:
        for row in future.result():
            by_month.setdefault(row.month, []).append(author)
    collected: list[dict[str, Any]] = []
    months = sorted(by_month, reverse=True)
    complete = True
    for i, month in enumerate(months):
        futures = [(a, db.execute_async(POSTS_OF_MONTH, (network, a, month, 100_000))) for a in by_month[month]]
        for author, future in futures:
            collected.extend(post_dict(r, author) for r in future.result())
        if len(collected) >= cap and i + 1 < len(months):
            complete = False
            break
    collected.sort(key=lambda p: (p["posted_at"], p["post_id"]), reverse=True)
    if len(collected) > cap:
        complete = False
        last = collected[cap - 1]["posted_at"]
        collected = [p for p in collected if p["posted_at"] >= last]
    return collected, complete


def _threshold(ns: NetworkSettings) -> int:
    return ns.hybrid_threshold if ns.hybrid else 0


def init_cache(db: Database, network: str, account_id: int, ns: NetworkSettings | None = None) -> dict[str, Any]:
    """Build one account's home cache from scratch (runtime_scripts/init_cache_for_user.py)."""
    ns = ns or network_settings()
    celebs = accounts.celebrities(db, ns, network)
    authors = [a for a in follows_of(db, network, account_id) if a not in celebs]
    posts, complete = newest_posts_of(db, network, authors, ns.cache_cap)
    cutoff = None if complete or not posts else posts[-1]["posted_at"]
    db.execute(DELETE_CACHE, (network, account_id))
    # One partition: batches of its rows are single mutations.
    written = write_grouped(db, PUT_CACHE, [_cache_params(network, account_id, p, ns.cache_ttl) for p in posts], ns)
    now = datetime.now(UTC)
    state = {"built_at": now.replace(microsecond=now.microsecond // 1000 * 1000), "cutoff": cutoff,
             "complete": complete, "threshold": _threshold(ns), "cap": ns.cache_cap}
    # The state expires a little before the rows it describes: a cache is never read with rows missing.
    db.execute(PUT_STATE, (network, account_id, state["built_at"], _u(cutoff), complete, state["threshold"],
                           ns.cache_cap, max(60, ns.cache_ttl - 300)))
    return {**state, "entries": written, "followed_authors": len(authors)}


def add_author_to_cache(db: Database, network: str, account_id: int, author_id: int) -> int:
    """After a follow: put the new followee's recent posts into the follower's cache, if it has one."""
    ns = network_settings()
    state = db.execute(GET_STATE, (network, account_id)).one()
    if state is None:
        return 0  # no cache yet: it is built, complete, on the first read
    cutoff = to_utc(state.cutoff) if state.cutoff is not None and not state.complete else None
    posts = posts_of_author(db, network, author_id, ns.cache_cap)
    if state.complete and len(posts) >= ns.cache_cap:
        # The followee may have older posts than the ones added: the cache is no longer complete.
        invalidate_cache(db, network, account_id)
        return 0
    params = [_cache_params(network, account_id, p, ns.cache_ttl) for p in posts
              if cutoff is None or p["posted_at"] >= cutoff]
    return db.execute_many(PUT_CACHE, params, concurrency=ns.fanout_concurrency)


def invalidate_cache(db: Database, network: str, account_id: int) -> None:
    """After an unfollow: drop the cache state so the next read rebuilds it without the old followee."""
    db.execute(DELETE_STATE, (network, account_id))


def _state_ok(state: Any, ns: NetworkSettings, since: datetime) -> bool:
    """Built for the threshold and cap in force, and after the threshold last changed."""
    return (state is not None and (state.threshold or 0) == _threshold(ns) and state.cap == ns.cache_cap
            and to_utc(state.built_at) >= since)


def home_of(db: Database, network: str, account_id: int, order: str = "newest",
            ns: NetworkSettings | None = None) -> dict[str, Any] | None:
    """Q4 by account id, the account read concurrently with the cache; None when the account is unknown."""
    account_f = db.execute_async(accounts.GET_ACCOUNT, (network, account_id))
    ns = ns or network_settings()
    limit = (ns.cache_cap if order == "likes" else ns.page_size) + _SLACK
    state_f = db.execute_async(GET_STATE, (network, account_id))
    rows_f = db.execute_async(READ_CACHE, (network, account_id, limit))
    celebs_f = db.execute_async(accounts.CELEBRITIES, (network,))
    row = account_f.result().one()
    if row is None:
        return None
    account = {"account_id": row.account_id, "username": row.username,
               "follower_count": row.follower_count or 0, "follows_count": row.follows_count or 0}
    return home(db, network, account, order, ns, _pending=(state_f, rows_f, celebs_f))


def home(db: Database, network: str, account: dict[str, Any], order: str = "newest",
         ns: NetworkSettings | None = None, _pending: tuple | None = None) -> dict[str, Any]:
    """Q4: the account's counts and the 25 newest, or the 25 most-liked, posts of its home timeline (the
    newest `cap` posts of the accounts it follows)."""
    ns = ns or network_settings()
    account_id = account["account_id"]
    needed = ns.cache_cap if order == "likes" else ns.page_size
    limit = needed + _SLACK
    # All first reads are in flight together: one round trip of latency, not four.
    state_f, rows_f, celebs_f = _pending or (db.execute_async(GET_STATE, (network, account_id)),
                                             db.execute_async(READ_CACHE, (network, account_id, limit)),
                                             db.execute_async(accounts.CELEBRITIES, (network,)))
    celebs, since = accounts.celebrity_state(db, ns, network, celebs_f)
    state = state_f.result().one()
    rows = list(rows_f.result())
    rebuilt = False
    if not _state_ok(state, ns, since):
        state, rows = _rebuild(db, network, account_id, limit, ns)
        rebuilt = True
    valid = _valid_rows(rows, state, celebs)
    if len(valid) < needed and not (state.complete and len(rows) < limit) and not rebuilt:
        # Deletes, unfollows or stray rows left the cache short of a page: rebuild it exactly.
        state, rows = _rebuild(db, network, account_id, limit, ns)
        rebuilt = True
        valid = _valid_rows(rows, state, celebs)
    merged = valid
    if celebs:
        ids = list(celebs)
        followed = ([r.target_id for r in db.execute(FOLLOWS_AMONG, (network, account_id, ids))]
                    if len(ids) <= 100 else [a for a in follows_of(db, network, account_id) if a in celebs])
        for celeb in followed:
            merged = merged + posts_of_author(db, network, celeb, needed)
    window = heapq.nlargest(ns.cache_cap, merged, key=lambda p: (p["posted_at"], p["post_id"]))
    if order == "likes":
        page = heapq.nsmallest(ns.page_size, window, key=lambda p: (-p["like_count"], -p["post_id"]))
    else:
        page = window[:ns.page_size]
    return {"account": account, "order": order, "posts": page, "cache_rebuilt": rebuilt,
            "merged_celebrities": len(merged) - len(valid)}


def _rebuild(db: Database, network: str, account_id: int, limit: int, ns: NetworkSettings) -> tuple[Any, list]:
    init_cache(db, network, account_id, ns)
    state = db.execute(GET_STATE, (network, account_id)).one()
    return state, list(db.execute(READ_CACHE, (network, account_id, limit)))


def _valid_rows(rows: list, state: Any, celebs: dict[int, int]) -> list[dict[str, Any]]:
    cutoff = to_utc(state.cutoff) if state.cutoff is not None and not state.complete else None
    valid = []
    for r in rows:
        if r.author_id is None or r.author_id in celebs:
            continue  # a stray like update, or an author now merged at read time
        p = post_dict_from_cache(r)
        if cutoff is None or p["posted_at"] >= cutoff:
            valid.append(p)
    return valid


def post_dict_from_cache(row: Any) -> dict[str, Any]:
    return {"post_id": row.post_id, "author_id": row.author_id, "author_username": row.author_username,
            "posted_at": to_utc(row.posted_at), "content": row.content, "language": row.language,
            "like_count": row.like_count or 0, "share_count": row.share_count or 0}

