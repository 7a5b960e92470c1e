"""Celebrity reads spread over partitions (issue 30): the flag every post reads is a partition per account, the
last post times every Q4 page reads are in 16 shards per network and kept a moment per process; Q4 still equals
the brute-force reference."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from api.db import get_db
from api.network import accounts, actions, celebrities
from api.network.settings import set_network_settings
from tests.network.checks import check_home
from tests.network.helpers import ADMIN, CAP, exact_settings


def test_celebrity_flags_and_post_times_are_spread_and_kept_a_moment(fresh_net, client, mdb, clock):
    net, ref = fresh_net, fresh_net.ref
    db = get_db()  # "process B": the app's; mdb is "process A", on a clock the test moves
    celeb = ref.q2(1)[0][0]
    ns = exact_settings(hybrid_threshold=len(ref.followers(celeb)), cache_cap=CAP, celebrity_cache_ttl=5.0)
    set_network_settings(ns)
    mdb.settings = dataclasses.replace(mdb.settings, network=ns)
    celebrities.apply_threshold(db, net.name)
    ks = db.keyspace
    assert [r.account_id for r in db.execute_raw(
        f"SELECT account_id FROM {ks}.celebrity_flags WHERE network = %s AND account_id = %s",
        (net.name, celeb))] == [celeb]
    assert celeb in [r.account_id for r in db.execute_raw(
        f"SELECT account_id FROM {ks}.celebrity_last_posts WHERE network = %s AND shard = %s",
        (net.name, celeb % accounts.POST_TIME_SHARDS))]
    recorded = accounts.posted_since_from(mdb, net.name, accounts.start_post_times(mdb, net.name, [celeb]), [celeb],
                                          datetime(1970, 1, 2, tzinfo=UTC))
    assert recorded == [celeb]
    kept = accounts.start_post_times(mdb, net.name, [celeb])
    assert kept.futures == [] and celeb in kept.known  # read a moment ago: not read again

    # Process B's celebrity post: process A sees it once its kept time is older than the cache's TTL.
    now = datetime.now(UTC).replace(microsecond=0)
    r = client.post(f"/networks/{net.name}/posts", headers=ADMIN,
                    json={"author_id": celeb, "content": "celebrity news", "posted_at": now.isoformat()})
    assert r.status_code == 201, r.json
    ref.add_post(r.json["post"]["post_id"], celeb, now, "celebrity news")
    since = now - timedelta(seconds=1)
    stale = accounts.start_post_times(mdb, net.name, [celeb])
    assert accounts.posted_since_from(mdb, net.name, stale, [celeb], since) == []  # at most 5 s behind
    clock.advance(6)
    fresh = accounts.start_post_times(mdb, net.name, [celeb])
    assert fresh.futures and accounts.posted_since_from(mdb, net.name, fresh, [celeb], since) == [celeb]

    # Process A's own celebrity post is written through: known at once, without a read. Dated ahead of this
    # host's clock (a client's posted_at may be): the demotion below must still remove its time.
    later = now + timedelta(seconds=30)
    post, _ = actions.create_post(mdb, net.name, accounts.get_account(mdb, net.name, celeb), "more news",
                                  posted_at=later)
    ref.add_post(post.post_id, celeb, later, "more news")
    mine = accounts.start_post_times(mdb, net.name, [celeb])
    assert mine.futures == [] and mine.known[celeb] == later

    # Q4 of the celebrity's followers (both orders) equals the reference.
    assert check_home(client, net.name, ref, sorted(ref.followers(celeb) - {celeb})[:3]) == 6

    # A demotion removes the flag and the post time (and what this process kept of it).
    set_network_settings(dataclasses.replace(ns, hybrid_threshold=0))
    celebrities.apply_threshold(mdb, net.name, dataclasses.replace(ns, hybrid_threshold=0))
    assert not accounts.is_celebrity(db, net.name, celeb)
    assert accounts.start_post_times(mdb, net.name, [celeb]).known == {}
    assert not list(db.execute_raw(f"SELECT account_id FROM {ks}.celebrity_last_posts WHERE network = %s "
                                   "AND shard = %s AND account_id = %s",
                                   (net.name, celeb % accounts.POST_TIME_SHARDS, celeb)))
