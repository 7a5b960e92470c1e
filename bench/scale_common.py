"""The measurement harness of the scale suite (`bench/scale_*.py`): what every scale script needs.

- `scratch_keyspace` / `create_scratch_keyspace` / `drop_scratch_keyspace`: a keyspace of the run's own on the
  local node, migrated with the project's own `cql/` files, dropped afterwards;
- `measure(fn, seconds=, concurrency=)`: p50/p99 latency, request count and rate of `fn()` called in a loop;
- `log_offset` + `tombstone_warnings`: the node's WARN/ERROR lines about tombstones and failed reads written
  since an offset taken before the measured phase;
- `largest_partitions`: each table's largest partition as the node itself reports it (nodetool over JMX, and
  Cassandra's `sstablepartitions` over the node's SSTable files);
- `write_result`: one JSON object under `bench/results/<name>-<UTC timestamp>.json`, also printed;
- `served`: gunicorn (the project's gunicorn.conf.py) serving the app on a bench keyspace, on a free port.

Rows vs cells: nodetool in Cassandra 5.0 has no rows-per-partition figure. `tablehistograms` reports a
"Cell Count" per partition, which counts the cells of regular (non-key) columns: a row of a table whose columns
are all key columns counts 0, a row with three set columns counts 3, and a deleted row counts 0. So cell counts
are not rows (5,000 rows of a key-only table show as 0 cells; of a table with two value columns as 10,000) and
cannot be checked against the 100,000-rows guideline. Rows per partition come from `sstablepartitions`, which
reads every partition of every SSTable and counts row entries exactly (live rows plus row tombstones, since a
read has to step over both), with the partition's tombstones beside them. Both nodetool figures come from
per-SSTable histograms (bucket upper bounds, ~20% apart); `sstablepartitions` gives exact figures per SSTable,
summed here per partition key over the SSTables that hold pieces of it. A summed figure counts rows written
again in a later SSTable twice, so it is an upper bound until a compaction merges the pieces
(`largest_partitions(..., compact=True)` runs one first).
"""

from __future__ import annotations

import array
import contextlib
import dataclasses
import http.client
import json
import math
import multiprocessing
import os
import re
import secrets
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

from api.config import Settings
from api.db import Database
from api.migrations import CQL_DIR, migrate
from api.node.common import NodeError
from api.node.config import NodeSpec, local_node_spec
from api.node.process import read_pid
from api.node.tools import keyspace_data_dir, nodetool, sstable_partitions

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "bench" / "results"
BIN = Path(sys.executable).parent

# Cassandra's own limits (cassandra.yaml defaults): a read warns at 1,000 tombstones and fails at 100,000.
TOMBSTONE_WARN = 1_000
TOMBSTONE_FAIL = 100_000


def local_node() -> NodeSpec:
    """The local development node (127.0.0.1, CHRONICLE_CASSANDRA_PORT, JMX CHRONICLE_CASSANDRA_JMX_PORT)."""
    return local_node_spec()


# ------------------------------------------------------------------------------------------------ keyspaces

SCRATCH_RE = re.compile(r"[a-z][a-z0-9]{0,15}_\d{8}t\d{6}_[0-9a-f]{6}")


def scratch_settings(keyspace: str, *, node: NodeSpec | None = None, replication: str = "SimpleStrategy:1",
                     **overrides: Any) -> Settings:
    """The environment's settings pointed at `node` (the local node by default) and `keyspace`."""
    node = node or local_node()
    return dataclasses.replace(Settings.from_env(), contact_points=[node.address], cassandra_port=node.native_port,
                               keyspace=keyspace, replication=replication, **overrides)


def create_scratch_keyspace(prefix: str = "scale", *, node: NodeSpec | None = None,
                            replication: str = "SimpleStrategy:1", log: Callable[[str], None] = lambda _m: None,
                            directory: Path = CQL_DIR, **overrides: Any) -> Database:
    """A new keyspace `<prefix>_<UTC time>_<random>` with every migration of `directory` (default `cql/`)
    applied; returns a Database on it. `overrides` replace Settings fields (e.g. request_timeout for bulk
    loads)."""
    if not re.fullmatch(r"[a-z][a-z0-9]{0,15}", prefix):
        raise ValueError(f"scratch keyspace prefix {prefix!r}: 1-16 lower-case letters and digits")
    keyspace = f"{prefix}_{datetime.now(UTC):%Y%m%dt%H%M%S}_{secrets.token_hex(3)}"
    return _migrated(scratch_settings(keyspace, node=node, replication=replication, **overrides), log, directory)


