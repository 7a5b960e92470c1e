"""The node manager and the served API's readiness, on a spare node of their own (127.0.0.10:9342).

The spare node can be stopped and started without disturbing the local node the other tests use.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from api.config import Settings
from api.db import Database
from api.node import fetch as node_fetch
from api.node.common import NodeError
from api.node.fetch import CASSANDRA_VERSION, fetch, verify_jars
from api.node.process import node_status, port_open, read_pid, start_node, stop_node
from tests.helpers import spare_spec

ROOT = Path(__file__).resolve().parents[1]
CLI = [str(Path(sys.executable).with_name("chronicle")), "node"]
SCRIPT = [sys.executable, str(ROOT / "runtime_scripts" / "cassandra_node.py")]  # the old name, still served


@pytest.fixture(scope="module")
def spare(spare_booted):
    spec, _version, _keyspace = spare_booted
    yield spec
    stop_node(spec)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str, timeout: float = 5.0) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_start_status_reuse_stop_restart_keep_data_and_readiness_follows_the_node(spare, spare_booted, tmp_path):
    """One stop and start of the spare node serve both: the node manager (start, status, reuse, stop, a second
    stop, restart with the data kept) and the served API's readiness following the node without restarting
    (a node start costs seconds: the two checks used to stop and start it once each). Its first start, and the
    keyspace migrated on it, ran in the background since collection ended (tests/conftest.py `_SpareBoot`)."""
    _spec, version, keyspace = spare_booted
    assert version.startswith("5.0.")
    status = node_status(spare)
    assert status.state == "UP" and status.release_version == version
    pid = status.pid
    assert pid and Path(f"/proc/{pid}").exists()
    # Started with the configured timer slack (api/node/process.py timer_slack), which its threads inherit.
    assert spare.timer_slack_us == 250
    assert Path(f"/proc/{pid}/timerslack_ns").read_text().strip() == "250000"

    # A second start reuses the running node rather than starting another.
    messages: list[str] = []
    start_node(spare, log=messages.append)
    assert read_pid(spare) == pid
    assert any("already running" in m for m in messages)

    keep_settings = dataclasses.replace(Settings.from_env(), contact_points=[spare.address],
                                        cassandra_port=spare.native_port, request_timeout=30.0)
    db = Database(keep_settings, keyspace="")
    db.execute_raw("CREATE KEYSPACE IF NOT EXISTS keep WITH replication = "
                   "{'class': 'SimpleStrategy', 'replication_factor': 1}", timeout=60)
    db.execute_raw("CREATE TABLE IF NOT EXISTS keep.t (k int PRIMARY KEY, v text)", timeout=60)
    db.execute_raw("INSERT INTO keep.t (k, v) VALUES (1, 'survives restarts')")
    db.close()

    settings = dataclasses.replace(Settings.from_env(), contact_points=[spare.address],
                                   cassandra_port=spare.native_port, keyspace=keyspace, request_timeout=60.0)
    admin = Database(settings, keyspace="")
    assert "schema_migrations" in admin.cluster.metadata.keyspaces[keyspace].tables
    admin.close()

    port = _free_port()
    env = {**os.environ, "CHRONICLE_CASSANDRA_HOSTS": spare.address, "CHRONICLE_CASSANDRA_PORT": str(spare.native_port),
           "CHRONICLE_KEYSPACE": keyspace, "CHRONICLE_BIND": f"127.0.0.1:{port}", "CHRONICLE_WORKERS": "2",
           "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"), "HOME": str(tmp_path)}
    env.pop("XDG_RUNTIME_DIR", None)  # gunicorn's default control socket would then be $HOME/.gunicorn/gunicorn.ctl
    server_log = tmp_path / "server.log"
    with server_log.open("wb") as log_file:
        server = subprocess.Popen([str(Path(sys.executable).with_name("gunicorn")), "-c", "gunicorn.conf.py",
                                   "api.wsgi:app"], cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if _get(base + "/healthz")[0] == 200:
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        # Warm every worker's session.
        for _ in range(8):
            code, body = _get(base + "/readyz")
            assert code == 200, body
        assert body["cassandra_release"].startswith("5.0.")

        # Metrics from both workers are merged.
        for _ in range(10):
            _get(base + "/healthz")
        metrics = urllib.request.urlopen(base + "/metrics", timeout=5).read().decode()
        total = sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                    if line.startswith('chronicle_http_requests_total{endpoint="/healthz"'))
        assert total >= 11

        assert stop_node(spare) is True
        for _ in range(6):  # every worker answers, each within 2 s, with a reason
            started = time.monotonic()
            code, body = _get(base + "/readyz", timeout=5)
            elapsed = time.monotonic() - started
            assert code == 503, body
            assert elapsed < 2.0, f"/readyz took {elapsed:.2f} s with the node down"
            assert "Cassandra unreachable" in body["reason"]
        status = node_status(spare)
        assert status.state == "DOWN" and status.pid is None
        assert not port_open(spare.address, spare.native_port)
        assert stop_node(spare) is False  # stopping a stopped node is harmless

        start_node(spare)
        deadline = time.monotonic() + 30
        ready = 0
        while ready < 6 and time.monotonic() < deadline:  # several 200s in a row: all workers are back
            code, _ = _get(base + "/readyz", timeout=5)
            ready = ready + 1 if code == 200 else 0
            time.sleep(0.2)
        assert ready == 6, "the API did not become ready again after the node came back"
        assert server.poll() is None, "the API process must not have restarted"
        # A second instance on the host (a test, a benchmark) must not take over or delete a control socket.
        assert not (tmp_path / ".gunicorn").exists()

        # What was written before the stop is there after the restart.
        db = Database(keep_settings, keyspace="")
        try:
            assert db.execute_raw("SELECT v FROM keep.t WHERE k = 1").one().v == "survives restarts"
        finally:
            db.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
        if node_status(spare).cql_answers:
            admin = Database(settings, keyspace="")
            admin.execute_raw(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=60)
            admin.close()
    # Every line the server wrote is one JSON object with a time and a level: gunicorn's own, the app's
    # requests, and the driver's (it lost the node and reconnected).
    lines = server_log.read_text().splitlines()
    entries = [json.loads(line) for line in lines if line.strip()]
    assert all("timestamp" in e and "level" in e for e in entries), lines[:5]
    loggers = {e.get("logger") for e in entries}
    assert "gunicorn.error" in loggers and any(str(name).startswith("cassandra") for name in loggers), loggers
    assert any(e.get("event") == "request" and e.get("endpoint") == "/readyz" for e in entries)


def _run_cli(args: list[str], env: dict[str, str], cli: list[str] = CLI) -> subprocess.CompletedProcess:
    return subprocess.run([*cli, *args], env=env, capture_output=True, text=True, timeout=300)


def test_a_process_started_with_a_timer_slack_inherits_it_and_the_starter_keeps_its_own():
    import ctypes

    from api.node.process import timer_slack

    libc = ctypes.CDLL(None)
    own = libc.prctl(30, 0, 0, 0, 0)  # PR_GET_TIMERSLACK
    with timer_slack(300):
        inside = subprocess.run(["cat", "/proc/self/timerslack_ns"], capture_output=True, text=True).stdout
    outside = subprocess.run(["cat", "/proc/self/timerslack_ns"], capture_output=True, text=True).stdout
    with timer_slack(0):  # 0: left alone
        unchanged = subprocess.run(["cat", "/proc/self/timerslack_ns"], capture_output=True, text=True).stdout
    assert inside.strip() == "300000"
    assert outside.strip() == unchanged.strip() == str(own)
    assert libc.prctl(30, 0, 0, 0, 0) == own


def test_a_process_is_alive_until_its_last_thread_ends_not_its_first():
    """The JVM's main thread ends before its others as it shuts down: the process is a zombie leader with threads
    that still hold its ports, and a restart that took it for gone found the JMX port in use."""
    from api.node.process import _pid_alive

    child = subprocess.Popen([sys.executable, "-c", "import ctypes, threading, time; "
                              "threading.Thread(target=time.sleep, args=(1.5,)).start(); time.sleep(0.1); "
                              "ctypes.CDLL(None).pthread_exit(None)"])
    try:
        time.sleep(0.6)
        state = Path(f"/proc/{child.pid}/status").read_text()
        assert "State:\tZ" in state  # the main thread is gone, the other sleeps on
        assert _pid_alive(child.pid)
        deadline = time.monotonic() + 10
        while _pid_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _pid_alive(child.pid)  # every thread ended: our zombie child, not alive
        assert child.poll() is not None
    finally:
        child.kill()
        child.wait()


def test_missing_java_is_reported_with_a_fix(tmp_path):
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {**os.environ, "PATH": str(empty_bin), "CHRONICLE_STATE_DIR": str(tmp_path / "state"),
           "CHRONICLE_CASSANDRA_PORT": str(_free_port())}
    result = _run_cli(["start"], env)
    assert result.returncode == 3
    assert "'java' was not found on PATH" in result.stderr and "openjdk" in result.stderr


def test_missing_maven_is_reported_when_cassandra_must_be_fetched(tmp_path):
    only_java = tmp_path / "bin"
    only_java.mkdir()
    (only_java / "java").symlink_to(shutil.which("java"))
    env = {**os.environ, "PATH": str(only_java), "CHRONICLE_CACHE_DIR": str(tmp_path / "cache")}
    result = _run_cli(["fetch"], env, cli=SCRIPT)
    assert result.returncode == 3
    assert "'mvn' was not found on PATH" in result.stderr


def test_failed_download_is_reported(tmp_path):
    """Maven pointed at a mirror that refuses connections: the fetch fails with Maven's own words."""
    maven_settings = tmp_path / "settings.xml"
    maven_settings.write_text(
        f"<settings><localRepository>{tmp_path / 'repo'}</localRepository><mirrors><mirror><id>dead</id>"
        "<mirrorOf>*</mirrorOf><url>http://127.0.0.1:1/maven2</url></mirror></mirrors></settings>")
    env = {**os.environ, "CHRONICLE_MAVEN_SETTINGS": str(maven_settings),
           "CHRONICLE_CACHE_DIR": str(tmp_path / "cache")}
    result = _run_cli(["fetch"], env)
    assert result.returncode == 3
    assert "Maven could not download Cassandra" in result.stderr
    assert not (tmp_path / "cache" / f"cassandra-{CASSANDRA_VERSION}" / ".verified").exists()


