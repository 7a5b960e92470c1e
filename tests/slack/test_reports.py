"""Reports: analytics kept through edits and deletes in any order, the stored report swapped atomically, the
REST endpoints (JSON, HTML, anonymised, generate as admin), the Slack post (Block Kit split at 50 blocks, sent to
the loopback Web API stand-in) and the CLI. The figures themselves: test_report_figures.py."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import threading
import uuid

import pytest
from click.testing import CliRunner

from api.cli import chronicle as cli
from api.db import Statement
from api.slack.reports import blocks, jobs, service, store
from api.slack.reports.period import Period, last_full_week
from api.slack.timeutil import day_of, ts_to_us
from tests.fakes.slack_web_api import DEFAULT_TOKEN, FakeSlackWebApi
from tests.helpers import ADMIN_TOKEN
from tests.slack.helpers import ALL, created, delete, edit, msg, post_event

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
T1_ONLY = {"Authorization": "Bearer token-t1"}
START = dt.date(2026, 3, 1)  # a Sunday: the week report_workspace (conftest.py) fills, after the week before it


def _team() -> str:
    return f"T{uuid.uuid4().hex[:12].upper()}"


def run_report_jobs(db) -> jobs.Stats:
    """What `chronicle slack report-worker --once` does: every report job due now, in this process."""
    total = jobs.Stats()
    jobs.ReportWorker(db, service.run_job).run(until_idle=True, on_pass=total.add)
    return total


def generate(client, db, team: str, body: dict) -> dict:
    """POST a generation (202, queued), run the worker, and return the job's final status."""
    made = client.post(f"/slack/teams/{team}/reports", json=body, headers=ADMIN)
    assert made.status_code == 202, made.get_json()
    run_report_jobs(db)
    status = client.get(made.get_json()["status_url"], headers=ADMIN)
    assert status.status_code == 200 and status.get_json()["state"] == "done", status.get_json()
    return status.get_json()


SELECT_ANALYTICS = Statement(
    "SELECT word_count, mentions, replies, parent_user_id FROM slack_messages WHERE team_id = ? AND channel_id = ? "
    "AND day = ? AND ts = ?")


def _row(db, team: str, channel: str, ts: str):
    us = ts_to_us(ts)
    return db.execute(SELECT_ANALYTICS, (team, channel, day_of(us), us)).one()


# -- analytics at ingest ------------------------------------------------------------------------------------

TEXTS = ("hello <@UBOBBY> and <@UALICE>", "now <@UCAROL|carol> and <@UCAROL> twice <@UALICE>",
         "plain words only here")


@pytest.mark.parametrize("last", [1, 2], ids=["mentions-last", "no-mentions-last"])
@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_word_count_and_mentions_follow_the_newest_text_whatever_the_order(client, db, unique_channel, order,
                                                                           last):
    """A post and two edits delivered in every order: the figures are those of the newest text (mentions of
    distinct users, the author's own left out; an edit that removes every mention leaves none)."""
    team, channel, ts = _team(), unique_channel(), "1772400000.000100"
    second, third = (2, 1) if last == 1 else (1, 2)
    events = [
        msg(channel, ts, TEXTS[0], user="UALICE"),
        edit(channel, ts, TEXTS[second], TEXTS[0], at="1772400100.000100", user="UALICE"),
        edit(channel, ts, TEXTS[third], TEXTS[second], at="1772400200.000100", user="UALICE"),
    ]
    for i in order:
        assert post_event(client, team, events[i]).status_code == 200
    row = _row(db, team, channel, ts)
    if third == 1:
        assert (row.word_count, set(row.mentions)) == (6, {"UCAROL"})
    else:
        assert (row.word_count, set(row.mentions)) == (4, set())  # an empty value, not the older set


