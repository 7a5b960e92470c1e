"""The one worker loop (api/worker_loop.py) on a manual clock: idle sleeps, stops, signals; and the workers and
commands built on it (network jobs, Slack files) against the real node."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from api.network import jobs
from api.worker_loop import StopOnSignal, run_worker
from tests.clocks import ManualClock

ROOT = Path(__file__).resolve().parents[1]


def scripted(results: list[int], clock: ManualClock, seen: list[float]):
    """A run_once that returns `results` one by one (0 = nothing to do) and notes the clock at each pass."""
    def run_once() -> int:
        seen.append(clock.monotonic())
        return results.pop(0)
    return run_once


def test_an_idle_pass_sleeps_the_interval_on_the_clock_and_a_busy_one_does_not():
    clock, seen, finished = ManualClock(), [], []
    results = [3, 0, 0, 2, 0, 1]
    start, real = clock.monotonic(), time.monotonic()
    passes = run_worker(scripted(results, clock, seen), idle=lambda n: n == 0, clock=clock, interval=30.0,
                        stop=lambda: not results, finish=lambda: finished.append(True))
    assert passes == 6 and finished == [True]
    assert [t - start for t in seen] == [0.0, 0.0, 30.0, 60.0, 60.0, 90.0]
    assert clock.monotonic() - start == 90.0  # the last pass was busy: no sleep after it
    assert time.monotonic() - real < 1.0  # nothing waited for real


def test_until_idle_stops_at_the_first_empty_pass_and_max_passes_bounds_the_loop():
    clock, seen = ManualClock(), []
    assert run_worker(scripted([2, 1, 0, 5], clock, seen), idle=lambda n: n == 0, clock=clock, interval=5.0,
                      until_idle=True) == 3
    assert len(set(seen)) == 1  # no sleeping in that mode
    results = [0, 0, 0, 0, 0]
    assert run_worker(scripted(results, clock, seen), idle=lambda n: n == 0, clock=clock, interval=5.0,
                      max_passes=2) == 2
    assert results == [0, 0, 0]


def test_the_worker_is_finished_even_when_a_pass_raises():
    finished = []

    def boom() -> int:
        raise RuntimeError("pass failed")

    with pytest.raises(RuntimeError):
        run_worker(boom, idle=lambda n: n == 0, clock=ManualClock(), finish=lambda: finished.append(True))
    assert finished == [True]


def test_a_stop_during_an_idle_sleep_cuts_it_short():
    clock = ManualClock()
    start = clock.monotonic()
    passes = run_worker(lambda: 0, idle=lambda n: n == 0, clock=clock, interval=600.0,
                        stop=lambda: clock.monotonic() - start >= 1.0)
    assert passes == 1
    assert 1.0 <= clock.monotonic() - start <= 1.25  # woke within one step of the stop, not after 600 s


def test_sigterm_finishes_the_current_unit_then_stops_and_the_handlers_are_put_back():
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    said: list[str] = []
    units: list[str] = []

    def run_once() -> int:
        os.kill(os.getpid(), signal.SIGTERM)  # arrives while this unit is in progress
        units.append("finished")  # ... which still completes
        return 1

    with StopOnSignal("job", say=said.append).installed() as stopping:
        passes = run_worker(run_once, idle=lambda n: n == 0, clock=ManualClock(), stop=stopping)
    assert passes == 1 and units == ["finished"]
    assert said == [f"signal {int(signal.SIGTERM)}: finishing the current job, then stopping"]
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before



def test_a_job_worker_retries_by_its_clock(mdb, clock, monkeypatch):
    """A failed job is due again `backoff_seconds` later on the worker's clock (the db's): the loop sleeps its
    interval on that clock until then, and runs it again exactly when it is due."""
    monkeypatch.setattr(jobs, "QUEUE", f"test-jobs-{uuid.uuid4().hex[:8]}")  # apart from other tests' workers
    runs: list[float] = []

    def handle(_db, _network, _kind, _subject) -> dict:
        runs.append(clock.time())
        if len(runs) == 1:
            raise TimeoutError("first attempt times out")
        return {}

    jobs.enqueue(mdb, "net1", jobs.CELEBRITY, 7)
    worker = jobs.JobWorker(mdb, handle, backoff_seconds=30.0)
    assert worker.clock is clock
    passes: list[jobs.Stats] = []
    worker.run(interval=10.0, stop=lambda: len(runs) >= 2, on_pass=passes.append)
    assert runs[1] - runs[0] == 30.0  # not at +20 (the idle pass before), at +30
    assert [(s.retried, s.done) for s in passes] == [(1, 0), (0, 0), (0, 0), (0, 0), (0, 1)]


def test_a_file_worker_takes_the_db_clock(mdb, clock, tmp_path):
    from api.slack.files import FileWorker
    from api.slack.settings import SlackSettings

    worker = FileWorker(mdb, dataclasses.replace(SlackSettings.from_env(), files_root=str(tmp_path)))
    try:
        assert worker.clock is clock
    finally:
        worker._pool.shutdown()


@pytest.mark.parametrize("command,unit,done_line", [
    (("network", "worker"), "job", None),
    # The run's keyspace is shared: files earlier tests queued may be due, and are counted.
    (("slack", "file-worker"), "file", r"total: stored=\d+ retried=\d+ failed=\d+ skipped=\d+\n\Z"),
], ids=["network-worker", "slack-file-worker"])
def test_the_worker_commands_stop_on_sigterm_with_exit_0(settings, db, command, unit, done_line):
    env = {**os.environ, "CHRONICLE_KEYSPACE": settings.keyspace,
           "CHRONICLE_CASSANDRA_PORT": str(settings.cassandra_port)}
    proc = subprocess.Popen([sys.executable, "-c", "from api.cli import main; main()", *command,
                             "--interval", "0.1"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = []  # up to the banner, printed once connected and the handlers installed (warnings before it)
        while not any(" worker " in line and settings.keyspace in line for line in lines):
            line = proc.stderr.readline()
            assert line, f"exited before its banner: {lines}"
            lines.append(line)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert f"signal {int(signal.SIGTERM)}: finishing the current {unit}, then stopping" in err
    if done_line:
        assert re.search(done_line, err), err
    else:
        assert json.loads(out)["failed"] == 0


def test_a_worker_command_logs_to_stderr_and_prints_only_its_summary_on_stdout(settings, db):
    """A job that runs logs a line: it goes to stderr as JSON, and stdout is the summary alone (unconfigured,
    structlog printed plain lines on stdout ahead of it)."""
    from api.network import jobs
    from tests.network.helpers import stop_jobs

    network = f"logs{uuid.uuid4().hex[:8]}"  # a network of no posts: its term job finds nothing and is done
    db.execute_many(jobs.job_writes(network, jobs.TERM_TOP, "nothing", clock=db.clock))
    stop_jobs(db)  # an earlier test's in-process worker must not hold the queue's shards (it took this job in CI)
    env = {**os.environ, "CHRONICLE_KEYSPACE": settings.keyspace,
           "CHRONICLE_CASSANDRA_PORT": str(settings.cassandra_port)}
    done = subprocess.run([sys.executable, "-c", "from api.cli import main; main()", "network", "worker", "--once"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    summary = json.loads(done.stdout)  # the whole of stdout is one JSON document
    assert set(summary) >= {"done", "retried", "failed"} and summary["done"] >= 1 and summary["failed"] == 0
    logged = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert any(entry.get("event", "").startswith("network_job_") and entry.get("network") == network
               for entry in logged), done.stderr
