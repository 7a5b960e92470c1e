"""Q5 retried with an Idempotency-Key: however often and however a client retries a post, the network holds
it once (author's posts, followers' homes, search, term counts), checked against the brute-force reference."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime

from api.db import get_db
from api.network import accounts, likes, post_requests, posts, search
from api.network.common import new_post_id
from api.network.settings import set_network_settings
from api.network.values import Post
from tests.network.checks import check_home, check_posts
from tests.network.helpers import ADMIN, CAP, exact_settings


def _author_with_followers(ref, skip=()) -> int:
    """An author with a few followers and posts, below any celebrity threshold (hybrid is off here)."""
    return next(a for a, _ in ref.q2(100)[10:] if ref.followers(a) and ref.q1(a) and a not in skip)


def _send(client, net, author: int, text: str, key: str | None, **extra):
    headers = ADMIN | ({"Idempotency-Key": key} if key is not None else {})
    return client.post(f"/networks/{net.name}/posts", json={"author_id": author, "content": text} | extra,
                       headers=headers)


def _stored_once(client, net, author: int, word: str, post_id: int) -> None:
    """The post is in its author's posts, its followers' homes and the search for its word exactly once, and the
    word's posting counter moved once: the reference holds it once."""
    check_posts(client, net.name, net.ref, author)
    check_home(client, net.name, net.ref, sorted(net.ref.followers(author))[:6])
    found = client.get(f"/networks/{net.name}/search", query_string={"q": word}).json["posts"]
    assert [p["post_id"] for p in found] == net.ref.q6([word]) == [post_id]
    assert search.term_counts(get_db(), net.name, [word]) == {word: 1}


def test_a_retry_with_the_same_key_answers_the_same_post_and_stores_it_once(fresh_net, client):
    net = fresh_net
    set_network_settings(exact_settings(hybrid_threshold=0, cache_cap=CAP))
    author = _author_with_followers(net.ref)
    check_home(client, net.name, net.ref, sorted(net.ref.followers(author))[:6])  # caches built: fan-out fills them
    key = str(uuid.uuid4())
    first = _send(client, net, author, "Quokkaretry sunrise", key)
    assert first.status_code == 201, first.json
    assert "Idempotent-Replayed" not in first.headers
    again = _send(client, net, author, "Quokkaretry sunrise", key)
    assert again.status_code == 201, again.json
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json == first.json
    assert first.json["fanned_out_to"] == len(net.ref.followers(author))
    post = first.json["post"]
    net.ref.add_post(post["post_id"], author, datetime.fromisoformat(post["posted_at"]).astimezone(UTC),
                     "Quokkaretry sunrise")
    _stored_once(client, net, author, "quokkaretry", post["post_id"])
    # The key belongs to the author: another author's post with the same key is a post of its own.
    other = _author_with_followers(net.ref, skip={author})
    theirs = _send(client, net, other, "Quokkaretry sunset", key)
    assert theirs.status_code == 201 and "Idempotent-Replayed" not in theirs.headers
    assert theirs.json["post"]["post_id"] != post["post_id"]


def test_a_key_reused_for_a_different_post_is_refused_and_writes_nothing(fresh_net, client):
    net = fresh_net
    author = _author_with_followers(net.ref)
    key = "order-7-post"
    created = _send(client, net, author, "Wombatkey first words", key)
    assert created.status_code == 201
    for change in ({"content": "Wombatkey other words"}, {"content": "Wombatkey first words", "language": "en"},
                   {"content": "Wombatkey first words", "posted_at": "2016-06-01T12:00:00Z"}):
        text = change.pop("content")
        refused = _send(client, net, author, text, key, **change)
        assert refused.status_code == 422, refused.json
        assert "Idempotency-Key" in refused.json["message"]
    mine = client.get(f"/networks/{net.name}/accounts/{author}/posts?limit=100").json["posts"]
    assert [p["content"] for p in mine if "Wombatkey" in p["content"]] == ["Wombatkey first words"]
    assert search.term_counts(get_db(), net.name, ["wombatkey", "other"])["wombatkey"] == 1


def test_bad_keys_are_refused_before_anything_is_written(fresh_net, client):
    net = fresh_net
    author = _author_with_followers(net.ref)
    for bad in ("", "two words", "x" * 256, "tab\there"):
        r = _send(client, net, author, "Numbatbadkey", bad)
        assert r.status_code == 422, (bad, r.json)
        assert "Idempotency-Key" in str(r.json["errors"]), r.json
    assert search.term_counts(get_db(), net.name, ["numbatbadkey"]) == {"numbatbadkey": 0}
    assert _send(client, net, author, "Numbatbadkey", "k" * 255).status_code == 201


