"""What the erasure guard (api/erasure/guard.py) adds to every message a route writes: the CPU of one `covers`
call, in this process, for an archive with no erasure request, and with one (another person; the erased person).

    .venv/bin/python -m bench.erasure_guard [--calls 200000]

In a scratch keyspace (every migration applied, dropped after; ~20 s). Prints one JSON object: microseconds of
process CPU per call for each case.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from api.erasure import guard, ledger
from bench.scale_common import scratch_keyspace


def _per_call(calls: int, fn: Callable[[], object]) -> float:
    fn()  # the archive's requests read, the id's hash made: what a process does once
    started = time.process_time()
    for _ in range(calls):
        fn()
    return round((time.process_time() - started) / calls * 1e6, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200_000)
    args = parser.parse_args(argv)
    archive = "slack:TGUARD1"
    late = 2**62  # a write dated after any request: covered only by a request of its person
    with scratch_keyspace("guard") as db:
        out = {"no_request": _per_call(args.calls, lambda: guard.covers(db, archive, "U0000001", 0))}
        ledger.start(db, archive, "UERASED1", "bench")
        out["one_request_another_person"] = _per_call(args.calls, lambda: guard.covers(db, archive, "U0000001", 0))
        out["one_request_that_person"] = _per_call(args.calls, lambda: guard.covers(db, archive, "UERASED1", late))
    print(json.dumps({"bench": "erasure_guard", "calls": args.calls, "us_cpu_per_call": out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
