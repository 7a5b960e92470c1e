"""The tagging workflow over REST on the real node: leases, reloads, idempotent submits, 409/422 refusals,
skips, expiry, quotas, hold limits, QA, disable, missing sources, figures against an independent count."""

from __future__ import annotations

from collections import Counter

from api.network import posts
from api.tagging import control, items, queue, reconcile, stamps, worker


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _next(client, made, user: str) -> dict:
    r = client.post(f"/tagging/projects/{made.project}/next", headers=_h(made.tokens[user]))
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def _submit(client, made, user: str, item: dict, categories=("news",), subcategories=(), keywords=()):
    return client.post(f"/tagging/projects/{made.project}/items/{item['seq']}/submit", headers=_h(made.tokens[user]),
                       json={"lease_id": item["lease_id"], "categories": list(categories),
                             "subcategories": list(subcategories), "keywords": list(keywords)})


def test_next_gives_each_tagger_their_own_item_and_a_reload_gives_it_again(client, make_project):
    made = make_project(items=6)
    ann, bob = _next(client, made, "ann")["item"], _next(client, made, "bob")["item"]
    assert ann["seq"] != bob["seq"] and ann["status"] == "InProgress" and ann["holder"] == "ann"
    again = _next(client, made, "ann")["item"]
    assert again["seq"] == ann["seq"] and again["lease_id"] == ann["lease_id"]
    assert again["lease_until"] >= ann["lease_until"]  # renewed, not shortened
    assert ann["source"]["text"].startswith("post ") and not ann["source"]["missing"]


def test_submit_is_idempotent_and_refuses_unknown_categories(client, make_project):
    made = make_project(items=3)
    item = _next(client, made, "ann")["item"]
    bad = _submit(client, made, "ann", item, categories=["news", "weather"])
    assert bad.status_code == 422 and "weather" in bad.get_json()["message"]
    bad_sub = _submit(client, made, "ann", item, subcategories=["galaxy"])
    assert bad_sub.status_code == 422 and "galaxy" in bad_sub.get_json()["message"]
    words = ["  Big   Match ", "big match", "ＧＯＡＬ"]
    first = _submit(client, made, "ann", item, ["sport", "news"], ["local"], words)
    assert first.status_code == 200
    stored = first.get_json()["item"]
    assert stored["status"] == "Tagged" and stored["categories"] == ["news", "sport"]
    assert stored["keywords"] == ["big match", "goal"]  # normalised, duplicates dropped
    retry = _submit(client, made, "ann", item, ["sport", "news"], ["local"], words)
    assert retry.status_code == 200 and retry.get_json()["item"] == stored
    assert _next(client, made, "ann")["item"]["seq"] != item["seq"]  # the slot was freed: a new item


def test_an_expired_lease_goes_back_to_the_queue_and_a_late_submit_gets_409(client, clocked_db, make_project):
    db = clocked_db
    made = make_project(items=1, lease_seconds=1, database=db)
    item = _next(client, made, "ann")["item"]
    assert _next(client, made, "bob")["item"] is None  # the only item is held
    assert worker.run_once(db, made.project)["expired"] == 0  # the lease has not run out on the test's clock
    db.clock.advance(1.2)
    assert worker.run_once(db, made.project)["expired"] == 1
    taken = _next(client, made, "bob")["item"]
    assert taken["seq"] == item["seq"] and taken["lease_id"] != item["lease_id"]
    late = _submit(client, made, "ann", item)
    assert late.status_code == 409 and "another tagger" in late.get_json()["message"]
    assert _submit(client, made, "bob", taken).status_code == 200


def test_a_late_submit_before_anyone_took_the_item_still_counts(client, clocked_db, make_project):
    db = clocked_db
    made = make_project(items=2, lease_seconds=1, database=db)
    item = _next(client, made, "ann")["item"]
    db.clock.advance(1.2)
    assert _submit(client, made, "ann", item).status_code == 200  # expired but not yet returned: still hers
    assert worker.run_once(db, made.project)["expired"] == 0  # the expiry transaction loses to the submit


