"""JSON bodies for the errors gunicorn answers itself (request line or headers too long, a malformed request):
the API's every error is `{"code", "status", "message"}` JSON, including these.

gunicorn writes such responses with `gunicorn.util.write_error`, an HTML page; `install()` (called by each
worker, see gunicorn.conf.py) replaces that function in the worker process with one that writes JSON.
"""

from __future__ import annotations

import json
import socket
from http import HTTPStatus

from gunicorn import util

from api.pages import SECURITY_HEADERS


def write_json_error(sock: socket.socket, status_int: int, reason: str, mesg: str) -> None:
    try:
        phrase = HTTPStatus(status_int).phrase
    except ValueError:
        phrase = reason
    body = json.dumps({"code": status_int, "status": phrase, "message": mesg or reason}).encode()
    # The app's one header policy (api/pages.py) on gunicorn's own answers too.
    policy = "".join(f"{name}: {value}\r\n" for name, value in SECURITY_HEADERS.items())
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n{policy}"
            f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1")
    util.write_nonblock(sock, head + body)


def install() -> None:
    util.write_error = write_json_error
