"""Activity days on the local node (issue 11): rebuild throughput, 31-day read latency, bytes on disk.

    .venv/bin/python -m bench.activity [--users 200] [--days 62] [--messages 120000] [--rounds 2000]
                                       [--channels 40] [--seed 11] [--keep]

What it does, in one scratch keyspace (dropped after unless `--keep`):

1. Archive. Generates a Slack export (tests/fakes/slack_export.py: `--users` humans in 4 time zones, one bot,
   40 public channels, `--days` days from 2026-03-02 (both daylight-saving changes inside), `--messages`
   messages with threads, reactions, edits and files) and imports it with `chronicle slack import-export` in a
   child process. The import writes the activity index (slack_user_activity) beside the messages; nothing else
   is loaded. The node is left to finish its compactions before anything is timed.
2. Rebuild throughput. `chronicle activity rebuild --team T --from <first day> --to <last day> --quiet
   --restart` in a child process: wall time, and account-days per second = accounts (every user of the
   workspace, as the command counts them) x days of the range / wall seconds; its JSON summary (days_written,
   events, raw_bytes, stored_bytes) is kept. Then the same rebuild in this process (service.plan_rebuild +
   service.run_unit per unit, with Archive.collect timed) separates the command's start-up (interpreter,
   imports, connecting: also timed alone with `rebuild --help`) from the work, and a non-writing pass
   (build_days with dry_run) splits the run into reading the archive (collect), cutting + encoding, and the
   rest (the writes). Target: >= 2,000 account-days/s.
   Every stored day is then read back and decoded with codec.decode. A day the codec refuses is counted
   (`undecodable_days`): its 31-day windows are left out of the read targets (`reads.windows`), and for the
   comparison of sizes its events are taken from the archive again.
3. Read latency of a 31-day range with the events decoded: service.read(Archive.slack(T), user, 31 consecutive
   days, contiguous=True, summary=False) for (user, window) pairs drawn at random among those with at least one
   stored day and none undecodable; `--rounds` timed reads per setting after an untimed warm-up: concurrency 1
   (back to back), concurrency 8 in threads (8 threads of `--rounds`/8 reads each, one Database shared: the
   GIL serialises the decoding), and concurrency 8 in forked processes (each with its own Cluster, as gunicorn
   workers are); then the route
   GET /slack/teams/{team}/users/{user}/activity?from=..&to=.. through the Flask test client of
   api.app.create_app (a workspace token without the private scope; request log at WARNING) at concurrency 1.
   p50/p99/max/mean per setting. Target: p99 <= 10 ms. The data set is small and hot (page cache, chunk
   cache): this is the CPU cost of a read, the best case for the disk.
4. Bytes on disk. `nodetool flush` + a major compaction of activity_days, then its "Space used (live)"
   (nodetool tablestats) / stored account-days. For comparison, every decoded event of every stored day is
   written as one row of a table `activity_rows ((archive, account, day), at, seq)` with one column per event
   field (Cassandra's default compaction and LZ4 compression, as activity_days has), flushed and compacted the
   same way: bytes per account-day and per event for both, and their ratio.

Prints one JSON object and writes it under bench/results/ (bench/scale_common.write_result). Progress and each
part's figures go to stderr as they are known. About 4-5 minutes on a 2-core machine with the defaults.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from api.activity import calendar, codec, service, store
from api.activity import events as ev
from api.activity.events import FIELDS
from api.activity.service import Archive
from api.db import Database, Statement, without_none
from api.node.config import NodeSpec
from api.node.tools import keyspace_data_dir, nodetool
from api.observability import configure_logging
from bench.scale_common import _percentile, local_node, scratch_keyspace, settle, write_result
from bench.slack_history import CHRONICLE, _env, _measured, _note
from tests.fakes.slack_export import ExportSpec, write_export

TEAM = "TBENCHACTIVITY"
FIRST_DAY = date(2026, 3, 2)  # a Monday; the US (03-08) and EU (03-29) daylight-saving changes fall inside
READ_DAYS = 31
READ_THREADS = 8
TOKEN = "bench-activity-token"
ROWS_TABLE = "activity_rows"

ROWS_DDL = f"""CREATE TABLE IF NOT EXISTS {ROWS_TABLE} (
    archive text, account text, day date, at bigint, seq int,
    kind text, channel text, ts bigint, thread_ts bigint, emoji text, user text, words int, files int,
    subtype text, post bigint,
    PRIMARY KEY ((archive, account, day), at, seq))"""
# The bench's own table: declared here, not in api/ (it is no product table and has no owner there).
PUT_ROW = Statement(
    f"INSERT INTO {ROWS_TABLE} (archive, account, day, at, seq, kind, channel, ts, thread_ts, emoji, user, words, "
    "files, subtype, post) VALUES (:archive, :account, :day, :at, :seq, :kind, :channel, :ts, :thread_ts, :emoji, "
    ":user, :words, :files, :subtype, :post)")
_ROW_FIELDS = frozenset(FIELDS) - {"at"}
SELECT_DAYS = Statement(
    "SELECT day, events, codec, event_count, raw_size FROM activity_days WHERE archive = ? AND account = ? "
    "AND year = ?", name="SELECT activity_days (bench: whole partition)")


# ------------------------------------------------------------------------------------------------ helpers

def _latency(latencies: list[float], wall: float) -> dict[str, Any]:
    ordered = sorted(latencies)
    ms = 1000.0
    return {"reads": len(ordered), "p50_ms": round(_percentile(ordered, 0.50) * ms, 2),
            "p99_ms": round(_percentile(ordered, 0.99) * ms, 2), "max_ms": round(ordered[-1] * ms, 2),
            "mean_ms": round(sum(ordered) / len(ordered) * ms, 2), "reads_per_s": round(len(ordered) / wall, 1)}


def timed_calls(fn: Callable[[Any], object], targets: list[Any], *, concurrency: int, warmup: int = 200
                ) -> dict[str, Any]:
    """Call `fn(target)` once per target, from `concurrency` threads each taking every concurrency-th target
    back to back, after an untimed warm-up (`warmup` calls in all, shared by the threads, so per-thread state
    such as the codec's zstd objects exists before the clock starts); p50/p99/max/mean of every call and
    calls/s over the timed window."""
    shares: list[list[float]] = [[] for _ in range(concurrency)]
    barrier = threading.Barrier(concurrency + 1)
    failures: list[BaseException] = []

    def run(i: int) -> None:
        out = shares[i]
        try:
            for target in targets[i:warmup:concurrency]:
                fn(target)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread
            failures.append(exc)
        barrier.wait()
        if failures:
            return
        try:
            for target in targets[i::concurrency]:
                started = time.perf_counter()
                fn(target)
                out.append(time.perf_counter() - started)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(concurrency)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    if failures:
        raise failures[0]
    return {"concurrency": concurrency, **_latency([x for share in shares for x in share], wall)}


def table_on_disk(node: NodeSpec, keyspace: str, table: str) -> dict[str, Any]:
    """Flush and major-compact one table, then its size as the node reports it (Space used (live)) and the
    bytes of its Data.db files."""
    nodetool(node, "flush", keyspace, table)
    nodetool(node, "compact", keyspace, table, timeout=1800)
    stats = json.loads(nodetool(node, "tablestats", "-F", "json", f"{keyspace}.{table}"))
    st = stats[keyspace]["tables"][table]
    data = sum(p.stat().st_size for folder in keyspace_data_dir(node, keyspace).glob(f"{table}-*")
               for p in folder.glob("*-Data.db"))
    return {"space_used_live": int(st["space_used_live"]), "data_db_bytes": data,
            "sstables": int(st["sstable_count"]), "compression_ratio": round(float(st["sstable_compression_ratio"]), 3),
            "partitions_estimate": int(st["number_of_partitions_estimate"])}


# ------------------------------------------------------------------------------------------------ parts

@dataclasses.dataclass(frozen=True)
class TimedArchive(Archive):
    """An Archive that adds up the seconds spent in `collect` (the archive reads of a build) in `spent[0]`."""

    spent: list[float] = dataclasses.field(default_factory=lambda: [0.0], compare=False)

    def collect(self, db: Database, windows: dict[str, tuple[int, int]], cuts: dict[str, list[int]] | None = None
                ) -> dict[str, list[dict[str, Any]]]:
        started = time.perf_counter()
        try:
            return super().collect(db, windows, cuts)
        finally:
            self.spent[0] += time.perf_counter() - started


def make_archive(db: Database, spec: ExportSpec, workdir: Path) -> dict[str, Any]:
    """Generate the export and import it with the CLI in a child process."""
    path = workdir / "activity-export.zip"
    started = time.perf_counter()
    summary = write_export(path, spec)
    out: dict[str, Any] = {
        "generated": {"messages": summary.messages, "users": summary.users, "channels": summary.channels,
                      "threads": summary.threads, "replies": summary.replies, "reactions": summary.reaction_users,
                      "edited": summary.edited, "files": summary.files, "zip_mb": round(summary.zip_bytes / 1e6, 1),
                      "seconds": round(time.perf_counter() - started, 1)}}
    seconds, rss, stdout = _measured([CHRONICLE, "slack", "import-export", str(path), "--no-progress"],
                                     _env(db.keyspace))
    report = json.loads(stdout)
    out["import"] = {"seconds": round(seconds, 1), "messages_per_s": round(summary.messages / seconds),
                     "peak_rss_mb": rss, "imported": {k: v for k, v in report.items() if isinstance(v, int)}}
    path.unlink()
    _note("archive", out)
    return out


def bench_rebuild(db: Database, first: date, last: date) -> dict[str, Any]:
    """The rebuild command in a child, then in this process, then split (reads / encode / writes)."""
    days = (last - first).days + 1
    args = [CHRONICLE, "activity", "rebuild", "--team", TEAM, "--from", first.isoformat(), "--to", last.isoformat(),
            "--quiet", "--restart"]
    seconds, rss, stdout = _measured(args, _env(db.keyspace))
    summary = json.loads(stdout)
    n_account_days = summary["accounts"] * days
    cli = {"wall_seconds": round(seconds, 2), "peak_rss_mb": rss, "account_days": n_account_days,
           "account_days_per_s": round(n_account_days / seconds), "summary": summary,
           "events_per_written_day": round(summary["events"] / max(1, summary["days_written"]), 1),
           "raw_bytes_per_stored_byte": round(summary["raw_bytes"] / max(1, summary["stored_bytes"]), 2)}
    _note("rebuild_cli", cli)
    startup, _rss, _out = _measured([CHRONICLE, "activity", "rebuild", "--help"], _env(db.keyspace))

    # In this process: the same run (start-up and connecting left out), with the archive reads timed.
    archive = TimedArchive("slack", TEAM)
    started = time.perf_counter()
    plan = service.plan_rebuild(db, archive, first, last, restart=True)
    planned = time.perf_counter()
    built = service.Built()
    for unit in plan.units:
        built.add(service.run_unit(db, plan, unit))
    done = time.perf_counter()
    collect_s = archive.spent[0]
    in_process = {"seconds": round(done - started, 2), "plan_seconds": round(planned - started, 3),
                  "units": len(plan.units), "account_days": len(plan.accounts) * days,
                  "account_days_per_s": round(len(plan.accounts) * days / (done - started)),
                  "built": built.as_dict()}
    _note("rebuild_in_process", in_process)

    # The same builds without writing (dry_run): reads + cutting + encoding; the rest of the run is the writes.
    archive.spent[0] = 0.0
    dry_started = time.perf_counter()
    for _number, unit_days, accounts in plan.units:
        service.build_days(db, archive, {a: unit_days for a in accounts}, plan.zones,
                           keep_empty=lambda _a, _d: False, dry_run=True)
    dry_s = time.perf_counter() - dry_started
    split = {"collect_seconds": round(collect_s, 2), "cut_and_encode_seconds": round(dry_s - archive.spent[0], 2),
             "writes_and_progress_seconds": round((done - planned) - collect_s - (dry_s - archive.spent[0]), 2),
             "note": "collect: Archive.collect (index + message reads) in the in-process run; cut_and_encode: a "
                     "build_days(dry_run) pass minus its own collect; writes: the rest of the in-process run"}
    out = {"days": days, "cli": cli, "cli_startup_seconds": round(startup, 2),
           "cli_wall_minus_in_process_seconds": round(seconds - (done - started), 2),
           "in_process": in_process, "split": split}
    _note("rebuild_split", split)
    return out


@dataclasses.dataclass
class Day:
    """One stored activity day as the bench needs it."""

    event_count: int
    stored_size: int  # bytes of the blob
    raw_size: int  # bytes of the same events as compact JSON
    decoded: bool  # False: codec.decode refused the stored blob
    events: list[dict[str, Any]] | None = None  # only when asked for (see account_days)


def _archive_events(db: Database, account: str, day: date, zone_name: str | None) -> list[dict[str, Any]]:
    """The events a rebuild encodes for one account-day, taken from the archive (for days that do not decode)."""
    tz = calendar.zone(zone_name)
    found = Archive.slack(TEAM).collect(db, {account: calendar.window(day, tz)})
    return ev.in_order(e for e in found.get(account, ()) if calendar.local_day(e["at"], tz) == day)


def account_days(db: Database, account: str, zone_name: str | None, first: date, last: date, *,
                 with_events: bool) -> dict[date, Day]:
    """The stored days of one account in [first, last], each blob decoded with codec.decode; `with_events`
    keeps the events (a day the codec refuses gets the same events from the archive again)."""
    archive = Archive.slack(TEAM).name
    futures = [db.execute_async(SELECT_DAYS, (archive, account, year)) for year in range(first.year, last.year + 1)]
    found: dict[date, Day] = {}
    for future in futures:
        for row in future.result():
            day = row.day if isinstance(row.day, date) else row.day.date()
            if not first <= day <= last:
                continue
            try:
                events, decoded = codec.decode(row.events, row.codec), True
            except codec.UnknownCodec:
                events, decoded = None, False
            if with_events and events is None:
                events = _archive_events(db, account, day, zone_name)
                if len(events) != row.event_count:
                    raise RuntimeError(f"{account} {day}: {len(events)} events in the archive, {row.event_count} "
                                       "stored")
            found[day] = Day(row.event_count, len(row.events), row.raw_size, decoded,
                             events if with_events else None)
    return found


def read_targets(days: dict[str, dict[date, Day]], first: date, last: date, n: int, seed: int = 7
                 ) -> tuple[list[tuple[str, list[date]]], dict[str, int]]:
    """`n` (account, 31 consecutive days) pairs drawn among the windows holding at least one stored day and
    no day the codec refuses (a read of such a window fails: those are counted, not read)."""
    starts = calendar.date_range(first, max(first, last - timedelta(READ_DAYS - 1)))
    candidates, refused = [], 0
    for account, stored in sorted(days.items()):
        for start in starts:
            window = calendar.date_range(start, start + timedelta(READ_DAYS - 1))
            if not any(d in stored for d in window):
                continue
            if any(d in stored and not stored[d].decoded for d in window):
                refused += 1
            else:
                candidates.append((account, window))
    if not candidates:
        raise RuntimeError("no account has a readable stored day: nothing to read")
    rng = random.Random(seed)
    windows = {"with_activity": len(candidates) + refused, "undecodable": refused}
    return [rng.choice(candidates) for _ in range(n)], windows


def timed_calls_in_processes(make_fn: Callable[[], Callable[[Any], object]], targets: list[Any], *,
                             concurrency: int, warmup: int = 200) -> dict[str, Any]:
    """As timed_calls, from `concurrency` forked processes (as gunicorn serves: one interpreter per worker, no
    GIL shared); each builds its own `fn` with `make_fn()` after the fork (its own Cluster), warms up on its
    share of the first `warmup` targets, waits for the others, then times its share."""
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(concurrency + 1)
    pipes, procs = [], []
    for i in range(concurrency):
        receiver, sender = context.Pipe(duplex=False)

        def child(i: int = i, sender: Any = sender) -> None:
            fn = make_fn()
            for target in targets[i:warmup:concurrency]:
                fn(target)
            barrier.wait()
            latencies = []
            for target in targets[i::concurrency]:
                started = time.perf_counter()
                fn(target)
                latencies.append(time.perf_counter() - started)
            sender.send(latencies)
            sender.close()

        proc = context.Process(target=child, daemon=True)
        proc.start()
        sender.close()
        pipes.append(receiver)
        procs.append(proc)
    barrier.wait(timeout=600)
    started = time.perf_counter()
    shares = [pipe.recv() for pipe in pipes]
    wall = time.perf_counter() - started
    for proc in procs:
        proc.join(timeout=60)
        if proc.exitcode != 0:
            raise RuntimeError(f"a reading process exited {proc.exitcode}")
    return {"concurrency": concurrency, "processes": True, **_latency([x for share in shares for x in share], wall)}


def bench_reads(db: Database, days: dict[str, dict[date, Day]], first: date, last: date, rounds: int
                ) -> dict[str, Any]:
    archive = Archive.slack(TEAM)
    targets, windows = read_targets(days, first, last, rounds)
    per_read = sorted(sum(days[a][d].event_count for d in window if d in days[a]) for a, window in targets)
    out: dict[str, Any] = {"targets": len(targets), "days_per_read": READ_DAYS, "windows": windows,
                           "events_per_read": {"p50": _percentile(per_read, 0.5), "p99": _percentile(per_read, 0.99),
                                               "max": per_read[-1], "mean": round(sum(per_read) / len(per_read), 1)}}

    def read(target: tuple[str, list[date]]) -> None:
        account, window = target
        days = service.read(db, archive, account, window, contiguous=True, summary=False)
        if len(days) != READ_DAYS:
            raise RuntimeError(f"read of {account} gave {len(days)} days")

    out["in_process_c1"] = timed_calls(read, targets, concurrency=1)
    _note("reads_c1", out["in_process_c1"])
    out["in_process_c8"] = timed_calls(read, targets, concurrency=READ_THREADS)
    _note("reads_c8", out["in_process_c8"])

    def reader_in_child() -> Callable[[Any], object]:
        own = Database(db.settings, keyspace=db.keyspace)  # the parent's Cluster did not survive the fork

        def read_own(target: tuple[str, list[date]]) -> None:
            account, window = target
            if len(service.read(own, archive, account, window, contiguous=True, summary=False)) != READ_DAYS:
                raise RuntimeError(f"read of {account}: wrong number of days")
        return read_own

    out["processes_c8"] = timed_calls_in_processes(reader_in_child, targets, concurrency=READ_THREADS)
    _note("reads_c8_processes", out["processes_c8"])

    # The floor: the same CQL read through the driver, rows fetched and not decoded (no blob is opened).
    def raw_reader(database: Database) -> Callable[[Any], object]:
        def raw(target: tuple[str, list[date]]) -> None:
            account, window = target
            for year, wanted in store.days_by_year(window).items():
                list(database.execute(store.SELECT_RANGE, (archive.name, account, year, wanted[0], wanted[-1])))
        return raw

    out["raw_driver_c1"] = timed_calls(raw_reader(db), targets, concurrency=1)
    _note("raw_driver_c1", out["raw_driver_c1"])
    out["raw_driver_processes_c8"] = timed_calls_in_processes(
        lambda: raw_reader(Database(db.settings, keyspace=db.keyspace)), targets, concurrency=READ_THREADS)
    _note("raw_driver_processes_c8", out["raw_driver_processes_c8"])

    from api.app import create_app

    grant = {TOKEN: {"workspaces": [TEAM], "private": False}}
    settings = dataclasses.replace(db.settings, api_tokens=json.dumps(grant), log_level="WARNING")
    app = create_app(settings, database=db)
    client = app.test_client()
    headers = {"Authorization": f"Bearer {TOKEN}"}

    def get(target: tuple[str, list[date]]) -> None:
        account, window = target
        resp = client.get(f"/slack/teams/{TEAM}/users/{account}/activity?from={window[0]}&to={window[-1]}",
                          headers=headers)
        if resp.status_code != 200:
            raise RuntimeError(f"GET activity of {account}: {resp.status_code} {resp.get_data(as_text=True)[:300]}")
        if len(resp.get_json()["days"]) != READ_DAYS:
            raise RuntimeError(f"GET activity of {account}: wrong number of days")

    out["http_c1"] = timed_calls(get, targets, concurrency=1)
    _note("reads_http_c1", out["http_c1"])
    return out


def bench_storage(db: Database, node: NodeSpec, zones: dict[str, str], days: dict[str, dict[date, Day]],
                  first: date, last: date) -> dict[str, Any]:
    """activity_days on disk against the same events as one row each."""
    n_days = sum(len(d) for d in days.values())
    events = sum(s.event_count for d in days.values() for s in d.values())
    blob_bytes = sum(s.stored_size for d in days.values() for s in d.values())
    raw_bytes = sum(s.raw_size for d in days.values() for s in d.values())
    blobs = table_on_disk(node, db.keyspace, "activity_days")
    _note("storage_blobs", blobs)

    db.execute_raw(ROWS_DDL, timeout=60)
    archive = Archive.slack(TEAM).name

    def rows() -> Iterator[tuple[Statement, dict[str, Any]]]:
        # One account's days decoded at a time (holding every event of the range would weigh on the GC).
        for account in sorted(days):
            for day, entry in account_days(db, account, zones.get(account), first, last, with_events=True).items():
                for seq, event in enumerate(entry.events or ()):
                    params = {"archive": archive, "account": account, "day": day, "at": event["at"], "seq": seq}
                    params.update((k, v) for k, v in event.items() if k in _ROW_FIELDS)
                    yield PUT_ROW, without_none(params)

    started = time.perf_counter()
    inserted = db.execute_many(rows(), batch_size=20)  # ~4 kB: under the 5 kB batch warning
    insert_seconds = time.perf_counter() - started
    if inserted != events:
        raise RuntimeError(f"{inserted} rows written for {events} events")
    per_row = table_on_disk(node, db.keyspace, ROWS_TABLE)
    per_row["insert_seconds"] = round(insert_seconds, 1)
    _note("storage_rows", per_row)
    blob_live, rows_live = blobs["space_used_live"], per_row["space_used_live"]
    return {
        "account_days": n_days, "events": events, "events_per_account_day": round(events / n_days, 1),
        "blob_bytes": blob_bytes, "raw_json_bytes": raw_bytes,
        "activity_days": {**blobs, "bytes_per_account_day": round(blob_live / n_days, 1),
                          "bytes_per_event": round(blob_live / events, 2),
                          "blob_bytes_per_account_day": round(blob_bytes / n_days, 1)},
        "activity_rows": {**per_row, "bytes_per_account_day": round(rows_live / n_days, 1),
                          "bytes_per_event": round(rows_live / events, 2)},
        "rows_over_blobs": round(rows_live / blob_live, 2),
    }


# ------------------------------------------------------------------------------------------------ main

def run(args: argparse.Namespace) -> dict[str, Any]:
    spec = ExportSpec(seed=args.seed, team_id=TEAM, messages=args.messages, n_users=args.users,
                      n_channels=args.channels, n_private=0, n_dms=0, n_mpims=0, days=args.days,
                      start=datetime(FIRST_DAY.year, FIRST_DAY.month, FIRST_DAY.day, tzinfo=UTC),
                      thread_share=0.1, reaction_share=0.2, edit_share=0.05, file_share=0.02, pretty=False)
    first, last = FIRST_DAY, FIRST_DAY + timedelta(args.days - 1)
    node = local_node()
    started = time.perf_counter()
    result: dict[str, Any] = {"bench": "activity", "args": vars(args), "team": TEAM, "from": first, "to": last}
    with tempfile.TemporaryDirectory(prefix="chronicle-activity-") as tmp, \
            scratch_keyspace("act", keep=args.keep, request_timeout=60.0) as db:
        result["keyspace"] = db.keyspace
        result["archive"] = make_archive(db, spec, Path(tmp))
        result["settle_after_import_seconds"] = settle(node, db.keyspace)
        result["rebuild"] = bench_rebuild(db, first, last)
        zones = Archive.slack(TEAM).all_accounts(db)
        days = {a: account_days(db, a, tz, first, last, with_events=False) for a, tz in sorted(zones.items())}
        refused = sorted((a, d) for a, stored in days.items() for d, day in stored.items() if not day.decoded)
        result["accounts"] = {"all": len(zones), "with_activity": sum(1 for found in days.values() if found)}
        result["undecodable_days"] = {"count": len(refused), "of": sum(len(found) for found in days.values()),
                                      "accounts": len({a for a, _d in refused}), "first": refused[:5]}
        _note("undecodable_days", result["undecodable_days"])
        result["settle_before_reads_seconds"] = settle(node, db.keyspace)
        result["reads"] = bench_reads(db, days, first, last, args.rounds)
        result["storage"] = bench_storage(db, node, zones, days, first, last)
    result["seconds"] = round(time.perf_counter() - started, 1)
    reads, rebuild, storage = result["reads"], result["rebuild"], result["storage"]
    result["figures"] = {
        "rebuild_account_days_per_s_cli": rebuild["cli"]["account_days_per_s"],
        "rebuild_account_days_per_s_in_process": rebuild["in_process"]["account_days_per_s"],
        "read_31_days_c1_p50_p99_ms": [reads["in_process_c1"]["p50_ms"], reads["in_process_c1"]["p99_ms"]],
        "read_31_days_c8_p50_p99_ms": [reads["in_process_c8"]["p50_ms"], reads["in_process_c8"]["p99_ms"]],
        "http_31_days_c1_p50_p99_ms": [reads["http_c1"]["p50_ms"], reads["http_c1"]["p99_ms"]],
        "disk_bytes_per_account_day_blobs": storage["activity_days"]["bytes_per_account_day"],
        "disk_bytes_per_account_day_rows": storage["activity_rows"]["bytes_per_account_day"],
        "rows_over_blobs": storage["rows_over_blobs"],
    }
    result["verdict"] = {
        "rebuild_>=_2000_account_days_per_s": rebuild["cli"]["account_days_per_s"] >= 2000,
        "read_p99_<=_10ms_c1": reads["in_process_c1"]["p99_ms"] <= 10,
        "read_p99_<=_10ms_c8": reads["in_process_c8"]["p99_ms"] <= 10,
        "http_p99_<=_10ms_c1": reads["http_c1"]["p99_ms"] <= 10,
    }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=200, help="active human users of the workspace")
    parser.add_argument("--days", type=int, default=62, help="days of history (the rebuilt range)")
    parser.add_argument("--messages", type=int, default=120_000, help="messages in the export")
    parser.add_argument("--channels", type=int, default=40, help="public channels")
    parser.add_argument("--rounds", type=int, default=2000, help="timed reads per read setting")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--keep", action="store_true", help="keep the scratch keyspace")
    args = parser.parse_args(argv)
    if args.days < READ_DAYS:
        parser.error(f"--days must be at least {READ_DAYS}")
    # Logs (the driver's server warnings, the app's) on stderr: stdout is the result. Installed before
    # create_app, whose own set-up then leaves this handler in place.
    configure_logging("WARNING", stream=sys.stderr)
    write_result("activity", run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
