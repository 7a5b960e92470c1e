"""The fault suite (issue 14, sections 2 and 3): the app served by gunicorn on the project's 3-node loopback
cluster (127.0.0.1-3:9142, .chronicle/cluster), a keyspace with RF 3 and the service's default consistency levels
(reads LOCAL_ONE, writes LOCAL_QUORUM), real faults injected while load runs, and afterwards a check of every
acknowledged write, read back at QUORUM.

    .venv/bin/python -m bench.faults                       # every scenario at the issue's figures
    .venv/bin/python -m bench.faults --smoke               # small figures: proves the harness in ~10 minutes
    .venv/bin/python -m bench.faults --only slack          # one scenario (slack, network, worker)
    .venv/bin/python -m bench.faults --help

Scenarios:
- slack: signed Events API traffic (default 150 events/s over 8 channels, 10% edits, 5% deletes, a tenth of new
  messages thread replies) sent as Slack sends it (same event_id retried after a non-2xx answer, a 3 s
  timeout or a dropped connection, up to 3 retries). One node is SIGKILLed and later restarted; another is
  SIGSTOPped for 10 s (a long GC pause) and resumed. Right after the restart, messages acknowledged during the
  outage are read back through REST at LOCAL_ONE (stale reads while hints are replayed).
- network: an author with 10,000 followers posting (each post fanned out to every follower's home cache),
  follows and likes, all through REST, while one node is SIGKILLed and restarted. Afterwards: writes at
  QUORUM, `chronicle network reconcile`, exact counts, and every follower's home page (Q4) through REST.
- worker: both kinds of traffic at a lower rate while gunicorn workers are SIGKILLed mid-request (the one busy
  with a post's fan-out is picked) and a node is restarted gracefully (SIGTERM, drain, start) under load.

Per scenario: acknowledged writes, lost, duplicates, wrong final states, half-written records, 500s, 503s,
retries, timeouts; latency p50/p99/max per phase; readiness (/readyz polled every second) per phase; whether
the generator kept its rate. Targets: 0 lost, 0 duplicates, 0 wrong final states, 0 responses 500 (and no
half-written record of an acknowledged write). One JSON object under bench/results/faults-<time>.json (also
printed) and a Markdown table. The cluster is brought down at the end (--cluster-after).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from cassandra import ConsistencyLevel

from api.app import create_app
from api.db import Database
from api.network import accounts, actions, likes, relations
from api.network.relations import FOLLOWER
from api.node.config import NodeSpec
from api.node.process import destroy, stop_cluster
from api.observability import configure_logging
from bench import faults_network as fnet
from bench import faults_slack as fslack
from bench.faults_common import (
    ADMIN_TOKEN,
    REPLICATION,
    SIGNING_SECRET,
    Client,
    Phases,
    ReadinessProbe,
    Restart,
    Scheduler,
    app_served,
    by_phase,
    cluster,
    cluster_up,
    command_env,
    kill_node,
    latency,
    log,
    outcome_totals,
    pause_node,
    process_serving,
    resume_all,
    resume_node,
    slack_signature,
    statement_errors,
    worker_pids,
)
from bench.scale_common import ROOT, create_scratch_keyspace, drop_scratch_keyspace, scratch_settings, write_result
from bench.tagging import cpu_seconds
from bench.viewer import _busy_jiffies, others_running

SCENARIOS = ("slack", "network", "worker")  # the default; "selfcheck" on request (--only selfcheck)
# Every scenario: nothing acknowledged lost, nothing stored twice, every final state right, no 500 (any 5xx but
# 503 counts: 503 is the documented "retry later"). The network's home pages must show every acknowledged post
# (after one recheck); the worker scenario must leave no record half-written, even of an unacknowledged request.
TARGETS = {"lost": 0, "duplicates": 0, "wrong_final_states": 0, "status_500": 0, "homes_missing_post": 0}
SCENARIO_TARGETS = {"worker": {"half_written": 0}, "selfcheck": {"expectations_failed": 0}}


# ------------------------------------------------------------------------------------------------ run context

@dataclasses.dataclass
class Run:
    args: argparse.Namespace
    specs: list[NodeSpec]
    db: Database  # writes of the set-up (the loader), default consistency levels
    qdb: Database  # the checks: every read at QUORUM
    logs: Path
    tag: str

    def node(self, number: int) -> NodeSpec:
        return self.specs[number - 1]


class Source:
    """An open-loop source in a thread of its own: `emit(due)` at `rate` per second until stopped."""

    def __init__(self, rate: float, emit: Callable[[float], None], name: str) -> None:
        self.rate, self.emit = rate, emit
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.emitted = 0
        self.started = self.stopped = 0.0

    def start(self) -> Source:
        self.thread.start()
        return self

    def _run(self) -> None:
        self.started = time.monotonic()
        i = 0
        while not self.stop_event.is_set():
            due = self.started + i / self.rate
            wait = due - time.monotonic()
            if wait > 0 and self.stop_event.wait(wait):
                break
            self.emit(due)
            self.emitted += 1
            i += 1
        self.stopped = time.monotonic()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=10)

    def figures(self) -> dict[str, Any]:
        seconds = max(1e-9, self.stopped - self.started)
        return {"offered_per_s": self.rate, "emitted": self.emitted, "seconds": round(seconds, 1),
                "emitted_per_s": round(self.emitted / seconds, 1)}


def machine_busy() -> Callable[[], float]:
    """Start measuring the machine's CPU; the returned function gives the busy fraction since."""
    busy0, total0, _steal = _busy_jiffies()

    def since() -> float:
        busy1, total1, _s = _busy_jiffies()
        return round((busy1 - busy0) / max(1, total1 - total0), 3)

    return since