def _migrated(settings: Settings, log: Callable[[str], None], directory: Path = CQL_DIR) -> Database:
    """Apply the pending migrations of `directory` to the settings' keyspace; a Database on it."""
    admin = Database(settings, keyspace="")
    try:
        migrate(admin, settings.keyspace, settings.replication_map(), directory=directory, log=log)
    finally:
        admin.close()
    return Database(settings)


def open_scratch_keyspace(keyspace: str, *, log: Callable[[str], None] = lambda _m: None, **overrides: Any
                          ) -> Database:
    """A Database on a kept scratch keyspace, with the migrations added to `cql/` since it was made applied (a
    measurement repeated after a schema change)."""
    if not SCRATCH_RE.fullmatch(keyspace):
        raise ValueError(f"{keyspace!r} is not a scratch keyspace")
    return _migrated(scratch_settings(keyspace, **overrides), log)


def drop_scratch_keyspace(db: Database) -> None:
    """Drop a keyspace made by `create_scratch_keyspace` (refuses any other name) and close `db`."""
    if not SCRATCH_RE.fullmatch(db.keyspace):
        raise ValueError(f"{db.keyspace!r} is not a scratch keyspace; refusing to drop it")
    db.close()
    admin = Database(db.settings, keyspace="")
    try:
        admin.execute_raw(f"DROP KEYSPACE IF EXISTS {db.keyspace}", timeout=120)
    finally:
        admin.close()


@contextlib.contextmanager
def scratch_keyspace(prefix: str = "scale", *, keep: bool = False, **kwargs: Any) -> Iterator[Database]:
    """`with scratch_keyspace("net") as db:` a migrated keyspace of its own, dropped on exit unless `keep`."""
    db = create_scratch_keyspace(prefix, **kwargs)
    try:
        yield db
    finally:
        if keep:
            db.close()
        else:
            drop_scratch_keyspace(db)


# ------------------------------------------------------------------------------------------------ latency

# Threads by default: measured on this 2-core box with the node on the same cores (README "Scale suite"), 8 threads
# and 8 forked processes gave the same throughput (driver read 794 vs 771 calls/s; the Flask app in-process 101 vs
# 89): the CPU is the limit, not the GIL. Processes cost a connection and a warm-up each; mode="processes" is
# for a Python-heavy fn on a machine with cores to spare.
DEFAULT_MODE = "threads"


def _percentile(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p * len(ordered)) - 1))]


@dataclasses.dataclass
class _WorkerResult:
    latencies: array.array
    errors: int = 0
    first_error: str | None = None
    started: float = 0.0
    finished: float = 0.0
    cpu: float = 0.0  # CPU seconds of the worker's process over its window (threads share one process)
    node_cpu: float | None = None  # CPU seconds of the node over the window (measured by the first worker)


def _work(fn: Callable[[], object], seconds: float, warmup: float, barrier: Any,
          node_cpu: Callable[[], float] | None = None) -> _WorkerResult:
    """Warm up (connections, prepared statements, caches) untimed, wait for every worker, then call `fn` for
    `seconds`, timing each call that starts inside the window; `node_cpu` is read at both ends of it."""
    out = _WorkerResult(array.array("d"))
    warm_until = time.monotonic() + warmup
    while time.monotonic() < warm_until:
        with contextlib.suppress(Exception):
            fn()
    # Every worker warmed up; the node's CPU is read (by one worker) while none calls, then all start; at the
    # end it is read once all have stopped: the node CPU read spans exactly the calls timed.
    barrier.wait()
    node_started = node_cpu() if node_cpu is not None else None
    barrier.wait()
    out.started = now = time.monotonic()
    cpu_started = time.process_time()
    deadline = now + seconds
    while now < deadline:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - a bench counts failures instead of stopping at the first
            out.errors += 1
            if out.first_error is None:
                out.first_error = f"{type(exc).__name__}: {exc}"[:500]
        end = time.monotonic()
        out.latencies.append(end - now)
        now = end
    out.finished = now
    out.cpu = time.process_time() - cpu_started
    barrier.wait()
    if node_cpu is not None and node_started is not None:
        out.node_cpu = node_cpu() - node_started
    return out


