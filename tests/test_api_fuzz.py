"""Property-based: schemathesis, with every check and every phase, against the API served by gunicorn on a keyspace
of its own (with the built-in sample data), once with a read token and once with the admin token.

Any server error, response outside the document, schema-valid request refused or schema-violating request
accepted fails the test; the run is deterministic, so a failure reproduces. The server and both runs start in the
background when collection ends (tests/fuzz_boot.py): the tests here read what they found.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from http import HTTPStatus

import pytest

from tests.fuzz_boot import FUZZ
from tests.helpers import ADMIN_TOKEN, READ_TOKEN


@pytest.fixture(scope="module")
def served_api(cassandra_node):
    """gunicorn serving the app on the fuzz's keyspace, the sample workspace and network loaded (tests/fuzz_boot.py;
    the local node is the test process's, `cassandra_node`)."""
    assert FUZZ.thread is not None, "the fuzz's boot was not begun when collection ended (tests/conftest.py)"
    return FUZZ.wait()


@pytest.fixture(scope="module")
def fuzz_runs(served_api):
    """Both tokens' runs, started together when the server was up (each is a single-threaded generator: side by
    side they take about the time of one); each test waits for its own."""
    return FUZZ.runs


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
