"""An erased person stays erased: what the archive held of them when the erasure was asked for does not come back
through any route that writes history again (docs/retention.md "Erased stays erased").

The workspace of tests/test_erasure.py is built through events, the person erased, then everything written again:
the same events delivered again (Slack's retries), an export of the workspace as Slack writes it (users.json,
channels.json, one file per channel-day, reactions with their users) imported after the erasure, and the Web API's
history of a channel. A brute-force scan of every table (tests/test_erasure.py `_scan`) must find nothing of them;
what they post after the erasure is archived as usual.
"""

from __future__ import annotations

import json
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

from api.erasure import ledger
from api.erasure import slack as erasure
from api.retention import policies
from api.slack import events, messages, payloads, zip_import
from api.slack.backfill import Backfill, Options
from api.slack.files import LocalStore
from api.slack.timeutil import day_of
from tests.fakes.slack_web_api import DEFAULT_TOKEN, FakeSlackWebApi
from tests.slack.helpers import envelope, msg
from tests.test_erasure import ANN, BOB, MSG_DAY, PERSON, _scan, _ts, _us, _workspace


def _profile(user: str, name: str, team: str, updated: str) -> dict[str, Any]:
    """A users.json entry as Slack's export writes it (the users.list object)."""
    return {"id": user, "team_id": team, "name": name, "deleted": False, "real_name": name.title(), "tz": "UTC",
            "tz_label": "Coordinated Universal Time", "tz_offset": 0, "is_bot": False, "is_app_user": False,
            "updated": int(float(updated)),
            "profile": {"real_name": name.title(), "display_name": name, "email": f"{name}@x.test",
                        "image_72": f"https://avatars.slack-edge.com/{name}_72.png", "team": team}}


def _export(path: Path, team: str, w: dict[str, str]) -> Path:
    """The workspace as an export taken after the erasure would still hold it (Slack keeps the person's
    messages): their posts, a reply of theirs, their reactions on Bob's messages, Ann's reply in their thread."""
    def m(ts: str, user: str, text: str, **extra: Any) -> dict[str, Any]:
        return {"type": "message", "user": user, "text": text, "ts": ts, "team": team, **extra}

    day = {"CERA": [
        m(w["post_file"], PERSON, "zqownfile report attached"),
        m(w["their_head"], PERSON, "zqownhead question", thread_ts=w["their_head"], reply_count=1,
          reply_users=[ANN], replies=[{"user": ANN, "ts": w["ann_reply_in_theirs"]}]),
        m(w["ann_reply_in_theirs"], ANN, "zqannanswer sure", thread_ts=w["their_head"], parent_user_id=PERSON),
        m(w["ann_head"], ANN, "zqannhead plans", thread_ts=w["ann_head"], reply_count=1, reply_users=[PERSON],
          replies=[{"user": PERSON, "ts": w["their_reply"]}]),
        m(w["their_reply"], PERSON, "zqownreply agreed", thread_ts=w["ann_head"], parent_user_id=ANN),
        m(w["bob_reacted"], BOB, "zqbobnews", reactions=[{"name": "tada", "users": [PERSON], "count": 1}]),
        m(w["bob_both"], BOB, "zqbobboth", reactions=[{"name": "eyes", "users": [PERSON, ANN], "count": 2}]),
    ], "CERB": [
        m(w["edited"], PERSON, "zqownsecond draft", edited={"user": PERSON, "ts": _ts(10, 60)}),
        m(w["lonely_head"], PERSON, "zqownlonely"),
    ]}
    names = {"CERA": "person-made", "CERB": "cerb"}
    zip_path = path / "export.zip"
    with zipfile.ZipFile(zip_path, "w") as z:
        z.writestr("users.json", json.dumps([_profile(PERSON, "erin.erased", team, _ts(0, 5)),
                                             _profile(ANN, "ann", team, _ts(0, 5)),
                                             _profile(BOB, "bob", team, _ts(0, 5))]))
        z.writestr("channels.json", json.dumps([
            {"id": c, "name": names[c], "created": int(float(_ts(0))), "creator": PERSON if c == "CERA" else ANN,
             "is_archived": False, "is_general": False, "members": [PERSON, ANN, BOB],
             "topic": {"value": "", "creator": "", "last_set": 0},
             "purpose": {"value": "", "creator": "", "last_set": 0}} for c in names]))
        for channel, rows in day.items():
            z.writestr(f"{names[channel]}/2026-03-02.json", json.dumps(sorted(rows, key=lambda r: r["ts"])))
    return zip_path


