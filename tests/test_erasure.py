"""Erasure of a Slack person (issue 32): a workspace with the person everywhere (posts with files and blocks,
edits, a thread others replied to, one only they replied to, replies in others' threads, reactions, mentions in
others' texts, versions and blocks, a channel they created and belong to, their profile, activity days, a stored
report), erased through the CLI's function; then an independent brute-force scan of every table of the keyspace
(every row of the workspace, every cell, blobs decoded) finds no trace of them, and everyone else's data is
whole."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime
from typing import Any

import pytest

from api.activity import codec, dirty, service
from api.erasure import ledger, proof, rules
from api.erasure import slack as erasure
from api.retention import policies
from api.slack import events, messages, payloads, search, search_index, search_terms, term_filter
from api.slack.codec import compress_json, decode_json, decompress_json
from api.slack.files import LocalStore, object_key
from api.slack.reports import service as reports
from api.slack.reports.period import Period
from tests.slack.helpers import edit, envelope, msg, reaction
from tests.test_readme import cql_tables

PERSON, ANN, BOB = "UERASE01", "UANN0001", "UBOB0001"
DAY = date(2026, 3, 2)  # a Monday
US = 1_000_000
MSG_DAY = (DAY - date(1970, 1, 1)).days


def _ts(hour: int, second: int = 0, day: date = DAY) -> str:
    base = int(datetime.combine(day, datetime.min.time(), UTC).timestamp())
    return f"{base + hour * 3600 + second}.000200"


def _us(ts: str) -> int:
    seconds, _, micros = ts.partition(".")
    return int(seconds) * US + int(micros)


def _workspace(db, settings, team: str, files: LocalStore, *, again: bool = False) -> dict[str, Any]:
    """The workspace through events; `again`: delivered once more after the person's erasure, which leaves out
    their messages and reactions (tests/test_erasure_reimport.py)."""
    expected = ("stored", "ignored: an erased person's, from before their erasure") if again else ("stored",)

    def handle(event: dict) -> None:
        assert events.handle(db, settings, payloads.parse(envelope(team, event))) in expected

    handle({"type": "channel_created", "event_ts": _ts(0),
            "channel": {"id": "CERA", "name": "person-made", "created": int(float(_ts(0))), "creator": PERSON}})
    for user, name in ((PERSON, "erin.erased"), (ANN, "ann"), (BOB, "bob")):
        handle({"type": "user_change", "event_ts": _ts(0, 5),
                "user": {"id": user, "team_id": team, "name": name, "real_name": name.title(), "tz": "UTC",
                         "tz_offset": 0, "updated": int(float(_ts(0, 5))),
                         "profile": {"display_name": name, "real_name": name.title(), "email": f"{name}@x.test"}}})
    w: dict[str, Any] = {}
    # Their own: a post with a stored file, a post with blocks, an edited post, a thread others replied to, a
    # thread only they replied to, a reply in Ann's thread.
    w["post_file"] = _ts(9)
    handle(msg("CERA", w["post_file"], "zqownfile report attached", user=PERSON,
               files=[{"id": "FERASE1", "name": "r.txt", "mimetype": "text/plain"}]))
    uri = files.put(object_key(team, "CERA", _us(w["post_file"]), "FERASE1"), b"their file", "text/plain")
    messages.record_file_stored(db, team, "CERA", _us(w["post_file"]), "FERASE1", uri)
    w["post_blocks"] = _ts(9, 30)
    handle(msg("CERA", w["post_blocks"], "zqownblocks", user=PERSON, blocks=[
        {"type": "rich_text", "block_id": "b1", "elements": [{"type": "rich_text_section", "elements": [
            {"type": "text", "text": "zqownblocks with "}, {"type": "user", "user_id": ANN}]}]}]))
    w["edited"] = _ts(10)
    handle(msg("CERB", w["edited"], "zqownfirst draft", user=PERSON))
    handle(edit("CERB", w["edited"], "zqownsecond draft", "zqownfirst draft", at=_ts(10, 60), user=PERSON))
    w["their_head"] = _ts(11)
    handle(msg("CERA", w["their_head"], "zqownhead question", user=PERSON))
    w["ann_reply_in_theirs"] = _ts(11, 60)
    handle(msg("CERA", w["ann_reply_in_theirs"], "zqannanswer sure", user=ANN, thread_ts=w["their_head"],
               parent_user_id=PERSON))
    w["lonely_head"] = _ts(12)
    handle(msg("CERB", w["lonely_head"], "zqownlonely", user=PERSON))
    handle(msg("CERB", _ts(12, 60), "zqownselfreply", user=PERSON, thread_ts=w["lonely_head"],
               parent_user_id=PERSON))
    w["ann_head"] = _ts(13)
    handle(msg("CERA", w["ann_head"], "zqannhead plans", user=ANN))
    w["their_reply"] = _ts(13, 60)
    handle(msg("CERA", w["their_reply"], "zqownreply agreed", user=PERSON, thread_ts=w["ann_head"],
               parent_user_id=ANN))
    # Others': Ann mentions them (and in an earlier version), Bob's message they reacted to, Bob's with
    # reactions from both.
    w["mention"] = _ts(14)
    handle(msg("CERB", w["mention"], f"zqannmention ask <@{PERSON}> please", user=ANN))
    w["mention_edit"] = _ts(15)
    handle(msg("CERB", w["mention_edit"], f"zqannping <@{PERSON}|erin>", user=ANN))
    handle(edit("CERB", w["mention_edit"], "zqannping never mind", f"zqannping <@{PERSON}|erin>", at=_ts(15, 60),
                user=ANN))
    w["bob_reacted"] = _ts(16)
    handle(msg("CERA", w["bob_reacted"], "zqbobnews", user=BOB))
    handle({**reaction("added", "CERA", w["bob_reacted"], "tada", PERSON, at=_ts(16, 30)), "item_user": BOB})
    w["bob_both"] = _ts(16, 90)
    handle(msg("CERA", w["bob_both"], "zqbobboth", user=BOB))
    handle({**reaction("added", "CERA", w["bob_both"], "eyes", PERSON, at=_ts(16, 100)), "item_user": BOB})
    handle({**reaction("added", "CERA", w["bob_both"], "eyes", ANN, at=_ts(16, 110)), "item_user": BOB})
    # A channel the person never touched, for the rest.
    w["quiet"] = _ts(17)
    handle(msg("CERC", w["quiet"], "zqbobquiet", user=BOB))
    return w


def _decoded(value: bytes) -> Any:
    for decode in (decompress_json, decode_json):
        try:
            return decode(value)
        except Exception:  # noqa: BLE001 - not that encoding
            continue
    return value


def _names(value: Any, person: str) -> bool:
    """Whether a cell holds the person's id or their name (profile name, display name, email), case-folded."""
    marks = (person.casefold(), "erin.erased") if person == PERSON else (person.casefold(),)
    if isinstance(value, str):  # search terms are case-folded
        return any(m in value.casefold() for m in marks)
    if isinstance(value, (bytes, bytearray)):
        decoded = _decoded(bytes(value))
        return any(m.encode() in bytes(value).lower() for m in marks) if isinstance(decoded, bytes) else \
            _names(decoded, person)
    if isinstance(value, dict) or hasattr(value, "items"):
        return any(_names(k, person) or _names(v, person) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_names(v, person) for v in value)
    return False


