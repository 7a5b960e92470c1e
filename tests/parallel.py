"""The suite in two processes (pytest-xdist, `-n 2` in pyproject.toml): which worker runs what.

Tests go out a module at a time (a module's fixtures are built once). Three kinds of test share something of the
machine that only one process may drive, and they all go to the first worker, `gw0`, which alone starts their
background boots when collection ends (tests/conftest.py):

- the 3-node cluster's modules (one unit: a test stops a node the others need running);
- the spare node's module (the node on 127.0.0.10, stopped and started by its tests);
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


# Module -> the unit only the owner runs. A test using `rf3_cluster` or `spare_booted` elsewhere fails at once
# (tests/conftest.py, `_singletons_stay_with_their_owner`).
PINNED_MODULES = {
    "tests/test_cluster.py": CLUSTER,
    "tests/network/test_cluster_api.py": CLUSTER,
    "tests/slack/test_cluster_slack.py": CLUSTER,
    "tests/slack/test_cluster_reports.py": CLUSTER,
    "tests/test_node_and_readiness.py": SPARE,
    "tests/test_api_fuzz.py": FUZZ,
}
SINGLETON_FIXTURES = frozenset({"rf3_cluster", "spare_booted"})


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pinned_unit(nodeid: str) -> str | None:
    """The singleton a test shares, if any (by its module: the scheduler sees only ids)."""
    return PINNED_MODULES.get(module_of(nodeid))


def is_owner(config) -> bool:
    """This process starts the pinned tests' boots: the owner worker, or a run without workers."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput is None or workerinput["workerid"] == OWNER


class OwnerScheduling(LoadScopeScheduling):
    """Module units to whichever worker asks; the pinned units to the owner only (see the module's text)."""

    def _split_scope(self, nodeid: str) -> str:
        return pinned_unit(nodeid) or module_of(nodeid)

    def _eligible(self, node) -> str | None:
        """The next unit for `node`, or None when nothing in the queue is for it."""
        units = list(self.workqueue)
        pinned = set(PINNED)
        rest = [u for u in units if u not in pinned]
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
