"""File processor: fetch Slack files listed in the file queue into object storage.

Finding work never scans messages: ingest enqueues one item per file on the generic work queue (file_queue.py,
queue `slack_files`, one group per workspace); the worker takes items from the shards it holds (a lease per
shard, so two workers never process one file at once) and processes a batch concurrently. The message row's
files_stored / files_fetch_error maps (messages.py) are the "done" mark, checked before every download: a file
enqueued again (an edit, a redelivered event, a re-read after a crash) is not fetched again. Transient failures
(timeouts, 5xx, 429, connection errors) are retried with exponential backoff (a new queue item due later);
after max_attempts, or at once for a permanent failure (404/401/403, an HTML login page, a url_private or a
redirect outside Slack's file hosts: the bot token is never sent there), the message is marked files_fetch_failed.

This module owns no table: the worker loop calls the queue (file_queue) and the messages' owner.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO, Protocol
from urllib.parse import urljoin

import requests
import structlog

from api.clock import Clock
from api.db import Database
from api.slack import file_queue, installations, messages
from api.slack.file_queue import PendingFile
from api.slack.settings import DEFAULT_FILE_HOSTS, SlackSettings, file_host_refusal
from api.slack.timeutil import us_to_ts
from api.worker_loop import Counts, run_worker

log = structlog.get_logger("chronicle.slack.files")


class FetchError(Exception):
    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


# -- object storage ---------------------------------------------------------------------------------------

class ObjectStore(Protocol):
    def put(self, key: str, data: bytes, content_type: str | None) -> str: ...

    def open(self, key: str) -> BinaryIO:
        """The stored object's bytes to stream (the caller closes it); FileNotFoundError when absent."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object (nothing to do when absent: retention and erasure may run again)."""
        ...


class LocalStore:
    """Files under a directory; written to a temporary name then renamed, so a reader never sees half a file."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._resolved: Path | None = None
        self._made: set[Path] = set()  # directories known to exist (saves a mkdir per file)

    def _path(self, key: str) -> Path:
        if self._resolved is None:
            self._resolved = self.root.resolve()
        # normpath, not resolve(): a lexical check of the key is enough (the root is ours) and costs no syscall.
        path = Path(os.path.normpath(self._resolved / key))
        if not path.is_relative_to(self._resolved) or path == self._resolved:
            raise ValueError(f"object key {key!r} leaves the files root")
        return path

    def put(self, key: str, data: bytes, content_type: str | None) -> str:
        path = self._path(key)
        if path.parent not in self._made:
            path.parent.mkdir(parents=True, exist_ok=True)
            if len(self._made) > 100_000:
                self._made.clear()
            self._made.add(path.parent)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            tmp.write_bytes(data)
        except FileNotFoundError:  # the directory went away since we made it
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
        os.replace(tmp, path)
        return path.as_uri()

    def open(self, key: str) -> BinaryIO:
        path = self._path(key)
        if not path.is_file():  # a directory (another object's prefix) is no object
            raise FileNotFoundError(key)
        return path.open("rb")

    def delete(self, key: str) -> None:
        path = self._path(key)
        if path.is_file():
            path.unlink(missing_ok=True)


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

    def open(self, key: str) -> BinaryIO:
        from botocore.exceptions import ClientError

        try:
            found = self.client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                raise FileNotFoundError(key) from None
            raise
        return found["Body"]  # botocore's StreamingBody: read(n), close()

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=key)  # S3 answers 204 for an absent key too


def store_from_settings(s: SlackSettings) -> ObjectStore:
    if s.s3_bucket:
        return S3Store(s.s3_bucket, endpoint=s.s3_endpoint or None, region=s.s3_region)
    return LocalStore(s.files_root)


def serving_store(db: Database, slack: SlackSettings) -> ObjectStore:
    """The object store the file worker writes to, for the routes that serve stored files (the archive page's
    and the REST download; `slack`: the app's settings): one client per Database and settings, held by the
    Database."""
    key = ("slack.files.store", slack.files_root, slack.s3_bucket, slack.s3_endpoint, slack.s3_region)
    return db.held(key, lambda: store_from_settings(slack))


def open_stored(db: Database, slack: SlackSettings, team_id: str, channel_id: str, ts: int, file_id: str) -> Any:
    """A stored file's body from the serving store; FileNotFoundError (or ValueError) when it is not there."""
    return serving_store(db, slack).open(object_key(team_id, channel_id, ts, file_id))


def download_name(meta: dict[str, Any], file_id: str) -> str:
    """The name a stored file is downloaded under: its Slack name without path separators, quotes or
    controls, else its id."""
    name = meta.get("name") if isinstance(meta.get("name"), str) else ""
    cleaned = "".join(c for c in name if c.isprintable() and c not in '/\\"')[:200].strip(". ")
    return cleaned or file_id


def object_key(team_id: str, channel_id: str, ts: int, file_id: str) -> str:
    return f"slack/{team_id}/{channel_id}/{us_to_ts(ts)}/{file_id}"


# -- download ---------------------------------------------------------------------------------------------

MAX_REDIRECTS = 5


def download(url: str, token: str, *, timeout: float, max_bytes: int, session: requests.Session | None = None,
             file_hosts: tuple[str, ...] = DEFAULT_FILE_HOSTS) -> tuple[bytes, str | None]:
    """GET url_private with the bot token. Without the right scope Slack answers 200 with an HTML login page,
    so an HTML content type is refused (permanent). Size-capped; timeouts and 5xx/429 are transient.

    The token goes only to Slack's file hosts (`file_hosts`, CHRONICLE_SLACK_FILE_HOSTS): a url_private (from an
    event or an imported export) or a redirect naming any other host fails for good before any request there."""
    http = session or requests
    try:
        for _hop in range(MAX_REDIRECTS + 1):
            refusal = file_host_refusal(url, file_hosts)
            if refusal is not None:
                raise FetchError(f"not fetched, the bot token is only sent to Slack's file hosts: {refusal}",
                                 transient=False)
            resp = http.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout, stream=True,
                            allow_redirects=False)
            if not resp.is_redirect:
                break
            url = urljoin(url, resp.headers.get("Location", ""))
            resp.close()
        else:
            raise FetchError(f"more than {MAX_REDIRECTS} redirects", transient=False)
        with resp:
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
class Stats(Counts):
    stored: int = 0
    retried: int = 0
    failed: int = 0
    skipped: int = 0  # found finished already (stored or failed for good): not fetched again
    PASSIVE = ('skipped',)


