"""Hold slots freed by the end of their lease (issue 33, part 4): a submit, an expiry, a report or a disable
writes nothing to the slot, and `next` decides from the item the slot names whether it is still held.

What must stay true (docs/tagging.md, section 5): a tagger never holds more than `max_held` items, even from
many tabs at once; a reload gives the held item again; and a slot is never taken as free because a lagging
replica shows its item as it was before the slot's claim."""

from __future__ import annotations

import threading

from cassandra import OperationTimedOut

from api.db import Database
from api.tagging import control, effort, items, picking, projects, queue, reconcile, service, worker
from tests.tagging.test_consistency import _Frozen
from tests.tagging.test_workflow import _h, _next, _submit


def _transactions(monkeypatch, db) -> list[str]:
    """Names of the conditional statements `db` runs from now on."""
    ran: list[str] = []
    real = db.execute

    def execute(statement, params=(), **kwargs):
        if getattr(statement, "conditional", False):
            ran.append(statement.cql.split(" WHERE ")[0])
        return real(statement, params, **kwargs)

    monkeypatch.setattr(db, "execute", execute)
    return ran


def test_an_item_from_next_to_submit_costs_four_transactions(client, clocked_db, make_project, monkeypatch):
    db = clocked_db
    made = make_project(items=4, database=db)
    first = _next(client, made, "ann")["item"]  # the first call makes the slot
    assert _submit(client, made, "ann", first).status_code == 200
    ran = _transactions(monkeypatch, db)
    item = _next(client, made, "ann")["item"]
    assert item is not None and item["seq"] != first["seq"]
    assert _submit(client, made, "ann", item).status_code == 200
    # The slot (naming the item), the team's unit, the claim, the submit: nothing frees or renames the slot.
    assert len(ran) == 4, ran
    assert all([s.startswith(prefix) for s, prefix in zip(ran, ("UPDATE tagging_holds", "UPDATE tagging_team_usage",
                                                              "UPDATE tagging_item_state",
                                                              "UPDATE tagging_item_state"), strict=True)]), ran
    assert [s.seq for s in items.slots(db, made.project, "ann")] == [item["seq"]]  # names the finished item


def _held_by(db, project: str, user: str, total: int) -> list[int]:
    """Items in progress under `user`, by reading every item's state (the brute-force answer)."""
    states = items.many(db, project, list(range(total)))
    return sorted(seq for seq, s in states.items() if s.status == items.IN_PROGRESS and s.holder == user)


def _tab(db, member, start: threading.Barrier, answers: list[dict]) -> None:
    start.wait()
    answers.append(service.next_item(db, member))


