"""The period listings a network's retention run reads (cql/0330, api/network/periods.py): a post lists its author
under its UTC month, a like or a follow both accounts under their UTC day; a run's deletes of the listings are
timed when it started, so what is listed while it runs outlives them. Expected rows come from the requests the
test makes, read back by brute force."""

from __future__ import annotations

import time

from api.network import periods
from tests.network.helpers import ADMIN


def _listed(db, network: str) -> set[tuple[str, int, int]]:
    """Brute force, test only: every (kind, period, account) row of the network."""
    rows = db.execute_raw(f"SELECT kind, period, account_id FROM {db.keyspace}.network_period_accounts "
                          f"WHERE network = '{network}' ALLOW FILTERING")
    return {(r.kind, r.period, r.account_id) for r in rows}


def test_posts_likes_and_follows_list_their_accounts_under_their_period(client, db, fresh_net):
    n, ref = fresh_net.name, fresh_net.ref
    loaded = {("month", p["posted_at"].year * 12 + p["posted_at"].month - 1, p["author_id"])
              for p in ref.posts.values()}
    assert _listed(db, n) == loaded  # the load lists every loaded post's author
    author, liker, follower = sorted(ref.usernames)[:3]
    posted = client.post(f"/networks/{n}/posts", headers=ADMIN,
                         json={"author_id": author, "content": "zqperiodword",
                               "posted_at": "2026-02-03T04:05:06Z"}).json["post"]
    liked_post = next(iter(ref.posts))
    assert client.put(f"/networks/{n}/posts/{liked_post}/likes/{liker}", headers=ADMIN).status_code == 200
    assert client.put(f"/networks/{n}/accounts/{follower}/follows/{author}", headers=ADMIN).status_code == 200
    today = int(time.time()) // 86_400
    events = {("day", today, a) for a in (liker, ref.posts[liked_post]["author_id"], follower, author)}
    assert _listed(db, n) == loaded | {("month", 2026 * 12 + 1, author)} | events, posted
    # What a run reads: the periods up to a bound, and their accounts.
    assert periods.periods_through(db, n, periods.DAY, today) == [today]
    assert periods.accounts_of(db, n, periods.DAY, [today]) == {today: {a for _k, _d, a in events}}


def test_a_runs_deletes_spare_what_was_listed_after_it_started(db):
    network = f"per{int(time.time() * 1000) % 10**9}"
    day = 20_000
    db.execute_many(periods.listing_writes(network, periods.DAY, 1, [day]) + periods.listing_writes(
        network, periods.DAY, 2, [day]))
    time.sleep(0.01)
    started_us = time.time_ns() // 1000
    time.sleep(0.01)
    db.execute_many(periods.listing_writes(network, periods.DAY, 3, [day]))  # listed while the run ran
    db.execute_many(periods.drop_writes(network, periods.DAY, [day], started_us))
    assert _listed(db, network) == {("day", day, 3)}
    assert periods.periods_through(db, network, periods.DAY, day) == [day]  # its shard's period row stays too
    # With a hold on account 3, the others' rows go, as of the run's start.
    db.execute_many(periods.listing_writes(network, periods.DAY, 4, [day]))
    later_us = time.time_ns() // 1000
    db.execute_many(periods.forget_writes(network, periods.DAY, {day: {3, 4}}, {3}, later_us))
    assert _listed(db, network) == {("day", day, 3)}