def node_cpu_seconds(spec: NodeSpec) -> Callable[[], float]:
    """A reader of the CPU seconds the node's process has used (user + system, from /proc), for `measure`."""
    pid = read_pid(spec)
    if pid is None:
        raise RuntimeError(f"node {spec.name} is not running")
    ticks = os.sysconf("SC_CLK_TCK")

    def read() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime (fields 14 and 15 of stat)

    return read


def _in_threads(fn: Callable[[], object], seconds: float, concurrency: int, warmup: float,
                node_cpu: Callable[[], float] | None = None) -> list[_WorkerResult]:
    barrier = threading.Barrier(concurrency)
    results: list[_WorkerResult | None] = [None] * concurrency

    def run(i: int) -> None:
        results[i] = _work(fn, seconds, warmup, barrier, node_cpu if i == 0 else None)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]


def _fresh_process_database() -> None:
    """In a forked child: the parent's driver connections and I/O thread did not survive the fork, and
    api.db.get_db() would rebuild from the environment (another keyspace), so install a new Database with the
    settings of the one the parent had installed."""
    from api import db as db_module

    inherited = db_module._db
    if inherited is not None:
        db_module.set_db(Database(inherited.settings, keyspace=inherited.keyspace))


def _in_processes(fn: Callable[[], object], seconds: float, concurrency: int, warmup: float,
                  node_cpu: Callable[[], float] | None = None) -> list[_WorkerResult]:
    # fork: `fn` (usually a closure) is inherited, never pickled. It must reach Cassandra through
    # api.db.get_db() (re-made in each child), never through a Database object of the parent's.
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(concurrency)
    pipes, procs = [], []
    for i in range(concurrency):
        receiver, sender = ctx.Pipe(duplex=False)

        def child(sender=sender, reader=node_cpu if i == 0 else None) -> None:
            _fresh_process_database()
            res = _work(fn, seconds, warmup, barrier, reader)
            sender.send((res.latencies.tobytes(), res.errors, res.first_error, res.started, res.finished, res.cpu,
                         res.node_cpu))
            sender.close()

        proc = ctx.Process(target=child, daemon=True)
        proc.start()
        sender.close()
        pipes.append(receiver)
        procs.append(proc)
    results = []
    deadline = time.monotonic() + warmup + seconds + 120  # a child stuck in fn must not hang the bench
    try:
        for receiver, proc in zip(pipes, procs, strict=True):
            if not receiver.poll(max(0.0, deadline - time.monotonic())):
                raise RuntimeError("a measuring process did not report in time (fn stuck?)")
            try:
                raw, errors, first_error, started, finished, cpu, node_seconds = receiver.recv()
            except EOFError:
                proc.join()
                raise RuntimeError(f"a measuring process exited with {proc.exitcode} before reporting") from None
            latencies = array.array("d")
            latencies.frombytes(raw)
            results.append(_WorkerResult(latencies, errors, first_error, started, finished, cpu, node_seconds))
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
    return results


def measure(fn: Callable[[], object], *, seconds: float, concurrency: int, mode: str = DEFAULT_MODE,
            warmup: float = 1.0, node_cpu: Callable[[], float] | None = None) -> dict[str, Any]:
    """Call `fn()` in a loop from `concurrency` threads (or forked processes) for `seconds` each, after an
    untimed warm-up of `warmup` seconds per worker; every call is timed, failed ones included (and counted).

    Returns p50_ms, p99_ms, max_ms, mean_ms, requests (calls in the window), rate (calls per second of the
    window), errors, first_error, concurrency, seconds, mode, and cpu_ms_per_call: the CPU the measuring
    process(es) spent per call (with an in-process Flask client, the client's and the app's: what a request
    costs the machine besides the node, less sensitive to the machine's other load than latency is). With
    `node_cpu` (see `node_cpu_seconds`), also node_cpu_ms_per_call: the node's CPU over the window per call
    (API and node share this machine's cores: together they are what one call costs it).
    """
    if concurrency < 1 or seconds <= 0:
        raise ValueError("concurrency must be >= 1 and seconds > 0")
    if mode == "threads":
        results = _in_threads(fn, seconds, concurrency, warmup, node_cpu)
    elif mode == "processes":
        results = _in_processes(fn, seconds, concurrency, warmup, node_cpu)
    else:
        raise ValueError(f"mode {mode!r}: threads or processes")
    latencies = sorted(x for r in results for x in r.latencies)
    window = max(r.finished for r in results) - min(r.started for r in results)
    errors = sum(r.errors for r in results)
    ms = 1000.0
    node_seconds = next((r.node_cpu for r in results if r.node_cpu is not None), None)
    return {
        "p50_ms": round(_percentile(latencies, 0.50) * ms, 3),
        "p99_ms": round(_percentile(latencies, 0.99) * ms, 3),
        "max_ms": round((latencies[-1] if latencies else 0.0) * ms, 3),
        "mean_ms": round((sum(latencies) / len(latencies) if latencies else 0.0) * ms, 3),
        "requests": len(latencies),
        "rate": round(len(latencies) / window, 1) if window > 0 else 0.0,
        "errors": errors,
        "first_error": next((r.first_error for r in results if r.first_error), None),
        "concurrency": concurrency,
        "seconds": seconds,
        "mode": mode,
        # Threads share one process (each worker saw all of its CPU over about the same window): the largest.
        "cpu_ms_per_call": round((max(r.cpu for r in results) if mode == "threads" else sum(r.cpu for r in results))
                                 / len(latencies) * ms, 3) if latencies else 0.0,
        **({"node_cpu_ms_per_call": round(node_seconds / len(latencies) * ms, 3) if latencies else 0.0}
           if node_seconds is not None else {}),
    }


