"""The tagging workflow across its tables: making projects and people, next, submit, skip, missing, disable,
verify, the review list and the statistics. HTTP and the CLI call these.

Every workflow step commits with one lightweight transaction on the item (items.py); what follows it (the
queue entry's mark, the effort event, the keyword vocabulary, the hold slot, the team's usage) is derived and
written after, idempotently, so a retried request completes a step that a crash cut short and changes nothing
else (docs/tagging.md, "Exactly once").
"""

from __future__ import annotations

import dataclasses
from typing import Any

from api.db import Database
from api.tagging import control, effort, figures, items, picking, projects, queue, sources, stamps
from api.tagging.effort import Event
from api.tagging.items import State
from api.tagging.projects import Member, Project

MAX_KEYWORDS = 20


class Refused(Exception):
    """A workflow step that cannot happen: `status` is the HTTP status (404, 409, 422), the message why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _iso(us: int | None) -> str | None:
    return sources.iso(us) if us is not None else None


# -- projects and people ------------------------------------------------------------------------------------

def create_project(db: Database, project: str, name: str, source: dict[str, Any], categories: list[str],
                   subcategories: list[str], *, queue_size: int = projects.DEFAULT_QUEUE_SIZE,
                   lease_seconds: int = projects.DEFAULT_LEASE_SECONDS, max_held: int = 1,
                   teams: dict[str, int | None] | None = None, progress: Any = None) -> Project:
    """Make a project: list its items from the archive, write their references and New states, its teams and
    bookkeeping, then its definition (a project is visible once everything else is written). Refused (422)
    when the source is malformed or the name is taken."""
    if projects.get(db, project) is not None:
        raise Refused(409, f"project {project} exists")
    try:
        stored = sources.validate(source)
    except sources.SourceError as exc:
        raise Refused(422, str(exc)) from exc
    refs = list(sources.refs(db, stored))
    created = stamps.now_us(db)
    db.execute_many(items.new_writes(project, 0, len(refs)), progress=progress)
    control.init(db, project, created)
    for team, quota in (teams or {}).items():
        projects.put_team(db, project, team, quota)
        items.make_usage(db, project, team)
    definition = Project(project, name, stored, tuple(categories), tuple(subcategories), queue_size, lease_seconds,
                         max_held, len(refs), created)
    projects.create(db, definition, refs, progress=progress)
    return definition


def add_member(db: Database, project: str, user: str, team: str, role: str) -> str:
    """Add a person (or give them a new token); returns the token, which is stored only as a hash."""
    found = projects.get(db, project)
    if found is None:
        raise Refused(404, f"no project {project}")
    if role not in projects.ROLES:
        raise Refused(422, f"role must be one of {', '.join(projects.ROLES)}")
    if team not in projects.teams(db, project):
        raise Refused(422, f"no team {team} in project {project}")
    if role in ("tagger", "admin"):
        items.make_slots(db, project, user, found.max_held)
    return projects.add_member(db, project, user, team, role)


def project_of(db: Database, project: str) -> Project:
    found = projects.get_cached(db, project)
    if found is None:
        raise Refused(404, f"no project {project}")
    return found


# -- showing an item ----------------------------------------------------------------------------------------

def item_json(db: Database, project: str, state: State, *, with_source: bool = True, ref: str | None = None
              ) -> dict[str, Any]:
    out: dict[str, Any] = {
        "seq": state.seq, "status": state.status, "holder": state.holder, "team": state.team,
        "lease_id": str(state.lease_id) if state.lease_id is not None else None,
        "lease_until": _iso(state.lease_until_us) if state.status == items.IN_PROGRESS else None,
        "categories": list(state.categories), "subcategories": list(state.subcategories),
        "keywords": list(state.keywords), "tagged_at": _iso(state.tagged_us), "verification": state.verification,
        "verifier": state.verifier, "note": state.note,
    }
    if with_source:
        ref = ref or projects.ref_of(db, project, state.seq)
        out["source"] = sources.resolve(db, ref) if ref is not None else {"ref": None, "missing": True,
                                                                         "thread": []}
    return out


def get_item(db: Database, member: Member, seq: int) -> dict[str, Any]:
    state = items.get(db, member.project, seq)
    if state is None:
        raise Refused(404, f"no item {seq} in project {member.project}")
    if member.role == "tagger" and state.holder != member.user:
        raise Refused(403, "a tagger sees only the items they hold or tagged")
    return item_json(db, member.project, state)


# -- next -----------------------------------------------------------------------------------------------------

def next_item(db: Database, member: Member) -> dict[str, Any]:
    """The caller's own unfinished item (its lease renewed), else a new item from the queue under a lease.

    The slots are first taken as this process last saw them (items.slots): a view another process made stale
    is refused by the slot's compare-and-set, or shows nothing free, and is then read again once."""
    project = project_of(db, member.project)
    now = stamps.now_us(db)
    until = now + project.lease_seconds * 1_000_000
    for fresh in (False, True):
        slots = items.slots(db, member.project, member.user, fresh=fresh)
        if not slots:
            items.make_slots(db, member.project, member.user, project.max_held)
            slots = items.slots(db, member.project, member.user)
        free, busy = [], False
        for slot in slots[:project.max_held]:
            use, state = items.slot_use(db, member.project, slot, project.lease_seconds * 1_000_000, now)
            if use == items.SLOT_HELD and state is not None:
                if state.held_by(member.user, slot.lease_id or 0) and items.renew(
                        db, member.project, slot.seq, member.user, slot.lease_id or 0, until):
                    db.execute(*queue.lease_end_write(member.project, until, slot.seq, slot.lease_id or 0))
                    _log_claim(db, member, state)
                    return {"item": item_json(db, member.project, dataclasses.replace(state, lease_until_us=until)),
                            "reason": None}
                use = items.SLOT_FREE  # refused: the lease has ended since (submitted, returned)
            if use == items.SLOT_FREE:
                free.append(slot)
            busy |= use == items.SLOT_BUSY
        if free:
            answer = _claim_new(db, project, member, free[0], now, until)
            if answer is not None:
                return answer
        if fresh:
            break
    # The last view: a free slot taken meanwhile, or one that may be in a claim, is another request's.
    return {"item": None, "reason": "another request of yours is taking an item; try again" if free or busy
            else f"you hold {project.max_held} item(s) already"}


