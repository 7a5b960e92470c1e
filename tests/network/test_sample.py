"""The built-in sample network loads through the same functions, and loading it twice changes nothing."""

from __future__ import annotations

import csv
import tempfile
from collections import Counter
from pathlib import Path

from api.network import top100
from api.network.sample import SAMPLE_NETWORK, build_sample_files, load_sample
from tests.network.checks import check_home, check_search, sample_accounts
from tests.network.reference import Reference


def test_sample_loads_idempotently(db, client):
    first = load_sample(db)
    snap1 = top100.compute_rankings(db, SAMPLE_NETWORK)
    second = load_sample(db)
    snap2 = top100.compute_rankings(db, SAMPLE_NETWORK)
    assert first == second
    assert snap1["accounts"] == snap2["accounts"] and snap1["followers"] == snap2["followers"]
    with tempfile.TemporaryDirectory() as tmp:
        build_sample_files(Path(tmp))
        ref = Reference(Path(tmp) / "raw" / "twitter_combined.txt", Path(tmp))
        assert [(a["account_id"], a["follower_count"]) for a in snap2["accounts"]] == ref.q2()
        assert [(a["account_id"], a["follows_top"]) for a in snap2["followers"]] == ref.q3()
        check_home(client, SAMPLE_NETWORK, ref, sample_accounts(ref)[:15])
        check_search(client, SAMPLE_NETWORK, ref)
        # The load builds the activity days of the posts (UTC days): counted here from the cleaned file.
        with (Path(tmp) / "posts.csv").open(newline="") as posts:
            rows = list(csv.DictReader(posts))
    per_author_day = Counter((r["author_id"], r["posted_at"][:10]) for r in rows)
    assert first["activity_days"] == len(per_author_day)
    for (author, day), count in sorted(per_author_day.items())[:20]:
        found = client.get(f"/networks/{SAMPLE_NETWORK}/accounts/{author}/activity?from={day}&summary=true").json
        assert found["days"][0]["counts"].get("post") == count, (author, day)
