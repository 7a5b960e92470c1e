"""Real-browser testing: Debian's chromium driven by Playwright through `executable_path` (no browser download
is possible here), and the app served on loopback for it. The fixtures `served` and `browser` (tests/conftest.py)
use these."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright
from werkzeug.serving import make_server

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Chromium's own background traffic is refused on a closed network; these keep it quiet and the run offline.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


def serve(app: Any) -> Iterator[str]:
    """The app on a real HTTP server on loopback (werkzeug, in a thread); yields its base URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def chromium() -> Iterator[Any]:
    assert Path(CHROMIUM).exists(), "Debian's chromium is installed by bootstrap.sh"
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()
