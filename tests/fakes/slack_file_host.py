"""A stand-in for Slack's file host (files.slack.com) on 127.0.0.1: a real HTTP/1.1 server in a thread.

Paths (the test builds url_private from them):
  /files/<id>          200 with the file's bytes when the bearer token is right, else the HTML login page
  /missing/<id>        404
  /flaky/<id>?fail=N   500 for the first N requests of that path, then 200
  /login/<id>          200 text/html login page (what Slack sends when the token lacks files:read)
  /slow/<id>?delay=S   waits S seconds before answering 200
Every request is counted per path in `hits`, every 200 answer with a file's bytes in `served` (with the time of
the last one in `last_served`): a benchmark reads from them how often each file was fetched and stored.

Fast enough for the scale suite (thousands of requests a second): one asyncio event loop in a thread, keep-alive
connections, and only the request line and the Authorization header parsed (GET requests have no body).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from urllib.parse import parse_qs, urlsplit

LOGIN_PAGE = b"<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in to Slack</body></html>"
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}


def content_for(file_id: str) -> bytes:
    return f"contents of {file_id}\n".encode() * 3


class FakeSlackFileHost:
    def __init__(self, token: str = "xoxb-test-token") -> None:
        self.token = token
        self.hits: Counter[str] = Counter()
        self.served: Counter[str] = Counter()
        self.last_served = 0.0
        self._lock = threading.Lock()  # readers in other threads take it to see consistent counts
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._port = 0
        self.thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def file_host(self) -> str:
        """This host for the file worker's allow-list (SlackSettings.file_hosts, CHRONICLE_SLACK_FILE_HOSTS)."""
        return f"127.0.0.1:{self._port}"

    def __enter__(self) -> FakeSlackFileHost:
        self.thread.start()
        started = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._connection, "127.0.0.1", 0, backlog=512), self._loop)
        self._server = started.result(10)
        self._port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self.thread.join(10)
        self._loop.close()

    async def _answer(self, target: str, headers: dict[str, str]) -> tuple[int, bytes, str]:
        parts = urlsplit(target)
        with self._lock:
            self.hits[parts.path] += 1
            count = self.hits[parts.path]
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        kind, _, file_id = parts.path.strip("/").partition("/")
        authorised = headers.get("authorization") == f"Bearer {self.token}"
        if kind == "missing":
            return 404, b"not found", "text/plain"
        if kind == "flaky" and count <= int(query.get("fail", "1")):
            return 500, b"internal error", "text/plain"
        if kind == "login" or not authorised:
            return 200, LOGIN_PAGE, "text/html; charset=utf-8"
        if kind == "slow":
            await asyncio.sleep(float(query.get("delay", "2")))
        with self._lock:
            self.served[parts.path] += 1
            self.last_served = time.time()
        return 200, content_for(file_id), "application/octet-stream"

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                try:
                    _method, target, _version = line.decode("latin-1").split(" ", 2)
                except ValueError:
                    return
                headers: dict[str, str] = {}
                while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = header.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                code, body, ctype = await self._answer(target, headers)
                writer.write(f"HTTP/1.1 {code} {_REASONS[code]}\r\nContent-Type: {ctype}\r\n"
                             f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client gave up (timeout tests) or went away
        finally:
            writer.close()
