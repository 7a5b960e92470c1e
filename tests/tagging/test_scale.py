"""Tagging at scale (issue 30, findings 8 and 9): quota units given back by another process are reused;
keyword counts live outside the control partition, the top-5 is exact from changed counts only, a count write
cut short is redone by the next owner, and one project's slow pass does not hold another's back."""

from __future__ import annotations

import heapq
import threading
from collections import Counter

import pytest

from api.db import Database
from api.tagging import control, effort, items, worker
from tests.clocks import ManualClock
from tests.tagging.test_workflow import _h, _next, _submit


def test_units_the_worker_gives_back_are_reused_by_a_request_process(client, clocked_db, settings, make_project):
    db = clocked_db  # the request process (gunicorn's worker): its caches remember each shard's last value
    made = make_project(items=6, teams={"red": 3}, lease_seconds=1, database=db,
                        people={u: ("red", "tagger") for u in ("ann", "bob", "cy", "dee")})
    held = [_next(client, made, u)["item"] for u in ("ann", "bob", "cy")]
    assert all(held)
    refused = _next(client, made, "dee")
    assert refused["item"] is None and "quota of 3" in refused["reason"]  # every shard full, truly
    # The worker, another process with its own caches, returns the expired leases and gives their units back.
    other = Database(settings, clock=ManualClock(start=db.clock.time() + 1.5))
    try:
        assert worker.run_once(other, made.project)["expired"] == 3
        assert items.usage(other, made.project, "red") == 0
    finally:
        other.close()
    db.clock.advance(1.5)
    # The request process still remembers full shards; it tries them anyway and reuses every unit.
    again = [_next(client, made, u)["item"] for u in ("dee", "ann", "bob")]
    assert all(again), again
    assert items.usage(db, made.project, "red") == 3  # the quota is fully used, and not passed
    assert _next(client, made, "cy")["item"] is None


def test_keyword_counts_and_the_top_five_over_many_passes_equal_a_recount(client, clocked_db, make_project,
                                                                          monkeypatch):
    db = clocked_db
    made = make_project(items=12, database=db)
    # Counts grow pass after pass; "zeta" enters the top five late from below, ties order by name.
    plan = [["alpha", "beta", "gamma"], ["alpha", "delta"], ["epsilon", "zeta"], ["zeta", "eta"],
            ["zeta", "theta", "alpha"], ["zeta", "beta"], ["iota"], ["zeta", "kappa", "beta"]]
    for i, words in enumerate(plan):
        item = _next(client, made, "ann")["item"]
        assert _submit(client, made, "ann", item, ["news"], [], words).status_code == 200
        db.clock.advance(worker.SETTLE_US / 1e6 + 0.5)
        if i == 5:  # an owner that dies after its commit, before its keyword counts are written
            def dies(*_args):
                raise RuntimeError("killed")
            owner = worker.ProjectOwner(db, made.project)
            assert owner.acquire()
            with monkeypatch.context() as m, pytest.raises(RuntimeError):
                m.setattr(control, "write_keyword_uses", dies)
                owner.step()
            owner.release()
        else:
            worker.run_once(db, made.project)  # the next owner rewrites what the dead one committed
    worker.run_once(db, made.project)
    logged = effort.events_of_minutes(db, made.project, effort.event_minutes(db, made.project))
    recount = Counter(k for e in logged if e.kind == "tagged" for k in e.keywords)
    assert control.all_keyword_uses(db, made.project) == dict(recount)
    brute = heapq.nsmallest(5, recount.items(), key=lambda nc: (-nc[1], nc[0]))
    stats = client.get(f"/tagging/projects/{made.project}/stats", headers=_h(made.tokens["ada"])).get_json()
    assert [(t["name"], t["count"]) for t in stats["top"]["keywords"]] == brute == [
        ("zeta", 5), ("alpha", 3), ("beta", 3), ("delta", 1), ("epsilon", 1)]
    # The control partition holds no keyword rows: people, categories and the top lists only.
    scopes = {r.scope for r in db.execute_raw(f"SELECT scope FROM {db.keyspace}.tagging_control WHERE project = %s",
                                              (made.project,))}
    assert "keyword" not in scopes and "category" in scopes
    # A deposed owner's late write (an older version) never overwrites its successor's count.
    version = control.positions(db, made.project).version
    control.write_keyword_uses(db, made.project, {"zeta": 1}, version - 3)
    assert control.keyword_uses(db, made.project, ["zeta"]) == {"zeta": 5}


def test_a_slow_project_does_not_hold_back_another(clocked_db, make_project, monkeypatch):
    db = clocked_db
    slow, fast = make_project(items=2, database=db), make_project(items=2, database=db)
    release = threading.Event()
    real_step = worker.ProjectOwner.step

    def step(self):
        if self.project == slow.project:
            release.wait(20)
        return real_step(self)

    monkeypatch.setattr(worker.ProjectOwner, "step", step)
    monkeypatch.setattr(worker.projects, "every", lambda _db: [slow.project, fast.project])
    held: dict = {}
    running: dict = {}
    before = control.positions(db, fast.project).version
    try:
        worker._pass(db, held, running)
        running[fast.project].result(timeout=20)  # done while the slow project's pass is still running
        assert not running[slow.project].done()
        assert control.positions(db, fast.project).version > before
        worker._pass(db, held, running)  # the slow project is not started twice
        assert list(running) == [slow.project, fast.project]
    finally:
        release.set()
        for future in running.values():
            future.result(timeout=20)
        for owner in held.values():
            owner.release()
