"""Writes that span tables: the rows one Slack event writes across the table owners, and in which order.

The owners (messages.py, channels.py; the file queue, file_queue.py over api/workqueue.py) build the rows of
their own tables and import nothing from each other; this module puts an event's rows together and sends them
through `Database.execute_many`. Every write is idempotent (same key, same event-time timestamp; a file queued
twice is fetched once): when one fails the endpoint answers 503 and Slack's retry completes the set.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from api.db import Database, Params, Statement
from api.slack import channels, file_queue, messages
from api.slack.messages import NewMessage


def message_rows(db: Database, msg: NewMessage, *, write_ts: int, edited_ts: int | None = None,
                 versions: Iterable[tuple[int, str]] = (), original: bool = False, raw: Any = None
                 ) -> list[tuple[Statement, Params]]:
    """Every row one message event writes: message row, day listing, thread index, text versions, and one work
    queue item per file to fetch. Bulk loaders send many of these through one `execute_many`."""
    return [
        *messages.message_writes(db, msg, write_ts=write_ts, edited_ts=edited_ts, versions=versions,
                                 original=original, raw=raw),
        *file_queue.enqueue_writes(msg.team_id, msg.channel_id, msg.ts, msg.files or ()),
    ]


def store_message(db: Database, msg: NewMessage, *, write_ts: int, edited_ts: int | None = None,
                  versions: Iterable[tuple[int, str]] = (), original: bool = False, raw: Any = None) -> None:
    """A new message (write_ts = its ts, original=True) or its edited form (write_ts = the edit time).

    Its rows (`message_rows`) go out in one concurrent round. A message row whose day is not yet listed is
    simply not on the timeline until the retry lists it: never half visible. An edit enqueues the message's
    files again; the file worker finds them finished and does not fetch them twice.
    """
    db.execute_many(message_rows(db, msg, write_ts=write_ts, edited_ts=edited_ts, versions=versions,
                                 original=original, raw=raw))
    messages.note_stored(db, msg)


def update_channel(db: Database, team_id: str, channel_id: str, at: int, *, name: str | None = None,
                   created_ts: int | None = None, creator: str | None = None, visibility: str | None = None,
                   purpose: str | None = None, topic: str | None = None, prev_channel_id: str | None = None,
                   next_channel_id: str | None = None, raw: Any = None) -> None:
    """Set the given channel fields at event time `at`; the names history and the index follow.

    The names row and the index go first and the channel row last: a failed step answers 503 and Slack's
    retry completes the rest.
    """
    first = [channels.name_write(team_id, channel_id, at, name)] if name is not None else []
    index = channels.index_write(team_id, channel_id, at, name=name, visibility=visibility,
                                 prev_channel_id=prev_channel_id, next_channel_id=next_channel_id)
    if index is not None:
        first.append(index)
    db.execute_many(first)
    db.execute(*channels.channel_write(
        team_id, channel_id, at, name=name, created_ts=created_ts, creator=creator, visibility=visibility,
        purpose=purpose, topic=topic, prev_channel_id=prev_channel_id, next_channel_id=next_channel_id,
        raw=raw))


def delete_channel(db: Database, team_id: str, channel_id: str, at: int) -> None:
    """The deleted flag: in the index first, then on the channel row."""
    db.execute(*channels.index_deleted_write(team_id, channel_id, at))
    db.execute(*channels.channel_deleted_write(team_id, channel_id, at))


def change_channel_id(db: Database, team_id: str, old_channel_id: str, new_channel_id: str, at: int, *,
                      raw: Any = None) -> None:
    """channel_id_changed: the old id points to the new one, the new one back to the old one.

    Old id first: the new row (what readers start from) is complete once it exists.
    """
    update_channel(db, team_id, old_channel_id, at, next_channel_id=new_channel_id)
    update_channel(db, team_id, new_channel_id, at, prev_channel_id=old_channel_id, raw=raw)