def generator_figures(lags: list[float], source: Source) -> dict[str, Any]:
    """Did the generator keep its rate: first deliveries emitted per second, and how late they started."""
    lag = latency(lags)
    return {**source.figures(), "start_lag_p50_ms": lag["p50_ms"], "start_lag_p99_ms": lag["p99_ms"],
            "start_lag_max_ms": lag["max_ms"],
            "late_over_100ms": sum(1 for x in lags if x > 0.1), "kept_rate": lag["p99_ms"] <= 100.0}


def server_log_counts(logs: Path) -> dict[str, int]:
    """What the server logged: requests answered 5xx (access log), worker timeouts and boots (gunicorn log),
    Cassandra unavailability warnings and unhandled exceptions (app log)."""
    out: Counter = Counter()
    with contextlib.suppress(FileNotFoundError), (logs / "access.log").open(errors="replace") as f:
        for line in f:
            with contextlib.suppress(ValueError):
                status = json.loads(line).get("status")
                if isinstance(status, int) and status >= 500:
                    out[f"access_{status}"] += 1
    for name, patterns in (("gunicorn.log", ("WORKER TIMEOUT", "Booting worker", "was sent SIGKILL")),
                           ("app.log", ("cassandra_unavailable", "unhandled_exception", "slack_event_retry",
                                        "slack_event_store_failed", "has been marked down", "marked up"))):
        with contextlib.suppress(FileNotFoundError), (logs / name).open(errors="replace") as f:
            for line in f:
                for pattern in patterns:
                    if pattern in line:
                        out[pattern] += 1
                if "cassandra_unavailable" in line or "unhandled_exception" in line:
                    with contextlib.suppress(ValueError):
                        record = json.loads(line)
                        error = record.get("error") or record.get("exception", "").strip().rsplit("\n", 1)[-1]
                        out[f"{record['event']}: {error[:120]}"] += 1
    return dict(out)


@contextlib.contextmanager
def scenario_server(run: Run, name: str, extra_env: dict[str, str] | None = None) -> Iterator[Any]:
    cluster_up(run.specs)
    logs = run.logs / name
    with app_served(run.qdb.settings, logs, workers=run.args.workers, threads=run.args.threads,
                    extra_env={**(extra_env or {}), **run.args.app_env}) as server:
        log(f"{name}: gunicorn on port {server.port}, workers {worker_pids(server)}, logs {logs}")
        yield server


def sleep_phase(phases: Phases, name: str, seconds: float) -> None:
    phases.enter(name)
    time.sleep(seconds)


# ------------------------------------------------------------------------------------------------ slack

def scenario_slack(run: Run) -> dict[str, Any]:
    """Slack ingest at `--rate` while one node is killed and restarted, then another paused and resumed."""
    a = run.args
    killed, paused = run.node(a.kill_node), run.node(a.pause_node)
    out: dict[str, Any] = {"config": {"rate": a.rate, "channels": a.channels, "retry_delays_s": a.retry_delays,
                                      "killed_node": killed.name, "paused_node": paused.name,
                                      "pause_s": a.pause_for}}
    with scenario_server(run, "slack") as server:
        phases = Phases("warmup")
        traffic = fslack.SlackTraffic("TFAULTS" + run.tag[:4].upper(), a.channels, seed=11, run_tag=run.tag)
        scheduler = Scheduler(threads=a.client_threads)
        sender = fslack.SlackSender(Client(server.port), scheduler, phases, retry_delays=a.retry_delays)
        busy = machine_busy()
        faults: dict[str, Any] = {}
        probe: dict[str, Any] = {}
        prober: threading.Thread | None = None
        with ReadinessProbe(server.port, phases) as ready:
            source = Source(a.rate, lambda due: sender.send(traffic.next_event(), due), "slack-source").start()
            try:
                time.sleep(a.warmup)
                sleep_phase(phases, "before", a.before)
                phases.enter("during_kill")
                faults["kill_pid"] = kill_node(killed)
                time.sleep(a.kill_for)
                faults.update(Restart(killed).wait(a.restart_wait))
                up_at = time.monotonic()
                phases.enter("after_restart" if faults["restart_s"] is not None else "restart_unfinished")
                if faults["restart_s"] is not None:
                    during_kill = [m for m in traffic.msgs if m.texts[0].phase_sent == "during_kill"]
                    prober = threading.Thread(target=lambda: probe.update(
                        fslack.probe_reads(server.port, traffic.team, during_kill, up_at)), daemon=True)
                    prober.start()
                time.sleep(a.after_restart)
                if faults["restart_s"] is not None:
                    phases.enter("during_pause")
                    pid = pause_node(paused)
                    try:
                        time.sleep(a.pause_for)
                    finally:
                        resume_node(pid)
                    sleep_phase(phases, "after_resume", a.after_resume)
                else:  # a second node down would leave writes without their quorum: a different fault
                    faults["pause"] = "skipped: the killed node had not come back"
            finally:
                source.stop()
                resume_all()
            phases.enter("retries_drain")
            drained = scheduler.wait_idle(timeout=sum(a.retry_delays) + 60)
            phases.end()
            if prober is not None:
                prober.join(timeout=120)
        scheduler.close()
        out["cpu_busy"] = busy()
        time.sleep(2)  # the last writes' replicas settle; the read is at QUORUM anyway
        log("slack: checking every event at QUORUM")
        out["check"] = fslack.verify(run.qdb, traffic)
        out.update(
            phases_s=phases.seconds(), faults=faults, drained=drained, harness_errors=scheduler.errors[:5],
            totals=outcome_totals(sender.attempts), retries=fslack.retry_figures(traffic),
            latency_by_phase=by_phase(sender.attempts, phases), readiness_by_phase=ready.summary(),
            stale_reads_after_restart=probe, generator=generator_figures(sender.lags, source),
            server_logs=server_log_counts(run.logs / "slack"), statement_errors=statement_errors(server.port))
    return out


