"""File processor: fetch Slack files listed in slack_files_pending into object storage.

Finding work never scans messages: ingest writes one slack_files_pending row per file into one of 16 fixed
shard partitions; the worker reads those partitions. A file is claimed with an LWT lease
(INSERT ... IF NOT EXISTS USING TTL) so two workers never fetch it both; the message row's files_stored map
is the "done" mark, checked after claiming. Transient failures (timeouts, 5xx, 429, connection errors)
are retried with exponential backoff (next_attempt_at on the pending row); after max_attempts, or at once
for a permanent failure (404/401/403, an HTML login page), the message is marked files_fetch_failed.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import requests
import structlog

from api.db import Database, Statement
from api.slack.messages import FILE_SHARDS
from api.slack.settings import SlackSettings
from api.slack.timeutil import us_to_ts

log = structlog.get_logger("chronicle.slack.files")

SELECT_PENDING = Statement(
    "SELECT shard, team_id, channel_id, ts, file_id, day, url_private, mimetype, name, attempts, "
    "next_attempt_at FROM slack_files_pending WHERE shard = ? LIMIT ?")
DELETE_PENDING = Statement(
    "DELETE FROM slack_files_pending WHERE shard = ? AND team_id = ? AND channel_id = ? AND ts = ? AND file_id = ?")
RETRY_LATER = Statement(
    "UPDATE slack_files_pending SET attempts = ?, next_attempt_at = ?, last_error = ? "
    "WHERE shard = ? AND team_id = ? AND channel_id = ? AND ts = ? AND file_id = ?")
CLAIM = Statement(
    "INSERT INTO slack_file_leases (team_id, channel_id, ts, file_id, owner) VALUES (?, ?, ?, ?, ?) "
    "IF NOT EXISTS USING TTL ?", idempotent=False)
RELEASE = Statement(
    "DELETE FROM slack_file_leases WHERE team_id = ? AND channel_id = ? AND ts = ? AND file_id = ? IF owner = ?",
    idempotent=False)
SELECT_STORED = Statement(
    "SELECT msg_ts, files_stored FROM slack_messages WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?",
    name="SELECT slack_messages (files_stored)")
RECORD_STORED = Statement(
    "UPDATE slack_messages SET files_stored[?] = ? WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?",
    name="FILES slack_messages")
RECORD_FAILED = Statement(
    "UPDATE slack_messages SET files_fetch_failed = true, files_fetch_error[?] = ? "
    "WHERE team_id = ? AND channel_id = ? AND day = ? AND ts = ?", name="FILES-FAILED slack_messages")


class FetchError(Exception):
    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


# -- object storage ---------------------------------------------------------------------------------------

class ObjectStore(Protocol):
    def put(self, key: str, data: bytes, content_type: str | None) -> str: ...


class LocalStore:
    """Files under a directory; written to a temporary name then renamed, so a reader never sees half a file."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def put(self, key: str, data: bytes, content_type: str | None) -> str:
        path = self.root / key
        if not path.resolve().is_relative_to(self.root.resolve()):
            raise ValueError(f"object key {key!r} leaves the files root")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return path.resolve().as_uri()


class S3Store:
    """Any S3-compatible store through boto3 (endpoint_url for MinIO, moto, ...)."""

    def __init__(self, bucket: str, *, endpoint: str | None = None, region: str = "us-east-1",
                 client: Any = None) -> None:
        import boto3

        self.bucket = bucket
        self.client = client or boto3.client("s3", endpoint_url=endpoint or None, region_name=region)

    def put(self, key: str, data: bytes, content_type: str | None) -> str:
        extra = {"ContentType": content_type} if content_type else {}
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data, **extra)
        return f"s3://{self.bucket}/{key}"


def store_from_settings(s: SlackSettings) -> ObjectStore:
    if s.s3_bucket:
        return S3Store(s.s3_bucket, endpoint=s.s3_endpoint or None, region=s.s3_region)
    return LocalStore(s.files_root)


def object_key(team_id: str, channel_id: str, ts: int, file_id: str) -> str:
    return f"slack/{team_id}/{channel_id}/{us_to_ts(ts)}/{file_id}"


# -- download ---------------------------------------------------------------------------------------------

def download(url: str, token: str, *, timeout: float, max_bytes: int,
             session: requests.Session | None = None) -> tuple[bytes, str | None]:
    """GET url_private with the bot token. Without the right scope Slack answers 200 with an HTML login page,
    so an HTML content type is refused (permanent). Size-capped; timeouts and 5xx/429 are transient."""
    http = session or requests
    try:
        with http.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout, stream=True,
                      allow_redirects=True) as resp:
            if resp.status_code == 429 or resp.status_code >= 500:
                raise FetchError(f"HTTP {resp.status_code} from file host", transient=True)
            if resp.status_code != 200:
                raise FetchError(f"HTTP {resp.status_code} from file host", transient=False)
            ctype = resp.headers.get("Content-Type", "")
            if ctype.split(";")[0].strip().lower() == "text/html":
                raise FetchError("file host answered an HTML page (login page: bot token lacks files:read?)",
                                 transient=False)
            chunks, size, started = [], 0, time.monotonic()
            for chunk in resp.iter_content(64 * 1024):
                size += len(chunk)
                if size > max_bytes:
                    raise FetchError(f"file larger than {max_bytes} bytes", transient=False)
                if time.monotonic() - started > timeout * 4:
                    raise FetchError("download too slow", transient=True)
                chunks.append(chunk)
            return b"".join(chunks), ctype or None
    except (TimeoutError, requests.Timeout, requests.ConnectionError) as exc:
        raise FetchError(f"{type(exc).__name__}: {exc}"[:300], transient=True) from exc
    except requests.RequestException as exc:
        raise FetchError(f"{type(exc).__name__}: {exc}"[:300], transient=False) from exc


