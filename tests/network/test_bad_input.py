"""Inputs and races found in review, on a tiny network of their own (the shared test network stays as its
brute-force reference expects)."""

from __future__ import annotations

import csv
import json
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from api.network import cleaning, generator, loader, posts
from api.network.search import SET_POSTING_LIKES
from tests.network.helpers import ADMIN

NETWORK = "badnet"


@pytest.fixture(scope="module")
def users(db, tmp_path_factory) -> list[int]:
    d: Path = tmp_path_factory.mktemp("badnet")
    edges, posts = generator.generate(d / "raw", accounts=40, edges=150, posts=20, seed=3)
    cleaning.clean_relations(edges, posts, d / "clean")
    cleaning.clean_posts(posts, d / "clean" / "accounts.csv", d / "clean", like_rate=0.0, seed=3)
    loader.load_network(db, NETWORK, d / "clean")
    with (d / "clean" / "accounts.csv").open() as fh:
        return [int(row["account_id"]) for row in csv.DictReader(fh)][:5]


@pytest.mark.parametrize("posted_at", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:30:00-01:00",
                                       "0999-05-01T00:00:00+00:00"])
def test_post_times_outside_the_supported_range_are_422(client, users, posted_at):
    response = client.post(f"/networks/{NETWORK}/posts", headers=ADMIN,
                           json={"author_id": users[0], "content": "old news", "posted_at": posted_at})
    assert response.status_code == 422, response.get_json()
    assert "posted_at" in response.get_json()["errors"]["json"]


@pytest.mark.parametrize("path", ["rankings/top-accounts?at=0001-01-01T00:00:00%2B01:00",
                                  "rankings/top-followers/history?at=9999-12-31T23:30:00-01:00"])
def test_snapshot_times_outside_the_supported_range_are_422(client, users, path):
    response = client.get(f"/networks/{NETWORK}/{path}")
    assert response.status_code == 422, response.get_json()


def test_text_that_is_not_unicode_is_422_and_stores_nothing(client, users):
    body = '{"author_id": ' + str(users[0]) + ', "content": "bad \\ud800 quokkaword"}'
    response = client.post(f"/networks/{NETWORK}/posts", headers={**ADMIN, "Content-Type": "application/json"},
                           data=body)
    assert response.status_code == 422
    assert client.get(f"/networks/{NETWORK}/search?q=quokkaword").get_json()["posts"] == []


def test_search_shows_current_like_counts_and_never_deleted_posts(client, db, users):
    author, fans = users[0], users[1:3]
    created = client.post(f"/networks/{NETWORK}/posts", headers=ADMIN,
                          json={"author_id": author, "content": "zebrafinch sighting"})
    assert created.status_code == 201, created.get_json()
    post = created.get_json()["post"]
    for fan in fans:
        assert client.put(f"/networks/{NETWORK}/posts/{post['post_id']}/likes/{fan}", headers=ADMIN).status_code == 200
    # What two like updates racing can leave behind: postings carrying a count the post no longer has.
    posted_at = datetime.fromisoformat(post["posted_at"].replace("Z", "+00:00"))
    buckets = posts.term_buckets(db, NETWORK, post["post_id"])
    assert sorted(buckets) == ["sighting", "zebrafinch"]

    def stale_like_update() -> None:
        # Written with a later timestamp than anything before it: after the delete it re-creates the postings.
        at = time.time_ns() // 1000 + 1_000_000
        for term, bucket in buckets.items():
            db.execute(SET_POSTING_LIKES, (at, 57, NETWORK, term, bucket, posted_at, post["post_id"]))

    stale_like_update()
    found = client.get(f"/networks/{NETWORK}/search?q=zebrafinch").get_json()["posts"]
    assert [(p["post_id"], p["like_count"]) for p in found] == [(post["post_id"], len(fans))]

    assert client.delete(f"/networks/{NETWORK}/posts/{post['post_id']}", headers=ADMIN).status_code == 200
    stale_like_update()  # a like that raced the delete re-creates partial postings: never an answer
    assert client.get(f"/networks/{NETWORK}/search?q=zebrafinch").get_json()["posts"] == []
    assert client.get(f"/networks/{NETWORK}/search?q=zebrafinch+sighting").get_json()["posts"] == []
    json.dumps(found)  # the answer stays JSON-serialisable


def test_a_row_holding_only_a_like_count_is_no_post(client, db, users):
    """A like publishes its count with an UPDATE: on a replica that missed the post's insert (down when it was
    written) that makes a row with nothing but `like_count`. A fault run saw it answer 500s (a post without a
    time); it is no post: 404 on every route that reads a post by id, and no Q4 page shows it."""
    ghost = 7_777_000_123
    db.execute(posts.SET_LIKES_BY_ID, (int(time.time() * 1e6), 3, NETWORK, ghost))
    assert posts.get_post(db, NETWORK, ghost) is None
    assert ghost not in posts.posts_by_ids(db, NETWORK, [ghost])
    for method, path in (("GET", f"/networks/{NETWORK}/posts/{ghost}"),
                         ("PUT", f"/networks/{NETWORK}/posts/{ghost}/likes/{users[1]}"),
                         ("DELETE", f"/networks/{NETWORK}/posts/{ghost}/likes/{users[1]}"),
                         ("DELETE", f"/networks/{NETWORK}/posts/{ghost}")):
        response = client.open(path, method=method, headers=ADMIN)
        assert response.status_code == 404, (method, path, response.get_json())
        assert str(ghost) in response.get_json()["message"]


def test_a_like_count_alone_under_an_authors_key_is_no_post(client, db, users):
    """The same on posts_by_author: a like's count update for a post that replica never got (or that was
    deleted since) leaves a row under the author's month with nothing but `like_count`. Q1 does not list it."""
    from api.network.common import month_of

    author = users[2]
    made = client.post(f"/networks/{NETWORK}/posts", headers=ADMIN, json={"author_id": author, "content": "real"})
    assert made.status_code == 201, made.get_json()
    real = made.get_json()["post"]
    ghost_time = datetime.fromisoformat(real["posted_at"]) + timedelta(seconds=1)  # newest: the head of the page
    db.execute(posts.SET_LIKES_BY_AUTHOR, (int(time.time() * 1e6), 5, NETWORK, author, month_of(ghost_time),
                                           ghost_time, 7_777_000_456))
    listed = client.get(f"/networks/{NETWORK}/accounts/{author}/posts?limit=5").get_json()["posts"]
    assert listed and listed[0]["post_id"] == real["post_id"]
    assert 7_777_000_456 not in {p["post_id"] for p in listed}
    assert all(p["content"] is not None for p in listed)
    assert 7_777_000_456 not in {p.post_id for p in posts.posts_of_author(db, NETWORK, author, 5)}