def test_skip_returns_the_item_and_the_next_pass_queues_it_once(client, db, make_project):
    made = make_project(items=2, queue_size=5)
    item = _next(client, made, "ann")["item"]
    r = client.post(f"/tagging/projects/{made.project}/items/{item['seq']}/skip", headers=_h(made.tokens["ann"]),
                    json={"lease_id": item["lease_id"]})
    assert r.status_code == 200 and r.get_json()["item"]["status"] == "New"
    worker.run_once(db, made.project)
    pos = control.positions(db, made.project)
    waiting = [e.seq for e in queue.entries(db, made.project, queue.TAG, pos.tag_head, pos.tag_tail, 100)
               if e.taken_by is None]
    assert sorted(waiting) == [0, 1]  # both items waiting, each once
    seen = {_next(client, made, "bob")["item"]["seq"], _next(client, made, "ann")["item"]["seq"]}
    assert seen == {0, 1}


def test_a_team_quota_and_the_hold_limit_are_never_passed(client, db, make_project):
    made = make_project(items=10, teams={"red": 2, "blue": None},
                        people={"ann": ("red", "tagger"), "bob": ("red", "tagger"), "cy": ("red", "tagger"),
                                "dee": ("blue", "tagger")}, max_held=1)
    a, b = _next(client, made, "ann")["item"], _next(client, made, "bob")["item"]
    refused = _next(client, made, "cy")
    assert refused["item"] is None and "quota of 2" in refused["reason"]
    assert _next(client, made, "dee")["item"] is not None  # another team is not limited by red's quota
    assert _submit(client, made, "ann", a).status_code == 200
    assert _next(client, made, "cy")["item"] is None  # finished items count against the quota too
    skip = client.post(f"/tagging/projects/{made.project}/items/{b['seq']}/skip", headers=_h(made.tokens["bob"]),
                       json={"lease_id": b["lease_id"]})
    assert skip.status_code == 200
    assert _next(client, made, "cy")["item"] is not None  # a skipped item gives its unit back
    assert items.usage(db, made.project, "red") == 2


def test_qa_verifies_once_and_roles_are_enforced(client, db, make_project):
    made = make_project(items=3)
    item = _next(client, made, "ann")["item"]
    assert _submit(client, made, "ann", item, keywords=["x1"]).status_code == 200
    worker.run_once(db, made.project)
    url = f"/tagging/projects/{made.project}"
    listed = client.get(f"{url}/review", headers=_h(made.tokens["quinn"])).get_json()["items"]
    assert [i["seq"] for i in listed] == [item["seq"]]
    assert client.get(f"{url}/review", headers=_h(made.tokens["ann"])).status_code == 403
    assert client.post(f"{url}/next", headers=_h(made.tokens["quinn"])).status_code == 403
    assert client.post(f"{url}/items/{item['seq']}/verify", headers=_h(made.tokens["ann"]),
                       json={"result": "Correct"}).status_code == 403
    ok = client.post(f"{url}/items/{item['seq']}/verify", headers=_h(made.tokens["quinn"]),
                     json={"result": "Incorrect", "note": "it is sport"})
    assert ok.status_code == 200 and ok.get_json()["item"]["status"] == "QAVerified"
    assert ok.get_json()["item"]["verification"] == "Incorrect" and ok.get_json()["item"]["note"] == "it is sport"
    again = client.post(f"{url}/items/{item['seq']}/verify", headers=_h(made.tokens["quinn"]),
                        json={"result": "Incorrect", "note": "it is sport"})
    assert again.status_code == 200
    other = client.post(f"{url}/items/{item['seq']}/verify", headers=_h(made.tokens["quinn"]),
                        json={"result": "Correct"})
    assert other.status_code == 409
    worker.run_once(db, made.project)
    assert client.get(f"{url}/review", headers=_h(made.tokens["quinn"])).get_json()["items"] == []


def test_disable_and_a_deleted_source(client, db, make_project):
    made = make_project(items=3)
    url = f"/tagging/projects/{made.project}"
    item = _next(client, made, "ann")["item"]
    r = client.post(f"{url}/items/{item['seq']}/disable", headers=_h(made.tokens["ann"]))
    assert r.status_code == 403
    r = client.post(f"{url}/items/{item['seq']}/disable", headers=_h(made.tokens["ada"]))
    assert r.status_code == 200 and r.get_json()["item"]["status"] == "Disabled"
    late = _submit(client, made, "ann", item)
    assert late.status_code == 409 and "disabled" in late.get_json()["message"]
    post = posts.get_post(db, made.network, made.post_ids[_next(client, made, "bob")["item"]["seq"]])
    posts.delete_post_rows(db, made.network, post)
    shown = _next(client, made, "bob")["item"]
    assert shown["source"]["missing"] is True and "text" not in shown["source"]
    r = client.post(f"{url}/items/{shown['seq']}/missing", headers=_h(made.tokens["bob"]),
                    json={"lease_id": shown["lease_id"]})
    assert r.status_code == 200 and r.get_json()["item"]["status"] == "SourceMissing"
    assert _next(client, made, "bob")["item"]["seq"] not in (item["seq"], shown["seq"])


