"""Slack export ZIP import: the official export layout (and slackdump's) into the tables live ingest fills.

Owner of slack_import_progress. An export is a snapshot: each message as it read when the export was made
(text after its last edit, reactions present then). `ingest.history_rows` writes exactly the rows the live
events of that message would have written, at the same event times, so one message has one row whatever route
brought it, and importing the same ZIP again changes nothing. The snapshot's own time (reactions present "now")
is the newest modification time among the ZIP's entries unless given (`observed_at`).

Memory is bounded whatever the ZIP size: the central directory is read once, metadata files (users, channels)
are read whole (they are small), and day files are read one at a time and written in groups of ~1,000
messages. A day file is recorded in slack_import_progress once all its rows are written, so a re-run (after a
kill, or of the same ZIP) skips what is done and redoes only partial work, which is idempotent.

Refused input never half-writes anything: a bad entry (path traversal, not JSON, too large, a ZIP-bomb ratio)
or message (no ts, a bad ts, not valid Unicode) is skipped whole and reported with its reason; the import
fails (`BadArchive`) only when the file is not a ZIP at all or breaks the archive-wide limits.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import datetime as dt
import functools
import hashlib
import json
import re
import time
import zipfile
from collections.abc import Callable
from typing import Any

import structlog

from api.db import Database, Params, Statement
from api.errors import CASSANDRA_UNAVAILABLE
from api.slack import ingest, users
from api.slack.codec import is_slack_id, is_user_id
from api.slack.payloads import BadEvent, history_message

TABLES = frozenset({"slack_import_progress"})

log = structlog.get_logger("chronicle.slack.import")

SELECT_DONE = Statement(
    "SELECT entry FROM slack_import_progress WHERE team_id = ? AND archive_id = ? AND folder = ?")
INSERT_DONE = Statement(
    "INSERT INTO slack_import_progress (team_id, archive_id, folder, entry, messages, done_at) "
    "VALUES (?, ?, ?, ?, ?, ?)")

DAY_FILE = re.compile(r"^(?:__uploads/)?([^/]+)/(\d{4}-\d{2}-\d{2})\.json$")
GROUP_MESSAGES = 1000  # messages written per round (a few day files)
GROUP_ATTEMPTS = 4  # sends of one group before the import stops (resumable) on timeouts
GROUP_RETRY_PAUSE = 5.0  # seconds before the second send, twice that before the third, ...
# Subtypes Slack documents for messages; others are stored as sent (like live ingest) and counted.
KNOWN_SUBTYPES = frozenset({
    "bot_message", "me_message", "thread_broadcast", "file_share", "file_comment", "file_mention",
    "channel_join", "channel_leave", "channel_topic", "channel_purpose", "channel_name", "channel_archive",
    "channel_unarchive", "channel_convert_to_private", "channel_convert_to_public", "group_join", "group_leave",
    "group_topic", "group_purpose", "group_name", "group_archive", "group_unarchive", "pinned_item",
    "unpinned_item", "reminder_add", "slackbot_response", "bot_add", "bot_remove", "tombstone", "huddle_thread",
    "channel_canvas_updated", "sh_room_created", "ekm_access_denied", "reply_broadcast", "app_conversation_leave",
})


class BadArchive(Exception):
    """Nothing can be imported from this file (not a ZIP, over the archive-wide limits, no workspace)."""


class WrongWorkspace(Exception):
    """The workspace id given is not the export's (its users.json names others); nothing was written."""


@dataclasses.dataclass(frozen=True)
class Limits:
    max_total_bytes: int = 64 * 1024**3     # uncompressed, all entries
    max_entries: int = 5_000_000
    max_entry_bytes: int = 256 * 1024**2    # one JSON file, uncompressed
    max_ratio: int = 200                    # uncompressed / compressed, for entries over 1 MiB


@dataclasses.dataclass
class ChannelCounts:
    name: str
    channel_id: str | None
    day_files: int = 0
    messages: int = 0
    skipped: int = 0


