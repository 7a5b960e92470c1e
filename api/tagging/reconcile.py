"""Check (and repair) that every figure equals what the effort log implies, that the log holds an event for
every state an item reached (a request cut short after its transaction leaves the event to its retry; without
a retry, this writes it), and that each team's quota usage equals the items its people hold or finished (a
process killed between taking a unit and claiming an item leaks the unit: the quota is then smaller, never
larger). Repair the usage while the project is quiet: a claim in flight is not counted."""

from __future__ import annotations

from typing import Any

from cassandra import ConsistencyLevel

from api.db import Database, reads_at
from api.tagging import control, effort, figures, items, projects, stamps
from api.tagging.effort import Event

_NOT_SUMS = {"queued"}  # a figure the owner sets from the queue, not a sum over events
# A team's quota unit is held by an item its member holds or finished (skips, expiries, disables give it back).
_UNIT_HOLDING = (items.IN_PROGRESS, items.TAGGED, items.VERIFIED)


def _spread(total: int, quota: int | None) -> dict[int, int]:
    """A team's usage over its shards: each shard up to its share of the quota (evenly without a quota)."""
    out = {}
    left = total
    for shard in range(items.USAGE_SHARDS):
        share = items.shard_quota(quota, shard) if quota is not None else -(-total // items.USAGE_SHARDS)
        out[shard] = min(left, share) if shard < items.USAGE_SHARDS - 1 else left
        left -= out[shard]
    return out


def _expected_events(state: items.State) -> list[Event]:
    out = []
    if state.lease_from_us is not None and state.holder:
        out.append(Event(state.lease_from_us, state.seq, "claimed", state.holder, state.team, state.holder))
    if state.status in (items.TAGGED, items.VERIFIED) and state.tagged_us is not None:
        duration = max(0, (state.tagged_us - (state.lease_from_us or state.tagged_us)) // 1000)
        out.append(Event(state.tagged_us, state.seq, "tagged", state.holder, state.team, state.holder, duration,
                         state.categories, state.subcategories, state.keywords))
    if state.status == items.VERIFIED and state.verified_us is not None:
        out.append(Event(state.verified_us, state.seq, "verified", state.holder, state.team, state.verifier,
                         result=state.verification))
    return out


def reconcile(db: Database, project_id: str, *, repair: bool = False, progress: Any = None) -> dict[str, Any]:
    """Differences between the stored figures and the effort log (and events missing from the log); with
    `repair`, write the missing events and the right figures. Figures of events after the owner's checkpoint
    that it has not counted yet are left to it. Read at LOCAL_QUORUM: what it repairs is what it read."""
    with reads_at(ConsistencyLevel.LOCAL_QUORUM):
        return _reconcile(db, project_id, repair=repair, progress=progress)


def _reconcile(db: Database, project_id: str, *, repair: bool, progress: Any) -> dict[str, Any]:
    project = projects.get(db, project_id)
    if project is None:
        raise LookupError(f"no project {project_id}")
    seen, stored, _rankings = control.load(db, project_id)
    assert seen is not None
    # Keyword counts live in their own table (control.py); compared like every other figure.
    stored.update({("keyword", k): {"uses": n} for k, n in control.all_keyword_uses(db, project_id).items()})
    logged = effort.events_of_minutes(db, project_id, effort.event_minutes(db, project_id))
    pending = _pending_notices(db, project_id, seen)
    keys = {e.key for e in logged}
    missing: list[Event] = []
    held_or_finished: dict[str, int] = {team: 0 for team in projects.teams(db, project_id)}
    for first in range(0, project.total_items, 1000):
        states = items.many(db, project_id, list(range(first, min(project.total_items, first + 1000))))
        missing.extend(e for s in states.values() for e in _expected_events(s) if e.key not in keys)
        for state in states.values():
            if state.team in held_or_finished and state.status in _UNIT_HOLDING:
                held_or_finished[state.team] += 1
        if progress is not None:
            progress(len(states))
    usage = {team: items.usage_by_shard(db, project_id, team) for team in held_or_finished}
    quota_differences = {team: {"stored": sum(usage[team].values()), "items": n}
                         for team, n in held_or_finished.items() if sum(usage[team].values()) != n}
    marks = set(seen.counted_pending)
    counted = [e for e in logged + missing if _counted(e, seen, pending, marks)]
    expected = figures.recompute(counted)
    differences = {}
    for key in sorted(set(expected) | set(stored)):
        want = {k: v for k, v in expected.get(key, {}).items()}
        have = {k: v for k, v in stored.get(key, {}).items() if k not in _NOT_SUMS}
        names = set(want) | set(have)
        if any(want.get(n, 0) != have.get(n, 0) for n in names):
            differences["/".join(key)] = {"stored": have, "log": want}
    report = {"project": project_id, "events": len(logged), "missing_events": len(missing),
              "differences": differences, "team_usage": quota_differences, "repaired": False}
    if repair and quota_differences:
        quotas = projects.teams(db, project_id)
        # Compare-and-set against what was read: a claim that moved a shard meanwhile makes this refuse.
        report["repaired"] = all(
            items.force_usage(db, project_id, team, usage[team], _spread(found["items"], quotas.get(team)))
            for team, found in quota_differences.items())
    if repair and (missing or differences):
        for event in missing:  # no notice: the repaired figures count it (marked below)
            db.execute_many(effort.event_writes(db, project_id, event))
        rows = {}
        for key in differences:
            scope, _, name = key.partition("/")
            want = expected.get((scope, name), {})
            have = stored.get((scope, name), {})
            rows[(scope, name)] = {n: want.get(n, 0) for n in (set(want) | set(have)) - _NOT_SUMS}
        rankings = {kind: figures.top(expected, kind) for kind in figures.USE_SCOPES}
        report["repaired"] = control.repair(db, project_id, seen, rows, rankings)
        if report["repaired"]:  # what the repaired figures count behind the checkpoint: a later notice is a no-op
            effort.mark_counted(db, project_id, [e.key for e in counted if not e.counted
                                                 and e.at_us <= seen.events_checkpoint])
    return report


def _pending_notices(db: Database, project_id: str, seen: control.Positions) -> set[effort.Key]:
    """Events named by notices the owner has not handled yet (it counts them, unless marked)."""
    out: set[effort.Key] = set()
    after, now = seen.late_checkpoint, stamps.now_us(db)
    while after < now:
        notices, after = effort.notices_between(db, project_id, after, now)
        out.update(n.event for n in notices if n.key not in seen.late_applied)
    return out


def _counted(event: Event, seen: control.Positions, pending: set[effort.Key], marks: set[effort.Key]) -> bool:
    """Whether the figures count an event: marked counted, or counted by the last commit (its marks may not be
    written yet), or after the checkpoint and already applied; behind the checkpoint, unless a notice the
    owner has not handled names it (the owner counts it then; events of before cql/0260 carry no mark)."""
    if event.counted or event.key in seen.applied or event.key in marks:
        return True
    return event.at_us <= seen.events_checkpoint and event.key not in pending