# ------------------------------------------------------------------------------------------------ network

def network_load(traffic: fnet.NetworkTraffic, *, post_every: float, posts: int, follow_rate: float,
                 like_rate: float) -> list[Source]:
    """Open-loop sources of network writes: `posts` posts one every `post_every` s (none when 0), follows and
    likes at their rates."""
    def post(due: float) -> None:
        if traffic.posts_sent < posts:
            traffic.post(due)

    sources = [Source(follow_rate, traffic.follow, "net-follows"), Source(like_rate, traffic.like, "net-likes")]
    if posts:
        sources.append(Source(1.0 / post_every, post, "net-posts"))
    return [s.start() for s in sources]


def network_checks(run: Run, server: Any, traffic: fnet.NetworkTraffic, name: str) -> dict[str, Any]:
    """Writes at QUORUM, the reconcile job, exact counts, every follower's home page."""
    net = traffic.net
    out: dict[str, Any] = {}
    log(f"{name}: checking posts, follows and likes at QUORUM")
    writes = fnet.verify_writes(run.qdb, traffic)
    stored, orphans = writes.pop("_stored"), writes.pop("_orphans")
    out["writes"] = writes
    env = command_env(run.qdb.settings, run.logs / name, run.args.app_env)
    touched = fnet.touched_accounts(traffic)
    post_ids = [p.post_id for p in stored]
    log(f"{name}: chronicle network reconcile ({len(touched)} accounts, {len(post_ids)} posts)")
    out["counts_before_reconcile"] = fnet.verify_counts(run.qdb, traffic, stored)
    out["reconcile_dry_run"] = fnet.reconcile(env, net.name, touched, post_ids, dry_run=True)
    out["reconcile"] = fnet.reconcile(env, net.name, touched, post_ids, dry_run=False)
    out["counts"] = fnet.verify_counts(run.qdb, traffic, stored)
    followers = sorted(relations.ids(run.qdb, net.name, fnet.AUTHOR, FOLLOWER))
    acked_ids = {o.post_id for o in traffic.ops if o.kind == "post" and o.acked}
    log(f"{name}: home pages of {len(followers)} followers through REST")
    homes = fnet.verify_homes(server.port, net.name, followers, stored, acked_ids, net.prebuilt)
    missing = homes.pop("_missing")
    if missing:
        time.sleep(run.args.home_recheck_delay)
        again = fnet.verify_homes(server.port, net.name, missing, stored, acked_ids, net.prebuilt)
        again.pop("_missing")
        homes["recheck_after_s"] = run.args.home_recheck_delay
        homes["recheck"] = again
    out["homes"] = homes
    out["orphan_posts"] = [{"post_id": p.post_id, "content": p.content} for p in orphans][:10]
    return out


def scenario_network(run: Run) -> dict[str, Any]:
    """Posts with fan-out to `--followers`, follows and likes while one node is killed and restarted."""
    a = run.args
    killed = run.node(a.kill_node)
    name = f"faults{run.tag[:6]}"
    net = fnet.setup(run.db, name, a.followers, a.spare, run.logs / "network" / "files", prebuild=a.prebuild)
    threshold = fnet.threshold_for(a.followers, a.spare)
    out: dict[str, Any] = {"config": {"followers": a.followers, "spare_accounts": a.spare, "posts": a.posts,
                                      "post_every_s": a.post_every, "follow_rate": a.follow_rate,
                                      "like_rate": a.like_rate, "prebuilt_caches": len(net.prebuilt),
                                      "hybrid_threshold": threshold, "killed_node": killed.name,
                                      "pause_s": a.net_pause, "paused_node": run.node(a.pause_node).name}}
    env = {"CHRONICLE_NETWORK_HYBRID_THRESHOLD": str(threshold)}
    with scenario_server(run, "network", env) as server:
        phases = Phases("warmup")
        scheduler = Scheduler(threads=a.client_threads)
        traffic = fnet.NetworkTraffic(net, Client(server.port), scheduler, phases, run_tag=run.tag)
        busy = machine_busy()
        faults: dict[str, Any] = {}
        with ReadinessProbe(server.port, phases) as ready:
            sources = network_load(traffic, post_every=a.post_every, posts=a.posts, follow_rate=a.follow_rate,
                                   like_rate=a.like_rate)
            try:
                time.sleep(a.warmup)
                sleep_phase(phases, "before", a.net_before)
                phases.enter("during_kill")
                faults["kill_pid"] = kill_node(killed)
                time.sleep(a.net_kill_for)
                faults.update(Restart(killed).wait(a.restart_wait))
                sleep_phase(phases, "after_restart" if faults["restart_s"] is not None else "restart_unfinished",
                            a.net_after)
                if a.net_pause and faults["restart_s"] is not None:
                    phases.enter("during_pause")
                    pid = pause_node(run.node(a.pause_node))
                    try:
                        time.sleep(a.net_pause)
                    finally:
                        resume_node(pid)
                    sleep_phase(phases, "after_resume", a.net_after)
            finally:
                for source in sources:
                    source.stop()
                resume_all()
            phases.enter("retries_drain")
            drained = scheduler.wait_idle(timeout=sum(fnet.RETRY_DELAYS) + 180)
            phases.end()
        scheduler.close()
        out["cpu_busy"] = busy()
        out.update(phases_s=phases.seconds(), faults=faults, drained=drained, harness_errors=scheduler.errors[:5],
                   totals=outcome_totals(traffic.attempts),
                   totals_by_kind={k: outcome_totals(traffic.attempts, f"network:{k}")
                                   for k in ("post", "follow", "like")},
                   retries=sum(1 for x in traffic.attempts if x.retry),
                   latency_by_phase={k: by_phase(traffic.attempts, phases, what_prefix=f"network:{k}")
                                     for k in ("post", "follow", "like")},
                   readiness_by_phase=ready.summary(),
                   fanned_out_to=sorted({o.fanned_out_to for o in traffic.ops if o.kind == "post" and o.acked}))
        out.update(network_checks(run, server, traffic, "network"))
        out["server_logs"] = server_log_counts(run.logs / "network")
        out["statement_errors"] = statement_errors(server.port)
    return out


