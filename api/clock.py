"""The clock, injectable: code whose behaviour depends on time (leases, retries, TTL caches, ranking age,
throttles) reads it through a `Clock` it was given, so tests advance time instead of sleeping."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float:
        """Wall-clock seconds since the epoch (what is written to Cassandra and compared with stored times)."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (durations, cache ages)."""

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` (a test clock advances instead)."""


class SystemClock:
    """The machine's clocks."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM = SystemClock()
