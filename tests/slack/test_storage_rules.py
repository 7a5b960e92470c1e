"""Storage rules checked on the node itself: no tombstones from absent values, no false booleans."""

from __future__ import annotations

import re

from cassandra.query import SimpleStatement

from api.slack.timeutil import day_of, ts_to_us
from tests.slack.helpers import channel_event, created, msg, post_event, rename


def tombstones_read(db, cql: str, params: tuple) -> int:
    """Tombstone cells Cassandra reports (query tracing) while reading the rows of `cql`."""
    result = db.session.execute(SimpleStatement(cql), params, trace=True)
    trace = result.get_query_trace(max_wait_sec=10)
    counts = [int(m.group(1)) for e in trace.events
              if (m := re.search(r"(\d+) tombstone cells", e.description or ""))]
    assert counts, [e.description for e in trace.events]
    return sum(counts)


def test_plain_message_and_channel_write_no_tombstones(client, db, unique_channel):
    c = unique_channel()
    # A message without subtype, thread, files, bot fields: every absent field must stay unset.
    assert post_event(client, "TSTORE", msg(c, "1700000000.000100", "plain")).status_code == 200
    assert post_event(client, "TSTORE", created(c, "store", "1700000000.000000")).status_code == 200
    assert post_event(client, "TSTORE", rename(c, "renamed", "1700000001.000000")).status_code == 200
    us = ts_to_us("1700000000.000100")
    assert tombstones_read(db, "SELECT * FROM slack_messages WHERE team_id=%s AND channel_id=%s AND day=%s",
                           ("TSTORE", c, day_of(us))) == 0
    assert tombstones_read(db, "SELECT * FROM slack_channels WHERE team_id=%s AND channel_id=%s",
                           ("TSTORE", c)) == 0
    assert tombstones_read(db, "SELECT * FROM slack_channel_index WHERE team_id=%s", ("TSTORE",)) == 0
    row = db.execute_raw("SELECT archived, deleted FROM slack_channels WHERE team_id=%s AND channel_id=%s",
                         ("TSTORE", c)).one()
    assert row.archived is None and row.deleted is None  # never written false


def test_unarchive_removes_the_flag_instead_of_writing_false(client, db, unique_channel):
    c = unique_channel()
    post_event(client, "TSTORE", created(c, "flags", "1700000000.000000"))
    post_event(client, "TSTORE", channel_event("channel_archive", c, "1700000002.000000"))
    post_event(client, "TSTORE", channel_event("channel_unarchive", c, "1700000003.000000"))
    row = db.execute_raw("SELECT archived FROM slack_channels WHERE team_id=%s AND channel_id=%s",
                         ("TSTORE", c)).one()
    assert row.archived is None
    # Exactly one cell tombstone: the unarchive's delete of the `archived` cell.
    assert tombstones_read(db, "SELECT * FROM slack_channels WHERE team_id=%s AND channel_id=%s",
                           ("TSTORE", c)) == 1
