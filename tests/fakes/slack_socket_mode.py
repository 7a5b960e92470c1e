"""A stand-in for Slack's Socket Mode WebSocket endpoint on 127.0.0.1: real WebSocket connections (wsproto over
plain sockets, one reader thread per connection, one dispatcher thread), speaking Slack's envelopes.

Use with the loopback fake Web API: with `web_api.socket_mode = fake`, `apps.connections.open` (app-level
token) answers `fake.ticket_url()`, a one-use `ws://127.0.0.1:<port>/link/?ticket=...` URL, so slack_sdk's
`SocketModeClient(app_token, web_client=WebClient(base_url=web_api.base_url))` connects here unchanged.

What it speaks (https://docs.slack.dev/apis/events-api/using-socket-mode/):
  - on connect: `{"type": "hello", "num_connections": n, "debug_info": {...}, "connection_info": {"app_id": ...}}`;
    a URL whose ticket is unknown or already used is refused (HTTP 401, no upgrade)
  - `send_event(payload)` queues an Events API payload; it goes out as `{"type": "events_api", "envelope_id",
    "payload", "accepts_response_payload": false, "retry_attempt", "retry_reason"}` on an open connection (round
    robin over the connections that said hello and were not told to go), in the order queued
  - an ack is any text frame `{"envelope_id": ...}`, on any connection (envelope ids are the app's, not a
    connection's); every ack is counted (`acks`), and the time from the frame's send to its ack recorded
    (`ack_latencies`, seconds)
  - redelivery, as Slack does: an envelope not acked within `ack_timeout` seconds, or unacked on a connection that
    closes, goes out again (`retry_attempt` + 1, `retry_reason` "timeout") on an open connection, at most
    `max_retries` times; then it is given up (`given_up`), as Slack gives up
  - `disconnect(reason)`: `{"type": "disconnect", "reason": reason, "debug_info": {...}}` on a connection
    ("refresh_requested", "warning", "link_disabled"); nothing new is sent on it after that, and it is closed
    (WebSocket close frame) after `disconnect_grace` seconds if the client has not closed it first
  - `drop(how)`: a connection ends without a WebSocket close: "eof" (TCP FIN) or "reset" (TCP RST)
  - WebSocket pings are answered (wsproto); the server sends none
Counters (under `lock`): deliveries (envelope id, retry_attempt, connection number), acks, ack_latencies,
connections (opened), hellos and forced (their times), refused (bad tickets), given_up.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import secrets
import socket
import struct
import threading
import time
from collections import Counter, deque
from typing import Any
from urllib.parse import parse_qs, urlsplit

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)

DISCONNECT_REASONS = ("refresh_requested", "warning", "link_disabled")


class _Conn:
    """One client connection: its socket, wsproto state (guarded by `lock`) and lifecycle flags."""

    def __init__(self, number: int, sock: socket.socket) -> None:
        self.number = number
        self.sock = sock
        self.ws = WSConnection(ConnectionType.SERVER)
        self.lock = threading.Lock()  # wsproto state and socket writes
        self.ready = False  # said hello: may carry envelopes
        self.leaving = False  # told to disconnect: nothing new goes out on it
        self.closed = False

    def send(self, event: Any) -> bool:
        with self.lock:
            if self.closed:
                return False
            try:
                self.sock.sendall(self.ws.send(event))
                return True
            except (OSError, Exception):  # noqa: BLE001 - a dead socket or a closed wsproto state: not sent
                return False


class _Envelope:
    def __init__(self, envelope_id: str, payload: dict[str, Any]) -> None:
        self.envelope_id = envelope_id
        self.payload = payload
        self.attempts = 0  # deliveries so far
        self.acked = False
        self.sent_at = 0.0
        self.conn: _Conn | None = None


class FakeSlackSocketMode:
    def __init__(self, *, app_id: str = "A0FAKEAPP", ack_timeout: float = 3.0, max_retries: int = 3,
                 disconnect_grace: float = 1.0) -> None:
        self.app_id = app_id
        self.ack_timeout = ack_timeout
        self.max_retries = max_retries
        self.disconnect_grace = disconnect_grace
        self.lock = threading.Condition()
        self.deliveries: list[tuple[str, int, int]] = []
        self.acks: Counter[str] = Counter()
        self.ack_latencies: list[float] = []
        self.acked_at: list[tuple[float, float]] = []  # (frame sent, ack received), time.monotonic()
        self.connections = 0
        self.hellos: list[float] = []  # time.monotonic() of each hello: when a connection could carry envelopes
        self.forced: list[tuple[float, str]] = []  # (time.monotonic(), "disconnect:<reason>" | "drop:<how>")
        self.refused = 0
        self.given_up: list[str] = []
        self._tickets: set[str] = set()
        self._envelopes: dict[str, _Envelope] = {}
        self._inflight: dict[str, _Envelope] = {}  # sent, not yet acked
        self._expired_at = 0.0
        self._queue: deque[str] = deque()
        self._conns: list[_Conn] = []
        self._ids = itertools.count(1)
        self._rr = 0
        self._stopping = False
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []

    # -- lifecycle -------------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._listener is not None, "use `with FakeSlackSocketMode() as fake:`"
        return self._listener.getsockname()[1]

    def __enter__(self) -> FakeSlackSocketMode:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        for target, name in ((self._accept_loop, "accept"), (self._dispatch_loop, "dispatch")):
            thread = threading.Thread(target=target, daemon=True, name=f"fake-socket-mode-{name}")
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self._stopping = True
            conns = list(self._conns)
            self.lock.notify_all()
        for conn in conns:
            self._abort(conn, "eof")
        for thread in self._threads:
            thread.join(5)
        assert self._listener is not None
        self._listener.close()

    def ticket_url(self) -> str:
        """A new one-use WebSocket URL, what apps.connections.open answers."""
        ticket = secrets.token_hex(8)
        with self.lock:
            self._tickets.add(ticket)
        return f"ws://127.0.0.1:{self.port}/link/?ticket={ticket}&app_id={self.app_id}"

    # -- what tests do ---------------------------------------------------------------------------------------

    def send_event(self, payload: dict[str, Any]) -> str:
        """Queue an Events API payload for delivery; returns its envelope id."""
        envelope_id = f"env-{next(self._ids):07d}-{secrets.token_hex(4)}"
        with self.lock:
            self._envelopes[envelope_id] = _Envelope(envelope_id, payload)
            self._queue.append(envelope_id)
            self.lock.notify_all()
        return envelope_id

    def open_connections(self) -> int:
        with self.lock:
            return sum(1 for c in self._conns if c.ready and not c.leaving and not c.closed)

    def wait_connected(self, n: int = 1, timeout: float = 10.0) -> None:
        """Until `n` connections said hello and were not told to go (AssertionError after `timeout`)."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while sum(1 for c in self._conns if c.ready and not c.leaving and not c.closed) < n:
                left = deadline - time.monotonic()
                assert left > 0, f"fewer than {n} Socket Mode connection(s) after {timeout} s"
                self.lock.wait(left)

    def wait_all_acked(self, timeout: float = 30.0) -> None:
        """Until every envelope sent is acked or given up (AssertionError naming how many are left)."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                given_up = set(self.given_up)
                left = [e for e in self._envelopes.values() if not e.acked and e.envelope_id not in given_up]
                if not left:
                    return
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"{len(left)} envelope(s) not acked after {timeout} s"
                self.lock.wait(min(remaining, 0.1))

    def unacked(self) -> list[str]:
        with self.lock:
            return [e.envelope_id for e in self._envelopes.values() if not e.acked]

    def disconnect(self, reason: str = "refresh_requested") -> int:
        """Send `disconnect` on the oldest open connection; returns its number (AssertionError if none)."""
        assert reason in DISCONNECT_REASONS, reason
        conn = self._oldest_open()
        with self.lock:
            conn.leaving = True
            self.forced.append((time.monotonic(), f"disconnect:{reason}"))
        conn.send(TextMessage(json.dumps({"type": "disconnect", "reason": reason,
                                          "debug_info": {"host": "fake-applink-1"}})))
        timer = threading.Timer(self.disconnect_grace, self._close_after_grace, args=(conn,))
        timer.daemon = True
        timer.start()
        return conn.number

    def drop(self, how: str = "eof") -> int:
        """End the oldest open connection without a WebSocket close ("eof": FIN, "reset": RST)."""
        assert how in ("eof", "reset"), how
        conn = self._oldest_open()
        with self.lock:
            self.forced.append((time.monotonic(), f"drop:{how}"))
        self._abort(conn, how)
        return conn.number

    # -- internals -------------------------------------------------------------------------------------------

    def _oldest_open(self) -> _Conn:
        with self.lock:
            for conn in self._conns:
                if conn.ready and not conn.leaving and not conn.closed:
                    return conn
        raise AssertionError("no open Socket Mode connection")

    def _close_after_grace(self, conn: _Conn) -> None:
        if not conn.closed:
            conn.send(CloseConnection(code=1001, reason="disconnect"))
            time.sleep(0.2)  # the client's close frame, then the socket goes
            self._abort(conn, "eof")

    def _abort(self, conn: _Conn, how: str) -> None:
        with conn.lock:
            if not conn.closed:
                conn.closed = True
                with contextlib.suppress(OSError):
                    if how == "reset":  # SO_LINGER 0: close sends RST
                        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        # Wake this connection's reader (blocked in recv) without sending anything: until it
                        # returns, close() cannot release the socket, and the RST would wait for the client's
                        # next frame (its ping, up to 5 s later): a delay of the stand-in, not of a reset.
                        conn.sock.shutdown(socket.SHUT_RD)
                    else:
                        conn.sock.shutdown(socket.SHUT_RDWR)
                conn.sock.close()
        self._lost(conn)

    def _lost(self, conn: _Conn) -> None:
        """A connection ended: its unacked envelopes go out again on another one (front of the queue)."""
        with self.lock:
            conn.closed = True
            if conn in self._conns:
                self._conns.remove(conn)
            again = [e for e in self._inflight.values() if e.conn is conn]
            for envelope in sorted(again, key=lambda e: e.envelope_id, reverse=True):
                self._requeue(envelope, front=True)
            self.lock.notify_all()

    def _requeue(self, envelope: _Envelope, *, front: bool) -> None:
        # Under self.lock.
        envelope.conn = None
        self._inflight.pop(envelope.envelope_id, None)
        if envelope.attempts > self.max_retries:
            if envelope.envelope_id not in self.given_up:
                self.given_up.append(envelope.envelope_id)
            return
        if envelope.envelope_id in self._queue:
            return
        if front:
            self._queue.appendleft(envelope.envelope_id)
        else:
            self._queue.append(envelope.envelope_id)

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping:
            try:
                sock, _addr = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.connections += 1
                conn = _Conn(self.connections, sock)
            threading.Thread(target=self._read_loop, args=(conn,), daemon=True,
                             name=f"fake-socket-mode-conn-{conn.number}").start()

    def _read_loop(self, conn: _Conn) -> None:
        try:
            while not conn.closed:
                try:
                    data = conn.sock.recv(65536)
                except OSError:
                    data = b""
                with conn.lock:
                    if conn.closed:
                        break
                    conn.ws.receive_data(data or None)
                    events = list(conn.ws.events())
                for event in events:
                    self._on_event(conn, event)
                if not data:
                    break
        finally:
            self._abort(conn, "eof")

    def _on_event(self, conn: _Conn, event: Any) -> None:
        if isinstance(event, Request):
            ticket = parse_qs(urlsplit(event.target).query).get("ticket", [""])[0]
            with self.lock:
                valid = ticket in self._tickets
                self._tickets.discard(ticket)
                if not valid:
                    self.refused += 1
            if not valid:
                conn.send(RejectConnection(status_code=401, has_body=False))
                self._abort(conn, "eof")
                return
            conn.send(AcceptConnection())
            with self.lock:
                self._conns.append(conn)
                count = len(self._conns)
            conn.send(TextMessage(json.dumps({
                "type": "hello", "num_connections": count,
                "debug_info": {"host": "fake-applink-1", "build_number": 1, "approximate_connection_time": 18060},
                "connection_info": {"app_id": self.app_id}})))
            with self.lock:
                conn.ready = True
                self.hellos.append(time.monotonic())
                self.lock.notify_all()
        elif isinstance(event, TextMessage):
            self._on_text(event.data)
        elif isinstance(event, Ping):
            conn.send(event.response())
        elif isinstance(event, CloseConnection):
            conn.send(event.response())
            self._abort(conn, "eof")
        elif isinstance(event, BytesMessage):
            pass  # Slack's clients send none

    def _on_text(self, text: str) -> None:
        try:
            message = json.loads(text)
        except ValueError:
            return
        envelope_id = message.get("envelope_id") if isinstance(message, dict) else None
        if not isinstance(envelope_id, str):
            return
        now = time.monotonic()
        with self.lock:
            self.acks[envelope_id] += 1
            envelope = self._envelopes.get(envelope_id)
            if envelope is not None and not envelope.acked:
                envelope.acked = True
                envelope.conn = None
                self._inflight.pop(envelope_id, None)
                self.ack_latencies.append(now - envelope.sent_at)
                self.acked_at.append((envelope.sent_at, now))
            self.lock.notify_all()

    def _dispatch_loop(self) -> None:
        while True:
            with self.lock:
                while not self._stopping:
                    self._expire(time.monotonic())
                    open_conns = [c for c in self._conns if c.ready and not c.leaving and not c.closed]
                    if self._queue and open_conns:
                        break
                    self.lock.wait(0.05)
                if self._stopping:
                    return
                envelope = self._envelopes[self._queue.popleft()]
                if envelope.acked:
                    continue
                self._rr += 1
                conn = open_conns[self._rr % len(open_conns)]
                retry = envelope.attempts
                envelope.attempts += 1
                envelope.conn = conn
                envelope.sent_at = time.monotonic()
                self._inflight[envelope.envelope_id] = envelope
                self.deliveries.append((envelope.envelope_id, retry, conn.number))
                frame = {"type": "events_api", "envelope_id": envelope.envelope_id, "payload": envelope.payload,
                         "accepts_response_payload": False, "retry_attempt": retry,
                         "retry_reason": "timeout" if retry else ""}
            if not conn.send(TextMessage(json.dumps(frame))):
                self._abort(conn, "eof")

    def _expire(self, now: float) -> None:
        # Under self.lock, at most every 50 ms: envelopes sent ack_timeout ago and still unacked go out again.
        if now - self._expired_at < 0.05:
            return
        self._expired_at = now
        for envelope in [e for e in self._inflight.values() if now - e.sent_at > self.ack_timeout]:
            self._requeue(envelope, front=False)
