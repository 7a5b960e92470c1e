"""Plain helpers of the network tests: the admin header, a loaded network with its reference, loading one."""

from __future__ import annotations

import dataclasses
import importlib.util
import secrets
from pathlib import Path

from api.db import Database
from api.network import loader
from tests.network.reference import Reference

ROOT = Path(__file__).resolve().parents[2]
ADMIN = {"Authorization": "Bearer test-admin-token"}
CAP = 40  # home-cache cap of the network tests: small, so caps and cutoffs are exercised


@dataclasses.dataclass
class Net:
    """A network loaded into the test keyspace, with the brute-force reference of the same files."""

    name: str
    raw_edges: Path
    raw_posts: Path
    clean: Path
    ref: Reference


def load_net(db: Database, files: tuple[Path, Path, Path], name: str | None = None) -> Net:
    """Load the cleaned files as a network (a fresh name by default) and build its reference."""
    edges, posts, clean = files
    name = name or f"net{secrets.token_hex(4)}"
    loader.load_network(db, name, clean)
    return Net(name, edges, posts, clean, Reference(edges, clean))


def load_script(relative: str):
    """A script of the repository (e.g. runtime_scripts/load_network.py) imported as a module."""
    spec = importlib.util.spec_from_file_location(relative.replace("/", "_").removesuffix(".py"), ROOT / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
