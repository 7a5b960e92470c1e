"""`chronicle node ...`: fetch (with Maven), start, stop and inspect Chronicle's Cassandra nodes on loopback.

Exit codes: 0 success, 1 the node failed (log tail printed), 2 usage, 3 a prerequisite is missing
(Java, Maven, disk space, a free port, the download).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from api.cli.common import CONTEXT, Exit, fail, fail_on, node_errors
from api.config import NodeSettings
from api.node.config import NodeSpec, cluster_specs, local_node_spec
from api.node.fetch import CASSANDRA_VERSION, fetch
from api.node.process import destroy, node_status, start_cluster, start_node, stop_cluster, stop_node


def _settings() -> NodeSettings:
    with fail_on(ValueError, code=Exit.USAGE, prefix="bad configuration: "):
        return NodeSettings.from_env()


@click.group("node", context_settings=CONTEXT, short_help="Fetch, start, stop and inspect Cassandra nodes.")
def node() -> None:
    """Fetch (with Maven), start, stop and inspect Cassandra nodes for Chronicle.

    The single local node listens on 127.0.0.1:$CHRONICLE_CASSANDRA_PORT (default 9042); its data, commit
    log and logs live under .chronicle/local/. Clusters use 127.0.0.1..N on port 9142 under .chronicle/cluster/.

    Exit codes: 0 success, 1 the node failed (log tail printed), 2 usage, 3 a prerequisite is missing
    (Java, Maven, disk space, a free port, the download).
    """


@node.command("fetch", short_help="Download and verify Cassandra's jars.")
def fetch_command() -> None:
    """Download and verify Cassandra's jars into the cache (no-op when already there)."""
    settings = _settings()
    with node_errors():
        lib = fetch(settings=settings)
    click.echo(f"Cassandra {CASSANDRA_VERSION} ready in {lib.parent}")


@node.command(short_help="Start (or reuse) the local node.")
@click.option("--port", type=int, default=None, help="Native (CQL) port [env CHRONICLE_CASSANDRA_PORT, 9042].")
@click.option("--timeout", type=float, default=180.0, show_default=True, help="Seconds to wait for CQL.")
def start(port: int | None, timeout: float) -> None:
    """Start the local node (reused when it already runs) and wait until CQL answers."""
    settings = _settings()
    with node_errors():
        start_node(local_node_spec(port, settings), timeout=timeout, settings=settings)


@node.command(short_help="Stop the local node.")
@click.option("--port", type=int, default=None, help="Native (CQL) port of the node.")
def stop(port: int | None) -> None:
    """Stop the local node cleanly (it drains on SIGTERM)."""
    with node_errors():
        stop_node(local_node_spec(port, _settings()))


@node.command(short_help="Stop, then start the local node.")
@click.option("--port", type=int, default=None, help="Native (CQL) port of the node.")
def restart(port: int | None) -> None:
    """Stop, then start the local node; its data stays."""
    settings = _settings()
    spec = local_node_spec(port, settings)
    with node_errors():
        stop_node(spec)
        start_node(spec, settings=settings)


def _print_status(specs: list[NodeSpec]) -> bool:
    all_up = True
    for spec in specs:
        st = node_status(spec)
        all_up &= st.cql_answers
        click.echo(f"{st.name:8} {st.state:9} {st.address}:{st.native_port}  pid={st.pid or '-'}  "
                   f"release={st.release_version or '-'}  home={spec.home}")
    return all_up


@node.command(short_help="Print the local node's state.")
@click.option("--port", type=int, default=None, help="Native (CQL) port of the node.")
def status(port: int | None) -> None:
    """Print the local node's state; exit 0 only when CQL answers."""
    sys.exit(0 if _print_status([local_node_spec(port, _settings())]) else Exit.NODE_FAILED)


@node.command(context_settings={"ignore_unknown_options": True}, short_help="Open cqlsh against the local node.")
@click.option("--port", type=int, default=None, help="Native (CQL) port of the node.")
@click.argument("cqlsh_args", nargs=-1, type=click.UNPROCESSED)
def cqlsh(port: int | None, cqlsh_args: tuple[str, ...]) -> None:
    """Open cqlsh against the local node (extra arguments go to cqlsh, e.g. -e "DESCRIBE TABLES")."""
    spec = local_node_spec(port, _settings())
    exe = Path(sys.executable).with_name("cqlsh")
    if not exe.exists():
        fail("cqlsh is not installed in this virtualenv (pip install cqlsh)", Exit.PREREQUISITE)
    args = [str(exe), spec.address, str(spec.native_port), *cqlsh_args]
    os.execv(args[0], args)


@node.group(short_help="A loopback cluster of N nodes.")
def cluster() -> None:
    """A cluster of N nodes on 127.0.0.1 .. 127.0.0.N (native port 9142)."""


def _cluster_specs(nodes: int, settings: NodeSettings | None = None) -> list[NodeSpec]:
    with node_errors():
        return cluster_specs(nodes, settings=settings or _settings())


@cluster.command("start", short_help="Start (or reuse) an N-node cluster.")
@click.option("-n", "--nodes", type=int, default=3, show_default=True)
def cluster_start(nodes: int) -> None:
    """Start (or reuse) an N-node cluster and wait until every node answers CQL."""
    settings = _settings()
    specs = _cluster_specs(nodes, settings)
    with node_errors():
        start_cluster(specs, settings=settings)


@cluster.command("stop", short_help="Stop the cluster's nodes; data stays.")
@click.option("-n", "--nodes", type=int, default=3, show_default=True)
def cluster_stop(nodes: int) -> None:
    """Stop the cluster's nodes; their data stays."""
    specs = _cluster_specs(nodes)
    with node_errors():
        stop_cluster(specs)


@cluster.command("status", short_help="Print each node's state.")
@click.option("-n", "--nodes", type=int, default=3, show_default=True)
def cluster_status(nodes: int) -> None:
    """Print each node's state; exit 0 only when all answer CQL."""
    sys.exit(0 if _print_status(_cluster_specs(nodes)) else Exit.NODE_FAILED)


@cluster.command("destroy", short_help="Stop the cluster and delete its data.")
@click.option("-n", "--nodes", type=int, default=3, show_default=True)
@click.option("--dry-run", is_flag=True, help="Only say what would be removed.")
def cluster_destroy(nodes: int, dry_run: bool) -> None:
    """Stop the cluster and delete its folders (all its data)."""
    specs = _cluster_specs(nodes)
    if dry_run:
        for spec in specs:
            click.echo(f"would stop {spec.name} and remove {spec.home}")
        return
    with node_errors():
        destroy(specs)
