"""Fetch, configure, start and stop real Apache Cassandra 5.0 nodes on loopback.

Maven Central does not carry the 5.0 binary tarball (`apache-cassandra:tar.gz:bin` stops at 4.0-alpha2),
but it does carry `org.apache.cassandra:cassandra-all` and every jar it runs on.  So a node here is
assembled from Maven: `mvn -C dependency:copy-dependencies` fetches the jars (Maven checks each jar against
Central's checksum; `-C` makes a mismatch fatal), we then check every jar against the SHA-256 list pinned
in this package, and the JVM is started with the flags of the tarball's `jvm17-server.options`.

The tarball's `bin/cassandra` refuses root unless given `-R`; we launch `CassandraDaemon` with `java`
directly, so there is no such check to override (the node runs as whoever runs this).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

CASSANDRA_VERSION = "5.0.9"
PINNED_CHECKSUMS = Path(__file__).with_name(f"cassandra-{CASSANDRA_VERSION}-jars.sha256")
PROJECT_ROOT = Path(__file__).resolve().parents[2]

# Free space the fetch needs (jars ~70 MB, Maven's copy in ~/.m2 as much again) and a node needs to start.
FETCH_MIN_FREE_BYTES = 400 * 1024 * 1024
START_MIN_FREE_BYTES = 300 * 1024 * 1024

# Flags of Cassandra 5.0's conf/jvm17-server.options that a node cannot run without on Java 17.
JAVA17_MODULE_FLAGS = [
    *(
        f"--add-exports={m}=ALL-UNNAMED"
        for m in (
            "java.base/jdk.internal.misc", "java.base/jdk.internal.ref", "java.base/sun.nio.ch",
            "java.management.rmi/com.sun.jmx.remote.internal.rmi", "java.rmi/sun.rmi.registry",
            "java.rmi/sun.rmi.server", "java.sql/java.sql", "java.base/java.lang.ref",
            "jdk.unsupported/sun.misc",
        )
    ),
    *(
        f"--add-opens={m}=ALL-UNNAMED"
        for m in (
            "java.base/java.lang.module", "java.base/jdk.internal.loader", "java.base/jdk.internal.ref",
            "java.base/jdk.internal.reflect", "java.base/jdk.internal.math", "java.base/jdk.internal.module",
            "java.base/jdk.internal.util.jar", "jdk.management/com.sun.management.internal",
            "java.base/sun.nio.ch", "java.base/java.io", "java.base/java.nio",
            "java.base/java.util.concurrent", "java.base/java.util", "java.base/java.util.concurrent.atomic",
            "java.base/java.lang", "java.base/java.math", "java.base/java.lang.reflect", "java.base/java.net",
        )
    ),
]


def _say(message: str) -> None:
    print(message, flush=True)


class NodeError(RuntimeError):
    """A node could not be fetched, started or stopped; the message says what to do about it."""


class PrerequisiteError(NodeError):
    """Something the node needs is missing (Java, Maven, disk space, a free port, the download)."""


def cache_dir() -> Path:
    """Where fetched distributions live, outside the repository so every checkout reuses them."""
    base = os.environ.get("CHRONICLE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "chronicle"
    )
    return Path(base)


def state_dir() -> Path:
    """The one ignored project-local folder holding node configs, data, commit logs and logs."""
    return Path(os.environ.get("CHRONICLE_STATE_DIR") or PROJECT_ROOT / ".chronicle")


# --------------------------------------------------------------------------------------------- tools


def _require_tool(name: str, hint: str) -> str:
    path = shutil.which(name)
    if not path:
        raise PrerequisiteError(f"'{name}' was not found on PATH. {hint}")
    return path


def java_major_version(java: str) -> int:
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        raise PrerequisiteError(f"could not read the Java version from `{java} -version`: {out.strip()[:200]}")
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major


def require_java() -> str:
    java = _require_tool(
        "java",
        "Cassandra 5.0 needs a Java 11 or 17 runtime: install one (Debian: apt-get install openjdk-17-jre-headless)"
        " or put its bin/ on PATH.",
    )
    major = java_major_version(java)
    if major not in (11, 17):
        raise PrerequisiteError(f"Cassandra 5.0 runs on Java 11 or 17, but `java` on PATH is Java {major}.")
    return java


def _require_free_space(path: Path, needed: int, what: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(path).free
    if free < needed:
        raise PrerequisiteError(
            f"not enough disk space to {what}: {free // 2**20} MiB free under {path}, "
            f"{needed // 2**20} MiB needed. Free some space (or point CHRONICLE_CACHE_DIR / "
            "CHRONICLE_STATE_DIR elsewhere) and try again."
        )


# --------------------------------------------------------------------------------------------- fetch


def distribution_dir(version: str = CASSANDRA_VERSION) -> Path:
    return cache_dir() / f"cassandra-{version}"


def _read_pinned_checksums() -> dict[str, str]:
    pinned = {}
    for line in PINNED_CHECKSUMS.read_text().splitlines():
        if line.strip():
            digest, name = line.split()
            pinned[name] = digest
    return pinned


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_jars(lib: Path) -> None:
    """Every pinned jar present with its pinned SHA-256, and nothing unexpected besides."""
    pinned = _read_pinned_checksums()
    present = {p.name for p in lib.glob("*.jar")}
    missing = sorted(set(pinned) - present)
    extra = sorted(present - set(pinned))
    if missing or extra:
        raise PrerequisiteError(
            f"the fetched jar set differs from the pinned list: missing {missing}, unexpected {extra}")
    for name, digest in pinned.items():
        actual = _sha256(lib / name)
        if actual != digest:
            raise PrerequisiteError(f"checksum mismatch for {name}: expected {digest}, got {actual}")


_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>chronicle</groupId><artifactId>cassandra-node</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId><artifactId>cassandra-all</artifactId><version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


def fetch(version: str = CASSANDRA_VERSION, *, log=_say) -> Path:
    """Fetch Cassandra's jars with Maven into the cache (once) and verify them; returns the lib folder."""
    dist = distribution_dir(version)
    lib = dist / "lib"
    if (dist / ".verified").exists():
        return lib
    if version != CASSANDRA_VERSION:
        raise NodeError(f"only Cassandra {CASSANDRA_VERSION} has pinned checksums; {version} cannot be verified")
    mvn = _require_tool(
        "mvn", "Maven fetches Cassandra from Maven Central: install it (Debian: apt-get install maven)."
    )
    require_java()
    _require_free_space(cache_dir(), FETCH_MIN_FREE_BYTES, "fetch Cassandra")
    log(f"fetching Apache Cassandra {version} from Maven Central into {dist} ...")
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=".fetch-") as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "pom.xml").write_text(_POM.format(version=version))
        # CHRONICLE_MAVEN_SETTINGS: a settings.xml for mirrors, proxies or another local repository.
        maven_settings = os.environ.get("CHRONICLE_MAVEN_SETTINGS")
        settings_args = ["-s", maven_settings] if maven_settings else []
        proc = subprocess.run(
            [mvn, "-B", "-q", "-C", *settings_args, "dependency:copy-dependencies",
             f"-DoutputDirectory={tmp_path / 'lib'}", "-DincludeScope=runtime"],
            cwd=tmp_path, capture_output=True, text=True, timeout=1800,
        )
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise PrerequisiteError(
                f"Maven could not download Cassandra {version} (exit {proc.returncode}). Check that Maven "
                f"Central is reachable (proxy settings in ~/.m2/settings.xml) and that the disk is not full.\n{tail}"
            )
        verify_jars(tmp_path / "lib")
        if dist.exists():
            shutil.rmtree(dist)
        dist.mkdir(parents=True)
        (tmp_path / "lib").rename(lib)
    (dist / ".verified").write_text(f"{version}\n")
    log(f"Cassandra {version}: {len(list(lib.glob('*.jar')))} jars verified against {PINNED_CHECKSUMS.name}")
    return lib


