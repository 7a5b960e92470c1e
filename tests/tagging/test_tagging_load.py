"""Tagging under load and faults (issue 12, section 4), against gunicorn and `chronicle tagging worker`.

50 simulated taggers (threads, each with its own token and keep-alive session) take and submit every item of a
1,500-item project (archived network posts) in 3 teams, one with a quota below its share. Each loop: next, then
5% stop mid-item and submit only after the lease (3 s) ran out, 2% skip, 1% first send an unknown category
(422), 5% send the same submit twice (the second answer must equal the first), the rest submit at once.
Connection errors, 502/503/504 are retried (the same request), as a real client does.

Every tagger keeps its own log of what it held: (seq, lease id, got_at = when the answer of next arrived,
end = when the submit or skip that succeeded was first sent, else the lease end the server announced, or the
send time of a refused submit if earlier). These are inner bounds of the server's real holds, so any overlap is
a real double assignment. Asserted afterwards:

- no two holds of one item overlap (across taggers and leases), no tagger holds two items at once;
- each team's held + finished items never pass its quota (sweep over the log), the low quota was reached and
  refused with a reason; at the end each team's stored usage equals what it finished (no unit leaked);
- every item is Tagged exactly once: one accepted (user, lease) per item in the log, the item's state names
  that holder and lease, and the effort log holds exactly one `tagged` event for it, by that user;
- a submit refused with 409 came after the lease end; a late submit (after the lease ran out) answered 200
  only when the item was still the sender's (the final state names their lease);
- GET /stats equals the log (project tagged/remaining, per user and team finished, per user assigned >= the
  leases the user saw) once the worker caught up, and `chronicle tagging reconcile` exits 0;
- no 5xx other than the retried 502/503/504, and no unexpected answer.

Faults: the test SIGKILLs one gunicorn worker mid-run (the master starts another). The node-restart scenario
(`node_restart_run`: a Cassandra node of its own, 127.0.0.11:9343, stopped and started mid-run with 20 taggers
working through 400 items, the same checks) is a benchmark run: `python -m bench.tagging --restart-run`.

Sizes: every check above holds per item and per lease, so the tests run 50 taggers over 1,000 items (test 1), not
the 5,000 of the first version: each probability still fires dozens of times (about 50 abandoned items, 45
double submits), the quota below its share is still reached, and the killed worker still has ~650 items of work
after it. The 5,000-item run, with the same checks, is a benchmark now (its time and counts are the figure):
`python -m bench.tagging --faulted-run` (bench/tagging.py, `killed_worker_run` below).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from api.config import Settings, state_dir
from api.db import Database
from api.migrations import migrate
from api.network import accounts, posts
from api.network.values import Account, Post
from api.node.config import NodeSpec
from api.node.process import start_node, stop_node
from api.tagging import effort, items, service
from tests.helpers import ADMIN_TOKEN, TEST_API_TOKENS

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

CATEGORIES = ["news", "opinion", "question", "announcement", "other"]
SUBCATEGORIES = ["positive", "negative", "neutral", "sarcastic"]
VOCABULARY = ["Cassandra", "  compaction ", "Tombstones", "gossip", "repair", "LWT", "paxos", "hints",
              "Read  Repair", "sstable", "memtable", "bloom filter", "ÉTÉ", "ﬁle", "queue"]
RETRIED = (502, 503, 504)
CALL_DEADLINE = 120.0  # seconds one request is retried before the tagger gives up on it


# ------------------------------------------------------------------------------------------------ set-up

def archive_authors(db: Database, network: str, authors: int, per_author: int) -> list[int]:
    """Write `authors` accounts with `per_author` posts each (spread over months) straight into the archive;
    returns the author ids."""
    first = 7_000_000 + random.randrange(1_000_000) * 100
    ids = [first + a for a in range(authors)]
    start = datetime(2025, 1, 1, tzinfo=UTC)

    def writes() -> Iterator[Any]:
        for a, author in enumerate(ids):
            yield from accounts.account_writes(network, Account(author, f"author{a}", 10, 10))
            for i in range(per_author):
                at = start + timedelta(minutes=97 * i + a)
                yield from posts.post_writes(network, Post(
                    author * 10_000 + i, author, at.replace(microsecond=0), f"author{a}",
                    content=f"post {i} of author {a}: " + " ".join(VOCABULARY[(i + k) % len(VOCABULARY)]
                                                                   for k in range(4)),
                    language="en"))

    db.execute_many(writes())
    return ids


@dataclasses.dataclass
class Member:
    user: str
    team: str
    token: str


@dataclasses.dataclass
class Setup:
    project: str
    total: int
    lease_seconds: int
    quotas: dict[str, int | None]
    taggers: list[Member]
    admin_token: str


def load_project(db: Database, *, items_wanted: int, taggers: int, quotas: dict[str, int | None],
                 lease_seconds: int) -> Setup:
    authors = 5
    per_author = -(-items_wanted // authors)
    network = f"tagload{random.randrange(16 ** 6):06x}"
    ids = archive_authors(db, network, authors, per_author)
    project = f"load-{network}"
    made = service.create_project(db, project, "load test", {"kind": "network", "network": network, "authors": ids},
                                  CATEGORIES, SUBCATEGORIES, queue_size=1000, lease_seconds=lease_seconds,
                                  max_held=1, teams=quotas)
    assert made.total_items == authors * per_author
    teams = sorted(quotas)
    members = []
    for i in range(taggers):
        team = teams[i % len(teams)]
        user = f"tagger{i:02d}"
        members.append(Member(user, team, service.add_member(db, project, user, team, "tagger")))
    admin = service.add_member(db, project, "boss", teams[0], "admin")
    return Setup(project, made.total_items, lease_seconds, quotas, members, admin)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclasses.dataclass
class Served:
    base: str
    env: dict[str, str]
    master: subprocess.Popen
    worker: subprocess.Popen
    logs: Path

    def log_tail(self, chars: int = 4000) -> str:
        out = []
        for name in ("gunicorn.log", "tagging-worker.log"):
            path = self.logs / name
            text = path.read_text(errors="replace") if path.exists() else ""
            out.append(f"--- {name} (tail)\n{text[-chars:]}")
        return "\n".join(out)


@contextlib.contextmanager
def served(settings: Settings, logs: Path, *, workers: int = 2) -> Iterator[Served]:
    """gunicorn on `settings`' keyspace (as tests/test_api_fuzz.py starts it) and `chronicle tagging worker`
    beside it with the same environment (tick 0.2 s); both stopped on exit. Their output goes to `logs`."""
    port = _free_port()
    env = {**os.environ, "CHRONICLE_CASSANDRA_HOSTS": ",".join(settings.contact_points),
           "CHRONICLE_CASSANDRA_PORT": str(settings.cassandra_port), "CHRONICLE_KEYSPACE": settings.keyspace,
           "CHRONICLE_BIND": f"127.0.0.1:{port}", "CHRONICLE_WORKERS": str(workers), "CHRONICLE_LOG_LEVEL": "WARNING",
           "CHRONICLE_ACCESS_LOG": "", "CHRONICLE_API_TOKENS": json.dumps(TEST_API_TOKENS),
           "CHRONICLE_ADMIN_TOKEN": ADMIN_TOKEN, "CHRONICLE_SLACK_SIGNING_SECRET": "load-secret",
           "CHRONICLE_BACKGROUND_WORKERS": "0", "CHRONICLE_TAGGING_TICK": "0.2",
           "PROMETHEUS_MULTIPROC_DIR": str(logs / "metrics")}
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / "gunicorn.log").open("ab") as out:
        master = subprocess.Popen([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "api.wsgi:app"], cwd=ROOT,
                                  env=env, stdout=out, stderr=subprocess.STDOUT)
    with (logs / "tagging-worker.log").open("ab") as out:
        worker = subprocess.Popen([str(BIN / "chronicle"), "tagging", "worker"], cwd=ROOT, env=env, stdout=out,
                                  stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    srv = Served(base, env, master, worker, logs)
    try:
        deadline = time.monotonic() + 60
        ready = 0
        while ready < 4:  # a few 200s in a row: every worker is up
            try:
                ready = ready + 1 if requests.get(base + "/readyz", timeout=5).status_code == 200 else 0
            except requests.RequestException:
                ready = 0
            if time.monotonic() > deadline:
                raise RuntimeError("gunicorn did not become ready\n" + srv.log_tail())
            if master.poll() is not None:
                raise RuntimeError("gunicorn exited\n" + srv.log_tail())
            time.sleep(0.2)
        yield srv
    finally:
        for proc in (worker, master):
            if proc.poll() is None:
                proc.terminate()
        for proc in (worker, master):
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# ------------------------------------------------------------------------------------------------ the client

@dataclasses.dataclass
class Answer:
    status: int
    body: Any
    first_sent: float  # wall clock (time.time(), the server's clock too) when the first attempt left
    last_sent: float
    received: float
    attempts: int


def _iso_seconds(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


@dataclasses.dataclass
class Hold:
    """One lease as its holder saw it: [got_at, end) is when the holder certainly had the item."""

    user: str
    team: str
    seq: int
    lease_id: str
    got_at: float
    lease_until: float
    released_at: float | None = None  # first send of the submit/skip that succeeded (or of a refused submit)
    outcome: str = "held"  # tagged | skipped | lost (409) | held (never released: the lease ran out)
    late: bool = False  # the holder stopped and submitted after the lease end

    @property
    def end(self) -> float:
        if self.outcome in ("tagged", "skipped"):
            return self.released_at
        if self.outcome == "lost":
            return min(self.lease_until, self.released_at)
        return self.lease_until


class Run:
    """What every tagger shares: the accepted submits, problems, counters and the stop signal."""

    def __init__(self, base: str, setup: Setup, deadline: float) -> None:
        self.base = base
        self.setup = setup
        self.deadline = deadline
        self.lock = threading.Lock()
        self.accepted: dict[int, set[tuple[str, str]]] = defaultdict(set)  # seq -> {(user, lease_id)} with 200
        self.problems: list[str] = []
        self.counts: Counter[str] = Counter()
        self.reasons: Counter[tuple[str, str]] = Counter()  # (team, reason) of an empty next
        self.stop = threading.Event()
        self.progress = threading.Condition(self.lock)
        self.started = time.time()
        self.finished = 0.0

    def done(self) -> bool:
        return self.stop.is_set() or time.monotonic() > self.deadline or len(self.accepted) >= self.setup.total

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text[:1500])

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counts[what] += n

    def tagged(self, seq: int, user: str, lease_id: str) -> None:
        with self.lock:
            self.accepted[seq].add((user, lease_id))
            self.progress.notify_all()

    def wait_for(self, fraction: float) -> bool:
        with self.lock:
            return self.progress.wait_for(lambda: len(self.accepted) >= fraction * self.setup.total
                                          or self.stop.is_set(), timeout=max(0.0, self.deadline - time.monotonic()))


class Tagger(threading.Thread):
    P_ABANDON, P_SKIP, P_BAD, P_TWICE, P_SKIP_TWICE = 0.05, 0.02, 0.01, 0.05, 0.3

    def __init__(self, run: Run, member: Member, seed: int) -> None:
        super().__init__(name=member.user, daemon=True)
        self.run_ = run
        self.member = member
        self.rng = random.Random(seed)
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {member.token}"
        self.holds: dict[tuple[int, str], Hold] = {}
        self.prefix = f"{run.base}/tagging/projects/{run.setup.project}"

    # -- one request, retried on connection errors and 502/503/504 (and a 500 twice, reported)
    def call(self, path: str, body: dict[str, Any] | None = None) -> Answer | None:
        first = time.time()
        attempts = 0
        give_up = time.monotonic() + CALL_DEADLINE
        server_errors = 0
        while True:
            attempts += 1
            sent = time.time()
            try:
                response = self.session.post(self.prefix + path, json=body if body is not None else {}, timeout=30)
            except requests.RequestException as exc:
                self.run_.count(f"retried {type(exc).__name__}")
            else:
                received = time.time()
                if response.status_code in RETRIED:
                    self.run_.count(f"retried {response.status_code}")
                elif response.status_code >= 500 and server_errors < 2:
                    server_errors += 1
                    self.run_.problem(f"{self.member.user} POST {path} {body}: {response.status_code} "
                                      f"{response.text[:500]}")
                else:
                    try:
                        parsed = response.json()
                    except ValueError:
                        parsed = response.text
                    return Answer(response.status_code, parsed, first, sent, received, attempts)
            if time.monotonic() > give_up:
                self.run_.problem(f"{self.member.user} POST {path}: no answer within {CALL_DEADLINE} s")
                return None
            time.sleep(0.1 + self.rng.random() * 0.3)

    def run(self) -> None:
        try:
            while not self.run_.done():
                self.step()
        except Exception as exc:  # noqa: BLE001 - a tagger's own bug must show as a problem, not vanish
            self.run_.problem(f"{self.member.user} crashed: {type(exc).__name__}: {exc}")

    def step(self) -> None:
        run, me = self.run_, self.member
        answer = self.call("/next")
        if answer is None:
            return
        run.count("next")
        if answer.status != 200:
            run.problem(f"{me.user} next: {answer.status} {answer.body}")
            time.sleep(0.3)
            return
        item = answer.body.get("item")
        if item is None:
            reason = answer.body.get("reason") or ""
            with run.lock:
                run.reasons[(me.team, reason)] += 1
            # A team out of quota gets room back only when one of its leases runs out: ask again seldom.
            time.sleep((1.0 if "quota" in reason else 0.2) * (1 + self.rng.random()))
            return
        if item.get("holder") != me.user or item.get("status") != "InProgress" or not item.get("lease_until"):
            run.problem(f"{me.user} next gave an item not held by them: {item}")
            return
        hold = self._hold(item, answer)
        roll = self.rng.random()
        if roll < self.P_ABANDON:
            self._abandon(hold)
        elif roll < self.P_ABANDON + self.P_SKIP:
            self._skip(hold)
        else:
            if self.rng.random() < self.P_BAD:
                self._unknown_category(hold)
            self._submit(hold, twice=self.rng.random() < self.P_TWICE)

    def _hold(self, item: dict[str, Any], answer: Answer) -> Hold:
        key = (item["seq"], item["lease_id"])
        until = _iso_seconds(item["lease_until"])
        hold = self.holds.get(key)
        if hold is None:
            hold = self.holds[key] = Hold(self.member.user, self.member.team, item["seq"], item["lease_id"],
                                          answer.received, until)
            self.run_.count("leases")
        else:  # our own unfinished item again (a retried next): its lease renewed
            hold.lease_until = max(hold.lease_until, until)
            self.run_.count("renewed")
        return hold

    def _tags(self) -> tuple[list[str], list[str], list[str]]:
        rng = self.rng
        categories = rng.sample(CATEGORIES, rng.randint(1, 2))
        subcategories = rng.sample(SUBCATEGORIES, rng.randint(0, 2))
        keywords = rng.sample(VOCABULARY, rng.randint(0, 3))
        if rng.random() < 0.3:
            keywords.append(f"Word{rng.randrange(500)}")
        return categories, subcategories, keywords

    def _submit(self, hold: Hold, *, twice: bool = False) -> None:
        run, me = self.run_, self.member
        categories, subcategories, keywords = self._tags()
        body = {"lease_id": hold.lease_id, "categories": categories, "subcategories": subcategories,
                "keywords": keywords}
        answer = self.call(f"/items/{hold.seq}/submit", body)
        if answer is None:
            return
        run.count("submit")
        if answer.status == 200:
            hold.outcome, hold.released_at = "tagged", answer.first_sent
            run.tagged(hold.seq, me.user, hold.lease_id)
            item = answer.body.get("item") or {}
            words = list(dict.fromkeys(w for w in map(effort.normalise_keyword, keywords) if w))
            if (item.get("status"), item.get("holder"), item.get("lease_id")) != ("Tagged", me.user, hold.lease_id) \
                    or item.get("categories") != sorted(set(categories)) \
                    or item.get("subcategories") != sorted(set(subcategories)) or item.get("keywords") != words:
                run.problem(f"{me.user} submit {body} answered {item}")
        elif answer.status == 409:
            hold.outcome, hold.released_at = "lost", answer.first_sent
            run.count("409 late" if hold.late else "409")
            if answer.received < hold.lease_until:
                run.problem(f"{me.user} submit of {hold.seq} refused before its lease ended "
                            f"({hold.lease_until - answer.received:.3f} s left): {answer.body}")
        else:
            run.problem(f"{me.user} submit {hold.seq}: {answer.status} {answer.body}")
            return
        if twice:
            again = self.call(f"/items/{hold.seq}/submit", body)
            run.count("submit twice")
            if again is not None and (again.status, again.body) != (answer.status, answer.body):
                run.problem(f"{me.user} the same submit of {hold.seq} answered {answer.status} {answer.body} then "
                            f"{again.status} {again.body}")

    def _unknown_category(self, hold: Hold) -> None:
        body = {"lease_id": hold.lease_id, "categories": ["no-such-category"], "subcategories": [], "keywords": []}
        answer = self.call(f"/items/{hold.seq}/submit", body)
        self.run_.count("422 probe")
        if answer is not None and answer.status != 422:
            self.run_.problem(f"{self.member.user} unknown category answered {answer.status} {answer.body}")

    def _skip(self, hold: Hold) -> None:
        answer = self.call(f"/items/{hold.seq}/skip", {"lease_id": hold.lease_id})
        if answer is None:
            return
        self.run_.count("skip")
        if answer.status == 200:
            hold.outcome, hold.released_at = "skipped", answer.first_sent
            if (answer.body.get("item") or {}).get("status") != "New":
                self.run_.problem(f"{self.member.user} skip of {hold.seq} answered {answer.body}")
        elif answer.status == 409:  # our first attempt went through and someone took it since
            hold.outcome, hold.released_at = "lost", answer.first_sent
        else:
            self.run_.problem(f"{self.member.user} skip {hold.seq}: {answer.status} {answer.body}")
            return
        if self.rng.random() < self.P_SKIP_TWICE:  # the same skip again, as a client whose answer was lost sends
            again = self.call(f"/items/{hold.seq}/skip", {"lease_id": hold.lease_id})
            self.run_.count("skip twice")
            # Someone may have taken the item in between (then 409); otherwise the same answer.
            if again is not None and again.status != 409 and (again.status, again.body) != (answer.status, answer.body):
                self.run_.problem(f"{self.member.user} the same skip of {hold.seq} answered {answer.status} "
                                  f"{answer.body} then {again.status} {again.body}")

    def _abandon(self, hold: Hold) -> None:
        """Stop mid-item: wait until the lease ran out (and a little), then try to submit anyway."""
        self.run_.count("abandoned")
        wake = hold.lease_until + 0.3 + self.rng.random() * 1.2
        while time.time() < wake:
            if self.run_.done():
                return
            time.sleep(0.1)
        hold.late = True
        self._submit(hold)
        if hold.outcome == "tagged":
            self.run_.count("late submit accepted")


def simulate(base: str, setup: Setup, *, seconds: float, fault: Callable[[Run], None] | None = None,
             fault_at: float = 0.3) -> tuple[Run, list[Tagger]]:
    """All taggers until every item is accepted once (or `seconds` passed); `fault(run)` runs in its own thread
    once `fault_at` of the items are tagged."""
    run = Run(base, setup, time.monotonic() + seconds)
    taggers = [Tagger(run, m, seed=1000 + i) for i, m in enumerate(setup.taggers)]
    errors: list[BaseException] = []

    def inject() -> None:
        try:
            if run.wait_for(fault_at) and not run.done():
                fault(run)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
            run.problem(f"fault injection failed: {type(exc).__name__}: {exc}")

    injector = threading.Thread(target=inject, daemon=True) if fault else None
    for t in taggers:
        t.start()
    if injector:
        injector.start()
    for t in taggers:
        t.join(timeout=max(1.0, run.deadline - time.monotonic() + CALL_DEADLINE + 30))
    run.stop.set()
    if injector:
        injector.join(timeout=240)
    run.finished = time.time()
    return run, taggers


# ------------------------------------------------------------------------------------------------ checks

def _overlaps(holds: list[Hold]) -> list[str]:
    out = []
    ordered = sorted(holds, key=lambda h: h.got_at)
    latest: Hold | None = None
    for h in ordered:
        if latest is not None and h.got_at < latest.end:
            out.append(f"{latest.user} lease {latest.lease_id} [{latest.got_at:.3f}, {latest.end:.3f}) "
                       f"({latest.outcome}) overlaps {h.user} lease {h.lease_id} from {h.got_at:.3f} on item {h.seq}")
        if latest is None or h.end > latest.end:
            latest = h
    return out


def _quota_peaks(holds: list[Hold], quotas: dict[str, int | None]) -> dict[str, int]:
    """Per team, the most items it certainly held or had finished at one moment (a sweep over the log)."""
    peaks = {}
    for team in quotas:
        moves = []
        for h in holds:
            if h.team == team:
                moves.append((h.got_at, 1))
                if h.outcome != "tagged":
                    moves.append((h.end, -1))
        moves.sort(key=lambda m: (m[0], m[1]))  # at the same instant an end counts before a start
        level = peak = 0
        for _, delta in moves:
            level += delta
            peak = max(peak, level)
        peaks[team] = peak
    return peaks


def _stats_differences(stats: dict[str, Any], setup: Setup, finished: Counter[str]) -> dict[str, Any]:
    """What GET /stats says against what the log implies: {figure: (stats, log)} where they differ."""
    out: dict[str, Any] = {}
    whole = stats["project"]
    if (whole["tagged"], whole["remaining"]) != (setup.total, 0):
        out["project tagged, remaining"] = ((whole["tagged"], whole["remaining"]), (setup.total, 0))
    users = {u["user"]: u["finished"] for u in stats["users"]}
    for user in set(finished) | {u for u, n in users.items() if n}:
        if users.get(user, 0) != finished.get(user, 0):
            out[f"user {user} finished"] = (users.get(user, 0), finished.get(user, 0))
    team_of = {m.user: m.team for m in setup.taggers}
    team_finished: Counter[str] = Counter()
    for user, n in finished.items():
        team_finished[team_of[user]] += n
    for row in stats["teams"]:
        if row["finished"] != team_finished.get(row["team"], 0):
            out[f"team {row['team']} finished"] = (row["finished"], team_finished.get(row["team"], 0))
    return out


def _admin_get(base: str, setup: Setup, path: str) -> Any:
    response = requests.get(f"{base}/tagging/projects/{setup.project}{path}",
                            headers={"Authorization": f"Bearer {setup.admin_token}"}, timeout=30)
    assert response.status_code == 200, (path, response.status_code, response.text[:2000])
    return response.json()


def check_run(db: Database, srv: Served, setup: Setup, run: Run, taggers: list[Tagger]) -> dict[str, Any]:
    holds = [h for t in taggers for h in t.holds.values()]
    summary = {"items": setup.total, "taggers": len(taggers), "seconds": round(run.finished - run.started, 1),
               "items_per_s": round(len(run.accepted) / max(0.001, run.finished - run.started), 1),
               "leases": len(holds), "counts": dict(run.counts),
               "reasons": {f"{t}: {r}": n for (t, r), n in run.reasons.items()}}
    print(json.dumps(summary, indent=1))
    (srv.logs / "summary.json").write_text(json.dumps(summary, indent=1))
    assert not run.problems, f"{len(run.problems)} problems, first ones:\n" + "\n".join(run.problems[:25])

    # Every item accepted once in the log, and Tagged in the store by that holder and lease.
    states = items.many(db, setup.project, list(range(setup.total)))
    missing = sorted(set(range(setup.total)) - set(run.accepted))
    assert not missing, (f"{len(missing)} items never accepted, e.g. "
                         f"{[(s, states.get(s)) for s in missing[:10]]}\n{srv.log_tail()}")
    doubled = {seq: who for seq, who in run.accepted.items() if len(who) != 1}
    assert not doubled, f"items accepted under more than one lease: {list(doubled.items())[:10]}"
    wrong = []
    for seq in range(setup.total):
        (user, lease), = run.accepted[seq]
        s = states.get(seq)
        if s is None or s.status != items.TAGGED or s.holder != user or str(s.lease_id) != lease:
            wrong.append((seq, user, lease, s))
    assert not wrong, f"{len(wrong)} item states disagree with the accepted submit, e.g. {wrong[:5]}"
    for h in holds:  # a refused submit (409) never became the item's tagging
        if h.outcome == "lost":
            assert (h.user, h.lease_id) not in run.accepted[h.seq], h

    # The effort log: exactly one `tagged` event per item, by its tagger.
    events = effort.events_of_minutes(db, setup.project, effort.event_minutes(db, setup.project))
    tagged_events: dict[int, list[Any]] = defaultdict(list)
    for e in events:
        if e.kind == "tagged":
            tagged_events[e.seq].append(e)
    bad_events = [(seq, tagged_events.get(seq)) for seq in range(setup.total)
                  if [e.user for e in tagged_events.get(seq, [])] != [next(iter(run.accepted[seq]))[0]]]
    assert not bad_events, f"{len(bad_events)} items without exactly one tagged event, e.g. {bad_events[:5]}"

    # Never two holders at once; never two items at once for one tagger; quotas never passed.
    by_seq: dict[int, list[Hold]] = defaultdict(list)
    by_user: dict[str, list[Hold]] = defaultdict(list)
    for h in holds:
        by_seq[h.seq].append(h)
        by_user[h.user].append(h)
    overlaps = [o for hs in by_seq.values() for o in _overlaps(hs)]
    assert not overlaps, f"{len(overlaps)} items held by two leases at once:\n" + "\n".join(overlaps[:10])
    twice = [o for hs in by_user.values() for o in _overlaps(hs)]
    assert not twice, f"{len(twice)} times a tagger held two items at once:\n" + "\n".join(twice[:10])
    peaks = _quota_peaks(holds, setup.quotas)
    summary["quota_peaks"] = peaks
    for team, quota in setup.quotas.items():
        if quota is not None:
            assert peaks[team] <= quota, f"team {team} held+finished {peaks[team]} items, quota {quota}"

    # The statistics, once the worker counted everything, equal the log.
    finished = Counter(next(iter(who))[0] for who in run.accepted.values())
    deadline = time.monotonic() + 60
    while True:
        stats = _admin_get(srv.base, setup, "/stats")
        differences = _stats_differences(stats, setup, finished)
        if not differences or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert not differences, f"statistics differ from the log (stats, log): {differences}"
    summary["stats"] = {"project": stats["project"], "teams": stats["teams"]}
    users = {u["user"]: u for u in stats["users"]}
    teams = {t["team"]: t for t in stats["teams"]}
    for user, n in Counter(h.user for h in holds).items():
        assert users.get(user, {}).get("assigned", 0) >= n, (f"{user} saw {n} leases", users.get(user))
    for team, quota in setup.quotas.items():
        row = teams[team]
        assert row["quota"] == quota, row
        assert quota is None or row["used"] <= quota, row
        # A request killed between taking its team's unit and claiming leaks the unit (never the other way):
        # usage may stand above what the team finished until reconcile --repair gives the leaks back (below).
        assert row["used"] >= row["finished"], f"team {team}: usage {row['used']} < finished {row['finished']}"

    # The quota below its share was reached, and next said why.
    for team, quota in setup.quotas.items():
        if quota is not None and quota < setup.total / len(setup.quotas):
            assert any(t == team and "quota" in r for (t, r) in run.reasons), (team, teams[team], run.reasons)

    chronicle = [str(BIN / "chronicle"), "tagging", "reconcile", "--project", setup.project]
    repaired = subprocess.run([*chronicle, "--repair"], env=srv.env, cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    assert repaired.returncode == 0, repaired.stdout[-4000:] + repaired.stderr[-2000:]
    summary["repaired"] = json.loads(repaired.stdout)["team_usage"]
    teams = {t["team"]: t for t in _admin_get(srv.base, setup, "/stats")["teams"]}
    for team in setup.quotas:
        assert teams[team]["used"] == teams[team]["finished"], teams[team]
    reconcile = subprocess.run(chronicle, env=srv.env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert reconcile.returncode == 0, reconcile.stdout[-4000:] + reconcile.stderr[-2000:]
    print(json.dumps(summary, indent=1))
    return summary


# ------------------------------------------------------------------------------------------------ tests

def quotas_for(items_wanted: int) -> dict[str, int | None]:
    """Three teams: one without a quota, one with 16% of the items (below its third: the quota is hit), one with
    60% (above its share: present, never reached). 5,000 items: beta 800, gamma 3,000."""
    return {"alpha": None, "beta": items_wanted * 16 // 100, "gamma": items_wanted * 60 // 100}


def _gunicorn_workers(master: subprocess.Popen) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(master.pid)], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


def killed_worker_run(db: Database, settings: Settings, logs: Path, *, items_wanted: int, taggers: int,
                      seconds: float) -> dict[str, Any]:
    """`taggers` taggers through a project of `items_wanted` items (quotas_for), one gunicorn worker SIGKILLed
    once 30% are tagged; every check of the module docstring (check_run). Returns the run's summary.
    Test 1 runs it small; `python -m bench.tagging --faulted-run` runs it at 5,000 items for the figure."""
    setup = load_project(db, items_wanted=items_wanted, taggers=taggers, quotas=quotas_for(items_wanted),
                         lease_seconds=3)
    with served(settings, logs, workers=2) as srv:
        killed: list[int] = []

        def kill_a_worker(run: Run) -> None:
            pids = _gunicorn_workers(srv.master)
            assert len(pids) == 2, pids
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                now = _gunicorn_workers(srv.master)
                if len(now) == 2 and pids[0] not in now:
                    return
                time.sleep(0.2)
            raise AssertionError(f"gunicorn did not replace the killed worker: {now}")

        run, taggers_run = simulate(srv.base, setup, seconds=seconds, fault=kill_a_worker, fault_at=0.3)
        assert killed, f"the worker was not killed (progress {len(run.accepted)}/{setup.total}): {run.problems[:5]}"
        assert srv.worker.poll() is None, "chronicle tagging worker exited\n" + srv.log_tail()
        summary = check_run(db, srv, setup, run, taggers_run)
    assert summary["counts"].get("abandoned", 0) > 0 and summary["counts"].get("submit twice", 0) > 0
    summary["killed_at_items"] = round(0.3 * setup.total)
    return summary


@pytest.mark.slow
def test_fifty_taggers_expiries_retries_and_a_killed_worker(db: Database, settings: Settings, tmp_path: Path) -> None:
    killed_worker_run(db, settings, tmp_path / "served", items_wanted=600, taggers=50, seconds=240)


# The node-restart scenario is a benchmark run, not a test (it starts a Cassandra node of its own and stops it
# mid-run: ~50 s): `python -m bench.tagging --restart-run` (bench/tagging.py) runs it with every check below.
def _own_node() -> NodeSpec:
    """A node of the run's own, so stopping it disturbs no test or person (the local node stays up)."""
    return NodeSpec(name="tagging-load", address="127.0.0.11", native_port=9343, storage_port=7403, jmx_port=7423,
                    home=state_dir() / "test-tagging-load" / "node1", cluster_name="chronicle-tagging-load",
                    seeds=("127.0.0.11",), initial_token=0, heap="768M", heap_new="192M")


