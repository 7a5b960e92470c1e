"""Q4 by likes with reused rankings (CHRONICLE_NETWORK_LIKES_RANK_MAX_AGE > 0), against the brute-force reference.

A read ranks the reader's window and keeps its best 2 x page posts; a read within the age serves those posts
ordered by their current like counts. What each read must answer is computed here from the reference alone:
the reference's ranking at the time of the last ranking, re-ordered by the reference's counts now."""

from __future__ import annotations

import collections
from datetime import UTC, datetime, timedelta

import pytest

from api.db import get_db
from api.network import home
from api.network.settings import NetworkSettings, set_network_settings
from tests.network.helpers import ADMIN, CAP

PAGE = 5
KEPT = 2 * PAGE  # what a ranking keeps (actions._RANKING_KEPT pages)
MAX_AGE = 600.0  # long: a test ages a ranking by rewriting its time, never by sleeping


@pytest.fixture(autouse=True)
def reused_rankings():
    set_network_settings(NetworkSettings(hybrid_threshold=0, cache_cap=CAP, page_size=PAGE,
                                         likes_rank_max_age=MAX_AGE))


def _reader(ref) -> int:
    """The account with the largest window (ties: lowest id)."""
    posts_by_author = collections.Counter(p["author_id"] for p in ref.posts.values())
    return min(ref.usernames, key=lambda a: (-sum(posts_by_author[b] for b in ref.follows(a)), a))


def _home(client, net, reader: int) -> dict:
    r = client.get(f"/networks/{net.name}/accounts/{reader}/home?order=likes")
    assert r.status_code == 200, r.json
    return r.json


def _ids(body: dict) -> list[int]:
    return [p["post_id"] for p in body["posts"]]


def _served(ref, kept: list[int]) -> list[int]:
    """A reused ranking's page: its kept posts that still exist, by their like counts now."""
    alive = [p for p in kept if p in ref.posts]
    return sorted(alive, key=lambda p: (-ref.like_count(p), -p))[:PAGE]


def _age(net, reader: int, seconds: float) -> None:
    """Make the reader's kept ranking `seconds` old (as if it had been made then)."""
    db = get_db()
    db.session.execute(f"UPDATE {db.keyspace}.home_likes_rankings SET ranked_at = %s WHERE network = %s "
                       "AND account_id = %s", (datetime.now(UTC) - timedelta(seconds=seconds), net.name, reader))


def _like(client, net, post: int, users: list[int]) -> None:
    for u in users:
        assert client.put(f"/networks/{net.name}/posts/{post}/likes/{u}", headers=ADMIN).status_code == 200
        net.ref.like(post, u)


def _climber(ref, reader: int, kept: list[int]) -> tuple[int, list[int]]:
    """A post of the reader's window outside the kept ranking, and enough new likers to top the window."""
    window = ref.q4(reader, "likes", CAP, CAP)[2]
    post = next(p for p in reversed(window) if p not in kept)
    top = max(ref.like_count(p) for p in window)
    fans = [u for u in sorted(ref.usernames) if (post, u) not in ref.likes][:top + 2 - ref.like_count(post)]
    return post, fans


def test_a_ranking_is_reused_with_current_counts_then_ranked_again(fresh_net, client):
    net, ref = fresh_net, fresh_net.ref
    reader = _reader(ref)
    first = _home(client, net, reader)
    kept = ref.q4(reader, "likes", CAP, KEPT)[2]
    assert len(kept) == KEPT and _ids(first) == kept[:PAGE]
    assert [p["like_count"] for p in first["posts"]] == [ref.like_count(p) for p in kept[:PAGE]]
    ranked_at = first["ranked_at"]

    # Likes move the kept posts at once (their counts are read now), but a post outside the ranking stays out.
    low = kept[-1]
    _like(client, net, low, [u for u in sorted(ref.usernames) if (low, u) not in ref.likes][:6])
    climber, fans = _climber(ref, reader, kept)
    _like(client, net, climber, fans)
    again = _home(client, net, reader)
    assert again["ranked_at"] == ranked_at
    assert _ids(again) == _served(ref, kept) and low in _ids(again) and climber not in _ids(again)
    assert [p["like_count"] for p in again["posts"]] == [ref.like_count(p) for p in _ids(again)]
    assert _ids(again) != ref.q4(reader, "likes", CAP, PAGE)[2]  # the reused answer differs from a fresh one

    # Older than the age: still served, ranked again in the background; the next read shows the new ranking.
    _age(net, reader, MAX_AGE * 1.5)
    stale = _home(client, net, reader)
    assert _ids(stale) == _served(ref, kept)
    assert home.settle_reranking(get_db()) == 1
    fresh = _home(client, net, reader)
    assert _ids(fresh) == ref.q4(reader, "likes", CAP, PAGE)[2] and climber in _ids(fresh)
    assert fresh["ranked_at"] > ranked_at

    # Older than twice the age: ranked before answering.
    kept = ref.q4(reader, "likes", CAP, KEPT)[2]
    climber, fans = _climber(ref, reader, kept)
    _like(client, net, climber, fans)
    assert _ids(_home(client, net, reader)) == _served(ref, kept)
    _age(net, reader, MAX_AGE * 2 + 1)
    assert _ids(_home(client, net, reader)) == ref.q4(reader, "likes", CAP, PAGE)[2]
    assert home.settle_reranking(get_db()) == 0


