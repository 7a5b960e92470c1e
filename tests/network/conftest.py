"""A small generated network, cleaned and loaded once per run, and its brute-force reference."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pytest

from api.network import cleaning, generator, loader
from api.network.settings import NetworkSettings, set_network_settings
from tests.network.reference import Reference

NETWORK = "testnet"
ADMIN = {"Authorization": "Bearer test-admin-token"}


@dataclasses.dataclass
class Net:
    name: str
    raw_edges: Path
    raw_posts: Path
    clean: Path
    ref: Reference


@pytest.fixture(scope="session")
def net_files():
    with tempfile.TemporaryDirectory(prefix="chronicle-net-") as tmp:
        d = Path(tmp)
        edges, posts = generator.generate(d / "raw", accounts=400, edges=4000, posts=800, seed=7)
        cleaning.clean_relations(edges, posts, d / "clean")
        cleaning.clean_posts(posts, d / "clean" / "accounts.csv", d / "clean", like_rate=0.004, seed=7)
        yield edges, posts, d / "clean"


@pytest.fixture(scope="session")
def net(db, net_files) -> Net:
    edges, posts, clean = net_files
    set_network_settings(NetworkSettings(hybrid_threshold=0, cache_cap=40))
    loader.load_network(db, NETWORK, clean)
    return Net(NETWORK, edges, posts, clean, Reference(edges, clean))


@pytest.fixture
def hybrid_off():
    set_network_settings(NetworkSettings(hybrid_threshold=0, cache_cap=40))
    yield
    set_network_settings(NetworkSettings(hybrid_threshold=0, cache_cap=40))
