"""Q6 term index: term_postings (the posts of a term, in buckets of 50,000), term_counts (postings per term),
and for common terms a maintained candidate list of their most-liked posts (term_top_posts, term_top_state).

Read plan (every read bounded):
- A query's terms are looked up in term_counts; the rarest term drives.
- A rare driver (at most RARE_POSTINGS postings) is read whole: one or a few partitions of at most
  RARE_POSTINGS rows; rows are kept when the post holds every other term, ranked by the like count on the
  row, and the leading ones are confirmed against the post's published count (a confirmed answer is exact).
- A common driver is answered from its top list: every post of the term with at least `floor` likes (kept so
  by each like). When at least `limit` candidates holding every term reach the floor, they are the answer,
  exactly. When the floor is 1, posts without likes rank by time: the newest postings fill the page. Otherwise
  (a common term without a built list, or unlikes that left too few above the floor) the driver's newest
  SCAN_BUDGET postings are scanned and the answer is marked inexact; `chronicle network index-terms` rebuilds.
Likes are a plain column of a posting (overwritten by a like, never part of a key), so a like moves no row.
Ranking: likes descending, then newest post first (posted_at, post_id descending).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.cluster import ResponseFuture
from cassandra.query import UNSET_VALUE

from api import partitions
from api.db import Database, Params, Statement
from api.network.tokens import index_terms, query_terms
from api.network.values import Post

TABLES = frozenset({"term_postings", "term_counts", "term_top_posts", "term_top_state"})
POSTING_BUCKET = 50_000  # postings per partition of term_postings
RARE_POSTINGS = 2_000  # a driver term with at most this many postings is read whole
TOP_K = 500  # a rebuilt top list keeps at most this many posts (then grows as posts reach the floor)
SCAN_BUDGET = 20_000  # postings scanned when a common term cannot be answered from its top list
TOP_TTL = 30 * 24 * 3600  # old generations of a top list expire (no deletes)
MAX_QUERY_CHARS = 200

_POSTING_COLS = "posted_at, post_id, author_id, author_username, original_author, content, like_count"
PUT_POSTING = Statement(
    "INSERT INTO term_postings (network, term, bucket, posted_at, post_id, author_id, author_username, "
    "original_author, content, like_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
# A like publishes the count it read with the time it read it (USING TIMESTAMP): of two racing likes, the
# later read (which saw the other's increment) wins, whatever order the writes arrive in.
SET_POSTING_LIKES = Statement(
    "UPDATE term_postings USING TIMESTAMP ? SET like_count = ? WHERE network = ? AND term = ? AND bucket = ? "
    "AND posted_at = ? AND post_id = ?")
DELETE_POSTING = Statement(
    "DELETE FROM term_postings WHERE network = ? AND term = ? AND bucket = ? AND posted_at = ? AND post_id = ?")
POSTINGS = Statement(f"SELECT {_POSTING_COLS} FROM term_postings WHERE network = ? AND term = ? AND bucket = ? "
                     "LIMIT ?")
ADD_POSTINGS = Statement("UPDATE term_counts SET postings = postings + ? WHERE network = ? AND term = ?",
                         idempotent=False)
GET_POSTINGS = Statement("SELECT postings FROM term_counts WHERE network = ? AND term = ?",
                         consistency=ConsistencyLevel.LOCAL_QUORUM)
PUT_TOP = Statement(
    "INSERT INTO term_top_posts (network, term, generation, post_id, posted_at, author_id, author_username, "
    "original_author, content, like_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?")
PUT_TOP_LIKED = Statement(
    "INSERT INTO term_top_posts (network, term, generation, post_id, posted_at, author_id, author_username, "
    "original_author, content, like_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ? AND TIMESTAMP ?")
SET_TOP_LIKES = Statement(
    "UPDATE term_top_posts USING TTL ? AND TIMESTAMP ? SET like_count = ? WHERE network = ? AND term = ? "
    "AND generation = ? AND post_id = ?")
DELETE_TOP = Statement(
    "DELETE FROM term_top_posts WHERE network = ? AND term = ? AND generation = ? AND post_id = ?")
TOP_POSTS = Statement(f"SELECT {_POSTING_COLS} FROM term_top_posts WHERE network = ? AND term = ? "
                      "AND generation = ?")
GET_TOP_STATES = Statement(  # a handful of terms (a post's, a query's): one request, not one per term
    "SELECT term, generation, like_floor, top_entries, postings_at_build FROM term_top_state WHERE network = ? "
    "AND term IN ?", name="SELECT term_top_state (some)", consistency=ConsistencyLevel.LOCAL_QUORUM)
PUT_TOP_STATE = Statement(
    "INSERT INTO term_top_state (network, term, generation, like_floor, top_entries, postings_at_build, built_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)")

LikeCounts = Callable[[Iterable[int]], dict[int, int]]  # post ids -> like count of those that exist


@dataclasses.dataclass(frozen=True)
class TopState:
    generation: int
    floor: int
    entries: int
    postings_at_build: int


@dataclasses.dataclass
class Found:
    posts: list[Post]
    exact: bool
    rebuild: str | None = None  # the driving term, when its top list is missing or outgrown (a job rebuilds it)


def _u(value: Any) -> Any:
    return UNSET_VALUE if value is None else value


def parse_query(q: str) -> list[str]:
    """The distinct terms of a query, in the order given (a query without any term matches nothing)."""
    return query_terms(q)


def _rank(p: Post) -> tuple:
    return (-p.like_count, -p.posted_at.timestamp(), -p.post_id)


# -- writes ----------------------------------------------------------------------------------------------------
def bucket_of(posting_number: int) -> int:
    return posting_number // POSTING_BUCKET


def term_counts(db: Database, network: str, terms: Iterable[str]) -> dict[str, int]:
    futures = {t: db.execute_async(GET_POSTINGS, (network, t)) for t in dict.fromkeys(terms)}
    out = {}
    for term, future in futures.items():
        row = future.result().one()
        out[term] = (row.postings or 0) if row is not None else 0
    return out


def posting_writes(network: str, post: Post, buckets: dict[str, int]) -> list[tuple[Statement, Params]]:
    """The postings of a post, one per term, in the given buckets."""
    return [(PUT_POSTING, (network, term, bucket, post.posted_at, post.post_id, post.author_id,
                           _u(post.author_username), _u(post.original_author), _u(post.content), post.like_count))
            for term, bucket in sorted(buckets.items())]


def count_writes(network: str, counts: dict[str, int]) -> list[tuple[Statement, Params]]:
    """Add to the postings counters of terms (new posts; bulk loads add their totals)."""
    return [(ADD_POSTINGS, (n, network, term)) for term, n in counts.items() if n]


def index_post(db: Database, network: str, post: Post) -> tuple[dict[str, int], list[str]]:
    """Index a new post: each term's posting goes into the bucket of the term's posting number, and the
    counters move. Returns term -> bucket (kept on the post, where a like finds its postings) and the terms
    whose top list should be (re)built now that they grew (see `grown`)."""
    terms = sorted(index_terms(post.content))
    counts = term_counts(db, network, terms)
    buckets = {t: bucket_of(counts[t]) for t in terms}
    db.execute_many(posting_writes(network, post, buckets) + count_writes(network, dict.fromkeys(terms, 1)))
    return buckets, [t for t in terms if grown(counts[t] + 1)]


def grown(postings: int) -> bool:
    """A term reaching this many postings asks for a top-list job: when it stops being rare, then at every power
    of two (the job itself decides with `needs_top`). Counters read by racing posts may skip a value; a search
    that finds the list missing or outgrown asks too."""
    return postings == RARE_POSTINGS + 1 or (postings > RARE_POSTINGS and postings & (postings - 1) == 0)


def like_writes(network: str, post: Post, buckets: dict[str, int], count: int,
                tops: dict[str, TopState], read_at: int) -> list[tuple[Statement, Params]]:
    """After a like or unlike: the count (read from the counter at `read_at`, microseconds) on every posting of
    the post, and on (or into) the top list of each common term where the post reaches the floor."""
    writes: list[tuple[Statement, Params]] = [
        (SET_POSTING_LIKES, (read_at, count, network, term, bucket, post.posted_at, post.post_id))
        for term, bucket in sorted(buckets.items())]
    for term, state in tops.items():
        if count >= state.floor:
            writes.append((PUT_TOP_LIKED, (network, term, state.generation, post.post_id, post.posted_at,
                                           post.author_id, _u(post.author_username), _u(post.original_author),
                                           _u(post.content), count, TOP_TTL, read_at)))
        else:  # a post that fell below the floor keeps its row, with its count: readers check the floor
            writes.append((SET_TOP_LIKES, (TOP_TTL, read_at, count, network, term, state.generation, post.post_id)))
    return writes


def top_states(db: Database, network: str, terms: Iterable[str]) -> dict[str, TopState]:
    """The current top list of each term that has one (common terms)."""
    return top_states_from(start_top_states(db, network, terms))


def start_top_states(db: Database, network: str, terms: Iterable[str]) -> ResponseFuture | None:
    wanted = sorted(set(terms))
    return db.execute_async(GET_TOP_STATES, (network, wanted)) if wanted else None


def top_states_from(future: ResponseFuture | None) -> dict[str, TopState]:
    if future is None:
        return {}
    return {row.term: TopState(row.generation, row.like_floor, row.top_entries or 0, row.postings_at_build or 0)
            for row in future.result()}


def delete_writes(network: str, post: Post, buckets: dict[str, int], tops: dict[str, TopState]
                  ) -> list[tuple[Statement, Params]]:
    """Remove a post from the index (one row per term, plus its top-list rows)."""
    return ([(DELETE_POSTING, (network, t, b, post.posted_at, post.post_id)) for t, b in sorted(buckets.items())]
            + [(DELETE_TOP, (network, t, s.generation, post.post_id)) for t, s in tops.items()])


# -- reads -----------------------------------------------------------------------------------------------------
def _postings(db: Database, network: str, term: str, buckets: Iterable[int], limit: int) -> list[Post]:
    futures = [db.execute_async(POSTINGS, (network, term, b, limit)) for b in buckets]
    return [Post.from_row(r) for f in futures for r in f.result() if r.author_id is not None]


def _holding(rows: list[Post], terms: list[str]) -> list[Post]:
    wanted = set(terms)
    return [p for p in rows if wanted <= index_terms(p.content)]


def _confirmed_top(rows: list[Post], like_counts: LikeCounts, limit: int) -> list[Post]:
    """The top `limit` by (likes, newest), each confirmed against the post's published like count: a row whose
    count changed since is re-ranked with the confirmed count; a post that is gone is dropped."""
    pool = sorted({p.post_id: p for p in rows}.values(), key=_rank)
    confirmed: set[int] = set()
    while True:
        todo = [p for p in pool[:limit] if p.post_id not in confirmed]
        if not todo:
            return pool[:limit]
        current = like_counts(p.post_id for p in todo)
        gone = {p.post_id for p in todo if p.post_id not in current}
        fixed = {p.post_id: p.with_likes(current[p.post_id]) for p in todo if p.post_id in current}
        confirmed.update(fixed)
        pool = sorted((fixed.get(p.post_id, p) for p in pool if p.post_id not in gone), key=_rank)


def search(db: Database, network: str, terms: list[str], like_counts: LikeCounts, limit: int = 25) -> Found:
    """The `limit` most-liked posts holding every term (ties: newest first)."""
    if not terms:
        return Found([], True)
    tops_f = start_top_states(db, network, terms)  # with the counts: one round for both
    counts = term_counts(db, network, terms)
    if min(counts.values()) == 0:
        return Found([], True)
    driver = min(terms, key=lambda t: (counts[t], t))
    n = counts[driver]
    if n <= RARE_POSTINGS:
        rows = _postings(db, network, driver, range(bucket_of(n - 1) + 1), RARE_POSTINGS + 1)
        return Found(_confirmed_top(_holding(rows, terms), like_counts, limit), True)
    state = top_states_from(tops_f).get(driver)
    candidates: list[Post] = []
    if state is not None:
        rows = db.execute_async(TOP_POSTS, (network, driver, state.generation)).result()
        tops = [Post.from_row(r) for r in rows if r.author_id is not None]
        candidates = _holding(tops, terms) if len(terms) > 1 else tops
        # The rows' like counts are kept by every like; only the leaders are confirmed against the posts.
        above = [p for p in candidates if p.like_count >= state.floor]
        if len(above) >= limit:
            top = _confirmed_top(above, like_counts, limit)
            if len(top) == limit and top[-1].like_count >= state.floor:
                return Found(top, True)
        if state.floor <= 1 and len(terms) == 1:
            # Every liked post is a candidate; the rest have no likes and rank by time: the newest postings.
            liked = {p.post_id for p in above}
            newest = _postings(db, network, driver, _newest_buckets(n), limit + len(liked) + 1)
            top = _confirmed_top(above + [p for p in newest if p.post_id not in liked], like_counts, limit)
            return Found(top, True)
    scanned = _postings(db, network, driver, _newest_buckets(n, SCAN_BUDGET), POSTING_BUCKET)[:SCAN_BUDGET]
    return Found(_confirmed_top(candidates + _holding(scanned, terms), like_counts, limit), False,
                 driver if needs_top(n, state) else None)


def _newest_buckets(postings: int, rows: int = 1) -> list[int]:
    """The newest buckets of a term holding at least `rows` postings (indexing order is time order)."""
    last = bucket_of(postings - 1)
    span = max(1, -(-rows // POSTING_BUCKET)) + 1
    return list(range(last, max(-1, last - span), -1))


# -- top lists (a job) -----------------------------------------------------------------------------------------
def rebuild_top(db: Database, network: str, term: str, like_counts: LikeCounts, *, k: int | None = None,
                dry_run: bool = False) -> dict[str, Any]:
    """Rebuild a term's top list: read all its postings, confirm the like counts of the liked ones, keep every
    post at or above the lowest floor (>= 1) that keeps at most `k`, into a new generation; then switch the
    state to it. Proportional to the term's postings: a job, never a request."""
    started = time.perf_counter()
    k = k or TOP_K
    n = term_counts(db, network, [term])[term]
    rows = _postings(db, network, term, range(bucket_of(max(n - 1, 0)) + 1), POSTING_BUCKET + 1) if n else []
    hinted = [p for p in rows if p.like_count > 0]
    current = like_counts(p.post_id for p in hinted)
    liked = sorted((p.with_likes(current[p.post_id]) for p in hinted if current.get(p.post_id, 0) > 0),
                   key=_rank)
    floor = 1
    if len(liked) > k:
        floor = liked[k - 1].like_count + 1  # every post at or above the floor is kept: at most k
    kept = [p for p in liked if p.like_count >= floor]
    generation = time.time_ns() // 1000
    summary = {"term": term, "postings": n, "liked": len(liked), "floor": floor, "entries": len(kept)}
    if dry_run:
        return {"dry_run": True, **summary}
    db.execute_many((PUT_TOP, (network, term, generation, p.post_id, p.posted_at, p.author_id, _u(p.author_username),
                               _u(p.original_author), _u(p.content), p.like_count, TOP_TTL)) for p in kept)
    db.execute(PUT_TOP_STATE, (network, term, generation, floor, len(kept), n, datetime.now(UTC)))
    return {**summary, "generation": generation, "seconds": round(time.perf_counter() - started, 3)}


def needs_top(postings: int, state: TopState | None) -> bool:
    """A common term without a top list, or one whose list has grown well past what was built, needs a rebuild."""
    if postings <= RARE_POSTINGS:
        return False
    return state is None or postings >= 2 * max(state.postings_at_build, 1)


def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: partitions.Progress | None = None) -> dict[str, int]:
    """Delete every partition of this module's tables that belongs to `network` (admin; see api/partitions.py)."""
    return partitions.drop(db, TABLES, "network", network, dry_run=dry_run, progress=progress)