# ------------------------------------------------------------------------------------------------ worker

def busiest_worker(pids: list[int], window: float = 0.2) -> tuple[int, float]:
    """The worker that used the most CPU over `window` seconds: (pid, CPU s)."""
    before = {p: cpu_seconds(p) for p in pids}
    time.sleep(window)
    used = {p: cpu_seconds(p) - before[p] for p in pids}
    pid = max(used, key=used.get)
    return pid, round(used[pid], 3)


def kill_worker_mid_post(server: Any, traffic: fnet.NetworkTraffic, cut_after: float) -> dict[str, Any]:
    """Send a post (fan-out to every follower), find the worker holding its connection, SIGKILL it
    `cut_after` seconds into the request. The client sees the connection drop and retries, as it would."""
    ports: queue.Queue[int] = queue.Queue()
    op = traffic.post(time.monotonic(), on_sent=ports.put)
    kill: dict[str, Any] = {"post": op.content}
    try:
        client_port = ports.get(timeout=30)
    except queue.Empty:
        client_port = None
    time.sleep(cut_after)
    pid = process_serving(server.port, client_port) if client_port else None
    workers = worker_pids(server)
    if pid in workers:
        kill["picked"] = "the worker serving the post"
    else:
        pid, cpu = busiest_worker(workers)
        kill.update(picked="the busiest worker (the post's connection was not found)", cpu_s=cpu)
    kill["post_in_flight"] = not op.attempts
    kill["at"] = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    kill["pid"] = pid
    kill["_op"] = op
    return kill


def scenario_worker(run: Run) -> dict[str, Any]:
    """gunicorn workers SIGKILLed mid-request, then a node restarted gracefully, under Slack and network load."""
    a = run.args
    restarted = run.node(a.restart_node)
    name = f"faultsw{run.tag[:6]}"
    net = fnet.setup(run.db, name, a.worker_followers, 200, run.logs / "worker" / "files", prebuild=a.prebuild)
    threshold = fnet.threshold_for(a.worker_followers, 200)
    out: dict[str, Any] = {"config": {"slack_rate": a.worker_rate, "followers": a.worker_followers,
                                      "worker_kills": a.worker_kills, "restarted_node": restarted.name}}
    with scenario_server(run, "worker", {"CHRONICLE_NETWORK_HYBRID_THRESHOLD": str(threshold)}) as server:
        phases = Phases("warmup")
        scheduler = Scheduler(threads=a.client_threads)
        client = Client(server.port)
        slack = fslack.SlackTraffic("TFAULTW" + run.tag[:4].upper(), a.channels, seed=12, run_tag=run.tag + "w")
        sender = fslack.SlackSender(client, scheduler, phases, retry_delays=a.retry_delays)
        traffic = fnet.NetworkTraffic(net, client, scheduler, phases, run_tag=run.tag + "w", seed=6)
        busy = machine_busy()
        kills: list[dict[str, Any]] = []
        faults: dict[str, Any] = {"worker_kills": kills}
        with ReadinessProbe(server.port, phases) as ready:
            sources = [Source(a.worker_rate, lambda due: sender.send(slack.next_event(), due), "slack-source").start(),
                       *network_load(traffic, post_every=1.0, posts=0, follow_rate=a.follow_rate / 2,
                                     like_rate=a.like_rate / 2)]
            traffic.post(time.monotonic())  # something to like from the start
            try:
                time.sleep(a.warmup)
                sleep_phase(phases, "before", a.before / 2)
                phases.enter("worker_kills")
                for _ in range(a.worker_kills):
                    kills.append(kill_worker_mid_post(server, traffic, a.cut_after))
                    time.sleep(a.kill_every)
                phases.enter("node_restart")
                restart = Restart(restarted, graceful=True).wait(a.restart_wait)
                faults.update({f"graceful_{k}": v for k, v in restart.items()})
                sleep_phase(phases, "after_restart" if restart["restart_s"] is not None else "restart_unfinished",
                            a.after_restart)
            finally:
                for source in sources:
                    source.stop()
            phases.enter("retries_drain")
            drained = scheduler.wait_idle(timeout=sum(a.retry_delays) + 180)
            phases.end()
        scheduler.close()
        attempts = sender.attempts + traffic.attempts
        for kill in kills:  # requests the kill cut: no answer, within a second of it
            kill["requests_cut"] = sum(1 for x in attempts if x.error == "connection"
                                       and x.started <= kill["at"] <= x.started + x.seconds + 1.0)
            kill.pop("at")
            op = kill.pop("_op")
            kill["post_outcomes"] = [x.outcome for x in op.attempts]
        out["cpu_busy"] = busy()
        time.sleep(2)
        log("worker: checking Slack events at QUORUM")
        out["slack_check"] = fslack.verify(run.qdb, slack)
        out.update(phases_s=phases.seconds(), faults=faults, drained=drained, harness_errors=scheduler.errors[:5],
                   totals=outcome_totals(attempts), slack_totals=outcome_totals(sender.attempts),
                   network_totals=outcome_totals(traffic.attempts), slack_retries=fslack.retry_figures(slack),
                   network_retries=sum(1 for x in traffic.attempts if x.retry),
                   latency_by_phase=by_phase(sender.attempts, phases, what_prefix="slack:"),
                   network_latency_by_phase=by_phase(traffic.attempts, phases),
                   readiness_by_phase=ready.summary(), generator=generator_figures(sender.lags, sources[0]),
                   worker_pids_after=worker_pids(server))
        out["network"] = network_checks(run, server, traffic, "worker")
        out["server_logs"] = server_log_counts(run.logs / "worker")
        out["statement_errors"] = statement_errors(server.port)
    return out


