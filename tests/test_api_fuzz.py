"""Property-based: schemathesis, with every check and every phase, against the API served by gunicorn on the
test keyspace (with the built-in sample data), once with a read token and once with the admin token.

Any server error, response outside the document, schema-valid request refused or schema-violating request
accepted fails the test; the run is deterministic, so a failure reproduces.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from http import HTTPStatus
from pathlib import Path

import pytest

from api.network.sample import load_sample as load_network_sample
from api.slack.sample import load_sample as load_slack_sample
from tests.helpers import ADMIN_TOKEN, READ_TOKEN, TEST_API_TOKENS

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served_api(settings, db, tmp_path_factory):
    """gunicorn serving the app on the test keyspace, the sample workspace and network loaded."""
    load_slack_sample(db, settings)
    load_network_sample(db)
    port = _free_port()
    env = {**os.environ, "CHRONICLE_CASSANDRA_HOSTS": ",".join(settings.contact_points),
           "CHRONICLE_CASSANDRA_PORT": str(settings.cassandra_port), "CHRONICLE_KEYSPACE": settings.keyspace,
           "CHRONICLE_BIND": f"127.0.0.1:{port}", "CHRONICLE_WORKERS": "2", "CHRONICLE_LOG_LEVEL": "WARNING",
           "CHRONICLE_ACCESS_LOG": "", "CHRONICLE_API_TOKENS": json.dumps(TEST_API_TOKENS),
           "CHRONICLE_ADMIN_TOKEN": ADMIN_TOKEN, "CHRONICLE_SLACK_SIGNING_SECRET": "fuzz-secret",
           "PROMETHEUS_MULTIPROC_DIR": str(tmp_path_factory.mktemp("metrics"))}
    server = subprocess.Popen([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "api.wsgi:app"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
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
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


def _start_schemathesis(base: str, token: str, workdir: Path) -> subprocess.Popen:
    """A run in the background, its output in workdir/stdout.txt and stderr.txt."""
    with (workdir / "stdout.txt").open("w") as out, (workdir / "stderr.txt").open("w") as err:
        return subprocess.Popen(
            [str(BIN / "schemathesis"), "--no-color", "--config-file", str(ROOT / "tests" / "schemathesis.toml"),
             "run", f"{base}/openapi.json", "--checks", "all", "--phases", "examples,coverage,fuzzing,stateful",
             "--max-examples", "25", "--generation-deterministic", "--workers", "1",
             "--header", f"Authorization: Bearer {token}"],
            cwd=workdir, stdout=out, stderr=err)


@pytest.fixture(scope="module")
def fuzz_runs(served_api, tmp_path_factory):
    """Both tokens' runs, started together (each is a single-threaded generator: side by side they take about
    the time of one); each test waits for its own."""
    runs = {}
    for token in (READ_TOKEN, ADMIN_TOKEN):
        workdir = tmp_path_factory.mktemp("schemathesis")
        runs[token] = (_start_schemathesis(served_api, token, workdir), workdir)
    yield runs
    for process, _workdir in runs.values():
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("token", [READ_TOKEN, ADMIN_TOKEN], ids=["read-token", "admin-token"])
def test_every_operation_meets_its_document(served_api, fuzz_runs, token):
    process, workdir = fuzz_runs[token]
    process.wait(timeout=900)
    run = subprocess.CompletedProcess(process.args, process.returncode, (workdir / "stdout.txt").read_text(),
                                      (workdir / "stderr.txt").read_text())
    assert run.returncode == 0, run.stdout[-12000:] + run.stderr[-2000:]
    with urllib.request.urlopen(f"{served_api}/openapi.json", timeout=10) as response:
        document = json.loads(response.read())
    operations = sum(1 for item in document["paths"].values() for method in item
                     if method in {"get", "put", "post", "delete", "patch"})
    assert operations >= 30
    assert f"Tested: {operations}" in run.stdout, run.stdout[-3000:]  # every operation of the document was exercised


def test_gunicorn_refusals_are_json(served_api):
    """A request line over gunicorn's limit is refused by gunicorn itself, as JSON like every API error."""
    request = urllib.request.Request(f"{served_api}/networks/sample/search?q={'x' * 5000}")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 414
    assert refused.value.headers["Content-Type"] == "application/json"
    body = json.loads(refused.value.read())
    assert body["code"] == 414 and body["status"] == HTTPStatus(414).phrase and body["message"]


def test_docs_page_uses_no_external_host(served_api):
    """/docs (Swagger UI) loads only assets Chronicle serves itself: it works without internet access."""
    with urllib.request.urlopen(f"{served_api}/docs", timeout=10) as response:
        page = response.read().decode()
    assert "swagger-ui-bundle.js" in page
    assert "http://" not in page and "https://" not in page and "//cdn" not in page
    for asset in ("swagger-ui.css", "swagger-ui-bundle.js", "swagger-ui-standalone-preset.js"):
        with urllib.request.urlopen(f"{served_api}/docs/assets/{asset}", timeout=10) as response:
            assert response.status == 200 and len(response.read()) > 1000
