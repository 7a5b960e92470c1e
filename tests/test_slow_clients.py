"""Slow clients must not starve the API (issue 14): gunicorn with the project's worker (api/server_worker.py) on a
free loopback port, 1 worker x 4 threads, head and body deadlines of 2 s (CHRONICLE_REQUEST_HEAD_TIMEOUT /
CHRONICLE_REQUEST_BODY_TIMEOUT), serving /healthz (no database).

The first test runs the same crowd against gunicorn's own gthread worker and asserts that it does starve a normal
client there: the crowd is what the other tests say it is, and the tests would see a worker that regressed to
gthread's behaviour. One worker: with several, the kernel may hand most connections to one of them and leave
another free, and the control would starve a normal client only when it lands on the busy one.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.server_worker import MALFORMED, MORE, Framing, chunked_end, read_framing
from bench.scale_common import free_port
from tests.slack.helpers import SHARED_SECRET, sign

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PROJECT_WORKER = "api.server_worker.ServerWorker"
DEADLINE = 2.0  # seconds, head and body
# Deadlines are checked by the worker's main loop, which wakes at least once a second.
DEADLINE_SLACK = 1.6
SLOW_CONNECTIONS = 40  # 10 x the threads
NORMAL_BOUND = 1.0  # a normal /healthz answers in milliseconds; this leaves room for a busy 2-core machine
MAX_BODY_BYTES = 1024 * 1024  # CHRONICLE_MAX_BODY_BYTES' default
BUFFER_BYTES = 256 * 1024  # what the worker buffers before threads read the rest (CHRONICLE_REQUEST_BUFFER_BYTES)


@contextlib.contextmanager
def gunicorn(worker_class: str, tmp_path: Path) -> Iterator[int]:
    port = free_port()
    env = {**os.environ, "CHRONICLE_BIND": f"127.0.0.1:{port}", "CHRONICLE_WORKERS": "1", "CHRONICLE_THREADS": "4",
           "CHRONICLE_LOG_LEVEL": "WARNING", "CHRONICLE_ACCESS_LOG": "", "CHRONICLE_BACKGROUND_WORKERS": "0",
           "CHRONICLE_REQUEST_HEAD_TIMEOUT": str(DEADLINE), "CHRONICLE_REQUEST_BODY_TIMEOUT": str(DEADLINE),
           "CHRONICLE_SLACK_SIGNING_SECRET": SHARED_SECRET, "CHRONICLE_REQUEST_BUFFER_BYTES": str(BUFFER_BYTES),
           "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"), "PYTHONPATH": str(ROOT)}
    log = (tmp_path / "gunicorn.log").open("ab")
    server = subprocess.Popen([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "--no-control-socket",
                               "--worker-class", worker_class, "api.wsgi:app"], cwd=ROOT, env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError):
                if exchange(port, b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n", timeout=5)[0] == 200:
                    break
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "gunicorn.log").read_text()
            time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[int]:
    with gunicorn(PROJECT_WORKER, tmp_path_factory.mktemp("slow-clients")) as port:
        yield port


# ------------------------------------------------------------------------------------------------ plain HTTP

def read_response(sock: socket.socket, buffered: bytearray) -> tuple[int, dict[str, str], bytes]:
    """One response from `sock` (bytes already read but not used in `buffered`, which keeps what follows)."""
    while b"\r\n\r\n" not in buffered:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError(f"closed after {bytes(buffered)!r}")
        buffered += data
    head, _, rest = bytes(buffered).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    body = bytearray(rest)
    while len(body) < length:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed in the body")
        body += data
    buffered[:] = body[length:]
    return status, headers, bytes(body[:length])


def exchange(port: int, request: bytes, timeout: float) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        return read_response(sock, bytearray())


def closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


class Trickle:
    """Connections that each send a never-ending request head, one byte every `interval` s, from one thread; a
    connection the server closes is replaced (the pressure stays)."""

    def __init__(self, port: int, count: int, interval: float = 0.2) -> None:
        self.port, self.count, self.interval = port, count, interval
        self.socks: list[tuple[socket.socket, int]] = []  # and how many bytes of the head it sent
        self.stop = threading.Event()
        self.opened = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _open(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        sock.setblocking(False)
        self.opened += 1
        return sock

    def _run(self) -> None:
        head = b"GET /healthz HTTP/1.1\r\nHost: t\r\n" + b"".join(b"X-Slow-%d: %d\r\n" % (i, i) for i in range(10**4))
        while not self.stop.wait(self.interval):
            for i, (sock, sent) in enumerate(self.socks):
                try:
                    sock.send(head[sent:sent + 1])
                    self.socks[i] = (sock, sent + 1)
                except OSError:
                    sock.close()
                    self.socks[i] = (self._open(), 0)

    def __enter__(self) -> Trickle:
        self.socks = [(self._open(), 0) for _ in range(self.count)]
        self.thread.start()
        time.sleep(1.0)  # every connection has sent bytes: each holds a thread, if the worker gives it one
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        for sock, _sent in self.socks:
            sock.close()


def timed_healthz(port: int, timeout: float) -> float:
    """Seconds for GET /healthz on a new connection; AssertionError unless 200 in time."""
    start = time.monotonic()
    status, _, body = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", timeout)
    assert status == 200 and json.loads(body) == {"status": "alive"}
    return time.monotonic() - start


# ------------------------------------------------------------------------------------------------ tests

def test_gthread_is_starved_by_the_same_crowd(tmp_path):
    """The control: gunicorn's own worker gives each slow connection a thread, and 40 of them hold all 4."""
    with gunicorn("gthread", tmp_path) as port, Trickle(port, SLOW_CONNECTIONS), pytest.raises(TimeoutError):
        timed_healthz(port, timeout=3 * NORMAL_BOUND)


