"""Cleaning scripts against independent computations over the raw files."""

from __future__ import annotations

import collections
import csv
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from api.network import cleaning, generator
from api.network.common import generated_username
from tests.network.helpers import load_script
from tests.network.reference import Reference

ROOT = Path(__file__).resolve().parents[2]


def raw_edges(path: Path) -> set[tuple[int, int]]:
    """(followee, follower) pairs of a generated edges file, written as SNAP does: `follower followee`."""
    out = set()
    for line in path.read_text().splitlines():
        a, b = line.split()
        if a != b:
            out.add((int(b), int(a)))
    return out


def relation_sets(clean: Path) -> tuple[dict[int, set[int]], dict[int, set[int]]]:
    """followers and follows of each account, from relations.csv."""
    followers: dict[int, set[int]] = collections.defaultdict(set)
    follows: dict[int, set[int]] = collections.defaultdict(set)
    with (clean / "relations.csv").open() as f:
        for r in csv.DictReader(f):
            side = followers if r["rel_type"] == "follower" else follows
            side[int(r["account_id"])].add(int(r["target_id"]))
    return dict(followers), dict(follows)


TINY_EDGES = "1 2\n1 3\n2 3\n3 1\n1 2\n4 4\n"  # one duplicate, one self-loop
TINY_POSTS = ("author,content,country,date_time,id,language,latitude,longitude,number_of_likes,number_of_shares\n"
              "katyperry,one,,01/02/2017 10:00,11,en,,,0,0\n"
              "katyperry,two,,02/02/2017 10:00,12,en,,,0,0\n"
              "rihanna,three,,03/02/2017 10:00,13,en,,,0,0\n")


def test_edge_order_both_readings(tmp_path):
    """A tiny edges file read both ways; the expected sets are worked out by hand."""
    edges, posts = tmp_path / "edges.txt", tmp_path / "tweets.csv"
    edges.write_text(TINY_EDGES)
    posts.write_text(TINY_POSTS)
    snap, seed = tmp_path / "snap", tmp_path / "seed"
    # SNAP's reading, the default: "A B" = A follows B, so 1->2, 1->3, 2->3, 3->1.
    report = cleaning.clean_relations(edges, posts, snap)
    assert report.extra["edge_order"] == "follower-followee"
    assert report.dropped == {"duplicate edge": 1, "self-follow": 1}
    assert relation_sets(snap) == ({1: {3}, 2: {1}, 3: {1, 2}}, {1: {2, 3}, 2: {3}, 3: {1}})
    # Seed 004's reading: "A B" = B follows A, so 2->1, 3->1, 3->2, 1->3.
    cleaning.clean_relations(edges, posts, seed, edge_order="followee-follower")
    assert relation_sets(seed) == ({1: {2, 3}, 2: {3}, 3: {1}}, {1: {3}, 2: {1}, 3: {1, 2}})
    # Counts and names follow the reading: the author with the most posts takes the most-followed account.
    with (snap / "accounts.csv").open() as f:
        assert [tuple(r.values()) for r in csv.DictReader(f)] == [
            ("1", "rihanna", "1", "2"), ("2", generated_username(2), "1", "1"), ("3", "katyperry", "2", "1")]
    with (seed / "accounts.csv").open() as f:
        assert [tuple(r.values()) for r in csv.DictReader(f)] == [
            ("1", "katyperry", "2", "1"), ("2", "rihanna", "1", "1"), ("3", generated_username(3), "1", "2")]
    # The reference model of the query tests reads the raw file the same way.
    for order, clean in (("follower-followee", snap), ("followee-follower", seed)):
        cleaning.clean_posts(posts, clean / "accounts.csv", clean, like_rate=0.0)
        ref = Reference(edges, clean, edge_order=order)
        followers, follows = relation_sets(clean)
        assert {a: ref.followers(a) for a in (1, 2, 3)} == followers
        assert {a: ref.follows(a) for a in (1, 2, 3)} == follows
    with pytest.raises(ValueError, match="user-follower"):
        cleaning.clean_relations(edges, posts, tmp_path / "bad", edge_order="user-follower")
    assert not (tmp_path / "bad").exists()