def test_port_in_use_is_reported(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**os.environ, "CHRONICLE_STATE_DIR": str(tmp_path / "state")}
        result = _run_cli(["start", "--port", str(port)], env)
    assert result.returncode == 3
    assert f"native (CQL) port 127.0.0.1:{port} is in use" in result.stderr


def test_full_disk_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("CHRONICLE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(node_fetch.shutil, "disk_usage", lambda _p: shutil._ntuple_diskusage(10**9, 10**9 - 1024, 1024))
    with pytest.raises(NodeError, match="not enough disk space to fetch Cassandra"):
        fetch()


def test_tampered_jar_fails_verification(tmp_path):
    lib = fetch()
    copy = tmp_path / "lib"
    shutil.copytree(lib, copy)
    verify_jars(copy)  # the pristine copy passes
    victim = copy / "jbcrypt-0.4.jar"
    victim.write_bytes(victim.read_bytes() + b"tampered")
    with pytest.raises(NodeError, match="checksum mismatch for jbcrypt-0.4.jar"):
        verify_jars(copy)
    victim.unlink()
    with pytest.raises(NodeError, match="missing \\['jbcrypt-0.4.jar'\\]"):
        verify_jars(copy)


def test_a_node_that_cannot_start_prints_its_log_tail(tmp_path, monkeypatch):
    monkeypatch.setenv("CHRONICLE_STATE_DIR", str(tmp_path / "state"))
    bad = dataclasses.replace(spare_spec(), name="bad", address="127.0.0.11", home=tmp_path / "bad",
                              heap="128M", heap_new="512M")  # young generation larger than the heap
    with pytest.raises(NodeError) as info:
        start_node(bad, timeout=60)
    text = str(info.value)
    assert "exited during start-up" in text
    assert "stdout.log" in text and "last" in text
