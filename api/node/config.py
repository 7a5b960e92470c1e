"""A node's description (NodeSpec) and the configuration rendered for it: cassandra.yaml, logback and the JVM
command line with the flags of the tarball's `jvm17-server.options`.

The tarball's `bin/cassandra` refuses root unless given `-R`; we launch `CassandraDaemon` with `java`
directly, so there is no such check to override (the node runs as whoever runs this).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from api.config import NodeSettings
from api.node.common import NodeError

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
    jvm_options: tuple[str, ...] = ()  # added to the JVM's command line (the suite's short-lived nodes)
    timer_slack_us: int = 0  # the JVM's timer slack (api/node/process.py); 0: the starting thread's, unchanged

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "system.log"

    @property
    def pid_file(self) -> Path:
        return self.home / "cassandra.pid"


def local_node_spec(native_port: int | None = None, settings: NodeSettings | None = None) -> NodeSpec:
    """The single development/test node on 127.0.0.1."""
    settings = settings or NodeSettings.from_env()
    return NodeSpec(
        name="local",
        address="127.0.0.1",
        native_port=native_port or settings.native_port,
        storage_port=settings.storage_port,
        jmx_port=settings.jmx_port,
        home=settings.state_dir / "local" / "node1",
        cluster_name="chronicle-local",
        seeds=("127.0.0.1",),
        initial_token=0,
        heap=settings.heap,
        heap_new=settings.heap_new,
        timer_slack_us=settings.timer_slack_us,
    )


def cluster_specs(size: int, native_port: int = 9142, storage_port: int = 7100, jmx_base: int = 7300,
                  heap: str = "512M", settings: NodeSettings | None = None) -> list[NodeSpec]:
    """Nodes 127.0.0.1 .. 127.0.0.N, ports apart from the local node's so both can run at once."""
    if not 1 <= size <= 9:
        raise NodeError("a loopback cluster has between 1 and 9 nodes")
    settings = settings or NodeSettings.from_env()
    state = settings.state_dir
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
            home=state / "cluster" / f"node{i}",
            cluster_name="chronicle-cluster",
            seeds=(addresses[0],),
            initial_token=-(2**63) + (i - 1) * span,
            heap=heap,
            heap_new="128M",
            timer_slack_us=settings.timer_slack_us,
        )
        for i in range(1, size + 1)
    ]


def render_cassandra_yaml(spec: NodeSpec) -> str:
    home = spec.home
    seeds = ",".join(f"{s}:{spec.storage_port}" for s in spec.seeds)
    return f"""# Written by Chronicle's node manager (api/node/config.py); edits are overwritten on start.
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
        f"-Xms{spec.heap}", f"-Xmx{spec.heap}", f"-Xmn{spec.heap_new}", *spec.jvm_options,
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


def prepare_node_dirs(spec: NodeSpec) -> None:
    """Create the node's folders and (re)write its configuration files."""
    for sub in ("conf", "data", "commitlog", "saved_caches", "hints", "cdc_raw", "logs"):
        (spec.home / sub).mkdir(parents=True, exist_ok=True)
    (spec.home / "conf" / "cassandra.yaml").write_text(render_cassandra_yaml(spec))
    (spec.home / "conf" / "logback.xml").write_text(LOGBACK_XML)
