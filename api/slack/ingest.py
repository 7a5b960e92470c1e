"""Writes that span tables: the rows one Slack event writes across the table owners, and in which order.

The owners (messages.py, channels.py; the file queue, file_queue.py over api/workqueue.py) build the rows of
their own tables and import nothing from each other; this module puts an event's rows together and sends them
through `Database.execute_many`. Every write is idempotent (same key, same event-time timestamp; a file queued
twice is fetched once): when one fails the endpoint answers 503 and Slack's retry completes the set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from api.activity import dirty
from api.caches import Cache
from api.db import Database, Params, Statement
from api.erasure import guard, scrub
from api.slack import activity_index, channels, file_queue, messages, mrkdwn, payloads, search_index, users
from api.slack.codec import is_slack_id
from api.slack.messages import NewMessage
from api.slack.payloads import HistoryMessage

# Messages that count as a user's post (seed 000 leaves every other subtype out of a user's activity).
POST_SUBTYPES = frozenset({None, "thread_broadcast", "file_share", "me_message"})


# (user, when, channel, message ts): someone acted, or was acted upon, on a message (activity days); a reaction
# history showed adds the time it is written at, and `when` is its message's ts (api/slack/activity_index.py).
Acted = tuple[str | None, int, str, int] | tuple[str | None, int, str, int, int]
Write = tuple[Statement, Params]

# Per message whose rows are being written: its activity index rows and dirty marks, search day listings and
# first-seen candidates, noted as written by `note_stored` (the caller's signal that every row of the message
# went out), so a failed round writes them again on its retry. A message's entry is dropped when noted;
# forgetting one (the bound) only costs redundant writes later.
_PENDING = "slack.ingest_pending_notes"
_PENDING_MAX = 50_000


@dataclasses.dataclass
class _Pending:
    activity: list[tuple[list, list]] = dataclasses.field(default_factory=list)
    search: list[list] = dataclasses.field(default_factory=list)
    seen: list[list] = dataclasses.field(default_factory=list)


def _pending(db: Database) -> Cache:
    return db.caches.lru(_PENDING, maxsize=_PENDING_MAX)


def message_rows(db: Database, msg: NewMessage, *, write_ts: int, edited_ts: int | None = None,
                 versions: Iterable[tuple[int, str]] = (), original: bool = False, raw: Any = None,
                 acted: Iterable[Acted] = (), live: bool = True, reacted: bool = False) -> list[Write]:
    """Every row one message event writes: message row, day listing, thread index, text versions, one work
    queue item per file to fetch, the search postings of its text and has:/is: flags (`reacted`: history shows
    reactions on it), and the author's activity (index row and dirty mark; `acted` adds others'). Bulk loaders
    send many of these through one `execute_many`, then call `note_stored`."""
    # The author's post (posts index and its hour) and, for an edit, the author's edit (the message's hour).
    author = [(msg.user, write_ts, msg.channel_id, msg.ts)] if write_ts != msg.ts else []
    acted = list(acted)
    activity, keys = activity_writes(db, msg.team_id, [*author, *acted], live=live, post=(msg, write_ts))
    # Everyone the message shows is seen no later than it: its author at its ts, others when they acted.
    seen = [(user, written[0] if written else at) for user, at, _c, _t, *written in [(msg.user, msg.ts, "", 0), *acted]
            if is_slack_id(user)]
    seen_rows = users.first_seen_writes(db, msg.team_id, seen)
    postings, listed = search_index.message_posting_writes(db, msg, reacted=reacted, written_at=write_ts)
    rows = [
        *messages.message_writes(db, msg, write_ts=write_ts, edited_ts=edited_ts, versions=versions,
                                 original=original, raw=raw, live=live),
        *file_queue.enqueue_writes(msg.team_id, msg.channel_id, msg.ts, msg.files or (), clock=db.clock),
        *_first_post(db, msg),
        *seen_rows,
        *activity,
        *postings,
    ]
    if not messages.day_listed(db, msg):  # once per channel-day per process: the channel is in the index
        rows.append(channels.index_touch_write(msg.team_id, msg.channel_id))
    if keys != ([], []) or seen_rows or listed:
        pending = _pending(db).setdefault((msg.team_id, msg.channel_id, msg.ts), _Pending)
        if keys != ([], []):
            pending.activity.append(keys)
        if seen_rows:
            pending.seen.append(seen)
        if listed:
            pending.search.append(listed)
    return rows


def activity_writes(db: Database, team_id: str, acted: Iterable[Acted], *, live: bool = True,
                    post: tuple[NewMessage, int] | None = None) -> tuple[list[Write], tuple[list, list]]:
    """The activity index rows and dirty marks of `acted` and of the author's `post` (the message and the time
    it is written at) (live: the hour's mark; history: the whole UTC day), leaving out those this process already
    wrote (the post's row of the posts index is always written: an edit changes it); and the keys to pass to
    `note_activity` once written."""
    acted = [a for a in dict.fromkeys(acted) if a[0] is not None]
    touches = [activity_index.touch(team_id, *a) for a in acted]
    posts: list[Write] = []
    if post is not None and post[0].user is not None:
        message, write_ts = post
        author, channel_id, ts = message.user, message.channel_id, message.ts
        touches.append(activity_index.touch(team_id, author, ts, channel_id, ts, post=True))
        acted.append((author, ts, channel_id, ts))
        posts.append(activity_index.post_write(
            team_id, author, channel_id, ts, write_ts=write_ts,
            base_kind=activity_index.base_kind(message.subtype, message.thread_ts, ts),
            thread_ts=message.thread_ts if message.thread_ts != ts else None,
            words=mrkdwn.word_count(message.text) if message.text is not None else None,
            files=len(message.files or ()), subtype=message.subtype))
    index, index_keys = activity_index.touch_writes(db, touches)
    archive = dirty.archive_name("slack", team_id)
    mark_of = dirty.live if live else dirty.whole_day
    marks, mark_keys = dirty.mark_writes(db, (mark_of(archive, a[0], a[1]) for a in acted))
    return posts + index + marks, (index_keys, mark_keys)


def note_activity(db: Database, keys: tuple[list, list]) -> None:
    activity_index.note_written(db, keys[0])
    dirty.note_marked(db, keys[1])


def archive_of(team_id: str) -> str:
    return f"slack:{team_id}"


def erased(db: Database, msg: NewMessage) -> bool:
    """The message is its author's from before their erasure (api/erasure/guard.py): it is not written again."""
    return guard.covers(db, archive_of(msg.team_id), msg.user, msg.ts, channel=msg.channel_id)


def without_erased(db: Database, msg: NewMessage, versions: Iterable[tuple[int, str]] = (), raw: Any = None
                   ) -> tuple[NewMessage, list[tuple[int, str]], Any]:
    """Another's message (its earlier texts, its raw event) as the erasure of people it names rewrote it: their
    mentions read as a neutral name, their id gone from its JSON (api/erasure/scrub.py)."""
    versions = list(versions)
    named = guard.erased_named(db, archive_of(msg.team_id), [msg.text, msg.content, msg.parent_user_id,
                                                              [text for _at, text in versions]],
                               msg.ts, channel=msg.channel_id)
    for person in sorted(named):
        msg = dataclasses.replace(
            msg, text=scrub.text(msg.text, person), content=scrub.json_value(msg.content, person),
            parent_user_id=scrub.PLACEHOLDER_USER if msg.parent_user_id == person else msg.parent_user_id)
        versions = [(at, scrub.text(text, person) or "") for at, text in versions]
        raw = scrub.json_value(raw, person)
    return msg, versions, raw


def _first_post(db: Database, msg: NewMessage) -> list[Write]:
    if msg.user is None or msg.subtype not in POST_SUBTYPES:
        return []
    return users.first_post_writes(db, msg.team_id, msg.user, msg.channel_id, msg.ts)


def note_stored(db: Database, msg: NewMessage) -> None:
    """Every row of `message_rows(msg)` is written: remember what need not be written again."""
    if erased(db, msg):  # nothing was written (`history_rows`, `store_message`)
        return
    messages.note_stored(db, msg)
    if msg.user is not None and msg.subtype in POST_SUBTYPES:
        users.note_first_post(db, msg.team_id, msg.user, msg.ts)
    pending = _pending(db).pop((msg.team_id, msg.channel_id, msg.ts))
    if pending is None:
        return
    for keys in pending.activity:
        note_activity(db, keys)
    for listed in pending.search:
        search_index.note_indexed(db, listed)
    for seen in pending.seen:
        users.note_first_seen(db, msg.team_id, seen)


def history_rows(db: Database, hm: HistoryMessage, *, observed_at: int) -> list[Write]:
    """The rows of a message as history shows it at time `observed_at` (Web API backfill, export import): the
    same rows the live events of its life would have written, so every route converges on one row.

    The text is written at the last edit's time (else the message ts), exactly as the live post/edit events
    write it; the reactions present at `observed_at` are added at that time (a live removal after it still
    wins; one before it was already applied, since history shows the state after it). A tombstone (a deleted
    parent kept for its replies) only marks the message deleted.
    """
    msg = hm.message
    if not hm.tombstone and erased(db, msg):
        return _erased_head_rows(db, hm, observed_at=observed_at)
    scrubbed, _versions, _raw = without_erased(db, msg)
    if scrubbed is not msg:
        hm = dataclasses.replace(hm, message=scrubbed)
        msg = scrubbed
    if hm.reactions:  # an erased person's reactions on what was there before their erasure stay gone
        gone = guard.covered_among(db, archive_of(msg.team_id), {user for _emoji, user in hm.reactions}, msg.ts,
                                     channel=msg.channel_id)
        if gone:
            hm = dataclasses.replace(hm, reactions=frozenset(r for r in hm.reactions if r[1] not in gone))
    if hm.tombstone:
        return [*messages.tombstone_writes(db, msg),
                *messages.deleted_seen_writes(msg.team_id, msg.channel_id, msg.ts, at=max(observed_at, msg.ts),
                                               db=db)]
    edited = hm.edited_ts
    reacted_at = max(observed_at, edited or msg.ts)
    reactors = {user for _emoji, user in hm.reactions or ()}
    # Indexed and marked at the message's own day (its reactions' time is unknown), tagged with `reacted_at`.
    acted: list[Acted] = [(user, msg.ts, msg.channel_id, msg.ts, reacted_at) for user in reactors]
    if reactors:
        acted.append((msg.user, msg.ts, msg.channel_id, msg.ts, reacted_at))
    rows = message_rows(db, msg, write_ts=edited or msg.ts, edited_ts=edited,
                        versions=((edited, msg.text),) if edited is not None and msg.text is not None else (),
                        original=edited is None, acted=acted, live=False, reacted=bool(hm.reactions))
    if hm.reactions:
        rows.append(messages.reactions_write(msg.team_id, msg.channel_id, msg.ts, hm.reactions, at=reacted_at,
                                             db=db))
    return rows


def _erased_head_rows(db: Database, hm: HistoryMessage, *, observed_at: int) -> list[Write]:
    """An erased person's message from before their erasure is not written, but a thread head of theirs that
    others replied to is written as Slack's tombstone in its place, as the erasure left it: the replies stay
    reachable and name no one."""
    msg, content = hm.message, hm.message.content or {}
    repliers = {u for u in content.get("reply_users") or () if isinstance(u, str)}
    repliers |= {r.get("user") for r in content.get("replies") or () if isinstance(r, dict)}
    count = content.get("reply_count")
    replied = bool(repliers - {msg.user}) or (not repliers and isinstance(count, int) and count > 0)
    if msg.thread_ts != msg.ts or not replied:
        return []
    tombstone = NewMessage(msg.team_id, msg.channel_id, msg.ts, msg.msg_ts, user=messages.TOMBSTONE_USER,
                           text=messages.TOMBSTONE_TEXT, subtype="tombstone", thread_ts=msg.ts)
    return history_rows(db, HistoryMessage(tombstone, None, frozenset(), tombstone=True, hidden=False),
                        observed_at=observed_at)


def store_message(db: Database, msg: NewMessage, *, write_ts: int, edited_ts: int | None = None,
                  versions: Iterable[tuple[int, str]] = (), original: bool = False, raw: Any = None) -> None:
    """A new message (write_ts = its ts, original=True) or its edited form (write_ts = the edit time).

    Its rows (`message_rows`) go out in one concurrent round. A message row whose day is not yet listed is
    simply not on the timeline until the retry lists it: never half visible. An edit enqueues the message's
    files again; the file worker finds them finished and does not fetch them twice. A message its author's
    erasure took away is not written again (`erased`).
    """
    if erased(db, msg):
        return
    msg, versions, raw = without_erased(db, msg, versions, raw)
    db.execute_many(message_rows(db, msg, write_ts=write_ts, edited_ts=edited_ts, versions=versions,
                                 original=original, raw=raw))
    note_stored(db, msg)


def delete_message(db: Database, team_id: str, channel_id: str, ts: int, *, at: int, thread_ts: int | None,
                   author: str | None) -> None:
    """message_deleted: the deleted flag (and the reply's removal from its head), and the author's activity."""
    activity, keys = activity_writes(db, team_id, [(author, at, channel_id, ts)])
    db.execute_many(messages.mark_deleted_writes(team_id, channel_id, ts, deleted_at=at, thread_ts=thread_ts, db=db)
                    + activity)
    note_activity(db, keys)


def react(db: Database, team_id: str, channel_id: str, ts: int, emoji: str, user: str, *, added: bool, at: int,
          author: str | None) -> None:
    """reaction_added / reaction_removed: one element of the message's reactions set at the event's time, and the
    activity of the reactor and of the message's author. One an erased person gave before their erasure is left
    out (api/erasure/guard.py)."""
    if guard.covers(db, archive_of(team_id), user, at, channel=channel_id):
        return
    activity, keys = activity_writes(db, team_id, [(user, at, channel_id, ts), (author, at, channel_id, ts)])
    # has:reaction (a removal writes nothing: confirmation checks the reactions the row holds now)
    postings, listed = search_index.reaction_posting_writes(db, team_id, channel_id, ts) if added else ([], [])
    db.execute_many([messages.reactions_write(team_id, channel_id, ts, [(emoji, user)], at=at, added=added, db=db)]
                    + activity + postings)
    note_activity(db, keys)
    search_index.note_indexed(db, listed)


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


# -- channels as history lists them (conversations.list, channels.json / groups.json) ----------------------

@dataclasses.dataclass(frozen=True)
class ChannelSnapshot:
    """A channel object as history lists it, normalised; `parse` refuses one without id or name."""

    channel_id: str
    name: str
    private: bool
    archived: bool
    created_ts: int | None = None
    creator: str | None = None
    topic: tuple[str, int] | None = None  # (value, last_set µs or 0)
    purpose: tuple[str, int] | None = None
    members: int | None = None
    listed: dict[str, Any] | None = dataclasses.field(default=None, compare=False)  # the object as listed

    @classmethod
    def parse(cls, obj: Any, *, private: bool | None = None) -> ChannelSnapshot:
        if not isinstance(obj, dict) or not is_slack_id(obj.get("id")):
            raise ValueError("channel without a Slack id")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"channel {obj['id']} without a name")

        def text(field: str) -> tuple[str, int] | None:
            value = obj.get(field)
            if not isinstance(value, dict) or not isinstance(value.get("value"), str):
                return None
            last_set = value.get("last_set")
            return value["value"], (last_set * 1_000_000 if isinstance(last_set, int) and 0 < last_set < 10**11
                                    else 0)

        created = obj.get("created")
        if isinstance(created, str) and created.isascii() and created.isdigit():
            created = int(created)  # older exports write it as a string
        members = obj.get("members")
        count = obj.get("num_members")
        return cls(
            channel_id=obj["id"], name=name,
            private=bool(obj.get("is_private")) if private is None else private,
            archived=obj.get("is_archived") is True,
            created_ts=created * 1_000_000 if isinstance(created, int) and 0 < created < 10**11 else None,
            creator=obj.get("creator") if is_slack_id(obj.get("creator")) else None,
            topic=text("topic"), purpose=text("purpose"),
            members=len(members) if isinstance(members, list) else count if isinstance(count, int) else None,
            listed=obj)


def store_channel_snapshot(db: Database, team_id: str, snap: ChannelSnapshot, *, observed_at: int,
                           source: str) -> list[str]:
    """Merge what history says of a channel with what is stored, by time: a field is written only when it
    differs, at the time history observed it (topic and purpose at their own `last_set`), so a live event newer
    than the observation keeps its value, and a re-run writes nothing (no names-history row per run).
    Returns the fields written. Erased people it names are left out of it (api/erasure/guard.py)."""
    listed, named = guard.without_erased(db, archive_of(team_id), snap.listed)
    if named:
        snap = dataclasses.replace(snap, listed=listed, creator=scrub.PLACEHOLDER_USER if snap.creator in named
                                   else snap.creator)
    row = channels.current(db, team_id, snap.channel_id)
    changed: dict[str, Any] = {}
    if row is None or row.name != snap.name:
        changed["name"] = snap.name
    visibility = "private" if snap.private else "public"
    if (row.visibility if row is not None else None) != visibility:
        changed["visibility"] = visibility
    if changed:
        # "public" clears "private": written 1 µs early, as the live convert_to_public event is (payloads.clearing).
        # No names-history row: when the name was given is not known (a rename event brings its own row), and a
        # row at the observation time would make the history depend on which route came first.
        at = observed_at if visibility == "private" else payloads.clearing(observed_at)
        index = channels.index_write(team_id, snap.channel_id, at, **changed)
        db.execute(*index)
        db.execute(*channels.channel_write(team_id, snap.channel_id, at, **changed))
    if snap.created_ts is not None and (row is None or row.created_ts is None):
        db.execute(*channels.channel_write(team_id, snap.channel_id, snap.created_ts, created_ts=snap.created_ts,
                                           creator=snap.creator))
        changed["created_ts"] = snap.created_ts
    for field in ("topic", "purpose"):
        value = getattr(snap, field)
        if value is not None and (row is None or getattr(row, field) != value[0]) and (row is not None or value[0]):
            text, last_set = value
            at = last_set or payloads.seconds_us(observed_at // 1_000_000, f"{field}:{text}")
            update_channel(db, team_id, snap.channel_id, at, **{field: text})
            changed[field] = text
    stored_archived = bool(row is not None and row.archived)
    if snap.archived != stored_archived:
        channels.set_archived(db, team_id, snap.channel_id,
                              observed_at if snap.archived else payloads.clearing(observed_at), snap.archived)
        changed["archived"] = snap.archived
    if snap.members is not None:
        db.execute(*channels.members_write(team_id, snap.channel_id, observed_at, snap.members, source))
    if snap.listed is not None:
        db.execute(*channels.listed_write(team_id, snap.channel_id, observed_at, snap.listed))
    return sorted(changed)
