"""Hot activity days (issue 30, findings 1 and 2): a day of thousands of events is rebuilt with bounded work and
stored with bounded size, every count exact; history's reactions live on their message's day. Compared with a
brute-force model of the events written."""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from collections import Counter
from datetime import UTC, date, datetime, timedelta

from api.activity import dirty, service
from api.activity import events as ev
from api.network import activity as network_activity
from api.network import activity_log
from api.slack import activity_index, zip_import
from api.slack.timeutil import day_of

US = 1_000_000
DAY = date(2026, 2, 10)
DAY_START = int(datetime(2026, 2, 10, tzinfo=UTC).timestamp()) * US
AUTHOR, POST = 1, 77


def _network_day(db, network: str) -> list[dict]:
    """5,000 likes of one post across the day (17 s apart), 3 unlikes and 30 follows of AUTHOR, written through
    the log's write path; returns AUTHOR's events from scratch (what happened, not what was stored)."""
    happened, writes = [], []
    for i in range(5_000):
        at, fan = DAY_START + i * 17 * US + 1, 1_000 + i
        writes += activity_log.event_writes(network, "like", fan, AUTHOR, at, POST)
        happened.append(ev.event(at, "like_received", user=str(fan), post=POST))
    for i in range(3):
        at = DAY_START + (3_600 + i * 60) * US + 5
        writes += activity_log.event_writes(network, "unlike", 1_000 + i, AUTHOR, at, POST)
        happened.append(ev.event(at, "unlike_received", user=str(1_000 + i), post=POST))
    for i in range(30):
        at = DAY_START + (7_200 + i * 11) * US + 7
        writes += activity_log.event_writes(network, "follow", 9_000 + i, AUTHOR, at)
        happened.append(ev.event(at, "followed_by", user=str(9_000 + i)))
    db.execute_many(writes, concurrency=200)
    return ev.in_order(happened)