def test_the_readers_own_follows_rebuilds_and_deletes_rank_again(fresh_net, client):
    net, ref = fresh_net, fresh_net.ref
    reader = _reader(ref)
    exact = lambda: ref.q4(reader, "likes", CAP, PAGE)[2]  # noqa: E731
    assert _ids(_home(client, net, reader)) == exact()
    kept = ref.q4(reader, "likes", CAP, KEPT)[2]

    # Unfollowing the author of the best post: that author's posts leave the page at once.
    gone = ref.posts[kept[0]]["author_id"]
    assert client.delete(f"/networks/{net.name}/accounts/{reader}/follows/{gone}", headers=ADMIN).status_code == 200
    ref.unfollow(reader, gone)
    page = _ids(_home(client, net, reader))
    assert page == exact() and all(ref.posts[p]["author_id"] != gone for p in page)

    # Following an author with a well-liked post: it shows at once.
    window_authors = ref.follows(reader)
    author, post = next((ref.posts[p]["author_id"], p) for p, _ in sorted(ref.likes)
                        if ref.posts[p]["author_id"] not in window_authors | {reader, gone})
    kept = ref.q4(reader, "likes", CAP, KEPT)[2]
    _like(client, net, post, [u for u in sorted(ref.usernames) if (post, u) not in ref.likes][:8])
    assert _ids(_home(client, net, reader)) == _served(ref, kept)  # not followed yet: the ranking is reused
    assert client.put(f"/networks/{net.name}/accounts/{reader}/follows/{author}", headers=ADMIN).status_code == 200
    ref.follow(reader, author)
    if post in ref.q4(reader, "newest", CAP, CAP)[2]:  # in the window, so it must rank
        assert post in exact()
    assert _ids(_home(client, net, reader)) == exact()

    # A rebuilt cache ranks again.
    kept = ref.q4(reader, "likes", CAP, KEPT)[2]
    climber, fans = _climber(ref, reader, kept)
    _like(client, net, climber, fans)
    assert _ids(_home(client, net, reader)) == _served(ref, kept)
    assert client.post(f"/networks/{net.name}/accounts/{reader}/home/rebuild", headers=ADMIN).status_code == 200
    assert _ids(_home(client, net, reader)) == exact()

    # Deleted posts leave the page at once; when too few kept posts are left for a page, it ranks again.
    kept = ref.q4(reader, "likes", CAP, KEPT)[2]
    climber, fans = _climber(ref, reader, kept)
    _like(client, net, climber, fans)
    for p in kept[:2]:
        assert client.delete(f"/networks/{net.name}/posts/{p}", headers=ADMIN).status_code == 200
        ref.delete_post(p)
    page = _ids(_home(client, net, reader))
    assert page == _served(ref, kept) and climber not in page
    for p in kept[2:KEPT - PAGE + 1]:  # KEPT - PAGE + 1 deleted in all: fewer than a page left
        assert client.delete(f"/networks/{net.name}/posts/{p}", headers=ADMIN).status_code == 200
        ref.delete_post(p)
    page = _ids(_home(client, net, reader))
    assert page == exact() and climber in page


def test_ranking_every_read_when_the_age_is_zero(fresh_net, client):
    net, ref = fresh_net, fresh_net.ref
    set_network_settings(NetworkSettings(hybrid_threshold=0, cache_cap=CAP, page_size=PAGE, likes_rank_max_age=0))
    reader = _reader(ref)
    assert _ids(_home(client, net, reader)) == ref.q4(reader, "likes", CAP, PAGE)[2]
    kept = ref.q4(reader, "likes", CAP, KEPT)[2]
    climber, fans = _climber(ref, reader, kept)
    _like(client, net, climber, fans)
    assert _ids(_home(client, net, reader)) == ref.q4(reader, "likes", CAP, PAGE)[2]
    db = get_db()
    kept_rows = db.session.execute(f"SELECT post_ids FROM {db.keyspace}.home_likes_rankings WHERE network = %s "
                                   "AND account_id = %s", (net.name, reader)).all()
    assert kept_rows == []  # nothing is kept when nothing is reused


def test_the_age_setting_is_checked(monkeypatch):
    monkeypatch.setenv("CHRONICLE_NETWORK_LIKES_RANK_MAX_AGE", "2.5")
    assert NetworkSettings.from_env().likes_rank_max_age == 2.5
    for bad in ("-1", "soon", "nan"):
        monkeypatch.setenv("CHRONICLE_NETWORK_LIKES_RANK_MAX_AGE", bad)
        with pytest.raises(ValueError, match="CHRONICLE_NETWORK_LIKES_RANK_MAX_AGE"):
            NetworkSettings.from_env()