def test_tokens_are_scoped_to_their_project(client, make_project):
    one, two = make_project(items=1), make_project(items=1)
    url = f"/tagging/projects/{one.project}"
    assert client.post(f"{url}/next").status_code == 401
    assert client.post(f"{url}/next", headers=_h("tg_not-a-token")).status_code == 401
    r = client.post(f"{url}/next", headers=_h(two.tokens["ann"]))
    assert r.status_code == 403 and "another project" in r.get_json()["message"]
    me = client.get("/tagging/me", headers=_h(one.tokens["quinn"])).get_json()
    assert me == {"project": one.project, "user": "quinn", "team": "red", "role": "qa"}
    assert client.get("/tagging/projects/nope/stats", headers=_h("test-admin-token")).status_code == 404


def test_figures_equal_an_independent_count_and_reconcile_agrees(client, clocked_db, make_project):
    db = clocked_db
    made = make_project(items=12, database=db)
    expected_finished: Counter = Counter()
    used: Counter = Counter()
    plan = [("ann", ["news"], ["storm", "rain"]), ("bob", ["news", "sport"], ["storm"]),
            ("ann", ["other"], ["storm", "sun"]), ("bob", ["sport"], ["rain"]), ("ann", ["news"], ["fog"])]
    for user, cats, words in plan:
        item = _next(client, made, user)["item"]
        assert _submit(client, made, user, item, cats, [], words).status_code == 200
        expected_finished[user] += 1
        used.update(f"c:{c}" for c in cats)
        used.update(f"k:{w}" for w in words)
        db.clock.advance(1)  # a second per item: distinct stamps, as in real use
    db.clock.advance(worker.SETTLE_US / 1e6 + 0.5)  # every event is behind the owner's checkpoint
    worker.run_once(db, made.project)
    stats = client.get(f"/tagging/projects/{made.project}/stats", headers=_h(made.tokens["ada"])).get_json()
    assert stats["project"]["tagged"] == 5 and stats["project"]["remaining"] == 12 - 5
    assert {u["user"]: u["finished"] for u in stats["users"]} == dict(expected_finished)
    assert {u["user"]: u["assigned"] for u in stats["users"]} == dict(expected_finished)
    assert stats["teams"][0]["finished"] == 5 and stats["teams"][0]["used"] == 5
    top_words = [(t["name"], t["count"]) for t in stats["top"]["keywords"]]
    assert top_words == [("storm", 3), ("rain", 2), ("fog", 1), ("sun", 1)]
    assert [(t["name"], t["count"]) for t in stats["top"]["categories"]] == [("news", 3), ("sport", 2), ("other", 1)]
    assert stats["online"] == 3  # ann, bob and ada made requests just now
    done = reconcile.reconcile(db, made.project)
    assert done["differences"] == {} and done["missing_events"] == 0 and done["events"] == 10
    completion = client.get(f"/tagging/projects/{made.project}/keywords?prefix=ST",
                            headers=_h(made.tokens["ann"])).get_json()
    assert completion == {"keywords": ["storm"]}


def test_reconcile_repairs_a_lost_event_and_drifted_figures(client, clocked_db, make_project):
    db = clocked_db
    made = make_project(items=4, database=db)
    item = _next(client, made, "ann")["item"]
    state = items.get(db, made.project, item["seq"])
    # A submit whose request died after its transaction: the item is Tagged, the effort event never written.
    assert items.submit(db, made.project, item["seq"], "ann", int(item["lease_id"]), ["news"], [], ["lost"],
                        state.lease_from_us + 1000)
    db.clock.advance(worker.SETTLE_US / 1e6 + 0.5)  # the lost event's time falls behind the owner's checkpoint
    worker.run_once(db, made.project)
    found = reconcile.reconcile(db, made.project)
    assert found["missing_events"] == 1 and "project/" in found["differences"]
    fixed = reconcile.reconcile(db, made.project, repair=True)
    assert fixed["repaired"] is True
    assert reconcile.reconcile(db, made.project)["differences"] == {}
    worker.run_once(db, made.project)  # the owner reloads after the repair and keeps the repaired figures
    stats = client.get(f"/tagging/projects/{made.project}/stats", headers=_h(made.tokens["ada"])).get_json()
    assert stats["project"]["tagged"] == 1 and stats["top"]["keywords"] == [{"name": "lost", "count": 1}]


