"""A stand-in for Slack's file host (files.slack.com) on 127.0.0.1: a real HTTP server in a thread.

Paths (the test builds url_private from them):
  /files/<id>          200 with the file's bytes when the bearer token is right, else the HTML login page
  /missing/<id>        404
  /flaky/<id>?fail=N   500 for the first N requests of that path, then 200
  /login/<id>          200 text/html login page (what Slack sends when the token lacks files:read)
  /slow/<id>?delay=S   waits S seconds before answering 200
Every request is counted per path in `hits`.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

LOGIN_PAGE = b"<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in to Slack</body></html>"


def content_for(file_id: str) -> bytes:
    return f"contents of {file_id}\n".encode() * 3


class FakeSlackFileHost:
    def __init__(self, token: str = "xoxb-test-token") -> None:
        self.token = token
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()
        host = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                parts = urlsplit(self.path)
                with host._lock:
                    host.hits[parts.path] += 1
                    count = host.hits[parts.path]
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                kind, _, file_id = parts.path.strip("/").partition("/")
                authorised = self.headers.get("Authorization") == f"Bearer {host.token}"
                if kind == "missing":
                    return self._send(404, b"not found", "text/plain")
                if kind == "flaky" and count <= int(query.get("fail", "1")):
                    return self._send(500, b"internal error", "text/plain")
                if kind == "login" or not authorised:
                    return self._send(200, LOGIN_PAGE, "text/html; charset=utf-8")
                if kind == "slow":
                    time.sleep(float(query.get("delay", "2")))
                return self._send(200, content_for(file_id), "application/octet-stream")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeSlackFileHost:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
