"""Fixtures of the network tests: a small generated network (files made once per run), loaded as a shared
read-only network and as networks of their own for tests that change data; network settings per test."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from api.network import cleaning, generator
from api.network.settings import network_settings, set_network_settings
from tests.network.helpers import CAP, Net, exact_settings, load_net


@pytest.fixture(scope="session")
def net_files():
    with tempfile.TemporaryDirectory(prefix="chronicle-net-") as tmp:
        d = Path(tmp)
        edges, posts = generator.generate(d / "raw", accounts=400, edges=4000, posts=800, seed=7)
        cleaning.clean_relations(edges, posts, d / "clean")
        cleaning.clean_posts(posts, d / "clean" / "accounts.csv", d / "clean", like_rate=0.004, seed=7)
        yield edges, posts, d / "clean"


@pytest.fixture(autouse=True)
def hybrid_off():
    """Every network test starts with hybrid off and the small cap, and leaves the settings as it found them."""
    previous = network_settings()
    set_network_settings(exact_settings(hybrid_threshold=0, cache_cap=CAP))
    yield
    set_network_settings(previous)


@pytest.fixture(scope="session")
def net(db, net_files) -> Net:
    """The network shared by tests that only read: nothing may change it."""
    return load_net(db, net_files, "testnet")


@pytest.fixture
def fresh_net(db, net_files) -> Net:
    """A network of this test's own (same files, its own name and reference), free to change."""
    return load_net(db, net_files)
