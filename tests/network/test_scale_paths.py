"""The scale-sound paths on a small network: Q6 for common terms (top lists) against the brute-force reference,
and counts that stay exact when the same follow or like is sent many times at once."""

from __future__ import annotations

import csv
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from api.db import get_db
from api.network import accounts, celebrities, likes, loader, maintenance, post_search, posts, search
from api.network.settings import set_network_settings
from api.network.tokens import query_terms
from tests.network.checks import Q6_QUERIES, check_home
from tests.network.helpers import ADMIN, CAP, exact_settings


@pytest.fixture
def small_common(monkeypatch):
    """Make every term with more than 5 postings 'common' and top lists tiny, so the top-list paths run."""
    monkeypatch.setattr(search, "RARE_POSTINGS", 5)
    monkeypatch.setattr(search, "TOP_K", 4)


def _ranked(client, net, q: str) -> dict:
    r = client.get(f"/networks/{net.name}/search", query_string={"q": q})
    assert r.status_code == 200, r.json
    return r.json


def test_common_terms_answer_from_top_lists_like_the_reference(fresh_net, client, small_common):
    net, ref = fresh_net, fresh_net.ref
    db = get_db()
    counts = search.term_counts(db, net.name, ["the", "love", "tour"])
    assert counts["the"] > 5  # common under the fixture's threshold
    for term in ("the", "love", "tour", "a", "to", "of", "and", "happy", "birthday", "world"):
        post_search.rebuild_term_top(db, net.name, term)
    states = search.top_states(db, net.name, ["the"])
    assert states["the"].floor >= 1
    for q in Q6_QUERIES:
        body = _ranked(client, net, q)
        want = ref.q6(query_terms(q))
        assert [p["post_id"] for p in body["posts"]] == want, q
        if len(q.split()) == 1 and q.casefold() in ("the", "love"):
            # Exact by construction when 25 posts of the term reach its floor (the floor with one like: always).
            floor = search.top_states(db, net.name, [q])[q].floor
            reaching = [p for p in ref.posts.values() if q in p["content"].casefold().split()
                        and ref.like_count(p["post_id"]) >= floor]
            assert body["exact"] is (len(reaching) >= 25 or floor <= 1), (q, floor, len(reaching))
        if q in ("zebra", "nonexistentword"):
            assert body["exact"] is True  # a rare driver is read whole
    # Likes move posts into the top list (a post reaching the floor is added): answers stay exact.
    post = ref.q6(["the"])[-1]
    fans = sorted(ref.usernames)[:6]
    for fan in fans:
        assert client.put(f"/networks/{net.name}/posts/{post}/likes/{fan}", headers=ADMIN).status_code == 200
        ref.like(post, fan)
    body = _ranked(client, net, "the")
    assert [p["post_id"] for p in body["posts"]] == ref.q6(["the"])
    shown = {p["post_id"]: p["like_count"] for p in body["posts"]}
    assert shown[post] == ref.like_count(post)


def test_repeated_and_racing_follows_and_likes_count_once(fresh_net, client):
    net, ref = fresh_net, fresh_net.ref
    db = get_db()
    followee = ref.q2(1)[0][0]
    follower = next(u for u in sorted(ref.usernames) if followee not in ref.follows(u) and u != followee)
    before = len(ref.followers(followee))

    def follow(_i: int) -> int:
        return client.put(f"/networks/{net.name}/accounts/{follower}/follows/{followee}", headers=ADMIN).json[
            "changed"]

    with ThreadPoolExecutor(8) as pool:
        changed = list(pool.map(follow, range(16)))
    assert changed.count(True) == 1
    assert accounts.fresh_counts(db, net.name, [followee])[followee][0] == before + 1

    post = next(iter(ref.posts))
    fans = sorted(ref.usernames)[:12]

    def like(user: int) -> int:
        return client.put(f"/networks/{net.name}/posts/{post}/likes/{user}", headers=ADMIN).status_code

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(like, fans + fans)) == {200}
    for fan in fans:
        ref.like(post, fan)
    assert likes.count(db, net.name, post) == ref.like_count(post)
    assert client.get(f"/networks/{net.name}/posts/{post}").json["like_count"] == ref.like_count(post)
    # The reconcile job finds nothing to repair, and repairs a counter knocked off by hand.
    assert maintenance.reconcile_counts(db, net.name, [followee, follower])["accounts_repaired"] == {}
    accounts.add_counts(db, net.name, follower, followee, +3)
    repaired = maintenance.reconcile_counts(db, net.name, [followee, follower])["accounts_repaired"]
    assert repaired == {followee: (-3, 0), follower: (0, -3)}
    assert accounts.fresh_counts(db, net.name, [followee])[followee][0] == before + 1


