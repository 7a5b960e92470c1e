"""Proof of an erasure: every table that can hold a trace of the person is read where the trace would be, never
whole (api/erasure/rules.py says, for every table of the schema, which check covers it or why none is needed).

- messages, versions, raw events, thread reply lists, stored files: the channel-days and messages the ledger
  recorded (erasure_touched), every row of those days;
- search: the postings and day listing of the person's terms (their author term, their mention term);
- the activity index and posts index, stored activity days: the person's partitions of every year;
- the profile row, every channel's creator and objects, every stored report.

A trace is a row keyed by the person, or a value naming them (their id in a text, a list, a JSON object).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from api.activity import store as activity_store
from api.db import Database
from api.erasure import ledger, scrub
from api.slack import activity_index, channels, messages, search_index, search_terms, users
from api.slack.files import ObjectStore, object_key
from api.slack.reports import store as report_store
from api.slack.timeutil import day_of

_TERM_DAYS = 100_000


def person_terms(user_id: str) -> list[str]:
    """The search terms that lead to the person's messages and to mentions of them."""
    return [search_index.author_term(user_id), *sorted(search_terms.references(f"<@{user_id}>"))]


def row_names(row: Any, user_id: str) -> bool:
    """Whether a slack_messages row (erasing columns) is theirs or names them."""
    return (row.user_id == user_id or row.parent_user_id == user_id or user_id in (row.mentions or ())
            or any(reactor == user_id for _emoji, reactor in row.reactions or ())
            or scrub.names(row.text, user_id) or scrub.names(row.original_text, user_id)
            or user_id in (row.replies or {}).values()
            or bool(row.content) and scrub.json_names(messages.decoded_content(row.content), user_id))


def _channel(db: Database, team_id: str, u: str, request: ledger.Request, channel_id: str,
             files: ObjectStore | None) -> Counter[str]:
    """Traces in what the ledger recorded of one channel: its days, and the versions, raw events and thread
    places of the messages it names, each table read by lists of partitions."""
    # Every table read is listed in the proof's report, found clean or not.
    traces: Counter[str] = Counter(dict.fromkeys(
        ("slack_messages", "slack_message_versions", "slack_message_raw", "slack_thread_replies"), 0))
    entries = ledger.touched(db, request, channel_id)
    traces["slack_messages"] += sum(row_names(row, u) for row in messages.erasing_rows_of_days(
        db, team_id, channel_id, {day for day, _ts, _what in entries}))
    # A message is theirs ("erased", "tombstone": nothing of it may remain) or another's that named them.
    changed: dict[int, str] = {}
    for _day, ts, what in entries:
        if what in ("erased", "tombstone") or what == "mention" and ts not in changed:
            changed[ts] = what
    for ts, texts in messages.versions_of(db, team_id, channel_id, changed).items():
        traces["slack_message_versions"] += sum(1 for t in texts if changed[ts] != "mention" or scrub.names(t, u))
    for ts, raw in messages.raw_events_of(db, team_id, channel_id, changed).items():
        traces["slack_message_raw"] += int(changed[ts] != "mention" or scrub.json_names(raw, u))
    replies = {(ts, int(what.partition(":")[2])) for _day, ts, what in entries if what.startswith("reply:")}
    if replies:
        listed = messages.thread_replies_of(db, team_id, channel_id, {thread_ts for thread_ts, _ in replies})
        traces["slack_thread_replies"] += len(replies & listed)
    for _day, ts, what in entries:
        if what.startswith("file:") and files is not None:
            try:
                files.open(object_key(team_id, channel_id, ts, what.partition(":")[2])).close()
                traces["stored files"] += 1
            except FileNotFoundError:
                pass
    return traces


def check(db: Database, team_id: str, user_id: str, request: ledger.Request, *, files: ObjectStore | None
          ) -> dict[str, Any]:
    """The tables read and the traces found per table ({} when clean)."""
    traces: Counter[str] = Counter()
    u = user_id
    # Channel by channel, 8 side by side (each reads its days and its messages' versions and raw events).
    pool = db.executor("erasure-proof", 8)
    for found in [pool.submit(_channel, db, team_id, u, request, channel_id, files)
                  for channel_id in sorted(request.channels)]:
        traces.update(found.result())
    today = day_of(int(db.clock.time() * 1_000_000))
    for term in person_terms(u):
        for listed in search_index.start_term_days(db, team_id, term, newest=today + 1, oldest=0,
                                                   limit=_TERM_DAYS).result():
            traces["slack_search_term_days"] += 1
            traces["slack_search_postings"] += len(list(search_index.start_postings(
                db, team_id, term, listed.day, below=2**63 - 1, at_least=0, limit=search_index.WHOLE).result()))
    years = activity_index.person_years(today)
    hours = {ts // activity_index.HOUR_US for channel_id in request.channels
             for _d, ts, what in ledger.touched(db, request, channel_id) if what in ("erased", "tombstone")}
    traces.update(activity_index.person_rows(db, team_id, u, years, sorted(hours)))
    traces["activity_days"] += activity_store.account_years_stored(db, f"slack:{team_id}", u,
                                                                   range(years[0], years[-1] + 2))
    if users.get_any(db, team_id, u) is not None:
        traces["slack_users"] += 1
    for creator, raw, listed in channels.people_rows(db, team_id).values():
        traces["slack_channels"] += int(creator == u or scrub.json_names(raw, u) or scrub.json_names(listed, u))
    before: str | None = "~"
    while before is not None:
        entries, before = report_store.listing(db, team_id, limit=100, before=before)
        for entry in entries:
            traces["slack_reports"] += sum(scrub.json_names(document, u) for document in
                                           report_store.generations(db, team_id, entry["report_id"]))
    found = {table: n for table, n in sorted(traces.items()) if n}
    return {"traces": found, "clean": not found, "channels": len(request.channels),
            "tables": sorted(set(traces) | {"slack_users", "slack_channels", "slack_reports"})}

