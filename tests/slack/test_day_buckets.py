"""Hot channel-days in hour buckets (issue 30, finding 5; docs/slack-messages.md, "Partition sizes").

A small hot threshold (CHRONICLE_SLACK_HOT_DAY_MESSAGES) splits a day after a few messages; every read is then
compared with a brute-force model of what was written (the messages, their edits, deletes and reactions), and
the layout with what the design allows: no partition beyond the threshold plus one hour of messages, every
message in exactly one partition, the one its ts names.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import uuid

import pytest

from api.db import Database
from api.slack import codec, ingest, messages
from api.slack.messages import BUCKET_BASE, SPLIT_MARGIN_US, US_PER_HOUR
from api.slack.payloads import history_message
from api.slack.timeutil import US_PER_DAY, day_of, ts_to_us, us_to_ts
from tests.clocks import ManualClock
from tests.slack.test_storage_rules import tombstones_read

THRESHOLD = 20
DAY = 20_000  # 2024-10-04
START = DAY * US_PER_DAY


def _db(settings, clock: ManualClock) -> Database:
    slack = dataclasses.replace(settings.slack, hot_day_messages=THRESHOLD)
    return Database(dataclasses.replace(settings, slack=slack), clock=clock)


@pytest.fixture
def hot_dbs(settings, db):
    """Two writer processes (their own caches) and a reader, sharing one clock; each closed after the test."""
    clock = ManualClock(start=START / 1e6 + 10 * 3600)
    made = [_db(settings, clock) for _ in range(3)]
    yield clock, made
    for d in made:
        d.close()


def _channel() -> str:
    return f"C{uuid.uuid4().hex[:14].upper()}"


def _layout(db: Database, team: str, channel: str, day: int) -> dict[int, list[int]]:
    """partition -> its message ts (rows holding a message), read straight from the table."""
    row = db.execute_raw("SELECT split_us, buckets FROM slack_channel_days WHERE team_id=%s AND channel_id=%s "
                         "AND day=%s", (team, channel, day)).one()
    parts = [day] + [day + (h + 1) * BUCKET_BASE for h in range(24)]
    out = {}
    for part in parts:
        rows = [r.ts for r in db.execute_raw("SELECT ts, msg_ts FROM slack_messages WHERE team_id=%s AND "
                                             "channel_id=%s AND day=%s", (team, channel, part)) if r.msg_ts]
        if rows:
            out[part] = rows
    listed = {day + (h + 1) * BUCKET_BASE for h in (row.buckets or ())} if row is not None else set()
    assert set(out) - {day} <= listed, "a bucket holding messages is not listed: its messages would be unread"
    return out


def _all_pages(db: Database, team: str, channel: str, *, ascending: bool, limit: int,
               include_deleted: bool = False) -> list[int]:
    got, pos = [], None
    while True:
        bound = {"lower": pos} if ascending and pos is not None else {"upper": pos} if pos is not None else {}
        page, pos = messages.timeline(db, team, [channel], limit=limit, ascending=ascending,
                                      include_deleted=include_deleted, **bound)
        got.extend(m.ts for m in page)
        if pos is None:
            return got


def test_an_imported_hot_day_is_split_into_hour_buckets_and_every_read_stays_exact(settings, db, hot_dbs):
    clock, (writer, other, reader) = hot_dbs
    clock.advance(2 * 86_400)  # an import of a past day (one still live is split no sooner than live writes)
    team, channel, rnd = "THOT1", _channel(), random.Random(30)
    # 240 messages over the day, oldest first as an export brings them; threads whose replies cross the split.
    stamps = sorted(rnd.sample(range(START + 1, START + US_PER_DAY, 997), 240))
    model: dict[int, dict] = {}
    heads = stamps[:40:5]
    for i, ts in enumerate(stamps):
        m = {"type": "message", "user": f"U{i % 7}", "text": f"m{i}", "ts": us_to_ts(ts)}
        earlier = [h for h in heads if h < ts]
        if ts not in heads and i % 3 == 0 and earlier:
            m["thread_ts"] = us_to_ts(earlier[i % len(earlier)])
        model[ts] = {"text": m["text"], "thread": m.get("thread_ts"), "deleted": False, "reactions": set()}
    rows, written = [], []
    for ts in stamps:
        hm = history_message(team, channel, {"type": "message", "user": "U1", "text": model[ts]["text"],
                                             "ts": us_to_ts(ts),
                                             **({"thread_ts": model[ts]["thread"]} if model[ts]["thread"] else {})})
        rows.extend(ingest.history_rows(writer, hm, observed_at=START + US_PER_DAY))
        written.append(hm.message)
        if len(written) == 50:  # groups like the importer's: built ahead, noted once written
            writer.execute_many(rows)
            for m in written:
                ingest.note_stored(writer, m)
            rows, written = [], []
    writer.execute_many(rows)
    for m in written:
        ingest.note_stored(writer, m)

    layout = _layout(db, team, channel, DAY)
    split = db.execute_raw("SELECT split_us FROM slack_channel_days WHERE team_id=%s AND channel_id=%s AND day=%s",
                           (team, channel, DAY)).one().split_us
    assert split is not None and (split - START) % US_PER_HOUR == 0
    per_hour = max(sum(1 for t in stamps if (t - START) // US_PER_HOUR == h) for h in range(24))
    assert len(layout[DAY]) <= THRESHOLD + per_hour  # the day's own partition: the threshold and one hour more
    assert sorted(t for ts in layout.values() for t in ts) == stamps  # each message once
    for part, tss in layout.items():
        assert all(messages.part_of(DAY, split, t) == part for t in tss)
        assert len(tss) <= max(THRESHOLD + per_hour, per_hour)

    # No tombstone in front of any read: the split and the buckets are set-once cells and set elements.
    for cql, key in (("SELECT * FROM slack_channel_days WHERE team_id=%s AND channel_id=%s", (team, channel)),
                     *(("SELECT * FROM slack_messages WHERE team_id=%s AND channel_id=%s AND day=%s",
                        (team, channel, part)) for part in sorted(layout)[:2])):
        assert tombstones_read(db, cql, key) == 0

    # Late arrivals for the bucketed day, a re-import, and live events (edits, deletes, reactions) from a
    # writer that knows the split and from one that must read it: each finds the message's one row.
    late = [START + 2 * US_PER_HOUR + 11, START + 20 * US_PER_HOUR + 13]
    for ts in late:
        hm = history_message(team, channel, {"type": "message", "user": "U2", "text": "late", "ts": us_to_ts(ts)})
        other.execute_many(ingest.history_rows(other, hm, observed_at=START + US_PER_DAY))
        ingest.note_stored(other, hm.message)
        model[ts] = {"text": "late", "thread": None, "deleted": False, "reactions": set()}
    hm = history_message(team, channel, {"type": "message", "user": "U1", "text": model[stamps[-1]]["text"],
                                         "ts": us_to_ts(stamps[-1])})
    writer.execute_many(ingest.history_rows(writer, hm, observed_at=START + US_PER_DAY))
    for k, ts in enumerate(rnd.sample(sorted(model), 60)):
        who = (writer, other)[k % 2]
        at = START + US_PER_DAY + k * 1000
        if k % 3 == 0:
            ingest.react(who, team, channel, ts, "tada", f"U{k}", added=True, at=at, author="U1")
            model[ts]["reactions"].add(("tada", f"U{k}"))
        elif k % 3 == 1 and model[ts]["thread"] is None and ts not in heads:
            ingest.delete_message(who, team, channel, ts, at=at, thread_ts=None, author="U1")
            model[ts]["deleted"] = True
        else:
            edited = messages.NewMessage(team, channel, ts, us_to_ts(ts), user="U1", text=f"edited {k}",
                                         thread_ts=ts_to_us(model[ts]["thread"])
                                         if model[ts]["thread"] else None)
            ingest.store_message(who, edited, write_ts=at, edited_ts=at, versions=((at, f"edited {k}"),))
            model[ts]["text"] = f"edited {k}"
    assert sorted(t for ts in _layout(db, team, channel, DAY).values() for t in ts) == sorted(model)

    shown = sorted(t for t, m in model.items() if not m["deleted"])
    # Timelines both ways, in pages of several sizes (cursors inside buckets and across the split).
    for limit in (7, 50):
        assert _all_pages(reader, team, channel, ascending=False, limit=limit) == shown[::-1]
        assert _all_pages(reader, team, channel, ascending=True, limit=limit) == shown
    assert _all_pages(reader, team, channel, ascending=True, limit=13, include_deleted=True) == sorted(model)
    # One message each, with its state.
    for ts, m in model.items():
        found = messages.find(reader, team, [channel], ts, include_deleted=True)
        assert found is not None and found.text == m["text"] and found.deleted == m["deleted"], ts
        assert {(e, u) for e, users in found.reactions for u in users} == m["reactions"]
    # Threads: replies in order, reply counts on the heads.
    for head in heads:
        replies = sorted(t for t, m in model.items() if m["thread"] == us_to_ts(head) and not m["deleted"])
        page, _ = messages.thread(reader, team, [channel], head, limit=200, after=head, include_deleted=False)
        assert [r.ts for r in page] == replies
        assert messages.find(reader, team, [channel], head, include_deleted=True).reply_count == len(replies)
    # The day as reports, activity, search, export and history read it.
    assert sorted(r.ts for _c, r in messages.report_rows(reader, team, [(channel, [DAY])])) == sorted(model)
    assert sorted(r.ts for r in messages.start_activity_day(reader, team, channel, DAY).result()) == sorted(model)
    assert sorted(r.ts for r in messages.texts_of_day(reader, team, channel, DAY)) == sorted(model)
    assert sorted(r.ts for r in messages.start_days_read(reader, team, channel, [DAY]).result()) == sorted(model)
    some = rnd.sample(sorted(model), 25)
    assert sorted(r.ts for r in messages.start_candidates(reader, team, channel, DAY, some).result()) == sorted(some)
    lo, hi = split - 3 * US_PER_HOUR, split + 5 * US_PER_HOUR
    assert sorted(r.ts for r in messages.stored_between(reader, team, channel, lo, hi)) == \
        [t for t in sorted(model) if lo <= t < hi]
    # Every row has its analytics; a reply's place on its head goes to the head's own partition.
    for statement, params in messages.analytics_writes(reader, team, channel, DAY):
        assert statement is messages.ADD_REPLY_TO_HEAD and params[5] == messages.part_of(DAY, split, params[6])


def test_a_live_hot_day_splits_after_the_margin_and_two_writers_agree(settings, db, hot_dbs):
    clock, (a, b, reader) = hot_dbs
    team, channel = "THOT2", _channel()
    posted = []
    decided_at = None
    for i in range(160):  # one message every 40 s from 10:00, alternately through two processes
        ts = int(clock.time() * 1e6) - 1000
        msg = messages.NewMessage(team, channel, ts, us_to_ts(ts), user="U1", text=f"live {i}")
        ingest.store_message((a, b)[i % 2], msg, write_ts=ts, original=True)
        posted.append(ts)
        if decided_at is None and db.execute_raw(
                "SELECT split_us FROM slack_channel_days WHERE team_id=%s AND channel_id=%s AND day=%s",
                (team, channel, DAY)).one().split_us is not None:
            decided_at = int(clock.time() * 1e6)
        clock.advance(40)
    split = db.execute_raw("SELECT split_us FROM slack_channel_days WHERE team_id=%s AND channel_id=%s AND day=%s",
                           (team, channel, DAY)).one().split_us
    # Decided once the first process passed the threshold, at least the margin after it, on an hour boundary.
    assert decided_at is not None and split >= decided_at + SPLIT_MARGIN_US
    assert (split - START) % US_PER_HOUR == 0 and split < posted[-1]
    layout = _layout(db, team, channel, DAY)
    assert sorted(layout[DAY]) == [t for t in posted if t < split]  # nothing at or after the split stayed there
    assert sorted(t for ts in layout.values() for t in ts) == posted
    assert _all_pages(reader, team, channel, ascending=False, limit=9) == posted[::-1]
    # Both writers' caches route edits of either side of the split to the message's row.
    for who, ts in ((a, posted[3]), (b, posted[-3]), (a, posted[-1])):
        edit = messages.NewMessage(team, channel, ts, us_to_ts(ts), user="U1", text="edited")
        ingest.store_message(who, edit, write_ts=ts + 5, edited_ts=ts + 5)
        assert messages.find(reader, team, [channel], ts, include_deleted=False).text == "edited"
    assert sorted(t for ts in _layout(db, team, channel, DAY).values() for t in ts) == posted


def test_concurrent_split_decisions_agree(settings, db, hot_dbs):
    clock, dbs = hot_dbs
    team, channel = "THOT3", _channel()
    decided: list[int | None] = []

    def decide(d: Database, k: int) -> None:
        decided.append(messages._decide_split(d, team, channel, DAY, routed_max=START + k * US_PER_HOUR,
                                              live=False))

    for d in dbs:  # connected before the race (a connection is made on first use)
        d.execute(messages.SELECT_DAY_STATE, (team, channel, DAY))
    threads = [threading.Thread(target=decide, args=(d, k + 1)) for k, d in enumerate(dbs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = db.execute_raw("SELECT split_us FROM slack_channel_days WHERE team_id=%s AND channel_id=%s AND day=%s",
                            (team, channel, DAY)).one().split_us
    assert decided == [stored] * 3 and day_of(stored) == DAY


def test_relayout_moves_old_raw_events_out_and_splits_an_old_hot_day_cell_for_cell(settings, db, hot_dbs):
    """A keyspace written before cql/0190: a day in one partition with raw events in the rows. The command's
    function copies the raw events out and splits the day, each cell at its own write time; every read
    answers the same before and after, and a second run finds nothing left to do."""
    clock, (writer, _other, reader) = hot_dbs
    team, channel = "THOT4", _channel()
    old = Database(dataclasses.replace(settings, slack=dataclasses.replace(settings.slack, hot_day_messages=10**6)),
                   clock=clock)
    try:
        stamps = [START + k * 1_234_567_891 % US_PER_DAY for k in range(1, 61)]
        head = min(stamps)
        for k, ts in enumerate(stamps):
            reply = k % 4 == 0 and ts != head
            msg = messages.NewMessage(team, channel, ts, us_to_ts(ts), user=f"U{k % 3}", text=f"old {k}",
                                      thread_ts=head if reply else None,
                                      files=[{"id": f"F{k}", "name": "a.txt"}] if k % 5 == 0 else None)
            ingest.store_message(old, msg, write_ts=ts, original=True)
            if k % 3 == 0:
                ingest.react(old, team, channel, ts, "eyes", "U9", added=True, at=ts + 7, author=msg.user)
            if k % 5 == 0:
                messages.record_file_stored(old, team, channel, ts, f"F{k}", f"s3://b/{k}")
            if k % 7 == 0:
                edit = dataclasses.replace(msg, text=f"edited {k}")
                ingest.store_message(old, edit, write_ts=ts + 9, edited_ts=ts + 9, versions=((ts + 9, edit.text),))
            # The old layout kept the raw event in the row, written with it.
            old.execute_raw("UPDATE slack_messages USING TIMESTAMP %s SET raw = %s WHERE team_id = %s AND "
                            "channel_id = %s AND day = %s AND ts = %s",
                            (ts, codec.compress_json({"n": k}), team, channel, DAY, ts))
        assert set(_layout(db, team, channel, DAY)) == {DAY}

        def snapshot() -> tuple:
            page = [m.to_json() for m in _page_all(reader, team, channel)]
            found = [messages.find(reader, team, [channel], ts, include_deleted=True).to_json() for ts in stamps]
            replies, _ = messages.thread(reader, team, [channel], head, limit=100, after=head, include_deleted=False)
            return page, found, [r.to_json() for r in replies]

        before = snapshot()
        written = {r.ts: (r.t, r.e) for r in db.execute_raw(
            "SELECT ts, writetime(text) AS t, writetime(reactions) AS e FROM slack_messages WHERE team_id=%s "
            "AND channel_id=%s AND day=%s", (team, channel, DAY))}
        clock.advance(3 * 86_400)  # the day ended more than a day ago
        done = messages.relayout_channel(writer, team, channel)
        assert done == {"days": 1, "rows": 60, "raw": 60, "copied": 60, "split": 1}
        assert snapshot() == before
        layout = _layout(db, team, channel, DAY)
        assert DAY not in layout and sorted(t for ts in layout.values() for t in ts) == sorted(stamps)
        assert all(messages.raw_event(reader, team, channel, ts) == {"n": k} for k, ts in enumerate(stamps))
        for ts, (t, e) in written.items():  # the copies keep every cell's write time
            part = messages.part_of(DAY, START, ts)
            row = db.execute_raw("SELECT writetime(text) AS t, writetime(reactions) AS e FROM slack_messages "
                                 "WHERE team_id=%s AND channel_id=%s AND day=%s AND ts=%s",
                                 (team, channel, part, ts)).one()
            assert (row.t, row.e) == (t, e)
        assert messages.relayout_channel(writer, team, channel)["days"] == 0  # resumable: done days are skipped
        # The old partition's deletion is in front of no read: reads list only the buckets.
        assert tombstones_read(db, "SELECT * FROM slack_messages WHERE team_id=%s AND channel_id=%s AND day=%s",
                               (team, channel, min(layout))) == 0
    finally:
        old.close()


def _page_all(db: Database, team: str, channel: str) -> list:
    got, pos = [], None
    while True:
        page, pos = messages.timeline(db, team, [channel], limit=11, **({"upper": pos} if pos else {}))
        got.extend(page)
        if pos is None:
            return got