def _scan(db, team: str, person: str) -> dict[str, int]:
    """Brute force, test only: every table with a team or archive column, every row of this workspace, every
    cell (blobs decoded, activity days through their codec)."""
    keyspace = db.keyspace
    found: dict[str, int] = {}
    for table in sorted(cql_tables()):
        columns = {r.column_name for r in db.execute_raw(
            f"SELECT column_name FROM system_schema.columns WHERE keyspace_name = '{keyspace}' "
            f"AND table_name = '{table}'")}
        if "team_id" in columns:
            rows = db.execute_raw(f"SELECT * FROM {keyspace}.{table} WHERE team_id = '{team}' ALLOW FILTERING")
        elif "archive" in columns:
            rows = db.execute_raw(f"SELECT * FROM {keyspace}.{table} WHERE archive = 'slack:{team}' ALLOW FILTERING")
        else:
            continue
        for row in rows:
            cells = row._asdict()
            if table == "activity_days" and cells.get("events") is not None:
                cells["events"] = codec.decode(cells["events"], cells["codec"])
            if _names(list(cells.values()), person):
                found[table] = found.get(table, 0) + 1
    return found


def test_an_erased_person_leaves_no_trace_in_any_table_and_everyone_else_stays_whole(db, mdb, clock, settings,
                                                                                     tmp_path):
    team = f"TERA{uuid.uuid4().hex[:6].upper()}"
    files = LocalStore(tmp_path / "files")
    w = _workspace(db, settings, team, files)
    archive = service.Archive.slack(team)
    service.rebuild_days(db, archive, {u: [DAY] for u in (PERSON, ANN, BOB)})
    reports.generate(db, team, Period(DAY, 7))
    before = _scan(db, team, PERSON)
    assert {"slack_messages", "slack_users", "activity_days", "slack_reports", "slack_channels",
            "slack_user_touches", "slack_message_versions", "slack_search_postings"} <= set(before)
    # A hold on the person refuses the request and changes nothing.
    hold = policies.create_hold(db, f"slack:{team}", "user", PERSON, "litigation", by="test", via="test")
    refused = erasure.erase(mdb, team, PERSON, requested_by="test", files=files)
    assert refused.state == ledger.HELD and refused.held == {"request (user hold)": 1}
    assert _scan(db, team, PERSON) == {**before, "legal_holds": 1}  # the hold itself names them
    policies.release_hold(db, f"slack:{team}", hold.hold_id, by="test", via="test")
    clock.advance(1)  # request ids are time UUIDs: the next request is the newer one on the run's clock

    done = erasure.erase(mdb, team, PERSON, requested_by="test", files=files)
    assert done.state == ledger.DONE, done
    assert done.proof["clean"], done.proof
    assert done.counts["messages_erased"] == 6 and done.counts["messages_tombstoned"] == 1
    assert done.counts["reactions_removed"] == 2 and done.counts["messages_rewritten"] >= 3
    clock.advance(2 * settings.activity.delay_seconds)
    dirty.DirtyWorker(mdb, service.rebuild_marks).drain()
    # The only row left naming them: the released hold, kept on purpose as the record of why their data was
    # kept (api/erasure/rules.py). The ledger names them by a keyed hash only.
    assert _scan(db, team, PERSON) == {"legal_holds": 1}
    assert rules.RULES["legal_holds"].startswith("kept")
    assert ledger.find(db, f"slack:{team}", PERSON).request_id == done.request_id

    # Everyone else's: Ann's and Bob's messages are there, found by their words; the head they asked in is
    # Slack's tombstone with Ann's reply under it; Bob keeps Ann's reaction.
    rows = {r.ts: r for c in ("CERA", "CERB", "CERC") for _p, r in messages.erasing_rows(db, team, c, MSG_DAY)}
    head = rows[_us(w["their_head"])]
    assert (head.user_id, head.text, head.subtype) == ("USLACKBOT", "This message was deleted.", "tombstone")
    assert set((head.replies or {}).values()) == {ANN}
    assert rows[_us(w["ann_reply_in_theirs"])].parent_user_id == "USLACKBOT"
    assert rows[_us(w["mention"])].text == "zqannmention ask @former member please"
    assert set(rows[_us(w["bob_both"])].reactions) == {("eyes", ANN)}
    assert not rows[_us(w["bob_reacted"])].reactions
    for word, key in (("zqannanswer", "ann_reply_in_theirs"), ("zqannmention", "mention"), ("zqbobnews",
                      "bob_reacted"), ("zqbobquiet", "quiet"), ("zqannhead", "ann_head")):
        assert [h.message.ts for h in search.search(db, team, word).hits] == [_us(w[key])], word
    for word in ("zqownfile", "zqownblocks", "zqownsecond", "zqownfirst", "zqownhead", "zqownreply", "former"):
        hits = search.search(db, team, word).hits
        assert (word == "former") == bool(hits), word  # the neutral name is found where it now stands
    assert [h.message.ts for h in search.search(db, team, "has:reaction").hits] == [_us(w["bob_both"])]
    # Ann's author and channel postings carry the rewritten text's terms filter: the mention is out of it, the
    # words still in (search.search above found the message by word; here the filter itself).
    mention_terms = search_terms.references(f"<@{PERSON}>")
    for term in (search_index.author_term(ANN), search_index.channel_term("CERB")):
        posting = {r.ts: r for r in search_index.start_postings(
            db, team, term, _us(w["mention"]) // 86_400_000_000, below=2**63 - 1, at_least=0, limit=100).result()}
        terms_filter = posting[_us(w["mention"])].terms_filter
        assert not term_filter.TermCheck(sorted(mention_terms)).may_hold(terms_filter), term
        assert term_filter.TermCheck(["zqannmention"]).may_hold(terms_filter), term
        assert term_filter.TermCheck(["former"]).may_hold(terms_filter), term
    with pytest.raises(FileNotFoundError):
        files.open(object_key(team, "CERA", _us(w["post_file"]), "FERASE1"))
    ann_days = service.read(db, archive, ANN, [DAY], contiguous=False, summary=False)
    assert ann_days and ann_days[0]["events"]

    # Again: nothing more to do, still clean (idempotent).
    again = erasure.erase(db, team, PERSON, requested_by="test", files=files)
    assert again.proof["clean"] and again.counts.get("messages_erased", 0) == 0

    # The proof finds what comes back: traces written after the erasure (a later write time than its own),
    # one per table it reads by lists of partitions, each where the ledger says it erased or rewrote.
    later, ks = 2**62, settings.keyspace
    edited, mention, blocks = _us(w["edited"]), _us(w["mention_edit"]), _us(w["post_blocks"])
    for cql, params in (
            ("slack_message_versions (team_id, channel_id, ts, version_ts, text)", ("CERB", edited, edited, "x")),
            ("slack_message_versions (team_id, channel_id, ts, version_ts, text)",
             ("CERB", mention, mention, f"hi <@{PERSON}>")),
            ("slack_message_versions (team_id, channel_id, ts, version_ts, text)",  # another's, naming no one
             ("CERB", mention, mention + 1, "nobody named")),
            ("slack_message_raw (team_id, channel_id, hour, ts, raw)",
             ("CERA", blocks // messages.US_PER_HOUR, blocks, compress_json({"user": PERSON}))),
            ("slack_thread_replies (team_id, channel_id, thread_ts, ts)",
             ("CERA", _us(w["ann_head"]), _us(w["their_reply"]))),
            ("slack_messages (team_id, channel_id, day, ts, user_id, text)",
             ("CERB", MSG_DAY, edited + 7, PERSON, "back again"))):
        marks = ", ".join(["%s"] * (len(params) + 1))
        db.execute_raw(f"INSERT INTO {ks}.{cql} VALUES ({marks}) USING TIMESTAMP {later}", (team, *params))
    assert proof.check(db, team, PERSON, done, files=files)["traces"] == {
        "slack_message_raw": 1, "slack_message_versions": 2, "slack_messages": 1, "slack_thread_replies": 1}


def test_an_erasure_shared_out_over_processes_leaves_no_trace_either(db, settings, tmp_path):
    """`--processes 2`: the channel-days go to two spawned processes (their own drivers); the same end state."""
    team = f"TERP{uuid.uuid4().hex[:6].upper()}"
    files = LocalStore(tmp_path / "files")
    w = _workspace(db, settings, team, files)
    archive = service.Archive.slack(team)
    service.rebuild_days(db, archive, {u: [DAY] for u in (PERSON, ANN, BOB)})
    counted = erasure.dry_run(db, team, PERSON)["counts"]
    done = erasure.erase(db, team, PERSON, requested_by="test", files=files, processes=2)
    assert done.state == ledger.DONE and done.proof["clean"], done
    assert done.counts["messages_erased"] == 6 and done.counts["channel_days"] == counted["channel_days"] == 2
    assert done.counts["word_days_dropped"] >= 8  # words of theirs alone: partitions and listings gone
    with pytest.raises(FileNotFoundError):  # the child deleted it from the same store
        files.open(object_key(team, "CERA", _us(w["post_file"]), "FERASE1"))
    assert set(_scan(db, team, PERSON)) <= {"activity_days"}  # others' days wait for the dirty worker


def test_a_channel_hold_keeps_that_channel_and_the_rest_is_erased(db, settings, tmp_path):
    team = f"TERH{uuid.uuid4().hex[:6].upper()}"
    files = LocalStore(tmp_path / "files")
    w = _workspace(db, settings, team, files)
    policies.create_hold(db, f"slack:{team}", "channel", "CERB", "audit", by="test", via="test")
    done = erasure.erase(db, team, PERSON, requested_by="test", files=files)
    assert done.state == ledger.DONE and done.held["channel_days (channel hold)"] == 1
    kept = {r.ts for _p, r in messages.erasing_rows(db, team, "CERB", MSG_DAY) if r.user_id == PERSON}
    assert kept == {_us(w["edited"]), _us(w["lonely_head"]), _us(_ts(12, 60))}
    assert not any(proof.row_names(r, PERSON) for _p, r in messages.erasing_rows(db, team, "CERA", MSG_DAY))


def test_every_table_of_the_schema_has_an_erasure_rule():
    tables = cql_tables()
    assert "slack_messages" in tables and len(tables) > 80
    assert sorted(tables - set(rules.RULES)) == [], "tables without an erasure rule in api/erasure/rules.py"
    assert sorted(set(rules.RULES) - tables) == [], "rules of tables that do not exist"



def test_admins_erase_over_rest_follow_the_request_and_every_refusal_is_a_clear_error(client, db, settings,
                                                                                      tmp_path, monkeypatch):
    import time

    from api import audit
    from api.erasure import http as erasure_http
    from tests.helpers import ADMIN_TOKEN, READ_TOKEN

    files = LocalStore(tmp_path / "files")
    monkeypatch.setattr(erasure_http, "store_from_settings", lambda _settings: files)
    team = f"TERR{uuid.uuid4().hex[:6].upper()}"
    _workspace(db, settings, team, files)
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    base = f"/admin/erasures/slack/{team}"
    for headers, status in (({}, 401), ({"Authorization": f"Bearer {READ_TOKEN}"}, 403)):
        assert client.get(base, headers=headers).status_code == status
        assert client.post(base, json={"user": PERSON}, headers=headers).status_code == status
    for path, body, status in ((base, {}, 422), (base, {"user": "not an id"}, 422), (base, {"user": 7}, 422),
                               ("/admin/erasures/slack/lower", {"user": PERSON}, 400)):
        answer = client.post(path, json=body, headers=admin)
        assert answer.status_code == status and (answer.json.get("message") or answer.json.get("errors")), path
    counted = client.post(f"{base}/dry-run", json={"user": PERSON}, headers=admin)
    assert counted.status_code == 200 and counted.json["counts"]["messages_erased"] == 6
    assert client.get(base, headers=admin).json["requests"] == []  # a dry run writes no ledger row

    started = client.post(base, json={"user": PERSON}, headers=admin)
    assert started.status_code == 202 and started.json["state"] == "running"
    path = f"{base}/requests/{started.json['request_id']}"
    deadline = time.monotonic() + 60
    while client.get(path, headers=admin).json["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
    done = client.get(path, headers=admin).json
    assert done["state"] == "done" and done["proof"]["clean"], done
    assert PERSON not in str(client.get(base, headers=admin).json)  # the ledger names no one
    assert client.get(f"{base}/requests/{uuid.uuid4()}", headers=admin).status_code == 404
    assert client.get(f"{base}/requests/nope", headers=admin).status_code == 400
    now_us = int(db.clock.time() * US)
    logged = [e for e in audit.entries(db, now_us - 600 * US, now_us + US, 10_000, None)
              if e.action == "erase" and team in e.target]
    assert [(e.actor, e.via, e.status) for e in logged] == [("admin", "rest", 202)]