def node_restart_run(settings: Settings, logs: Path, *, items_wanted: int = 400, taggers: int = 20) -> dict[str, Any]:
    """Taggers work through a project while their Cassandra node (of its own) is stopped and started again at
    30%: nothing lost or doubled, every check of `check_run` holds, and some requests were retried. Returns
    the run's summary with the seconds the node was away."""
    own_node = _own_node()
    start_node(own_node, log=lambda _m: None)
    node_settings = dataclasses.replace(settings, contact_points=[own_node.address],
                                        cassandra_port=own_node.native_port,
                                        keyspace=f"tagload_{os.getpid()}_{random.randrange(16 ** 4):04x}")
    admin = Database(node_settings, keyspace="")
    migrate(admin, node_settings.keyspace, node_settings.replication_map(), log=lambda _m: None)
    db = Database(node_settings)
    try:
        # The node is down for ~20 s while most items are still to do: every tagger meets it (beta's quota is
        # below its third, so quota refusals happen around the restart too).
        setup = load_project(db, items_wanted=items_wanted, taggers=taggers,
                             quotas={"alpha": None, "beta": items_wanted * 3 // 20, "gamma": items_wanted * 3 // 4},
                             lease_seconds=3)
        with served(node_settings, logs, workers=2) as srv:
            restarted: list[float] = []

            def restart_node(run: Run) -> None:
                started = time.monotonic()
                stop_node(own_node, log=lambda _m: None)
                time.sleep(2)
                start_node(own_node, log=lambda _m: None)
                restarted.append(time.monotonic() - started)
                time.sleep(5)
                if srv.worker.poll() is not None:  # nothing returns expired leases or fills the queue: stop now
                    run.problem(f"chronicle tagging worker exited ({srv.worker.returncode}) while the node was down")
                    run.stop.set()

            run, tagger_logs = simulate(srv.base, setup, seconds=170 + items_wanted // 4, fault=restart_node,
                                        fault_at=0.3)
            assert restarted, f"the node was not restarted ({len(run.accepted)}/{setup.total}): {run.problems[:5]}"
            assert srv.worker.poll() is None, "chronicle tagging worker exited\n" + srv.log_tail()
            summary = check_run(db, srv, setup, run, tagger_logs)
            assert any(k.startswith("retried") for k in summary["counts"]), summary["counts"]
            summary["node_away_s"] = round(restarted[0], 1)
            return summary
    finally:
        db.close()
        with contextlib.suppress(Exception):
            admin.execute_raw(f"DROP KEYSPACE IF EXISTS {node_settings.keyspace}", timeout=120)
        admin.close()
        stop_node(own_node, log=lambda _m: None)