# --------------------------------------------------------------------------------------------- nodes


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """One node: its address, ports and folders. A cluster is a list of these sharing seeds."""

    name: str
    address: str
    native_port: int
    storage_port: int
    jmx_port: int
    home: Path
    cluster_name: str
    seeds: tuple[str, ...]
    initial_token: int
    heap: str = "1G"
    heap_new: str = "256M"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "system.log"

    @property
    def pid_file(self) -> Path:
        return self.home / "cassandra.pid"


def local_node_spec(native_port: int | None = None) -> NodeSpec:
    """The single development/test node on 127.0.0.1."""
    port = native_port or int(os.environ.get("CHRONICLE_CASSANDRA_PORT", "9042"))
    return NodeSpec(
        name="local",
        address="127.0.0.1",
        native_port=port,
        storage_port=int(os.environ.get("CHRONICLE_CASSANDRA_STORAGE_PORT", "7000")),
        jmx_port=int(os.environ.get("CHRONICLE_CASSANDRA_JMX_PORT", "7199")),
        home=state_dir() / "local" / "node1",
        cluster_name="chronicle-local",
        seeds=("127.0.0.1",),
        initial_token=0,
        heap=os.environ.get("CHRONICLE_CASSANDRA_HEAP", "1G"),
        heap_new=os.environ.get("CHRONICLE_CASSANDRA_HEAP_NEW", "256M"),
    )