def test_a_retry_finishes_what_a_first_request_that_died_part_way_left(fresh_net, client):
    """A first request that died after its claim and the post's rows (before indexing and fan-out), and one that
    died after indexing (before fan-out): the retry completes it, indexes it once, fans it out, and keeps the
    likes the post got meanwhile."""
    net = fresh_net
    set_network_settings(exact_settings(hybrid_threshold=0, cache_cap=CAP))
    db = get_db()
    author = _author_with_followers(net.ref)
    check_home(client, net.name, net.ref, sorted(net.ref.followers(author))[:6])
    who = accounts.get_account(db, net.name, author)
    for word, indexed in (("bilbyrows", False), ("bilbyindexed", True)):
        key = f"died-{word}"
        text = f"{word.capitalize()} half written"
        digest = post_requests.request_digest({"content": text, "posted_at": None, "language": None,
                                               "country": None, "latitude": None, "longitude": None})
        posted_at = datetime.now(UTC).replace(microsecond=0)
        claimed = post_requests.claim(db, net.name, author, key, digest, new_post_id(), posted_at)
        half = Post(post_id=claimed.post_id, author_id=author, posted_at=posted_at,
                            author_username=who.username, content=text)
        db.execute_many(posts.post_writes(net.name, half))
        if indexed:
            buckets, _grown = search.index_post(db, net.name, half)
            db.execute_many([posts.term_buckets_write(net.name, half.post_id, buckets)])
        fan = sorted(net.ref.followers(author))[0]
        liked = client.put(f"/networks/{net.name}/posts/{half.post_id}/likes/{fan}", headers=ADMIN)
        assert liked.status_code == 200 and liked.json["like_count"] == 1

        retried = _send(client, net, author, text, key)
        assert retried.status_code == 201, retried.json
        assert retried.headers["Idempotent-Replayed"] == "true"
        assert retried.json["post"]["post_id"] == half.post_id
        assert retried.json["post"]["like_count"] == 0  # the answer is the post as created, as the first's was
        assert client.get(f"/networks/{net.name}/posts/{half.post_id}").json["like_count"] == 1
        assert retried.json["fanned_out_to"] == len(net.ref.followers(author))
        net.ref.add_post(half.post_id, author, posted_at, text)
        net.ref.like(half.post_id, fan)
        assert likes.count(db, net.name, half.post_id) == 1
        _stored_once(client, net, author, word, half.post_id)
        # Finished now: a later retry answers the same without writing.
        assert _send(client, net, author, text, key).json == retried.json


def test_concurrent_retries_of_one_post_store_it_once(fresh_net, app):
    net = fresh_net
    set_network_settings(exact_settings(hybrid_threshold=0, cache_cap=CAP))
    author = _author_with_followers(net.ref)
    answers: list = []
    start = threading.Barrier(8)

    def send() -> None:
        with app.test_client() as client:
            start.wait()
            r = _send(client, net, author, "Dingoburst together", "burst-1")
            answers.append((r.status_code, r.json["post"]["post_id"], r.headers.get("Idempotent-Replayed")))

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [status for status, _, _ in answers] == [201] * 8
    assert len({post_id for _, post_id, _ in answers}) == 1
    assert sum(replayed is None for _, _, replayed in answers) == 1  # one request made the post
    post_id = answers[0][1]
    stored = get_db().execute(posts.GET_POST, (net.name, post_id)).one()
    net.ref.add_post(post_id, author, stored.posted_at.replace(tzinfo=UTC), "Dingoburst together")
    with app.test_client() as client:
        check_posts(client, net.name, net.ref, author)
        check_home(client, net.name, net.ref, sorted(net.ref.followers(author))[:6])


def test_the_openapi_document_describes_the_key_and_the_replay_header(client):
    operation = client.get("/openapi.json").json["paths"]["/networks/{network}/posts"]["post"]
    params = {p["name"]: p for p in operation["parameters"] if p["in"] == "header"}
    assert params["Idempotency-Key"]["required"] is False
    assert params["Idempotency-Key"]["schema"]["maxLength"] == 255
    assert "Idempotent-Replayed" in operation["responses"]["201"]["headers"]
