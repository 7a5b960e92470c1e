"""Fixtures: a real local Cassandra node (started or reused) and a keyspace of its own per test run."""

from __future__ import annotations

import dataclasses
import os
import secrets

import pytest

from api.config import Settings
from api.db import Database, set_db
from api.migrations import migrate
from api.node.config import NodeSpec, cluster_specs, local_node_spec
from api.node.process import destroy, start_cluster, start_node, stop_node
from tests import parallel
from tests.background import BackgroundBoot
from tests.fuzz_boot import FUZZ
from tests.helpers import ADMIN_TOKEN, SHORT_LIVED_JVM, TEST_API_TOKENS, spare_spec

# Development mode, explicitly (README "Configuration"): the suite builds its own secrets (`settings` below), and
# the gunicorn instances some tests start inherit this; production refuses to start without real secrets.
os.environ["CHRONICLE_ENV"] = "development"


@pytest.fixture(scope="session")
def cassandra_node() -> NodeSpec:
    """The local node on 127.0.0.1 (CHRONICLE_CASSANDRA_PORT): reused when it runs, started otherwise."""
    spec = local_node_spec()
    start_node(spec)
    return spec


@pytest.fixture(scope="session")
def settings(cassandra_node: NodeSpec) -> Settings:
    import json

    base = Settings.from_env()
    keyspace = f"chronicle_test_{os.getpid()}_{secrets.token_hex(3)}"
    return dataclasses.replace(
        base,
        contact_points=[cassandra_node.address],
        cassandra_port=cassandra_node.native_port,
        keyspace=keyspace,
        replication="SimpleStrategy:1",
        request_timeout=10.0,
        erasure_settle_seconds=0.0,  # tests/network/test_erasure.py measures the wait on a clock of its own
        cursor_secret=b"test-cursor-secret",
        slack_signing_secret="shared-test-secret",
        slack_signing_secrets={"T2": "t2-secret"},
        api_tokens=json.dumps(TEST_API_TOKENS),
        admin_token=ADMIN_TOKEN,
    )


@pytest.fixture(scope="session")
def db(settings: Settings):
    """A Database on the run's own keyspace with every migration applied; the keyspace is dropped after."""
    admin = Database(settings, keyspace="")
    migrate(admin, settings.keyspace, settings.replication_map(), log=lambda _msg: None)
    database = Database(settings)
    set_db(database)
    yield database
    database.close()
    admin.execute_raw(f"DROP KEYSPACE IF EXISTS {settings.keyspace}", timeout=60)
    admin.close()


@pytest.fixture
def clock():
    """A clock the test moves by hand (tests/clocks.py)."""
    from tests.clocks import ManualClock

    return ManualClock()


@pytest.fixture
def mdb(settings: Settings, db: Database, clock):
    """A Database on the run's keyspace (`db` applied the migrations) whose clock the test moves."""
    database = Database(settings, clock=clock)
    yield database
    database.close()


@pytest.fixture(autouse=True)
def cold_caches():
    """Every test starts with the caches of a cold process: no test depends on what another one read."""
    from api.db import installed_db

    installed = installed_db()
    if installed is not None:
        installed.caches.clear()
    yield


@pytest.fixture(scope="session")
def app(settings: Settings, db: Database):
    from api.app import create_app

    application = create_app(settings, database=db)
    application.config["TESTING"] = True
    return application


@pytest.fixture
def client(app):
    return app.test_client()


class _ClusterBoot(BackgroundBoot):
    """The 3-node cluster on 127.0.0.1-3:9142 started, and the slow tests' shared RF 3 keyspace migrated, in a
    thread begun when collection ends (`pytest_collection_finish`): its ~80 s of start-up and schema (the schema
    alone 25-35 s on three nodes: api/migrations.py waits for agreement once per run) overlap the tests that run
    before the first slow one instead of adding to the run. Only runs that collected a slow test start it."""

    name = "the 3-node cluster's boot"

    def __init__(self) -> None:
        super().__init__()
        self.specs = [dataclasses.replace(spec, jvm_options=SHORT_LIVED_JVM) for spec in cluster_specs(3)]
        self.keyspace = f"chronicle_rf3_{os.getpid()}_{secrets.token_hex(3)}"
        self.messages: list[str] = []  # the node manager's progress lines (a thread has no test's output)

    def boot(self) -> None:
        start_cluster(self.specs, log=self.messages.append)
        settings = dataclasses.replace(
            Settings.from_env(), contact_points=[s.address for s in self.specs],
            cassandra_port=self.specs[0].native_port, keyspace=self.keyspace,
            replication="NetworkTopologyStrategy:datacenter1:3", request_timeout=60.0)
        admin = Database(settings, keyspace="")
        try:
            migrate(admin, settings.keyspace, settings.replication_map(), log=self.messages.append)
        finally:
            admin.close()

    def wait(self) -> list[NodeSpec]:
        self.join(":\n" + "\n".join(self.messages[-20:]))
        return self.specs

    def destroy(self) -> None:
        """Kill and delete the nodes. Their data goes right after, so no drain: SIGTERM-and-wait, node after
        node, cost ~20 s at the end of a run; killed at once, destroy() finds them stopped."""
        import contextlib
        import signal

        from api.node.process import read_pid

        if self.thread is None:
            return
        self.thread.join()
        for spec in self.specs:
            pid = read_pid(spec)
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        destroy(self.specs, log=lambda _m: None)
        self.thread = None


_CLUSTER = _ClusterBoot()