# ------------------------------------------------------------------------------------------------ node log

# What a read over too many tombstones, or a failed read, leaves in Cassandra 5.0's system.log:
#   WARN  ReadCommand - Read 3000 live rows and 2000 tombstone cells for query ... (see tombstone_warn_threshold)
#   ERROR ... Scanned over 100001 tombstones during query ...; query aborted (see tombstone_failure_threshold)
#   WARN  MonitoringTask - Some operations timed out, details available at debug level (debug.log)
LOG_PATTERN = re.compile(
    r"tombstone|TombstoneOverwhelming|ReadFailure|ReadTimeout|operations timed out|query aborted", re.IGNORECASE)
_RECORD_START = re.compile(r"^(TRACE|DEBUG|INFO|WARN|ERROR)\s")


class LogOffset(int):
    """A position in system.log that also remembers which file it was in (its inode), so a roll-over since
    is noticed even when the new file has grown past the position."""

    inode: int | None = None


def log_offset(node: NodeSpec) -> LogOffset:
    """Where the node's system.log ends now: take it before the measured phase, pass it to tombstone_warnings."""
    try:
        stat = node.log_file.stat()
    except FileNotFoundError:
        return LogOffset(0)
    offset = LogOffset(stat.st_size)
    offset.inode = stat.st_ino
    return offset


def _rolled_logs(node: NodeSpec) -> list[Path]:
    # logback (api/node/config.py) rolls system.log at 50 MB into system.log.<date>.<i>.zip; newest last.
    def order(path: Path) -> tuple[str, int]:
        parts = path.name.split(".")  # system, log, <date>, <i>, zip
        return parts[2], int(parts[3]) if parts[3].isdigit() else 0

    return sorted(node.log_file.parent.glob("system.log.*.zip"), key=order)


def _log_text_since(node: NodeSpec, since_offset: int) -> str:
    current = node.log_file.read_bytes() if node.log_file.exists() else b""
    inode = node.log_file.stat().st_ino if current else None
    rolled_over = len(current) < since_offset or (
        getattr(since_offset, "inode", None) is not None and since_offset.inode != inode)
    if not rolled_over:
        text = current[since_offset:]
    else:
        # The file rolled over since the offset: the rest of the newest archive, then all of the new file.
        # (More than one roll-over within a measured phase, 50 MB of log, would lose the middle archives.)
        rolled = _rolled_logs(node)
        text = current
        if rolled:
            with zipfile.ZipFile(rolled[-1]) as archive:
                text = archive.read(archive.namelist()[0])[since_offset:] + current
    # A line still being written at the end is left for the next call.
    return text[: text.rfind(b"\n") + 1].decode("utf-8", errors="replace")


def tombstone_warnings(node: NodeSpec, since_offset: int) -> list[str]:
    """WARN/ERROR records of the node's system.log since `since_offset` about tombstones and failed or timed-out
    reads: the first line of each record (a stack trace's later lines are left out)."""
    found = []
    for line in _log_text_since(node, since_offset).splitlines():
        start = _RECORD_START.match(line)
        if start and start.group(1) in ("WARN", "ERROR") and LOG_PATTERN.search(line):
            found.append(line)
    return found


