"""Slack Socket Mode: the same events as the Events endpoint, received over a WebSocket the app opens itself (no
public URL), through slack-sdk's built-in Socket Mode client (`slack_sdk.socket_mode.SocketModeClient`).

One ingest path: an `events_api` envelope's payload is the Events API body, so it goes through `payloads.parse` and
`events.handle`, exactly what the HTTP endpoint calls after the signature check (the WebSocket itself is what the
app-level token authenticates). The envelope is acknowledged once it is recorded (one row of `slack_event_inbox`,
LOCAL_QUORUM: event_inbox.py), and archived after the ack from memory, on threads of its own: an ack costs one
write, not the ~30 rows of an archived message, so the envelopes Slack sends in a burst (after a reconnect) are
acknowledged in milliseconds. An envelope that could not be recorded (Cassandra unavailable), or that was in
flight when the socket dropped, is not acknowledged, and Slack delivers it again (`retry_attempt` + 1); an archive
write that fails after the ack is tried again from memory, and what a receiver that stopped or died left
unarchived is replayed from the inbox by the next one that starts (`replay`, before it connects). Every archive
row is written at its event time, so a redelivery or a replay converges: an event is neither lost nor stored
twice. A payload `handle` refuses (BadEvent, a 400 on the HTTP path) is acknowledged and counted refused: a
redelivery would be refused again. Envelopes of other types (slash commands, interactivity) are acknowledged and
ignored.

Reconnection is slack-sdk's (docs/slack.md, "Socket Mode", lists what is relied on): on a `disconnect` message it
opens a new connection, then closes the old one; on a close frame it reconnects at once; a socket that died
otherwise is found by its ping monitor (every `ping_interval` seconds). Added here, in `check`
(the worker loop's pass) and `_on_raw`: a connection that is gone (reset) or at end of stream (a FIN without a
close frame: slack-sdk then reads empty bytes in a busy loop until 5 pings failed, ~30 s) is replaced at the next
pass instead; on a `disconnect` message the old socket's read timeout is cut to 20 ms, so slack-sdk's switch to
the new connection (which waits for the old socket's blocking read, up to 3 s) is not held up; and its session
runner looks for the new connection every 10 ms instead of 100 ms. Each delay would otherwise be an ack delay for
the envelopes Slack sends on the new connection meanwhile. The session runner itself is replaced (`_Readers`:
one reader thread per connection, started as soon as it is current, instead of slack-sdk's one runner that reads
a new connection only after the old read loop ended, and that reads the session and its state apart), acks go
out without Nagle's delay (TCP_NODELAY), and `close` is bounded (`_close_client`).

The app-level token is never logged: slack-sdk logs through a logger of this object's own, at INFO at most (its
DEBUG lines carry request bodies, where apps.connections.open puts the token), with tokens and WebSocket tickets
redacted from every line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog
from cassandra import DriverException
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from api.config import Settings
from api.db import Database
from api.slack import event_inbox, events, payloads
from api.slack.payloads import BadEvent
from api.worker_loop import Counts

log = structlog.get_logger("chronicle.slack")

_SECRETS = re.compile(r"xapp-[A-Za-z0-9-]+|xox[a-z]-[A-Za-z0-9-]+|(ticket=)[^&\s'\"]+")
# The old socket's read timeout once Slack asked to reconnect (slack-sdk's is 3 s, see the module docstring).
_LEAVING_READ_TIMEOUT = 0.02
# How often slack-sdk's session runner looks for a new connection to read once the old one ended (its own: 0.1 s,
# during which the new connection's envelopes wait unread).
_SESSION_POLL = 0.01
_CLOSE_TIMEOUT = 10.0  # seconds a close waits for slack-sdk's threads
_PROGRESS_EVERY = 1.0  # seconds between two progress rows (event_inbox: how far this receiver archived)
# Envelopes recorded and acknowledged but not yet archived, at most: beyond, new ones are not acknowledged (Slack
# delivers them again later), so a receiver that falls behind holds a bounded backlog in memory.
_MAX_PENDING = 5_000
_RETRY_MAX_SECONDS = 5.0  # an archive write that failed is tried again after 0.2, 0.4, ... at most this


class SocketModeError(Exception):
    """Slack refused to open a Socket Mode connection (bad or revoked app token, Socket Mode off)."""


@dataclasses.dataclass
class Stats(Counts):
    """What happened since the last pass: envelopes received, stored (acked), ignored (acked: unhandled type,
    channel not archived), refused (BadEvent, acked), failed (not recorded, so not acked: Slack redelivers), others
    (non-event envelopes, acked), redelivered (retry_attempt > 0), reconnects (connections opened after the
    first). `stored`, `ignored` and `refused` are counted once the envelope is archived, after its ack."""

    received: int = 0
    stored: int = 0
    ignored: int = 0
    refused: int = 0
    failed: int = 0
    others: int = 0
    redelivered: int = 0
    reconnects: int = 0
    retried: int = 0  # archive writes that failed after the ack and were tried again (from memory)
    replayed: int = 0  # envelopes of stopped or dead receivers stored again at start (event_inbox)


def ingest_payload(db: Database, settings: Settings, payload: Any) -> str:
    """Store an Events API payload (the body the Events endpoint would receive): the endpoint's own `handle` over
    the typed envelope. Returns the outcome ("stored", "ignored: <why>"); BadEvent for a payload that cannot be
    stored; a Cassandra failure propagates."""
    return events.handle(db, settings, payloads.parse(payload))


class _Redact(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = _SECRETS.sub(lambda m: f"{m.group(1) or ''}[redacted]", message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def sdk_logger() -> logging.Logger:
    """A logger for slack-sdk: its own object (not in logging's registry, so no filter accumulates on a shared
    one), at INFO at most (or the level `chronicle.slack` logs at, if higher), secrets redacted, records passed
    on to the `chronicle.slack` handlers."""
    parent = logging.getLogger("chronicle.slack")
    logger = logging.Logger("chronicle.slack.socket_mode.sdk", level=max(logging.INFO, parent.getEffectiveLevel()))
    logger.parent = parent
    logger.addFilter(_Redact())
    return logger


class SocketModeIngest:
    """A Socket Mode connection (slack-sdk's client and its threads) feeding `ingest_payload`: `start`, then
    `check` once per worker-loop pass, `close` at the end."""

    def __init__(self, db: Database, settings: Settings, *, app_token: str | None = None,
                 api_url: str | None = None) -> None:
        slack = settings.slack
        self.db = db
        self.settings = settings
        self._app_token = app_token or slack.app_token
        if not self._app_token:
            raise SocketModeError("no app-level token: set CHRONICLE_SLACK_APP_TOKEN (xapp-...)")
        self._api_url = api_url or slack.api_url
        self._logger = sdk_logger()
        self._lock = threading.Condition()
        self._stats = Stats()
        self._in_flight = 0  # envelopes between their arrival and their ack (slack-sdk's threads)
        self._closing = False
        self._connections = 0  # connections opened so far (_counting)
        self.client: SocketModeClient | None = None
        # event_inbox: this receiver's name, the envelopes recorded and acked but not yet archived (by their
        # receipt time), the last receipt time given out, when progress was last written.
        self.receiver = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._pending: dict[int, None] = {}
        self._last_received_us = 0
        self._progress_at = float("-inf")
        self._archiver = ThreadPoolExecutor(max_workers=slack.socket_concurrency,
                                            thread_name_prefix="socket-mode-archive")

    # -- lifecycle -------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Replay what stopped or dead receivers acknowledged but did not archive (`replay`), then open the first
        connection; SocketModeError when Slack refuses the app token. Slack unreachable is not fatal: `check`
        tries again at every pass."""
        self.replay()
        self._save_progress(force=True)
        web = WebClient(base_url=self._api_url, logger=self._logger)
        slack = self.settings.slack
        client = SocketModeClient(self._app_token, logger=self._logger, web_client=web,
                                  ping_interval=slack.socket_ping_interval, concurrency=slack.socket_concurrency,
                                  on_message_listeners=[self._on_raw], on_error_listeners=[self._on_socket_error])
        client.socket_mode_request_listeners.append(self._on_request)
        client.current_session_runner.target = _Readers(client, self._on_connection)
        client.connect = self._counting(client.connect)  # type: ignore[method-assign]
        client.current_session_runner.interval_seconds = _SESSION_POLL
        self.client = client
        try:
            with client.connect_operation_lock:  # as every reconnect is: _Readers reads a consistent pair
                client.connect()
        except SlackApiError as exc:
            client.close()
            self._save_progress(force=True, closed=True)  # it recorded nothing: nothing to replay after it
            raise SocketModeError(f"apps.connections.open: {exc.response.get('error', 'refused')}") from None
        except Exception as exc:  # noqa: BLE001 - unreachable for now (DNS, network): the passes retry
            log.warning("slack_socket_mode_connect_failed", error=_SECRETS.sub("[redacted]", repr(exc))[:300])

    def check(self) -> Stats:
        """One pass of the worker loop: replace a connection that is gone or at end of stream (module docstring),
        and return what happened since the last pass. A failed reconnect is logged and tried again next pass."""
        self._reconnect()
        self._save_progress()
        with self._lock:
            stats, self._stats = self._stats, Stats()
        return stats

    def _reconnect(self) -> None:
        """Replace the connection if it is gone or at end of stream; a failure is logged (the next pass retries)."""
        client = self.client
        if client is not None and not self._closing:
            try:
                session = client.current_session
                if session is None or not session.is_active():
                    client.connect_to_new_endpoint()  # no-op when slack-sdk's monitor got there first
                elif _at_end_of_stream(session):
                    log.info("slack_socket_mode_eof", session=session.session_id)
                    # Close that session, then reconnect unless another thread already did (not forced: two
                    # threads noticing one death open one connection).
                    session.close()
                    client.connect_to_new_endpoint()
            except Exception as exc:  # noqa: BLE001 - Slack or the network unreachable: the next pass retries
                log.warning("slack_socket_mode_reconnect_failed", error=_SECRETS.sub("[redacted]", repr(exc))[:300])

    def replay(self) -> int:
        """Store again every envelope in the unfinished ranges of receivers that stopped or died (event_inbox),
        then mark their rows finished; returns the envelopes replayed. A Cassandra failure propagates (the
        ranges stay unfinished for the next start)."""
        replayed = 0
        for receiver, first_us, last_us in event_inbox.unfinished_ranges(self.db, self._now_us()):
            for _received_us, envelope_id, payload in event_inbox.envelopes_between(self.db, first_us, last_us):
                try:
                    events.handle(self.db, self.settings, payloads.parse(json.loads(payload)))
                except (BadEvent, ValueError) as exc:
                    log.warning("slack_event_refused", transport="socket_mode_replay", envelope_id=envelope_id,
                                reason=str(exc)[:300])
                replayed += 1
            event_inbox.finish(self.db, receiver)
            log.info("slack_socket_mode_replayed", receiver=receiver, first_us=first_us, last_us=last_us)
        with self._lock:
            self._stats.replayed += replayed
        return replayed

    def is_connected(self) -> bool:
        return self.client is not None and self.client.is_connected()

    def close(self, drain_seconds: float = 10.0) -> None:
        """Stop taking envelopes (new ones stay unacknowledged: Slack sends them again, to another connection or
        after a restart), let those being stored finish and be acknowledged, then close the connection."""
        with self._lock:
            self._closing = True
            self._lock.wait_for(lambda: self._in_flight == 0 and not self._pending, timeout=drain_seconds)
        self._archiver.shutdown(wait=False, cancel_futures=True)
        try:
            # What is left pending (Cassandra down) is replayed by the next receiver that starts.
            self._save_progress(force=True, closed=True)
        except DriverException as exc:  # silent for DEAD_AFTER_S, the row is then replayed as a dead one's
            log.warning("slack_socket_mode_progress_failed", error=repr(exc)[:300])
        if self.client is not None:
            # slack-sdk's close waits for its reader, blocked in a read of up to 3 s: end the read side now (the
            # acks are all sent; beneath TLS, so the wrapper is not involved).
            sock = getattr(self.client.current_session, "sock", None)
            if sock is not None:
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RD)
            # Bounded: slack-sdk's close joins its threads (daemon threads: a process exits without them).
            closer = threading.Thread(target=_close_client, args=(self.client,), daemon=True,
                                      name="socket-mode-close")
            closer.start()
            closer.join(_CLOSE_TIMEOUT)
            if closer.is_alive():
                log.warning("slack_socket_mode_close_timeout", seconds=_CLOSE_TIMEOUT)

    # -- slack-sdk's callbacks (its threads) -----------------------------------------------------------------

    def _on_raw(self, message: str) -> None:
        # On slack-sdk's reader thread, before the message is queued: when Slack asks to reconnect, makes the old
        # socket's blocking read return soon, so the switch to the new connection is not held up (module
        # docstring).
        if "disconnect" not in message[:40]:
            return
        try:
            kind = json.loads(message).get("type")
        except (ValueError, AttributeError):
            return
        session = self.client.current_session if self.client is not None else None
        sock = getattr(session, "sock", None)
        if kind == "disconnect" and sock is not None:
            log.info("slack_socket_mode_disconnect", reason=json.loads(message).get("reason"))
            with contextlib.suppress(OSError):
                sock.settimeout(_LEAVING_READ_TIMEOUT)

    def _counting(self, connect: Callable[[], None]) -> Callable[[], None]:
        """slack-sdk's `connect`, counted: every connection opened after the first is a reconnect (counted where it
        is made: a hello can arrive with the handshake's bytes and never be seen as a message)."""

        def counted() -> None:
            connect()
            with self._lock:
                self._connections += 1
                if self._connections > 1:
                    self._stats.reconnects += 1

        return counted

    def _on_connection(self, session: Any) -> None:
        """A new connection is being read (`_Readers`): its acks go out without Nagle's delay (small frames
        written one after another each waited for the peer's delayed ACK of the previous one: +10 ms on every
        ack, measured)."""
        sock = getattr(session, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _on_socket_error(self, error: Exception) -> None:
        # On slack-sdk's reader thread, when a read failed (a reset): it closes the session, and would reconnect
        # at its next ping check (seconds). Reconnect now, on a thread of its own (the reader must return); a
        # no-op if another thread got there first. Envelopes Slack queues meanwhile wait for the new connection.
        if isinstance(error, OSError) and not self._closing:
            threading.Thread(target=self._reconnect, daemon=True, name="socket-mode-reconnect").start()

    def _on_request(self, client: SocketModeClient, request: SocketModeRequest) -> None:
        with self._lock:
            if self._closing:
                return  # not acknowledged: Slack delivers it again
            self._in_flight += 1
        try:
            self._handle(client, request)
        finally:
            with self._lock:
                self._in_flight -= 1
                self._lock.notify_all()

    def _handle(self, client: SocketModeClient, request: SocketModeRequest) -> None:
        """Record the envelope (event_inbox), acknowledge it, and hand it to the archive threads. Not recorded
        (Cassandra failed, or too much is waiting to be archived): not acknowledged, so Slack delivers it again."""
        count: dict[str, int] = {"received": 1, "redelivered": int(bool(request.retry_attempt))}
        received_us = None
        if request.type == "events_api":
            with self._lock:
                if len(self._pending) < _MAX_PENDING:
                    received_us = self._last_received_us = max(self._now_us(), self._last_received_us + 1)
                    self._pending[received_us] = None
            try:
                if received_us is None:
                    raise OverflowError(f"{_MAX_PENDING} envelopes wait to be archived")
                event_inbox.record(self.db, received_us, request.envelope_id, json.dumps(request.payload))
            except (DriverException, OverflowError) as exc:
                count["failed"] = 1
                log.warning("slack_event_store_failed", transport="socket_mode", envelope_id=request.envelope_id,
                            error=repr(exc)[:300])
                self._settle(received_us, count)
                return
        else:
            count["others"] = 1
        with self._lock:
            for name, n in count.items():
                setattr(self._stats, name, getattr(self._stats, name) + n)
        try:
            client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))
        except Exception as exc:  # noqa: BLE001 - the socket went away: the envelope is redelivered, converges
            log.info("slack_socket_mode_ack_lost", envelope_id=request.envelope_id, error=type(exc).__name__)
        if received_us is not None:
            # Closing (the archive threads are gone): it stays pending, and the next receiver replays it.
            with contextlib.suppress(RuntimeError):
                self._archiver.submit(self._archive, received_us, request)

    def _archive(self, received_us: int, request: SocketModeRequest) -> None:
        """Store an acknowledged envelope: the Events endpoint's own path (`ingest_payload`). A Cassandra failure
        is retried from memory while running; at close, what is left is replayed by the next receiver."""
        count: dict[str, int] = {}
        delay = 0.2
        while True:
            try:
                outcome = ingest_payload(self.db, self.settings, request.payload)
                count["stored" if outcome == "stored" else "ignored"] = 1
                if request.retry_attempt:
                    log.info("slack_event_retry", transport="socket_mode", envelope_id=request.envelope_id,
                             retry=request.retry_attempt, reason=request.retry_reason, outcome=outcome)
                break
            except BadEvent as exc:
                count["refused"] = 1
                log.warning("slack_event_refused", transport="socket_mode", envelope_id=request.envelope_id,
                            reason=str(exc)[:300])
                break
            except DriverException as exc:
                with self._lock:
                    self._stats.retried += 1
                log.warning("slack_event_archive_retry", transport="socket_mode", envelope_id=request.envelope_id,
                            delay_s=delay, error=repr(exc)[:300])
                if self._closing:
                    return  # left pending: replayed by the next receiver that starts
                time.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_SECONDS)
                if self._closing:
                    return
        self._settle(received_us, count)

    def _settle(self, received_us: int | None, count: dict[str, int]) -> None:
        with self._lock:
            if received_us is not None:
                self._pending.pop(received_us, None)
            for name, n in count.items():
                setattr(self._stats, name, getattr(self._stats, name) + n)
            self._lock.notify_all()

    # -- progress (event_inbox) ------------------------------------------------------------------------------

    def _now_us(self) -> int:
        return int(self.db.clock.time() * 1_000_000)

    def _save_progress(self, *, force: bool = False, closed: bool = False) -> None:
        """Write how far this receiver archived (at most every _PROGRESS_EVERY seconds unless `force`): every
        envelope it recorded before the oldest one still pending, or before the next one, is archived."""
        now = self.db.clock.monotonic()
        if not force and now - self._progress_at < _PROGRESS_EVERY:
            return
        self._progress_at = now
        with self._lock:
            pending = min(self._pending) if self._pending else None
            if pending is None:  # all archived: later envelopes get receipt times from `through` on
                self._last_received_us = max(self._last_received_us, self._now_us())
            through = pending if pending is not None else self._last_received_us + 1
        try:
            event_inbox.save_progress(self.db, self.receiver, through, self._now_us(), closed=closed,
                                      finished=closed and pending is None)
        except DriverException as exc:
            if force:
                raise
            log.warning("slack_socket_mode_progress_failed", error=repr(exc)[:300])


