"""Cleaning scripts against independent computations over the raw files."""

from __future__ import annotations

import collections
import csv
import json
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from api.network import cleaning
from tests.network.helpers import load_script

ROOT = Path(__file__).resolve().parents[2]


def raw_edges(path: Path) -> set[tuple[int, int]]:
    out = set()
    for line in path.read_text().splitlines():
        a, b = line.split()
        if a != b:
            out.add((int(a), int(b)))  # (user, follower)
    return out


def test_relations_two_rows_per_distinct_edge(net_files):
    edges_path, posts_path, clean = net_files
    edges = raw_edges(edges_path)
    with (clean / "relations.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * len(edges)
    got = collections.Counter((r["rel_type"], int(r["account_id"]), int(r["target_id"])) for r in rows)
    want = collections.Counter()
    for user, follower in edges:
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


def test_tweets_repair_ids_dates_spread_and_likes(net_files):
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
    top100 = {int(r["account_id"]) for r in accounts[:100]}
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
        assert int(c["author_id"]) in top100
        if r["id"].isdigit() and plain_ids[r["id"]] == 1:
            assert c["post_id"] == r["id"]
        assert len(likes.get(c["post_id"], ())) == min(round(int(r["number_of_likes"]) * 0.004), len(accounts))
    assert any("\n" in c["content"] for c in cleaned)
    assert any("E+17" in c["original_id"] for c in cleaned)


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
    result = runner.invoke(tw.main, ["--posts", str(posts_path), "--accounts", str(tmp_path / "accounts.csv"),
                                     "--out", str(tmp_path), "--like-rate", "0.004", "--seed", "7", "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dropped"] == {"unparseable date_time": 1, "exact duplicate row": 2}
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    result = runner.invoke(tw.main, ["--posts", str(bad), "--accounts", str(tmp_path / "accounts.csv"), "--out",
                                     str(tmp_path / "x"), "--quiet"])
    assert result.exit_code == 1 and "missing columns" in result.output