@pytest.mark.parametrize("delete_first", [False, True])
def test_a_reply_is_on_its_heads_replies_until_deleted(client, db, unique_channel, delete_first):
    team, channel = _team(), unique_channel()
    head = msg(channel, "1772400000.000100", "question", user="UA")
    keep = msg(channel, "1772400010.000100", "answer", user="UB", thread_ts="1772400000.000100",
               parent_user_id="UA")
    gone = msg(channel, "1772400020.000100", "oops", user="UC", thread_ts="1772400000.000100")
    removal = delete(channel, "1772400020.000100", at="1772400030.000100")
    removal["previous_message"]["thread_ts"] = "1772400000.000100"
    events = [head, keep, removal, gone] if delete_first else [head, keep, gone, removal]
    for event in events:
        assert post_event(client, team, event).status_code == 200
    row = _row(db, team, channel, "1772400000.000100")
    assert dict(row.replies) == {ts_to_us("1772400010.000100"): "UB"}
    assert _row(db, team, channel, "1772400010.000100").parent_user_id == "UA"


# -- the REST endpoints, over report_workspace (conftest.py) -----------------------------------------------------

def test_generate_as_admin_then_get_json_html_and_list(client, db, report_workspace):
    team = report_workspace
    refused = client.post(f"/slack/teams/{team}/reports", json={"start": "2026-03-01"}, headers=ALL)
    assert refused.status_code == 403
    # The request only queues the job: nothing is computed or stored until the worker runs it.
    made = client.post(f"/slack/teams/{team}/reports", json={"start": "2026-02-22", "days": 1}, headers=ADMIN)
    assert made.status_code == 202, made.get_json()
    job = made.get_json()
    assert job["state"] == "queued" and job["report_id"] == "2026-02-22-1" and "report_url" not in job
    assert client.get(job["status_url"], headers=ADMIN).get_json()["state"] == "queued"
    assert client.get(job["status_url"], headers=ALL).status_code == 403
    assert client.get(f"/slack/teams/{team}/reports/2026-02-22-1", headers=ALL).status_code == 404
    assert run_report_jobs(db).done >= 1
    finished = client.get(job["status_url"], headers=ADMIN).get_json()
    assert finished["state"] == "done" and finished["messages"] == 2 and finished["attempts"] == 1
    assert client.get(finished["report_url"], headers=ALL).get_json()["totals"]["messages"]["value"] == 2

    status = generate(client, db, team, {"start": "2026-03-01", "days": 7})
    assert status["report_url"] == f"/slack/teams/{team}/reports/2026-03-01-7" and status["messages"] == 21
    doc = client.get(status["report_url"], headers=ALL).get_json()
    assert doc["report_id"] == "2026-03-01-7"
    # 7 days x 3 messages this week against 7 x 2 the week before; every message got one reaction
    assert doc["totals"]["messages"] == {"value": 21, "previous": 14, "change": 7}
    assert doc["totals"]["reactions"] == {"value": 21, "previous": 14, "change": 7}
    assert doc["names"]["channels"] == {"CREPGENERAL": "general", "CREPRANDOM": "random"}
    assert doc["names"]["users"]["UA"] == "name-UA"

    got = client.get(f"/slack/teams/{team}/reports/2026-03-01-7", headers=ALL)
    assert got.status_code == 200 and got.mimetype == "application/json"

    for page in (client.get(f"/slack/teams/{team}/reports/2026-03-01-7.html", headers=ALL),
                 client.get(f"/slack/teams/{team}/reports/2026-03-01-7", headers={**ALL, "Accept": "text/html"})):
        assert page.status_code == 200 and page.mimetype == "text/html"
        html = page.get_data(as_text=True)
        assert html.count('id="chart-utc-weekday"') == 1 and "#general" in html and "name-UA" in html
        assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html  # no asset elsewhere

    listed = client.get(f"/slack/teams/{team}/reports", headers=ALL).get_json()
    entry = next(r for r in listed["reports"] if r["report_id"] == "2026-03-01-7")  # other tests add older weeks
    assert entry["messages"] == 21 and entry["days"] == 7 and entry["start"] == "2026-03-01"