class _Readers:
    """slack-sdk's session runner (`SocketModeClient._run_current_session`), replaced: one reader thread per
    connection, started as soon as the connection is current.

    slack-sdk runs every connection's read loop on its one runner thread, so the new connection is read only once
    the old loop returned; an old loop whose socket closed without its state being ended sleeps 0.2 s a turn
    (`run_until_completion`), and every envelope Slack sent on the new connection meanwhile waited up to 200 ms
    for its ack (measured). Here the runner only looks (every _SESSION_POLL) for a current connection without a
    reader and starts one; an old loop ends on its own. The session and its state are read as one pair, under
    `connect_operation_lock` (slack-sdk's `connect` assigns them one after the other: a loop given the new session
    with the old state reads nothing after the next reconnect and makes `close` wait forever)."""

    def __init__(self, client: SocketModeClient, on_new: Callable[[Any], None]) -> None:
        self.client, self.on_new = client, on_new
        self._lock = threading.Lock()
        self._started: dict[int, tuple[Any, threading.Thread]] = {}

    def __call__(self) -> None:
        with self.client.connect_operation_lock:
            session, state = self.client.current_session, self.client.current_session_state
        if session is None or not session.is_active() or state.terminated:
            return
        with self._lock:
            self._started = {k: v for k, v in self._started.items() if v[1].is_alive()}
            if id(session) in self._started and self._started[id(session)][0] is session:
                return
            reader = threading.Thread(target=session.run_until_completion, args=(state,), daemon=True,
                                      name="socket-mode-reader")
            self._started[id(session)] = (session, reader)
        self.on_new(session)
        reader.start()


def _close_client(client: SocketModeClient) -> None:
    for _attempt in range(3):
        # slack-sdk's close checks the socket, then closes it under its locks: its reader may have closed it in
        # between (AttributeError on None), leaving the client's threads running. Closing again finds the socket
        # gone and stops them.
        try:
            client.close()
            return
        except (AttributeError, OSError) as exc:
            log.info("slack_socket_mode_close_retried", error=type(exc).__name__)


def _at_end_of_stream(session: Any) -> bool:
    """True when the peer closed the session's TCP stream (FIN) with nothing left to read: a peek at the raw
    socket (beneath TLS) under slack-sdk's read lock, without waiting."""
    sock = getattr(session, "sock", None)
    lock = getattr(session, "sock_receive_lock", None)
    if sock is None or lock is None or not lock.acquire(timeout=0.05):
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return socket.socket.recv(sock, 1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except (OSError, ValueError):
        return True  # reset, or already closed: replace it
    finally:
        lock.release()