@dataclasses.dataclass
class ImportReport:
    archive_id: str = ""
    team_id: str = ""
    observed_at: int = 0
    dry_run: bool = False
    users: int = 0
    channels: dict[str, ChannelCounts] = dataclasses.field(default_factory=dict)
    day_files_done_before: int = 0
    files_queued: int = 0
    unknown_subtypes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    skipped: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # reason -> count
    examples: list[str] = dataclasses.field(default_factory=list)  # first skipped items, with where and why

    MAX_EXAMPLES = 50

    def skip(self, where: str, reason: str) -> None:
        self.skipped[reason] += 1
        if len(self.examples) < self.MAX_EXAMPLES:
            self.examples.append(f"{where}: {reason}")

    @property
    def messages(self) -> int:
        return sum(c.messages for c in self.channels.values())

    @property
    def imported_anything(self) -> bool:
        return bool(self.messages or self.users or self.channels or self.day_files_done_before)

    def to_json(self) -> dict[str, Any]:
        return {
            "archive_id": self.archive_id, "team_id": self.team_id, "observed_at": self.observed_at,
            "dry_run": self.dry_run, "users": self.users, "messages": self.messages,
            "files_queued": self.files_queued, "day_files_done_before": self.day_files_done_before,
            "channels": {k: dataclasses.asdict(v) for k, v in sorted(self.channels.items())},
            "unknown_subtypes": dict(self.unknown_subtypes), "skipped": dict(self.skipped),
            "skipped_examples": self.examples,
        }


def _unsafe(name: str) -> str | None:
    """Why an entry name may not be used (path traversal and friends), else None."""
    if "\x00" in name or "\\" in name:
        return "entry name holds a NUL or a backslash"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "absolute entry path"
    if ".." in name.split("/"):
        return "entry path leaves the archive (..)"
    return None


class _Archive:
    """The ZIP with its limits checked; entries read as JSON with a size cap."""

    def __init__(self, path: str, limits: Limits, report: ImportReport) -> None:
        self.limits, self.report = limits, report
        try:
            self.zf = zipfile.ZipFile(path)
            infos = self.zf.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
            raise BadArchive(f"not a readable ZIP archive: {exc}") from None
        if len(infos) > limits.max_entries:
            raise BadArchive(f"{len(infos)} entries, over the limit of {limits.max_entries}")
        total = sum(i.file_size for i in infos)
        if total > limits.max_total_bytes:
            raise BadArchive(f"{total} bytes uncompressed, over the limit of {limits.max_total_bytes}")
        self.entries: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            if info.is_dir():
                continue
            why = _unsafe(info.filename) or self._too_big(info)
            if why is not None:
                report.skip(info.filename[:200], why)
                continue
            self.entries[info.filename] = info
        digest = hashlib.sha256()
        for info in sorted(infos, key=lambda i: i.filename):
            digest.update(f"{info.filename}\0{info.CRC}\0{info.file_size}\n".encode("utf-8", "surrogateescape"))
        self.archive_id = digest.hexdigest()[:32]
        stamps = [i.date_time for i in infos if i.date_time[0] >= 1980]
        self.newest = (int(dt.datetime(*max(stamps), tzinfo=dt.UTC).timestamp()) * 1_000_000
                       if stamps else int(time.time() * 1_000_000))

    def _too_big(self, info: zipfile.ZipInfo) -> str | None:
        if info.file_size > self.limits.max_entry_bytes and info.filename.endswith(".json"):
            return f"{info.file_size} bytes uncompressed, over the per-file limit of {self.limits.max_entry_bytes}"
        if info.file_size > 1024**2 and info.file_size > self.limits.max_ratio * max(info.compress_size, 1):
            return f"compression ratio over {self.limits.max_ratio}:1 (a ZIP bomb?)"
        return None

    def json(self, name: str) -> tuple[Any, str | None]:
        """(value, None) or (None, why it cannot be read)."""
        info = self.entries.get(name)
        if info is None:
            return None, "absent"
        try:
            with self.zf.open(info) as f:
                data = f.read(self.limits.max_entry_bytes + 1)
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
            return None, f"unreadable ({type(exc).__name__}: {str(exc)[:120]})"
        if len(data) > self.limits.max_entry_bytes:
            return None, "larger than its declared size (over the per-file limit)"
        try:
            return json.loads(data), None
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: nested too deep
            return None, f"not JSON ({str(exc)[:120]})"


