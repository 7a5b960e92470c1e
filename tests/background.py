"""Work that the suite starts in a daemon thread when collection ends (tests/conftest.py): node starts, schema,
the API fuzz. It runs in other processes (Cassandra, gunicorn, schemathesis) while the test process, which bounds
the suite, goes on with the tests; the first test that needs it waits for it and gets its error, if any."""

from __future__ import annotations

import threading
from collections.abc import Iterable


class BackgroundBoot:
    name = "boot"  # the thread's name, and what a failure says did not start

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def begin(self, after: Iterable[threading.Thread | None] = ()) -> None:
        """Start `boot` in a thread (once), after the threads `after` ended."""
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, args=(list(after),), name=self.name, daemon=True)
            self.thread.start()

    def _run(self, after: list[threading.Thread | None]) -> None:
        try:
            for thread in after:
                if thread is not None:
                    thread.join()
            self.boot()
        except BaseException as exc:  # noqa: BLE001 - handed to the first test that waits
            self.error = exc

    def boot(self) -> None:
        raise NotImplementedError

    def join(self, detail: str = "") -> None:
        """Wait for the boot (begun now if it was not); its error, if any, as this test's."""
        self.begin()
        assert self.thread is not None
        self.thread.join()
        if self.error is not None:
            raise RuntimeError(f"{self.name} did not finish{detail}") from self.error
