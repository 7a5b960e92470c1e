"""Plain helpers of the network tests: the admin header, a loaded network with its reference, loading one."""

from __future__ import annotations

import dataclasses
import importlib.util
import secrets
from pathlib import Path

from cassandra import OperationTimedOut, WriteTimeout

from api.db import Database
from api.network import job_handlers, loader
from api.network.jobs import JobWorker, Stats
from api.network.settings import NetworkSettings
from tests.network.reference import Reference

ROOT = Path(__file__).resolve().parents[2]
ADMIN = {"Authorization": "Bearer test-admin-token"}
CAP = 40  # home-cache cap of the network tests: small, so caps and cutoffs are exercised


def exact_settings(**kw) -> NetworkSettings:
    """Network settings that rank Q4 by likes on every read: the reference tests compare each read with the
    brute-force answer right after each change (tests/network/test_likes_ranking.py covers reused rankings).
    A follower-layout move does not wait for other writers to settle: a test's requests run one after another."""
    return NetworkSettings(**{"likes_rank_max_age": 0, "follower_move_settle": 0.0, **kw})


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
    # 32 batches in flight, not the loader's 128: the node is shared with the other test process, and 128 queued
    # batches there once outlasted its 2 s write timeout. A load that still times out is run again, as an admin
    # would (loading the same files again is harmless: tests/network/test_loading.py).
    try:
        loader.load_network(db, name, clean, concurrency=32)
    except (WriteTimeout, OperationTimedOut):
        loader.load_network(db, name, clean, concurrency=8)
    return Net(name, edges, posts, clean, Reference(edges, clean))


def load_script(relative: str):
    """A script of the repository (e.g. runtime_scripts/load_network.py) imported as a module."""
    spec = importlib.util.spec_from_file_location(relative.replace("/", "_").removesuffix(".py"), ROOT / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_workers: dict[int, JobWorker] = {}


def run_jobs(db: Database) -> Stats:
    """What `chronicle network worker` does, until no job is due: the jobs queued by requests so far. One
    worker per database for the whole run (it remembers what it finished, as a running worker does)."""
    worker = _workers.setdefault(id(db), JobWorker(db, job_handlers.run_job))
    return worker.drain(stop=False)


def stop_jobs(db: Database) -> None:
    """Hand the run's test worker's queue shards back (before another worker, e.g. the CLI's, takes jobs)."""
    worker = _workers.pop(id(db), None)
    if worker is not None:
        worker.stop()
