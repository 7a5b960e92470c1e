"""Benchmarks against the real node and the served API (README "Benchmarks").

They build their own tokens and run in development mode (CHRONICLE_ENV=development, README "Configuration"): the
apps and gunicorn instances they start would otherwise refuse to start without production secrets. One cursor
secret for the whole run, in the environment the served instances inherit: a cursor that the in-process app
signed (bench/hotpath.py records requests with their cursors) must verify on the served one, whereas each
development instance would otherwise pick a random secret of its own."""

import os
import secrets

os.environ.setdefault("CHRONICLE_ENV", "development")
os.environ.setdefault("CHRONICLE_CURSOR_SECRET", secrets.token_hex(32))
