"""Cassandra's own command-line tools, run against one of our nodes from the jars that node runs on.

- `nodetool`: `org.apache.cassandra.tools.NodeTool` over the node's JMX port (flush, compact, tablestats,
  tablehistograms, ...). The node's JMX is local-only (`-Dcassandra.jmx.local.port`), which Cassandra binds to
  the loopback address 127.0.0.1 whatever the node's own address, so every node is reached there.
- `sstable_partitions`: `org.apache.cassandra.tools.SSTablePartitions` (the tarball's `tools/bin/sstablepartitions`)
  over the node's SSTable files: exact rows, cells, tombstones and bytes per partition, which nodetool does not give.
  It only reads; a file that compaction removes mid-scan fails the scan, so callers flush first and may retry.

The tarball's wrapper scripts are not part of the Maven jars, so the JVM command is built here, with the same
Java 17 module flags as the node and a logging configuration that keeps the tools' stdout to their report.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from api.config import NodeSettings
from api.node.common import NodeError
from api.node.config import JAVA17_MODULE_FLAGS, NodeSpec
from api.node.fetch import fetch, require_java

JMX_HOST = "127.0.0.1"  # local-only JMX listens on loopback (see the module docstring)
LOGBACK_TOOLS = Path(__file__).with_name("logback-tools.xml")


def tool_command(spec: NodeSpec, main_class: str, args: list[str], *, heap: str = "256M", short: bool = True,
                 settings: NodeSettings | None = None) -> list[str]:
    """The JVM command running one of Cassandra's tools (a class of cassandra-all) for `spec`'s node; `short`
    for a JVM that lives a second or two (nodetool), not for one that scans data."""
    lib = fetch(settings=settings)
    return [
        require_java(), f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-Djava.net.preferIPv4Stack=true",
        # The C1 compiler alone starts a JVM about twice as fast; a long scan wants C2.
        *(["-XX:TieredStopAtLevel=1"] if short else []),
        f"-Dlogback.configurationFile=file://{LOGBACK_TOOLS}",
        # Offline tools (sstablepartitions) read the node's configuration (data folders, partitioner).
        f"-Dcassandra.config=file://{spec.home / 'conf' / 'cassandra.yaml'}",
        f"-Dcassandra.logdir={spec.home / 'logs'}",
        *JAVA17_MODULE_FLAGS,
        "-cp", f"{lib}/*", main_class, *args,
    ]


def _run(command: list[str], what: str, timeout: float, failure_marker: str | None = None) -> str:
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise NodeError(f"{what} did not finish within {timeout:.0f} s") from exc
    if proc.returncode != 0 or (failure_marker and failure_marker in proc.stderr):
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-10:])
        raise NodeError(f"{what} failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout


def nodetool(spec: NodeSpec, *args: str, timeout: float = 600.0, settings: NodeSettings | None = None) -> str:
    """Run `nodetool <args>` against the node's JMX port; returns its stdout (NodeError when it fails)."""
    command = tool_command(spec, "org.apache.cassandra.tools.NodeTool",
                           ["-h", JMX_HOST, "-p", str(spec.jmx_port), *args], settings=settings)
    what = f"nodetool {' '.join(args)} on {spec.name} (JMX {JMX_HOST}:{spec.jmx_port})"
    for attempt in range(3):
        try:
            return _run(command, what, timeout)
        except NodeError as exc:
            # Seen on a loaded machine with the node serving: nodetool's own start-up check answers "Server is not
            # initialized yet" once in a while; the same command a moment later succeeds.
            if "Server is not initialized yet" not in str(exc) or attempt == 2:
                raise
            time.sleep(2.0)
    raise AssertionError("unreachable")


def keyspace_data_dir(spec: NodeSpec, keyspace: str) -> Path:
    """The folder holding one subfolder per table (`<table>-<table id>`) of `keyspace` on this node."""
    return spec.home / "data" / keyspace


def sstable_partitions(spec: NodeSpec, paths: list[Path], *, min_rows: int | None = None,
                       min_bytes: int | None = None, min_tombstones: int | None = None,
                       timeout: float = 1800.0, settings: NodeSettings | None = None) -> str:
    """Run `sstablepartitions` over SSTable files or table folders; returns its text report.

    The report has, per SSTable, a summary of every partition (min / percentiles / max of size, rows, cells,
    tombstones) and one `Partition:` line for each partition at or above any of the given thresholds.
    """
    args: list[str] = []
    if min_rows is not None:
        args += ["--min-rows", str(min_rows)]
    if min_bytes is not None:
        args += ["--min-size", str(min_bytes)]
    if min_tombstones is not None:
        args += ["--min-tombstones", str(min_tombstones)]
    command = tool_command(spec, "org.apache.cassandra.tools.SSTablePartitions",
                           [*args, *(str(p) for p in paths)], heap="512M", short=False,
                           settings=settings)
    # It reports an SSTable it could not read (e.g. compacted away mid-scan) on stderr and still exits 0.
    return _run(command, f"sstablepartitions on {spec.name}", timeout, failure_marker="Failure processing")