def test_generated_edges_in_either_order_clean_to_the_same_relations(tmp_path):
    for order in ("follower-followee", "followee-follower"):
        raw = tmp_path / order
        generator.generate_edges(raw.with_suffix(".txt"), accounts=60, edges=300, seed=3, edge_order=order)
        cleaning.clean_relations(raw.with_suffix(".txt"), None, raw, edge_order=order)
    a, b = (tmp_path / "follower-followee").with_suffix(".txt"), (tmp_path / "followee-follower").with_suffix(".txt")
    assert [" ".join(reversed(line.split())) for line in a.read_text().splitlines()] == b.read_text().splitlines()
    assert ((tmp_path / "follower-followee" / "relations.csv").read_bytes()
            == (tmp_path / "followee-follower" / "relations.csv").read_bytes())


def test_relations_two_rows_per_distinct_edge(net_files):
    edges_path, posts_path, clean = net_files
    edges = raw_edges(edges_path)
    with (clean / "relations.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * len(edges)
    got = collections.Counter((r["rel_type"], int(r["account_id"]), int(r["target_id"])) for r in rows)
    want = collections.Counter()
    for user, follower in edges:  # (followee, follower)
        want[("follower", user, follower)] += 1
        want[("follows", follower, user)] += 1
    assert got == want


def test_authors_take_most_followed_ids_and_names_are_deterministic(net_files, tmp_path):
    edges_path, posts_path, clean = net_files
    edges = raw_edges(edges_path)
    followers = collections.Counter(u for u, _ in edges)
    follows = collections.Counter(f for _, f in edges)
    with posts_path.open(newline="", encoding="utf-8") as f:
        authors = collections.Counter(r["author"] for r in csv.DictReader(f))
    author_order = sorted(authors, key=lambda a: (-authors[a], a))
    ids = sorted(set(followers) | set(follows), key=lambda a: (-followers[a], a))
    with (clean / "accounts.csv").open() as f:
        accounts = {int(r["account_id"]): r for r in csv.DictReader(f)}
    assert set(accounts) == set(ids)
    for author, account in zip(author_order, ids, strict=False):
        assert accounts[account]["username"] == author
    for account, row in accounts.items():
        assert int(row["follower_count"]) == followers[account]
        assert int(row["follows_count"]) == follows[account]
    names = [r["username"] for r in accounts.values()]
    assert len(set(names)) == len(names)
    # Same input, same output.
    cleaning.clean_relations(edges_path, posts_path, tmp_path)
    assert (tmp_path / "accounts.csv").read_bytes() == (clean / "accounts.csv").read_bytes()


def test_tweets_repair_ids_dates_owners_and_likes(net_files):
    edges_path, posts_path, clean = net_files
    with posts_path.open(newline="", encoding="utf-8") as f:
        raw = list(csv.DictReader(f))
    kept, seen = [], set()
    for r in raw:
        key = tuple(r.values())
        try:
            when = datetime.strptime(r["date_time"], "%d/%m/%Y %H:%M").replace(tzinfo=UTC)
        except ValueError:
            continue
        if key in seen:
            continue
        seen.add(key)
        kept.append((r, when))
    with (clean / "posts.csv").open(newline="", encoding="utf-8") as f:
        cleaned = list(csv.DictReader(f))
    assert len(cleaned) == len(kept) < len(raw)
    assert len({c["post_id"] for c in cleaned}) == len(cleaned)
    with (clean / "accounts.csv").open() as f:
        accounts = sorted(csv.DictReader(f), key=lambda r: (-int(r["follower_count"]), int(r["account_id"])))
    by_name = {r["username"]: int(r["account_id"]) for r in accounts}
    plain_ids = collections.Counter(r["id"] for r, _ in kept if r["id"].isdigit())
    with (clean / "likes.csv").open() as f:
        likes = collections.defaultdict(set)
        rows = 0
        for r in csv.DictReader(f):
            likes[r["post_id"]].add(r["user_id"])
            rows += 1
    assert rows == sum(len(v) for v in likes.values())  # no repeated (post, user)
    for (r, when), c in zip(kept, cleaned, strict=True):
        assert c["original_author"] == r["author"] and c["content"] == r["content"]
        assert datetime.fromisoformat(c["posted_at"].replace("Z", "+00:00")) == when
        assert c["posted_at"].endswith("Z")
        assert int(c["author_id"]) == by_name[r["author"]] and c["author_username"] == r["author"]
        if r["id"].isdigit() and plain_ids[r["id"]] == 1:
            assert c["post_id"] == r["id"]
        assert len(likes.get(c["post_id"], ())) == min(round(int(r["number_of_likes"]) * 0.004), len(accounts))
    assert any("\n" in c["content"] for c in cleaned)
    assert any("E+17" in c["original_id"] for c in cleaned)


def test_authors_own_or_spread(tmp_path):
    """By default a post sits on the account named after its author; `spread` is the old behaviour; an author
    without an account of that name is spread and reported."""
    edges, posts = tmp_path / "edges.txt", tmp_path / "tweets.csv"
    edges.write_text(TINY_EDGES)
    posts.write_text(TINY_POSTS)
    cleaning.clean_relations(edges, posts, tmp_path)  # SNAP reading: katyperry = account 3, rihanna = 1
    report = cleaning.clean_posts(posts, tmp_path / "accounts.csv", tmp_path / "own", like_rate=0.0)
    with (tmp_path / "own" / "posts.csv").open() as f:
        owners = [(r["post_id"], r["author_id"], r["author_username"], r["original_author"]) for r in csv.DictReader(f)]
    assert owners == [("11", "3", "katyperry", "katyperry"), ("12", "3", "katyperry", "katyperry"),
                      ("13", "1", "rihanna", "rihanna")]
    assert report.extra["authors"] == "own" and report.extra["posts_on_own_account"] == 3
    assert "spread_posts_by_author" not in report.extra
    # Spread over the top 2 accounts (3 and then 1 or 2 by id) by a hash of the post id: the original author
    # stays on every row.
    report = cleaning.clean_posts(posts, tmp_path / "accounts.csv", tmp_path / "spread", like_rate=0.0,
                                  authors="spread", top=2)
    with (tmp_path / "spread" / "posts.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["author_id"] for r in rows} <= {"3", "1"}
    assert [r["original_author"] for r in rows] == ["katyperry", "katyperry", "rihanna"]
    assert report.extra["spread_posts_by_author"] == {"katyperry": 2, "rihanna": 1}
    assert report.extra["posts_on_own_account"] == sum(
        (r["author_id"], r["original_author"]) in {("3", "katyperry"), ("1", "rihanna")} for r in rows)
    # An author the accounts file does not name (another posts file): spread, and said so.
    other = tmp_path / "other.csv"
    other.write_text(TINY_POSTS.replace("rihanna", "shakira"))
    report = cleaning.clean_posts(other, tmp_path / "accounts.csv", tmp_path / "other", like_rate=0.0, top=1)
    with (tmp_path / "other" / "posts.csv").open() as f:
        assert [(r["author_id"], r["original_author"]) for r in csv.DictReader(f)] == [
            ("3", "katyperry"), ("3", "katyperry"), ("3", "shakira")]
    assert report.extra["posts_on_own_account"] == 2 and report.extra["spread_posts_by_author"] == {"shakira": 1}
    with pytest.raises(ValueError, match="authors"):
        cleaning.clean_posts(posts, tmp_path / "accounts.csv", tmp_path / "x", authors="hash")


def test_cleaning_progress_adds_up_to_the_input(net_files, tmp_path, monkeypatch):
    """The bars' totals (lines, CSV rows) equal the sum of the increments, across the batching threshold."""
    edges_path, posts_path, _ = net_files
    monkeypatch.setattr(cleaning, "_PROGRESS_EVERY", 7)  # several batches and a remainder on small files
    lines = len(edges_path.read_text().splitlines())
    with posts_path.open(newline="", encoding="utf-8") as f:
        rows = sum(1 for _ in csv.DictReader(f))
    assert cleaning.count_lines(edges_path) == lines and cleaning.count_raw_posts(posts_path) == rows
    calls: list[int] = []
    report = cleaning.clean_relations(edges_path, posts_path, tmp_path, progress=calls.append)
    assert sum(calls) == lines == report.read and max(calls) <= 7
    calls.clear()
    report = cleaning.clean_posts(posts_path, tmp_path / "accounts.csv", tmp_path, progress=calls.append)
    assert sum(calls) == rows == report.read


def test_real_format_quirks(tmp_path):
    """A hand-written file in the real format: multi-line quoted content, colliding scientific ids, and a
    byte-order mark as spreadsheet exports write it."""
    posts = tmp_path / "tweets.csv"
    posts.write_text(
        "\ufeffauthor,content,country,date_time,id,language,latitude,longitude,number_of_likes,number_of_shares\n"
        'katyperry,"Line one,\nline ""two""",,04/03/2017 11:47,5.34896E+17,en,,,7900,3472\n'
        "katyperry,Other post,,05/03/2017 09:00,5.34896E+17,en,,,10,2\n"
        "rihanna,Plain id,US,12/01/2017 19:52,819633000000000001,en,40.1,-70.2,0,0\n"
        "rihanna,Same plain id,US,12/01/2017 19:53,819633000000000001,en,,,1,0\n"
        "rihanna,Bad date,US,32/01/2017 19:53,819633000000000002,en,,,1,0\n", encoding="utf-8")
    edges = tmp_path / "edges.txt"
    edges.write_text("1 2\n1 3\n2 3\n3 1\n1 2\n4 4\n")
    rel = cleaning.clean_relations(edges, posts, tmp_path)
    assert rel.dropped == {"duplicate edge": 1, "self-follow": 1}
    report = cleaning.clean_posts(posts, tmp_path / "accounts.csv", tmp_path, like_rate=0.0)
    assert report.dropped == {"unparseable date_time": 1}
    assert report.repaired == {"id in scientific notation or invalid": 2, "id collision": 1}
    with (tmp_path / "posts.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["posted_at"] for r in rows] == ["2017-03-04T11:47:00Z", "2017-03-05T09:00:00Z",
                                              "2017-01-12T19:52:00Z", "2017-01-12T19:53:00Z"]
    assert rows[0]["content"] == 'Line one,\nline "two"'
    assert len({r["post_id"] for r in rows}) == 4 and rows[2]["post_id"] == "819633000000000001"
    # Stable: a second run gives the same ids.
    again = tmp_path / "again"
    cleaning.clean_posts(posts, tmp_path / "accounts.csv", again, like_rate=0.0)
    assert (again / "posts.csv").read_bytes() == (tmp_path / "posts.csv").read_bytes()


def test_cleaning_scripts_cli(net_files, tmp_path):
    edges_path, posts_path, _ = net_files
    runner = CliRunner()
    fr = load_script("cleaning_scripts/follower_relations.py")
    tw = load_script("cleaning_scripts/tweets.py")
    assert runner.invoke(fr.main, ["--help"]).exit_code == 0
    assert runner.invoke(tw.main, ["--help"]).exit_code == 0
    result = runner.invoke(fr.main, ["--edges", str(edges_path), "--posts", str(posts_path), "--out",
                                     str(tmp_path), "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dropped"]["self-follow"] >= 1 and report["dropped"]["duplicate edge"] >= 1
    assert report["edge_order"] == "follower-followee"
    seed_dir = tmp_path / "seed"
    result = runner.invoke(fr.main, ["--edges", str(edges_path), "--posts", str(posts_path), "--out",
                                     str(seed_dir), "--edge-order", "followee-follower"])  # with its bar
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["edge_order"] == "followee-follower"
    followers, _ = relation_sets(tmp_path)
    _, follows = relation_sets(seed_dir)
    assert followers == follows  # the other reading swaps the two sides
    result = runner.invoke(fr.main, ["--edges", str(edges_path), "--posts", str(posts_path), "--out",
                                     str(tmp_path / "x"), "--edge-order", "user-follower", "--quiet"])
    assert result.exit_code == 2
    result = runner.invoke(tw.main, ["--posts", str(posts_path), "--accounts", str(tmp_path / "accounts.csv"),
                                     "--out", str(tmp_path), "--like-rate", "0.004", "--seed", "7", "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dropped"] == {"unparseable date_time": 1, "exact duplicate row": 2}
    assert report["authors"] == "own"
    result = runner.invoke(tw.main, ["--posts", str(posts_path), "--accounts", str(tmp_path / "accounts.csv"),
                                     "--out", str(tmp_path / "spread"), "--authors", "spread", "--top", "5"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["spread_over"] == 5
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    result = runner.invoke(tw.main, ["--posts", str(bad), "--accounts", str(tmp_path / "accounts.csv"), "--out",
                                     str(tmp_path / "x"), "--quiet"])
    assert result.exit_code == 1 and "missing columns" in result.output
