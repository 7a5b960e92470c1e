"""Plain constants and helpers shared by the test suite (fixtures live in conftest.py)."""

from __future__ import annotations

from api.config import NodeSettings, state_dir
from api.node.config import NodeSpec

TEST_API_TOKENS = {
    "token-all": {"workspaces": ["*"], "private": True},
    "token-t1": {"workspaces": ["T1"], "private": False},
    "token-search-public": {"workspaces": ["TSEARCH1"], "private": False},  # tests/slack/test_search.py
    "token-public": {"workspaces": ["*"], "private": False},  # tests/slack/test_conditional.py
}
READ_TOKEN = "token-all"
ADMIN_TOKEN = "test-admin-token"

# What a browser adds to a form its own page submits (api/csrf.py checks both on every cookie-authenticated POST);
# the test client's default host is localhost.
SAME_ORIGIN = {"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"}


def csrf_token_of(client, path: str) -> str:
    """The CSRF token that the page at `path` puts in its forms (this also gives `client` its CSRF cookie)."""
    import re

    html = client.get(path).get_data(as_text=True)
    found = re.search(r'name="csrf_token" value="([^"]+)"', html) or re.search(
        r'<meta name="csrf-token" content="([^"]+)"', html)
    assert found, f"no CSRF token on {path}"
    return found.group(1)


def form_post(client, path: str, data: dict | None = None, *, page: str | None = None, **kwargs):
    """POST a form the way the page at `page` (default: `path`) sends it from a browser: its CSRF token, same origin."""
    token = csrf_token_of(client, page or path)
    headers = {**SAME_ORIGIN, **kwargs.pop("headers", {})}
    return client.post(path, data={**(data or {}), "csrf_token": token}, headers=headers, **kwargs)


# The suite's own nodes (the 3-node cluster, the spare node) live a few minutes: C1 alone compiles their hot code.
# C2's compilations cost more CPU than they win back in that time, on a machine the whole suite saturates (a
# fresh node's start and full migration: 30.8 s of CPU with C2, 17.9 s with C1 alone).
SHORT_LIVED_JVM = ("-XX:TieredStopAtLevel=1",)


def spare_spec() -> NodeSpec:
    """A single node of its own (127.0.0.10:9342) that the node manager's test stops and starts without
    disturbing the local node the other tests use."""
    return NodeSpec(
        name="spare", address="127.0.0.10", native_port=9342, storage_port=7400, jmx_port=7410,
        home=state_dir() / "test-spare" / "node1", cluster_name="chronicle-spare",
        seeds=("127.0.0.10",), initial_token=0, heap="512M", heap_new="128M", jvm_options=SHORT_LIVED_JVM,
        timer_slack_us=NodeSettings.from_env().timer_slack_us,
    )
