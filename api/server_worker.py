"""gunicorn's gthread worker, hardened against slow clients: a request's head and body arrive on the worker's
event loop, and only a complete request takes a thread.

Why: gunicorn's ThreadWorker hands a connection to a thread once its first byte arrives; the thread then blocks in
the HTTP parser until the head is complete, and again while the application reads the body. A client that sends
one byte a second holds a thread for minutes, and 24 of them (3 workers x 8 threads) stop the API. A timeout per
read does not help (every byte arrives in time), and a total deadline alone frees a thread only at the deadline:
50 slow clients would still hold every thread nearly all the time.

`ServerWorker` reads what arrives (non-blocking, on the main loop, no thread) into a buffer per connection:

- the head, until the blank line that ends it, within `head_timeout` (CHRONICLE_REQUEST_HEAD_TIMEOUT, 10 s) of
  the connection's accept, or of the first byte of a later request on a kept-alive connection;
- then the body: a Content-Length up to the API's body limit (CHRONICLE_MAX_BODY_BYTES, the limit that answers
  413), or a chunked body up to it, within `body_timeout` (CHRONICLE_REQUEST_BODY_TIMEOUT, 30 s) of the head's
  end. `Expect: 100-continue` is answered here, as a buffering proxy does, and not passed on.

A request that misses its deadline is answered 408 (JSON, as api/server_errors.py writes gunicorn's own errors)
and its connection closed; a connection that sent nothing is closed quietly. A slow client thus costs a file
descriptor and the bytes it sent, never a thread; a worker holds at most `worker_connections` of them and closes
its idle kept-alive connections first when it reaches that number.

What is not buffered (a head over 64 KiB, a body over the limit, a worker holding more than `buffer_bytes`,
CHRONICLE_REQUEST_BUFFER_BYTES, 64 MiB, in buffers) goes to a thread as gunicorn would send it, with the same
deadline on every socket read of that thread (`DeadlineUnreader`): 408 (or the application's 413) by the deadline
at the latest. After a response, a body the application left unread is discarded from the buffer only: the thread
never waits on the socket for it (the connection closes instead).

Closing: gunicorn lingers on a connection it closes (half-close, then reads until the peer closes, up to 2 s) on
the worker's main loop, so a client that keeps its socket open after a `Connection: close` answer stops the worker
for 2 s. Here the linger happens on the event loop too.

Plain HTTP/1.1 only: TLS and HTTP/2 belong to the reverse proxy in front (docs/deployment.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import errno
import re
import selectors
import socket
import string
import time
from concurrent.futures import Future
from functools import partial
from typing import Any

from gunicorn import util
from gunicorn.http.unreader import SocketUnreader
from gunicorn.workers.gthread import STOP_KEEPALIVE_LINGER, TConn, ThreadWorker
from werkzeug.exceptions import RequestTimeout

from api.config import Settings
from api.server_errors import write_json_error

# A head longer than this goes to a thread (read there under its deadline); gunicorn's limits still apply to it.
HEAD_BUFFER_CAP = 64 * 1024
RECV_BYTES = 64 * 1024
# As gunicorn.util.close_graceful: how long and how much a closing connection is read before it is closed.
LINGER_SECONDS = 2.0
LINGER_BYTES = 64 * 1024
# Deadlines are checked at most this often (the main loop wakes at least once a second anyway).
EXPIRY_TICK = 0.2
# A chunk-size line or a trailer section longer than this is malformed: the parser, in a thread, says why.
CHUNK_LINE_CAP = 1024
TRAILER_CAP = 64 * 1024

_HEX = frozenset(string.hexdigits.encode())
_EXPECT_CONTINUE = re.compile(rb"\r\nexpect:[ \t]*100-continue[ \t]*(?=\r\n)", re.IGNORECASE)


class RequestDeadlineExceeded(RequestTimeout):
    """A request thread's socket read found the request's deadline passed. A werkzeug 408, so that raised while the
    application reads the body it becomes the API's JSON 408 (api/errors.py); raised while gunicorn parses a head,
    `ServerWorker.handle_error` answers 408."""


class _NotBuffered(Exception):
    """A socket read while only buffered bytes may be read."""


class DeadlineUnreader(SocketUnreader):
    """gunicorn's socket reader with a total deadline on the request (not per read: a byte a second passes any
    per-read timeout), and a mode that refuses to touch the socket at all."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock)
        self.deadline: float | None = None
        self.expired = False
        self.buffered_only = False

    def chunk(self, size_hint: int | None = None) -> bytes:
        if self.buffered_only:
            raise _NotBuffered()
        if self.deadline is None:
            return super().chunk(size_hint)
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            self.expired = True
            raise RequestDeadlineExceeded("the request did not arrive in time")
        prior = self.sock.gettimeout()  # finish_body may have set one of its own: the shorter wins
        ours = prior is None or remaining <= prior
        self.sock.settimeout(remaining if ours else prior)
        try:
            return super().chunk(size_hint)
        except TimeoutError:
            if not ours:
                raise
            self.expired = True
            raise RequestDeadlineExceeded("the request did not arrive in time") from None
        finally:
            self.sock.settimeout(prior)


