"""Hot responses built without marshmallow (a home page's posts: api/network/values.py `Post.api_json`,
api/network/http.py `home_json`) are exactly what the documented schemas dump of the same values."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from api.db import get_db
from api.network import home
from api.network.http import home_json
from api.network.schemas import HomeSchema, PostSchema
from api.network.values import Account, Post
from tests.network.checks import sample_accounts

POSTS = [
    Post(1, 10, datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)),
    Post(2**62, 11, datetime(1970, 1, 1, tzinfo=UTC), "ann", "orig", "héllo \u202e wörld", "de", "DE", 52.52,
         -13.405, 7, 3),
    Post(3, 12, datetime(2025, 6, 30, 23, 59, 59, 999000, tzinfo=timezone(timedelta(hours=2))), None, None, "",
         None, None, 0.0, None, 0, 0),
]


def test_a_posts_json_is_what_its_schema_dumps():
    for post in POSTS:
        assert post.api_json() == PostSchema().dump(post)
        assert json.loads(json.dumps(post.api_json())) == post.api_json()


@pytest.mark.parametrize("found", [
    {"account": Account(5, "bob", 2, 3), "order": "newest", "posts": POSTS, "cache_rebuilt": True,
     "merged_celebrities": 1},
    {"account": Account(6, None), "order": "likes", "posts": POSTS[1:], "cache_rebuilt": False,
     "ranked_at": datetime(2026, 3, 1, 12, 0, 0, 250000, tzinfo=UTC)},
    {"account": Account(7, "zoë"), "order": "newest", "posts": []},
])
def test_a_home_body_is_what_its_schema_dumps(found):
    assert home_json(found) == HomeSchema().dump(found)


@pytest.mark.parametrize("order", ["newest", "likes"])
def test_a_home_page_from_the_cache_is_the_page_its_rebuild_answered_and_what_the_schema_dumps(client, fresh_net,
                                                                                             order):
    """The first read of a home page builds its cache from the posts; the next ones read the cache. Both answer
    the same posts, field for field (where they were posted included), and that is what HomeSchema dumps."""
    db = get_db()
    rebuilt = placed = 0
    for account in sample_accounts(fresh_net.ref)[:8]:
        path = f"/networks/{fresh_net.name}/accounts/{account}/home?order={order}"
        first, again = client.get(path).get_json(), client.get(path).get_json()
        dumped = json.loads(json.dumps(HomeSchema().dump(home.home_of(db, fresh_net.name, account, order)),
                                       default=str))
        rebuilt += first["cache_rebuilt"]
        for answer in (first, again, dumped):
            answer.pop("cache_rebuilt")
            if order == "likes":  # when the ranking was made (the direct read may rank again): a time, always
                assert datetime.fromisoformat(answer.pop("ranked_at")).tzinfo is not None
        assert first == again == dumped
        placed += sum(post["country"] is not None for post in again["posts"])
    assert rebuilt and placed  # the rebuild was read, and pages from the cache say where posts were posted
