"""Fixtures: a real local Cassandra node (started or reused) and a keyspace of its own per test run."""

from __future__ import annotations

import dataclasses
import os
import secrets
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api.config import Settings  # noqa: E402
from api.db import Database, set_db  # noqa: E402
from api.migrations import migrate  # noqa: E402
from api.node import manager  # noqa: E402

TEST_API_TOKENS = {
    "token-all": {"workspaces": ["*"], "private": True},
    "token-t1": {"workspaces": ["T1"], "private": False},
}


@pytest.fixture(scope="session")
def cassandra_node() -> manager.NodeSpec:
    """The local node on 127.0.0.1 (CHRONICLE_CASSANDRA_PORT): reused when it runs, started otherwise."""
    spec = manager.local_node_spec()
    manager.start_node(spec)
    return spec


@pytest.fixture(scope="session")
def settings(cassandra_node: manager.NodeSpec) -> Settings:
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
        cursor_secret=b"test-cursor-secret",
        slack_signing_secret="shared-test-secret",
        slack_signing_secrets={"T2": "t2-secret"},
        api_tokens=json.dumps(TEST_API_TOKENS),
        admin_token="test-admin-token",
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


@pytest.fixture(scope="session")
def app(settings: Settings, db: Database):
    from api.app import create_app

    application = create_app(settings, database=db)
    application.config["TESTING"] = True
    return application


@pytest.fixture
def client(app):
    return app.test_client()