def _idle(stats: Stats) -> bool:
    return stats.total() + stats.skipped == 0


class FileWorker:
    """Takes due files from the queue and processes each batch on `settings.concurrency` threads (downloads
    wait on the network, not on the CPU). Retry times and idle sleeps are read from `clock` (default:
    `db.clock`)."""

    def __init__(self, db: Database, settings: SlackSettings, store: ObjectStore | None = None, *,
                 owner: str | None = None, clock: Clock | None = None) -> None:
        self.db, self.settings = db, settings
        self.store = store or store_from_settings(settings)
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.clock = db.clock if clock is None else clock
        self._local = threading.local()  # one HTTP session (keep-alive connection) per thread
        self._pool = ThreadPoolExecutor(max(1, settings.concurrency), thread_name_prefix="slack-files")
        self._stats_lock = threading.Lock()

    def _http(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def run_once(self) -> Stats:
        """One batch: every due file taken from the queue is fetched, retried later or failed."""
        stats = Stats()
        batch = file_queue.take(self.db, self.owner, self.settings.batch_size)
        if batch:
            # Whether each file is finished already: read for the whole batch in one concurrent round.
            finished = messages.files_finished(self.db, [(f.team_id, f.channel_id, f.ts, f.file_id) for f in batch])
            for f, is_finished in zip(batch, finished, strict=True):
                if is_finished:
                    file_queue.done(self.db, f, self.owner)  # stored (or failed for good) before: no 2nd fetch
                    stats.skipped += 1
            todo = [f for f, is_finished in zip(batch, finished, strict=True) if not is_finished]
            list(self._pool.map(lambda f: self._process(f, stats), todo))
        return stats

    def run(self, *, interval: float = 2.0, stop: Callable[[], bool] = lambda: False,
            on_pass: Callable[[Stats], None] | None = None, until_idle: bool = False, max_passes: int = 0) -> int:
        """Run batches until `stop()` holds (or, with `until_idle`, until one finds nothing due; or after
        `max_passes` > 0 batches), sleeping `interval` (of the clock) after an empty one; then hand the shards
        back. Returns the number of batches run."""
        return run_worker(self.run_once, idle=_idle, clock=self.clock, interval=interval, stop=stop,
                          on_pass=on_pass, until_idle=until_idle, max_passes=max_passes, finish=self.stop)

    def stop(self) -> None:
        """Checkpoints written, shards handed back to the other workers."""
        file_queue.stop(self.db, self.owner)

    def _count(self, stats: Stats, field: str) -> None:
        with self._stats_lock:
            setattr(stats, field, getattr(stats, field) + 1)

    def _process(self, file: PendingFile, stats: Stats) -> None:
        try:
            try:  # the installed (rotated) token, else the environment's; none once the app is uninstalled
                token = installations.bot_token(self.db, file.team_id, env=self.settings)
            except installations.NoToken as exc:
                raise FetchError(str(exc), transient=exc.transient) from None
            data, ctype = download(file.url_private, token, timeout=self.settings.download_timeout,
                                   max_bytes=self.settings.max_file_bytes, session=self._http(),
                                   file_hosts=self.settings.file_hosts)
            uri = self.store.put(object_key(file.team_id, file.channel_id, file.ts, file.file_id), data,
                                 file.mimetype or ctype)
        except FetchError as exc:
            self._failure(file, exc, stats)
            return
        # Stored object first, then the URI on the message, then the queue: a crash in between leaves the item
        # after the checkpoint, and the next owner redoes an idempotent put (or finds it recorded).
        messages.record_file_stored(self.db, file.team_id, file.channel_id, file.ts, file.file_id, uri)
        file_queue.done(self.db, file, self.owner)
        self._count(stats, "stored")
        log.debug("slack_file_stored", team_id=file.team_id, channel_id=file.channel_id, ts=us_to_ts(file.ts),
                  file_id=file.file_id, uri=uri, bytes=len(data))

    def _failure(self, file: PendingFile, exc: FetchError, stats: Stats) -> None:
        attempts = file.attempts + 1
        if exc.transient and attempts < self.settings.max_attempts:
            delay = min(self.settings.backoff_seconds * 2 ** (attempts - 1), self.settings.backoff_max_seconds)
            file_queue.retry(self.db, file, self.owner, due_at_us=int((self.clock.time() + delay) * 1_000_000),
                             error=str(exc)[:500])
            self._count(stats, "retried")
            log.info("slack_file_retry", file_id=file.file_id, attempts=attempts, delay_s=delay, error=str(exc))
            return
        error = f"after {attempts} attempt(s): {exc}"[:500]
        messages.record_file_failed(self.db, file.team_id, file.channel_id, file.ts, file.file_id, error)
        file_queue.done(self.db, file, self.owner)
        self._count(stats, "failed")
        log.warning("slack_file_failed", file_id=file.file_id, attempts=attempts, error=str(exc))
