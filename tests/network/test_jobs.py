"""Network jobs on the work queue (api/network/jobs.py): what requests queue, what the worker does with it
(`chronicle network worker`), retries and give-ups; and `chronicle network drop`."""

from __future__ import annotations

import json
import secrets
import time

import pytest
from click.testing import CliRunner

from api.activity import dirty, service
from api.activity.settings import ActivitySettings, set_activity_settings
from api.cli import chronicle
from api.db import get_db
from api.network import accounts, job_handlers, jobs, search, top100
from api.network.jobs import JobWorker
from api.network.settings import set_network_settings
from api.retention import policies
from tests.network.checks import check_posts, check_search
from tests.network.helpers import ADMIN, CAP, exact_settings, run_jobs, stop_jobs
from tests.test_readme import cql_tables


def _cli(*args: str, code: int = 0, stdin: str | None = None):
    result = CliRunner().invoke(chronicle, list(args), input=stdin)
    assert result.exit_code == code, (args, result.output, result.exception)
    return json.loads(result.stdout) if code == 0 and result.stdout.strip().startswith("{") else result


def test_the_cli_worker_promotes_an_account_that_crossed(fresh_net, client):
    net, ref = fresh_net, fresh_net.ref
    riser = next(a for a, _ in ref.q2(100)[10:] if ref.q1(a))
    threshold = len(ref.followers(riser)) + 1
    set_network_settings(exact_settings(hybrid_threshold=threshold, hybrid_hysteresis=0.0, cache_cap=CAP))
    newcomer = next(u for u in sorted(ref.usernames) if u != riser and riser not in ref.follows(u))
    r = client.put(f"/networks/{net.name}/accounts/{newcomer}/follows/{riser}", headers=ADMIN)
    assert (r.status_code, r.json["changed"], r.json["celebrity_job"]) == (200, True, True)
    assert not accounts.is_celebrity(get_db(), net.name, riser)
    stop_jobs(get_db())  # the in-process test worker must not hold the queue's shards
    summary = _cli("network", "worker", "--once")
    assert summary["done"] >= 1 and summary["kinds"]["celebrity"] >= 1 and summary["failed"] == 0
    assert accounts.is_celebrity(get_db(), net.name, riser)
    # The same follow again changes nothing and queues nothing.
    again = client.put(f"/networks/{net.name}/accounts/{newcomer}/follows/{riser}", headers=ADMIN).json
    assert (again["changed"], again["celebrity_job"]) == (False, False)


def test_failing_jobs_are_retried_then_given_up():
    db = get_db()
    network = f"jobs{secrets.token_hex(4)}"
    # Ids of accounts that do not exist: delivery is at least once, so a later worker running the real jobs
    # (another test's) may see these again, and must find them harmless.
    flaky, broken, fine = (str(10**15 + i) for i in range(3))
    calls: dict[str, int] = {}

    def handle(_db, net, kind, subject):
        if net != network:
            return {}  # other tests' jobs: not ours to judge
        calls[subject] = calls.get(subject, 0) + 1
        if subject == flaky and calls[subject] == 1:
            raise TimeoutError("first attempt times out")
        if subject == broken:
            raise RuntimeError("always fails")
        return {"ok": True}

    for subject in (flaky, broken, fine):
        jobs.enqueue(db, network, jobs.CELEBRITY, subject)
    stop_jobs(db)
    worker = JobWorker(db, handle, max_attempts=3, backoff_seconds=0.0)
    stats = worker.drain()
    assert calls == {flaky: 2, broken: 3, fine: 1}
    assert stats.retried >= 3 and stats.failed >= 1
    with pytest.raises(ValueError):
        jobs.job_writes(network, "no-such-kind", 1)