def test_normal_clients_are_served_while_slow_clients_trickle(served):
    with Trickle(served, SLOW_CONNECTIONS) as crowd:
        # Across two deadlines: slow connections are refused and replaced meanwhile.
        end = time.monotonic() + 2 * DEADLINE + 1
        times = []
        while time.monotonic() < end:
            times.append(timed_healthz(served, timeout=5))
            time.sleep(0.05)
        assert crowd.opened > SLOW_CONNECTIONS  # the server closed slow ones (408) and new ones came
    assert len(times) >= 20
    assert max(times) < NORMAL_BOUND, sorted(times)[-5:]


def test_a_slow_head_is_answered_408_at_its_deadline_and_closed(served):
    with socket.create_connection(("127.0.0.1", served), timeout=10) as sock:
        start = time.monotonic()
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        for byte in b"Host: t\r\n" + b"X-Slow: 1\r\n" * 10:  # a byte every 0.2 s: each read on its own is in time
            if select.select([sock], [], [], 0.2)[0]:
                break
            sock.send(bytes([byte]))
        status, headers, body = read_response(sock, bytearray())
        elapsed = time.monotonic() - start
        assert status == 408
        assert headers["content-type"] == "application/json"
        assert json.loads(body) == {"code": 408, "status": "Request Timeout",
                                    "message": f"the request head did not arrive within {DEADLINE:g} s"}
        assert DEADLINE <= elapsed < DEADLINE + DEADLINE_SLACK
        assert closed_by_server(sock, within=3)


def test_a_slow_body_is_answered_408_at_its_deadline(served):
    with socket.create_connection(("127.0.0.1", served), timeout=10) as sock:
        sock.sendall(b"POST /healthz HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
                     b"\r\n{")
        start = time.monotonic()
        status, _, body = read_response(sock, bytearray())
        elapsed = time.monotonic() - start
        assert (status, json.loads(body)["message"]) == (408, f"the request body did not arrive within {DEADLINE:g} s")
        assert DEADLINE - 0.1 <= elapsed < DEADLINE + DEADLINE_SLACK
        assert closed_by_server(sock, within=3)