class _SpareBoot(BackgroundBoot):
    """The spare node's first start (`start_node`, the path under test) and a migrated keyspace on it, in a
    thread begun when collection ends, after the cluster's boot (not beside it: both are CPU-bound): its ~40 s
    overlap the tests that run before the node manager's test instead of adding to the run."""

    name = "the spare node's boot"

    def __init__(self) -> None:
        super().__init__()
        self.spec = spare_spec()
        self.keyspace = f"ready_{os.getpid()}"
        self.version: str | None = None

    def boot(self) -> None:
        self.version = start_node(self.spec, log=lambda _m: None)
        settings = dataclasses.replace(Settings.from_env(), contact_points=[self.spec.address],
                                       cassandra_port=self.spec.native_port, keyspace=self.keyspace,
                                       request_timeout=60.0)
        admin = Database(settings, keyspace="")
        try:
            migrate(admin, self.keyspace, settings.replication_map(), log=lambda _m: None)
        finally:
            admin.close()

    def stop(self) -> None:
        """The node stopped, if this run started it (its test stops it too: a run that ended before that test
        must not leave it running)."""
        if self.thread is not None:
            self.thread.join()
            stop_node(self.spec, log=lambda _m: None)
            self.thread = None

    def wait(self) -> tuple[NodeSpec, str, str]:
        """(the node, the version its start answered, the migrated keyspace)."""
        self.join()
        assert self.version is not None
        return self.spec, self.version, self.keyspace


_SPARE = _SpareBoot()


def _is_fuzz(item: pytest.Item) -> bool:
    return parallel.pinned_unit(item.nodeid) == parallel.FUZZ


def _needs_a_boot(item: pytest.Item) -> bool:
    """The test waits for the cluster's or the spare node's background boot."""
    return bool(parallel.SINGLETON_FIXTURES & set(getattr(item, "fixturenames", ())))


@pytest.fixture(autouse=True)
def _singletons_stay_with_their_owner(request):
    """A test of the cluster or the spare node outside tests/parallel.py's PINNED_MODULES could run in the other
    process, beside its owner's tests: it fails at once, saying so."""
    uses = parallel.SINGLETON_FIXTURES & set(request.fixturenames)
    if uses and parallel.pinned_unit(request.node.nodeid) is None:
        pytest.fail(f"{request.node.nodeid} uses {sorted(uses)}: add its module to tests/parallel.py's PINNED_MODULES")


BOOTED_FROM = 0.4  # share of the other tests that run before the first one that waits for a node's boot


@pytest.hookimpl(trylast=True)  # after pytest-randomly's order, which it keeps within each group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that wait for a background boot run after the first 40% of the others, by when the boots (~80 s
    for the cluster) are done, so none waits for them; the API fuzz's tests run last: its runs, begun in the
    background when collection ends (tests/fuzz_boot.py), have finished by then."""
    fuzz = [item for item in items if _is_fuzz(item)]
    booted = [item for item in items if not _is_fuzz(item) and _needs_a_boot(item)]
    rest = [item for item in items if not _is_fuzz(item) and not _needs_a_boot(item)]
    cut = int(len(rest) * BOOTED_FROM)
    items[:] = rest[:cut] + booted + rest[cut:] + fuzz


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Modules to whichever worker asks, the tests that share a singleton to gw0 (tests/parallel.py)."""
    return parallel.OwnerScheduling(config, log)


def pytest_sessionstart(session: pytest.Session) -> None:
    """With workers, the controller starts (or finds) the local node before they do, so they never race to."""
    if getattr(session.config.option, "numprocesses", None) and not hasattr(session.config, "workerinput"):
        start_node(local_node_spec())


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly or not parallel.is_owner(session.config):
        return  # nothing runs, or the owner worker runs the tests these boots serve (tests/parallel.py)
    fixtures = {name for item in session.items for name in getattr(item, "fixturenames", ())}
    if "rf3_cluster" in fixtures:
        _CLUSTER.begin()
    if "spare_booted" in fixtures:
        _SPARE.begin(after=[_CLUSTER.thread])
    if any(_is_fuzz(item) for item in session.items):
        FUZZ.begin(after=[_CLUSTER.thread])


def pytest_sessionfinish(session: pytest.Session) -> None:
    _CLUSTER.destroy()  # also when the run stopped before a slow test tore the cluster down
    _SPARE.stop()
    FUZZ.stop()


@pytest.fixture(scope="session")
def rf3_cluster() -> list[NodeSpec]:
    """The 3-node cluster (slow tests only), booted in the background since collection ended; destroyed at the
    end. A test that stops a node leaves it stopped; `cluster_up` restarts it."""
    specs = _CLUSTER.wait()
    yield specs
    _CLUSTER.destroy()


@pytest.fixture(scope="session")
def rf3_keyspace(rf3_cluster: list[NodeSpec]) -> str:
    """One keyspace on the cluster (RF 3) with every migration applied (`_ClusterBoot`), shared by the slow
    tests: they keep their data apart by names of their own (a network, a workspace, a table)."""
    start_cluster(rf3_cluster)
    return _CLUSTER.keyspace


@pytest.fixture(scope="session")
def spare_booted() -> tuple[NodeSpec, str, str]:
    """The spare node started and a keyspace migrated on it (`_SpareBoot`); the test stops it."""
    return _SPARE.wait()


@pytest.fixture
def cluster_up(rf3_cluster: list[NodeSpec]) -> list[NodeSpec]:
    """The cluster with every node running (an earlier test may have stopped one)."""
    start_cluster(rf3_cluster)
    return rf3_cluster


@pytest.fixture(scope="module")
def served(app):
    """The app on a real HTTP server on loopback, for browser tests (tests/browser.py)."""
    from tests.browser import serve

    yield from serve(app)


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, headless, driven by Playwright (tests/browser.py)."""
    from tests.browser import chromium

    yield from chromium()
