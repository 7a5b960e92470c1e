"""Process control of Cassandra nodes on loopback: start (or reuse), stop, status, clusters.

A node is a `java ... CassandraDaemon` process in a session of its own, its pid in `<home>/cassandra.pid`;
"up" means CQL answers on its native port.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from api.config import NodeSettings
from api.node.common import NodeError, PrerequisiteError, say
from api.node.config import NodeSpec, jvm_command, prepare_node_dirs
from api.node.fetch import START_MIN_FREE_BYTES, fetch, require_free_space, require_java


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (our own exited child) still answers kill(0); /proc tells it apart. A zombie whose other threads
    # still run is a process whose main thread ended first (the JVM does this as it shuts down): its sockets, the
    # ports a restart needs, are open until the last thread ends.
    try:
        status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ":" in line)
    except OSError:
        return True
    return not status.get("State", "").strip().startswith("Z") or int(status.get("Threads", "1")) > 1


def read_pid(spec: NodeSpec) -> int | None:
    try:
        pid = int(spec.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _pid_alive(pid) else None


def port_open(address: str, port: int, timeout: float = 0.5) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((address, port), timeout=timeout):
        return True
    return False


def _port_free(address: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def log_tail(spec: NodeSpec, lines: int = 40) -> str:
    chunks = []
    for path in (spec.home / "logs" / "stdout.log", spec.log_file):
        if path.exists():
            text = path.read_text(errors="replace").splitlines()[-lines:]
            chunks.append(f"--- {path} (last {len(text)} lines)\n" + "\n".join(text))
    return "\n".join(chunks) or f"(no log written under {spec.home / 'logs'})"


def release_version(address: str, port: int, timeout: float = 5.0) -> str:
    """Ask the node over CQL which release it runs (this also proves CQL answers)."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([address]), request_timeout=timeout)
    cluster = Cluster([address], port=port, connect_timeout=timeout, protocol_version=5,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile}, control_connection_timeout=timeout)
    try:
        session = cluster.connect()
        return session.execute("SELECT release_version FROM system.local").one().release_version
    finally:
        cluster.shutdown()


_PR_SET_TIMERSLACK, _PR_GET_TIMERSLACK = 29, 30  # prctl(2)


@contextlib.contextmanager
def timer_slack(microseconds: int) -> Iterator[None]:
    """The calling thread's timer slack set to `microseconds` meanwhile (0: left alone), so a process it starts
    inherits it (fork copies the thread's value, execve keeps it; Linux only, elsewhere nothing changes).

    Why the node gets one (docs/node.md, "Timer slack"): Cassandra's shared-pool workers spin-wait between
    requests, parking 10 us at a time for up to 10 ms after each; with the kernel's default 50 us slack each spin
    is a wake-up, and at a few hundred requests a second they burned ~0.35 of this machine's two cores. With
    250 us they give up the CPU after a few wake-ups."""
    libc = _libc() if microseconds > 0 else None
    before = libc.prctl(_PR_GET_TIMERSLACK, 0, 0, 0, 0) if libc is not None else -1
    if before <= 0:
        yield
        return
    libc.prctl(_PR_SET_TIMERSLACK, microseconds * 1000, 0, 0, 0)
    try:
        yield
    finally:
        libc.prctl(_PR_SET_TIMERSLACK, before, 0, 0, 0)


def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def start_node(spec: NodeSpec, *, timeout: float = 180.0, settings: NodeSettings | None = None, log=say) -> str:
    """Start `spec` (or reuse it when it already runs) and wait until CQL answers; returns its release."""
    pid = read_pid(spec)
    if pid and port_open(spec.address, spec.native_port):
        version = release_version(spec.address, spec.native_port)
        log(f"{spec.name}: already running (pid {pid}) on {spec.address}:{spec.native_port}, Cassandra {version}")
        return version
    if pid:
        log(f"{spec.name}: process {pid} is starting; waiting for CQL")
    else:
        lib = fetch(settings=settings, log=log)
        java = require_java()
        require_free_space(spec.home.parent, START_MIN_FREE_BYTES, f"start {spec.name}")
        for port, what in ((spec.native_port, "native (CQL)"), (spec.storage_port, "storage"),
                           (spec.jmx_port, "JMX")):
            if not _port_free(spec.address, port):
                raise PrerequisiteError(
                    f"{what} port {spec.address}:{port} is in use by another process. Stop it, or choose "
                    "other ports (CHRONICLE_CASSANDRA_PORT / CHRONICLE_CASSANDRA_STORAGE_PORT / "
                    "CHRONICLE_CASSANDRA_JMX_PORT)."
                )
        prepare_node_dirs(spec)
        stdout = (spec.home / "logs" / "stdout.log").open("ab")
        with timer_slack(spec.timer_slack_us):  # the JVM's threads inherit it from the forking thread
            proc = subprocess.Popen(
                jvm_command(spec, lib, java), stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=spec.home, start_new_session=True,  # survives the shell that started it
            )
        stdout.close()
        pid = proc.pid
        spec.pid_file.write_text(f"{pid}\n")
        log(f"{spec.name}: started pid {pid} on {spec.address}:{spec.native_port}; waiting for CQL ...")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            spec.pid_file.unlink(missing_ok=True)
            raise NodeError(f"{spec.name}: Cassandra exited during start-up.\n{log_tail(spec)}")
        if port_open(spec.address, spec.native_port):
            try:
                version = release_version(spec.address, spec.native_port)
            except Exception:  # noqa: BLE001 - CQL port opens slightly before queries succeed
                time.sleep(0.5)
                continue
            log(f"{spec.name}: CQL answers on {spec.address}:{spec.native_port} (Cassandra {version})")
            return version
        time.sleep(0.5)
    raise NodeError(f"{spec.name}: CQL did not answer within {timeout:.0f} s.\n{log_tail(spec)}")


