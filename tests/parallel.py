"""The suite in two processes (pytest-xdist, `-n 2` in pyproject.toml): which worker runs what.

Tests go out a module at a time (a module's fixtures are built once). Three kinds of test share something of the
machine that only one process may drive, and they all go to the first worker, `gw0`, which alone starts their
background boots when collection ends (tests/conftest.py):

- the 3-node cluster's tests (those using `rf3_cluster`, whatever their module, one unit: a test stops a node
  the others need running);
- the spare node's tests (`spare_booted`: the node on 127.0.0.10, stopped and started by its tests);
- the API fuzz's module, last: its runs have finished by then, so it waits for nothing.

The cluster's and the spare node's units are handed out once a third of the units are out: by then their boots,
begun when collection ended, are done, and the other worker still has work while gw0 runs them.
"""

from __future__ import annotations

from xdist.scheduler.loadscope import LoadScopeScheduling

OWNER = "gw0"
CLUSTER, SPARE, FUZZ = "cluster", "spare-node", "fuzz"
PINNED = (CLUSTER, SPARE, FUZZ)
PINNED_FROM = 1 / 3  # share of the units handed out before the owner takes a pinned one
# Modules that took 15 s or more in recent runs: handed out first, so that the run does not end with one worker
# in a long module while the other is done (the order among them, and among the rest, stays pytest-randomly's).
HEAVY = frozenset({
    "tests/network/test_api.py", "tests/network/test_retention.py", "tests/network/test_erasure.py",
    "tests/network/test_scale_paths.py", "tests/network/test_jobs.py", "tests/network/test_post_retries.py",
    "tests/network/test_loading.py", "tests/test_scale_common.py", "tests/test_cli.py", "tests/test_slow_clients.py",
    "tests/tagging/test_tagging_load.py", "tests/activity/test_hot_days.py", "tests/slack/test_socket_mode.py",
    "tests/test_hostile_input.py", "tests/slack/test_search.py",
})


def pinned_unit(item) -> str | None:
    """The singleton a test shares, if any: by the fixtures it uses (the fuzz: by its module)."""
    fixtures = set(getattr(item, "fixturenames", ()))
    if "rf3_cluster" in fixtures:
        return CLUSTER
    if "spare_booted" in fixtures:
        return SPARE
    if item.nodeid.startswith("tests/test_api_fuzz.py::"):  # (`tests` is no package: by path, not module name)
        return FUZZ
    return None


def tag_pinned(items) -> None:
    """In a worker, a pinned test's id carries its unit (`id@unit`, as xdist's own loadgroup does), which is how
    the scheduler in the controller, that sees only ids, knows it."""
    for item in items:
        unit = pinned_unit(item)
        if unit is not None:
            item._nodeid = f"{item.nodeid}@{unit}"


def _unit_of_id(nodeid: str) -> str:
    head, _, unit = nodeid.rpartition("@")
    if head and unit in PINNED:
        return unit
    return nodeid.split("::", 1)[0]  # the module


def is_owner(config) -> bool:
    """This process starts the pinned tests' boots: the owner worker, or a run without workers."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput is None or workerinput["workerid"] == OWNER


class OwnerScheduling(LoadScopeScheduling):
    """Module units to whichever worker asks; the pinned units to the owner only (see the module's text)."""

    def _split_scope(self, nodeid: str) -> str:
        return _unit_of_id(nodeid)

    def _eligible(self, node) -> str | None:
        """The next unit for `node`, or None when nothing in the queue is for it."""
        units = list(self.workqueue)
        pinned = set(PINNED)
        rest = sorted((u for u in units if u not in pinned), key=lambda u: u not in HEAVY)
        owners = [n for n in self.assigned_work if n.gateway.id == OWNER]
        if owners and node is not owners[0]:
            return next(iter(rest), None)
        # The owner (or, with the owner gone, anyone): pinned units once due, the last one only when alone.
        handed_out = 1 - len(units) / max(1, self._units_total)
        due = [u for u in units if u in pinned and u != FUZZ] if handed_out >= PINNED_FROM else []
        later = sorted((u for u in units if u in pinned), key=lambda u: u == FUZZ)
        return next(iter(due + rest + later), None)

    def schedule(self) -> None:
        if self.collection is None:
            self._units_total = len({self._split_scope(n) for c in self.registered_collections.values()
                                     for n in c})
        super().schedule()

    def _assign_work_unit(self, node) -> None:
        scope = self._eligible(node)
        if scope is None:
            return
        work_unit = self.workqueue.pop(scope)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        collection = self.registered_collections[node]
        node.send_runtest_some([collection.index(nodeid) for nodeid, done in work_unit.items() if not done])

    def _reschedule(self, node) -> None:
        if node.shutting_down:
            return
        if self._eligible(node) is None:
            node.shutdown()  # after what it was sent: nothing left in the queue is for it
            return
        if self._pending_of(self.assigned_work[node]) > 2:
            return
        self._assign_work_unit(node)