@dataclasses.dataclass(frozen=True)
class _Folder:
    channel_id: str
    snapshot: ingest.ChannelSnapshot


def _list(archive: _Archive, name: str) -> list[Any]:
    value, why = archive.json(name)
    if why == "absent":
        return []
    if why is not None or not isinstance(value, list):
        archive.report.skip(name, why or "not a JSON list")
        return []
    return value


def _team_of(archive: _Archive, user_list: list[Any]) -> str | None:
    teams = collections.Counter(u.get("team_id") for u in user_list if isinstance(u, dict)
                                and isinstance(u.get("team_id"), str) and u.get("team_id"))
    return teams.most_common(1)[0][0] if teams else None


def _teams_of(user_list: list[Any]) -> set[str]:
    """Every workspace id users.json names (an org export's users may belong to several)."""
    return {u["team_id"] for u in user_list if isinstance(u, dict) and isinstance(u.get("team_id"), str)
            and u["team_id"]}


def import_export(db: Database | None, path: str, *, team_id: str | None = None, include_private: bool = False,
                  dry_run: bool = False, observed_at: int | None = None, limits: Limits = Limits(),
                  progress: Callable[[str, int], None] | None = None,
                  on_day_files: Callable[[int], None] | None = None,
                  group_messages: int = GROUP_MESSAGES, strict_team: bool = False) -> ImportReport:
    """Import the export at `path`; returns what was stored and what was skipped, with reasons.

    `progress(channel, messages)` is called as messages are stored; `on_day_files(total)` once the day files
    to import are known. `db` may be None only with dry_run. BadArchive when nothing can be imported. With
    `strict_team` (the CLI), a `team_id` that users.json does not name (when it names any) is WrongWorkspace,
    before anything is written; without it, `team_id` imports the export under that id (tests do, to isolate).

    Phases: the workspace, users.json, the channel lists, the day files still to do, then the day files in
    groups written on a background thread.
    """
    report = ImportReport(dry_run=dry_run)
    archive = _Archive(path, limits, report)
    report.archive_id = archive.archive_id
    report.observed_at = observed_at = observed_at or archive.newest
    user_list = _list(archive, "users.json") or _list(archive, "org_users.json")
    team = report.team_id = _workspace(archive, user_list, team_id, strict_team)
    write = None if dry_run else db
    _import_users(write, team, user_list, report, observed_at)
    folders, never = _import_channels(write, archive, team, report, observed_at, include_private)
    todo = _day_files_to_do(write, archive, team, folders, never, report, include_private)
    if on_day_files is not None:
        on_day_files(len(todo))
    groups = _GroupWriter(write, team, archive.archive_id, group_messages)
    try:
        for folder_name, entry in todo:
            folder = folders[folder_name]
            n = _import_day_file(write, archive, team, folder, entry, report, observed_at, groups)
            if n is None:
                continue
            groups.day_file_done(folder_name, entry, n)
            if progress is not None:
                progress(folder.snapshot.name, n)
        groups.flush(last=True)
    finally:
        groups.close()
    return report


def _workspace(archive: _Archive, user_list: list[Any], team_id: str | None, strict_team: bool) -> str:
    named = _teams_of(user_list)
    if team_id and strict_team and named and team_id not in named:
        raise WrongWorkspace(f"this export belongs to workspace {', '.join(sorted(named))} (users.json), not "
                             f"{team_id}: leave the workspace id out to import it as {_team_of(archive, user_list)}")
    team = team_id or _team_of(archive, user_list)
    if not team:
        raise BadArchive("cannot tell which workspace this export belongs to (no team_id in users.json): pass "
                         "the workspace id")
    if not is_slack_id(team):
        raise BadArchive(f"the workspace id {team[:80]!r} is not a Slack id (upper-case letters and digits)")
    return team