class Phase(enum.Enum):
    IDLE = "idle"  # kept alive, waiting for the next request
    HEAD = "head"
    BODY = "body"
    SERVING = "serving"  # in a thread
    CLOSING = "closing"  # half-closed, lingering


@dataclasses.dataclass(frozen=True)
class Framing:
    """What the event loop needs of a head to know where its request ends. gunicorn's parser still parses the
    request: a head this reads differently is only sent to a thread sooner or later, never served otherwise."""

    length: int | None = None
    chunked: bool = False
    unclear: bool = False  # several lengths, length and chunked, another coding: the parser answers 400/501
    expect_continue: bool = False


NO_BODY = Framing()
# A head naming none of these has no body (most requests: the event loop's only per-request parsing).
_FRAMING_FIELDS = (b"\ncontent-length", b"\ntransfer-encoding", b"\nexpect")


def head_end(data: bytearray, start: int) -> int:
    """Offset just past the blank line ending the head, or -1."""
    found = data.find(b"\r\n\r\n", start)
    return -1 if found < 0 else found + 4


def request_line(head: bytearray) -> bytes:
    start = 2 if head.startswith(b"\r\n") else 0  # one empty line may come first (RFC 9112 section 2.2)
    return bytes(head[start:head.find(b"\r\n", start)])


def read_framing(head: bytes) -> Framing:
    lowered = head.lower()
    if not any(field in lowered for field in _FRAMING_FIELDS):
        return NO_BODY
    lengths, codings, expect_continue = [], [], False
    for line in lowered.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if not colon:
            continue
        if name == b"content-length":
            lengths.append(value.strip(b" \t"))
        elif name == b"transfer-encoding":
            codings.append(value.strip(b" \t"))
        elif name == b"expect":
            expect_continue = value.strip(b" \t") == b"100-continue"
    if codings:
        chunked = codings == [b"chunked"] and not lengths
        return Framing(chunked=chunked, unclear=not chunked, expect_continue=expect_continue)
    if len(lengths) > 1 or (lengths and not lengths[0].isdigit()):
        return Framing(unclear=True)
    return Framing(length=int(lengths[0]) if lengths else None, expect_continue=expect_continue)


MORE = -1
MALFORMED = -2