# ------------------------------------------------------------------------------------------------ partitions

_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_PROCESSING = re.compile(r"^Processing (\w+)\.(\w+)-([0-9a-f]{32}) #(\S+)")
_PARTITION = re.compile(r"^\s+Partition: '(.*)' \(([0-9a-f]*)\) (?:live|not live), size: ([\d.]+ \w+), "
                        r"rows: (\d+), cells: (\d+), tombstones: (\d+)")
_SUMMARY_MAX = re.compile(r"^\s+max\s+([\d.]+ \w+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$")
_HISTOGRAM_MAX = re.compile(r"^Max\s+(?:[\d.]+\s+){3}([\d.]+)\s+([\d.]+)\s*$")


def _bytes(pretty: str) -> int:
    number, unit = pretty.split()
    return round(float(number) * _UNITS[unit])


@dataclasses.dataclass
class _Piece:
    rows: int = 0
    cells: int = 0
    tombstones: int = 0
    bytes: int = 0
    sstables: int = 0

    def add(self, rows: int, cells: int, tombstones: int, size: int) -> None:
        self.rows += rows
        self.cells += cells
        self.tombstones += tombstones
        self.bytes += size
        self.sstables += 1


def parse_sstable_partitions(report: str) -> dict[str, dict[str, Any]]:
    """`sstablepartitions` text report -> per table: max_rows, max_tombstones, max_bytes_sstable (the largest
    single-SSTable figures of any partition, from each SSTable's summary) and `pieces`: the partitions listed
    above the thresholds, summed per key over SSTables."""
    tables: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for line in report.splitlines():
        if m := _PROCESSING.match(line):
            current = tables.setdefault(m.group(2), {"max_rows": 0, "max_tombstones": 0, "max_cells": 0,
                                                     "max_bytes_sstable": 0, "sstables": 0, "pieces": {}})
            current["sstables"] += 1
        elif current is None:
            continue
        elif m := _PARTITION.match(line):
            key = m.group(1)
            current["pieces"].setdefault(key, _Piece()).add(int(m.group(4)), int(m.group(5)), int(m.group(6)),
                                                            _bytes(m.group(3)))
        elif m := _SUMMARY_MAX.match(line):
            current["max_bytes_sstable"] = max(current["max_bytes_sstable"], _bytes(m.group(1)))
            current["max_rows"] = max(current["max_rows"], int(m.group(2)))
            current["max_cells"] = max(current["max_cells"], int(m.group(3)))
            current["max_tombstones"] = max(current["max_tombstones"], int(m.group(4)))
    return tables


def parse_histogram_max(report: str) -> tuple[int, int]:
    """`nodetool tablehistograms` -> (partition size, cell count) of its Max line (0, 0 for a table without
    SSTables)."""
    for line in report.splitlines():
        if m := _HISTOGRAM_MAX.match(line.strip()):
            return round(float(m.group(1))), round(float(m.group(2)))
    return 0, 0


def _table_stats(node: NodeSpec, keyspace: str, tables: list[str]) -> dict[str, dict[str, Any]]:
    report = json.loads(nodetool(node, "tablestats", "-F", "json", *(f"{keyspace}.{t}" for t in tables)))
    return report.get(keyspace, {}).get("tables", {})


def _scan(node: NodeSpec, keyspace: str, tables: list[str], min_rows: int, attempts: int = 3
          ) -> dict[str, dict[str, Any]]:
    """sstablepartitions over the tables' folders; a compaction that removes a file mid-scan gets a retry."""
    base = keyspace_data_dir(node, keyspace)
    folders = [p for t in tables for p in sorted(base.glob(f"{t}-*")) if any(p.glob("*-Data.db"))]
    if not folders:
        return {}
    for attempt in range(attempts):
        try:
            return parse_sstable_partitions(sstable_partitions(node, folders, min_rows=min_rows,
                                                               min_tombstones=TOMBSTONE_WARN))
        except NodeError:
            if attempt == attempts - 1:
                raise
            time.sleep(2)
    return {}