def test_a_like_count_read_earlier_never_overwrites_one_read_later(fresh_net, client):
    """Two likes racing: the one that read the counter later (and so saw both increments) must win, even when
    its write lands first."""
    net, ref = fresh_net, fresh_net.ref
    db = get_db()
    post_id = next(iter(ref.posts))
    post = posts.get_post(db, net.name, post_id)
    buckets = posts.term_buckets(db, net.name, post_id)
    assert buckets, "the post has indexed terms"
    later = time.time_ns() // 1000 + 1_000_000
    for count, read_at in ((ref.like_count(post_id) + 7, later), (ref.like_count(post_id) + 3, later - 500)):
        db.execute_many(posts.like_count_writes(net.name, post, count, read_at)
                        + search.like_writes(net.name, post, buckets, count, {}, read_at))
    want = ref.like_count(post_id) + 7
    assert client.get(f"/networks/{net.name}/posts/{post_id}").json["like_count"] == want
    rows = search._postings(db, net.name, sorted(buckets)[0], [buckets[sorted(buckets)[0]]], 100_000)
    assert [p.like_count for p in rows if p.post_id == post_id] == [want]


def test_home_merges_recent_celebrity_posts_like_the_reference(fresh_net, client, monkeypatch):
    """When the cache holds a full window of recent posts, Q4 reads the celebrities' posts since the window's
    oldest in one bounded request (not every celebrity's months): the page still equals the reference, also
    with a celebrity post just older than the window and one inside it."""
    net, ref = fresh_net, fresh_net.ref
    db = get_db()
    celeb = ref.q2(1)[0][0]
    author = next(a for a, _ in ref.q2(100)[10:] if a != celeb)
    user = next(u for u in sorted(ref.followers(celeb)) if u not in (author, celeb))
    threshold = len(ref.followers(celeb))
    set_network_settings(exact_settings(hybrid_threshold=threshold, cache_cap=CAP))
    celebrities.apply_threshold(db, net.name)
    assert accounts.is_celebrity(db, net.name, celeb) and not accounts.is_celebrity(db, net.name, author)
    if author not in ref.follows(user):
        assert client.put(f"/networks/{net.name}/accounts/{user}/follows/{author}", headers=ADMIN).status_code == 200
        ref.follow(user, author)
    client.get(f"/networks/{net.name}/accounts/{user}/home")  # the cache exists: new posts are fanned in
    now = datetime.now(UTC).replace(microsecond=0)

    def post(who: int, text: str, at: datetime) -> None:
        r = client.post(f"/networks/{net.name}/posts", headers=ADMIN,
                        json={"author_id": who, "content": text, "posted_at": at.isoformat()})
        assert r.status_code == 201, r.json
        ref.add_post(r.json["post"]["post_id"], who, at, text)

    for i in range(CAP + 5):  # a full window of the author's posts, one every 10 s
        post(author, f"window post {i}", now - timedelta(seconds=10 * (CAP + 5 - i)))
    post(celeb, "celebrity inside the window", now - timedelta(seconds=10 * 12 + 5))
    post(celeb, "celebrity just older than the window", now - timedelta(seconds=10 * (CAP + 6)))
    fan = sorted(ref.usernames)[:3]
    for u in fan:  # likes decide the likes order
        newest = ref.q1(celeb)[0]
        assert client.put(f"/networks/{net.name}/posts/{newest}/likes/{u}", headers=ADMIN).status_code == 200
        ref.like(newest, u)
    recent_reads = []
    real = posts.start_recent_posts_of_authors
    monkeypatch.setattr(posts, "start_recent_posts_of_authors",
                        lambda *a, **kw: recent_reads.append(a[2]) or real(*a, **kw))
    assert check_home(client, net.name, ref, [user]) == 2
    assert recent_reads == [[celeb], [celeb]]  # both orders took the bounded path


