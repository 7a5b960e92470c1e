"""Large follower sets in buckets (relations.py, docs/network.md "Follower buckets"): an account's followers move
into hash-slot buckets above the line, split when they fill and move back below it, answering like the
brute-force reference before, during (follows and unfollows landing mid-move) and after each move; Q3 counted
slice by slice; and reads that page by slot ranges, so a purge of consecutive ids never puts a page over the
node's tombstone warning threshold."""

from __future__ import annotations

from api.clock import SYSTEM
from api.db import get_db
from api.network import job_handlers, relations, top100
from api.network.relations import FOLLOWER
from api.network.settings import set_network_settings
from tests.network.checks import check_rankings
from tests.network.helpers import ADMIN, CAP, exact_settings


class _Pausing:
    """A clock whose sleep (a move's settle pauses) runs the test's step instead: requests landing mid-move."""

    def __init__(self, steps) -> None:
        self.steps = list(steps)

    def time(self) -> float:
        return SYSTEM.time()

    def monotonic(self) -> float:
        return SYSTEM.monotonic()

    def sleep(self, _seconds: float) -> None:
        if self.steps:
            self.steps.pop(0)()


def _same_as_reference(client, net, account: int) -> None:
    db, want = get_db(), net.ref.followers(account)
    assert sorted(relations.ids(db, net.name, account, FOLLOWER)) == sorted(want)
    assert relations.count(db, net.name, account, FOLLOWER) == len(want)
    listed = client.get(f"/networks/{net.name}/accounts/{account}/followers?limit=5000").json
    assert sorted(a["account_id"] for a in listed) == sorted(want)
    assert len(client.get(f"/networks/{net.name}/accounts/{account}/followers?limit=3").json) == min(3, len(want))
    some = sorted(want)[:3] + sorted(set(net.ref.usernames) - want)[:3]
    assert [relations.has_follower(db, net.name, account, a) for a in some] == [a in want for a in some]


def _follow(client, net, follower: int, followee: int, on: bool) -> None:
    method = client.put if on else client.delete
    r = method(f"/networks/{net.name}/accounts/{follower}/follows/{followee}", headers=ADMIN)
    assert r.status_code == 200 and r.json["changed"] is True, r.json
    (net.ref.follow if on else net.ref.unfollow)(follower, followee)


def test_a_follower_set_moves_into_buckets_splits_and_moves_back_like_the_reference(fresh_net, client,
                                                                                   monkeypatch):
    net, ref, db = fresh_net, fresh_net.ref, get_db()
    star = ref.q2(1)[0][0]
    n = len(ref.followers(star))
    # Hybrid off: the line is the bucket size. 8 followers a bucket: the top account needs several buckets.
    set_network_settings(exact_settings(hybrid_threshold=0, cache_cap=CAP, follower_bucket_rows=8))
    outsiders = [u for u in sorted(ref.usernames) if u != star and u not in ref.followers(star)]
    insiders = sorted(ref.followers(star))
    _same_as_reference(client, net, star)
    assert relations.layout(db, net.name, star).buckets == 0
    # Into buckets, with a follow and an unfollow landing while both layouts are written (first pause) and
    # after the flip (second pause); the set is read like the reference at each point.
    pauses = [lambda: (_follow(client, net, outsiders[0], star, True), _follow(client, net, insiders[0], star, False),
                       _same_as_reference(client, net, star)),
              lambda: (_follow(client, net, outsiders[1], star, True), _same_as_reference(client, net, star))]
    # And while the copy runs: once the old layout has been read whole, before its last rows are written into the
    # new one, a follow (only the dual write puts it into the new layout) and an unfollow of a row being copied
    # (the copy's older timestamp must lose to it).
    source_rows = relations._follower_rows

    def rows_then_requests(*args, **kw):
        yield from source_rows(*args, **kw)
        if kw.get("fresh"):
            _follow(client, net, outsiders[3], star, True)
            _follow(client, net, insiders[1], star, False)

    monkeypatch.setattr(relations, "_follower_rows", rows_then_requests)
    want = relations.wanted_buckets(n, 0, line=8, hysteresis=0.1, bucket_rows=8)
    assert want >= 4 and want & (want - 1) == 0
    moved = relations.move_followers(db, net.name, star, want, settle=0, clock=_Pausing(pauses))
    monkeypatch.setattr(relations, "_follower_rows", source_rows)
    assert moved["moved"] >= n - 1
    assert relations.layout(db, net.name, star).buckets == want
    _same_as_reference(client, net, star)
    # Q3 over bucketed and legacy sets, counted in many slices, and Q2 beside it.
    snapshot = top100.compute_rankings(db, net.name, dry_run=True)
    check_rankings(snapshot, ref)
    top = top100.top_accounts(db, net.name)
    assert [(a["account_id"], a["follows_top"]) for a in top100.top_followers(db, net.name, top, slice_rows=50)
            ] == ref.q3()
    # A split: the follower-buckets job finds the buckets too full for a smaller bucket size.
    set_network_settings(exact_settings(hybrid_threshold=0, cache_cap=CAP, follower_bucket_rows=2))
    assert job_handlers.settle_followers(db, net.name, star)["buckets"] > want
    _same_as_reference(client, net, star)
    # Back to the legacy partition once below the line minus the hysteresis (line = 2 x len, so 0.9 x it).
    set_network_settings(exact_settings(hybrid_threshold=2 * n, cache_cap=CAP, follower_bucket_rows=8))
    _follow(client, net, outsiders[2], star, True)
    assert job_handlers.settle_followers(db, net.name, star) == {"buckets": 0, "followers_moved": n + 2}
    assert relations.layout(db, net.name, star).buckets == 0
    _same_as_reference(client, net, star)
    check_rankings(top100.compute_rankings(db, net.name, dry_run=True), ref)


def test_reads_of_a_bucketed_set_page_by_slot_range_and_never_meet_1000_tombstones(db, monkeypatch):
    """1,200 followers with consecutive ids, 1,100 of them then unfollowed (a purge of bot ids): the legacy
    partition's read steps over the 1,100 tombstones in one page (the node warns), the bucketed one never
    sees more than a few per page."""
    network = "tombstones"
    base = 10**12
    warned: list[str] = []
    futures: list = []
    execute_async = db.execute_async
    execute = db.execute

    def recording_async(statement, params=()):
        future = execute_async(statement, params)
        futures.append(future)
        return future

    def recording(statement, params=(), **kw):
        result = execute(statement, params, **kw)
        futures.append(result.response_future)
        return result

    monkeypatch.setattr(db, "execute_async", recording_async)
    monkeypatch.setattr(db, "execute", recording)
    for account, buckets in ((1, 0), (2, 1)):
        if buckets:
            db.execute_many(relations.set_layout_writes(network, account, buckets))
        db.execute_many(relations.follower_write(network, account, buckets, base + i, None) for i in range(1200))
        db.execute_many(relations.follower_delete(network, account, buckets, base + i) for i in range(1100))
        futures.clear()
        assert sorted(relations.ids(db, network, account, FOLLOWER)) == list(range(base + 1100, base + 1200))
        warned = [w for f in futures for w in (f.warnings or []) if "tombstone" in w.lower()]
        assert bool(warned) == (buckets == 0), (buckets, warned[:1])
    db.execute_many([(relations.DROP_LEGACY_FOLLOWERS, (network, 1)), (relations.DROP_BUCKET, (network, 2, 1, 0))])