def test_anonymised_reports_name_nobody(client, db, report_workspace):
    team = report_workspace
    generate(client, db, team, {"start": "2026-03-01"})
    first = client.get(f"/slack/teams/{team}/reports/2026-03-01-7?anonymise=true", headers=ALL).get_json()
    text = json.dumps(first)
    for real in ("UA", "UB", "name-UA", "name-UB", "general", "CREPGENERAL", "random", "CREPRANDOM"):
        assert f'"{real}"' not in text  # no id or name left as a value anywhere
    names = first["names"]
    assert not {"UA", "UB"} & set(names["users"]) and not {"CREPGENERAL", "CREPRANDOM"} & set(names["channels"])
    assert not any("name-U" in n for n in names["users"].values())
    assert not {"general", "random"} & set(names["channels"].values())
    assert "/slack/teams/" not in text and "slack.com/archives" not in text  # no link into the workspace
    assert first["anonymised"] is True and first["totals"]["messages"]["value"] == 21
    again = client.get(f"/slack/teams/{team}/reports/2026-03-01-7?anonymise=true", headers=ALL).get_json()
    assert again["names"] == first["names"]  # stable fakes
    html = client.get(f"/slack/teams/{team}/reports/2026-03-01-7.html?anonymise=true", headers=ALL)
    assert "name-UA" not in html.get_data(as_text=True) and "#general" not in html.get_data(as_text=True)


def test_the_job_endpoints_are_in_the_openapi_document(client):
    paths = client.get("/openapi.json").get_json()["paths"]
    posted = paths["/slack/teams/{team_id}/reports"]["post"]
    assert "202" in posted["responses"] and "201" not in posted["responses"]
    assert "requestBody" in posted
    status = paths["/slack/teams/{team_id}/reports/jobs/{job_id}"]["get"]
    assert {"200", "404"} <= set(status["responses"])
    assert '"job_id"' in json.dumps(paths["/slack/teams/{team_id}/reports/jobs/{job_id}"])  # documented parameter


def test_report_errors_are_clear(client, report_workspace):
    team = report_workspace
    cases = [
        (client.get(f"/slack/teams/{team}/reports/2020-01-05-7", headers=ALL), 404, "generate it first"),
        (client.get(f"/slack/teams/{team}/reports/2020-02-31-7", headers=ALL), 404, "no such day"),
        (client.get(f"/slack/teams/{team}/reports/2020-01-05-0", headers=ALL), 404, "days must be"),
        (client.get(f"/slack/teams/{team}/reports/2026-03-01-7", headers=T1_ONLY), 403, "not allowed"),
        (client.get(f"/slack/teams/{team}/reports/2026-03-01-7"), 401, ""),
        (client.post(f"/slack/teams/{team}/reports", json={"days": 0}, headers=ADMIN), 422, ""),
        (client.post(f"/slack/teams/{team}/reports", json={"start": "03/01/2026"}, headers=ADMIN), 422, ""),
        (client.post(f"/slack/teams/{_team()}/reports", json={}, headers=ADMIN), 404, "not in the archive"),
        (client.get(f"/slack/teams/{team}/reports/jobs/{uuid.uuid4().hex}", headers=ADMIN), 404, "no report job"),
        (client.get(f"/slack/teams/{team}/reports/jobs/nope", headers=ADMIN), 404, "no such job"),
        (client.get(f"/slack/teams/{team}/reports?cursor=abc.def", headers=ALL), 400, "cursor"),
    ]
    for response, status, words in cases:
        body = response.get_json()
        assert response.status_code == status, body
        assert body["code"] == status and words in body["message"]