def test_the_sample_project_lists_the_sample_messages_and_its_tokens_work(client, db, settings):
    from api.slack.sample import load_sample as load_slack_sample
    from api.slack.sample import sample_events
    from api.tagging.sample import load_sample

    load_slack_sample(db, settings)
    first = load_sample(db)
    second = load_sample(db)  # idempotent project; new tokens, the old ones revoked
    # Independently from the sample's script: every message posted, less the ones deleted later.
    events = [e for e in sample_events() if e.get("type") == "message"]
    posted = {e["ts"] for e in events if e.get("subtype") in (None, "thread_broadcast", "bot_message")}
    deleted = {e["deleted_ts"] for e in events if e.get("subtype") == "message_deleted"}
    assert first["items"] == second["items"] == len(posted - deleted) == 7
    old, new = first["tokens"]["ann (tagger)"], second["tokens"]["ann (tagger)"]
    assert client.get("/tagging/me", headers=_h(old)).status_code == 401
    item = client.post("/tagging/projects/sample/next", headers=_h(new)).get_json()["item"]
    assert item["source"]["missing"] is False and item["source"]["channel"] in ("general", "random")
    replies = [client.get(f"/tagging/projects/sample/items/{seq}", headers=_h("test-admin-token")).get_json()["item"]
               for seq in range(first["items"])]
    reply = next(r for r in replies if r["source"]["ts"] == "1763700040.000000")
    assert [t["text"] for t in reply["source"]["thread"]][-1] == next(
        e["text"] for e in events if e["ts"] == "1763700030.000000")  # the thread so far, up to the reply


def test_a_retried_skip_gives_the_unit_back_once(client, db, make_project):
    made = make_project(items=4, teams={"red": 3})
    a, b = _next(client, made, "ann")["item"], _next(client, made, "bob")["item"]
    assert items.usage(db, made.project, "red") == 2
    url = f"/tagging/projects/{made.project}/items/{b['seq']}/skip"
    first = client.post(url, headers=_h(made.tokens["bob"]), json={"lease_id": b["lease_id"]})
    again = client.post(url, headers=_h(made.tokens["bob"]), json={"lease_id": b["lease_id"]})
    assert first.status_code == again.status_code == 200
    assert items.usage(db, made.project, "red") == 1  # ann still holds hers
    assert a["status"] == "InProgress"


def test_a_claim_cut_short_still_expires_and_reconcile_gives_back_a_leaked_unit(client, clocked_db, make_project):
    db = clocked_db
    made = make_project(items=2, teams={"red": 5}, lease_seconds=1, database=db)
    pos = control.positions(db, made.project)
    entry = queue.entries(db, made.project, queue.TAG, pos.tag_head, pos.tag_tail, 10)[0]
    # A request that took a unit, logged the lease end and claimed, then died: nothing else was written.
    lease = items.new_lease_id(stamps.now_us(db), 0)
    now = stamps.now_us(db)
    assert items.change_usage(db, made.project, "red", +1, 5)
    db.execute(*queue.lease_end_write(made.project, now + 1_000_000, entry.seq, lease))
    assert items.claim(db, made.project, entry.seq, entry.pos, "ann", "red", lease, now, now + 1_000_000)
    db.clock.advance(1.2)
    assert worker.run_once(db, made.project)["expired"] == 1
    assert items.get(db, made.project, entry.seq).status == "New"
    assert items.usage(db, made.project, "red") == 0  # the expiry gave the claim's unit back
    assert items.change_usage(db, made.project, "red", +1, 5)  # a unit taken by a request that then died
    found = reconcile.reconcile(db, made.project)
    assert found["team_usage"] == {"red": {"stored": 1, "items": 0}}
    assert reconcile.reconcile(db, made.project, repair=True)["repaired"] is True
    assert items.usage(db, made.project, "red") == 0
    assert reconcile.reconcile(db, made.project)["team_usage"] == {}