def test_an_erased_person_does_not_come_back_by_events_again_or_a_later_import(db, settings, tmp_path):
    team = f"TERI{uuid.uuid4().hex[:6].upper()}"
    files = LocalStore(tmp_path / "files")
    w = _workspace(db, settings, team, files)
    done = erasure.erase(db, team, PERSON, requested_by="test", files=files)
    assert done.state == ledger.DONE and done.proof["clean"], done
    assert _scan(db, team, PERSON) == {}

    # Everything again: the events (Slack retries them), then an export taken after the erasure.
    _workspace(db, settings, team, files, again=True)
    assert _scan(db, team, PERSON) == {}
    report = zip_import.import_export(db, str(_export(tmp_path, team, w)), team_id=team,
                                      observed_at=int(time.time() * 1_000_000) + 1_000_000)
    # Their profile is written by no route, and the report says which messages were left out and why.
    assert report.skipped == {"a message of an erased person, from before their erasure (not written)": 5,
                              "the profile of an erased person, from before their erasure (not written)": 1}
    assert report.users == 2
    assert _scan(db, team, PERSON) == {}
    rows = {r.ts: r for c in ("CERA", "CERB") for _p, r in messages.erasing_rows(db, team, c, MSG_DAY)}
    assert set(rows[_us(w["bob_both"])].reactions) == {("eyes", ANN)}  # Ann's reaction is written again
    assert rows[_us(w["ann_head"])].text == "zqannhead plans"

    # What they post after the erasure is new: archived as anyone's.
    later = f"{int(time.time()) + 5}.000100"
    assert events.handle(db, settings, payloads.parse(envelope(team, msg("CERA", later, "zqnewafter",
                                                                         user=PERSON)))) == "stored"
    assert set(_scan(db, team, PERSON)) >= {"slack_messages"}


def _stored(db, team: str, channel: str, ts: str) -> bool:
    return any(r.ts == _us(ts) and r.user_id == PERSON for _p, r in messages.erasing_rows(db, team, channel, MSG_DAY))


def test_what_a_hold_covers_is_written_again_and_a_refused_request_leaves_nothing_out(db, settings, tmp_path):
    team = f"TERJ{uuid.uuid4().hex[:6].upper()}"
    files = LocalStore(tmp_path / "files")
    _workspace(db, settings, team, files)
    archive = f"slack:{team}"
    policies.create_hold(db, archive, "channel", "CERB", "audit", by="test", via="test")
    done = erasure.erase(db, team, PERSON, requested_by="test", files=files)
    assert done.state == ledger.DONE and done.held["channel_days (channel hold)"] == 1

    def deliver(channel: str, ts: str, text: str) -> str:
        return events.handle(db, settings, payloads.parse(envelope(team, msg(channel, ts, text, user=PERSON))))

    # Messages of theirs from before the erasure that the archive never had (a later export holds them): the
    # held channel keeps them, the other leaves them out.
    assert deliver("CERB", _ts(18), "zqheldlate") == "stored"
    assert deliver("CERA", _ts(18, 30), "zqfreelate") == "ignored: an erased person's, from before their erasure"
    assert _stored(db, team, "CERB", _ts(18)) and not _stored(db, team, "CERA", _ts(18, 30))

    # A hold on the person: their next request is refused, and nothing of theirs is left out any more.
    hold = policies.create_hold(db, archive, "user", PERSON, "litigation", by="test", via="test")
    assert deliver("CERA", _ts(19), "zqunderhold") == "stored"
    assert _stored(db, team, "CERA", _ts(19))
    refused = erasure.erase(db, team, PERSON, requested_by="test", files=files)
    assert refused.state == ledger.HELD
    policies.release_hold(db, archive, hold.hold_id, by="test", via="test")
    # Released: the newest request that erased is the first one again (the refused one erased nothing).
    assert deliver("CERA", _ts(19, 30), "zqafterrelease").startswith("ignored")
    assert not _stored(db, team, "CERA", _ts(19, 30))


def test_a_web_api_backfill_after_the_erasure_brings_nothing_of_them_back(db, settings, tmp_path):
    """The first backfill of a workspace whose person was erased before (their request is in the ledger): Slack's
    history still holds their messages, reactions, profile and channel (tests/fakes/slack_web_api.py)."""
    team = f"TERW{uuid.uuid4().hex[:6].upper()}"
    done = erasure.erase(db, team, PERSON, requested_by="test", files=None)
    assert done.state == ledger.DONE
    with FakeSlackWebApi(team_id=team) as fake:
        for user, name in ((PERSON, "erin.erased"), (ANN, "ann")):
            fake.add_user(user, name, updated=1_699_990_000, profile={"real_name": name.title(), "display_name": name,
                                                                      "email": f"{name}@x.test"})
        fake.add_channel("CBACK", "theirs", created=1_690_000_000, creator=PERSON, topic="set by them")
        fake.set_members("CBACK", [PERSON, ANN])
        head = fake.post("CBACK", PERSON, "zqownbackfilled question")
        fake.post("CBACK", ANN, "zqannbackfilled answer", thread_ts=head)
        ann = fake.post("CBACK", ANN, f"zqannasks <@{PERSON}> anything")
        fake.react("CBACK", ann, "eyes", PERSON)
        fake.react("CBACK", ann, "tada", ANN)
        options = Options(page_size=2, now=time.time() + 86_400, max_age_days=0)
        Backfill(db, team, DEFAULT_TOKEN, options, base_url=fake.base_url).run()
    assert _scan(db, team, PERSON) == {}
    rows = {r.ts: r for _p, r in messages.erasing_rows(db, team, "CBACK", _day(ann))}
    assert rows[_us(ann)].text == "zqannasks @former member anything"
    assert set(rows[_us(ann)].reactions) == {("tada", ANN)}
    # Their head that Ann replied to: Slack's tombstone in its place, as their erasure leaves one.
    assert (rows[_us(head)].user_id, rows[_us(head)].text, rows[_us(head)].subtype) == (
        "USLACKBOT", "This message was deleted.", "tombstone")
    assert sorted(r.user_id for r in rows.values()) == [ANN, ANN, "USLACKBOT"]


def _day(ts: str) -> int:
    return day_of(_us(ts))