def chunked_end(data: bytearray, pos: int) -> tuple[int, int]:
    """Walk a chunked body from `pos`, the start of a chunk-size line: (offset just past the message, MORE or
    MALFORMED; where the next walk resumes)."""
    while True:
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            return (MALFORMED if len(data) - pos > CHUNK_LINE_CAP else MORE), pos
        size = bytes(data[pos:eol]).split(b";", 1)[0].strip(b" \t")
        if not size or not _HEX.issuperset(size):
            return MALFORMED, pos
        if int(size, 16) == 0:
            end = data.find(b"\r\n\r\n", eol)  # the last chunk's line ends at eol; trailers, if any, follow
            if end < 0:
                return (MALFORMED if len(data) - eol > TRAILER_CAP else MORE), pos
            return end + 4, pos
        following = eol + 2 + int(size, 16) + 2
        if len(data) < following:
            return MORE, pos
        pos = following


class BufferedConn(TConn):
    """A gunicorn connection with the bytes gathered for its next request."""

    def __init__(self, cfg: Any, sock: socket.socket, client: Any, server: Any) -> None:
        super().__init__(cfg, sock, client, server)
        self.pending = bytearray()
        self.phase = Phase.HEAD
        self.deadline = 0.0
        self.scan_from = 0
        self.head_end = -1
        self.framing = NO_BODY
        self.chunk_pos = 0
        self.read_deadline: float | None = None  # the thread's, see DeadlineUnreader
        self.prefetched = b""  # what the event loop read, for the parser
        self.lingered = 0
        self.registered = False
        self.closed = False

    def reset(self, phase: Phase, deadline: float, pending: bytes = b"") -> None:
        self.pending = bytearray(pending)
        self.phase, self.deadline = phase, deadline
        self.scan_from, self.head_end, self.framing, self.chunk_pos = 0, -1, NO_BODY, 0