def test_a_worker_stopped_mid_batch_finishes_its_job_and_leaves_the_rest_to_the_next(client):
    """A signal during a batch waits for the job running, not for the batch: the jobs not begun stay queued and
    the next worker runs them."""
    db = get_db()
    network = f"jobs{secrets.token_hex(4)}"
    subjects = [str(10**15 + 10 + i) for i in range(3)]
    ran: list[str] = []
    stopping = False

    def handle(_db, net, kind, subject):
        nonlocal stopping
        if net != network:
            return job_handlers.run_job(_db, net, kind, subject)  # other tests' jobs run as usual
        ran.append(subject)
        stopping = True  # the signal arrives while this job runs
        return {}

    for subject in subjects:
        jobs.enqueue(db, network, jobs.CELEBRITY, subject)
    stop_jobs(db)
    first = JobWorker(db, handle, batch_size=20).drain(until=lambda: stopping)
    assert len(ran) == 1 and first.done >= 1
    JobWorker(db, handle).drain()
    # Delivery is at least once (a checkpoint stays SETTLE_US behind now): the finished job may run again.
    assert set(ran[1:]) >= set(subjects) - {ran[0]} and set(ran) == set(subjects)


def test_a_term_that_stops_being_rare_gets_a_top_list(fresh_net, client, monkeypatch):
    monkeypatch.setattr(search, "RARE_POSTINGS", 3)
    net, db = fresh_net, get_db()
    author = next(a for a, _ in fresh_net.ref.q2(100)[20:])
    term = f"zq{secrets.token_hex(3)}"
    for i in range(4):
        r = client.post(f"/networks/{net.name}/posts", json={"author_id": author, "content": f"{term} {i}"},
                        headers=ADMIN)
        assert r.status_code == 201
    assert search.top_states(db, net.name, [term]) == {}
    assert run_jobs(db).kinds["term-top"] >= 1  # queued by the 4th post (posting number 4 = RARE + 1)
    state = search.top_states(db, net.name, [term])[term]
    assert state.postings_at_build == 4
    found = client.get(f"/networks/{net.name}/search", query_string={"q": term}).json
    assert found["exact"] is True and len(found["posts"]) == 4


def test_drop_a_network(fresh_net, net, client):
    set_activity_settings(ActivitySettings(delay_seconds=0.5))
    try:
        _drop_a_network(fresh_net, net, client)
    finally:
        set_activity_settings(None)


def _drop_a_network(fresh_net, net, client) -> None:
    doomed, kept = fresh_net, net
    ref = doomed.ref
    some_account, some_post = ref.q2(1)[0][0], next(iter(ref.posts))
    # What requests add beside the load: a post retried by its key, a like and a follow (their activity log and
    # days), a home page (its cache), a ranking snapshot, stored activity days.
    first, second = sorted(ref.usernames)[:2]
    n = doomed.name
    posted = client.post(f"/networks/{n}/posts", headers=ADMIN | {"Idempotency-Key": "drop-1"},
                         json={"author_id": first, "content": "zqdropword"})
    assert posted.status_code == 201
    assert client.put(f"/networks/{n}/posts/{some_post}/likes/{first}", headers=ADMIN).status_code == 200
    assert client.put(f"/networks/{n}/accounts/{first}/follows/{second}", headers=ADMIN).status_code in (200, 201)
    assert client.get(f"/networks/{n}/accounts/{second}/home").status_code == 200
    assert client.post(f"/networks/{n}/rankings", headers=ADMIN).status_code == 202
    run_jobs(get_db())
    time.sleep(0.6)  # past the marks' delay (0.5 s here): the dirty worker stores the days now
    dirty.DirtyWorker(get_db(), service.rebuild_marks).drain()
    assert {"post_requests", "network_activity_slots", "network_activity_days", "home_timeline_buckets",
            "top100_accounts_by_time", "activity_days"} <= set(_left_of(get_db(), n))
    assert _cli("network", "drop", "bad name!", "--yes", code=2)
    assert _cli("network", "drop", doomed.name, stdin="n\n", code=2)
    # A legal hold on one of its accounts refuses the drop (exit 5) and deletes nothing.
    hold = policies.create_hold(get_db(), f"network:{n}", "account", str(first), "case 9", by="test", via="test")
    refused = _cli("network", "drop", doomed.name, "--yes", code=5)
    assert "legal hold" in refused.output and client.get(f"/networks/{n}/posts/{some_post}").status_code == 200
    policies.release_hold(get_db(), f"network:{n}", hold.hold_id, by="test", via="test")
    planned = _cli("network", "drop", doomed.name, "--dry-run")
    assert planned["dry_run"] is True
    assert planned["partitions"]["network_accounts"] == len(ref.usernames)
    assert planned["partitions"]["posts_by_id"] == len(ref.posts) + 1  # the post above
    assert planned["partitions"]["likes_by_post"] == len({p for p, _ in ref.likes} | {some_post})
    assert client.get(f"/networks/{doomed.name}/accounts/{some_account}").status_code == 200  # dry: kept
    done = _cli("network", "drop", doomed.name, "--yes")
    assert done["partitions"] == planned["partitions"] and done["total"] > 0
    assert client.get(f"/networks/{doomed.name}/accounts/{some_account}").status_code == 404
    assert client.get(f"/networks/{doomed.name}/posts/{some_post}").status_code == 404
    word = next(w for w in ("love", "happy", "world") if kept.ref.q6([w]))
    assert client.get(f"/networks/{doomed.name}/search", query_string={"q": word}).json["posts"] == []
    assert _cli("network", "drop", doomed.name, "--yes")["total"] == 0  # nothing left: a re-run is a no-op
    assert _left_of(get_db(), doomed.name) == {}
    # The other network is untouched.
    check_posts(client, kept.name, kept.ref, kept.ref.q2(1)[0][0])
    check_search(client, kept.name, kept.ref)


