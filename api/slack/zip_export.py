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

import dataclasses
import datetime as dt
import itertools
import json
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from api.db import Database
from api.slack import channels, messages, users
from api.slack.messages import Message
from api.slack.timeutil import US_PER_DAY, day_of, us_to_ts

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


@dataclasses.dataclass
class ExportReport:
    channels: int = 0
    users: int = 0
    messages: int = 0
    day_files: int = 0
    deleted_left_out: int = 0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _user_json(team_id: str, u: dict[str, Any]) -> dict[str, Any]:
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


def _channel_json(team_id: str, row: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": row.channel_id, "name": row.name,
                           "created": row.created_ts // 1_000_000 if row.created_ts else 0,
                           "creator": row.creator or "", "is_archived": bool(row.archived),
                           "is_general": False}
    for field in ("topic", "purpose"):
        value = getattr(row, field)
        out[field] = {"value": value or "", "creator": "", "last_set": 0}
    return out


def _message_json(team_id: str, m: Message, parent_users: OrderedDict[int, str],
                  replies: list[tuple[int, str | None]] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "message", "ts": us_to_ts(m.ts)}
    if m.user is not None:
        out["user"] = m.user
    out["text"] = m.text or ""
    for field in ("subtype", "bot_id", "username"):
        if getattr(m, field) is not None:
            out[field] = getattr(m, field)
    out["team"] = team_id
    if m.edited_ts is not None:
        out["edited"] = {"user": m.user or "", "ts": us_to_ts(m.edited_ts)}
    if m.thread_ts is not None:
        out["thread_ts"] = us_to_ts(m.thread_ts)
        if m.thread_ts != m.ts and m.thread_ts in parent_users:
            out["parent_user_id"] = parent_users[m.thread_ts]
    if replies:
        authors = list(dict.fromkeys(u for _, u in replies if u))
        out.update(reply_count=len(replies), reply_users=authors, reply_users_count=len(authors),
                   latest_reply=us_to_ts(replies[-1][0]),
                   replies=[{"user": u or "", "ts": us_to_ts(t)} for t, u in replies])
    if m.reactions:
        out["reactions"] = [{"name": e, "users": list(us), "count": len(us)} for e, us in m.reactions]
    if m.files:
        out["files"] = m.files
    if m.deleted:
        out["deleted"] = True  # only with include_deleted: not a Slack field, says why it is there
    return out


def _channel_rows(db: Database, team_id: str, wanted: set[str] | None, include_deleted: bool) -> list[Any]:
    rows, after = [], ""
    while True:
        entries, nxt = channels.index_page(db, team_id, limit=1000, after=after, include_deleted=include_deleted)
        for entry in entries:
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
           on_channels: Callable[[int], None] | None = None) -> ExportReport:
    """Write the workspace's archive (messages with since <= ts < until) to `out_path`."""
    report = ExportReport()
    wanted = set(channel_filter) if channel_filter else None
    rows = _channel_rows(db, team_id, wanted, include_deleted)
    if on_channels is not None:
        on_channels(len(rows))
    lo, hi = since or 0, until or 2**62
    with open(out_path, "wb") as raw, zipfile.ZipFile(_Stream(raw), "w", compression=zipfile.ZIP_DEFLATED,
                                                      compresslevel=3) as zf:
        user_list, position = [], (0, "")
        while position is not None:
            page, position = users.page(db, team_id, limit=1000, bucket=position[0], after=position[1])
            user_list.extend(_user_json(team_id, u) for u in page)
        zf.writestr("users.json", _dumps(user_list))
        report.users = len(user_list)
        public = [r for r in rows if (r.visibility or "public") == "public"]
        private = [r for r in rows if r.visibility == "private"]
        zf.writestr("channels.json", _dumps([_channel_json(team_id, r) for r in public]))
        zf.writestr("groups.json", _dumps([_channel_json(team_id, r) for r in private]))
        for empty in ("dms.json", "mpims.json"):
            zf.writestr(empty, b"[]")
        zf.writestr("integration_logs.json", _dumps({"logs": []}))
        names = [r.name for r in rows]
        for row in rows:
            folder = row.name if names.count(row.name) == 1 else row.channel_id
            _export_channel(db, team_id, row.channel_id, folder, zf, lo, hi, include_deleted, report, progress)
            report.channels += 1
    return report


def _export_channel(db: Database, team_id: str, channel_id: str, folder: str, zf: zipfile.ZipFile, lo: int,
                    hi: int, include_deleted: bool, report: ExportReport,
                    progress: Callable[[str, int], None] | None) -> None:
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
                if m.deleted and not include_deleted:
                    report.deleted_left_out += 1
                    continue
                by_day.setdefault(day_of(m.ts), []).append(m)
            threads = {m.ts: messages.start_reply_authors(db, team_id, channel_id, m.ts)
                       for day in by_day.values() for m in day if m.thread_ts == m.ts}
            for day in sorted(by_day):
                yield day, sorted(by_day[day], key=lambda m: m.ts), threads

    for day, kept, threads in day_rows():
        out = []
        for m in kept:
            replies = None
            if m.ts in threads:
                replies = [(r.ts, r.user_id) for r in threads[m.ts].result()]
                if m.user:
                    parent_users[m.ts] = m.user
                    if len(parent_users) > _PARENTS_REMEMBERED:
                        parent_users.popitem(last=False)
            out.append(_message_json(team_id, m, parent_users, replies))
        if not out:
            continue
        date = dt.datetime.fromtimestamp(day * US_PER_DAY / 1_000_000, dt.UTC).strftime("%Y-%m-%d")
        zf.writestr(f"{folder}/{date}.json", _dumps(out))
        report.day_files += 1
        report.messages += len(out)
        if progress is not None:
            progress(folder, len(out))
