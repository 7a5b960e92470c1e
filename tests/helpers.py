"""Plain constants shared by the test suite (fixtures live in conftest.py)."""

from __future__ import annotations

TEST_API_TOKENS = {
    "token-all": {"workspaces": ["*"], "private": True},
    "token-t1": {"workspaces": ["T1"], "private": False},
}
READ_TOKEN = "token-all"
ADMIN_TOKEN = "test-admin-token"