def test_a_slow_chunked_body_is_answered_408(served):
    with socket.create_connection(("127.0.0.1", served), timeout=10) as sock:
        sock.sendall(b"POST /healthz HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab")
        start = time.monotonic()
        status, _, _ = read_response(sock, bytearray())
        assert status == 408
        assert DEADLINE - 0.1 <= time.monotonic() - start < DEADLINE + DEADLINE_SLACK


def test_a_head_too_long_to_buffer_is_read_by_a_thread_under_the_same_deadline(served):
    """Over 64 KiB the head goes to a thread, whose reads keep the head's deadline."""
    with socket.create_connection(("127.0.0.1", served), timeout=10) as sock:
        start = time.monotonic()
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n" + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 100)
                                                                      for i in range(700)))  # 75 KB, no end
        status, _, body = read_response(sock, bytearray())
        elapsed = time.monotonic() - start
        assert (status, json.loads(body)["message"]) == (408, "the request did not arrive in time")
        assert DEADLINE - 0.1 <= elapsed < DEADLINE + DEADLINE_SLACK
        assert closed_by_server(sock, within=3)


def test_a_body_over_the_buffer_budget_is_read_by_a_thread_under_the_same_deadline(served):
    """Past the worker's buffer budget the application reads the rest from the socket, by the body's deadline: the
    application's own JSON 408."""
    fields, _ = signed_verification("budget")
    with socket.create_connection(("127.0.0.1", served), timeout=10) as sock:
        sock.sendall(fields + b"Content-Length: %d\r\n\r\n" % (MAX_BODY_BYTES - 1) + b" " * (BUFFER_BYTES + 1000))
        start = time.monotonic()
        status, headers, body = read_response(sock, bytearray())
        elapsed = time.monotonic() - start
        assert (status, headers["content-type"]) == (408, "application/json")
        assert json.loads(body) == {"code": 408, "status": "Request Timeout",
                                    "message": "the request did not arrive in time"}
        assert DEADLINE - 0.3 <= elapsed < DEADLINE + DEADLINE_SLACK
        assert closed_by_server(sock, within=3)


def test_clients_that_keep_a_closed_connection_open_do_not_stall_the_worker(served):
    """gthread lingers up to 2 s on the main loop for each; 10 of them would stall a worker for 20 s."""
    holders = []
    try:
        for _ in range(10):
            sock = socket.create_connection(("127.0.0.1", served), timeout=5)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            assert read_response(sock, bytearray())[0] == 200
            holders.append(sock)  # answered and half-closed by the server; never closed here
        times = [timed_healthz(served, timeout=5) for _ in range(10)]
        assert max(times) < NORMAL_BOUND, times
    finally:
        for sock in holders:
            sock.close()


def test_keep_alive_serves_several_requests_on_one_connection(served):
    with socket.create_connection(("127.0.0.1", served), timeout=5) as sock:
        buffered = bytearray()
        for _ in range(5):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            status, headers, body = read_response(sock, buffered)
            assert (status, json.loads(body)) == (200, {"status": "alive"})
            assert headers.get("connection", "keep-alive").lower() == "keep-alive"
        # A request with a body the route does not read (405), then one more on the same connection.
        sock.sendall(b"POST /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello")
        assert read_response(sock, buffered)[0] == 405
        # Three pipelined requests, the last one's head split over two sends.
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n" * 2 + b"GET /healthz HTTP/1.1\r\nHo")
        time.sleep(0.3)
        sock.sendall(b"st: t\r\n\r\n")
        statuses = [read_response(sock, buffered)[0] for _ in range(3)]
        assert statuses == [200, 200, 200]
        assert not buffered
        assert not closed_by_server(sock, within=0.5)  # still open: kept alive


