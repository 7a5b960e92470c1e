"""The Slack suite's core scenarios on a real 3-node cluster (127.0.0.1-3:9142), RF 3, default consistency levels
(writes LOCAL_QUORUM, reads LOCAL_ONE; the queue and the worker's outcome check read LOCAL_QUORUM, LWTs
LOCAL_SERIAL): the order-shuffle replay and a two-worker file drain.

Slow (the cluster takes about a minute to start and 3 GB of memory): `pytest -m slow`, run by CI."""

from __future__ import annotations

import dataclasses
import random
import threading
import time

import pytest

from api.config import Settings
from api.db import Database, set_db
from api.node.process import start_cluster
from api.slack.files import FileWorker
from api.slack.settings import SlackSettings
from tests.fakes.slack_file_host import FakeSlackFileHost, content_for
from tests.helpers import ADMIN_TOKEN, TEST_API_TOKENS
from tests.slack import test_order
from tests.slack.test_files import TOKEN, drain, finished, message, share

pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def cluster_app(rf3_cluster, rf3_keyspace, db):
    """The app on the run's shared 3-node cluster and keyspace (tests/conftest.py; only these tests write Slack
    rows there); the process's database is given back to the session's `db` afterwards (create_app installs
    its own)."""
    import json

    from api.app import create_app

    specs = rf3_cluster
    start_cluster(specs)  # every node up: an earlier slow test may have stopped one
    settings = dataclasses.replace(
        Settings.from_env(), contact_points=[s.address for s in specs], cassandra_port=specs[0].native_port,
        keyspace=rf3_keyspace, replication="NetworkTopologyStrategy:datacenter1:3", request_timeout=20.0,
        cursor_secret=b"test-cursor-secret", slack_signing_secret="shared-test-secret",
        slack_signing_secrets={"T2": "t2-secret"}, api_tokens=json.dumps(TEST_API_TOKENS), admin_token=ADMIN_TOKEN)
    defaults = Settings.from_env()
    assert (settings.write_consistency, settings.read_consistency) == (defaults.write_consistency,
                                                                       defaults.read_consistency)
    admin = Database(settings, keyspace="")
    cluster_db = None
    try:
        deadline = time.monotonic() + 60
        while len([h for h in admin.cluster.metadata.all_hosts() if h.is_up]) < 3:
            assert time.monotonic() < deadline, "the driver does not see 3 nodes up"
            time.sleep(1)
        cluster_db = Database(settings)
        app = create_app(settings, database=cluster_db)
        app.config["TESTING"] = True
        yield app, cluster_db
    finally:
        set_db(db)
        if cluster_db is not None:
            cluster_db.close()
        admin.close()


def settle() -> None:
    # Reads are LOCAL_ONE (the default): the replica that answers may apply the last writes a few ms after the
    # two that acknowledged them. A moment's pause, as between two requests of a real client.
    time.sleep(1.0)


def test_order_shuffle_converges_on_the_cluster(cluster_app):
    app, _cluster_db = cluster_app
    client = app.test_client()
    test_order.ingest(client, "TORDER", test_order.scenario())
    settle()
    in_order = test_order.snapshot(client, "TORDER")
    test_order.test_in_order_state_matches_hand_written_expectations(in_order)
    events = test_order.scenario()
    for seed in range(4):
        rng = random.Random(seed)
        deliveries = events + [rng.choice(events) for _ in range(len(events) // 2)]
        rng.shuffle(deliveries)
        if seed % 2 == 0:
            deliveries.reverse()
        team = f"TSHUF{seed:02d}"
        test_order.ingest(client, team, deliveries)
        settle()
        assert test_order.snapshot(client, team) == in_order, f"seed {seed}"


def test_two_workers_drain_files_once_on_the_cluster(cluster_app, tmp_path):
    app, db = cluster_app
    client = app.test_client()
    base = SlackSettings.from_env()
    slack_settings = dataclasses.replace(base, bot_tokens={}, bot_token=TOKEN, files_root=str(tmp_path / "files"),
                                         s3_bucket="", max_attempts=4, backoff_seconds=0.1, backoff_max_seconds=0.5,
                                         download_timeout=5.0, concurrency=4)
    with FakeSlackFileHost(token=TOKEN) as host:
        slack_settings = dataclasses.replace(slack_settings, file_hosts=(host.file_host,))
        files = []
        for i in range(60):
            team, channel, ts, fid = f"TCL{i % 3}", f"CCLUSTER{i % 4}", f"1700006000.{i:06d}", f"FCL{i:03d}"
            path = f"/flaky/{fid}?fail=2" if i % 10 == 3 else f"/files/{fid}"
            share(client, team, channel, ts, [{"id": fid, "url_private": f"{host.base_url}{path}"}])
            files.append((team, channel, ts, fid, path.split("?")[0]))
        every = [finished(db, team, channel, ts, fid) for team, channel, ts, fid, _ in files]
        workers = [FileWorker(db, slack_settings, owner=f"cluster-w{i}") for i in range(2)]
        threads = [threading.Thread(target=drain, args=(w, lambda: all(c() for c in every), 90)) for w in workers]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        settle()
        for team, channel, ts, fid, path in files:
            assert host.served[path] == 1, (fid, host.hits[path])  # fetched with its bytes exactly once
            assert fid in message(client, team, channel, ts)["files_stored"], fid
            stored = tmp_path / "files" / "slack" / team / channel / ts / fid
            assert stored.read_bytes() == content_for(fid)
