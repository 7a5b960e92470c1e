"""The share index (cql/0320, issue 32): every post whose original author is another account's name is listed
under that name, so an erasure of the account finds the shares whose text does not name it. Loaded shares are
indexed as the file says (names compared without case; a post by its own original author is not a share), a
deleted post and an expired one leave the index, and `chronicle network index-shares` writes the index of a
network loaded before it. Expected rows come from the file the test writes, not from the code's reads."""

from __future__ import annotations

import csv
import random
from datetime import UTC, date, datetime, timedelta

from click.testing import CliRunner

from api.cli import chronicle
from api.network import loader, posts
from api.network.cleaning import CLEAN_POST_COLUMNS
from api.retention import network as retention
from api.retention import policies
from tests.network.helpers import ADMIN

NAMES = ["Ada_Shared", "bob_shared", "CY_SHARED"]


def _index(db, network: str) -> set[tuple[str, str, int, int]]:
    """Brute force, test only: every (original key, month, post id, sharer) row of the network."""
    rows = db.execute_raw(f"SELECT original_key, month, post_id, author_id FROM {db.keyspace}.shares_by_original "
                          f"WHERE network = '{network}' ALLOW FILTERING")
    return {(r.original_key, r.month, r.post_id, r.author_id) for r in rows}


def _listed(db, network: str) -> set[tuple[str, str]]:
    rows = db.execute_raw(f"SELECT original_key, month FROM {db.keyspace}.share_months_by_original "
                          f"WHERE network = '{network}' ALLOW FILTERING")
    return {(r.original_key, r.month) for r in rows}


def _write_shares(fresh_net, path) -> dict[int, tuple[str, datetime, int]]:
    """A posts file of 40 shares by the network's accounts, of three names in varying case over two years, plus
    posts naming their own author as original (not shares); returns post id -> (name, posted_at, sharer)."""
    rng = random.Random(32)
    accounts = sorted(fresh_net.ref.usernames)
    shares: dict[int, tuple[str, datetime, int]] = {}
    with path.open("w", newline="", encoding="utf-8") as handle:
        rows = csv.writer(handle)
        rows.writerow(CLEAN_POST_COLUMNS)
        for i in range(48):
            post_id = max(fresh_net.ref.posts) + 5_000_000 + i
            sharer = rng.choice(accounts)
            posted = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=rng.randrange(700), seconds=i)
            own = i % 6 == 5  # its author's own name: what a loaded file writes on every post
            name = fresh_net.ref.usernames[sharer].upper() if own else rng.choice(NAMES)
            text = f"zqsharetest {i}" + (f" RT @{name}" if i % 3 == 0 else "")
            rows.writerow([post_id, sharer, fresh_net.ref.usernames[sharer], rng.choice([name, name.swapcase()]), "",
                           posted.isoformat().replace("+00:00", "Z"), text, "en", "", "", "", "", "0"])
            if not own:
                shares[post_id] = (name, posted, sharer)
    return shares


def _expected(shares: dict[int, tuple[str, datetime, int]]) -> set[tuple[str, str, int, int]]:
    return {(posts.original_key(name.lower()), f"{at.year:04d}-{at.month:02d}", post_id, sharer)
            for post_id, (name, at, sharer) in shares.items()}


def test_shares_are_indexed_by_their_original_author_and_leave_it_with_their_post(client, db, fresh_net, tmp_path):
    n = fresh_net.name
    (tmp_path / "likes.csv").write_text("post_id,user_id\n")
    shares = _write_shares(fresh_net, tmp_path / "posts.csv")
    assert _index(db, n) == set()  # the generated network's posts are each by their own original author
    loader.load(db, "posts", n, tmp_path / "posts.csv", likes_path=tmp_path / "likes.csv")
    expected = _expected(shares)
    assert len({key for key, *_rest in expected}) == len(NAMES) and _index(db, n) == expected
    assert _listed(db, n) == {(key, month) for key, month, *_rest in expected}
    # What an erasure reads: the shares of one name, whatever its case.
    months, found = posts.shares_of(db, n, posts.original_key("ADA_shared"))
    assert sorted(found) == sorted((p, s) for p, (name, _at, s) in shares.items() if name == "Ada_Shared")
    assert sorted(months) == sorted({m for key, m, *_r in expected if key == posts.original_key("ada_shared")})

    # A deleted share leaves the index with its post.
    gone = sorted(shares)[0]
    assert client.delete(f"/networks/{n}/posts/{gone}", headers=ADMIN).status_code == 200
    del shares[gone]
    assert _index(db, n) == _expected(shares)

    # Expired shares leave it with their posts (the cutoff in the middle of the shares' two years).
    cutoff = date(2025, 1, 1)
    today = datetime.now(UTC).date()
    policies.set_policy(db, f"network:{n}", policies.WHOLE, (today - cutoff).days, by="test")
    retention.run(db, n, today=today)
    kept = {p: s for p, s in shares.items() if s[1].date() >= cutoff}
    assert len(kept) < len(shares) and kept
    assert _index(db, n) == _expected(kept)


def test_index_shares_writes_the_index_of_a_network_loaded_before_it(db, fresh_net, tmp_path):
    n = fresh_net.name
    (tmp_path / "likes.csv").write_text("post_id,user_id\n")
    shares = _write_shares(fresh_net, tmp_path / "posts.csv")
    loader.load(db, "posts", n, tmp_path / "posts.csv", likes_path=tmp_path / "likes.csv")
    expected = _expected(shares)
    # As a network loaded before cql/0320 has it: no index.
    for key, month in _listed(db, n):
        db.execute_raw(f"DELETE FROM {db.keyspace}.shares_by_original WHERE network = '{n}' AND original_key = "
                       f"'{key}' AND month = '{month}'")
        db.execute_raw(f"DELETE FROM {db.keyspace}.share_months_by_original WHERE network = '{n}' AND "
                       f"original_key = '{key}'")
    assert _index(db, n) == set() and _listed(db, n) == set()

    dry = CliRunner().invoke(chronicle, ["network", "index-shares", "--network", n, "--dry-run", "--quiet"])
    assert dry.exit_code == 0, dry.output
    assert '"shares_indexed": 40' in dry.output and _index(db, n) == set()
    done = CliRunner().invoke(chronicle, ["network", "index-shares", "--network", n, "--quiet"])
    assert done.exit_code == 0, done.output
    assert f'"accounts": {len(fresh_net.ref.usernames)}' in done.output
    assert _index(db, n) == expected and _listed(db, n) == {(key, month) for key, month, *_rest in expected}
    again = CliRunner().invoke(chronicle, ["network", "index-shares", "--network", n, "--quiet"])
    assert again.exit_code == 0 and _index(db, n) == expected  # idempotent: a re-run finishes a stopped one
