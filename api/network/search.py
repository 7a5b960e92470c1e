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

Top lists never expire while current (no TTL): a search asks for a rebuild when a list is missing, outgrown or
older than `term_top_max_age`; a rebuild streams the term's postings bucket by bucket through a top-K heap, writes
a new generation, switches the state to it, and deletes the generation the previous rebuild replaced (a reader
that read the state just before a switch still finds its generation's rows).
"""

from __future__ import annotations

import dataclasses
import heapq
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
LEGACY_TOP_TTL = 30 * 24 * 3600  # rows of lists built before cql/0150 expire this long after they were written
COUNT_SHARDS = 16  # cells of a term's postings counter: a post adds to one (post id % 16), a read sums them
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
# A rebuild streams the postings without their text (5x less to transfer for a word in 50M posts), and reads
# whole rows only for the posts it keeps.
POSTING_LIKES = Statement("SELECT posted_at, post_id, author_id, like_count FROM term_postings WHERE network = ? "
                          "AND term = ? AND bucket = ?", name="SELECT term_postings (like counts)")
GET_POSTING = Statement(f"SELECT {_POSTING_COLS} FROM term_postings WHERE network = ? AND term = ? AND bucket = ? "
                        "AND posted_at = ? AND post_id = ?", name="SELECT term_postings (one)")
_COUNT_CELLS = ["postings"] + [f"postings_{i}" for i in range(1, COUNT_SHARDS)]
# One statement for every cell: the cells left unset are not touched (no lock, no read-before-write).
ADD_POSTINGS = Statement(f"UPDATE term_counts SET {', '.join(f'{c} = {c} + ?' for c in _COUNT_CELLS)} "
                         "WHERE network = ? AND term = ?", idempotent=False)
GET_POSTINGS = Statement(f"SELECT {', '.join(_COUNT_CELLS)} FROM term_counts WHERE network = ? AND term = ?",
                         consistency=ConsistencyLevel.LOCAL_QUORUM)
# Rows of the current generation carry no TTL: they live until a later rebuild deletes the generation.
PUT_TOP = Statement(
    "INSERT INTO term_top_posts (network, term, generation, post_id, posted_at, author_id, author_username, "
    "original_author, content, like_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
PUT_TOP_LIKED = Statement(
    "INSERT INTO term_top_posts (network, term, generation, post_id, posted_at, author_id, author_username, "
    "original_author, content, like_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?")
SET_TOP_LIKES = Statement(
    "UPDATE term_top_posts USING TIMESTAMP ? SET like_count = ? WHERE network = ? AND term = ? "
    "AND generation = ? AND post_id = ?")
DELETE_TOP = Statement(
    "DELETE FROM term_top_posts WHERE network = ? AND term = ? AND generation = ? AND post_id = ?")
DELETE_TOP_GENERATION = Statement(  # a replaced generation no reader reads any more: one partition tombstone
    "DELETE FROM term_top_posts WHERE network = ? AND term = ? AND generation = ?",
    name="DELETE term_top_posts (generation)")
GET_TOP_POST = Statement(  # the erasure proof
    "SELECT post_id FROM term_top_posts WHERE network = ? AND term = ? AND generation = ? AND post_id = ?",
    name="SELECT term_top_posts (one)")
DELETE_TERM_COUNTS = Statement("DELETE FROM term_counts WHERE network = ? AND term = ?")
DELETE_TOP_STATE = Statement("DELETE FROM term_top_state WHERE network = ? AND term = ?")
TOP_POSTS = Statement(f"SELECT {_POSTING_COLS} FROM term_top_posts WHERE network = ? AND term = ? "
                      "AND generation = ?")
GET_TOP_STATES = Statement(  # a handful of terms (a post's, a query's): one request, not one per term
    "SELECT term, generation, like_floor, top_entries, postings_at_build, built_at, previous_generation "
    "FROM term_top_state WHERE network = ? AND term IN ?", name="SELECT term_top_state (some)",
    consistency=ConsistencyLevel.LOCAL_QUORUM)
PUT_TOP_STATE = Statement(
    "INSERT INTO term_top_state (network, term, generation, like_floor, top_entries, postings_at_build, built_at, "
    "previous_generation) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")

LikeCounts = Callable[[Iterable[int]], dict[int, int]]  # post ids -> like count of those that exist


@dataclasses.dataclass(frozen=True)
class TopState:
    generation: int
    floor: int
    entries: int
    postings_at_build: int
    built_at: float = 0.0  # seconds since the epoch (db.clock) when the generation was built
    previous: int | None = 0  # the generation it replaced (0: none); None: built before cql/0150 (rows with TTL)

    def age(self, now: float) -> float:
        return now - self.built_at


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
        out[term] = sum(v or 0 for v in row) if row is not None else 0
    return out


def posting_writes(network: str, post: Post, buckets: dict[str, int]) -> list[tuple[Statement, Params]]:
    """The postings of a post, one per term, in the given buckets."""
    return [(PUT_POSTING, (network, term, bucket, post.posted_at, post.post_id, post.author_id,
                           _u(post.author_username), _u(post.original_author), _u(post.content), post.like_count))
            for term, bucket in sorted(buckets.items())]


def count_writes(network: str, counts: dict[str, int], shard: int = 0) -> list[tuple[Statement, Params]]:
    """Add to the postings counters of terms, in cell `shard` of each (a new post: its id's; bulk loads add
    their totals to cell 0)."""
    cell = shard % COUNT_SHARDS
    return [(ADD_POSTINGS, (*(n if i == cell else UNSET_VALUE for i in range(len(_COUNT_CELLS))), network, term))
            for term, n in counts.items() if n]


def index_post(db: Database, network: str, post: Post) -> tuple[dict[str, int], list[str]]:
    """Index a new post: each term's posting goes into the bucket of the term's posting number, and the
    counters move. Returns term -> bucket (kept on the post, where a like finds its postings) and the terms
    whose top list should be (re)built now that they grew (see `grown`)."""
    terms = sorted(index_terms(post.content))
    counts = term_counts(db, network, terms)
    buckets = {t: bucket_of(counts[t]) for t in terms}
    db.execute_many(posting_writes(network, post, buckets)
                    + count_writes(network, dict.fromkeys(terms, 1), post.post_id % COUNT_SHARDS))
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
                                           _u(post.content), count, read_at)))
        else:  # a post that fell below the floor keeps its row, with its count: readers check the floor
            writes.append((SET_TOP_LIKES, (read_at, count, network, term, state.generation, post.post_id)))
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
    return {row.term: TopState(row.generation, row.like_floor, row.top_entries or 0, row.postings_at_build or 0,
                               row.built_at.replace(tzinfo=UTC).timestamp() if row.built_at else 0.0,
                               row.previous_generation)
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
    now = db.clock.time()
    state = usable(top_states_from(tops_f).get(driver), now)
    # Missing, outgrown or old: answered from what there is, and a job rebuilds it.
    rebuild = driver if needs_top(n, state, now, db.settings.network.term_top_max_age) else None
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
                return Found(top, True, rebuild)
        if state.floor <= 1 and len(terms) == 1:
            # Every liked post is a candidate; the rest have no likes and rank by time: the newest postings.
            liked = {p.post_id for p in above}
            # (Each of the two newest buckets asked for all it needs: deleted postings cannot leave it short.)
            last = bucket_of(n - 1)
            newest = _postings(db, network, driver, range(last, max(-1, last - 2), -1), limit + len(liked) + 1)
            top = _confirmed_top(above + [p for p in newest if p.post_id not in liked], like_counts, limit)
            return Found(top, True, rebuild)
    scanned = _newest_postings(db, network, driver, n, SCAN_BUDGET)
    return Found(_confirmed_top(candidates + _holding(scanned, terms), like_counts, limit), False, rebuild)


def _newest_postings(db: Database, network: str, term: str, postings: int, budget: int) -> list[Post]:
    """At most `budget` of a term's newest postings (indexing order is time order): the newest bucket holds
    `postings` - its first number; each older bucket is asked only for what the newer ones leave of the budget.
    The reads go out together."""
    futures, left = [], budget
    last = bucket_of(postings - 1)
    for bucket in range(last, -1, -1):
        holds = postings - bucket * POSTING_BUCKET if bucket == last else POSTING_BUCKET
        take = min(left, max(holds, 1))
        futures.append(db.execute_async(POSTINGS, (network, term, bucket, take)))
        left -= take
        if left <= 0:
            break
    return [Post.from_row(r) for f in futures for r in f.result() if r.author_id is not None][:budget]


# -- top lists (a job) -----------------------------------------------------------------------------------------
def usable(state: TopState | None, now: float) -> TopState | None:
    """The state, unless it names a list built before cql/0150 whose rows (TTL 30 days) may be expiring."""
    if state is not None and state.previous is None and state.age(now) > LEGACY_TOP_TTL - 24 * 3600:
        return None
    return state


def needs_top(postings: int, state: TopState | None, now: float, max_age: float) -> bool:
    """A common term needs a rebuild when it has no top list, when its list has grown well past what was built,
    is older than `max_age` seconds (a list only grows between rebuilds: posts reaching the floor join it), or
    was built before cql/0150 (its rows carry a TTL)."""
    if postings <= RARE_POSTINGS:
        return False
    return (state is None or state.previous is None or postings >= 2 * max(state.postings_at_build, 1)
            or state.age(now) >= max_age)


def rebuild_top(db: Database, network: str, term: str, like_counts: LikeCounts, *, k: int | None = None,
                dry_run: bool = False) -> dict[str, Any]:
    """Rebuild a term's top list: stream its postings bucket by bucket (keys and like counts, paged) through a
    heap of the k + 1 most-liked; the floor is one above the (k + 1)-th count (>= 1), so every post at or above
    it is among the k kept (counts confirmed against the posts). Write them into a new generation, switch the
    state to it, then delete the generation the previous rebuild replaced. Memory: k rows, whatever the term's
    postings; time: proportional to them (a job, never a request)."""
    started = time.perf_counter()
    k = k or TOP_K
    n = term_counts(db, network, [term])[term]
    old = top_states(db, network, [term]).get(term)
    heap: list[tuple[tuple, int]] = []  # ((likes, posted_at, post_id), bucket): the least-liked on top
    held: set[int] = set()  # post ids in the heap (a post counted twice by a retry has two postings)
    scanned = 0
    for bucket in range(bucket_of(n - 1) + 1) if n else ():
        for r in db.execute(POSTING_LIKES, (network, term, bucket), fetch_size=5000, timeout=60):
            scanned += 1
            if r.author_id is None or not r.like_count or r.post_id in held:
                continue
            item = ((r.like_count, r.posted_at, r.post_id), bucket)
            if len(heap) <= k:
                heapq.heappush(heap, item)
            elif item[0] > heap[0][0]:
                held.discard(heapq.heapreplace(heap, item)[0][2])
            else:
                continue
            held.add(r.post_id)
    # Posts outside the heap have at most the (k + 1)-th count: below the floor.
    floor = heap[0][0][0] + 1 if len(heap) > k else 1
    current = like_counts(key[2] for key, _b in heap)
    wanted = sorted((item for item in heap if current.get(item[0][2], 0) >= floor), reverse=True)
    futures = [db.execute_async(GET_POSTING, (network, term, b, posted_at, post_id))
               for (_likes, posted_at, post_id), b in wanted]
    kept = [Post.from_row(r).with_likes(current[r.post_id]) for f in futures for r in f.result()
            if r.author_id is not None]
    generation = max(int(db.clock.time() * 1_000_000), old.generation + 1 if old else 0)
    summary = {"term": term, "postings": n, "scanned": scanned, "liked_kept": len(heap), "floor": floor,
               "entries": len(kept)}
    if dry_run:
        return {"dry_run": True, **summary}
    db.execute_many((PUT_TOP, (network, term, generation, p.post_id, p.posted_at, p.author_id,
                               _u(p.author_username), _u(p.original_author), _u(p.content), p.like_count))
                    for p in kept)
    db.execute(PUT_TOP_STATE, (network, term, generation, floor, len(kept), n,
                               datetime.fromtimestamp(db.clock.time(), UTC), old.generation if old else 0))
    if old is not None and old.previous:
        # Replaced one rebuild ago: no reader holds its state any more (a reader reads the state and then
        # its generation within one request).
        db.execute(DELETE_TOP_GENERATION, (network, term, old.previous))
    return {**summary, "generation": generation, "seconds": round(time.perf_counter() - started, 3)}


def drop_network(db: Database, network: str, *, dry_run: bool = False,
                 progress: partitions.Progress | None = None) -> dict[str, int]:
    """Delete every partition of this module's tables that belongs to `network` (admin; see api/partitions.py)."""
    return partitions.drop(db, TABLES, "network", network, dry_run=dry_run, progress=progress)


# -- erasure of an account -----------------------------------------------------------------------------------------
def _generations(state: TopState) -> list[int]:
    return [g for g in (state.generation, state.previous) if g]


def erase_post_writes(db: Database, network: str, post: Post, buckets: dict[str, int]
                      ) -> list[tuple[Statement, Params]]:
    """An erased post out of the index: its postings and its rows in the current and the previous top list of
    each of its terms (a previous generation is kept a while for readers that began on it)."""
    tops = top_states(db, network, buckets)
    return ([(DELETE_POSTING, (network, t, b, post.posted_at, post.post_id)) for t, b in sorted(buckets.items())]
            + [(DELETE_TOP, (network, t, g, post.post_id)) for t, s in tops.items() for g in _generations(s)])


def post_rows(db: Database, network: str, post: Post, buckets: dict[str, int]) -> dict[str, int]:
    """Rows left of a post in the index (the erasure proof): its postings, its top-list rows."""
    tops = top_states(db, network, buckets)
    postings = [db.execute_async(GET_POSTING, (network, t, b, post.posted_at, post.post_id))
                for t, b in buckets.items()]
    top = [db.execute_async(GET_TOP_POST, (network, t, g, post.post_id)) for t, s in tops.items()
           for g in _generations(s)]
    return {"term_postings": sum(1 for f in postings if f.result().one() is not None),
            "term_top_posts": sum(1 for f in top if f.result().one() is not None)}



def posts_with_term(db: Database, network: str, term: str) -> list[int]:
    """The ids of every post indexed under a term (all its posting buckets: a term naming one account is rare)."""
    postings = term_counts(db, network, [term])[term]
    if not postings:
        return []
    rows = [db.execute_async(POSTINGS, (network, term, b, POSTING_BUCKET))
            for b in range(bucket_of(postings - 1) + 1)]
    return [r.post_id for f in rows for r in f.result() if r.author_id is not None]


def forget_term_writes(db: Database, network: str, term: str) -> list[tuple[Statement, Params]]:
    """A term that names an erased account (its `@name`, its name), once no posting is left under it: its
    counter, top-list state and top lists go (their keys are the name)."""
    if posts_with_term(db, network, term):
        return []
    state = top_states(db, network, [term]).get(term)
    return ([(DELETE_TOP_GENERATION, (network, term, g)) for g in (_generations(state) if state else [])]
            + [(DELETE_TERM_COUNTS, (network, term)), (DELETE_TOP_STATE, (network, term))])
