"""The API against the brute-force reference, through posts, follows, unfollows, likes and deletes, with the
hybrid threshold off and on. Each test that changes data works on a network of its own (`fresh_net`)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from api.db import get_db
from api.network import accounts, celebrities, likes
from api.network.settings import set_network_settings
from tests.network.checks import check_home, check_posts, check_rankings, check_search, sample_accounts
from tests.network.helpers import ADMIN, CAP, exact_settings, run_jobs


def hybrid(on: bool, net) -> int:
    """Hybrid threshold: the follower count of the 5th most-followed account (so the top ~5 are merged), set and
    applied to the network (the job an operator runs after changing the setting)."""
    threshold = net.ref.q2(5)[-1][1] if on else 0
    set_network_settings(exact_settings(hybrid_threshold=threshold, cache_cap=CAP))
    celebrities.apply_threshold(get_db(), net.name)
    return threshold


def check_all(client, net, extra=()) -> None:
    ref = net.ref
    accounts = sample_accounts(ref, tuple(extra))
    for on in (False, True, False):
        hybrid(on, net)
        check_home(client, net.name, ref, accounts)
    check_search(client, net.name, ref)


def _pick(ref):
    """A celebrity C (top-1), a normal author A (rank 10 or below: posts sit on their authors' accounts, the
    top ones) with followers, a user U not following A who follows an author B with posts, and a post P of a
    top-10 author."""
    ranked = [a for a, _ in ref.q2(100)]
    celeb = ranked[0]
    author = next(a for a in ranked[10:] if ref.followers(a) and ref.q1(a))
    user = next(u for u in sorted(ref.usernames) if author not in ref.follows(u) and u != author
                and any(ref.q1(b) and b != celeb for b in ref.follows(u)) and len(ref.follows(u)) >= 3)
    unfollowed = next(b for b in sorted(ref.follows(user)) if ref.q1(b) and b != celeb)
    return celeb, author, user, unfollowed


def test_errors_and_openapi(net, client):
    n = net.name
    ref = net.ref
    some = next(iter(ref.usernames))
    assert client.get(f"/networks/{n}/accounts/1/home").status_code == 404
    assert client.get(f"/networks/{n}/accounts/1/posts").status_code == 404
    assert client.put(f"/networks/{n}/accounts/{some}/follows/{some}", headers=ADMIN).status_code == 422
    assert client.put(f"/networks/{n}/accounts/{some}/follows/1", headers=ADMIN).status_code == 404
    assert client.put(f"/networks/{n}/accounts/1/follows/{some}", headers=ADMIN).status_code == 404
    assert client.put(f"/networks/{n}/accounts/{some}/follows/{some}").status_code == 401
    assert client.put(f"/networks/{n}/posts/1/likes/{some}", headers=ADMIN).status_code == 404
    assert client.delete(f"/networks/{n}/posts/1", headers=ADMIN).status_code == 404
    assert client.post(f"/networks/{n}/posts", json={"author_id": 1, "content": "x"}, headers=ADMIN
                       ).status_code == 404
    assert client.post(f"/networks/{n}/posts", json={"author_id": some}, headers=ADMIN).status_code == 422
    assert client.get(f"/networks/{n}/search?q=").status_code == 422
    assert client.get(f"/networks/{n}/search", query_string={"q": "x" * 201}).status_code == 422
    assert client.get(f"/networks/{n}/search?q=...").json == {"words": [], "posts": [], "exact": True}
    assert client.get(f"/networks/{n}/accounts/{some}/home?order=random").status_code == 422
    assert client.get(f"/networks/{n}/accounts/{some}/posts?cursor=forged.cursor").status_code == 400
    assert client.get("/networks/other-net/rankings/top-accounts").status_code == 404
    spec = client.get("/openapi.json").json
    for path in ("/networks/{network}/accounts/{account_id}/home", "/networks/{network}/search",
                 "/networks/{network}/rankings/{ranking}", "/networks/{network}/rankings/{ranking}/history",
                 "/networks/{network}/posts", "/networks/{network}/posts/{post_id}/likes/{user_id}",
                 "/networks/{network}/accounts/{account_id}/follows/{target_id}",
                 "/networks/{network}/rankings/jobs/{job_id}"):
        assert path in spec["paths"], path
    queued = spec["paths"]["/networks/{network}/rankings"]["post"]["responses"]
    assert "202" in queued and "Location" in queued["202"]["headers"]


def _post(client, net, author: int, text: str, when: str | None = None) -> dict:
    body = {"author_id": author, "content": text} | ({"posted_at": when} if when else {})
    r = client.post(f"/networks/{net.name}/posts", json=body, headers=ADMIN)
    assert r.status_code == 201, r.json
    post = r.json["post"]
    net.ref.add_post(post["post_id"], author, datetime.fromisoformat(post["posted_at"]).astimezone(UTC), text)
    return r.json


def test_posts_fan_out_and_hybrid_merge(fresh_net, client):
    net = fresh_net
    ref = net.ref
    celeb, author, user, unfollowed = _pick(ref)
    threshold = hybrid(True, net)
    assert len(ref.followers(celeb)) >= threshold > len(ref.followers(author))
    # Build caches first, so fan-out (not a first-read build) has to carry the new posts.
    check_home(client, net.name, ref, sorted(ref.followers(author))[:5] + sorted(ref.followers(celeb))[:5])
    for who, text, when in ((author, "Zebra crossing love", None), (celeb, "Zebra celebrity tour LOVE", None),
                            (author, "An old zebra memory", "2016-06-01T12:00:00Z")):
        created = _post(client, net, who, text, when)
        assert created["fanned_out_to"] == (0 if who == celeb else len(ref.followers(who)))
        assert client.get(f"/networks/{net.name}/posts/{created['post']['post_id']}").json["content"] == text
    check_all(client, net, extra=sorted(ref.followers(author))[:5] + sorted(ref.followers(celeb))[:5])
    check_posts(client, net.name, ref, author)
    check_posts(client, net.name, ref, celeb)


def test_follow_and_unfollow(fresh_net, client):
    net = fresh_net
    ref = net.ref
    celeb, author, user, unfollowed = _pick(ref)
    hybrid(False, net)
    check_home(client, net.name, ref, [user])  # the cache exists before the follow
    r = client.put(f"/networks/{net.name}/accounts/{user}/follows/{author}", headers=ADMIN)
    assert r.status_code == 200 and r.json["changed"] is True
    ref.follow(user, author)
    assert r.json["followee"]["follower_count"] == len(ref.followers(author))
    assert r.json["follower"]["follows_count"] == len(ref.follows(user))
    again = client.put(f"/networks/{net.name}/accounts/{user}/follows/{author}", headers=ADMIN)
    assert again.status_code == 200 and again.json["changed"] is False
    assert again.json["followee"]["follower_count"] == len(ref.followers(author))
    check_home(client, net.name, ref, [user])
    r = client.delete(f"/networks/{net.name}/accounts/{user}/follows/{unfollowed}", headers=ADMIN)
    assert r.status_code == 200 and r.json["changed"] is True
    ref.unfollow(user, unfollowed)
    assert client.delete(f"/networks/{net.name}/accounts/{user}/follows/{unfollowed}", headers=ADMIN
                         ).json["changed"] is False
    # Follow a celebrity with hybrid on: merged at read time.
    hybrid(True, net)
    if celeb not in ref.follows(user):
        assert client.put(f"/networks/{net.name}/accounts/{user}/follows/{celeb}", headers=ADMIN).status_code == 200
        ref.follow(user, celeb)
    check_all(client, net, extra=[user, author, unfollowed])
    listed = client.get(f"/networks/{net.name}/accounts/{user}/follows?limit=5000").json
    assert {a["account_id"] for a in listed} == ref.follows(user)


def test_likes_and_unlikes(fresh_net, client):
    net = fresh_net
    ref = net.ref
    celeb, author, _user, _unfollowed = _pick(ref)
    hybrid(False, net)
    check_home(client, net.name, ref, sorted(ref.followers(author))[:6])
    target = ref.q1(author)[-1]  # an old post: likes must reach caches holding it, and only those
    fans = [u for u in sorted(ref.usernames) if (target, u) not in ref.likes][:30]
    for u in fans:
        r = client.put(f"/networks/{net.name}/posts/{target}/likes/{u}", headers=ADMIN)
        assert r.status_code == 200
        ref.like(target, u)
        assert r.json["like_count"] == ref.like_count(target)
    repeat = client.put(f"/networks/{net.name}/posts/{target}/likes/{fans[0]}", headers=ADMIN)
    assert repeat.json["like_count"] == ref.like_count(target)
    existing = next((p, u) for p, u in sorted(ref.likes) if p != target)
    r = client.delete(f"/networks/{net.name}/posts/{existing[0]}/likes/{existing[1]}", headers=ADMIN)
    ref.unlike(*existing)
    assert r.status_code == 200 and r.json["like_count"] == ref.like_count(existing[0])
    celeb_post = ref.q1(celeb)[3]
    hybrid(True, net)
    for u in fans[:10]:
        assert client.put(f"/networks/{net.name}/posts/{celeb_post}/likes/{u}", headers=ADMIN).status_code == 200
        ref.like(celeb_post, u)
    check_all(client, net, extra=sorted(ref.followers(author))[:6] + sorted(ref.followers(celeb))[:4])


def test_delete_posts(fresh_net, client):
    net = fresh_net
    ref = net.ref
    celeb, author, _user, _unfollowed = _pick(ref)
    hybrid(False, net)
    readers = sorted(ref.followers(author))[:6]
    check_home(client, net.name, ref, readers)
    new_post = _post(client, net, author, "A post deleted soon after")["post"]["post_id"]
    victims = [new_post, ref.q1(author)[1], ref.q1(celeb)[0], ref.q1(ref.q2(3)[2][0])[0]]
    likers = {post_id: sorted(u for p, u in ref.likes if p == post_id) for post_id in victims}
    assert any(likers.values()), "at least one deleted post has likes to purge"
    for post_id in dict.fromkeys(victims):
        r = client.delete(f"/networks/{net.name}/posts/{post_id}", headers=ADMIN)
        assert r.status_code == 200, r.json
        assert r.json["likes_to_purge"] == ref.like_count(post_id)
        ref.delete_post(post_id)
        assert client.get(f"/networks/{net.name}/posts/{post_id}").status_code == 404
        assert client.delete(f"/networks/{net.name}/posts/{post_id}", headers=ADMIN).status_code == 404
    check_all(client, net, extra=readers + sorted(ref.followers(celeb))[:4])  # before the purge: readers skip
    db = get_db()
    assert run_jobs(db).kinds["purge-likes"] >= len(set(victims))
    for post_id, users in likers.items():
        assert likes.recount(db, net.name, post_id) == 0
        for user in users:
            assert post_id not in {like["post_id"] for like in likes.likes_of_user(db, net.name, user, 10_000)}
    for account in (author, celeb):
        check_posts(client, net.name, ref, account)


def _ranked(client, net) -> dict:
    """POST /rankings (202 at once, a queued job), the worker's run, then the job's status and its snapshot."""
    r = client.post(f"/networks/{net.name}/rankings", headers=ADMIN)
    assert (r.status_code, r.json["status"], r.json["attempts"]) == (202, "queued", 0), r.json
    assert r.headers["Location"].endswith(r.json["status_url"])
    assert client.get(r.json["status_url"]).json["status"] == "queued"
    run_jobs(get_db())
    job = client.get(r.json["status_url"]).json
    assert (job["status"], job["attempts"], job["job_id"]) == ("done", 1, r.json["job_id"]), job
    found = {kind: client.get(f"/networks/{net.name}/rankings/top-{kind}", query_string={"at": job["taken_at"]}
                              ).json for kind in ("accounts", "followers")}
    assert found["accounts"]["snapshot_id"] == found["followers"]["snapshot_id"] == job["snapshot_id"]
    return {"snapshot_id": job["snapshot_id"], "taken_at": job["taken_at"], "accounts": found["accounts"]["accounts"],
            "followers": found["followers"]["followers"]}


def test_rankings_time_series(fresh_net, client):
    net = fresh_net
    ref = net.ref
    first = _ranked(client, net)
    check_rankings(first, ref)
    assert client.post(f"/networks/{net.name}/rankings").status_code == 401
    assert client.get(f"/networks/{net.name}/rankings/jobs/{uuid.uuid1()}").status_code == 404
    assert client.get(f"/networks/{net.name}/rankings/jobs/{uuid.uuid4()}").status_code == 404  # not time-based
    assert client.get(f"/networks/{net.name}/rankings/jobs/not-a-uuid").status_code == 404
    # Change the graph: a nobody gains followers and climbs into the top 100.
    climber = sorted(ref.usernames, key=lambda a: (len(ref.followers(a)), a))[0]
    needed = ref.q2(100)[-1][1] + 1
    for u in sorted(ref.usernames):
        if len(ref.followers(climber)) >= needed:
            break
        if u != climber and climber not in ref.follows(u):
            assert client.put(f"/networks/{net.name}/accounts/{u}/follows/{climber}", headers=ADMIN
                              ).status_code == 200
            ref.follow(u, climber)
    second = _ranked(client, net)
    check_rankings(second, ref)
    assert climber in [a["account_id"] for a in second["accounts"]]
    latest = client.get(f"/networks/{net.name}/rankings/top-accounts").json
    assert latest["snapshot_id"] == second["snapshot_id"]
    assert latest["accounts"] == second["accounts"]
    followers = client.get(f"/networks/{net.name}/rankings/top-followers").json
    assert followers["followers"] == second["followers"]
    at_first = client.get(f"/networks/{net.name}/rankings/top-accounts",
                          query_string={"at": first["taken_at"]}).json
    assert at_first["snapshot_id"] == first["snapshot_id"]
    assert at_first["accounts"] == first["accounts"]
    history = client.get(f"/networks/{net.name}/rankings/top-followers/history?limit=100").json["snapshots"]
    ids = [s["snapshot_id"] for s in history]
    assert ids[:2] == [second["snapshot_id"], first["snapshot_id"]]
    assert client.get(f"/networks/{net.name}/rankings/top-accounts",
                      query_string={"at": "2001-01-01T00:00:00Z"}).status_code == 404
    check_all(client, net, extra=[climber])


def test_authors_crossing_the_hybrid_threshold(fresh_net, client):
    """An author falling below the threshold gets fanned out (its followers' caches were built without its
    posts); one rising above it is merged at read time (its old cache rows are ignored, not duplicated)."""
    net = fresh_net
    ref = net.ref
    ranked = [a for a, _ in ref.q2(100)]
    faller = next(a for a in ranked[10:] if ref.q1(a) and len(ref.followers(a)) >= 3)
    threshold = len(ref.followers(faller))
    set_network_settings(exact_settings(hybrid_threshold=threshold, hybrid_hysteresis=0.0, cache_cap=CAP))
    celebrities.apply_threshold(get_db(), net.name)
    assert accounts.is_celebrity(get_db(), net.name, faller)
    readers = sorted(ref.followers(faller))[:8]  # a sample of its followers: each is checked the same way
    check_home(client, net.name, ref, readers)  # caches built while `faller` is merged at read time
    leaver = readers[0]
    r = client.delete(f"/networks/{net.name}/accounts/{leaver}/follows/{faller}", headers=ADMIN).json
    assert (r["changed"], r["celebrity_job"]) == (True, True)
    ref.unfollow(leaver, faller)
    assert len(ref.followers(faller)) == threshold - 1
    # The request returned before the demotion: still merged at read time, and Q4 is exact meanwhile.
    assert accounts.is_celebrity(get_db(), net.name, faller)
    check_home(client, net.name, ref, readers)
    assert run_jobs(get_db()).kinds["celebrity"] >= 1
    assert not accounts.is_celebrity(get_db(), net.name, faller)  # demoted: fanned out again
    check_home(client, net.name, ref, readers)
    # Rising: an author just below the threshold gains one follower.
    riser = next(a for a in ranked if len(ref.followers(a)) == threshold - 1 and a != faller and ref.q1(a))
    its_readers = sorted(ref.followers(riser))[:8]
    check_home(client, net.name, ref, its_readers)  # caches hold its posts (it was fanned out)
    newcomer = next(u for u in sorted(ref.usernames) if u != riser and riser not in ref.follows(u))
    r = client.put(f"/networks/{net.name}/accounts/{newcomer}/follows/{riser}", headers=ADMIN)
    assert (r.status_code, r.json["celebrity_job"]) == (200, True)
    ref.follow(newcomer, riser)
    assert not accounts.is_celebrity(get_db(), net.name, riser)  # the job has not run yet: still fanned out
    check_home(client, net.name, ref, its_readers + [newcomer])
    assert run_jobs(get_db()).kinds["celebrity"] >= 1
    assert accounts.is_celebrity(get_db(), net.name, riser)  # promoted: merged at read time
    check_home(client, net.name, ref, its_readers + [newcomer])


def test_hysteresis_keeps_a_celebrity_just_below_the_threshold(fresh_net, client):
    """With hysteresis h, a celebrity is fanned out again only below threshold x (1 - h): one lost follower
    does not flip it, and Q4 stays exact meanwhile."""
    net = fresh_net
    ref = net.ref
    celeb = ref.q2(1)[0][0]
    threshold = len(ref.followers(celeb))
    set_network_settings(exact_settings(hybrid_threshold=threshold, hybrid_hysteresis=0.5, cache_cap=CAP))
    celebrities.apply_threshold(get_db(), net.name)
    leaver = sorted(ref.followers(celeb))[0]
    r = client.delete(f"/networks/{net.name}/accounts/{leaver}/follows/{celeb}", headers=ADMIN).json
    assert (r["followee"]["follower_count"], r["celebrity_job"]) == (threshold - 1, False)
    ref.unfollow(leaver, celeb)
    run_jobs(get_db())
    assert accounts.is_celebrity(get_db(), net.name, celeb)
    check_home(client, net.name, ref, sorted(ref.followers(celeb))[:6] + [leaver])


def test_rebuild_endpoint_and_relation_lists(fresh_net, client):
    net = fresh_net
    ref = net.ref
    account = next(u for u in sorted(ref.usernames) if ref.follows(u))
    assert client.post(f"/networks/{net.name}/accounts/{account}/home/rebuild").status_code == 401
    r = client.post(f"/networks/{net.name}/accounts/{account}/home/rebuild", headers=ADMIN)
    assert r.status_code == 200
    followees = ref.follows(account)
    posts_followed = sum(1 for p in ref.posts.values() if p["author_id"] in followees)
    assert r.json["complete"] == (posts_followed <= CAP)
    assert r.json["entries"] >= min(CAP, posts_followed)
    check_home(client, net.name, ref, [account])
    followers = client.get(f"/networks/{net.name}/accounts/{account}/followers?limit=5000").json
    assert {a["account_id"] for a in followers} == ref.followers(account)
    assert client.get(f"/networks/{net.name}/accounts/{2**63}/home").status_code == 404