def largest_partitions(node: NodeSpec, keyspace: str, tables: Iterable[str] | None = None, *,
                       compact: bool = False, scan: bool = True, min_rows: int = 1_000, top: int = 3
                       ) -> dict[str, dict[str, Any]]:
    """Each table's largest partition, as the node reports it, after `nodetool flush <keyspace>` (and, with
    `compact`, a major compaction of each table, which makes the per-partition sums exact).

    Per table:
    - max_partition_bytes: nodetool tablestats `compacted_partition_maximum_bytes` (serialized, uncompressed;
      a histogram bucket's upper bound, per SSTable);
    - max_cells: nodetool tablehistograms, Max of "Cell Count" (regular-column cells, not rows; see module doc);
    - partitions: nodetool's estimate of the partition count; sstables: live SSTables;
    - with `scan` (sstablepartitions over the table's files): max_rows and max_tombstones of one partition
      (row entries include deleted rows), summed over SSTables for partitions of at least `min_rows` rows or
      1,000 tombstones; largest: the `top` such partitions by rows, with key, rows, cells, tombstones, bytes
      and how many SSTables hold pieces of them.
    """
    nodetool(node, "flush", keyspace)
    if tables is None:
        stats = json.loads(nodetool(node, "tablestats", "-F", "json", keyspace)).get(keyspace, {}).get("tables", {})
        tables = sorted(stats)
    tables = list(tables)
    if not tables:
        return {}
    if compact:
        nodetool(node, "compact", keyspace, *tables, timeout=3600)
    stats = _table_stats(node, keyspace, tables)
    scanned = _scan(node, keyspace, tables, min_rows) if scan else {}
    out: dict[str, dict[str, Any]] = {}
    for table in tables:
        if table not in stats:
            raise NodeError(f"nodetool tablestats has no table {keyspace}.{table}")
        st = stats[table]
        _size, cells = parse_histogram_max(nodetool(node, "tablehistograms", f"{keyspace}.{table}"))
        entry: dict[str, Any] = {
            "max_partition_bytes": int(st.get("compacted_partition_maximum_bytes") or 0),
            "max_cells": cells,
            "partitions": int(st.get("number_of_partitions_estimate") or 0),
            "sstables": int(st.get("sstable_count") or 0),
        }
        if scan:
            found = scanned.get(table, {"max_rows": 0, "max_tombstones": 0, "pieces": {}})
            pieces: dict[str, _Piece] = found["pieces"]
            ranked = sorted(pieces.items(), key=lambda kv: (-kv[1].rows, -kv[1].tombstones, kv[0]))
            entry["max_rows"] = max([found["max_rows"], *(p.rows for p in pieces.values())])
            entry["max_tombstones"] = max([found["max_tombstones"], *(p.tombstones for p in pieces.values())])
            entry["largest"] = [{"key": key, **dataclasses.asdict(piece)} for key, piece in ranked[:top]]
        out[table] = entry
    return out


# ------------------------------------------------------------------------------------------------ results


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Path | UUID | Decimal):
        return str(value)
    if isinstance(value, set | frozenset):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def write_result(name: str, obj: Mapping[str, Any], *, directory: Path = RESULTS_DIR) -> Path:
    """Write `obj` to `<directory>/<name>-<UTC timestamp>.json` (never over an earlier file) and print it."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name):
        raise ValueError(f"result name {name!r}: letters, digits, '_', '.', '-'")
    text = json.dumps(obj, indent=2, default=_json_default)
    directory.mkdir(parents=True, exist_ok=True)
    stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    for n in range(1, 1000):
        path = directory / f"{name}-{stamp}{'' if n == 1 else f'-{n}'}.json"
        try:
            with path.open("x") as out:  # "x": two results of the same second never overwrite each other
                out.write(text + "\n")
            break
        except FileExistsError:
            continue
    print(text, flush=True)
    sys.stdout.flush()
    return path


# ------------------------------------------------------------------------------------------------ gunicorn


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclasses.dataclass
class Served:
    """What `served` started: gunicorn's port and master process, and the processes started beside it (by name)."""

    port: int
    master: subprocess.Popen
    beside: dict[str, subprocess.Popen]


def _ready(port: int) -> bool:
    """Whether /readyz answers 200 now."""
    with contextlib.suppress(OSError, http.client.HTTPException):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.request("GET", "/readyz")
            response = conn.getresponse()
            response.read()
            return response.status == 200
        finally:
            conn.close()
    return False