def cluster_specs(size: int, native_port: int = 9142, storage_port: int = 7100, jmx_base: int = 7300,
                  heap: str = "512M") -> list[NodeSpec]:
    """Nodes 127.0.0.1 .. 127.0.0.N, ports apart from the local node's so both can run at once."""
    if not 1 <= size <= 9:
        raise NodeError("a loopback cluster has between 1 and 9 nodes")
    addresses = [f"127.0.0.{i}" for i in range(1, size + 1)]
    # Evenly spaced Murmur3 tokens: one token per node, so no token allocation or bootstrap streaming.
    span = 2**64 // size
    return [
        NodeSpec(
            name=f"node{i}",
            address=addresses[i - 1],
            native_port=native_port,
            storage_port=storage_port,
            jmx_port=jmx_base + i,
            home=state_dir() / "cluster" / f"node{i}",
            cluster_name="chronicle-cluster",
            seeds=(addresses[0],),
            initial_token=-(2**63) + (i - 1) * span,
            heap=heap,
            heap_new="128M",
        )
        for i in range(1, size + 1)
    ]


def render_cassandra_yaml(spec: NodeSpec) -> str:
    home = spec.home
    seeds = ",".join(f"{s}:{spec.storage_port}" for s in spec.seeds)
    return f"""# Written by Chronicle's node manager (api/node/manager.py); edits are overwritten on start.
cluster_name: {spec.cluster_name}
num_tokens: 1
initial_token: {spec.initial_token}
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
auto_bootstrap: false
data_file_directories: [{home}/data]
commitlog_directory: {home}/commitlog
saved_caches_directory: {home}/saved_caches
hints_directory: {home}/hints
cdc_raw_directory: {home}/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{seeds}"
listen_address: {spec.address}
rpc_address: {spec.address}
storage_port: {spec.storage_port}
native_transport_port: {spec.native_port}
start_native_transport: true
endpoint_snitch: SimpleSnitch
# TRUNCATE / DROP in tests stay cheap: no snapshot per table.
auto_snapshot: false
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
# Sized for a 2-core machine that also runs the API and its tests.
concurrent_reads: 16
concurrent_writes: 16
concurrent_counter_writes: 16
concurrent_compactors: 1
read_request_timeout: 5000ms
range_request_timeout: 10000ms
write_request_timeout: 2000ms
counter_write_request_timeout: 5000ms
request_timeout: 10000ms
native_transport_max_threads: 64
"""


