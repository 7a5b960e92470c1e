"""Tagging while a node lags or is paused (issue 30): events written after the owner passed their time, and
transactions whose outcome is unknown.

A single node cannot be paused in a test, so the two effects are made directly: a request that waits (the
test's clock moves on and the owner runs while the transaction is in flight), and a transaction that applies
but answers with a timeout (the driver's `WriteTimeout`, write type CAS), as one whose Paxos commit reached
the replicas while the coordinator waited on a paused one. `bench/scale_tagging.py --cluster --lag-for 15`
pauses a real node of the 3-node cluster.
"""

from __future__ import annotations

from cassandra import WriteTimeout, WriteType

from api.tagging import effort, items, reconcile, stamps, worker
from tests.tagging.test_consistency import _events
from tests.tagging.test_workflow import _h, _next, _submit


def _stats(client, made) -> dict:
    return client.get(f"/tagging/projects/{made.project}/stats", headers=_h(made.tokens["ada"])).get_json()


def _settle(db, project: str, passes: int = 2) -> None:
    db.clock.advance(worker.SETTLE_US / 1e6 + 1)
    for _ in range(passes):
        worker.run_once(db, project)


def test_an_event_written_after_the_owner_passed_its_time_is_counted_once(
        client, clocked_db, make_project, monkeypatch):
    db = clocked_db
    made = make_project(items=3, database=db)
    item = _next(client, made, "ann")["item"]
    real_submit = items.submit

    def waiting_submit(*args, **kwargs):
        applied = real_submit(*args, **kwargs)
        # The request waits on a paused node after its transaction; the owner goes on past the submit's time.
        db.clock.advance(worker.SETTLE_US / 1e6 + 2)
        worker.run_once(db, made.project)
        return applied

    monkeypatch.setattr(items, "submit", waiting_submit)
    assert _submit(client, made, "ann", item, ["news"], keywords=["flood"]).status_code == 200
    tagged_at = items.get(db, made.project, item["seq"], serial=True).tagged_us
    assert worker.run_once(db, made.project) is not None
    position = worker.control.positions(db, made.project)
    assert position.events_checkpoint >= tagged_at  # the owner had passed the event's time when it was written
    notices, _ = effort.notices_between(db, made.project, tagged_at - 1, stamps.now_us(db))
    assert [n.event for n in notices] == [(tagged_at, item["seq"], "tagged")]

    _settle(db, made.project)
    stats = _stats(client, made)
    assert (stats["project"]["tagged"], {u["user"]: u["finished"] for u in stats["users"]}["ann"]) == (1, 1)
    assert stats["top"]["keywords"] == [{"name": "flood", "count": 1}]

    # A retry of the same submit, late too: the event and a notice are written again, and nothing is counted twice.
    monkeypatch.setattr(items, "submit", real_submit)
    db.clock.advance(10)
    assert _submit(client, made, "ann", item, ["news"], keywords=["flood"]).status_code == 200
    assert len(effort.notices_between(db, made.project, tagged_at - 1, stamps.now_us(db))[0]) == 2
    _settle(db, made.project)
    stats = _stats(client, made)
    assert stats["project"]["tagged"] == 1 == sum(e.kind == "tagged" for e in _events(db, made.project))
    assert stats["top"]["keywords"] == [{"name": "flood", "count": 1}]
    found = reconcile.reconcile(db, made.project)
    assert (found["differences"], found["missing_events"], found["team_usage"]) == ({}, 0, {})


def test_reconcile_leaves_a_late_event_to_the_owner_until_its_notice_is_handled(
        client, clocked_db, make_project, monkeypatch):
    db = clocked_db
    made = make_project(items=3, database=db)
    item = _next(client, made, "ann")["item"]
    _settle(db, made.project)
    at = stamps.now_us(db)
    assert items.submit(db, made.project, item["seq"], "ann", int(item["lease_id"]), ["news"], [], [], at)
    _settle(db, made.project)  # the owner passes the submit's time before its event is written
    effort.log(db, made.project, [effort.Event(at, item["seq"], "tagged", "ann", "red", "ann", 1, ("news",))])
    # Not counted yet, and not a difference: the owner counts it at its next pass (a repair now would count it
    # twice).
    assert _stats(client, made)["project"]["tagged"] == 0
    assert reconcile.reconcile(db, made.project)["differences"] == {}
    worker.run_once(db, made.project)
    assert _stats(client, made)["project"]["tagged"] == 1
    assert reconcile.reconcile(db, made.project)["differences"] == {}


