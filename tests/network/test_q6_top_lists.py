"""Q6 top lists over time (issue 30): a current list never expires, old lists are rebuilt, a rebuild streams the
postings through a bounded heap, the fallback scan stays within its budget, and a term's counter is spread over
cells. Every answer is compared with the brute-force reference."""

from __future__ import annotations

import dataclasses
import time

import pytest

from api.network import post_search, search
from api.network.tokens import query_terms
from tests.network.helpers import ADMIN

QUERIES = ["the", "love", "the love", "a", "to the"]


@pytest.fixture
def small_lists(monkeypatch):
    """Terms with more than 5 postings are common, lists keep 4 posts, a posting bucket holds 20 rows (set before
    the network is loaded: the loader numbers postings with it)."""
    monkeypatch.setattr(search, "RARE_POSTINGS", 5)
    monkeypatch.setattr(search, "TOP_K", 4)
    monkeypatch.setattr(search, "POSTING_BUCKET", 20)


def _with_network_settings(database, **changes) -> None:
    database.settings = dataclasses.replace(database.settings,
                                            network=dataclasses.replace(database.settings.network, **changes))


def _answers(database, net) -> dict[str, tuple[list[int], bool, str | None]]:
    out = {}
    for q in QUERIES:
        found = post_search.search_posts(database, net.name, query_terms(q))
        out[q] = ([p.post_id for p in found.posts], found.exact, found.rebuild)
    return out


def _generation_rows(database, net, term: str, generation: int) -> list:
    return list(database.execute_raw(
        f"SELECT post_id, TTL(content) AS ttl FROM {database.keyspace}.term_top_posts "
        "WHERE network = %s AND term = %s AND generation = %s", (net.name, term, generation)))


def _recording(monkeypatch, database) -> list[tuple[str, tuple]]:
    calls: list[tuple[str, tuple]] = []
    execute, execute_async = database.execute, database.execute_async
    monkeypatch.setattr(database, "execute", lambda st, params=(), **kw: calls.append((st.name, tuple(params)))
                        or execute(st, params, **kw))
    monkeypatch.setattr(database, "execute_async", lambda st, params=(): calls.append((st.name, tuple(params)))
                        or execute_async(st, params))
    return calls


def test_a_current_top_list_never_expires_and_an_old_one_is_rebuilt(small_lists, fresh_net, client, mdb, clock,
                                                                    monkeypatch):
    """A list older than its max age still answers like the reference (its rows carry no TTL), asks for a rebuild
    (age), and the rebuild that replaces a list deletes only the generation replaced before it."""
    net, ref = fresh_net, fresh_net.ref
    clock.advance(time.time() - clock.time())  # the load's lists were built on the real clock
    _with_network_settings(mdb, term_top_max_age=60.0)
    # A rebuild keeps, post for post, what a brute force keeps: every post of the term at or above the floor
    # (one above the 5th best count); it streams the postings bucket by bucket without their text, and reads
    # whole rows only of the posts it keeps.
    counts = sorted((ref.like_count(p["post_id"]) for p in ref.posts.values()
                     if "the" in query_terms(p["content"]) and ref.like_count(p["post_id"]) > 0), reverse=True)
    assert len(counts) > search.TOP_K  # the floor is above 1
    floor = counts[search.TOP_K] + 1
    want = sorted(p["post_id"] for p in ref.posts.values()
                  if "the" in query_terms(p["content"]) and ref.like_count(p["post_id"]) >= floor)
    with monkeypatch.context() as recording:
        calls = _recording(recording, mdb)
        summary = post_search.rebuild_term_top(mdb, net.name, "the")
    postings = search.term_counts(mdb, net.name, ["the"])["the"]
    assert postings > 3 * search.POSTING_BUCKET and summary["scanned"] == postings
    streamed = [p for name, p in calls if name == "SELECT term_postings (like counts)"]
    assert sorted(p[2] for p in streamed) == list(range(search.bucket_of(postings - 1) + 1))
    assert not [name for name, _ in calls if name == "SELECT term_postings"]  # never whole buckets with text
    assert len([name for name, _ in calls if name == "SELECT term_postings (one)"]) <= search.TOP_K + 1
    first = search.top_states(mdb, net.name, ["the"])["the"]
    assert (first.floor, summary["floor"]) == (floor, floor)
    assert sorted(r.post_id for r in _generation_rows(mdb, net, "the", first.generation)) == want

    for term in sorted({t for q in QUERIES for t in query_terms(q)} - {"the"}):
        post_search.rebuild_term_top(mdb, net.name, term)
    rows = _generation_rows(mdb, net, "the", first.generation)
    assert rows and all(r.ttl is None for r in rows)  # the current generation lives until it is replaced
    young = _answers(mdb, net)
    for q, (ids, _exact, rebuild) in young.items():
        assert ids == ref.q6(query_terms(q)), q
        assert rebuild is None, q  # young lists: nothing to rebuild

    clock.advance(61)  # past the max age: still answered from the list, as exactly, and a rebuild is asked
    for q, (ids, exact, rebuild) in _answers(mdb, net).items():
        assert ids == ref.q6(query_terms(q)) and exact is young[q][1], q
        assert rebuild == min(query_terms(q), key=lambda t: (len(ref.q6([t], 10**6)), t)), q
    assert post_search.refresh_term_top(mdb, net.name, "the").get("unchanged") is None
    second = search.top_states(mdb, net.name, ["the"])["the"]
    assert second.generation > first.generation and second.previous == first.generation
    assert post_search.refresh_term_top(mdb, net.name, "the") == {  # young again: a duplicate job does nothing
        "term": "the", "postings": search.term_counts(mdb, net.name, ["the"])["the"], "unchanged": True}

    # Likes after the rebuild move posts into the new list; answers stay equal to the reference.
    post = ref.q6(["the"])[-1]
    for fan in sorted(ref.usernames)[:5]:
        assert client.put(f"/networks/{net.name}/posts/{post}/likes/{fan}", headers=ADMIN).status_code == 200
        ref.like(post, fan)
    clock.advance(61)
    assert post_search.refresh_term_top(mdb, net.name, "the").get("unchanged") is None
    third = search.top_states(mdb, net.name, ["the"])["the"]
    assert third.previous == second.generation
    assert _generation_rows(mdb, net, "the", first.generation) == []  # replaced two rebuilds ago: deleted
    assert _generation_rows(mdb, net, "the", second.generation)  # replaced just now: a reader may still hold it
    for q, (ids, _exact, _rebuild) in _answers(mdb, net).items():
        assert ids == ref.q6(query_terms(q)), q


