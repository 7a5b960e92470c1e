#!/usr/bin/env python3
"""Build one account's home-timeline cache from scratch: the newest posts (up to the cap, 800) of the
accounts it follows, except accounts above the hybrid threshold, which are merged at read time.

Exit codes: 0 built, 2 usage error, 3 Cassandra unreachable, 4 unknown account.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import click  # noqa: E402

from api.db import get_db  # noqa: E402
from api.network import accounts, timelines  # noqa: E402
from api.network.cli import CONTEXT, EXIT_NOT_FOUND, cassandra_errors, emit, fail  # noqa: E402


@click.command(context_settings=CONTEXT)
@click.option("--network", required=True)
@click.option("--account-id", type=int, required=True)
@click.option("--dry-run", is_flag=True, help="show what the cache would hold, write nothing")
def main(network: str, account_id: int, dry_run: bool) -> None:
    """(Re)build the home cache of ACCOUNT_ID; prints a JSON summary."""
    with cassandra_errors():
        db = get_db()
        if accounts.get_account(db, network, account_id) is None:
            fail(f"account {account_id} not found in network {network}", EXIT_NOT_FOUND)
        if dry_run:
            from api.network.settings import network_settings

            ns = network_settings()
            celebs = accounts.celebrities(db, ns, network)
            authors = [a for a in timelines.follows_of(db, network, account_id) if a not in celebs]
            posts, complete = timelines.newest_posts_of(db, network, authors, ns.cache_cap)
            emit({"dry_run": True, "entries": len(posts), "complete": complete, "followed_authors": len(authors)})
            return
        emit(timelines.init_cache(db, network, account_id))


if __name__ == "__main__":
    main()
