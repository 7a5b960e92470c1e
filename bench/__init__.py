"""Benchmarks against the real node and the served API (README "Benchmarks").

They build their own tokens and run in development mode (CHRONICLE_ENV=development, README "Configuration"): the
apps and gunicorn instances they start would otherwise refuse to start without production secrets."""

import os

os.environ.setdefault("CHRONICLE_ENV", "development")
