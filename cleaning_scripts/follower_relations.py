#!/usr/bin/env python3
"""Edges file (`user follower` per line, e.g. SNAP twitter_combined.txt) -> accounts.csv + relations.csv.

Streams the edges (duplicates are removed through 32 spill files, so memory grows with accounts, not edges).
The authors of the posts CSV take the ids with the most followers; every other id gets a deterministic
generated username. Each distinct edge becomes a "follower" row and a "follows" row.

Exit codes: 0 done, 1 input unreadable or malformed beyond repair, 2 usage error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import click  # noqa: E402

from api.network.cleaning import clean_relations  # noqa: E402
from api.network.cli import CONTEXT, progress_bars  # noqa: E402


@click.command(context_settings=CONTEXT)
@click.option("--edges", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="space-separated `user follower` pairs (twitter_combined.txt)")
@click.option("--posts", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="the posts CSV, read only for its author names")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="directory for accounts.csv and relations.csv")
@click.option("--quiet", is_flag=True, help="no progress bar")
def main(edges: Path, posts: Path, out_dir: Path, quiet: bool) -> None:
    """Clean the follower edges into relation rows with usernames; prints a JSON report of what was dropped."""
    try:
        with progress_bars(not quiet) as bars:
            report = clean_relations(edges, posts, out_dir, progress=bars("edges", None))
    except (OSError, ValueError, UnicodeError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(json.dumps(report.as_dict(), indent=1))


if __name__ == "__main__":
    main()