def test_many_tabs_at_once_never_hold_more_than_the_limit(db, make_project):
    for max_held in (1, 2):
        made = make_project(items=40, max_held=max_held, queue_size=40)
        ann = projects.member_of_token(db, made.tokens["ann"])
        for _round in range(3):
            answers: list[dict] = []
            start = threading.Barrier(8)
            threads = [threading.Thread(target=_tab, args=(db, ann, start, answers)) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            given = {a["item"]["seq"]: a["item"]["lease_id"] for a in answers if a["item"] is not None}
            held = _held_by(db, made.project, "ann", 40)
            assert 1 <= len(held) <= max_held, (max_held, answers)
            assert sorted(given) == held  # every item answered is held, and none is held unanswered
            for seq, lease in given.items():
                service.submit(db, ann, seq, lease, ["news"], [], [])
            worker.run_once(db, made.project)
        assert _held_by(db, made.project, "ann", 40) == []


def test_a_lagging_replica_showing_the_item_before_its_claim_does_not_free_the_slot(
        client, clocked_db, make_project, monkeypatch):
    db = clocked_db
    made = make_project(items=3, lease_seconds=2, database=db)
    before = {seq: db.execute(items.GET_STATE, (made.project, seq)).one() for seq in range(3)}
    item = _next(client, made, "ann")["item"]
    db.clock.advance(3)  # the slot is older than a lease; the item's lease ran out but it was not returned yet
    real = db.execute

    def lagging(statement, params=(), **kwargs):  # LOCAL_ONE reads answer the states of before the claim
        if statement is items.GET_STATE and params[0] == made.project:
            return _Frozen(before[params[1]])
        return real(statement, params, **kwargs)

    monkeypatch.setattr(db, "execute", lagging)
    again = _next(client, made, "ann")["item"]
    monkeypatch.undo()
    assert again is not None and again["seq"] == item["seq"] and again["lease_id"] == item["lease_id"]
    assert _held_by(db, made.project, "ann", 3) == [item["seq"]]


def test_a_slot_whose_item_went_on_under_another_lease_is_free(client, clocked_db, make_project):
    db = clocked_db
    made = make_project(items=1, lease_seconds=1, database=db)
    item = _next(client, made, "ann")["item"]
    db.clock.advance(1.2)
    assert worker.run_once(db, made.project)["expired"] == 1
    taken = _next(client, made, "bob")["item"]
    assert taken["seq"] == item["seq"]
    # ann's slot still names the item, now bob's: hers is free (the queue is empty), not busy or held.
    assert _next(client, made, "ann") == {"item": None, "reason": "the queue is empty: no item is waiting"}


def test_a_skipped_item_taken_again_at_once_leaves_the_skipper_free(client, db, make_project):
    made = make_project(items=1)
    item = _next(client, made, "ann")["item"]
    r = client.post(f"/tagging/projects/{made.project}/items/{item['seq']}/skip", headers=_h(made.tokens["ann"]),
                    json={"lease_id": item["lease_id"]})
    assert r.status_code == 200
    worker.run_once(db, made.project)
    assert _next(client, made, "bob")["item"]["seq"] == item["seq"]  # within a lease length of ann's claim
    assert _next(client, made, "ann") == {"item": None, "reason": "the queue is empty: no item is waiting"}


def test_a_disabled_or_missing_item_frees_its_holders_slot(client, db, make_project):
    made = make_project(items=3)
    item = _next(client, made, "ann")["item"]
    r = client.post(f"/tagging/projects/{made.project}/items/{item['seq']}/disable", headers=_h(made.tokens["ada"]))
    assert r.status_code == 200
    second = _next(client, made, "ann")["item"]
    assert second is not None and second["seq"] != item["seq"]
    r = client.post(f"/tagging/projects/{made.project}/items/{second['seq']}/missing",
                    headers=_h(made.tokens["ann"]), json={"lease_id": second["lease_id"]})
    assert r.status_code == 200
    third = _next(client, made, "ann")["item"]
    assert third is not None and third["seq"] not in (item["seq"], second["seq"])
    assert _held_by(db, made.project, "ann", 3) == [third["seq"]]


def _reads_from(monkeypatch, db) -> list[int]:
    """The first position of every queue window `db` reads from now on."""
    starts: list[int] = []
    real = db.execute

    def execute(statement, params=(), **kwargs):
        if statement is queue.ENTRIES:
            starts.append(params[3])
        return real(statement, params, **kwargs)

    monkeypatch.setattr(db, "execute", execute)
    return starts


def _drain(picker) -> list:
    out = []
    while (entry := picker.next()) is not None:
        out.append(entry)
    return out


def test_takers_read_the_queue_from_where_the_taken_entries_end(clocked_db, make_project, monkeypatch):
    db = clocked_db
    made = make_project(items=10, queue_size=10, database=db)
    pos = control.positions(db, made.project)
    entries = queue.entries(db, made.project, queue.TAG, pos.tag_head, pos.tag_tail, 10)
    assert [e.pos for e in entries] == list(range(pos.tag_head, pos.tag_head + 10))
    head = pos.tag_head
    late = entries[2]
    db.execute_raw(f"DELETE FROM {db.keyspace}.tagging_queue WHERE project = %s AND lane = %s AND page = %s "
                   "AND pos = %s", (made.project, queue.TAG, late.pos // queue.PAGE, late.pos))  # not written yet
    for e in entries[:5]:
        if e is not late:
            queue.mark_taken(db, made.project, queue.TAG, e.pos, "someone")
    starts = _reads_from(monkeypatch, db)
    assert {e.seq for e in picking.read_waiting(db, made.project)} == {e.seq for e in entries[5:]}
    assert {e.seq for e in picking.read_waiting(db, made.project)} == {e.seq for e in entries[5:]}
    assert starts == [head, head + 5]  # the second read starts after the taken entries the first one saw
    # An entry written late behind that point (a deposed owner's) is found once the process forgets it.
    db.execute(*queue.entry_write(made.project, queue.TAG, late.pos, late.seq, late.ref))
    assert late.seq not in {e.seq for e in picking.read_waiting(db, made.project)}
    db.clock.advance(picking.FRONTIER_SECONDS + 0.1)
    assert late.seq in {e.seq for e in picking.read_waiting(db, made.project)}
    assert starts[-1] == head


def test_a_process_hands_each_waiting_entry_to_one_of_its_requests(clocked_db, make_project, monkeypatch):
    db = clocked_db
    made = make_project(items=30, queue_size=30, database=db)
    starts = _reads_from(monkeypatch, db)
    pickers = [picking.Picker(db, made.project) for _ in range(4)]
    picked = [p.next() for p in pickers for _ in range(5)]  # four requests at once, five tries each
    assert len(starts) == 1  # one read serves them all while it is fresh
    assert len({e.pos for e in picked}) == 20  # no entry handed to two of them
    rest = _drain(picking.Picker(db, made.project))
    assert len(rest) == 10 and not {e.pos for e in rest} & {e.pos for e in picked}
    # Once the pool is stale it is read again; entries handed lately stay with their requests.
    db.clock.advance(picking.POOL_SECONDS + 0.01)
    assert _drain(picking.Picker(db, made.project)) == [] and len(starts) > 1
    db.clock.advance(picking.HANDED_SECONDS)
    assert len(_drain(picking.Picker(db, made.project))) == picking.TRIES  # handed again, at most TRIES each


def test_a_reload_after_a_claim_whose_event_was_lost_logs_the_claim(client, clocked_db, make_project, monkeypatch):
    db = clocked_db
    made = make_project(items=3, database=db)
    real_log = effort.log
    failed: list[int] = []

    def log_fails_once(*args, **kwargs):
        if not failed:
            failed.append(1)
            raise OperationTimedOut("the request died after its claim")
        return real_log(*args, **kwargs)

    monkeypatch.setattr(effort, "log", log_fails_once)
    r = client.post(f"/tagging/projects/{made.project}/next", headers=_h(made.tokens["ann"]))
    assert r.status_code == 503 and failed == [1]
    monkeypatch.undo()
    [held] = _held_by(db, made.project, "ann", 3)
    again = _next(client, made, "ann")["item"]  # the slot names the item: the reload shows it
    assert again["seq"] == held
    assert _submit(client, made, "ann", again).status_code == 200
    db.clock.advance(worker.SETTLE_US / 1e6 + 1)
    worker.run_once(db, made.project)
    found = reconcile.reconcile(db, made.project)
    assert (found["differences"], found["missing_events"]) == ({}, 0), found
    users = {u["user"]: u for u in client.get(f"/tagging/projects/{made.project}/stats",
                                              headers=_h(made.tokens["ada"])).get_json()["users"]}
    assert (users["ann"]["assigned"], users["ann"]["finished"]) == (1, 1)


def _reads_of(monkeypatch, db, statements) -> list[str]:
    ran: list[str] = []
    real = db.execute

    def execute(statement, params=(), **kwargs):
        if statement in statements:
            ran.append(statement.name)
        return real(statement, params, **kwargs)

    monkeypatch.setattr(db, "execute", execute)
    return ran


def test_after_its_own_submit_a_process_takes_the_slot_without_reading_it(client, clocked_db, make_project,
                                                                           monkeypatch):
    db = clocked_db
    made = make_project(items=4, database=db)
    first = _next(client, made, "ann")["item"]
    assert _submit(client, made, "ann", first).status_code == 200
    reads = _reads_of(monkeypatch, db, (items.SLOTS, items.GET_STATE, items.GET_STATE_SERIAL))
    item = _next(client, made, "ann")["item"]
    assert item is not None and item["seq"] != first["seq"]
    assert reads == []  # the slot as this process wrote it, and its lease known to have ended
    assert _held_by(db, made.project, "ann", 4) == [item["seq"]]


def test_a_view_of_the_slots_another_process_made_stale_never_gives_a_second_item(settings, db, make_project):
    made = make_project(items=6)
    other = Database(settings)  # another gunicorn worker of the same deployment
    try:
        ann = projects.member_of_token(db, made.tokens["ann"])
        first = service.next_item(db, ann)["item"]
        service.submit(db, ann, first["seq"], first["lease_id"], ["news"], [], [])
        # This process now sees ann's slot free (its lease ended here); the other process takes it.
        taken = service.next_item(other, ann)["item"]
        assert taken is not None and taken["seq"] != first["seq"]
        again = service.next_item(db, ann)["item"]  # refused on the stale view, read again: held, renewed
        assert (again["seq"], again["lease_id"]) == (taken["seq"], taken["lease_id"])
        assert _held_by(db, made.project, "ann", 6) == [taken["seq"]]
        # And the other way: the other process's view is stale once this one's submit ended that lease.
        service.submit(db, ann, again["seq"], again["lease_id"], ["news"], [], [])
        mine = service.next_item(db, ann)["item"]
        theirs = service.next_item(other, ann)["item"]
        assert (theirs["seq"], theirs["lease_id"]) == (mine["seq"], mine["lease_id"])
        assert _held_by(db, made.project, "ann", 6) == [mine["seq"]]
    finally:
        other.close()


def test_an_entry_a_request_did_not_try_goes_at_once_to_the_next_request(client, db, make_project):
    """The last item waiting, handed to a request refused on its team's quota, is not kept from the process's
    next request (another team's) for the seconds an entry stays handed."""
    made = make_project(items=2, teams={"red": 1, "blue": None},
                        people={"ann": ("red", "tagger"), "cy": ("red", "tagger"), "dee": ("blue", "tagger")})
    first = _next(client, made, "ann")["item"]
    assert _submit(client, made, "ann", first).status_code == 200
    refused = _next(client, made, "cy")
    assert refused["item"] is None and "quota of 1" in refused["reason"]
    given = _next(client, made, "dee")["item"]
    assert given is not None and given["seq"] != first["seq"]