# -- worker -----------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Stats:
    stored: int = 0
    retried: int = 0
    failed: int = 0
    skipped: int = 0  # claimed elsewhere, not due yet, or already stored

    def total(self) -> int:
        return self.stored + self.retried + self.failed


class FileWorker:
    def __init__(self, db: Database, settings: SlackSettings, store: ObjectStore | None = None, *,
                 owner: str | None = None, clock: Callable[[], float] = time.time) -> None:
        self.db, self.settings = db, settings
        self.store = store or store_from_settings(settings)
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.clock = clock
        self.http = requests.Session()

    def run_once(self, shards: range | list[int] = range(FILE_SHARDS)) -> Stats:
        """One pass over the pending shards: every file that is due is fetched, retried later or failed."""
        stats = Stats()
        for shard in shards:
            for row in list(self.db.execute(SELECT_PENDING, (shard, self.settings.batch_size))):
                self._process(row, stats)
        return stats

    def run(self, *, interval: float = 2.0, stop: Callable[[], bool] = lambda: False,
            on_pass: Callable[[Stats], None] | None = None) -> None:
        while not stop():
            stats = self.run_once()
            if on_pass:
                on_pass(stats)
            if stats.total() == 0:
                time.sleep(interval)

    def _process(self, row: Any, stats: Stats) -> None:
        now_us = int(self.clock() * 1_000_000)
        if row.next_attempt_at is not None and row.next_attempt_at > now_us:
            stats.skipped += 1
            return
        key = (row.team_id, row.channel_id, row.ts, row.file_id)
        claimed = self.db.execute(CLAIM, (*key, self.owner, self.settings.lease_seconds)).was_applied
        if not claimed:
            stats.skipped += 1  # another worker holds it
            return
        try:
            message_key = (row.team_id, row.channel_id, row.day, row.ts)
            msg = self.db.execute(SELECT_STORED, message_key).one()
            if msg is not None and msg.files_stored and row.file_id in msg.files_stored:
                self._delete_pending(row)  # done by someone else before us
                stats.skipped += 1
                return
            token = self.settings.token_for(row.team_id)
            try:
                if not token:
                    raise FetchError(f"no bot token configured for workspace {row.team_id}", transient=False)
                data, ctype = download(row.url_private, token, timeout=self.settings.download_timeout,
                                       max_bytes=self.settings.max_file_bytes, session=self.http)
                uri = self.store.put(object_key(*key), data, row.mimetype or ctype)
            except FetchError as exc:
                self._failure(row, message_key, exc, stats)
                return
            # Stored object first, then the URI on the message, then the queue row: a crash in between
            # leaves the row pending and the next pass redoes an idempotent put.
            self.db.execute(RECORD_STORED, (row.file_id, uri, *message_key))
            self._delete_pending(row)
            stats.stored += 1
            log.info("slack_file_stored", team_id=row.team_id, channel_id=row.channel_id, ts=us_to_ts(row.ts),
                     file_id=row.file_id, uri=uri, bytes=len(data))
        finally:
            self.db.execute(RELEASE, (*key, self.owner))

    def _failure(self, row: Any, message_key: tuple, exc: FetchError, stats: Stats) -> None:
        attempts = (row.attempts or 0) + 1
        if exc.transient and attempts < self.settings.max_attempts:
            delay = min(self.settings.backoff_seconds * 2 ** (attempts - 1), self.settings.backoff_max_seconds)
            next_at = int((self.clock() + delay) * 1_000_000)
            self.db.execute(RETRY_LATER, (attempts, next_at, str(exc)[:500], row.shard, row.team_id,
                                          row.channel_id, row.ts, row.file_id))
            stats.retried += 1
            log.info("slack_file_retry", file_id=row.file_id, attempts=attempts, delay_s=delay, error=str(exc))
            return
        error = f"after {attempts} attempt(s): {exc}"[:500]
        self.db.execute(RECORD_FAILED, (row.file_id, error, *message_key))
        self._delete_pending(row)
        stats.failed += 1
        log.warning("slack_file_failed", file_id=row.file_id, attempts=attempts, error=str(exc))

    def _delete_pending(self, row: Any) -> None:
        self.db.execute(DELETE_PENDING, (row.shard, row.team_id, row.channel_id, row.ts, row.file_id))