def _slot_totals(events: list[dict]) -> Counter:
    """(slot, kind, post) -> events there, a counted event as its count."""
    found: Counter = Counter()
    for e in events:
        found[(e["at"] // ev.SLOT_US, e["kind"], e.get("post", 0))] += e.get("count", 1)
    return found


def test_a_post_liked_5000_times_rebuilt_mark_by_mark_equals_the_count_from_scratch(db):
    network = f"hot{uuid.uuid4().hex[:8]}"
    archive = service.Archive.network(network)
    happened = _network_day(db, network)
    # The dirty worker's way: one rebuild per marked hour (each rebuilds the whole local day, bounded).
    for hour in range(24):
        service.rebuild_marks(db, archive.name, [dirty.Mark(archive.name, str(AUTHOR), DAY_START // dirty.HOUR_US
                                                            + hour)])
    by_marks = service.read(db, archive, str(AUTHOR), [DAY], contiguous=True, summary=False)[0]
    events = by_marks["events"]
    # Every count exact, in the summary and slot by slot.
    assert by_marks["event_count"] == len(happened) == 5_033
    summary = service.read(db, archive, str(AUTHOR), [DAY], contiguous=True, summary=True)[0]
    assert summary["counts"] == ev.counts_by_kind(happened) == {"followed_by": 30, "like_received": 5_000,
                                                                 "unlike_received": 3}
    assert _slot_totals(events) == _slot_totals(happened)
    # Bounded: the first SLOT_SHARE events of each slot kept whole, the rest counted.
    singles = [e for e in events if "count" not in e]
    expected_singles: list[dict] = []
    per_slot: Counter = Counter()
    for e in happened:
        slot = e["at"] // ev.SLOT_US
        if per_slot[slot] < ev.SLOT_SHARE:
            expected_singles.append(e)
        per_slot[slot] += 1
    assert singles == expected_singles and len(singles) <= 96 * ev.SLOT_SHARE
    assert all(set(e) <= {"at", "kind", "post", "count"} and e["at"] % ev.SLOT_US == 0
               for e in events if "count" in e)
    # From scratch (the rebuild command's way) gives the same day.
    service.rebuild_days(db, archive, {str(AUTHOR): [DAY]})
    assert service.read(db, archive, str(AUTHOR), [DAY], contiguous=True, summary=False)[0] == by_marks
    # More likes, rebuilt: the read shows them (a decoded hot day is reused only while its bytes are the same).
    db.execute_many([w for i in range(10) for w in activity_log.event_writes(
        network, "like", 50_000 + i, AUTHOR, DAY_START + 3 * ev.SLOT_US + i, POST)])
    service.rebuild_days(db, archive, {str(AUTHOR): [DAY]})
    again = service.read(db, archive, str(AUTHOR), [DAY], contiguous=True, summary=False)[0]
    assert again["event_count"] == 5_043 and _slot_totals(again["events"])[(DAY_START // ev.SLOT_US + 3,
                                                                            "like_received", POST)] == 10 + 53
    # A fan's quiet day is whole: exactly its one like.
    service.rebuild_days(db, archive, {"1007": [DAY]})
    fan = service.read(db, archive, "1007", [DAY], contiguous=True, summary=False)[0]
    assert fan["events"] == [ev.event(DAY_START + 7 * 17 * US + 1, "like_given", user=str(AUTHOR), post=POST)]
    # Rows read by one rebuild: the counts and at most SLOT_SHARE rows of a slot, not the day's 5,033.
    stats: dict[str, int] = {}
    network_activity.collect(db, network, {str(AUTHOR): (DAY_START, DAY_START + 86_400 * US)}, stats)
    assert stats["network_activity_slots"] == len(expected_singles) <= 96 * ev.SLOT_SHARE
    assert stats["network_activity_counts"] == len({k[:2] for k in _slot_totals(happened)}) < 300


def test_capped_days_keep_exact_counts_and_quiet_days_are_unchanged():
    start = DAY_START
    quiet = [ev.event(start + i * US, "message", channel="C1", ts=start + i * US) for i in range(ev.DAY_EVENTS)]
    assert ev.capped(quiet) is quiet  # at the limit: whole, format 1
    assert ev.format_of(quiet) == ev.PLAIN_FORMAT
    bot = [ev.event(start + i * 800_000, kind, channel=f"C{i % 3}", ts=start + i * 800_000)
           for i in range(20_000) for kind in ("message",)] + [
        ev.event(start + 5 * US, "reaction_received", channel="C1", ts=start, emoji="tada", user="U1")]
    stored = ev.capped(ev.in_order(bot))
    assert ev.total(stored) == len(bot) and ev.counts_by_kind(stored) == ev.counts_by_kind(bot)
    assert sum(1 for e in stored if "count" not in e) <= 96 * ev.SLOT_SHARE
    by_channel: Counter = Counter()
    for e in stored:
        by_channel[(e["at"] // ev.SLOT_US, e["kind"], e.get("channel"))] += e.get("count", 1)
    assert by_channel == Counter((e["at"] // ev.SLOT_US, e["kind"], e.get("channel")) for e in bot)
    assert ev.format_of(stored) == ev.FORMAT_VERSION and ev.capped(stored) == stored  # stable


# -- finding 2: history's reactions on their message's day ---------------------------------------------------------

def _export(path, channel: str, ts: list[str]) -> None:
    users = [{"id": u, "name": u.lower(), "tz": "UTC", "profile": {}} for u in ("UAUTH", "UREAC", "ULIVE")]
    chans = [{"id": channel, "name": "history", "created": 1700000000, "creator": "UAUTH",
              "members": ["UAUTH", "UREAC"]}]
    day = datetime.fromtimestamp(float(ts[0]), UTC).date().isoformat()
    msgs = [{"type": "message", "user": "UAUTH", "text": f"old {i}", "ts": t,
             "reactions": [{"name": "tada", "users": ["UREAC"], "count": 1}]} for i, t in enumerate(ts)]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("users.json", json.dumps(users))
        z.writestr("channels.json", json.dumps(chans))
        z.writestr(f"history/{day}.json", json.dumps(msgs))
    path.write_bytes(buffer.getvalue())


def test_imported_reactions_are_indexed_marked_and_dated_on_their_messages_day(db, tmp_path):
    team, channel = f"T{uuid.uuid4().hex[:10].upper()}", "CHIST1"
    posted = datetime(2024, 3, 5, 10, tzinfo=UTC)
    ts = [f"{int((posted + timedelta(minutes=i)).timestamp())}.000100" for i in range(2)]
    observed = datetime(2026, 6, 1, 12, tzinfo=UTC)
    _export(tmp_path / "export.zip", channel, ts)
    zip_import.import_export(db, str(tmp_path / "export.zip"), team_id=team,
                             observed_at=int(observed.timestamp()) * US)
    msg_day, seen_day = day_of(int(float(ts[0]) * US)), day_of(int(observed.timestamp()) * US)
    for user in ("UREAC", "UAUTH"):
        futures = activity_index.start_sources(db, team, user, msg_day, msg_day)
        hour = int(float(ts[0]) * US) // 3_600_000_000 % 24  # the hour of the message, not of the import
        # The author's posts are listed apart (their posts index), the reactions at the message's hour.
        assert activity_index.sources_from(futures).by_partition == {(channel, msg_day): activity_index.Source(
            history_at={int(observed.timestamp()) * US}, hours={hour},
            post_hours={hour} if user == "UAUTH" else set())}
        assert activity_index.sources_from(
            activity_index.start_sources(db, team, user, seen_day, seen_day)).by_partition == {}
    archive = service.Archive.slack(team)
    days = {posted.date(), observed.date()}
    service.rebuild_days(db, archive, {"UREAC": days, "UAUTH": days})

    def served(user: str) -> dict[str, list[tuple[int, str]]]:
        read = service.read(db, archive, user, sorted(days), contiguous=False, summary=False)
        return {d["date"]: [(e["at"], e["kind"]) for e in d["events"]] for d in read}

    at = [int(float(t) * US) for t in ts]
    assert served("UREAC") == {"2024-03-05": [(at[0], "reaction_given"), (at[1], "reaction_given")],
                               "2026-06-01": []}
    assert served("UAUTH") == {"2024-03-05": [(at[0], "message"), (at[0], "reaction_received"),
                                              (at[1], "message"), (at[1], "reaction_received")],
                               "2026-06-01": []}


def test_scattered_days_are_rebuilt_in_runs_that_each_read_a_bounded_window(db, monkeypatch):
    """A rebuild of days years apart (imported history marks such days) builds runs that each lie within
    SLICE_DAYS calendar days: no build reads every day in between (it read 385 days per sample account before).
    Every day is in exactly one run, in order, and each stored day holds exactly its own events."""
    wanted = [date(2021, 3, 1), date(2021, 3, 30), date(2021, 4, 1), date(2023, 7, 4), date(2026, 2, 10),
              date(2021, 3, 2), date(2026, 2, 10)]
    runs = list(service.spans(wanted))
    assert [d for run in runs for d in run] == sorted(set(wanted))
    assert all((run[-1] - run[0]).days < service.SLICE_DAYS for run in runs)
    assert len(runs) == 4  # 1-30 March 2021, 1 April 2021 (31 days after 1 March), 2023, 2026

    network = f"scatter{uuid.uuid4().hex[:8]}"
    archive = service.Archive.network(network)
    happened, writes = {}, []
    for n, day in enumerate(sorted(set(wanted))):
        at = int(datetime(day.year, day.month, day.day, 12, tzinfo=UTC).timestamp()) * US + n
        writes += activity_log.event_writes(network, "follow", 500 + n, AUTHOR, at)
        happened[day] = [ev.event(at, "followed_by", user=str(500 + n))]
    db.execute_many(writes)
    windows: list[tuple[int, int]] = []
    real_collect = network_activity.collect

    def collect(db_, network_, wanted_windows, stats=None):
        windows.extend(wanted_windows.values())
        return real_collect(db_, network_, wanted_windows, stats)

    monkeypatch.setattr(network_activity, "collect", collect)
    assert service.rebuild_days(db, archive, {str(AUTHOR): wanted}, {str(AUTHOR): "UTC"}) == len(happened)
    assert len(windows) == len(runs)
    assert max(end - start for start, end in windows) <= service.SLICE_DAYS * 86_400 * US
    for day, events in happened.items():
        stored = service.read(db, archive, str(AUTHOR), [day], contiguous=True, summary=False)[0]
        assert stored["events"] == events, day


def test_a_slack_rebuild_reads_only_the_hours_of_the_messages_a_user_touched(db, settings):
    """A channel-day of 480 messages (20 an hour): a user who posted once at 05:10 and reacted at 19:00 to a
    message of 17:00 has their day built from the rows of the hour they reacted in (20; their post comes from
    their posts index), not the day's 481, and the events are exactly what they did. An index row without hours
    (written before cql/0220) still has its day read whole."""
    from api.slack import activity as slack_activity
    from api.slack import events, payloads
    from tests.slack.helpers import envelope, msg

    team, channel = f"TH{uuid.uuid4().hex[:8].upper()}", "CHOTHOURS"
    start = int(datetime(2026, 2, 10, tzinfo=UTC).timestamp())

    def ts(seconds: int) -> str:
        return f"{start + seconds}.000100"

    def handle(event: dict) -> None:
        assert events.handle(db, settings, payloads.parse(envelope(team, event))) == "stored"

    for hour in range(24):
        for i in range(20):
            handle(msg(channel, ts(hour * 3600 + i * 150 + 7), f"busy {hour} {i}", user=f"UOTHER{i:02d}"))
    handle(msg(channel, ts(5 * 3600 + 600), "my one message", user="UME"))
    target = ts(17 * 3600 + 7)
    handle({"type": "reaction_added", "user": "UME", "reaction": "tada", "item_user": "UOTHER00",
            "item": {"type": "message", "channel": channel, "ts": target}, "event_ts": ts(19 * 3600)})
    window = {"UME": (start * US, (start + 86_400) * US)}
    stats: dict[str, int] = {}
    found = slack_activity.collect(db, team, window, stats)["UME"]
    assert sorted((e["at"], e["kind"]) for e in found) == [
        ((start + 5 * 3600 + 600) * US + 100, ev.MESSAGE), ((start + 19 * 3600) * US + 100, ev.REACTION_GIVEN)]
    assert stats["slack_messages"] == 20 and stats["slack_user_posts"] == 1
    # A row of the old index (no hours) naming the same channel-day: the day is read whole, nothing is missed.
    db.execute_raw(f"INSERT INTO {db.keyspace}.slack_user_activity (team_id, user_id, year, day, channel_id, "
                   f"msg_day) VALUES ('{team}', 'UME', 2026, {start // 86_400}, '{channel}', {start // 86_400})")
    whole: dict[str, int] = {}
    again = slack_activity.collect(db, team, window, whole)["UME"]
    assert whole["slack_messages"] == 481 and sorted(map(str, again)) == sorted(map(str, found))


def _bot_day(db, team: str, n: int, *, edit: bool) -> list[dict]:
    """`n` posts of bot UBOT spread over DAY in two channels (replies, files, a join among them), written by the
    ingest's own rows; with `edit`, one post edited later. Returns UBOT's events from scratch."""
    from api.slack import ingest
    from api.slack.messages import NewMessage

    happened, writes, msgs = [], [], []
    head = DAY_START + 1
    for i in range(n):
        ts = DAY_START + i * (86_400 * US // n) + 1
        channel = "CBOTB" if i % 5 == 4 else "CBOTA"
        words = 1 + i % 4
        msg = NewMessage(team, channel, ts, f"{ts // US}.{ts % US:06d}", user="UBOT", text=" ".join(["ok"] * words),
                         subtype="channel_join" if i == 0 else None, thread_ts=head if i % 10 == 3 else None,
                         files=[{"id": f"F{i}", "name": "log.txt"}] if i % 7 == 2 else None)
        writes += ingest.message_rows(db, msg, write_ts=ts, original=True)
        msgs.append(msg)
        kind = ev.JOIN if i == 0 else ev.REPLY if i % 10 == 3 else ev.FILE_SHARE if i % 7 == 2 else ev.MESSAGE
        posted = ev.event(ts, kind, channel=channel, ts=ts, thread_ts=head if kind == ev.REPLY else None,
                          words=words, files=1 if i % 7 == 2 else None,
                          subtype="channel_join" if i == 0 else None)
        happened.append(posted)
    db.execute_many(writes, concurrency=200)
    for msg in msgs:
        ingest.note_stored(db, msg)
    if edit:
        target, at = msgs[n // 2], msgs[n // 2].ts + 100 * US
        edited = NewMessage(team, target.channel_id, target.ts, target.msg_ts, user="UBOT",
                            text="now five words right here")
        db.execute_many(ingest.message_rows(db, edited, write_ts=at, edited_ts=at, versions=[(at, edited.text)]))
        happened[n // 2]["words"] = 5
        happened.append(ev.event(at, ev.EDIT, channel=target.channel_id, ts=target.ts))
    return ev.in_order(happened)


def _first_of_each_slot(happened: list[dict]) -> list[dict]:
    kept, per_slot = [], Counter()
    for e in happened:
        slot = e["at"] // ev.SLOT_US
        if per_slot[slot] < ev.SLOT_SHARE:
            kept.append(e)
        per_slot[slot] += 1
    return kept


def test_a_bot_posting_all_day_is_rebuilt_from_a_bounded_number_of_rows_whatever_the_day_holds(db):
    """A bot's day of 800 and of 3,200 posts: a rebuild reads the node's counts of its posts index and the first
    posts of each slot (the same bound at both sizes), no message row but those of the hour of an edit; the day
    equals the count from scratch (every total exact, the first SLOT_SHARE of each slot whole), and equals the day
    built the old way from the message rows."""
    from api.slack import activity as slack_activity

    rows_read = {}
    for n, edit in ((800, False), (3_200, True)):
        team = f"TB{uuid.uuid4().hex[:8].upper()}"
        archive = service.Archive.slack(team)
        happened = _bot_day(db, team, n, edit=edit)
        for hour in (0, 7, 23):  # the dirty worker's way: marks of single hours
            service.rebuild_marks(db, archive.name, [dirty.Mark(archive.name, "UBOT", DAY_START // dirty.HOUR_US
                                                                + hour)])
        day = service.read(db, archive, "UBOT", [DAY], contiguous=True, summary=False)[0]
        events = day["events"]
        assert day["event_count"] == len(happened) == n + edit
        assert ev.counts_by_kind(events) == ev.counts_by_kind(happened)
        by_slot_kind_channel = Counter()
        for e in happened:
            by_slot_kind_channel[(e["at"] // ev.SLOT_US, e["kind"], e["channel"])] += 1
        counted = Counter()
        for e in events:
            counted[(e["at"] // ev.SLOT_US, e["kind"], e["channel"])] += e.get("count", 1)
        assert counted == by_slot_kind_channel
        assert [e for e in events if "count" not in e] == _first_of_each_slot(happened)
        stats: dict[str, int] = {}
        slack_activity.collect(db, team, {"UBOT": (DAY_START, DAY_START + 86_400 * US)}, stats)
        rows_read[n] = stats
        # The same day from the message rows (an index row of before cql/0240 sends the day the old way).
        db.execute_raw(f"INSERT INTO {db.keyspace}.slack_user_activity (team_id, user_id, year, day, channel_id, "
                       f"msg_day) VALUES ('{team}', 'UBOT', 2026, {day_of(DAY_START)}, 'CBOTA', {day_of(DAY_START)})")
        service.rebuild_days(db, archive, {"UBOT": [DAY]})
        assert service.read(db, archive, "UBOT", [DAY], contiguous=True, summary=False)[0]["events"] == events
    quiet, hot = rows_read[800], rows_read[3_200]
    assert quiet.get("slack_messages", 0) == 0
    # The edited post's hour of its channel, the only message rows read: 3,200 posts, 4 of 5 in CBOTA.
    assert hot["slack_messages"] == sum(1 for i in range(3_200) if i % 5 != 4
                                        and i * 27 // 3_600 == 1_600 * 27 // 3_600)
    for stats in (quiet, hot):
        assert stats["slack_user_posts"] <= 96 * 2 * ev.SLOT_SHARE
        assert stats["slack_user_posts (counted groups)"] <= 96 * 5
