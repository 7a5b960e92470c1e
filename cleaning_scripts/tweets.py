#!/usr/bin/env python3
"""Posts CSV (author,content,country,date_time,id,language,latitude,longitude,number_of_likes,number_of_shares)
-> posts.csv + likes.csv.

Repairs ids (scientific-notation and repeated ids get stable hashed ids), converts `dd/mm/yyyy HH:MM` to
ISO 8601 UTC, spreads the posts over the 100 accounts with the most followers (the original author is kept
as provenance) and writes round(number_of_likes * --like-rate) likes per post from distinct accounts.
Drops exact duplicate rows and rows whose date cannot be read, and says so in its JSON report.

Exit codes: 0 done, 1 input unreadable or missing columns, 2 usage error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import click  # noqa: E402

from api.network.cleaning import clean_posts  # noqa: E402
from api.network.cli import CONTEXT, progress_bars  # noqa: E402


@click.command(context_settings=CONTEXT)
@click.option("--posts", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--accounts", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="accounts.csv written by follower_relations.py")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--like-rate", type=click.FloatRange(0, 1), default=0.001, show_default=True,
              help="likes generated per like counted in number_of_likes")
@click.option("--seed", type=int, default=4, show_default=True, help="seed of the likers drawn per post")
@click.option("--date-order", type=click.Choice(["dmy", "mdy"]), default="dmy", show_default=True,
              help="how to read `04/03/2017`")
@click.option("--top", type=int, default=100, show_default=True, help="spread posts over this many accounts")
@click.option("--quiet", is_flag=True, help="no progress bar")
def main(posts: Path, accounts: Path, out_dir: Path, like_rate: float, seed: int, date_order: str, top: int,
         quiet: bool) -> None:
    """Clean the posts and generate likes; prints a JSON report of what was dropped or repaired."""
    try:
        with progress_bars(not quiet) as bars:
            report = clean_posts(posts, accounts, out_dir, like_rate=like_rate, seed=seed, date_order=date_order,
                                 top=top, progress=bars("posts", None))
    except (OSError, ValueError, UnicodeError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(json.dumps(report.as_dict(), indent=1))


if __name__ == "__main__":
    main()
