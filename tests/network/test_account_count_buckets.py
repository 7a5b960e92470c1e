"""Follower counts in 1,024 buckets per network (issue 30), and a network counted before cql/0150 (64 buckets,
whose counters cannot be moved): its old row and its new one are read together and summed, by every reader."""

from __future__ import annotations

import secrets

from api.network import accounts
from api.network.values import Account


def test_counts_in_new_buckets_are_summed_with_those_counted_before(db):
    ks, token = db.keyspace, secrets.token_hex(3)
    legacy, new = f"legacy{token}", f"new{token}"
    for net in (legacy, new):
        db.execute_many(accounts.account_writes(net, Account(7, "seven"))
                        + accounts.account_writes(net, Account(1000, "thousand")))
    # Counted before cql/0150: bucket = account_id % 64.
    db.execute_raw(f"UPDATE {ks}.network_account_counts SET followers = followers + 5, follows = follows + 2 "
                   "WHERE network = %s AND bucket = %s AND account_id = %s", (legacy, 7 % 64, 7))
    for net in (legacy, new):
        accounts.add_counts(db, net, 1000, 7, +1)  # 1000 follows 7
    got = accounts.get_account(db, legacy, 7)
    assert (got.follower_count, got.follows_count) == (6, 2)
    assert accounts.fresh_counts(db, legacy, [7, 1000]) == {7: (6, 2), 1000: (0, 1)}
    assert sorted(accounts.all_counts(db, legacy)) == [(7, 6, 2), (1000, 0, 1)]
    assert accounts.fresh_counts(db, new, [7, 1000]) == {7: (1, 0), 1000: (0, 1)}
    assert sorted(accounts.all_counts(db, new)) == [(7, 1, 0), (1000, 0, 1)]
    # New counts go to bucket 64 + account_id % 1024, never to an old bucket.
    for net in (legacy, new):
        rows = db.execute_raw(f"SELECT account_id FROM {ks}.network_account_counts WHERE network = %s AND bucket = %s",
                              (net, 64 + 1000 % 1024))
        assert [r.account_id for r in rows] == [1000]
        assert not list(db.execute_raw(f"SELECT account_id FROM {ks}.network_account_counts WHERE network = %s "
                                       "AND bucket = %s", (net, 1000 % 64)))
    # A load or the reconcile job brings an account to a target by adding to its new row.
    assert accounts.set_counts(db, legacy, {7: (10, 2)}) == {7: (4, 0)}
    assert accounts.fresh_counts(db, legacy, [7]) == {7: (10, 2)}
