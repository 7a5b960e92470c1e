#!/usr/bin/env python3
"""Write look-alike raw files (twitter_combined.txt, tweets.csv) with the real files' shapes and quirks.

`--scale full` matches the real data sets (81,306 accounts, 1,768,149 edges, 52,542 posts);
`--scale small` is for tests. Same seed, same files. Exit codes: 0 done, 2 usage error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import click  # noqa: E402

from api.network.cli import CONTEXT  # noqa: E402
from api.network.generator import generate  # noqa: E402

SCALES = {"small": (400, 4_000, 800), "medium": (8_000, 150_000, 5_000), "full": (81_306, 1_768_149, 52_542)}


@click.command(context_settings=CONTEXT)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--scale", type=click.Choice(list(SCALES)), default="small", show_default=True)
@click.option("--accounts", type=int, help="override the scale's account count")
@click.option("--edges", type=int, help="override the scale's edge count")
@click.option("--posts", type=int, help="override the scale's post count")
@click.option("--seed", type=int, default=4, show_default=True)
def main(out_dir: Path, scale: str, accounts: int | None, edges: int | None, posts: int | None, seed: int) -> None:
    """Generate raw network files of the chosen scale."""
    a, e, p = SCALES[scale]
    edges_path, posts_path = generate(out_dir, accounts=accounts or a, edges=edges or e, posts=posts or p, seed=seed)
    click.echo(json.dumps({"edges": str(edges_path), "posts": str(posts_path)}))


if __name__ == "__main__":
    main()