# ------------------------------------------------------------------------------------------------ self-check

def scenario_selfcheck(run: Run) -> dict[str, Any]:
    """The checks must see what they are there to see: writes through the app in-process (no fault), checked
    clean, then the model or the data tampered with in known ways, checked again. A check that stays silent
    here would stay silent on a real loss."""
    settings = dataclasses.replace(run.db.settings, log_level="WARNING", slack_signing_secret=SIGNING_SECRET,
                                   admin_token=ADMIN_TOKEN)
    client = create_app(settings, database=run.db).test_client()
    expectations: list[tuple[str, bool]] = []

    # Slack: 300 events, then three tamperings of the model.
    traffic = fslack.SlackTraffic("TSELF" + run.tag[:4].upper(), 2, seed=1, run_tag=run.tag + "s")
    for _ in range(300):
        sent = traffic.next_event()
        sent.acked = client.post("/slack/events", data=sent.body,
                                 headers=slack_signature(sent.body)).status_code == 200
    clean = fslack.verify(run.qdb, traffic)
    expectations.append(("slack clean: all acknowledged, nothing reported",
                         clean["acknowledged"] == 300 and not any(clean[k] for k in (
                             "lost", "duplicates", "wrong_final_states", "unexpected", "half_written"))))
    ghost = traffic._post("EvGHOST", 10**6)  # in the model as acknowledged, never sent
    ghost.acked = True
    traffic.sent.append(ghost)
    edit = next(e for e in traffic.sent if e.kind == "edit" and e.acked and e is e.message.texts[-1])
    edit.text = "a text never sent"
    victim = next(m for m in traffic.msgs if m.delete is None and len(m.texts) == 1 and m.texts[0].acked
                  and not m.replies and m is not ghost.message)
    victim.delete = fslack.Sent("EvNODELETE", "delete", victim, victim.ts + 5, None, b"", acked=True)
    traffic.sent.append(victim.delete)
    tampered = fslack.verify(run.qdb, traffic)
    expectations += [("slack: an acknowledged message never stored is lost", tampered["lost"] >= 3),
                     ("slack: a stored text the model never allows is a wrong state",
                      tampered["wrong_final_states"] >= 1)]

    # Network: posts, follows and likes through the app, then tamperings of the model and of the data.
    net = fnet.setup(run.db, f"self{run.tag[:6]}", 40, 10, run.logs / "selfcheck" / "files", prebuild=0.5)
    ops: list[fnet.Op] = []
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    for i in range(3):
        content = f"self-check post {run.tag} {i}"
        answer = client.post(f"/networks/{net.name}/posts", json={"author_id": fnet.AUTHOR, "content": content},
                             headers=admin)
        ops.append(fnet.Op("post", fnet.AUTHOR, content=content, post_id=answer.json["post"]["post_id"],
                           acked=answer.status_code == 201))
    for a, b in zip(net.followers[:5], net.followers[5:10], strict=True):
        answer = client.put(f"/networks/{net.name}/accounts/{a}/follows/{b}", headers=admin)
        ops.append(fnet.Op("follow", a, b, acked=answer.status_code == 200))
    for u in net.followers[:5]:
        answer = client.put(f"/networks/{net.name}/posts/{ops[0].post_id}/likes/{u}", headers=admin)
        ops.append(fnet.Op("like", u, ops[0].post_id, acked=answer.status_code == 200))
    model = SimpleNamespace(net=net, ops=ops)
    writes = fnet.verify_writes(run.qdb, model)
    counts = fnet.verify_counts(run.qdb, model, writes["_stored"])
    expectations.append(("network clean: nothing reported", not any(
        writes[k] for k in ("lost", "duplicates", "half_written", "unexpected")) and not counts["wrong_counts"]))
    ops.append(fnet.Op("post", fnet.AUTHOR, content="never sent", post_id=12345, acked=True))
    ops.append(fnet.Op("follow", net.followers[20], net.followers[21], acked=True))
    actions.create_post(run.db, net.name, accounts.get_account(run.db, net.name, fnet.AUTHOR), ops[1].content)
    run.db.execute(likes.PUT_LIKE_BY_POST, (net.name, ops[0].post_id, net.followers[30], datetime.now(UTC)))
    ops.append(fnet.Op("like", net.followers[30], ops[0].post_id, gave_up=True))
    run.db.execute_many(accounts.count_writes(net.name, net.followers[0], net.followers[5], +1))
    writes = fnet.verify_writes(run.qdb, model)
    counts = fnet.verify_counts(run.qdb, model, writes["_stored"])
    expectations += [
        ("network: an acknowledged post and follow never stored are lost", writes["lost"] == 2),
        ("network: a post stored twice is a duplicate", writes["duplicates"] == 1),
        ("network: a like with one of its two rows is half-written", writes["half_written"] == 1),
        ("network: a counter off by one is a wrong count", counts["wrong_counts"] >= 2)]
    failed = [name for name, ok in expectations if not ok]
    return {"expectations": len(expectations), "expectations_failed": len(failed), "failed": failed,
            "slack_tampered": {k: tampered[k] for k in ("lost", "wrong_final_states", "examples")},
            "network_tampered": {"lost": writes["lost"], "duplicates": writes["duplicates"],
                                 "half_written": writes["half_written"], "wrong_counts": counts["wrong_counts"]}}