def test_expect_100_continue_is_answered_once(served):
    with socket.create_connection(("127.0.0.1", served), timeout=5) as sock:
        sock.sendall(b"POST /healthz HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
        buffered = bytearray()
        assert read_response(sock, buffered)[0] == 100
        sock.sendall(b"hello")
        status, _, body = read_response(sock, buffered)
        assert status == 405 and json.loads(body)["code"] == 405  # the final answer, not a second 100
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        assert read_response(sock, buffered)[0] == 200


def test_a_body_over_the_limit_is_refused_without_waiting_for_it(served):
    """413 from the application as soon as the head is in; the connection is closed, not drained."""
    with socket.create_connection(("127.0.0.1", served), timeout=5) as sock:
        start = time.monotonic()
        sock.sendall(b"POST /slack/events HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n{" % (MAX_BODY_BYTES + 1))
        status, _, body = read_response(sock, bytearray())
        assert (status, json.loads(body)["code"]) == (413, 413)
        assert time.monotonic() - start < NORMAL_BOUND
        assert closed_by_server(sock, within=3)


def signed_verification(challenge: str) -> tuple[bytes, bytes]:
    """A url_verification event (answered without the database) as head fields and body: the application answers
    200 with the challenge only if the body it read is byte for byte the one signed."""
    body = json.dumps({"type": "url_verification", "token": "t", "challenge": challenge}).encode()
    fields = b"".join(f"{name}: {value}\r\n".encode() for name, value in sign(body, SHARED_SECRET).items())
    return b"POST /slack/events HTTP/1.1\r\nHost: t\r\n" + fields, body


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_arriving_in_pieces_reaches_the_application_whole(served, chunked):
    fields, body = signed_verification("pieces-" + "x" * 3000)
    if chunked:
        pieces = [body[i:i + 1000] for i in range(0, len(body), 1000)]
        framed = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces)
        request = fields + b"Transfer-Encoding: chunked\r\n\r\n" + framed + b"0\r\n\r\n"
    else:
        request = fields + b"Content-Length: %d\r\n\r\n" % len(body) + body
    with socket.create_connection(("127.0.0.1", served), timeout=5) as sock:
        for start in range(0, len(request), 700):  # head and body cut anywhere, within the deadlines
            sock.sendall(request[start:start + 700])
            time.sleep(0.05)
        status, _, answer = read_response(sock, bytearray())
    assert (status, json.loads(answer)) == (200, {"challenge": "pieces-" + "x" * 3000})


# ------------------------------------------------------------------------------------------------ the parts

@pytest.mark.parametrize(("head", "framing"), [
    (b"GET / HTTP/1.1\r\nHost: t\r\n\r\n", Framing()),
    (b"POST / HTTP/1.1\r\ncontent-LENGTH:  12 \r\n\r\n", Framing(length=12)),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\nExpect: 100-Continue\r\n\r\n",
     Framing(chunked=True, expect_continue=True)),
    (b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", Framing(unclear=True)),
    (b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", Framing(unclear=True)),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", Framing(unclear=True)),
    (b"POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n", Framing(unclear=True)),
    (b"POST / HTTP/1.1\r\nX-Content-Length: 5\r\n\r\n", Framing()),
])
def test_read_framing(head, framing):
    assert read_framing(head) == framing


@pytest.mark.parametrize(("body", "end"), [
    (b"5\r\nhello\r\n0\r\n\r\nGET", 15),           # the next request starts after the last chunk
    (b"5;ext=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n", 29),  # an extension and a trailer
    (b"a\r\n0123456789\r\n0\r\n", MORE),             # the blank line after the last chunk is yet to come
    (b"5\r\nhel", MORE),
    (b"5", MORE),
    (b"zz\r\nhello\r\n", MALFORMED),
    (b"5" * 2000, MALFORMED),                           # a size line that never ends
])
def test_chunked_end(body, end):
    assert chunked_end(bytearray(body), 0)[0] == end
