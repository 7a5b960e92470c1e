"""Comparisons of the API's answers with the brute-force reference."""

from __future__ import annotations

from api.network.settings import network_settings
from api.network.tokens import query_terms
from tests.network.reference import Reference

Q6_QUERIES = ["love", "the", "love tour", "LOVE Tour", "Straße", "CAFÉ", "mañana the", "happy birthday world",
              "the a to of and", "the a to of and love", "zebra", "nonexistentword", "love nonexistentword"]


def sample_accounts(ref: Reference, extra: tuple[int, ...] = ()) -> list[int]:
    """A fixed sample: followers of the top accounts (two each: ~34 accounts, each checked in two orders and three
    hybrid passes by `check_all`), accounts following many, a few nobodies, plus extras."""
    top = [a for a, _ in ref.q2(10)]
    picked: list[int] = []
    for a in top:
        picked.extend(sorted(ref.followers(a))[:2])
    picked.extend(a for a, _ in ref.q3(8))
    picked.extend(sorted(ref.usernames)[:4])
    picked.extend(extra)
    return list(dict.fromkeys(picked))


def check_home(client, network: str, ref: Reference, account_ids: list[int]) -> int:
    cap = network_settings().cache_cap
    checked = 0
    for account in account_ids:
        for order in ("newest", "likes"):
            r = client.get(f"/networks/{network}/accounts/{account}/home?order={order}")
            assert r.status_code == 200, r.json
            followers, follows, want = ref.q4(account, order, cap)
            body = r.json
            assert (body["account"]["follower_count"], body["account"]["follows_count"]) == (followers, follows)
            got = [p["post_id"] for p in body["posts"]]
            detail = [(p, ref.like_count(p), ref.posts[p]["posted_at"].isoformat(), p in want, p in got)
                      for p in dict.fromkeys(got + want)]
            assert got == want, (account, order, network_settings().hybrid_threshold, detail)
            assert [p["like_count"] for p in body["posts"]] == [ref.like_count(p) for p in want]
            checked += 1
    return checked


def check_posts(client, network: str, ref: Reference, account: int, page: int = 7) -> None:
    got, cursor = [], None
    while True:
        url = f"/networks/{network}/accounts/{account}/posts?limit={page}" + (f"&cursor={cursor}" if cursor else "")
        r = client.get(url)
        assert r.status_code == 200, r.json
        got.extend(p["post_id"] for p in r.json["posts"])
        cursor = r.json["next_cursor"]
        if not cursor:
            break
    assert got == ref.q1(account)


def check_search(client, network: str, ref: Reference) -> None:
    for q in Q6_QUERIES:
        r = client.get(f"/networks/{network}/search", query_string={"q": q})
        assert r.status_code == 200, r.json
        want = ref.q6(query_terms(q))
        assert [p["post_id"] for p in r.json["posts"]] == want, q
        assert [p["like_count"] for p in r.json["posts"]] == [ref.like_count(p) for p in want]


def check_rankings(snapshot: dict, ref: Reference) -> None:
    assert [(a["account_id"], a["follower_count"]) for a in snapshot["accounts"]] == ref.q2()
    assert [(a["account_id"], a["follows_top"]) for a in snapshot["followers"]] == ref.q3()
    assert [a["username"] for a in snapshot["accounts"]] == [ref.usernames[a] for a, _ in ref.q2()]
