#!/usr/bin/env python3
"""Q2 + Q3 job: compute the top-100 accounts by followers and the top-100 accounts following the most of
them, and append one snapshot to both time series. Run it from cron, or with --every to loop.

Exit codes: 0 done, 2 usage error, 3 Cassandra unreachable.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import click  # noqa: E402

from api.db import get_db  # noqa: E402
from api.network import accounts, rankings  # noqa: E402
from api.network.cli import CONTEXT, cassandra_errors, emit  # noqa: E402


@click.command(context_settings=CONTEXT)
@click.option("--network", required=True)
@click.option("--every", type=click.IntRange(min=1), help="repeat every N seconds until interrupted")
@click.option("--dry-run", is_flag=True, help="compute and print, append nothing")
@click.option("--summary", is_flag=True, help="print only timings and the first 5 of each list")
def main(network: str, every: int | None, dry_run: bool, summary: bool) -> None:
    """Compute Q2/Q3 for NETWORK and append a snapshot; prints it as JSON."""
    with cassandra_errors():
        db = get_db()
        while True:
            if dry_run:
                started = time.perf_counter()
                top = accounts.top_accounts(db, network)
                result = {"dry_run": True, "accounts": top, "followers": rankings.top_followers(db, network, top),
                          "seconds": round(time.perf_counter() - started, 3)}
            else:
                result = rankings.compute(db, network)
            if summary:
                result = {**result, "accounts": result["accounts"][:5], "followers": result["followers"][:5]}
            emit(result)
            if not every:
                return
            time.sleep(every)


if __name__ == "__main__":
    main()
