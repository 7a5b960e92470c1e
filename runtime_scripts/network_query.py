#!/usr/bin/env python3
"""Answer Q1-Q6 of the follower network archive from the command line, as JSON.

  q1 posts of an account   q2 top-100 accounts     q3 top-100 followers of those
  q4 home page             q6 search (AND of up to 5 words)     (Q5 is insert_new_tweets.py)

Exit codes: 0 answered, 2 usage error, 3 Cassandra unreachable, 4 account or snapshot not found.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import click  # noqa: E402

from api.db import get_db  # noqa: E402
from api.network import accounts, posts, rankings, search, timelines  # noqa: E402
from api.network.cli import CONTEXT, EXIT_NOT_FOUND, EXIT_USAGE, cassandra_errors, emit, fail  # noqa: E402
from api.network.common import parse_iso  # noqa: E402
from api.network.settings import network_settings  # noqa: E402


@click.group(context_settings=CONTEXT)
@click.option("--network", required=True)
@click.pass_context
def main(ctx: click.Context, network: str) -> None:
    """Q1-Q6 for NETWORK."""
    ctx.obj = network


def _account(network: str, account_id: int) -> dict:
    account = accounts.get_account(get_db(), network, account_id)
    if account is None:
        fail(f"account {account_id} not found in network {network}", EXIT_NOT_FOUND)
    return account


@main.command()
@click.option("--account-id", type=int, required=True)
@click.option("--limit", type=click.IntRange(1), default=1_000_000, show_default=True)
@click.pass_obj
def q1(network: str, account_id: int, limit: int) -> None:
    """The posts of an account, newest first."""
    with cassandra_errors():
        _account(network, account_id)
        emit(posts.posts_of_author(get_db(), network, account_id, limit))


def _snapshot(network: str, kind: str, at: str | None, history: int | None) -> None:
    with cassandra_errors():
        when: datetime | None = parse_iso(at) if at else None
        found = rankings.snapshots(get_db(), network, kind, at=when, limit=history or 1)
        if not found:
            fail("no snapshot: run compute_rankings.py", EXIT_NOT_FOUND)
        emit(found if history else found[0])


@main.command()
@click.option("--at", help="ISO time: the snapshot in force then (default: latest)")
@click.option("--history", type=click.IntRange(1), help="the newest N snapshots instead of one")
@click.pass_obj
def q2(network: str, at: str | None, history: int | None) -> None:
    """The 100 accounts with the most followers (latest snapshot of compute_rankings.py)."""
    _snapshot(network, "accounts", at, history)


@main.command()
@click.option("--at", help="ISO time: the snapshot in force then (default: latest)")
@click.option("--history", type=click.IntRange(1), help="the newest N snapshots instead of one")
@click.pass_obj
def q3(network: str, at: str | None, history: int | None) -> None:
    """The 100 accounts following the most of the Q2 accounts."""
    _snapshot(network, "followers", at, history)


@main.command()
@click.option("--account-id", type=int, required=True)
@click.option("--order", type=click.Choice(["newest", "likes"]), default="newest", show_default=True)
@click.pass_obj
def q4(network: str, account_id: int, order: str) -> None:
    """The home page: counts and the 25 newest or most-liked posts of the followed accounts."""
    with cassandra_errors():
        emit(timelines.home(get_db(), network, _account(network, account_id), order))


@main.command()
@click.argument("words", nargs=-1, required=True)
@click.pass_obj
def q6(network: str, words: tuple[str, ...]) -> None:
    """The 25 most-liked posts containing all WORDS (case-insensitive)."""
    parsed = search.parse_query(" ".join(words))
    ns = network_settings()
    if not parsed or len(parsed) > ns.search_max_words:
        fail(f"give 1 to {ns.search_max_words} words", EXIT_USAGE)
    with cassandra_errors():
        emit({"words": parsed, "posts": search.search(get_db(), network, parsed, ns.page_size)})


if __name__ == "__main__":
    main()
