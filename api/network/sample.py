"""The built-in sample network: tiny generated raw files (fixed seed) cleaned and loaded through the same
functions as real imports. Idempotent: every write is an INSERT of the same values."""

from __future__ import annotations

import csv
import tempfile
from datetime import date, datetime
from pathlib import Path
from typing import Any

from api.activity import calendar, service
from api.db import Database
from api.network import activity as network_activity
from api.network import cleaning, generator, loader

SAMPLE_NETWORK = "sample"
SAMPLE_SEED = 20261121


def build_sample_files(directory: Path) -> dict[str, Any]:
    """Generate, then clean, the sample network's files into `directory`."""
    edges, posts = generator.generate(directory / "raw", accounts=120, edges=900, posts=300, seed=SAMPLE_SEED)
    rel = cleaning.clean_relations(edges, posts, directory)
    tw = cleaning.clean_posts(posts, directory / "accounts.csv", directory, like_rate=0.01, seed=SAMPLE_SEED)
    return {"relations": rel.as_dict(), "posts": tw.as_dict()}


def load_sample(db: Database) -> dict[str, Any]:
    """Load the sample network as network `sample`, then build its activity days (a bulk load writes no dirty
    marks); returns rows written per file and the activity days written."""
    with tempfile.TemporaryDirectory(prefix="chronicle-network-sample-") as tmp:
        directory = Path(tmp)
        build_sample_files(directory)
        written = loader.load_network(db, SAMPLE_NETWORK, directory)
        with (directory / "posts.csv").open(newline="") as posts:
            post_times = [(row["author_id"], datetime.fromisoformat(row["posted_at"])) for row in csv.DictReader(posts)]
    zone = calendar.zone(network_activity.time_zone())
    wanted: dict[str, set[date]] = {}
    for author, posted in post_times:
        wanted.setdefault(author, set()).add(posted.astimezone(zone).date())
    days = service.rebuild_days(db, service.Archive.network(SAMPLE_NETWORK), wanted)
    return {"network": SAMPLE_NETWORK, "rows_written": written, "activity_days": days}
