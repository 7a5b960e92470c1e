"""Export back to a ZIP in Slack's official export layout, streaming from Cassandra one day file at a time.

What it writes: `users.json`, `channels.json` (public channels), `groups.json` (private-converted ones),
empty `dms.json` / `mpims.json` (Chronicle never archives direct messages), `integration_logs.json`, and one
folder per channel (named by the channel's current name; by its id when two channels share a name) holding
`YYYY-MM-DD.json` day files of messages oldest first: text as it reads now (the edit history stays in
Chronicle), `edited`, reactions, files metadata, thread fields (a parent's `reply_count`, `reply_users`,
`latest_reply` and `replies`, each from one read of the thread index). Deleted messages are left out unless
`include_deleted`. Memory: the day files being read ahead (a few partitions) and one day file being written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import itertools
import json
import os
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from datetime import tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from api.db import Database
from api.slack import channels, messages, users
from api.slack.messages import Message
from api.slack.timeutil import day_of, us_to_ts

DAYS_PER_READ = 16  # day partitions of one channel read by one request (a bounded IN over the partition key)
READ_AHEAD = 4  # such reads in flight ahead of the day file being written
_PARENTS_REMEMBERED = 100_000  # thread parent -> author, for the replies' parent_user_id (bounded)


class _Stream:
    """The output file without `seek`: zipfile then writes each entry once, with a data descriptor after it,
    instead of seeking back to patch every local header (34,000 small day files = 100,000 seeks)."""

    def __init__(self, f: Any) -> None:
        self._f = f

    def write(self, data: bytes) -> int:
        return self._f.write(data)

    def flush(self) -> None:
        self._f.flush()


class NotFound(LookupError):
    """The workspace, or a channel asked for, is not in the archive (nothing was written)."""


@dataclasses.dataclass
class ExportReport:
    channels: int = 0
    users: int = 0
    messages: int = 0
    day_files: int = 0
    deleted_left_out: int = 0
    time_zone: str = "UTC"  # the zone day files are dated in

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _user_json(team_id: str, u: dict[str, Any]) -> dict[str, Any]:
    """The user object as Slack last sent it (whole profile, every image size, flags), else the columns."""
    kept = u.get("slack_object")
    if isinstance(kept, dict) and kept.get("id") == u["user_id"]:
        return kept
    out: dict[str, Any] = {"id": u["user_id"], "team_id": team_id, "name": u.get("name"),
                           "deleted": bool(u.get("deleted")), "real_name": u.get("real_name"),
                           "tz": u.get("tz"), "tz_label": u.get("tz_label"), "tz_offset": u.get("tz_offset"),
                           "is_bot": bool(u.get("is_bot")), "is_app_user": bool(u.get("is_app_user")),
                           "profile": {k: v for k, v in (("real_name", u.get("real_name")),
                                                         ("display_name", u.get("display_name")),
                                                         ("image_192", u.get("avatar_url"))) if v is not None}}
    if u.get("updated_ts"):
        out["updated"] = int(float(u["updated_ts"]))
    return {k: v for k, v in out.items() if v is not None}


def _channel_json(listed: dict[str, Any], row: Any) -> dict[str, Any]:
    """The channel as Slack's export lists it: the object history last listed (members, pins, ...), with what
    the archive knows now on top (name, created, creator, archived, topic, purpose)."""
    out: dict[str, Any] = {**(listed or {"is_general": False}), "id": row.channel_id, "name": row.name,
                           "is_archived": bool(row.archived)}
    if row.created_ts:
        out["created"] = row.created_ts // 1_000_000
    if row.creator:
        out["creator"] = row.creator
    for field in ("topic", "purpose"):
        value = getattr(row, field)
        before = listed.get(field)
        if isinstance(before, dict) and before.get("value") == (value or ""):
            continue  # as listed, with its creator and last_set
        if value is not None or field not in out:
            out[field] = {"value": value or "", "creator": "", "last_set": 0}
    return out


def _message_json(m: Message, parent_users: OrderedDict[int, str],
                  replies: list[tuple[int, str | None]] | None) -> dict[str, Any]:
    """The message as Slack's export writes it: everything Slack sent (its content), the columns as they
    read now, reactions now, thread fields from the archived replies (docs/slack-messages.md lists the
    normalisations)."""
    content = m.content()
    out: dict[str, Any] = {"type": "message", **content, "ts": us_to_ts(m.ts)}
    # A 2015-era file_comment names its author only in `comment.user` (payloads._author).
    comment = content.get("comment")
    author_only_in_comment = (m.subtype == "file_comment" and isinstance(comment, dict)
                              and comment.get("user") == m.user)
    if m.user is not None and not author_only_in_comment:
        out["user"] = m.user
    out["text"] = m.text or ""
    for field in ("subtype", "bot_id", "username"):
        if getattr(m, field) is not None:
            out[field] = getattr(m, field)
    if m.edited_ts is not None:
        edited = content.get("edited")
        if not (isinstance(edited, dict) and edited.get("ts") == us_to_ts(m.edited_ts)):
            out["edited"] = {"user": m.user or "", "ts": us_to_ts(m.edited_ts)}
    if m.thread_ts is not None:
        out["thread_ts"] = us_to_ts(m.thread_ts)
        # Derived only for a message stored without Slack's own fields (Slack's payloads carry it when it applies).
        if m.thread_ts != m.ts and m.thread_ts in parent_users and not content:
            out["parent_user_id"] = parent_users[m.thread_ts]
    if replies:
        authors = list(dict.fromkeys(u for _, u in replies if u))
        out.update(reply_count=len(replies), reply_users=authors, reply_users_count=len(authors),
                   latest_reply=us_to_ts(replies[-1][0]))
        if "replies" in content:  # the older exports' list, when Slack sent one
            out["replies"] = [{"user": u or "", "ts": us_to_ts(t)} for t, u in replies]
    if m.reactions:
        out["reactions"] = [{"name": e, "users": list(us), "count": len(us)} for e, us in m.reactions]
    if m.files and "files" not in content and "file" not in content:
        out["files"] = m.files
    if m.subtype == "tombstone" and not content:
        out["hidden"] = True  # Slack's placeholder of a deleted thread head is hidden, as its exports write it
    if m.deleted:
        out["deleted"] = True  # only with include_deleted: not a Slack field, says why it is there
    return out


def _channel_rows(db: Database, team_id: str, wanted: set[str] | None, include_deleted: bool,
                  matched: set[str] | None = None) -> list[Any]:
    """The channel rows to export; the values of `wanted` that named one (by id or name) are added to `matched`."""
    rows, after = [], ""
    while True:
        entries, nxt = channels.index_page(db, team_id, limit=1000, after=after, include_deleted=include_deleted)
        for entry in entries:
            if wanted is not None and matched is not None:
                matched.update(wanted & {entry["channel_id"], entry["name"]})
            if wanted is None or entry["channel_id"] in wanted or entry["name"] in wanted:
                row = channels.current(db, team_id, entry["channel_id"])
                if row is not None and row.name is not None:
                    rows.append(row)
        if nxt is None:
            return rows
        after = nxt


def export(db: Database, team_id: str, out_path: str, *, since: int | None = None, until: int | None = None,
           channel_filter: Iterable[str] | None = None, include_deleted: bool = False,
           progress: Callable[[str, int], None] | None = None,
           on_channels: Callable[[int], None] | None = None, tz: str | None = None) -> ExportReport:
    """Write the workspace's archive (messages with since <= ts < until) to `out_path`, day files dated in
    `tz` (an IANA zone; default: the workspace's, `workspace_zone`).

    NotFound, before anything is written, when the workspace was never archived or a `channel_filter` value names
    no channel of it. The ZIP is written to `<out_path>.partial` and renamed to `out_path` once complete: a
    failed export leaves no file behind (and an existing `out_path` untouched)."""
    report = ExportReport()
    if tz is not None:
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{tz[:80]!r} is not an IANA time zone (e.g. America/Los_Angeles)") from None
    wanted = set(channel_filter) if channel_filter else None
    if not channels.workspace_known(db, team_id):
        raise NotFound(f"workspace {team_id} is not in the archive (nothing of it was ever stored)")
    matched: set[str] = set()
    rows = _channel_rows(db, team_id, wanted, include_deleted, matched)
    if wanted is not None and wanted - matched:
        raise NotFound(f"no channel {', '.join(sorted(wanted - matched))} in workspace {team_id}'s archive"
                       + ("" if include_deleted else " (a deleted channel is exported only with deleted ones "
                                                     "included: --include-deleted)"))
    if on_channels is not None:
        on_channels(len(rows))
    lo, hi = since or 0, until or 2**62
    partial = f"{out_path}.partial"
    try:
        _write_zip(db, team_id, partial, rows, lo, hi, include_deleted, report, progress, tz)
        os.replace(partial, out_path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise
    return report


def _write_zip(db: Database, team_id: str, out_path: str, rows: list[Any], lo: int, hi: int, include_deleted: bool,
               report: ExportReport, progress: Callable[[str, int], None] | None, tz: str | None) -> None:
    with open(out_path, "wb") as raw, zipfile.ZipFile(_Stream(raw), "w", compression=zipfile.ZIP_DEFLATED,
                                                      compresslevel=3) as zf:
        user_list, position = [], (0, "")
        while position is not None:
            page, position = users.page(db, team_id, limit=1000, bucket=position[0], after=position[1],
                                        with_slack_object=True)
            # Users with a profile: one only seen as a message's author (a Slack Connect guest) has none to write.
            user_list.extend(_user_json(team_id, u) for u in page if u.get("updated_ts") or u.get("name"))
        zf.writestr("users.json", _dumps(user_list))
        report.users = len(user_list)
        report.time_zone = tz or workspace_zone(user_list)
        zone = ZoneInfo(report.time_zone)
        public = [r for r in rows if (r.visibility or "public") == "public"]
        private = [r for r in rows if r.visibility == "private"]
        listed = {r.channel_id: channels.listed(db, team_id, r.channel_id) for r in rows}
        zf.writestr("channels.json", _dumps([_channel_json(listed[r.channel_id], r) for r in public]))
        zf.writestr("groups.json", _dumps([_channel_json(listed[r.channel_id], r) for r in private]))
        for empty in ("dms.json", "mpims.json"):
            zf.writestr(empty, b"[]")
        zf.writestr("integration_logs.json", _dumps({"logs": []}))
        names = [r.name for r in rows]
        for row in rows:
            folder = row.name if names.count(row.name) == 1 else row.channel_id
            _export_channel(db, team_id, row.channel_id, folder, zf, lo, hi, include_deleted, report, progress,
                            zone)
            report.channels += 1


def _export_channel(db: Database, team_id: str, channel_id: str, folder: str, zf: zipfile.ZipFile, lo: int,
                    hi: int, include_deleted: bool, report: ExportReport,
                    progress: Callable[[str, int], None] | None, zone: tzinfo) -> None:
    days = iter(messages.all_days(db, team_id, channel_id, first_day=day_of(lo), last_day=day_of(max(hi - 1, 0))))
    ahead: list[Any] = []
    parent_users: OrderedDict[int, str] = OrderedDict()

    def top_up() -> None:
        while len(ahead) < READ_AHEAD:
            group = list(itertools.islice(days, DAYS_PER_READ))
            if not group:
                return
            ahead.append(messages.start_days_read(db, team_id, channel_id, group))

    def day_rows() -> Iterator[tuple[int, list[Message], dict[int, Any]]]:
        """(day, messages oldest first, their threads' reply reads) of every listed day, in day order. The
        thread index of every parent of a group of days is read at once, while the group is written."""
        top_up()
        while ahead:
            rows = list(ahead.pop(0).result())
            top_up()
            by_day: dict[int, list[Message]] = {}
            for row in rows:
                m = Message.from_row(row)
                if m is None or not lo <= m.ts < hi:
                    continue
                shown = m.visible(include_deleted)  # a deleted head with replies: Slack's tombstone
                if shown is None:
                    report.deleted_left_out += 1
                    continue
                m = shown
                by_day.setdefault(day_of(m.ts), []).append(m)
            threads = {m.ts: messages.start_reply_authors(db, team_id, channel_id, m.ts)
                       for day in by_day.values() for m in day if m.thread_ts == m.ts}
            for day in sorted(by_day):
                yield day, sorted(by_day[day], key=lambda m: m.ts), threads

    # Stored days are UTC days; a day file is a local date of `zone`. Messages come oldest first, so local
    # dates only grow: a file is written when the next message's date differs.
    out: list[dict[str, Any]] = []
    date = ""

    def flush() -> None:
        if not out:
            return
        zf.writestr(f"{folder}/{date}.json", _dumps(out))
        report.day_files += 1
        report.messages += len(out)
        if progress is not None:
            progress(folder, len(out))
        out.clear()

    for _day, kept, threads in day_rows():
        for m in kept:
            replies = None
            if m.ts in threads:
                replies = [(r.ts, r.user_id) for r in threads[m.ts].result()]
                if m.user:
                    parent_users[m.ts] = m.user
                    if len(parent_users) > _PARENTS_REMEMBERED:
                        parent_users.popitem(last=False)
            local = dt.datetime.fromtimestamp(m.ts / 1_000_000, zone).strftime("%Y-%m-%d")
            if local != date:
                flush()
                date = local
            out.append(_message_json(m, parent_users, replies))
    flush()


def workspace_zone(user_list: list[dict[str, Any]]) -> str:
    """The workspace's time zone, as Slack dates its export's day files: the primary owner's zone, else the
    zone most of its people are in, else UTC. (Slack lists no zone for a workspace itself.)"""
    counts: dict[str, int] = {}
    for u in user_list:
        tz = u.get("tz")
        if not isinstance(tz, str) or not tz or u.get("is_bot") or u.get("deleted"):
            continue
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            continue
        if u.get("is_primary_owner") is True:
            return tz
        counts[tz] = counts.get(tz, 0) + 1
    return max(sorted(counts), key=counts.__getitem__) if counts else "UTC"
