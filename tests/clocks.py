"""A clock tests move by hand (api/clock.py's Clock): sleeping advances it, nothing waits."""

from __future__ import annotations

import threading


class ManualClock:
    def __init__(self, start: float = 1_790_000_000.0) -> None:
        self._wall = start
        self._mono = 1_000.0
        self._lock = threading.Lock()

    def time(self) -> float:
        with self._lock:
            return self._wall

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._wall += seconds
            self._mono += seconds

    def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))
