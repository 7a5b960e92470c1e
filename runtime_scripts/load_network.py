#!/usr/bin/env python3
"""Load a cleaned network (accounts.csv, relations.csv, posts.csv, likes.csv) into the query tables.

Concurrent prepared writes, progress bars, optionally several processes per file (--workers). Every write is
an idempotent INSERT of values computed from the files, counts included: re-running, or resuming after a
crash by simply running again, writes the same rows and counts nothing twice.

Exit codes: 0 loaded, 1 a file is missing/malformed or a write failed, 2 usage error, 3 Cassandra unreachable.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import click  # noqa: E402

from api.config import Settings  # noqa: E402
from api.db import get_db  # noqa: E402
from api.network import loader  # noqa: E402
from api.network.cli import CONTEXT, EXIT_FAILED, cassandra_errors, emit, fail, progress_bars  # noqa: E402


@click.command(context_settings=CONTEXT)
@click.option("--network", required=True, help="network id; several networks coexist in one keyspace")
@click.option("--dir", "directory", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True,
              help="output directory of the cleaning scripts")
@click.option("--only", type=click.Choice(loader.KINDS), multiple=True, help="load only these files (repeatable)")
@click.option("--workers", type=click.IntRange(1, 16), default=1, show_default=True,
              help="processes per file (each with its own Cassandra session)")
@click.option("--concurrency", type=click.IntRange(1, 1024), default=128, show_default=True,
              help="writes in flight per process")
@click.option("--dry-run", is_flag=True, help="count the rows that would be loaded, write nothing")
@click.option("--quiet", is_flag=True, help="no progress bars")
def main(network: str, directory: Path, only: tuple[str, ...], workers: int, concurrency: int, dry_run: bool,
         quiet: bool) -> None:
    """Load the cleaned files of DIR as network NETWORK; prints rows written and rows/s per file as JSON."""
    kinds = only or loader.KINDS
    for kind in kinds:
        if not (directory / f"{kind}.csv").exists():
            fail(f"{directory / f'{kind}.csv'} is missing", EXIT_FAILED)
    if dry_run:
        emit({"network": network, "dry_run": True,
              "rows": {k: loader.count_rows(directory / f"{k}.csv") for k in kinds}})
        return
    report = {}
    with cassandra_errors(), progress_bars(not quiet) as bars:
        for kind in kinds:
            path = directory / f"{kind}.csv"
            advance = bars(kind, None)
            started = time.perf_counter()
            try:
                if workers > 1:
                    written = loader.load_parallel(Settings.from_env(), kind, network, path, workers=workers,
                                                   likes_path=directory / "likes.csv", progress=advance,
                                                   concurrency=concurrency)
                else:
                    written = loader.load(get_db(), kind, network, path, likes_path=directory / "likes.csv",
                                          progress=advance, concurrency=concurrency)
            except (ValueError, OSError) as exc:
                fail(f"{path}: {exc}", EXIT_FAILED)
            seconds = time.perf_counter() - started
            report[kind] = {"writes": written, "seconds": round(seconds, 2),
                            "writes_per_s": round(written / seconds) if seconds else None}
    emit({"network": network, "loaded": report})


if __name__ == "__main__":
    main()
