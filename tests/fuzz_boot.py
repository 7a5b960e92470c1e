"""The API fuzz's server and its two schemathesis runs (tests/test_api_fuzz.py), started in the background when
collection ends, after the 3-node cluster's boot (tests/conftest.py).

The fuzz is two processes generating requests for a minute or more while the test process would only wait for
them; started early, they overlap the tests that run meanwhile (the test process, single-threaded, is what bounds
the suite). They get a keyspace of their own, the sample workspace and network loaded in it, so the admin token's
writes and deletes never meet another test's data. The fuzz tests then read the runs' results.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from api.config import Settings
from api.db import Database
from api.node.config import local_node_spec
from api.node.process import port_open
from tests.background import BackgroundBoot
from tests.helpers import ADMIN_TOKEN, READ_TOKEN, TEST_API_TOKENS

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TOKENS = (READ_TOKEN, ADMIN_TOKEN)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_schemathesis(base: str, token: str, workdir: Path) -> subprocess.Popen:
    """A run in the background, its output in workdir/stdout.txt and stderr.txt."""
    with (workdir / "stdout.txt").open("w") as out, (workdir / "stderr.txt").open("w") as err:
        return subprocess.Popen(
            [str(BIN / "schemathesis"), "--no-color", "--config-file", str(ROOT / "tests" / "schemathesis.toml"),
             "run", f"{base}/openapi.json", "--checks", "all", "--phases", "examples,coverage,fuzzing,stateful",
             "--max-examples", "25", "--generation-deterministic", "--workers", "1",
             "--header", f"Authorization: Bearer {token}"],
            cwd=workdir, stdout=out, stderr=err)


# The sample workspace and network, loaded into the keyspace the environment names.
_LOAD_SAMPLES = """
from api.config import Settings
from api.db import Database
from api.network.sample import load_sample as load_network_sample
from api.slack.sample import load_sample as load_slack_sample
settings = Settings.from_env()
db = Database(settings)
load_slack_sample(db, settings)
load_network_sample(db)
db.close()
"""


class FuzzBoot(BackgroundBoot):
    name = "the API fuzz's boot"

    def __init__(self) -> None:
        super().__init__()
        self.base = ""
        self.runs: dict[str, tuple[subprocess.Popen, Path]] = {}
        self.server: subprocess.Popen | None = None
        self.settings: Settings | None = None
        self.workdir = Path(tempfile.mkdtemp(prefix="chronicle-fuzz-"))

    def boot(self) -> None:
        node = local_node_spec()
        deadline = time.monotonic() + 600  # the test process starts the local node (`cassandra_node`)
        while not port_open(node.address, node.native_port):
            if time.monotonic() > deadline:
                raise RuntimeError("the local node never answered")
            time.sleep(1)
        self.settings = settings = dataclasses.replace(
            Settings.from_env(), contact_points=[node.address], cassandra_port=node.native_port,
            keyspace=f"chronicle_fuzz_{os.getpid()}_{secrets.token_hex(3)}", replication="SimpleStrategy:1",
            request_timeout=10.0, cursor_secret=b"test-cursor-secret", api_tokens=json.dumps(TEST_API_TOKENS),
            admin_token=ADMIN_TOKEN)
        # In processes of their own: in a thread here they would share the test process's interpreter lock.
        env = self._env(settings)
        subprocess.run([str(BIN / "chronicle"), "migrate", "--keyspace", settings.keyspace], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
        subprocess.run([sys.executable, "-c", _LOAD_SAMPLES], env=env, cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
        self._serve(settings)
        for index, token in enumerate(TOKENS):
            workdir = self.workdir / f"schemathesis-{index}"
            workdir.mkdir()
            self.runs[token] = (_start_schemathesis(self.base, token, workdir), workdir)

    def _env(self, settings: Settings) -> dict[str, str]:
        return {**os.environ, "CHRONICLE_CASSANDRA_HOSTS": ",".join(settings.contact_points),
                "CHRONICLE_CASSANDRA_PORT": str(settings.cassandra_port), "CHRONICLE_KEYSPACE": settings.keyspace,
                "CHRONICLE_WORKERS": "2", "CHRONICLE_LOG_LEVEL": "WARNING", "CHRONICLE_ACCESS_LOG": "",
                "CHRONICLE_API_TOKENS": json.dumps(TEST_API_TOKENS), "CHRONICLE_ADMIN_TOKEN": ADMIN_TOKEN,
                "CHRONICLE_SLACK_SIGNING_SECRET": "fuzz-secret"}

    def _serve(self, settings: Settings) -> None:
        port = _free_port()
        metrics = self.workdir / "metrics"
        metrics.mkdir()
        env = {**self._env(settings), "CHRONICLE_BIND": f"127.0.0.1:{port}", "PROMETHEUS_MULTIPROC_DIR": str(metrics)}
        self.server = subprocess.Popen([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "api.wsgi:app"], cwd=ROOT,
                                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/readyz", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        self.base = base

    def wait(self) -> str:
        """The served API's base URL, once the runs started (the boot begun if it was not)."""
        self.join()
        return self.base

    def stop(self) -> None:
        if self.thread is None:
            return
        self.thread.join(timeout=120)  # a run stopped early: a boot still waiting for the node is left behind
        for process, _workdir in self.runs.values():
            if process.poll() is None:
                process.kill()
                process.wait()
        if self.server is not None:
            self.server.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.server.wait(timeout=30)
        if self.settings is not None:
            admin = Database(self.settings, keyspace="")
            try:
                admin.execute_raw(f"DROP KEYSPACE IF EXISTS {self.settings.keyspace}", timeout=60)
            finally:
                admin.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.thread = None


FUZZ = FuzzBoot()