def _log_claim(db: Database, member: Member, state: State) -> None:
    """The claim's event, if the request that claimed died before writing it: the slot named the item before
    its claim, so a reload after such a death finds the item held and shows its lease."""
    claimed = Event(state.lease_from_us or 0, state.seq, "claimed", member.user, state.team, member.user)
    if not effort.is_logged(db, member.project, claimed.key):
        effort.log(db, member.project, [claimed])


def _claim_new(db: Database, project: Project, member: Member, slot: items.Slot, now: int, until: int
               ) -> dict[str, Any] | None:
    """Claim a waiting item into `slot` (found free): the slot is taken naming the first candidate, then the
    team's unit, then the item (a claim refused for that candidate names the slot after the one granted).
    None when the slot was taken meanwhile (by another request of the caller's, or as seen stale)."""
    picker = picking.Picker(db, project.project)
    first = picker.next()
    if first is None:
        return {"item": None, "reason": "the queue is empty: no item is waiting"}
    lease_id = items.new_lease_id(now, slot.slot)
    named = first.seq
    # The lease's end is logged before the claim: if this process dies right after the claim, the owner still
    # finds the lease when it runs out and returns the item (a row of a claim refused or never made is ignored
    # by the owner, as its lease id is not the item's). The first one goes out beside the slot and the unit.
    first_end = db.start_together([queue.lease_end_write(project.project, until, named, lease_id)])
    if not items.take_slot(db, project.project, member.user, slot, named, lease_id, now):
        picker.release(first)
        first_end.wait()
        return None
    quota = projects.teams_cached(db, project.project).get(member.team) if member.team else None
    counted = held = False
    try:
        counted = bool(member.team) and items.change_usage(db, project.project, member.team, +1, quota)
        first_end.wait()
        if member.team and not counted:
            picker.release(first)
            return {"item": None, "reason": f"team {member.team} has used its quota of {quota} items"}
        entry: queue.Entry | None = first
        while entry is not None:
            if entry is not first:
                db.execute(*queue.lease_end_write(project.project, until, entry.seq, lease_id))
            if not items.claim(db, project.project, entry.seq, entry.pos, member.user, member.team, lease_id,
                               now, until):
                _mark_if_dead(db, project.project, entry)
                entry = picker.next()
                continue
            # The item holds the unit and the slot from here, whatever fails next: its lease runs out and the
            # owner's expiry gives the unit back (the slot is free once the lease has ended).
            counted = held = True
            if entry.seq != named:
                items.name_slot(db, project.project, member.user, slot.slot, entry.seq, lease_id)
            state = State(entry.seq, items.IN_PROGRESS, entry.pos, member.user, member.team, lease_id, now,
                          until, (), (), (), None, None, None, None, None)
            effort.log(db, project.project, [Event(now, entry.seq, "claimed", member.user, member.team, member.user)],
                       also=[queue.mark_taken_write(project.project, queue.TAG, entry.pos, member.user)])
            return {"item": item_json(db, project.project, state, ref=entry.ref), "reason": None}
        return {"item": None, "reason": "the queue is empty: no item is waiting"}
    finally:
        if counted and not held:
            items.change_usage(db, project.project, member.team, -1, None)
        if not held:
            items.free_slot(db, project.project, member.user, slot.slot, lease_id)