def _stop(procs: Iterable[subprocess.Popen]) -> None:
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def served(settings: Settings, logs: Path, *, workers: int = 3, threads: int = 8,
           env: Mapping[str, str] | None = None, app: str = "api.wsgi:app", app_log: str | None = None,
           beside: Mapping[str, Sequence[str]] | None = None, ready_timeout: float = 60.0,
           root: Path = ROOT) -> Iterator[Served]:
    """gunicorn with the project's gunicorn.conf.py serving `app` on the node and keyspace of `settings`, on a free
    loopback port, `workers` x `threads`; stopped on exit. `root`: the code served (another checkout of the
    project, e.g. an older commit's worktree, to compare with).

    - `env`: values over the defaults set here (CHRONICLE_LOG_LEVEL=WARNING, no access log, no background
      workers, no control socket, Prometheus' directory under `logs`): tokens, CHRONICLE_LOG_LEVEL=INFO with an
      access log file to measure the production defaults, ...;
    - `app_log`: a file under `logs` for gunicorn's stdout (the app's request log) apart from its stderr
      (gunicorn.log); by default both go to gunicorn.log;
    - `beside`: name -> command started with the same environment (e.g. `chronicle tagging worker`), its output
      in `logs/<name>.log`, stopped before gunicorn.
    Ready when /readyz answered 200 2 x `workers` times in a row (by then every worker has likely connected).
    """
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "metrics").mkdir(exist_ok=True)
    port = free_port()
    full_env = {**os.environ, "CHRONICLE_CASSANDRA_HOSTS": ",".join(settings.contact_points),
                "CHRONICLE_CASSANDRA_PORT": str(settings.cassandra_port), "CHRONICLE_KEYSPACE": settings.keyspace,
                "CHRONICLE_BIND": f"127.0.0.1:{port}", "CHRONICLE_WORKERS": str(workers),
                "CHRONICLE_THREADS": str(threads), "CHRONICLE_LOG_LEVEL": "WARNING", "CHRONICLE_ACCESS_LOG": "",
                "CHRONICLE_BACKGROUND_WORKERS": "0", "PROMETHEUS_MULTIPROC_DIR": str(logs / "metrics"),
                "CHRONICLE_CONTROL_SOCKET": "", "PYTHONPATH": str(root), **(env or {})}
    with contextlib.ExitStack() as files:
        err = files.enter_context((logs / "gunicorn.log").open("ab"))
        out = files.enter_context((logs / app_log).open("ab")) if app_log else err
        master = subprocess.Popen([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", app], cwd=root, env=full_env,
                                  stdout=out, stderr=err)
    started: dict[str, subprocess.Popen] = {}
    try:
        for name, command in (beside or {}).items():
            with (logs / f"{name}.log").open("ab") as sink:
                started[name] = subprocess.Popen(list(command), cwd=root, env=full_env, stdout=sink,
                                                 stderr=subprocess.STDOUT)
        deadline = time.monotonic() + ready_timeout
        streak = 0
        while streak < 2 * workers:
            streak = streak + 1 if _ready(port) else 0
            if time.monotonic() > deadline or master.poll() is not None:
                raise RuntimeError(f"gunicorn did not become ready; see {logs / 'gunicorn.log'}")
            time.sleep(0.2)
        yield Served(port, master, started)
    finally:
        _stop([*started.values(), master])


def settle(node: NodeSpec, keyspace: str, limit: float = 300.0, quiet_checks: int = 3) -> float:
    """Flush `keyspace` and wait until the node has run no compaction for `quiet_checks` checks in a row, 2 s
    apart; the seconds waited. One quiet look right after the flush is not enough: the compactions the flush's new
    sstables call for are scheduled a moment later, and would then run during what comes next (seen: the load's
    35 MB compactions of slack_messages ending inside the retention bench's measured runs)."""
    started = time.perf_counter()
    nodetool(node, "flush", keyspace)
    quiet = 0
    while time.perf_counter() - started < limit:
        report = nodetool(node, "compactionstats")
        pending = re.search(r"^pending tasks\s+(\d+)", report, re.MULTILINE)
        running = re.search(r"^\s*id\s+compaction type", report, re.MULTILINE | re.IGNORECASE)
        quiet = quiet + 1 if pending is not None and int(pending.group(1)) == 0 and running is None else 0
        if quiet >= quiet_checks:
            break
        time.sleep(2)
    return round(time.perf_counter() - started, 1)
