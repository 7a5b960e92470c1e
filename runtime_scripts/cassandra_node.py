#!/usr/bin/env python3
"""Manage Chronicle's real Apache Cassandra 5.0 nodes on loopback.

Exit codes: 0 success, 1 the node failed (log tail printed), 2 usage, 3 a prerequisite is missing
(Java, Maven, disk space, a free port).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import click  # noqa: E402

from api.node import manager  # noqa: E402

EXIT_NODE_FAILED = 1
EXIT_PREREQUISITE = 3


def _run(action):
    try:
        return action()
    except manager.NodeError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_PREREQUISITE if isinstance(exc, manager.PrerequisiteError) else EXIT_NODE_FAILED)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Fetch (with Maven), start, stop and inspect Cassandra nodes for Chronicle.

    The single local node listens on 127.0.0.1:$CHRONICLE_CASSANDRA_PORT (default 9042); its data, commit
    log and logs live under .chronicle/local/. Clusters use 127.0.0.1..N on port 9142 under .chronicle/cluster/.
    """


@cli.command()
def fetch() -> None:
    """Download and verify Cassandra's jars into the cache (no-op when already there)."""
    lib = _run(manager.fetch)
    click.echo(f"Cassandra {manager.CASSANDRA_VERSION} ready in {lib.parent}")


@cli.command()
@click.option("--port", type=int, default=None, help="Native (CQL) port [env CHRONICLE_CASSANDRA_PORT, 9042].")
@click.option("--timeout", type=float, default=180.0, show_default=True, help="Seconds to wait for CQL.")
def start(port: int | None, timeout: float) -> None:
    """Start the local node (reused when it already runs) and wait until CQL answers."""
    _run(lambda: manager.start_node(manager.local_node_spec(port), timeout=timeout))


@cli.command()
@click.option("--port", type=int, default=None, help="Native (CQL) port of the node.")
def stop(port: int | None) -> None:
    """Stop the local node cleanly (it drains on SIGTERM)."""
    _run(lambda: manager.stop_node(manager.local_node_spec(port)))


@cli.command()
@click.option("--port", type=int, default=None, help="Native (CQL) port of the node.")
def restart(port: int | None) -> None:
    """Stop, then start the local node; its data stays."""
    spec = manager.local_node_spec(port)
    _run(lambda: (manager.stop_node(spec), manager.start_node(spec)))


def _print_status(specs) -> bool:
    all_up = True
    for spec in specs:
        st = manager.node_status(spec)
        all_up &= st.cql_answers
        click.echo(f"{st.name:8} {st.state:9} {st.address}:{st.native_port}  pid={st.pid or '-'}  "
                   f"release={st.release_version or '-'}  home={spec.home}")
    return all_up


@cli.command()
@click.option("--port", type=int, default=None, help="Native (CQL) port of the node.")
def status(port: int | None) -> None:
    """Print the local node's state; exit 0 only when CQL answers."""
    sys.exit(0 if _print_status([manager.local_node_spec(port)]) else EXIT_NODE_FAILED)


@cli.command(context_settings={"ignore_unknown_options": True})
@click.option("--port", type=int, default=None, help="Native (CQL) port of the node.")
@click.argument("cqlsh_args", nargs=-1, type=click.UNPROCESSED)
def cqlsh(port: int | None, cqlsh_args: tuple[str, ...]) -> None:
    """Open cqlsh against the local node (extra arguments go to cqlsh, e.g. -e "DESCRIBE TABLES")."""
    spec = manager.local_node_spec(port)
    exe = Path(sys.executable).with_name("cqlsh")
    if not exe.exists():
        click.echo("error: cqlsh is not installed in this virtualenv (pip install cqlsh)", err=True)
        sys.exit(EXIT_PREREQUISITE)
    args = [str(exe), spec.address, str(spec.native_port), *cqlsh_args]
    os.execv(args[0], args)


@cli.group()
def cluster() -> None:
    """A cluster of N nodes on 127.0.0.1 .. 127.0.0.N (native port 9142)."""


@cluster.command("start")
@click.option("-n", "--nodes", type=int, default=3, show_default=True)
def cluster_start(nodes: int) -> None:
    """Start (or reuse) an N-node cluster and wait until every node answers CQL."""
    _run(lambda: manager.start_cluster(manager.cluster_specs(nodes)))


@cluster.command("stop")
@click.option("-n", "--nodes", type=int, default=3, show_default=True)
def cluster_stop(nodes: int) -> None:
    """Stop the cluster's nodes; their data stays."""
    _run(lambda: manager.stop_cluster(manager.cluster_specs(nodes)))


@cluster.command("status")
@click.option("-n", "--nodes", type=int, default=3, show_default=True)
def cluster_status(nodes: int) -> None:
    """Print each node's state; exit 0 only when all answer CQL."""
    sys.exit(0 if _print_status(manager.cluster_specs(nodes)) else EXIT_NODE_FAILED)


@cluster.command("destroy")
@click.option("-n", "--nodes", type=int, default=3, show_default=True)
@click.option("--dry-run", is_flag=True, help="Only say what would be removed.")
def cluster_destroy(nodes: int, dry_run: bool) -> None:
    """Stop the cluster and delete its folders (all its data)."""
    specs = manager.cluster_specs(nodes)
    if dry_run:
        for spec in specs:
            click.echo(f"would stop {spec.name} and remove {spec.home}")
        return
    _run(lambda: manager.destroy(specs))


if __name__ == "__main__":
    cli()
