"""Activity days: build them from the archive, rebuild what changed, read them back. What the CLI, the worker
and the HTTP routes call.

An archive is `slack:<team_id>` or `network:<network>`; its source module (api/slack/activity.py,
api/network/activity.py) says which accounts it has, their time zones, and their events in a time window.
A build reads the events of a set of accounts and local days, cuts them into days in each account's zone, and
writes every day whole, in one statement each, at the time its reads started.
"""

from __future__ import annotations

import dataclasses
import hashlib
import multiprocessing
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import date, timedelta
from typing import Any

from api.activity import calendar, dirty, store
from api.activity import events as ev
from api.config import Settings
from api.db import Database
from api.network import activity as network_activity
from api.slack import activity as slack_activity
from api.worker_loop import Counts

SLICE_DAYS = 31  # a rebuild reads at most this many days of an account at a time
CHUNK_ACCOUNTS = 500  # accounts per unit of a rebuild run (its progress is recorded per unit)


class UnknownArchive(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Archive:
    side: str  # "slack" | "network"
    scope: str  # the team id or the network name

    @property
    def name(self) -> str:
        return f"{self.side}:{self.scope}"

    @classmethod
    def parse(cls, name: str) -> Archive:
        side, _, scope = name.partition(":")
        if side not in ("slack", "network") or not scope:
            raise UnknownArchive(f"unknown archive {name!r}: expected slack:<team_id> or network:<name>")
        return cls(side, scope)

    @classmethod
    def slack(cls, team_id: str) -> Archive:
        return cls("slack", team_id)

    @classmethod
    def network(cls, network: str) -> Archive:
        return cls("network", network)

    def time_zones(self, db: Database, accounts: Iterable[str]) -> dict[str, str]:
        if self.side == "slack":
            found = slack_activity.time_zones(db, self.scope, accounts)
            return {a: calendar.zone_name(tz) for a, tz in found.items()}
        zone = calendar.zone_name(network_activity.time_zone())
        return {a: zone for a in accounts}

    def all_accounts(self, db: Database) -> dict[str, str]:
        """Every account of the archive with its zone name."""
        if self.side == "slack":
            return {a: calendar.zone_name(tz) for a, tz in slack_activity.all_accounts(db, self.scope).items()}
        zone = calendar.zone_name(network_activity.time_zone())
        return {a: zone for a in network_activity.all_accounts(db, self.scope)}

    def collect(self, db: Database, windows: dict[str, tuple[int, int]], cuts: dict[str, list[int]] | None = None
                ) -> dict[str, list[dict[str, Any]]]:
        """The events of each account in its window; `cuts`: the starts of its local days there (µs)."""
        if self.side == "slack":
            return slack_activity.collect(db, self.scope, windows, cuts=cuts)
        return network_activity.collect(db, self.scope, windows)


@dataclasses.dataclass
class Built(Counts):
    accounts: int = 0
    days_written: int = 0  # rows written (or, in a dry run, that would be)
    events: int = 0
    raw_bytes: int = 0
    stored_bytes: int = 0


def build_days(db: Database, archive: Archive, wanted: dict[str, list[date]], zones: dict[str, str], *,
               keep_empty: Callable[[str, date], bool], dry_run: bool = False) -> Built:
    """Build and write the days `wanted` ({account: local days}); a day without events is written (empty) only
    where `keep_empty(account, day)` says a stored row must be overwritten."""
    built_at = store.now_us()  # before the reads: a racing build that read later writes later and wins
    windows, cuts = {}, {}
    for account, days in wanted.items():
        tz = calendar.zone(zones.get(account))
        windows[account] = (calendar.day_start_us(min(days), tz), calendar.day_start_us(max(days) + timedelta(1), tz))
        cuts[account] = [calendar.day_start_us(day, tz) for day in calendar.date_range(min(days), max(days))]
    found = archive.collect(db, windows, cuts)
    writes = []
    result = Built(accounts=len(wanted))
    for account, days in wanted.items():
        tz_name = zones.get(account) or "UTC"
        by_day = calendar.cut_into_days(found.get(account, ()), days, calendar.zone(tz_name))
        for day in days:
            day_events = ev.capped(ev.in_order(by_day.get(day, ())))
            if not day_events and not keep_empty(account, day):
                continue
            write = store.day_write(archive.name, account, day, day_events, time_zone=tz_name, built_at_us=built_at)
            writes.append(write)
            result.days_written += 1
            result.events += ev.total(day_events)
            result.stored_bytes += len(write[1][4])
            result.raw_bytes += write[1][9]
    if not dry_run:
        # One batch per account-year partition: one mutation for up to SLICE_DAYS days, each row still whole.
        db.execute_many(writes, batch_size=SLICE_DAYS, partitions_per_batch=1)
    return result


def rebuild_marks(db: Database, archive_name: str, marks: Sequence[dirty.Mark]) -> int:
    """The dirty worker's rebuild: every local day the marks' hours touch, in each account's zone; written even
    when empty (something changed there). Returns the days written."""
    archive = Archive.parse(archive_name)
    zones = archive.time_zones(db, {m.account for m in marks})
    wanted: dict[str, set[date]] = {}
    for mark in marks:
        start, end = mark.span_us
        wanted.setdefault(mark.account, set()).update(
            calendar.days_touching(start, end, calendar.zone(zones.get(mark.account))))
    return rebuild_days(db, archive, wanted, zones)


def rebuild_days(db: Database, archive: Archive, wanted: dict[str, Iterable[date]],
                 zones: dict[str, str] | None = None) -> int:
    """Rebuild these local days of these accounts, each written even when empty; returns the days written."""
    zones = zones if zones is not None else archive.time_zones(db, wanted)
    total = 0
    for account, days in wanted.items():
        for part in spans(days):
            total += build_days(db, archive, {account: part}, zones, keep_empty=lambda _a, _d: True).days_written
    return total


def spans(days: Iterable[date], width: int = SLICE_DAYS) -> Iterator[list[date]]:
    """`days` in order, cut into runs that each lie within `width` calendar days: a build reads its account's
    whole window from its first day to its last, so scattered days (a mark spans a day or two; imported
    history marks days years apart) must not make one build read every day in between."""
    part: list[date] = []
    for day in sorted(set(days)):
        if part and (day - part[0]).days >= width:
            yield part
            part = []
        part.append(day)
    if part:
        yield part


def run_id(archive: Archive, first: date, last: date, accounts: Sequence[str] | None) -> str:
    what = f"{archive.name}|{first}|{last}|{','.join(sorted(accounts)) if accounts else '*'}"
    return hashlib.sha256(what.encode()).hexdigest()[:24]


@dataclasses.dataclass
class RebuildPlan:
    archive: Archive
    first: date
    last: date
    accounts: list[str]
    zones: dict[str, str]
    run_id: str
    units: list[tuple[int, list[date], list[str]]]  # (unit number, days, accounts)
    finished: dict[int, int]


def plan_rebuild(db: Database, archive: Archive, first: date, last: date, accounts: Sequence[str] | None = None,
                 *, restart: bool = False, chunk_accounts: int = CHUNK_ACCOUNTS) -> RebuildPlan:
    """The units of work of a rebuild run (SLICE_DAYS days x CHUNK_ACCOUNTS accounts each) and which of them a
    previous run with the same arguments finished (none with `restart`)."""
    if last < first:
        raise ValueError(f"--to {last} is before --from {first}")
    if accounts:
        chosen = sorted(dict.fromkeys(accounts))
        zones = archive.time_zones(db, chosen)
    else:
        zones = archive.all_accounts(db)
        chosen = sorted(zones)
    rid = run_id(archive, first, last, accounts)
    days = calendar.date_range(first, last)
    units = []
    for s in range(0, len(days), SLICE_DAYS):
        for c in range(0, len(chosen), chunk_accounts):
            units.append((len(units), days[s:s + SLICE_DAYS], chosen[c:c + chunk_accounts]))
    finished = {} if restart else store.finished_chunks(db, archive.name, rid)
    return RebuildPlan(archive, first, last, chosen, zones, rid, units, finished)


def run_unit(db: Database, plan: RebuildPlan, unit: tuple[int, list[date], list[str]], *, dry_run: bool = False
             ) -> Built:
    """Rebuild one unit: its accounts' days (overwriting stored days that are now empty), then record it done."""
    number, days, accounts = unit
    stored = store.stored_days_of(db, plan.archive.name, accounts, days[0], days[-1])
    built = build_days(db, plan.archive, {a: days for a in accounts}, plan.zones,
                       keep_empty=lambda a, d: d in stored[a], dry_run=dry_run)
    if not dry_run:
        store.record_chunk(db, plan.archive.name, plan.run_id, number, len(accounts), built.days_written)
    return built


def run_units(db: Database, plan: RebuildPlan, units: Sequence[tuple[int, list[date], list[str]]], *, jobs: int = 1,
              dry_run: bool = False, done: Callable[[tuple[int, list[date], list[str]], Built], None]) -> None:
    """Run `units` of `plan`, calling `done(unit, built)` as each finishes. With `jobs` > 1 they run in that many
    spawned processes (each with its own Cluster: the driver does not survive a fork); a unit records its own
    progress, so a run killed midway resumes the same way whatever `jobs` was."""
    jobs = max(1, min(jobs, len(units)))
    if jobs == 1:
        for unit in units:
            done(unit, run_unit(db, plan, unit, dry_run=dry_run))
        return
    by_number = {unit[0]: unit for unit in units}
    context = multiprocessing.get_context("spawn")
    with context.Pool(jobs, initializer=_start_job, initargs=(db.settings, db.keyspace, plan, dry_run)) as pool:
        for number, built in pool.imap_unordered(_run_job, list(by_number)):
            done(by_number[number], built)


_job: dict[str, Any] = {}  # in a rebuild job process: its Database, the plan, dry_run


def _start_job(settings: Settings, keyspace: str, plan: RebuildPlan, dry_run: bool) -> None:
    _job.update(db=Database(settings, keyspace=keyspace), plan=plan, dry_run=dry_run)


def _run_job(number: int) -> tuple[int, Built]:
    plan = _job["plan"]
    unit = plan.units[number]
    return number, run_unit(_job["db"], plan, unit, dry_run=_job["dry_run"])


# -- reading ---------------------------------------------------------------------------------------------------

def read(db: Database, archive: Archive, account: str, days: Sequence[date], *, contiguous: bool, summary: bool,
         hidden_channels: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """Every day asked for, in order, with its events (or, with `summary`, counts per kind); a day never built
    or without events is empty. Events in `hidden_channels` (private channels the reader may not see) are left
    out, counts included."""
    # A summary reads the counts kept beside each day, unless channels are hidden (then the events are filtered).
    counts_only = summary and not hidden_channels
    stored = store.read_days(db, archive.name, account, days, contiguous=contiguous, counts_only=counts_only)
    out = []
    for day in sorted(set(days)):
        found = stored.get(day)
        if counts_only:
            entry: dict[str, Any] = {"date": day.isoformat(), "event_count": found.event_count if found else 0,
                                     "counts": dict(sorted(found.kind_counts.items())) if found else {}}
            out.append(entry)
            continue
        day_events = found.events if found is not None else []
        if hidden_channels:
            day_events = [e for e in day_events if e.get("channel") not in hidden_channels]
            count = ev.total(day_events)
        else:
            count = found.event_count if found is not None else 0
        entry = {"date": day.isoformat(), "event_count": count}
        if summary:
            entry["counts"] = ev.counts_by_kind(day_events)
        else:
            entry["events"] = day_events
        out.append(entry)
    return out