# ------------------------------------------------------------------------------------------------ report

def _network_row(result: dict[str, Any]) -> dict[str, Any]:
    """The network part of a row: writes at QUORUM, counts after reconcile, home pages (after the recheck)."""
    w, homes = result["writes"], result["homes"]
    still_missing = homes["recheck"]["followers_missing_acknowledged"] if "recheck" in homes else 0
    partial_fanout = sum(1 for shown in homes["unacknowledged_posts_shown_to"].values()
                         if shown < homes["followers_read"])
    return {"acknowledged": sum(w["acknowledged"].values()), "lost": w["lost"], "duplicates": w["duplicates"],
            "wrong_final_states": result["counts"]["wrong_counts"], "half_written": w["half_written"] + partial_fanout,
            "never_acknowledged": sum(w["never_acknowledged"].values()),
            "homes_missing_post": still_missing, "homes_missing_first_read": homes["followers_missing_acknowledged"]}


def summary_row(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """The figures the targets are about, one scenario. `half_written`: records left partly written by a
    request that was never acknowledged (a write acknowledged but partly missing counts as lost)."""
    if "error" in result:
        return {"scenario": name, "error": result["error"]}
    if name == "selfcheck":
        return {"scenario": name, "expectations_failed": result["expectations_failed"]}
    totals = result["totals"]
    row: dict[str, Any] = {"scenario": name, "status_500": totals["status_500"] + totals["other_5xx"],
                           "status_503": totals["status_503"], "timeouts": totals["timeouts"],
                           "connection_errors": totals["connection_errors"]}
    parts = []
    if name == "slack":
        parts.append(result["check"])
        row["retries"] = result["retries"]["retries"]
    elif name == "network":
        parts.append(_network_row(result))
        row["retries"] = result["retries"]
    else:
        parts += [result["slack_check"], _network_row(result["network"])]
        row["retries"] = result["slack_retries"]["retries"] + result["network_retries"]
    for key in ("acknowledged", "lost", "duplicates", "wrong_final_states", "half_written", "never_acknowledged",
                "homes_missing_post", "homes_missing_first_read"):
        if any(key in part for part in parts):
            row[key] = sum(part.get(key, 0) for part in parts)
    return row


def verdict(rows: list[dict[str, Any]]) -> dict[str, Any]:
    failed = []
    for row in rows:
        if "error" in row:
            failed.append(f"{row['scenario']}: did not finish ({row['error'][:200]})")
            continue
        targets = {**TARGETS, **SCENARIO_TARGETS.get(row["scenario"], {})}
        for key, target in targets.items():
            if row.get(key, 0) > target:
                failed.append(f"{row['scenario']}: {key} {row[key]} (target {target})")
    return {"pass": not failed, "failed": failed, "targets": TARGETS, "scenario_targets": SCENARIO_TARGETS}


def markdown(result: dict[str, Any]) -> str:
    rows = result["summary"]
    cols = ["scenario", "acknowledged", "lost", "duplicates", "wrong_final_states", "half_written",
            "homes_missing_post", "status_500", "status_503", "retries", "timeouts", "connection_errors",
            "never_acknowledged"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in rows:
        lines.append("| " + " | ".join(str(row.get(c, "-")) for c in cols) + " |")
    for name, res in result["scenarios"].items():
        for label, table in (("", res.get("latency_by_phase")), (" network", res.get("network_latency_by_phase"))):
            if not table:
                continue
            groups = table if "attempts" in next(iter(table.values()), {}) else None
            sub = {"": groups} if groups else table
            for kind, phases in sub.items():
                lines += ["", f"{name}{label}{' ' + kind if kind else ''}: latency per phase (every attempt)", "",
                          "| phase | attempts | retries | p50 ms | p99 ms | max ms | outcomes | /readyz |",
                          "|---|---|---|---|---|---|---|---|"]
                ready = res.get("readiness_by_phase", {})
                for phase, f in phases.items():
                    outcomes = ", ".join(f"{k} {v}" for k, v in f["outcomes"].items())
                    readyz = ", ".join(f"{k} {v}" for k, v in ready.get(phase, {}).items())
                    lines.append(f"| {phase} | {f['attempts']} | {f['retries']} | {f['p50_ms']} | {f['p99_ms']} | "
                                 f"{f['max_ms']} | {outcomes} | {readyz} |")
    check = result["scenarios"].get("selfcheck")
    if check and "error" not in check:
        lines += ["", f"Self-check: {check['expectations']} expectations, {check['expectations_failed']} failed "
                  f"{check['failed']}"]
    v = result["verdict"]
    lines += ["", f"Verdict: {'PASS' if v['pass'] else 'FAIL'}" + ("" if v["pass"] else ": " + "; ".join(v["failed"]))]
    return "\n".join(lines)


def code_version() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout

    # The working tree is what gunicorn serves: uncommitted changes to the app are part of what was measured.
    return {"commit": git("rev-parse", "--short", "HEAD").strip(),
            "uncommitted": [line[3:] for line in git("status", "--short", "--", "api", "gunicorn.conf.py")
                            .splitlines() if line.strip()]}


# ------------------------------------------------------------------------------------------------ main

SMOKE = {"rate": 30, "warmup": 5, "before": 10, "kill_for": 15, "after_restart": 10, "pause_for": 10,
         "after_resume": 10, "followers": 1000, "spare": 200, "posts": 8, "post_every": 4.0, "follow_rate": 3,
         "like_rate": 8, "net_before": 10, "net_kill_for": 15, "net_after": 10, "worker_rate": 20,
         "worker_followers": 2000, "worker_kills": 2}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.faults", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios: slack, network, worker; "
                   "selfcheck (not run by default) proves the checks report tampered data")
    p.add_argument("--smoke", action="store_true", help="small figures (overridden by any option given)")
    p.add_argument("--workers", type=int, default=3, help="gunicorn workers (gunicorn.conf.py default)")
    p.add_argument("--threads", type=int, default=8, help="gunicorn threads per worker (gunicorn.conf.py default)")
    p.add_argument("--kill-node", type=int, default=3, choices=(1, 2, 3), help="node SIGKILLed (slack, network)")
    p.add_argument("--pause-node", type=int, default=2, choices=(1, 2, 3), help="node SIGSTOPped (slack)")
    p.add_argument("--restart-node", type=int, default=2, choices=(1, 2, 3), help="node restarted (worker)")
    p.add_argument("--warmup", type=float, help="seconds of load before the measured phases [5]")
    p.add_argument("--client-threads", type=int, default=1024,
                   help="requests the load generator may have in flight (open loop: when all are waiting, new "
                   "events start late, which the report shows as start lag)")
    p.add_argument("--restart-wait", type=float, default=600.0,
                   help="seconds a restarted node may take to answer CQL before the run goes on without it")
    p.add_argument("--app-env", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable of the served app (repeatable), e.g. "
                   "CHRONICLE_SPECULATIVE_ATTEMPTS=0 to measure without speculative execution")
    g = p.add_argument_group("slack")
    g.add_argument("--rate", type=float, help="events per second [150]")
    g.add_argument("--channels", type=int, default=8)
    g.add_argument("--before", type=float, help="seconds before the kill [20]")
    g.add_argument("--kill-for", type=float, help="seconds the node stays dead before its restart starts [30]")
    g.add_argument("--after-restart", type=float, help="seconds between the node answering and the pause [20]")
    g.add_argument("--pause-for", type=float, help="seconds of SIGSTOP [10]")
    g.add_argument("--after-resume", type=float, help="seconds of load after SIGCONT [20]")
    g.add_argument("--retry-delays", default="1,5,15",
                   help="seconds before Slack's 3 retries (Slack's own: about 0,60,300) [1,5,15]")
    g = p.add_argument_group("network")
    g.add_argument("--followers", type=int, help="followers of the posting author [10000]")
    g.add_argument("--spare", type=int, help="accounts that start following the author during the run [1000]")
    g.add_argument("--prebuild", type=float, default=0.5, help="fraction of followers with a home cache built "
                   "before the run (the others' is built by their first read)")
    g.add_argument("--posts", type=int, help="posts by the author (at most 25: a home page shows 25) [20]")
    g.add_argument("--post-every", type=float, help="seconds between two posts [4]")
    g.add_argument("--follow-rate", type=float, help="follows per second [5]")
    g.add_argument("--like-rate", type=float, help="likes per second [20]")
    g.add_argument("--net-before", type=float, help="seconds before the kill [20]")
    g.add_argument("--net-kill-for", type=float, help="seconds the node stays dead [30]")
    g.add_argument("--net-after", type=float, help="seconds of load after the restart (and after the resume) [20]")
    g.add_argument("--net-pause", type=float, default=0.0, help="also SIGSTOP --pause-node for this many seconds "
                   "after the restart (0: no pause; lightweight transactions and counter updates are not "
                   "idempotent, so no speculative execution covers them)")
    g.add_argument("--home-recheck-delay", type=float, default=15.0,
                   help="seconds before home pages that missed a post are read again")
    g = p.add_argument_group("worker")
    g.add_argument("--worker-rate", type=float, help="Slack events per second beside the network writes [60]")
    g.add_argument("--worker-followers", type=int, help="followers of the author whose posts are cut [2000]")
    g.add_argument("--worker-kills", type=int, help="gunicorn workers SIGKILLed [3]")
    g.add_argument("--kill-every", type=float, default=8.0, help="seconds between two worker kills")
    g.add_argument("--cut-after", type=float, default=0.15,
                   help="seconds into a post's request (its fan-out) at which its worker is killed")
    g = p.add_argument_group("keyspace and cluster")
    g.add_argument("--keep", action="store_true", help="keep the scratch keyspace (dropped by default)")
    g.add_argument("--reuse", metavar="KEYSPACE", help="a keyspace kept by an earlier run (--keep): skips the "
                   "migration; each run writes under names of its own")
    g.add_argument("--cluster-after", choices=("destroy", "stop", "keep"), default="destroy",
                   help="what happens to the 3-node cluster at the end (destroy: stop and delete its data)")
    args = p.parse_args(argv)
    defaults = {"rate": 150, "warmup": 5, "before": 20, "kill_for": 30, "after_restart": 20, "pause_for": 10,
                "after_resume": 20, "followers": 10_000, "spare": 1000, "posts": 20, "post_every": 4.0,
                "follow_rate": 5, "like_rate": 20, "net_before": 20, "net_kill_for": 30, "net_after": 20,
                "worker_rate": 60, "worker_followers": 2000, "worker_kills": 3}
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, SMOKE[key] if args.smoke and key in SMOKE else value)
    args.retry_delays = tuple(float(x) for x in args.retry_delays.split(","))
    if len(args.retry_delays) != 3:
        p.error("--retry-delays: three delays (Slack retries 3 times)")
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    try:
        args.app_env = dict(item.split("=", 1) for item in args.app_env)
    except ValueError:
        p.error("--app-env: NAME=VALUE")
    if unknown := set(args.only) - {*SCENARIOS, "selfcheck"}:
        p.error(f"--only: unknown scenario(s) {sorted(unknown)}; choose from {', '.join(SCENARIOS)}")
    if args.posts > 25:
        p.error("--posts: at most 25 (the check expects every post on the home page of 25)")
    if args.kill_node == args.pause_node:
        p.error("--kill-node and --pause-node must differ")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging("WARNING", stream=sys.stderr)
    # A SIGTERM unwinds like an exception: gunicorn stopped, paused nodes resumed, the keyspace dropped.
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))
    specs = cluster()
    started = datetime.now(UTC)
    tag = secrets.token_hex(4)
    logs = ROOT / ".chronicle" / "faults" / f"{started:%Y%m%dT%H%M%SZ}-{tag}"
    result: dict[str, Any] = {"started": started, "args": {k: v for k, v in vars(args).items()},
                              "code": code_version(), "logs": str(logs), "others_running_at_start": others_running(),
                              "scenarios": {}}
    log(f"cluster: {', '.join(f'{s.name} {s.address}:{s.native_port}' for s in specs)}; logs {logs}")
    db = qdb = None
    try:
        cluster_up(specs)
        if args.reuse:
            settings = scratch_settings(args.reuse, node=specs[0], replication=REPLICATION, request_timeout=30.0)
        else:
            log("keyspace: migrating (RF 3; about two minutes on this machine)")
            made = create_scratch_keyspace("faults", node=specs[0], replication=REPLICATION, request_timeout=30.0)
            made.close()
            settings = made.settings
        # The service's default levels for the set-up writes; every node a contact point: the driver must find
        # the cluster whichever node is down.
        settings = dataclasses.replace(settings, contact_points=[s.address for s in specs],
                                       read_consistency=ConsistencyLevel.LOCAL_ONE,
                                       write_consistency=ConsistencyLevel.LOCAL_QUORUM)
        db = Database(settings)
        qdb = Database(dataclasses.replace(settings, read_consistency=ConsistencyLevel.QUORUM))
        result["keyspace"] = db.keyspace
        run = Run(args, specs, db, qdb, logs, tag)
        for name in args.only:
            log(f"scenario {name}")
            scenario = {"slack": scenario_slack, "network": scenario_network, "worker": scenario_worker,
                        "selfcheck": scenario_selfcheck}[name]
            try:
                result["scenarios"][name] = scenario(run)
            except Exception as exc:  # noqa: BLE001 - the next scenario still runs; the report says why
                log(f"scenario {name} failed: {type(exc).__name__}: {exc}")
                result["scenarios"][name] = {"error": f"{type(exc).__name__}: {exc}"[:1000]}
            finally:
                resume_all()
    finally:
        resume_all()
        if qdb is not None:
            qdb.close()
        if db is not None:
            with contextlib.suppress(Exception):
                cluster_up(specs)  # a scenario that failed mid-fault may have left a node down
                if args.keep:
                    db.close()
                else:
                    drop_scratch_keyspace(db)
        if args.cluster_after == "destroy":
            destroy(specs, log=log)
        elif args.cluster_after == "stop":
            stop_cluster(specs, log=log)
    result["others_running_at_end"] = others_running()
    result["summary"] = [summary_row(n, r) for n, r in result["scenarios"].items()]
    result["verdict"] = verdict(result["summary"])
    result["finished"] = datetime.now(UTC)
    write_result("faults", result)
    print(markdown(result), flush=True)
    return 0 if result["verdict"]["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