LOGBACK_XML = """<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.rolling.RollingFileAppender">
    <file>${cassandra.logdir}/system.log</file>
    <rollingPolicy class="ch.qos.logback.core.rolling.SizeAndTimeBasedRollingPolicy">
      <fileNamePattern>${cassandra.logdir}/system.log.%d{yyyy-MM-dd}.%i.zip</fileNamePattern>
      <maxFileSize>50MB</maxFileSize><maxHistory>3</maxHistory><totalSizeCap>200MB</totalSizeCap>
    </rollingPolicy>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


def jvm_command(spec: NodeSpec, lib: Path, java: str) -> list[str]:
    conf = spec.home / "conf"
    return [
        java,
        f"-Xms{spec.heap}", f"-Xmx{spec.heap}", f"-Xmn{spec.heap_new}",
        "-XX:+UseG1GC", "-XX:+ParallelRefProcEnabled", "-XX:MaxTenuringThreshold=1",
        "-Xss256k", "-XX:+ExitOnOutOfMemoryError", "-XX:+HeapDumpOnOutOfMemoryError",
        f"-XX:HeapDumpPath={spec.home / 'logs'}", "-XX:-UsePerfData", "-Xshare:auto",
        "-Djava.net.preferIPv4Stack=true", "-Djdk.attach.allowAttachSelf=true",
        f"-javaagent:{next(lib.glob('jamm-*.jar'))}",
        f"-Dcassandra.config=file://{conf / 'cassandra.yaml'}",
        f"-Dlogback.configurationFile=file://{conf / 'logback.xml'}",
        f"-Dcassandra.logdir={spec.home / 'logs'}",
        f"-Dcassandra.storagedir={spec.home}",
        f"-Dcassandra.jmx.local.port={spec.jmx_port}",
        "-Dcassandra-foreground=yes",
        # Fast start on a fresh single-token ring: no gossip settling, no ring delay, no superuser delay.
        "-Dcassandra.skip_wait_for_gossip_to_settle=0",
        "-Dcassandra.ring_delay_ms=1000",
        "-Dcassandra.superuser_setup_delay_ms=0",
        f"-Dcassandra.initial_token={spec.initial_token}",
        *JAVA17_MODULE_FLAGS,
        "-cp", f"{lib}/*",
        "org.apache.cassandra.service.CassandraDaemon",
    ]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (our own exited child) still answers kill(0); /proc tells it apart.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


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


def prepare_node_dirs(spec: NodeSpec) -> None:
    for sub in ("conf", "data", "commitlog", "saved_caches", "hints", "cdc_raw", "logs"):
        (spec.home / sub).mkdir(parents=True, exist_ok=True)
    (spec.home / "conf" / "cassandra.yaml").write_text(render_cassandra_yaml(spec))
    (spec.home / "conf" / "logback.xml").write_text(LOGBACK_XML)


def start_node(spec: NodeSpec, *, timeout: float = 180.0, log=_say) -> str:
    """Start `spec` (or reuse it when it already runs) and wait until CQL answers; returns its release."""
    pid = read_pid(spec)
    if pid and port_open(spec.address, spec.native_port):
        version = release_version(spec.address, spec.native_port)
        log(f"{spec.name}: already running (pid {pid}) on {spec.address}:{spec.native_port}, Cassandra {version}")
        return version
    if pid:
        log(f"{spec.name}: process {pid} is starting; waiting for CQL")
    else:
        lib = fetch(log=log)
        java = require_java()
        _require_free_space(spec.home.parent, START_MIN_FREE_BYTES, f"start {spec.name}")
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


def stop_node(spec: NodeSpec, *, timeout: float = 60.0, log=_say) -> bool:
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


def start_cluster(specs: Iterable[NodeSpec], *, log=_say) -> list[str]:
    """Seed first, then the others: each joins with its pre-assigned token, no bootstrap streaming."""
    return [start_node(spec, log=log) for spec in specs]


def stop_cluster(specs: Iterable[NodeSpec], *, log=_say) -> None:
    for spec in specs:
        stop_node(spec, log=log)


def destroy(specs: Iterable[NodeSpec], *, log=_say) -> None:
    """Stop the nodes and delete their folders (data included)."""
    for spec in specs:
        stop_node(spec, log=log)
        if spec.home.exists():
            shutil.rmtree(spec.home)
            log(f"{spec.name}: removed {spec.home}")
