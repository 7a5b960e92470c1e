#!/usr/bin/env python3
"""Q5: write new posts and fan each out to its author's followers' home caches (concurrent prepared writes;
authors above the hybrid threshold are merged at read time instead).

Either one post (--author-id and --content) or a CSV file with columns author_id,content[,posted_at].

Exit codes: 0 written, 1 bad input file, 2 usage error, 3 Cassandra unreachable, 4 unknown author.
"""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import click  # noqa: E402

from api.db import get_db  # noqa: E402
from api.network import accounts, posts  # noqa: E402
from api.network.cli import (  # noqa: E402
    CONTEXT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    cassandra_errors,
    emit,
    fail,
    progress_bars,
)
from api.network.common import parse_iso  # noqa: E402


@click.command(context_settings=CONTEXT)
@click.option("--network", required=True)
@click.option("--author-id", type=int, help="author of a single post")
@click.option("--content", help="text of a single post")
@click.option("--posted-at", help="ISO 8601 time of a single post (default: now)")
@click.option("--file", "file_", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="CSV with author_id,content[,posted_at]")
@click.option("--dry-run", is_flag=True, help="validate and count followers, write nothing")
@click.option("--quiet", is_flag=True, help="no progress bar")
def main(network: str, author_id: int | None, content: str | None, posted_at: str | None, file_: Path | None,
         dry_run: bool, quiet: bool) -> None:
    """Insert posts and fan them out; prints each post id with the caches it reached as JSON."""
    if file_ is None and (author_id is None or not content):
        raise click.UsageError("give --author-id and --content, or --file")
    items: list[tuple[int, str, str | None]] = []
    if file_ is not None:
        try:
            with file_.open(newline="", encoding="utf-8") as handle:
                for row in csv.DictReader(handle):
                    items.append((int(row["author_id"]), row["content"], row.get("posted_at") or None))
        except (KeyError, ValueError) as exc:
            fail(f"{file_}: needs columns author_id,content[,posted_at]: {exc}", EXIT_FAILED)
    else:
        items.append((author_id, content, posted_at))
    out = []
    with cassandra_errors(), progress_bars(not quiet and len(items) > 1) as bars:
        db = get_db()
        advance = bars("posts", len(items))
        for author_id_, text, when in items:
            author = accounts.get_account(db, network, author_id_)
            if author is None:
                fail(f"author {author_id_} not found in network {network}", EXIT_NOT_FOUND)
            if dry_run:
                out.append({"author_id": author_id_, "would_fan_out_to": author["follower_count"]})
                continue
            started = time.perf_counter()
            post, fanned = posts.create_post(db, network, author, text,
                                             posted_at=parse_iso(when) if when else None)
            seconds = time.perf_counter() - started
            out.append({"post_id": post["post_id"], "author_id": author_id_, "posted_at": post["posted_at"],
                        "fanned_out_to": fanned, "seconds": round(seconds, 3)})
            advance(1)
    emit({"network": network, "dry_run": dry_run, "posts": out})


if __name__ == "__main__":
    main()