def test_the_fallback_scan_stays_in_its_budget_and_counters_are_spread(small_lists, fresh_net, client, db,
                                                                       monkeypatch):
    """A common term whose list cannot be used (here: built before cql/0150, 30 days ago, its rows expiring)
    is scanned: the newest postings, no more rows asked for than the budget however many buckets it takes; the
    answer says inexact and asks for the rebuild, after which it equals the reference. New posts of a word add
    to the cell of their id (16 cells): the count read is their sum, and the posts land in several cells."""
    net, ref = fresh_net, fresh_net.ref
    monkeypatch.setattr(search, "SCAN_BUDGET", 70)  # several buckets of 20
    db.execute_raw(f"INSERT INTO {db.keyspace}.term_top_state (network, term, generation, like_floor, top_entries, "
                   "postings_at_build, built_at, previous_generation) VALUES (%s, 'the', 1, 1, 0, 1, %s, null)",
                   (net.name, int((time.time() - 30 * 24 * 3600) * 1000)))
    calls = _recording(monkeypatch, db)
    found = post_search.search_posts(db, net.name, ["the"])
    asked = [p for name, p in calls if name == "SELECT term_postings"]
    postings = search.term_counts(db, net.name, ["the"])["the"]
    assert postings > 70 and len(asked) >= 3 and sum(p[-1] for p in asked) == 70
    assert [p[2] for p in asked] == list(range(search.bucket_of(postings - 1), -1, -1))[:len(asked)]  # newest first
    assert found.exact is False and found.rebuild == "the"
    assert post_search.refresh_term_top(db, net.name, "the").get("unchanged") is None
    monkeypatch.setattr(search, "SCAN_BUDGET", 20_000)
    found = post_search.search_posts(db, net.name, ["the"])
    assert [p.post_id for p in found.posts] == ref.q6(["the"]) and found.rebuild is None

    author = next(iter(ref.usernames))
    for i in range(12):
        r = client.post(f"/networks/{net.name}/posts", headers=ADMIN,
                        json={"author_id": author, "content": f"wombatcell number {i}"})
        assert r.status_code == 201, r.json
    assert search.term_counts(db, net.name, ["wombatcell"]) == {"wombatcell": 12}
    [row] = db.execute_raw(f"SELECT * FROM {db.keyspace}.term_counts WHERE network = %s AND term = 'wombatcell'",
                           (net.name,))
    cells = {k: v for k, v in row._asdict().items() if k.startswith("postings") and v}
    assert sum(cells.values()) == 12 and len(cells) >= 3