def _import_users(db: Database | None, team: str, user_list: list[Any], report: ImportReport,
                  observed_at: int) -> None:
    """users.json (db None: a dry run counts only)."""
    seen_at = int(time.time() * 1_000_000)
    for user in user_list:
        if isinstance(user, dict) and not is_user_id(user.get("id")):
            # Only Slack-shaped user ids are stored (they name pages and links): skipped with the reason.
            report.skip("users.json", f"user id {str(user.get('id'))[:40]!r} is not a Slack user id")
            continue
        try:
            profile = users.Profile.from_slack(team, user, observed_at=observed_at)
        except ValueError as exc:
            report.skip("users.json", str(exc))
            continue
        if db is not None and users.erased(db, profile):
            report.skip("users.json", "the profile of an erased person, from before their erasure (not written)")
            continue
        if db is not None:
            # Seen no later than the profile's own time: a report over imported history counts the user.
            # The user object is kept whole (users.json comes back out as it went in).
            users.store_profile(db, profile, seen_at=min(seen_at, profile.updated), raw=user)
        report.users += 1


def _import_channels(db: Database | None, archive: _Archive, team: str, report: ImportReport, observed_at: int,
                     include_private: bool) -> tuple[dict[str, _Folder], set[str]]:
    """channels.json (and groups.json with include_private): the folders to import, by name and by id, and the
    direct-message folders that are never archived."""
    folders: dict[str, _Folder] = {}
    for list_name, private in (("channels.json", False), ("groups.json", True)):
        for obj in _list(archive, list_name):
            try:
                snap = ingest.ChannelSnapshot.parse(obj, private=private)
            except ValueError as exc:
                report.skip(list_name, str(exc))
                continue
            if private and not include_private:
                report.skip(f"{list_name}:{snap.name}", "private channel (pass include_private to import it)")
                continue
            folders[snap.name] = folders[snap.channel_id] = _Folder(snap.channel_id, snap)
    never = set()
    for list_name in ("dms.json", "mpims.json"):
        for obj in _list(archive, list_name):
            if isinstance(obj, dict):
                never.update(v for v in (obj.get("id"), obj.get("name")) if isinstance(v, str))
    for folder in {f.channel_id: f for f in folders.values()}.values():
        report.channels[folder.snapshot.name] = ChannelCounts(folder.snapshot.name, folder.channel_id)
        if db is not None:
            ingest.store_channel_snapshot(db, team, folder.snapshot, observed_at=observed_at, source="export")
    return folders, never


def _day_files_to_do(db: Database | None, archive: _Archive, team: str, folders: dict[str, _Folder],
                     never: set[str], report: ImportReport, include_private: bool) -> list[tuple[str, str]]:
    """(folder, entry) of every day file of an imported channel that an earlier run has not recorded as done,
    in folder and day order."""
    day_files: list[tuple[str, str, str]] = []  # (folder, day, entry)
    for name in archive.entries:
        match = DAY_FILE.match(name)
        if match is None:
            continue
        folder_name = match.group(1)
        if folder_name in never:
            report.skipped["direct-message day file (direct messages are never archived)"] += 1
            continue
        if folder_name not in folders:
            report.skip(name, "folder is not a channel listed in channels.json"
                        + ("" if include_private else " (or a private channel: include_private)"))
            continue
        day_files.append((folder_name, match.group(2), name))
    day_files.sort()
    done: set[str] = set()
    if db is not None:
        futures = [db.execute_async(SELECT_DONE, (team, archive.archive_id, folder))
                   for folder in sorted({f for f, _, _ in day_files})]
        done = {r.entry for future in futures for r in future.result()}
    report.day_files_done_before = sum(1 for _, _, entry in day_files if entry in done)
    return [(folder, entry) for folder, _day, entry in day_files if entry not in done]


