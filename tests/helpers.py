"""Plain constants shared by the test suite (fixtures live in conftest.py)."""

from __future__ import annotations

TEST_API_TOKENS = {
    "token-all": {"workspaces": ["*"], "private": True},
    "token-t1": {"workspaces": ["T1"], "private": False},
    "token-search-public": {"workspaces": ["TSEARCH1"], "private": False},  # tests/slack/test_search.py
}
READ_TOKEN = "token-all"
ADMIN_TOKEN = "test-admin-token"