def test_home_reads_only_the_celebrities_that_posted_since_its_window(fresh_net, client, monkeypatch, tmp_path):
    """Q4 asks posts_by_author only for the followed celebrities whose last post (recorded by the post's request,
    by a promotion and by a load) is not older than the cached window: a celebrity promoted with only older
    posts is not read, and as each celebrity first has an old post, a newer post that went unrecorded would
    leave the page short of it against the reference."""
    net, ref = fresh_net, fresh_net.ref
    db = get_db()
    top = [a for a, _ in ref.q2(100)]
    loud, author = top[0], top[10]
    quiet, promoted = [a for a in top[1:10] if len(ref.followers(a)) + 1 < len(ref.followers(loud))][:2]
    user = next(u for u in sorted(ref.followers(loud)) if u not in (author, loud, quiet, promoted))
    for followee in (quiet, promoted, author):
        if followee not in ref.follows(user):
            assert client.put(f"/networks/{net.name}/accounts/{user}/follows/{followee}",
                              headers=ADMIN).status_code == 200
            ref.follow(user, followee)
    set_network_settings(exact_settings(hybrid_threshold=len(ref.followers(loud)), cache_cap=CAP))
    celebrities.apply_threshold(db, net.name)
    assert accounts.is_celebrity(db, net.name, loud)
    assert not accounts.is_celebrity(db, net.name, quiet) and not accounts.is_celebrity(db, net.name, promoted)
    client.get(f"/networks/{net.name}/accounts/{user}/home")  # the cache exists: new posts are fanned in
    now = datetime.now(UTC).replace(microsecond=0)
    window_start = now - timedelta(seconds=10 * (CAP + 5))

    def post(who: int, text: str, at: datetime) -> int:
        r = client.post(f"/networks/{net.name}/posts", headers=ADMIN,
                        json={"author_id": who, "content": text, "posted_at": at.isoformat()})
        assert r.status_code == 201, r.json
        ref.add_post(r.json["post"]["post_id"], who, at, text)
        return r.json["post"]["post_id"]

    for who in (loud, quiet, promoted):
        post(who, "an old post", now - timedelta(days=3))
    for i in range(CAP + 5):  # a full window of the author's posts, one every 10 s
        post(author, f"window post {i}", window_start + timedelta(seconds=10 * i))
    post(quiet, "fanned out before the window", window_start - timedelta(seconds=60))
    post(promoted, "fanned out, then merged", now - timedelta(seconds=95))
    threshold = min(len(ref.followers(quiet)), len(ref.followers(promoted)))
    set_network_settings(exact_settings(hybrid_threshold=threshold, cache_cap=CAP))
    celebrities.apply_threshold(db, net.name)  # promotes both: their cached posts are skipped, merged instead
    assert accounts.is_celebrity(db, net.name, quiet) and accounts.is_celebrity(db, net.name, promoted)
    post(loud, "celebrity inside the window", now - timedelta(seconds=125))

    recent_reads = []
    real = posts.start_recent_posts_of_authors
    monkeypatch.setattr(posts, "start_recent_posts_of_authors",
                        lambda *a, **kw: recent_reads.append(sorted(a[2])) or real(*a, **kw))
    assert check_home(client, net.name, ref, [user]) == 2
    assert recent_reads == [sorted([loud, promoted])] * 2

    # A load that brings a newer post of the quiet celebrity (the whole posts file again, plus that post).
    reloaded = tmp_path / "posts.csv"
    with (net.clean / "posts.csv").open(newline="", encoding="utf-8") as src, \
            reloaded.open("w", newline="", encoding="utf-8") as out:
        rows = list(csv.reader(src))
        late = now - timedelta(seconds=35)
        loaded_id = max(int(r[0]) for r in rows[1:]) + 1
        csv.writer(out).writerows(rows + [[loaded_id, quiet, ref.usernames[quiet], "", "",
                                           late.isoformat().replace("+00:00", "Z"), "loaded late", "", "", "", "",
                                           "0", "0"]])
    loader.load(db, "posts", net.name, reloaded, likes_path=net.clean / "likes.csv")
    ref.add_post(loaded_id, quiet, late, "loaded late")
    recent_reads.clear()
    assert check_home(client, net.name, ref, [user]) == 2
    assert recent_reads == [sorted([loud, quiet, promoted])] * 2
    assert loaded_id in [p["post_id"] for p in client.get(f"/networks/{net.name}/accounts/{user}/home").json["posts"]]


