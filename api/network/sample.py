"""The built-in sample network: tiny generated raw files (fixed seed) cleaned and loaded through the same
functions as real imports. Idempotent: every write is an INSERT of the same values."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from api.db import Database
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
    """Load the sample network as network `sample`; returns rows written per file."""
    with tempfile.TemporaryDirectory(prefix="chronicle-network-sample-") as tmp:
        directory = Path(tmp)
        build_sample_files(directory)
        written = loader.load_network(db, SAMPLE_NETWORK, directory)
    return {"network": SAMPLE_NETWORK, "rows_written": written}
