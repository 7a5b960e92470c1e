"""The one polling loop of Chronicle's queue workers, and the signal handling of the commands that run them.

A worker is a `run_once()` that processes one unit (a batch of queued items) and returns what it did. The loop
calls it until `stop()` holds, sleeps `interval` on the injected clock when a pass found nothing to do, and
hands the worker's queue shards back (`finish`) however it ends. `StopOnSignal` turns SIGTERM/SIGINT into such
a `stop()`: the unit in progress is finished, then the loop ends.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar

from api.clock import SYSTEM, Clock

T = TypeVar("T")


@dataclasses.dataclass
class Counts:
    """What a worker's pass (or a whole run) did: int fields, and Counter fields for counts by kind. Subclasses
    declare the fields; `PASSIVE` names the ones that are not work (a pass that only skipped is idle)."""

    PASSIVE: ClassVar[tuple[str, ...]] = ()

    def add(self, other: Counts) -> None:
        for field in dataclasses.fields(self):
            mine = getattr(self, field.name)
            if isinstance(mine, Counter):
                mine.update(getattr(other, field.name))
            else:
                setattr(self, field.name, mine + getattr(other, field.name))

    def total(self) -> int:
        return sum(getattr(self, field.name) for field in dataclasses.fields(self)
                   if field.name not in self.PASSIVE and not isinstance(getattr(self, field.name), Counter))

    def as_dict(self) -> dict[str, Any]:
        return {field.name: dict(value) if isinstance(value := getattr(self, field.name), Counter) else value
                for field in dataclasses.fields(self)}

# An idle sleep is taken in steps this long at most, so a stop request (a signal) waits at most one step.
_SLEEP_STEP = 0.25


def _never() -> bool:
    return False


def run_worker(run_once: Callable[[], T], *, idle: Callable[[T], bool], clock: Clock = SYSTEM,
               interval: float = 1.0, stop: Callable[[], bool] = _never,
               on_pass: Callable[[T], None] | None = None, until_idle: bool = False, max_passes: int = 0,
               finish: Callable[[], None] | None = None) -> int:
    """Run `run_once` pass after pass until `stop()` holds; returns the number of passes run.

    After each pass its result goes to `on_pass`; a pass that found nothing (`idle(result)`) is followed by a
    sleep of `interval` seconds of `clock` (cut short when `stop()` starts to hold), or ends the loop when
    `until_idle` (process what is due now, then return). `max_passes` > 0 ends the loop after that many passes.
    `finish` runs however the loop ends, an exception included (the worker hands its shards back)."""
    passes = 0
    try:
        while not stop() and (max_passes <= 0 or passes < max_passes):
            result = run_once()
            passes += 1
            if on_pass is not None:
                on_pass(result)
            if idle(result):
                if until_idle:
                    break
                _sleep(clock, interval, stop)
    finally:
        if finish is not None:
            finish()
    return passes


def _sleep(clock: Clock, seconds: float, stop: Callable[[], bool]) -> None:
    """Sleep `seconds` of `clock`, in short steps that check `stop()`."""
    deadline = clock.monotonic() + seconds
    while not stop():
        left = deadline - clock.monotonic()
        if left <= 0:
            return
        clock.sleep(min(left, _SLEEP_STEP))


class StopOnSignal:
    """A `stop()` predicate set by SIGTERM or SIGINT: `say` reports the signal ("signal 15: finishing the current
    <unit>, then stopping") and the worker loop ends after the unit in progress. Also callable by hand (`set`)."""

    def __init__(self, unit: str, say: Callable[[str], None] | None = None) -> None:
        self.unit = unit
        self.say = say
        self._stopping = threading.Event()

    def __call__(self) -> bool:
        return self._stopping.is_set()

    def set(self) -> None:
        self._stopping.set()

    def handle(self, signum: int, _frame: object = None) -> None:
        # A second signal only repeats the message: the unit in progress is still finished and the shards handed
        # back (killing the process outright is SIGKILL's job; its leases then expire).
        self.set()
        if self.say is not None:
            self.say(f"signal {signum}: finishing the current {self.unit}, then stopping")

    @contextmanager
    def installed(self, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> Iterator[StopOnSignal]:
        """Handle `signals` for the duration of the block, then put the previous handlers back (a command run
        in-process, as tests run it, must not leave Ctrl-C ignored). Outside the main thread, where Python
        cannot install handlers, only `set` stops the loop."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {signum: signal.signal(signum, self.handle) for signum in signals}
        try:
            yield self
        finally:
            for signum, handler in previous.items():
                # None: a handler installed from outside Python, which cannot be put back; the default is closest.
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)