def _applied_then_timed_out(monkeypatch, db, statement, *, apply: bool, times: int = 1) -> list[int]:
    """The next `times` runs of `statement` raise a CAS WriteTimeout: after running it (`apply`), as when its
    commit reached the replicas but not the answer, or without running it. Returns a list counting them."""
    real = db.execute
    raised: list[int] = []

    def execute(stmt, params=(), **kwargs):
        if stmt is statement and len(raised) < times:
            raised.append(1)
            if apply:
                real(stmt, params, **kwargs)
            raise WriteTimeout("Operation timed out - received only 1 responses.", write_type=WriteType.CAS)
        return real(stmt, params, **kwargs)

    monkeypatch.setattr(db, "execute", execute)
    return raised


def test_transactions_that_applied_unseen_are_settled_as_applied(client, clocked_db, make_project, monkeypatch):
    db = clocked_db
    made = make_project(items=5, teams={"red": 4}, database=db)
    for statement in (items.TAKE_UNIT, items.CLAIM, items.TAKE_SLOT, items.SUBMIT):
        raised = _applied_then_timed_out(monkeypatch, db, statement, apply=True)
        item = _next(client, made, "ann")["item"]
        assert item is not None
        assert _submit(client, made, "ann", item, ["news"]).status_code == 200
        assert raised == [1], statement.cql
        monkeypatch.undo()
    # Each applied transaction counted once: one unit per item (not two, none leaked), so the quota is whole.
    assert items.usage(db, made.project, "red") == 4
    assert _next(client, made, "ann")["reason"] == "team red has used its quota of 4 items"
    _settle(db, made.project)
    assert _stats(client, made)["project"]["tagged"] == 4
    found = reconcile.reconcile(db, made.project)
    assert (found["differences"], found["missing_events"], found["team_usage"]) == ({}, 0, {})


def test_transactions_that_did_not_apply_are_settled_as_not_applied(client, clocked_db, make_project, monkeypatch):
    db = clocked_db
    made = make_project(items=4, teams={"red": 3}, database=db)
    for statement in (items.TAKE_UNIT, items.TAKE_SLOT):
        # A later request, as in life: on a stopped clock two leases of one slot differ only in 4 random bits,
        # and the slot's serial read would take the last lease (1 in 16) for this one.
        db.clock.advance(0.001)
        raised = _applied_then_timed_out(monkeypatch, db, statement, apply=False)
        got = _next(client, made, "ann")
        assert raised == [1]
        if statement is items.TAKE_UNIT:  # settled as not applied: the next shard is tried, one unit taken
            assert got["item"] is not None
            assert _submit(client, made, "ann", got["item"], ["news"]).status_code == 200
        else:  # the slot was not taken: the slots are read again and the slot taken once, one unit taken
            assert got["item"] is not None
            assert [s.seq for s in items.slots(db, made.project, "ann")] == [got["item"]["seq"]]
            assert items.usage(db, made.project, "red") == 2
            assert _submit(client, made, "ann", got["item"], ["news"]).status_code == 200
        monkeypatch.undo()
    assert items.usage(db, made.project, "red") == 2
    got = _next(client, made, "ann")["item"]
    assert _submit(client, made, "ann", got, ["news"]).status_code == 200
    assert items.usage(db, made.project, "red") == 3
    found = reconcile.reconcile(db, made.project)
    assert (found["missing_events"], found["team_usage"]) == (0, {})


def test_a_usage_shard_made_before_its_operation_list_still_takes_and_gives_units(client, make_project, db):
    made = make_project(items=3, teams={"red": 16})
    for shard in range(items.USAGE_SHARDS):  # a shard as cql/0260 found it: no recent_ops at all
        db.execute_raw(f"DELETE recent_ops FROM {db.keyspace}.tagging_team_usage WHERE project = %s AND team = %s "
                       "AND shard = %s", (made.project, "red", shard))
    db.caches.lru("tagging.usage_guess", maxsize=10).clear()
    assert items.change_usage(db, made.project, "red", +1, 16)
    assert items.change_usage(db, made.project, "red", +1, 16)
    assert items.change_usage(db, made.project, "red", -1, None)
    assert items.usage(db, made.project, "red") == 1