def test_home_by_newest_reads_more_counts_only_when_deleted_posts_leave_the_page_short(fresh_net, client,
                                                                                      monkeypatch):
    """Q4 by newest reads like counts for a page and a few more posts; when more of those were deleted since they
    were cached, it reads the counts of the rest of the cached rows it holds, without rebuilding the cache, and
    the page equals the reference."""
    net, ref = fresh_net, fresh_net.ref
    set_network_settings(exact_settings(hybrid_threshold=0, cache_cap=CAP))
    author = ref.q2(100)[5][0]
    user = sorted(ref.followers(author))[0]
    client.get(f"/networks/{net.name}/accounts/{user}/home")  # the cache exists: new posts are fanned in
    now = datetime.now(UTC).replace(microsecond=0)
    made = []
    for i in range(30):
        at = now - timedelta(seconds=10 * (30 - i))
        r = client.post(f"/networks/{net.name}/posts", headers=ADMIN,
                        json={"author_id": author, "content": f"soon gone {i}", "posted_at": at.isoformat()})
        assert r.status_code == 201, r.json
        made.append(r.json["post"]["post_id"])
        ref.add_post(made[-1], author, at, f"soon gone {i}")
    for post_id in made[-12:]:  # more than the few extra counts read
        assert client.delete(f"/networks/{net.name}/posts/{post_id}", headers=ADMIN).status_code == 200
        ref.delete_post(post_id)
    reads = []
    real = posts.window_like_counts
    monkeypatch.setattr(posts, "window_like_counts", lambda db, n, w: reads.append(len(list(w))) or real(db, n, w))
    r = client.get(f"/networks/{net.name}/accounts/{user}/home")
    assert r.status_code == 200 and r.json["cache_rebuilt"] is False
    assert reads == [30, CAP - 30]  # 25 + 5 first (12 gone), then the rest of the CAP rows the cache holds
    assert check_home(client, net.name, ref, [user]) == 2


def test_a_home_window_of_few_authors_reads_its_like_counts_by_partition(fresh_net, client, monkeypatch):
    """Q4 by likes over a window whose posts sit in few author-month partitions reads their counts by slicing
    those partitions: the counts equal the posts' own (after likes, an unlike, a deleted post and a row holding
    only a like count under an author's key), and the page equals the reference's."""
    net = fresh_net
    set_network_settings(exact_settings(hybrid_threshold=0, cache_cap=CAP))
    ref, db = net.ref, get_db()
    author = next(a for a, _ in ref.q2(100) if len(ref.q1(a)) >= 12 and ref.followers(a))
    mine = [posts.get_post(db, net.name, p) for p in ref.q1(author)[:12]]
    fans = sorted(ref.followers(author))
    for i, post in enumerate(mine[:6]):
        for fan in fans[:i + 1]:
            if (post.post_id, fan) not in ref.likes:
                assert client.put(f"/networks/{net.name}/posts/{post.post_id}/likes/{fan}",
                                  headers=ADMIN).status_code == 200
                ref.like(post.post_id, fan)
    liked = next((p, u) for p, u in sorted(ref.likes) if p == mine[0].post_id)
    assert client.delete(f"/networks/{net.name}/posts/{liked[0]}/likes/{liked[1]}", headers=ADMIN).status_code == 200
    ref.unlike(*liked)
    assert client.delete(f"/networks/{net.name}/posts/{mine[-1].post_id}", headers=ADMIN).status_code == 200
    ref.delete_post(mine[-1].post_id)
    ghost = mine[-2].posted_at + timedelta(microseconds=1000)
    db.execute(posts.SET_LIKES_BY_AUTHOR, (int(time.time() * 1e6), 9, net.name, author,
                                           posts.month_of(ghost), ghost, 7_777_000_789))
    window = [p for p in mine if p.post_id != mine[-1].post_id]
    monkeypatch.setattr(posts, "_SLICE_GAIN", 1)  # however many months the 12 posts span: by partition
    calls = []
    original = db.execute_async
    monkeypatch.setattr(db, "execute_async", lambda st, params=(): calls.append(st.name) or original(st, params))
    by_partition = posts.window_like_counts(db, net.name, window + [mine[-1]])
    assert calls == ["SELECT posts_by_author (like counts)"]
    assert by_partition == posts.like_counts(db, net.name, (p.post_id for p in window))
    assert by_partition == {p.post_id: ref.like_count(p.post_id) for p in window}
    monkeypatch.setattr(db, "execute_async", original)
    check_home(client, net.name, ref, fans[:4])  # every home window read by partition, against the reference
