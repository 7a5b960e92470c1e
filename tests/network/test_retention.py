"""Retention of a follower network (issue 32): the generated network's posts span 2009-2017; a policy whose
cutoff is the median post time expires half of them from every table (Q1 pages and Q6 searches equal the
brute-force reference with those posts deleted, no posting, like or row of them left), a held account keeps its
own; then a run dated ahead expires everything else, activity and snapshots included."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, date, datetime, timedelta

from click.testing import CliRunner

from api.activity import dirty, service
from api.activity.settings import ActivitySettings, set_activity_settings
from api.cli import chronicle
from api.network import accounts
from api.retention import network as retention
from api.retention import policies
from tests.network.checks import check_posts, check_search
from tests.network.helpers import ADMIN, run_jobs


def _rows(db, table: str, network: str) -> list:
    """Brute force, test only: every row of the network in a table."""
    return list(db.execute_raw(f"SELECT * FROM {db.keyspace}.{table} WHERE network = '{network}' ALLOW FILTERING"))


def test_a_network_policy_expires_old_posts_everywhere_and_a_held_account_keeps_its_own(client, db, fresh_net):
    set_activity_settings(ActivitySettings(delay_seconds=0.2))
    try:
        _expire(client, db, fresh_net)
    finally:
        set_activity_settings(None)


def _expire(client, db, fresh_net) -> None:
    n, ref = fresh_net.name, fresh_net.ref
    archive = f"network:{n}"
    # The run goes through every account with a count: a load gives each account one, even with no relation.
    assert {a for a, _f, _g in accounts.all_counts(db, n)} == set(ref.usernames)
    times = sorted(p["posted_at"] for p in ref.posts.values())
    cutoff = times[len(times) // 2].date()
    before = datetime.combine(cutoff, datetime.min.time(), UTC)
    today = datetime.now(UTC).date()
    oldest = min(ref.posts.values(), key=lambda p: p["posted_at"])
    held = oldest["author_id"]
    policies.set_policy(db, archive, policies.WHOLE, (today - cutoff).days, by="test")
    policies.create_hold(db, archive, "account", str(held), "case 7", by="test", via="test")

    cut_month = cutoff.strftime("%Y-%m")
    # Authors listed under the cutoff's month or later (the listings keep a month until a run expires it whole).
    listed_authors = {p["author_id"] for p in ref.posts.values() if p["posted_at"].strftime("%Y-%m") >= cut_month}
    cut_month_authors = {p["author_id"] for p in ref.posts.values() if p["posted_at"].strftime("%Y-%m") == cut_month}
    expired = {p for p, post in ref.posts.items() if post["posted_at"] < before and post["author_id"] != held}
    kept_by_hold = {p for p, post in ref.posts.items() if post["posted_at"] < before and post["author_id"] == held}
    assert expired and kept_by_hold and len(expired) < len(ref.posts) - len(kept_by_hold)
    counted, _plan = retention.run(db, n, dry_run=True, today=today)
    report, found = retention.run(db, n, today=today)
    assert found.cutoff == (cutoff - date(1970, 1, 1)).days
    # The network's first run reads every account (its content predates the period listings it then writes).
    assert report.counts["accounts_read"] == counted.counts["accounts_read"] == len(ref.usernames) - 1
    assert report.counts["posts"] == counted.counts["posts"] == len(expired)
    assert report.counts["likes"] == counted.counts["likes"] == sum(1 for p, _u in ref.likes if p in expired)
    assert report.held == {"accounts (account hold)": 1, "posts (account hold)": len(kept_by_hold)}

    for post_id in expired:
        ref.delete_post(post_id)
    for author in {p["author_id"] for p in ref.posts.values()} | {held}:
        check_posts(client, n, ref, author)
    check_search(client, n, ref)
    for post_id in sorted(expired)[:10]:
        assert client.get(f"/networks/{n}/posts/{post_id}").status_code == 404
    for table, column in (("posts_by_id", "post_id"), ("posts_by_author", "post_id"), ("term_postings", "post_id"),
                          ("likes_by_post", "post_id"), ("likes_by_user", "post_id")):
        assert not [r for r in _rows(db, table, n) if getattr(r, column) in expired], table
    months = {r.month for r in _rows(db, "post_months_by_author", n) if r.author_id != held}
    assert min(months) >= cutoff.strftime("%Y-%m")
    again, _plan = retention.run(db, n, today=today)
    assert again.counts.get("posts", 0) == 0
    # Later runs read only the accounts listed under a period up to the cutoff: here the authors of the cutoff's
    # month (the months before it left the listings with the first run).
    assert again.counts["accounts_read"] == len(cut_month_authors - {held})

    # Events and a snapshot of today, then a run dated ahead: everything but the held account's own goes.
    others = sorted(a for a in ref.usernames if a != held)[:3]
    post_id = next(iter(ref.posts))
    assert client.put(f"/networks/{n}/posts/{post_id}/likes/{others[0]}", headers=ADMIN).status_code == 200
    assert client.put(f"/networks/{n}/accounts/{others[1]}/follows/{others[2]}", headers=ADMIN).status_code == 200
    assert client.put(f"/networks/{n}/accounts/{held}/follows/{others[2]}", headers=ADMIN).status_code == 200
    assert client.post(f"/networks/{n}/rankings", headers=ADMIN).status_code == 202
    run_jobs(db)
    time.sleep(0.3)
    dirty.DirtyWorker(db, service.rebuild_marks).drain()
    assert _rows(db, "network_activity_slots", n) and _rows(db, "top100_accounts_by_time", n)
    ahead = today + timedelta(days=10)
    policies.set_policy(db, archive, policies.WHOLE, 5, by="test")
    report, _plan = retention.run(db, n, today=ahead)
    assert report.counts["snapshots"] == 1
    # Read: the authors of every post left, and the accounts of today's like and follows (listed as they were made).
    post_author = ref.posts[post_id]["author_id"]
    assert report.counts["accounts_read"] == len(
        (listed_authors | {others[0], post_author, others[1], others[2]}) - {held})
    assert {r.author_id for r in _rows(db, "posts_by_id", n)} == {held}
    for table in ("network_activity_slots", "network_activity_counts", "network_activity_days"):
        assert {r.account_id for r in _rows(db, table, n)} == {held}, table  # the held account's own follow
    assert {r.account for r in db.execute_raw(
        f"SELECT account FROM {db.keyspace}.activity_days WHERE archive = '{archive}' ALLOW FILTERING")} <= {str(held)}
    assert not _rows(db, "top100_accounts_by_time", n) and not _rows(db, "top100_followers_by_time", n)
    assert not _rows(db, "ranking_months_by_network", n)
    # What stays listed: the held account's periods only (every other period is past the new cutoff's).
    assert {r.account_id for r in _rows(db, "network_period_accounts", n)} == {held}
    # `--walk` reads every account again, as the first run did.
    walked = CliRunner().invoke(chronicle, ["retention", "run", "--network", n, "--walk", "--dry-run",
                                            "--no-progress", "--today", ahead.isoformat()])
    assert walked.exit_code == 0, walked.output
    assert json.loads(walked.stdout)["counts"]["accounts_read"] == len(ref.usernames) - 1


def test_an_account_without_any_relation_is_gone_through_too(db, tmp_path):
    """A loaded account nobody follows and that follows nobody has a count of its own (0, 0): the run, which goes
    through every account with a count, expires its old post as any other's."""
    import csv

    from api.network import loader, posts

    rows = {"accounts.csv": [["account_id", "username", "follower_count", "follows_count"],
                             [1, "loner_one", 0, 0], [2, "ann_two", 1, 0], [3, "bob_three", 0, 1]],
            "relations.csv": [["account_id", "account_username", "rel_type", "target_id", "target_username"],
                              [2, "ann_two", "follower", 3, "bob_three"], [3, "bob_three", "follows", 2, "ann_two"]],
            "posts.csv": [["post_id", "author_id", "author_username", "original_author", "original_id", "posted_at",
                           "content", "language", "country", "latitude", "longitude", "original_likes",
                           "share_count"],
                          [11, 1, "loner_one", "", "", "2015-03-01T10:00:00Z", "zqlonely old words", "en", "", "",
                           "", 0, 0],
                          [12, 2, "ann_two", "", "", "2015-03-01T11:00:00Z", "zqann old words", "en", "", "", "", 0,
                           0]],
            "likes.csv": [["post_id", "user_id"]]}
    for name, lines in rows.items():
        with (tmp_path / name).open("w", newline="") as f:
            csv.writer(f).writerows(lines)
    network = f"lone{uuid.uuid4().hex[:6]}"
    loader.load_network(db, network, tmp_path)
    assert {a for a, _f, _g in accounts.all_counts(db, network)} == {1, 2, 3}
    policies.set_policy(db, f"network:{network}", policies.WHOLE, 365, by="test")
    report, _plan = retention.run(db, network)
    assert report.counts["posts"] == 2
    assert posts.get_post(db, network, 11) is None and posts.get_post(db, network, 12) is None