def test_the_listing_pages_newest_first(client, db, report_workspace):
    team = report_workspace
    for start in ("2026-02-15", "2026-02-22", "2026-03-01"):
        assert client.post(f"/slack/teams/{team}/reports", json={"start": start}, headers=ADMIN).status_code == 202
    assert run_report_jobs(db).done >= 3
    listed, cursor, pages = [], None, 0  # other tests of the workspace add reports of other periods
    while True:
        page = client.get(f"/slack/teams/{team}/reports?limit=2" + (f"&cursor={cursor}" if cursor else ""),
                          headers=ALL).get_json()
        assert len(page["reports"]) <= 2
        listed += [r["report_id"] for r in page["reports"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert listed == sorted(listed, reverse=True) and len(set(listed)) == len(listed) and pages >= 2
    assert [r for r in listed if r.endswith("-7")] == ["2026-03-01-7", "2026-02-22-7", "2026-02-15-7"]


def test_the_default_period_is_the_last_sunday_start_week_that_has_ended():
    assert last_full_week(dt.date(2026, 11, 23)) == Period(dt.date(2026, 11, 15), 7)  # a Monday
    assert last_full_week(dt.date(2026, 11, 22)) == Period(dt.date(2026, 11, 15), 7)  # a Sunday: that week ended
    assert last_full_week(dt.date(2026, 11, 21)) == Period(dt.date(2026, 11, 8), 7)  # a Saturday


# -- the store ----------------------------------------------------------------------------------------------

def test_a_regenerated_report_is_swapped_whole_while_readers_read(db, monkeypatch):
    """Small chunks, a reader in a loop while the report is rewritten 30 times with documents of different sizes:
    every read is exactly one of the written documents (never a mix of two generations)."""
    monkeypatch.setattr(store, "CHUNK_BYTES", 97)
    team, report_id = _team(), "2026-03-01-7"
    documents = [{"n": n, "filler": [f"{n}-{i}-{uuid.uuid4().hex}" for i in range(40 + 7 * n)]} for n in range(30)]
    store.save(db, team, report_id, documents[0], start_day=START, days=7, messages=0)
    seen, errors, done = [], [], threading.Event()

    def reader() -> None:
        while not done.is_set():
            try:
                seen.append(store.load(db, team, report_id))
            except Exception as exc:  # noqa: BLE001 - any failure is what this test looks for
                errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for document in documents[1:]:
            saved = store.save(db, team, report_id, document, start_day=START, days=7, messages=document["n"])
            assert saved.chunks > 3
    finally:
        done.set()
        thread.join()
    assert errors == []
    assert len(seen) > 10 and all(d in documents for d in seen)
    assert [d["n"] for d in seen] == sorted(d["n"] for d in seen)  # never an older one after a newer one
    assert store.load(db, team, report_id) == documents[-1]
    generations = {r.generation for r in db.execute(GENERATIONS, (team, report_id))}
    assert len(generations) == 2  # the current one and the one before it; older ones deleted


GENERATIONS = Statement("SELECT generation FROM slack_reports WHERE team_id = ? AND report_id = ? GROUP BY generation")


def test_a_reader_falls_back_to_the_previous_generation_then_says_the_report_is_unreadable(db):
    """The pointer names a generation whose chunks are not all there (what a reader at LOCAL_ONE could see
    before 0180): the previous generation is served; with neither whole, CorruptReport, never a mix."""
    team, report_id = _team(), "2026-03-01-7"
    first = store.save(db, team, report_id, {"n": 1}, start_day=START, days=7, messages=1)
    second = store.save(db, team, report_id, {"n": 2}, start_day=START, days=7, messages=2)
    assert store.load(db, team, report_id) == {"n": 2}
    db.execute(store.DELETE_GENERATION, (team, report_id, second.generation))
    assert store.load(db, team, report_id) == {"n": 1}
    db.execute(store.DELETE_GENERATION, (team, report_id, first.generation))
    with pytest.raises(store.CorruptReport):
        store.load(db, team, report_id)


def test_a_failing_job_is_retried_then_failed_and_a_finished_job_is_not_run_again(mdb, clock):
    team, calls = _team(), []

    def failing(db, team_id, payload):
        calls.append(payload["job_id"])
        raise RuntimeError("node overloaded")

    job_id = jobs.submit(mdb, team, "2026-03-01-7", {"start": "2026-03-01", "days": 7})
    worker = jobs.ReportWorker(mdb, failing, max_attempts=2, backoff_seconds=5)
    assert worker.run_once().retried == 1
    state = store.job(mdb, team, job_id)
    assert state["state"] == "queued" and state["attempts"] == 1 and "node overloaded" in state["error"]
    assert worker.run_once().total() == 0  # the retry is not due yet
    clock.advance(6)
    assert worker.run_once().failed == 1
    state = store.job(mdb, team, job_id)
    assert state["state"] == "failed" and state["attempts"] == 2 and "finished_at" in state
    assert calls == [job_id, job_id]
    # A done job whose queue item comes back (a crash between the two) is not run again.
    done_id = jobs.submit(mdb, team, "2026-03-08-7", {"start": "2026-03-08", "days": 7})
    store.update_job(mdb, team, done_id, state="done", attempts=1, finished=True)
    assert worker.run_once().skipped == 1 and calls == [job_id, job_id]
    worker.stop()


# -- the Slack post ------------------------------------------------------------------------------------------

def _big_document(team: str) -> dict:
    """A synthetic report with 2,000 channels and 2,000 people: far more than 50 blocks."""
    def f(v, p=0):
        return {"value": v, "previous": p, "change": v - p}
    channels = [{"channel": f"C{i:05d}", "messages": f(4000 - i), "words": f(1000), "users": [
        [f"U{i:05d}", 4000 - i, 0, 1000, 0]]} for i in range(2000)]
    rows = [{"user": f"U{i:05d}", "messages": f(4000 - i), "words": f(1000), "rank": f(i + 1),
             "share": f(0.001), "cumulative_share": 0.001 * (i + 1)} for i in range(2000)]
    return {
        "team_id": team, "report_id": "2026-03-01-7", "period": {"start": "2026-03-01", "end": "2026-03-08", "days": 7},
        "previous": {"start": "2026-02-22", "end": "2026-03-01", "days": 7},
        "totals": {"messages": f(80000), "words": f(200000)},
        "users": {"rows": rows, "users_for_half": f(90), "top10_share": f(0.1), "messages_per_poster": {
            "average": f(10), "median": f(5)}, "words_per_poster": {"average": f(30), "median": f(20)}},
        "channels": channels,
        "activity": {"utc_weekday": [f(1)] * 7, "timezones": [{"tz": "UTC", "messages": f(1), "posters": f(1)}]},
        "reactions": {"top": [{"emoji": "tada", "count": f(3)}], "pairs": [], "by_channel": [
            {"channel": "C00000", "top": [{"emoji": "tada", "count": f(3)}]}], "given": [], "received": []},
        "mentions": {"made": [], "received": []}, "threads": {"responders": [], "pairs": []},
        "top_messages": {"most_reacted": [{"channel": "C00000", "ts": "1772400000.000100", "user": "U00000",
                                           "reactions": 9, "permalink": "https://slack.com/archives/C00000/p1"}],
                         "most_replied": []},
        "new_users": {"count": f(0), "users": []}, "first_posts": {"count": f(0), "posts": []}, "members": [],
        "names": {"users": {f"U{i:05d}": f"person {i}" for i in range(2000)},
                  "channels": {f"C{i:05d}": f"chan{i}" for i in range(2000)}},
    }


def test_the_post_is_split_at_50_blocks_and_goes_to_each_target(monkeypatch):
    team = _team()
    doc = _big_document(team)
    with FakeSlackWebApi(team_id=team) as fake:
        fake.add_channel("CSTATS", "chronicle-stats")
        fake.add_channel("CCHAN0STATS", "chan0-stats")  # only chan0 has a -stats channel
        fake.add_user("U00001", "person1")
        monkeypatch.setenv("CHRONICLE_SLACK_BOT_TOKENS", f"{team}={DEFAULT_TOKEN}")
        monkeypatch.setenv("CHRONICLE_SLACK_API_URL", fake.base_url)
        from api.slack.settings import SlackSettings

        delivery = service.post(doc, SlackSettings.from_env(), per_channel=True, dm_users=("U00001", "U99999"))
        workspace_posts = [p for p in fake.posted if p["channel"] == "CSTATS"]
        expected = blocks.workspace_blocks(doc)
        assert len(expected) > 50
        assert len(workspace_posts) == -(-len(expected) // 50)  # every part accepted by Slack's limits
        assert [b for p in workspace_posts for b in p["blocks"]] == expected  # all of it, in order
        assert all(len(p["blocks"]) <= 50 for p in fake.posted)
        text = json.dumps(workspace_posts)
        assert "#chan1999" in text and "person 0" in text and "80000" in text
        channel_posts = [p for p in fake.posted if p["channel"] == "CCHAN0STATS"]
        assert len(channel_posts) == 1 and "#chan0" in json.dumps(channel_posts[0]["blocks"])
        assert ("#chan1-stats", "channel_not_found") in delivery.skipped  # no such channel: skipped, reported
        dms = [p for p in fake.posted if p["channel"] == "D00001"]
        assert len(dms) == 1 and "Your week" in json.dumps(dms[0]["blocks"])
        assert ("U99999", "no messages in the period") in delivery.skipped


def test_a_post_without_the_scope_fails_clearly(monkeypatch):
    team = _team()
    with FakeSlackWebApi(team_id=team, tokens={"xoxb-readonly": {"channels:read"}}) as fake:
        fake.add_channel("CSTATS", "chronicle-stats")
        monkeypatch.setenv("CHRONICLE_SLACK_BOT_TOKENS", f"{team}=xoxb-readonly")
        monkeypatch.setenv("CHRONICLE_SLACK_API_URL", fake.base_url)
        from api.slack.settings import SlackSettings

        with pytest.raises(blocks.PostError, match="missing_scope"):
            service.post(_big_document(team), SlackSettings.from_env())
        assert fake.posted == []


# -- the CLI ------------------------------------------------------------------------------------------------

def test_cli_generates_prints_html_and_posts(db, report_workspace, tmp_path, monkeypatch):
    team = report_workspace
    monkeypatch.setenv("CHRONICLE_KEYSPACE", db.keyspace)
    out = tmp_path / "report.html"
    run = CliRunner().invoke(cli, ["slack", "report", "--team", team, "--start", "2026-03-01", "--format", "html",
                                   "--out", str(out)])
    assert run.exit_code == 0, run.output
    assert 'id="chart-local-hour"' in out.read_text()
    with FakeSlackWebApi(team_id=team) as fake:
        fake.add_channel("CSTATS", "weekly")
        monkeypatch.setenv("CHRONICLE_SLACK_BOT_TOKENS", f"{team}={DEFAULT_TOKEN}")
        monkeypatch.setenv("CHRONICLE_SLACK_API_URL", fake.base_url)
        run = CliRunner().invoke(cli, ["slack", "report", "--team", team, "--start", "2026-03-01", "--stored",
                                       "--post", "--channel", "#weekly", "--anonymise"])
        assert run.exit_code == 0, run.output
        assert len(fake.posted) == 1 and fake.posted[0]["channel"] == "CSTATS"
        assert "general" not in json.dumps(fake.posted[0]["blocks"])  # anonymised
        assert json.loads(run.stdout)["anonymised"] is True
        run = CliRunner().invoke(cli, ["slack", "report", "--team", team, "--start", "2026-03-01", "--stored",
                                       "--post", "--channel", "#nowhere"])
        assert run.exit_code == 1 and "channel_not_found" in run.output
    assert CliRunner().invoke(cli, ["slack", "report", "--team", team, "--start", "2019-01-01",
                                    "--stored"]).exit_code == 4
    assert CliRunner().invoke(cli, ["slack", "report", "--team", team, "--start", "March"]).exit_code == 2


# -- messages archived before the analytics existed ---------------------------------------------------------

# A message row as the code before schema 0060 wrote it: no analytics columns.
OLD_UPSERT = Statement(
    "UPDATE slack_messages USING TIMESTAMP ? SET msg_ts = ?, user_id = ?, text = ?, thread_ts = ? "
    "WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?")
OLD_DAY = Statement("INSERT INTO slack_channel_days (team_id, channel_id, day) VALUES (?, ?, ?)")


def test_analytics_rebuild_fills_rows_archived_before_0060_without_undoing_edits(client, db, unique_channel,
                                                                                 monkeypatch):
    team, channel = _team(), unique_channel()
    head, reply = ts_to_us("1772400000.000100"), ts_to_us("1772400010.000100")
    edited_at = ts_to_us("1772400100.000100")
    assert post_event(client, team, created(channel, "old-channel", "1772300000.000100")).status_code == 200
    for wt, ts, user, text, thread in ((edited_at, head, "UA", "final text with <@UCAROL> and more", head),
                                       (reply, reply, "UB", "a reply", head)):
        db.execute(OLD_UPSERT, (wt, f"{ts // 10**6}.{ts % 10**6:06d}", user, text, thread, team, channel,
                                day_of(ts), ts))
    db.execute(OLD_DAY, (team, channel, day_of(head)))
    assert _row(db, team, channel, "1772400000.000100").word_count is None
    monkeypatch.setenv("CHRONICLE_KEYSPACE", db.keyspace)

    dry = CliRunner().invoke(cli, ["slack", "analytics-rebuild", "--team", team, "--dry-run", "--no-progress"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["writes"] == 3
    assert _row(db, team, channel, "1772400000.000100").word_count is None  # a dry run writes nothing
    run = CliRunner().invoke(cli, ["slack", "analytics-rebuild", "--team", team, "--no-progress"])
    assert run.exit_code == 0, run.output
    row = _row(db, team, channel, "1772400000.000100")
    assert (row.word_count, set(row.mentions), dict(row.replies)) == (6, {"UCAROL"}, {reply: "UB"})
    assert _row(db, team, channel, "1772400010.000100").word_count == 2
    # written at the text's own time: the original post delivered again (older than the edit) does not win
    original = msg(channel, "1772400000.000100", "first draft <@UB>", user="UA", thread_ts="1772400000.000100")
    assert post_event(client, team, original).status_code == 200
    row = _row(db, team, channel, "1772400000.000100")
    assert (row.word_count, set(row.mentions)) == (6, {"UCAROL"})


def test_slackbot_and_bots_are_left_out_of_the_statistics(client, db, unique_channel):
    team, channel = _team(), unique_channel()
    base = 1772400000  # 2026-03-01, in the week reported
    events = [msg(channel, f"{base + 60}.000100", "a person writes", user="UPERSON"),
              msg(channel, f"{base + 120}.000100", "You have a reminder", user="USLACKBOT"),
              msg(channel, f"{base + 180}.000100", "deploy done", user="UDEPLOYBOT", bot_id="BDEPLOY"),
              msg(channel, f"{base + 240}.000100", "joined", user="UPERSON", subtype="channel_join")]
    for event in events:
        assert post_event(client, team, event).status_code == 200
    doc = service.generate(db, team, Period(START, 7), save=False)
    assert doc["totals"]["messages"]["value"] == 1 and [r["user"] for r in doc["users"]["rows"]] == ["UPERSON"]


def test_an_unreachable_slack_is_a_clear_post_error(monkeypatch):
    team = _team()
    monkeypatch.setenv("CHRONICLE_SLACK_BOT_TOKENS", f"{team}=xoxb-any")
    monkeypatch.setenv("CHRONICLE_SLACK_API_URL", "http://127.0.0.1:9/api/")  # nothing listens on port 9
    from api.slack.settings import SlackSettings

    with pytest.raises(blocks.PostError, match="unreachable"):
        service.post(_big_document(team), SlackSettings.from_env())