def stop_node(spec: NodeSpec, *, timeout: float = 60.0, log=say) -> bool:
    """SIGTERM (Cassandra drains on shutdown), SIGKILL after `timeout`; False when it was not running."""
    pid = read_pid(spec)
    if not pid:
        spec.pid_file.unlink(missing_ok=True)
        log(f"{spec.name}: not running")
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            log(f"{spec.name}: no exit after {timeout:.0f} s; killing pid {pid}")
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    spec.pid_file.unlink(missing_ok=True)
    log(f"{spec.name}: stopped (pid {pid})")
    return True


@dataclasses.dataclass
class NodeStatus:
    name: str
    address: str
    native_port: int
    pid: int | None
    cql_answers: bool
    release_version: str | None

    @property
    def state(self) -> str:
        if self.cql_answers:
            return "UP"
        return "STARTING" if self.pid else "DOWN"


def node_status(spec: NodeSpec) -> NodeStatus:
    pid = read_pid(spec)
    version = None
    if port_open(spec.address, spec.native_port):
        with contextlib.suppress(Exception):
            version = release_version(spec.address, spec.native_port, timeout=3.0)
    return NodeStatus(spec.name, spec.address, spec.native_port, pid, version is not None, version)


def ring_view(spec: NodeSpec, timeout: float = 5.0) -> tuple[set[str], set[str]]:
    """What `spec` knows of the ring: the peers it lists and the schema versions (its own and theirs)."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([spec.address]),
                               request_timeout=timeout)
    cluster = Cluster([spec.address], port=spec.native_port, connect_timeout=timeout, protocol_version=5,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile}, control_connection_timeout=timeout)
    try:
        session = cluster.connect()
        local = session.execute("SELECT schema_version FROM system.local").one()
        peers = list(session.execute("SELECT peer, schema_version FROM system.peers_v2"))
        return {str(p.peer) for p in peers}, {str(local.schema_version), *(str(p.schema_version) for p in peers)}
    finally:
        cluster.shutdown()


def wait_for_ring(specs: list[NodeSpec], *, timeout: float = 120.0, log=say) -> None:
    """Wait until every node lists all the others and all agree on one schema version.

    CQL answering on each node is not enough: a keyspace created before the ring has formed is
    created with only the nodes the coordinator knows, and DDL sent to a node that has not yet
    joined is not seen by the others."""
    addresses = {spec.address for spec in specs}
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        views = []
        try:
            views = [ring_view(spec) for spec in specs]
        except Exception as exc:  # noqa: BLE001 - a node still settling refuses briefly
            last = str(exc)
        if views and all(peers == addresses - {spec.address} and len(versions) == 1
                         for spec, (peers, versions) in zip(specs, views, strict=True)):
            log(f"ring: {len(specs)} nodes see each other, one schema version")
            return
        if views:
            last = "; ".join(f"{spec.name} sees {sorted(peers)}, {len(versions)} schema version(s)"
                             for spec, (peers, versions) in zip(specs, views, strict=True))
        time.sleep(1.0)
    raise NodeError(f"the ring did not form within {timeout:.0f} s: {last}")


def start_cluster(specs: Iterable[NodeSpec], *, settings: NodeSettings | None = None, log=say) -> list[str]:
    """Seed first, then the others: each joins with its pre-assigned token, no bootstrap streaming.

    Returns once every node sees the whole ring (see wait_for_ring)."""
    specs = list(specs)
    versions = [start_node(spec, settings=settings, log=log) for spec in specs]
    if len(specs) > 1:
        wait_for_ring(specs, log=log)
    return versions


def stop_cluster(specs: Iterable[NodeSpec], *, log=say) -> None:
    for spec in specs:
        stop_node(spec, log=log)


def destroy(specs: Iterable[NodeSpec], *, log=say) -> None:
    """Stop the nodes and delete their folders (data included)."""
    for spec in specs:
        stop_node(spec, log=log)
        if spec.home.exists():
            shutil.rmtree(spec.home)
            log(f"{spec.name}: removed {spec.home}")