def _mark_if_dead(db: Database, project: str, entry: queue.Entry) -> None:
    """Mark an entry taken once its item can no longer be claimed through it (claimed, finished, or queued
    again elsewhere), so every taker skips it and the owner moves the head past it. An item the owner is still
    queueing (New, not yet pointing at any entry) is left alone."""
    state = items.get(db, project, entry.seq)
    if state is None:
        return
    if state.status != items.NEW or (state.queue_pos >= 0 and state.queue_pos != entry.pos):
        queue.mark_taken(db, project, queue.TAG, entry.pos, state.holder or "-")


# -- submit, skip, missing, disable, verify -------------------------------------------------------------------

def _lease(value: str | int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise Refused(422, "lease_id must be the decimal lease id that next returned") from exc


def _held(db: Database, member: Member, seq: int, *, after_transaction: bool = False) -> State:
    """The item's state; `after_transaction`: a serial read that sees the transaction just run (or the one
    that refused it) even on a lagging replica, whose old state would be answered, logged and counted."""
    state = items.get(db, member.project, seq, serial=after_transaction)
    if state is None:
        raise Refused(404, f"no item {seq} in project {member.project}")
    return state


def _lost(state: State, member: Member) -> Refused:
    if state.status == items.DISABLED:
        return Refused(409, "an admin disabled this item")
    if state.holder != member.user:
        return Refused(409, "your lease expired and the item went to another tagger")
    if state.status == items.NEW:
        return Refused(409, "your lease expired and the item went back to the queue")
    return Refused(409, f"this lease is no longer yours (item is {state.status})")


def submit(db: Database, member: Member, seq: int, lease: str | int, categories: list[str],
           subcategories: list[str], keywords: list[str]) -> dict[str, Any]:
    project = project_of(db, member.project)
    lease_id = _lease(lease)
    unknown = [c for c in categories if c not in project.categories]
    unknown_sub = [s for s in subcategories if s not in project.subcategories]
    if unknown or unknown_sub:
        raise Refused(422, "not in the project's lists: " + ", ".join(
            [f"category {c!r}" for c in unknown] + [f"subcategory {s!r}" for s in unknown_sub]))
    words = list(dict.fromkeys(k for k in map(effort.normalise_keyword, keywords) if k))
    if len(words) > MAX_KEYWORDS or any(len(k) > effort.MAX_KEYWORD_LENGTH for k in words):
        raise Refused(422, f"at most {MAX_KEYWORDS} keywords of at most {effort.MAX_KEYWORD_LENGTH} characters")
    cats, subs = sorted(set(categories)), sorted(set(subcategories))
    at = stamps.now_us(db)
    if items.submit(db, member.project, seq, member.user, lease_id, cats, subs, words, at):
        # Committed: everything the answer and the bookkeeping need is known (the lease id carries its start
        # and slot), so no read follows.
        state = State(seq, items.TAGGED, -1, member.user, member.team or None, lease_id, items.lease_start(lease_id),
                      None, tuple(cats), tuple(subs), tuple(words), at, "Pending", None, None, None)
    else:
        state = _held(db, member, seq, after_transaction=True)
        if not (state.status in (items.TAGGED, items.VERIFIED) and state.held_by(member.user, lease_id)):
            raise _lost(state, member)
        # A retry of a submit that committed: finish what follows it, answer what was stored.
    items.lease_ended(db, member.project, lease_id)
    tagged_at = state.tagged_us or at
    duration_ms = max(0, (tagged_at - (state.lease_from_us or tagged_at)) // 1000)
    effort.log(db, member.project, [Event(tagged_at, seq, "tagged", member.user, state.team, member.user,
                                          duration_ms, state.categories, state.subcategories, state.keywords)],
               also=effort.keyword_writes(member.project, state.keywords))
    return {"item": item_json(db, member.project, state, with_source=False)}


def skip(db: Database, member: Member, seq: int, lease: str | int) -> dict[str, Any]:
    lease_id = _lease(lease)
    now = stamps.now_us(db)
    applied = items.skip(db, member.project, seq, member.user, lease_id, now)
    # One serial read whether applied or not: it sees the skip (or what refused it) on any replica, so the
    # lease end and the "returned" event are keyed by the stored end time, never by an older state.
    state = _held(db, member, seq, after_transaction=True)
    if applied and state.lease_id != lease_id:
        # Queued again and claimed by someone else since: the skip's own outcome is known from its transaction
        # (the claim wrote the member's team; the lease id carries its start).
        state = State(seq, items.NEW, items.RETURNED, member.user, member.team or None, lease_id,
                      items.lease_start(lease_id), now, (), (), (), None, None, None, None, None)
    if not applied and not (state.status == items.NEW and state.holder == member.user
                            and state.lease_id == lease_id):
        raise _lost(state, member)
    items.lease_ended(db, member.project, lease_id)
    return _returned(db, member.project, state, give_back_unit=applied, free_slot=True)


def _returned(db: Database, project: str, state: State, *, give_back_unit: bool = True, free_slot: bool = False
              ) -> dict[str, Any]:
    """After an item went back (skip or expiry, which both end the lease at a stored time): log it for the owner
    to queue, give the team's unit back. A retry (the transaction had already applied) redoes the idempotent
    writes only: the unit was given back by the first try, or leaked if that try died before it (the quota is
    then one smaller, never larger, until `reconcile --repair`).

    The ended lease frees the holder's slot by itself (items.slot_use) until the item is claimed again under
    another lease. A skip frees it with a write (`free_slot`): the item may be claimed again within a lease
    length, and the slot would then wait for its age to show it free. An expiry comes a lease length after
    the slot was taken at least."""
    ended = state.lease_until_us or 0
    effort.log(db, project, [Event(ended, state.seq, "returned", state.holder, state.team, state.holder)],
               also=[queue.lease_end_write(project, ended, state.seq, state.lease_id)])
    if free_slot and state.holder and state.lease_id is not None:
        items.free_slot_of_lease(db, project, state.holder, state.lease_id)
    if state.team and give_back_unit:
        items.change_usage(db, project, state.team, -1, None)
    return {"item": item_json(db, project, state)}


def return_expired(db: Database, project: str, seen: State, now: int) -> bool:
    """Return an item whose lease ran out (`seen`: its state, in progress under that lease) to the queue (the
    owner's pass); False when it was submitted, renewed or returned meanwhile. The transaction changed only
    the status and queue position, so what follows is derived from `seen` (no read that a paused replica could
    make fail after the item was returned, leaving its unit held)."""
    if seen.lease_id is None or not items.expire(db, project, seen.seq, seen.lease_id, seen.lease_until_us or 0,
                                                 now):
        return False
    _returned(db, project, dataclasses.replace(seen, status=items.NEW, queue_pos=items.RETURNED))
    return True


def report_missing(db: Database, member: Member, seq: int, lease: str | int | None) -> dict[str, Any]:
    state = _held(db, member, seq)
    at = stamps.now_us(db)
    if member.role == "admin":
        if state.status not in (items.NEW, items.IN_PROGRESS):
            raise Refused(409, f"item is {state.status}: only New or InProgress items can be marked missing")
        applied = items.admin_set(db, member.project, state, items.MISSING, at)
    else:
        applied = items.holder_missing(db, member.project, seq, member.user, _lease(lease), at)
    after = _held(db, member, seq, after_transaction=True)
    if not applied and after.status != items.MISSING:
        raise _lost(after, member)
    # Held (slot and unit to give back) only by the transaction that applied: the holder's own report, or an
    # admin's on an item it saw InProgress (its condition); a retry gives nothing back twice.
    held = applied and (member.role != "admin" or state.status == items.IN_PROGRESS)
    return _ended(db, member, after, "missing", held=held)


def disable(db: Database, member: Member, seq: int) -> dict[str, Any]:
    state = _held(db, member, seq)
    if state.status == items.DISABLED:
        return {"item": item_json(db, member.project, state)}
    if state.status not in (items.NEW, items.IN_PROGRESS):
        raise Refused(409, f"item is {state.status}: only New or InProgress items can be disabled")
    if not items.admin_set(db, member.project, state, items.DISABLED, stamps.now_us(db)):
        raise Refused(409, "the item changed meanwhile; look again")
    return _ended(db, member, _held(db, member, seq, after_transaction=True), "disabled",
                  held=state.status == items.IN_PROGRESS)


def _ended(db: Database, member: Member, state: State, kind: str, *, held: bool) -> dict[str, Any]:
    """After an item left the workflow (missing, disabled): its event; the holder's unit if held (the slot is free
    by itself: its lease ended with the item, items.slot_use)."""
    event = Event(state.tagged_us or stamps.now_us(db), state.seq, kind, state.holder, state.team, member.user)
    if state.lease_id is not None:
        items.lease_ended(db, member.project, state.lease_id)
    effort.log(db, member.project, [event])
    if held and state.holder and state.team:
        items.change_usage(db, member.project, state.team, -1, None)
    return {"item": item_json(db, member.project, state)}


def verify(db: Database, member: Member, seq: int, result: str, note: str) -> dict[str, Any]:
    at = stamps.now_us(db)
    applied = items.verify(db, member.project, seq, result, member.user, note, at)
    # A serial read, applied or not: the event (who tagged it, their team, the result) and the answer come from
    # the committed verification, never from a lagging replica's Tagged/Pending state (issue 30, finding 6).
    state = _held(db, member, seq, after_transaction=True)
    if not applied and not (state.status == items.VERIFIED and state.verifier == member.user
                            and state.verification == result):
        raise Refused(409, "already verified" if state.status == items.VERIFIED
                      else f"item is {state.status}: only Tagged items can be verified")
    event = Event(state.verified_us or at, seq, "verified", state.holder, state.team, member.user,
                  result=state.verification)
    effort.log(db, member.project, [event])
    return {"item": item_json(db, member.project, state)}


# -- review list and statistics -------------------------------------------------------------------------------

def review_list(db: Database, member: Member, limit: int) -> dict[str, Any]:
    """Tagged items waiting for verification, oldest first (the review lane from its head)."""
    pos = control.lanes(db, member.project)
    if pos is None:
        raise Refused(404, f"no project {member.project}")
    out: list[dict[str, Any]] = []
    head = pos.review_head
    while len(out) < limit and head < pos.review_tail:
        batch = queue.entries(db, member.project, queue.REVIEW, head, pos.review_tail, 200)
        if not batch:
            break
        states = items.many(db, member.project, [e.seq for e in batch])
        for e in batch:
            state = states.get(e.seq)
            if state is not None and state.status == items.TAGGED and len(out) < limit:
                out.append(item_json(db, member.project, state))
        head = batch[-1].pos + 1
    return {"items": out}


def _person(row: dict[str, int]) -> dict[str, Any]:
    finished = row.get("finished", 0)
    return {"assigned": row.get("assigned", 0), "finished": finished, "correct": row.get("correct", 0),
            "incorrect": row.get("incorrect", 0), "returned": row.get("returned", 0),
            "average_seconds": round(row.get("time_ms", 0) / finished / 1000, 3) if finished else None}


def stats(db: Database, project_id: str) -> dict[str, Any]:
    project = project_of(db, project_id)
    pos, found, rankings = control.shown(db, project_id)
    whole = found.get(("project", ""), {})
    done = whole.get("tagged", 0) + whole.get("disabled", 0) + whole.get("missing", 0)
    teams = projects.teams(db, project_id)
    people = {r.user_id: r.team for r in projects.members(db, project_id)}
    return {
        "project": {"total": project.total_items, "remaining": project.total_items - done,
                    "queued": whole.get("queued", 0), "tagged": whole.get("tagged", 0),
                    "verified": whole.get("verified", 0), "correct": whole.get("correct", 0),
                    "incorrect": whole.get("incorrect", 0), "disabled": whole.get("disabled", 0),
                    "source_missing": whole.get("missing", 0), "returned": whole.get("returned", 0)},
        "teams": [{"team": t, "quota": q, "used": items.usage(db, project_id, t),
                   **_person(found.get(("team", t), {}))} for t, q in sorted(teams.items())],
        "users": [{"user": u, "team": people.get(u), **_person(row)}
                  for (scope, u), row in sorted(found.items()) if scope == "user"],
        "top": {kind: [{"name": n, "count": c} for n, c in rankings.get(kind, [])]
                for kind in figures.USE_SCOPES},
        "online": effort.online(db, project_id, stamps.now_us(db)),
        "as_of": _iso(pos.events_checkpoint) if pos is not None else None,
    }