def test_a_ranking_job_that_fails_says_so_and_a_done_one_is_not_run_again(client, monkeypatch):
    db = get_db()
    network = f"rank{secrets.token_hex(4)}"
    real = top100.compute_rankings
    calls = []

    def failing(db_, net, *args, **kw):
        if net != network:
            return real(db_, net, *args, **kw)  # other tests' jobs run as usual
        calls.append(net)
        if len(calls) == 1:
            raise RuntimeError("node overloaded")
        return real(db_, net, *args, **kw)

    monkeypatch.setattr(top100, "compute_rankings", failing)
    queued = client.post(f"/networks/{network}/rankings", headers=ADMIN).json
    stop_jobs(db)
    worker = JobWorker(db, job_handlers.run_job, backoff_seconds=0.0)
    status = client.get(queued["status_url"])
    assert status.json["status"] == "queued"
    worker.run_once()
    failed = client.get(queued["status_url"]).json
    assert (failed["status"], failed["attempts"]) == ("failed", 1) and "node overloaded" in failed["error"]
    worker.drain()  # the retry (due at once: no backoff)
    done = client.get(queued["status_url"]).json
    assert (done["status"], done["attempts"], len(calls)) == ("done", 2, 2)
    # Delivered again (at least once): nothing is computed a second time.
    assert job_handlers.run_job(db, network, jobs.RANKINGS, queued["job_id"])["already_done"] is True
    assert len(calls) == 2


def _left_of(db, network: str) -> dict[str, int]:
    """Brute force, test only: rows of `network` in every table of cql/ with a network or archive column, except
    the records kept on purpose (retention policies and runs, legal holds, the erasure ledger)."""
    kept = {"retention_policies", "retention_runs", "legal_holds", "erasure_requests", "audit_log"}
    left: dict[str, int] = {}
    for table in sorted(cql_tables() - kept):
        columns = {r.column_name for r in db.execute_raw(
            "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s",
            (db.keyspace, table))}
        for column, value in (("network", network), ("archive", f"network:{network}")):
            if column in columns:
                n = sum(1 for _ in db.execute_raw(
                    f"SELECT {column} FROM {db.keyspace}.{table} WHERE {column} = %s ALLOW FILTERING", (value,)))
                if n:
                    left[table] = n
    return left
