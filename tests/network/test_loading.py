"""Loading: every query equals the reference right after loading, and re-running the loader (in one or
several processes) changes nothing, counts included."""

from __future__ import annotations

import collections
import secrets

import api.db
from api.network import cleaning, loader, top100
from tests.network.checks import check_home, check_posts, check_rankings, check_search, sample_accounts


def test_loaded_network_answers_like_the_reference(net, client):
    ref = net.ref
    for account, _ in ref.q2(100):
        check_posts(client, net.name, ref, account)
    check_search(client, net.name, ref)
    assert check_home(client, net.name, ref, sample_accounts(ref)) > 0


def test_reloading_is_harmless(fresh_net, db, settings, client):
    net = fresh_net
    before = top100.compute_rankings(db, net.name)
    again = loader.load_network(db, net.name, net.clean)
    assert again["relations"] == 2 * len(net.ref.edges)
    loader.load_parallel(settings, "likes", net.name, net.clean / "likes.csv", workers=2)
    assert loader.load_parallel(settings, "relations", net.name, net.clean / "relations.csv", workers=3
                                ) == 2 * len(net.ref.edges)
    loader.load_parallel(settings, "accounts", net.name, net.clean / "accounts.csv", workers=2)
    after = top100.compute_rankings(db, net.name)
    check_rankings(before, net.ref)
    check_rankings(after, net.ref)
    check_search(client, net.name, net.ref)


# A hand-made network. SNAP reading ("A B" = A follows B): 20 has followers 10, 30, 40; 30 has 10 and 40;
# 10 has 20; 40 has none. Authors by posts: katyperry (3) -> 20, rihanna (2) -> 30, shakira (1) -> 10.
EDGES = "10 20\n30 20\n40 20\n10 30\n40 30\n20 10\n"
POSTS = ("author,content,country,date_time,id,language,latitude,longitude,number_of_likes,number_of_shares\n"
         "rihanna,r1,,01/02/2017 10:00,101,en,,,2000,0\n"
         "katyperry,k1,,02/02/2017 10:00,102,en,,,0,0\n"
         "shakira,s1,,03/02/2017 10:00,103,en,,,1000,0\n"
         "katyperry,k2,,04/02/2017 10:00,104,en,,,0,0\n"
         "rihanna,r2,,05/02/2017 10:00,105,en,,,0,0\n"
         "katyperry,k3,,06/02/2017 10:00,106,en,,,3000,0\n")
OWN = {20: ("katyperry", [106, 104, 102]), 30: ("rihanna", [105, 101]), 10: ("shakira", [103]), 40: (None, [])}


def _hand_made(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "edges.txt").write_text(EDGES)
    (raw / "tweets.csv").write_text(POSTS)
    clean = tmp_path / "clean"
    cleaning.clean_relations(raw / "edges.txt", raw / "tweets.csv", clean)
    cleaning.clean_posts(raw / "tweets.csv", clean / "accounts.csv", clean, like_rate=0.001)
    return clean


def test_each_author_posts_sit_under_the_account_named_after_them(db, client, tmp_path, monkeypatch):
    clean = _hand_made(tmp_path)
    network = f"own{secrets.token_hex(4)}"
    # Slices of 2 writes end exactly at row ends (an account is 2 writes); progress after every write.
    monkeypatch.setattr(api.db, "_MANY_SLICE", 2)
    monkeypatch.setattr(api.db, "_PROGRESS_EVERY", 1)
    totals: dict[str, int] = {}
    done: dict[str, int] = collections.Counter()

    def factory(kind: str, total: int):
        totals[kind] = total
        return lambda n: done.update({kind: n})

    loader.load_network(db, network, clean, progress_factory=factory)
    # Rows of each file, counted by hand: 4 accounts, 2 x 6 relation rows, 6 posts, 2 + 1 + 3 likes.
    assert totals == dict(done) == {"accounts": 4, "relations": 12, "posts": 6, "likes": 6}
    for account, (name, post_ids) in OWN.items():
        r = client.get(f"/networks/{network}/accounts/{account}/posts?limit=25")
        assert r.status_code == 200, r.json
        got = r.json["posts"]
        assert [p["post_id"] for p in got] == post_ids
        assert all(p["author_username"] == name and p["original_author"] == name for p in got)


def test_parallel_load_reports_every_row_once(db, settings, tmp_path):
    clean = _hand_made(tmp_path)
    network = f"par{secrets.token_hex(4)}"
    for kind, rows in (("accounts", 4), ("relations", 12), ("posts", 6), ("likes", 6)):
        calls: list[int] = []
        loader.load_parallel(settings, kind, network, clean / f"{kind}.csv", workers=2,
                             likes_path=clean / "likes.csv", progress=calls.append)
        assert sum(calls) == rows == loader.count_rows(clean / f"{kind}.csv"), kind