class ServerWorker(ThreadWorker):
    """gunicorn.workers.gthread.ThreadWorker whose threads only ever serve complete requests (module docstring).
    Use: `worker_class = "api.server_worker.ServerWorker"` (gunicorn.conf.py) or `-k api.server_worker.ServerWorker`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = Settings.from_env().requests
        self.gathering: dict[BufferedConn, None] = {}  # on the event loop (not serving); insertion order ~ age
        self.buffered_bytes = 0
        self.next_expiry = 0.0
        self.stop_deadline: float | None = None

    @classmethod
    def check_config(cls, cfg: Any, log: Any) -> None:
        super().check_config(cfg, log)
        if cfg.is_ssl or cfg.http2_cleartext in ("prior-knowledge", "both"):
            # The head is read before any TLS handshake or HTTP/2 preface would be: not this worker's job.
            log.error("%s serves plain HTTP/1.1; terminate TLS and HTTP/2 at the reverse proxy", cls.__name__)
            raise SystemExit(1)

    # -- the event loop ------------------------------------------------------------------------------------------
    def accept(self, listener: socket.socket) -> None:
        try:
            sock, client = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = BufferedConn(self.cfg, sock, client, listener.getsockname())  # non-blocking from here
        conn.reset(Phase.HEAD, time.monotonic() + self.limits.head_timeout)
        self._watch(conn)

    def _watch(self, conn: BufferedConn) -> None:
        self.gathering[conn] = None
        if not conn.registered:
            self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))
            conn.registered = True

    def _unwatch(self, conn: BufferedConn) -> None:
        self.gathering.pop(conn, None)
        self.buffered_bytes -= len(conn.pending)
        conn.pending = bytearray()
        if conn.registered:
            conn.registered = False
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.poller.unregister(conn.sock)

    def _on_readable(self, conn: BufferedConn, _fileobj: Any) -> None:
        try:
            data = conn.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not data:  # the peer closed: nothing to answer
            self._close(conn)
            return
        if conn.phase is Phase.CLOSING:
            conn.lingered += len(data)
            if conn.lingered >= LINGER_BYTES:
                self._close(conn)
            return
        if conn.phase is Phase.IDLE:
            conn.phase, conn.deadline = Phase.HEAD, time.monotonic() + self.limits.head_timeout
        conn.pending += data
        self.buffered_bytes += len(data)
        self._advance(conn)

    def _advance(self, conn: BufferedConn) -> None:
        """Hand the connection to a thread once its request is complete (or is not to be buffered)."""
        over_budget = self.buffered_bytes > self.limits.buffer_bytes
        if conn.phase is Phase.HEAD:
            end = head_end(conn.pending, conn.scan_from)
            if end < 0:
                first_line = conn.pending.find(b"\r\n")
                bare_lf = first_line >= 0 and conn.pending.count(b"\n") != conn.pending.count(b"\r\n")
                if bare_lf or over_budget or len(conn.pending) > HEAD_BUFFER_CAP:
                    # The parser refuses a bare LF at once; a long head is read on in the thread, by the deadline.
                    self._dispatch(conn, conn.deadline)
                else:
                    conn.scan_from = max(0, len(conn.pending) - 3)
                return
            self._head_done(conn, end)
            if conn.phase is not Phase.BODY:
                return
        body_deadline = conn.deadline
        if conn.framing.chunked:
            end, conn.chunk_pos = chunked_end(conn.pending, conn.chunk_pos)
            too_long = len(conn.pending) - conn.head_end > self.limits.max_body_bytes
            if end >= 0 or end == MALFORMED or too_long or over_budget:
                self._dispatch(conn, body_deadline)
        elif len(conn.pending) >= conn.head_end + (conn.framing.length or 0) or over_budget:
            self._dispatch(conn, body_deadline)

    def _head_done(self, conn: BufferedConn, end: int) -> None:
        framing = read_framing(bytes(conn.pending[:end]))
        body_deadline = time.monotonic() + self.limits.body_timeout
        has_body = framing.chunked or bool(framing.length)
        if framing.unclear or not has_body or (framing.length or 0) > self.limits.max_body_bytes:
            # No body to wait for, or one the application refuses (413) or the parser does (400/501) unread.
            self._dispatch(conn, body_deadline)
            return
        # The client waits for a 100 before it sends the body (not in HTTP/1.0: RFC 9110 section 10.1.1). Answered
        # here, the expectation is taken out of the head: gunicorn would send a second 100.
        if framing.expect_continue and len(conn.pending) == end and request_line(conn.pending).endswith(b" HTTP/1.1"):
            stripped = _EXPECT_CONTINUE.sub(b"", bytes(conn.pending[:end]), count=1)
            try:
                conn.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
            except OSError:
                self._close(conn)
                return
            self.buffered_bytes -= end - len(stripped)
            conn.pending[:end] = stripped
            end = len(stripped)
        conn.head_end, conn.framing, conn.chunk_pos = end, framing, end
        conn.phase, conn.deadline = Phase.BODY, body_deadline

    def _dispatch(self, conn: BufferedConn, read_deadline: float) -> None:
        prefetched = bytes(conn.pending)
        self._unwatch(conn)
        conn.prefetched, conn.read_deadline = prefetched, read_deadline
        conn.reset(Phase.SERVING, 0.0)
        self.enqueue_req(conn)

    def murder_pending(self) -> None:
        """Called by gunicorn's main loop after every wake-up (at least once a second): deadlines."""
        super().murder_pending()
        now = time.monotonic()
        if not self.alive and self.stop_deadline is None:
            self.stop_deadline = now + STOP_KEEPALIVE_LINGER
        # At the connection limit the worker stops accepting: close idle kept-alive connections first.
        excess = self.nr_conns - self.worker_connections + 1
        if excess > 0:
            for conn in [c for c in self.gathering if c.phase is Phase.IDLE][:excess]:
                self._close(conn)
        if now < self.next_expiry:
            return
        self.next_expiry = now + EXPIRY_TICK
        for conn in list(self.gathering):
            if self.stop_deadline is not None and not conn.pending and conn.phase in (Phase.IDLE, Phase.HEAD):
                conn.deadline = min(conn.deadline, self.stop_deadline)
            if conn.deadline > now:
                continue
            if conn.phase is Phase.CLOSING or not conn.pending:
                self._close(conn)
            else:
                self._refuse(conn)

    def _refuse(self, conn: BufferedConn) -> None:
        what = "head" if conn.phase is Phase.HEAD else "body"
        limit = self.limits.head_timeout if what == "head" else self.limits.body_timeout
        self.log.info("408: request %s from %s not received within %g s (%d bytes)", what, _peer(conn.client),
                      limit, len(conn.pending))
        with contextlib.suppress(OSError):
            write_json_error(conn.sock, 408, "Request Timeout", f"the request {what} did not arrive within {limit:g} s")
        self._linger(conn)

    def _linger(self, conn: BufferedConn) -> None:
        """Close after a half-close and a short read (RFC 9112 section 9.6), on the event loop."""
        self._unwatch(conn)
        try:
            conn.sock.setblocking(False)
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._close(conn)
            return
        conn.reset(Phase.CLOSING, time.monotonic() + LINGER_SECONDS)
        conn.lingered = 0
        self._watch(conn)

    def _close(self, conn: BufferedConn) -> None:
        if conn.closed:
            return
        conn.closed = True
        self._unwatch(conn)
        self.nr_conns -= 1
        util.close(conn.sock)

    def finish_request(self, conn: BufferedConn, fs: Future) -> None:
        """A thread is done with the connection (main loop): keep it alive on the event loop, or linger and close."""
        try:
            keep = not fs.cancelled() and fs.result() is True
        except Exception:  # noqa: BLE001 - handle() catches what a request raises; anything else: close
            keep = False
        try:
            if not keep:
                self._linger(conn)
                return
            conn.sock.setblocking(False)
            # A pipelined next request may sit in the parser's buffer already.
            leftover = conn.parser.unreader.take_buffered()
            now = time.monotonic()
            if leftover:
                conn.reset(Phase.HEAD, now + self.limits.head_timeout, leftover)
                self.buffered_bytes += len(leftover)
            else:
                idle_until = now + self.cfg.keepalive
                if self.stop_deadline is not None:
                    idle_until = min(idle_until, self.stop_deadline)
                conn.reset(Phase.IDLE, idle_until)
            self._watch(conn)
            if leftover:
                self._advance(conn)
        except Exception:  # noqa: BLE001 - the socket went away meanwhile
            self._close(conn)

    # -- in a thread ---------------------------------------------------------------------------------------------
    def handle(self, conn: BufferedConn) -> Any:
        if not conn.initialized:
            conn.init()  # plain HTTP (check_config): just the parser
            conn.parser.unreader = DeadlineUnreader(conn.sock)
        unreader: DeadlineUnreader = conn.parser.unreader
        unreader.deadline, unreader.expired = conn.read_deadline, False
        if conn.prefetched:
            unreader.unread(conn.prefetched)
            conn.prefetched = b""
        return super().handle(conn)

    def _keepalive_after(self, conn: BufferedConn, keepalive: bool) -> bool:
        unreader: DeadlineUnreader = conn.parser.unreader
        if not keepalive or unreader.expired:
            return False
        # A body the application left unread is skipped in what was buffered; waiting on the socket for the rest
        # would hold this thread, so the connection closes instead.
        unreader.buffered_only = True
        try:
            return bool(conn.parser.finish_body())
        except _NotBuffered:
            return False
        finally:
            unreader.buffered_only = False

    def handle_error(self, req: Any, client: socket.socket, addr: Any, exc: BaseException) -> None:
        if isinstance(exc, RequestDeadlineExceeded):
            self.log.info("408: request from %s not received by its deadline", _peer(addr))
            with contextlib.suppress(OSError):
                write_json_error(client, 408, "Request Timeout", "the request did not arrive in time")
            return
        super().handle_error(req, client, addr, exc)


def _peer(addr: Any) -> str:
    return str(addr[0]) if isinstance(addr, tuple) and addr else str(addr or "")