def _import_day_file(db: Database | None, archive: _Archive, team: str, folder: _Folder, entry: str,
                     report: ImportReport, observed_at: int, groups: _GroupWriter) -> int | None:
    """One day file's messages into the next group; the number taken, or None when the file was skipped."""
    counts = report.channels[folder.snapshot.name]
    value, why = archive.json(entry)
    if why is not None or not isinstance(value, list):
        report.skip(entry, why or "day file is not a JSON list of messages")
        counts.skipped += 1
        return None
    counts.day_files += 1
    n = 0
    for i, m in enumerate(value):
        try:
            hm = history_message(team, folder.channel_id, m)
        except BadEvent as exc:
            report.skip(f"{entry}[{i}]", str(exc))
            counts.skipped += 1
            continue
        if hm.hidden:
            report.skip(f"{entry}[{i}]", f"hidden message subtype {hm.message.subtype!r} (not archived)")
            counts.skipped += 1
            continue
        erased = db is not None and not hm.tombstone and ingest.erased(db, hm.message)
        if erased:  # history_rows writes only the tombstone of a head of theirs others replied to
            report.skip(f"{entry}[{i}]", "a message of an erased person, from before their erasure (not written)")
            counts.skipped += 1
        subtype = hm.message.subtype
        if subtype is not None and subtype not in KNOWN_SUBTYPES and not erased:
            report.unknown_subtypes[subtype] += 1
        if db is not None:
            groups.add(_with_retries(db, functools.partial(ingest.history_rows, db, hm, observed_at=observed_at)), hm)
            if erased:
                continue
            if hm.purpose is not None or hm.topic is not None:
                ingest.update_channel(db, team, folder.channel_id, hm.message.ts, purpose=hm.purpose,
                                      topic=hm.topic)
        report.files_queued += len(hm.message.files or ())
        n += 1
    counts.messages += n
    return n


class _GroupWriter:
    """Rows of a few day files written as one group on one background thread while the next group is parsed
    (at most two in flight); a group's day files are recorded done only after all its rows are written. A group
    that times out (an overloaded node) is sent again after a pause, up to GROUP_ATTEMPTS times: its writes are
    idempotent. Without a database (a dry run) nothing is written."""

    def __init__(self, db: Database | None, team: str, archive_id: str, group_messages: int) -> None:
        self.db, self.team, self.archive_id, self.group_messages = db, team, archive_id, group_messages
        self.rows: list[tuple[Statement, Params]] = []
        self.files: list[tuple[str, str, int]] = []
        self.stored: list[Any] = []
        self.writer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="import-writer")
        self.in_flight: collections.deque = collections.deque()

    def add(self, rows: list[tuple[Statement, Params]], hm: Any) -> None:
        self.rows.extend(rows)
        self.stored.append(hm)

    def day_file_done(self, folder: str, entry: str, messages: int) -> None:
        self.files.append((folder, entry, messages))
        if len(self.stored) >= self.group_messages or len(self.files) >= 200:
            self.flush()

    def flush(self, last: bool = False) -> None:
        if self.db is not None and (self.rows or self.files):
            self.in_flight.append(self.writer.submit(self._write, list(self.rows), list(self.files),
                                                     list(self.stored)))
        self.rows.clear()
        self.files.clear()
        self.stored.clear()
        while self.in_flight and (last or len(self.in_flight) > 1):
            self.in_flight.popleft().result()  # a failed group raises here: the import stops, resumable

    def close(self) -> None:
        self.writer.shutdown(wait=True, cancel_futures=True)

    def _write(self, rows: list[tuple[Statement, Params]], files: list[tuple[str, str, int]],
               done_messages: list[Any]) -> None:
        db = self.db
        assert db is not None
        if rows:
            _with_retries(db, lambda: db.execute_many(rows, batch_size=50))
            for hm in done_messages:
                ingest.note_stored(db, hm.message)
        if files:
            now = int(db.clock.time() * 1e6)
            _with_retries(db, lambda: db.execute_many(
                [(INSERT_DONE, (self.team, self.archive_id, folder, entry, n, now)) for folder, entry, n in files]))


def _with_retries(db: Database, write: Callable[[], Any]) -> Any:
    """Run `write` (or an idempotent read: the routing reads building a group's rows), again after a pause when
    Cassandra times out or is unreachable; its value."""
    for attempt in range(1, GROUP_ATTEMPTS + 1):
        try:
            return write()
        except CASSANDRA_UNAVAILABLE as exc:
            if attempt == GROUP_ATTEMPTS:
                raise
            pause = GROUP_RETRY_PAUSE * attempt
            log.warning("import_group_retried", attempt=attempt, error=type(exc).__name__, pause_s=pause)
            db.clock.sleep(pause)
