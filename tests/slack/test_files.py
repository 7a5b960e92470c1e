"""File worker against a real loopback HTTP server standing in for Slack's file host, and moto's S3 server."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from api.slack import messages
from api.slack.files import FileWorker, LocalStore, S3Store
from api.slack.settings import SlackSettings
from api.slack.timeutil import ts_to_us
from tests.fakes.slack_file_host import FakeSlackFileHost, content_for
from tests.slack.helpers import ALL, edit, post_event

TOKEN = "xoxb-test-token"


@pytest.fixture(scope="module")
def host():
    with FakeSlackFileHost(token=TOKEN) as fake:
        yield fake


@pytest.fixture
def slack_settings(tmp_path: Path, host: FakeSlackFileHost) -> SlackSettings:
    base = SlackSettings.from_env()
    return dataclasses.replace(base, bot_tokens={}, bot_token=TOKEN, files_root=str(tmp_path / "files"),
                               s3_bucket="", max_attempts=3, backoff_seconds=0.05, backoff_max_seconds=0.2,
                               download_timeout=0.5, concurrency=4, file_hosts=(host.file_host,))


def share(client, team: str, channel: str, ts: str, files: list[dict]) -> None:
    event = {"type": "message", "subtype": "file_share", "channel": channel, "channel_type": "channel",
             "user": "U1", "text": "", "ts": ts, "event_ts": ts, "files": files}
    assert post_event(client, team, event).status_code == 200


def message(client, team: str, channel: str, ts: str) -> dict:
    r = client.get(f"/slack/teams/{team}/channels/{channel}/messages/{ts}", headers=ALL)
    assert r.status_code == 200, r.json
    return r.json


def finished(db, team: str, channel: str, ts: str, *file_ids: str) -> Callable[[], bool]:
    """Whether the message records an outcome (stored or failed) for every one of `file_ids`."""
    def check() -> bool:
        return all(messages.file_finished(db, team, channel, ts_to_us(ts), f) for f in file_ids)
    return check


def drain(worker: FileWorker, until: Callable[[], bool], seconds: float = 30.0) -> None:
    """Run batches until `until()` holds (backoff makes some batches empty), then hand the shards back."""
    deadline = time.monotonic() + seconds
    try:
        while not until():
            assert time.monotonic() < deadline, "the worker did not finish in time"
            if worker.run_once().total() == 0:
                time.sleep(0.05)
    finally:
        worker.stop()


def passes(worker: FileWorker, n: int = 5) -> None:
    """A few more batches (to show that nothing more is fetched)."""
    try:
        for _ in range(n):
            worker.run_once()
            time.sleep(0.05)
    finally:
        worker.stop()


def test_file_is_stored_and_recorded(client, db, host, slack_settings, unique_channel):
    c = unique_channel()
    ts = "1700001000.000100"
    share(client, "TF1", c, ts, [
        {"id": "FOK1", "name": "a.txt", "mimetype": "text/plain", "url_private": f"{host.base_url}/files/FOK1"},
        {"id": "FEXT", "name": "link", "is_external": True, "external_url": "https://docs.example.invalid/x"}])
    drain(FileWorker(db, slack_settings), finished(db, "TF1", c, ts, "FOK1"))
    m = message(client, "TF1", c, ts)
    path = Path(slack_settings.files_root) / "slack" / "TF1" / c / ts / "FOK1"
    assert path.read_bytes() == content_for("FOK1")
    # Over REST a stored file is a download link, never the object store's URI (file:///...).
    assert m["files_stored"] == {"FOK1": f"/slack/teams/TF1/channels/{c}/messages/{ts}/files/FOK1"}
    stored = messages.find(db, "TF1", [c], ts_to_us(ts), include_deleted=False).files_stored
    assert stored == {"FOK1": path.resolve().as_uri()}
    # The external file stays a link: no download attempted, nothing stored.
    assert {f["id"] for f in m["files"]} == {"FOK1", "FEXT"}
    assert next(f for f in m["files"] if f["id"] == "FEXT")["external_url"] == "https://docs.example.invalid/x"
    assert "files_fetch_failed" not in m
    # Idempotent: a redelivered event and more batches do not fetch again.
    share(client, "TF1", c, ts, [{"id": "FOK1", "name": "a.txt", "url_private": f"{host.base_url}/files/FOK1"}])
    passes(FileWorker(db, slack_settings))
    assert host.hits["/files/FOK1"] == 1


def test_404_fails_at_once_with_the_error(client, db, host, slack_settings, unique_channel):
    c, ts = unique_channel(), "1700001000.000200"
    share(client, "TF1", c, ts, [{"id": "F404", "url_private": f"{host.base_url}/missing/F404"}])
    drain(FileWorker(db, slack_settings), finished(db, "TF1", c, ts, "F404"))
    m = message(client, "TF1", c, ts)
    assert m["files_fetch_failed"] is True
    assert "404" in m["files_fetch_error"]["F404"]
    assert host.hits["/missing/F404"] == 1  # permanent: not retried
    assert "files_stored" not in m


def test_500_then_success_is_retried_with_backoff(client, db, host, slack_settings, unique_channel):
    c, ts = unique_channel(), "1700001000.000300"
    share(client, "TF1", c, ts, [{"id": "FFLAKY", "url_private": f"{host.base_url}/flaky/FFLAKY?fail=2"}])
    drain(FileWorker(db, slack_settings), finished(db, "TF1", c, ts, "FFLAKY"))
    m = message(client, "TF1", c, ts)
    assert "FFLAKY" in m["files_stored"]
    assert host.hits["/flaky/FFLAKY"] == 3
    assert "files_fetch_failed" not in m


def test_persistent_500_fails_after_max_attempts(client, db, host, slack_settings, unique_channel):
    c, ts = unique_channel(), "1700001000.000400"
    share(client, "TF1", c, ts, [{"id": "FDOWN", "url_private": f"{host.base_url}/flaky/FDOWN?fail=99"}])
    drain(FileWorker(db, slack_settings), finished(db, "TF1", c, ts, "FDOWN"))
    m = message(client, "TF1", c, ts)
    assert m["files_fetch_failed"] is True
    assert "after 3 attempt(s)" in m["files_fetch_error"]["FDOWN"]
    assert host.hits["/flaky/FDOWN"] == 3


def test_html_login_page_is_rejected(client, db, host, slack_settings, unique_channel):
    c, ts = unique_channel(), "1700001000.000500"
    share(client, "TF1", c, ts, [{"id": "FHTML", "url_private": f"{host.base_url}/login/FHTML"}])
    drain(FileWorker(db, slack_settings), finished(db, "TF1", c, ts, "FHTML"))
    m = message(client, "TF1", c, ts)
    assert m["files_fetch_failed"] is True
    assert "HTML" in m["files_fetch_error"]["FHTML"]
    assert not list(Path(slack_settings.files_root).rglob("FHTML"))


def test_wrong_token_gets_the_login_page_and_fails(client, db, host, slack_settings, unique_channel):
    c, ts = unique_channel(), "1700001000.000550"
    share(client, "TF1", c, ts, [{"id": "FTOK", "url_private": f"{host.base_url}/files/FTOK"}])
    drain(FileWorker(db, dataclasses.replace(slack_settings, bot_token="xoxb-wrong")),
          finished(db, "TF1", c, ts, "FTOK"))
    assert message(client, "TF1", c, ts)["files_fetch_failed"] is True


def test_slow_response_times_out_then_fails(client, db, host, slack_settings, unique_channel):
    c, ts = unique_channel(), "1700001000.000600"
    share(client, "TF1", c, ts, [{"id": "FSLOW", "url_private": f"{host.base_url}/slow/FSLOW?delay=2"}])
    drain(FileWorker(db, dataclasses.replace(slack_settings, max_attempts=2, download_timeout=0.3)),
          finished(db, "TF1", c, ts, "FSLOW"))
    m = message(client, "TF1", c, ts)
    assert m["files_fetch_failed"] is True
    assert "Timeout" in m["files_fetch_error"]["FSLOW"] or "timed out" in m["files_fetch_error"]["FSLOW"]
    assert host.hits["/slow/FSLOW"] == 2


def test_two_racing_workers_fetch_each_file_once(client, db, host, slack_settings, unique_channel):
    c = unique_channel()
    files = [f"FRACE{i}" for i in range(12)]
    for i, fid in enumerate(files):
        url = f"{host.base_url}/slow/{fid}?delay=0.05"
        share(client, "TF2", c, f"1700002000.{i:06d}", [{"id": fid, "url_private": url}])
    workers = [FileWorker(db, slack_settings, owner=f"w{i}") for i in range(2)]
    barrier = threading.Barrier(2)

    every = [finished(db, "TF2", c, f"1700002000.{i:06d}", fid) for i, fid in enumerate(files)]

    def run(w: FileWorker) -> None:
        barrier.wait()
        drain(w, lambda: all(check() for check in every))

    threads = [threading.Thread(target=run, args=(w,)) for w in workers]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    for i, fid in enumerate(files):
        assert host.hits[f"/slow/{fid}"] == 1, fid
        assert fid in message(client, "TF2", c, f"1700002000.{i:06d}")["files_stored"]


def test_s3_storage_against_moto_server(client, db, host, slack_settings, unique_channel):
    boto3 = pytest.importorskip("boto3")
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        port = server.get_host_and_port()[1]
        endpoint = f"http://127.0.0.1:{port}"
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                          aws_secret_access_key="test")
        s3.create_bucket(Bucket="chronicle-archive")
        c, ts = unique_channel(), "1700003000.000100"
        share(client, "TF3", c, ts,
              [{"id": "FS3", "mimetype": "image/png", "url_private": f"{host.base_url}/files/FS3"}])
        worker = FileWorker(db, slack_settings, store=S3Store("chronicle-archive", client=s3))
        drain(worker, finished(db, "TF3", c, ts, "FS3"))
        key = f"slack/TF3/{c}/{ts}/FS3"
        obj = s3.get_object(Bucket="chronicle-archive", Key=key)
        assert obj["Body"].read() == content_for("FS3")
        assert obj["ContentType"] == "image/png"
        assert message(client, "TF3", c, ts)["files_stored"] == {
            "FS3": f"/slack/teams/TF3/channels/{c}/messages/{ts}/files/FS3"}
        stored = messages.find(db, "TF3", [c], ts_to_us(ts), include_deleted=False).files_stored
        assert stored == {"FS3": f"s3://chronicle-archive/{key}"}
    finally:
        server.stop()


def test_local_store_writes_atomically(tmp_path):
    store = LocalStore(tmp_path)
    uri = store.put("slack/T/C/1.000000/F", b"abc", None)
    assert uri.startswith("file://") and (tmp_path / "slack/T/C/1.000000/F").read_bytes() == b"abc"
    assert not list(tmp_path.rglob("*.tmp"))


def test_worker_cli_help():
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "runtime_scripts/slack_file_worker.py"), "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--once" in out.stdout


def test_worker_cli_once_fetches_and_reports(client, settings, host, tmp_path, unique_channel):
    import os
    import subprocess
    import sys

    c, ts = unique_channel(), "1700004000.000100"
    share(client, "TF4", c, ts, [{"id": "FCLI", "url_private": f"{host.base_url}/files/FCLI"}])
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "CHRONICLE_SLACK_BOT_TOKEN": TOKEN, "CHRONICLE_FILES_ROOT": str(tmp_path),
           "CHRONICLE_CASSANDRA_PORT": str(settings.cassandra_port), "CHRONICLE_FILES_TIMEOUT": "1",
           "CHRONICLE_SLACK_FILE_HOSTS": host.file_host}
    out = subprocess.run([sys.executable, str(root / "runtime_scripts/slack_file_worker.py"), "--once",
                          "--keyspace", settings.keyspace], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "total: stored=" in out.stderr
    assert (tmp_path / "slack" / "TF4" / c / ts / "FCLI").read_bytes() == content_for("FCLI")
    assert "FCLI" in message(client, "TF4", c, ts)["files_stored"]


def test_an_edit_that_resends_the_files_fetches_nothing_again(client, db, host, slack_settings, unique_channel):
    """No resurrection: message_changed carries the message's files again; a file already stored, or failed for
    good, is not fetched again (the worker checks the message's outcome before every download)."""
    c, ts = unique_channel(), "1700005000.000100"
    files = [{"id": "FKEEP", "url_private": f"{host.base_url}/files/FKEEP"},
             {"id": "FGONE", "url_private": f"{host.base_url}/missing/FGONE"}]
    share(client, "TF5", c, ts, files)
    drain(FileWorker(db, slack_settings), finished(db, "TF5", c, ts, "FKEEP", "FGONE"))
    assert (host.hits["/files/FKEEP"], host.hits["/missing/FGONE"]) == (1, 1)
    for n, at in enumerate(("1700005100.000000", "1700005200.000000")):
        r = post_event(client, "TF5", edit(c, ts, f"caption {n}", "", at, subtype="file_share", files=files))
        assert r.status_code == 200
    passes(FileWorker(db, slack_settings))
    assert (host.hits["/files/FKEEP"], host.hits["/missing/FGONE"]) == (1, 1)
    m = message(client, "TF5", c, ts)
    assert m["text"] == "caption 1" and list(m["files_stored"]) == ["FKEEP"] and "FGONE" in m["files_fetch_error"]


# -- the bot token goes only to Slack's file hosts; stored files are links over REST ------------------------------

class RecordingHost:
    """A second loopback HTTP server: records every request (path, Authorization header) it receives; answers
    `/redirect?to=URL` with a 302 to URL and anything else with 200 bytes."""

    def __init__(self) -> None:
        import http.server

        received = self.received = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                from urllib.parse import parse_qs, urlsplit

                received.append((self.path, self.headers.get("Authorization")))
                target = parse_qs(urlsplit(self.path).query).get("to")
                if target:
                    self.send_response(302)
                    self.send_header("Location", target[0])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = b"exfiltrated"
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def file_host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> RecordingHost:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_file_on_another_host_fails_for_good_and_gets_no_token(client, db, host, slack_settings, unique_channel):
    """A crafted event (or export) naming a url_private outside Slack's file hosts: the worker never connects there,
    so the bot token cannot leak; the file is failed at once with the reason."""
    c, ts = unique_channel(), "1700006000.000100"
    with RecordingHost() as foreign:
        share(client, "TF6", c, ts, [
            {"id": "FEVIL", "url_private": f"{foreign.base_url}/files-pri/T-F/steal"},
            {"id": "FEVIL2", "url_private": "https://files.slack.com.evil.example/files-pri/x"},
            {"id": "FOK6", "url_private": f"{host.base_url}/files/FOK6"}])
        drain(FileWorker(db, slack_settings), finished(db, "TF6", c, ts, "FEVIL", "FEVIL2", "FOK6"))
        assert foreign.received == []  # not one request: no Authorization header ever reached it
    m = message(client, "TF6", c, ts)
    assert list(m["files_stored"]) == ["FOK6"] and m["files_fetch_failed"] is True
    for fid, shown in (("FEVIL", foreign.file_host), ("FEVIL2", "files.slack.com.evil.example")):
        error = m["files_fetch_error"][fid]
        assert "after 1 attempt(s)" in error and "Slack's file hosts" in error and shown in error, error


def test_a_redirect_to_another_host_is_not_followed(client, db, slack_settings, unique_channel):
    """An allowed host that redirects elsewhere: the worker stops at the redirect, the other host gets nothing."""
    c, ts = unique_channel(), "1700006000.000200"
    with RecordingHost() as allowed, RecordingHost() as foreign:
        settings = dataclasses.replace(slack_settings, file_hosts=(allowed.file_host,))
        share(client, "TF6", c, ts, [{"id": "FREDIR",
                                      "url_private": f"{allowed.base_url}/redirect?to={foreign.base_url}/steal"}])
        drain(FileWorker(db, settings), finished(db, "TF6", c, ts, "FREDIR"))
        assert foreign.received == []
        assert allowed.received == [("/redirect?to=" + f"{foreign.base_url}/steal", f"Bearer {TOKEN}")]
    error = message(client, "TF6", c, ts)["files_fetch_error"]["FREDIR"]
    assert "Slack's file hosts" in error and foreign.file_host in error


def test_default_file_hosts_are_slacks():
    from api.slack.settings import DEFAULT_FILE_HOSTS, file_host_refusal

    for url in ("https://files.slack.com/files-pri/T1-F1/a.png", "https://files-origin.slack.com/files-pri/x",
                "https://a.slack-edge.com/x.png", "https://files.slack-gov.com/files-pri/x"):
        assert file_host_refusal(url, DEFAULT_FILE_HOSTS) is None, url
    for url in ("https://evil.example/files-pri/x", "https://files.slack.com.evil.example/x",
                "https://files.slack.com@evil.example/x", "http://files.slack.com/x", "ftp://files.slack.com/x",
                "https://slack.com/x", "https://x.y.slack-edge.com/x", "http://127.0.0.1:1/x", "not a url"):
        assert file_host_refusal(url, DEFAULT_FILE_HOSTS) is not None, url
    assert file_host_refusal("http://127.0.0.1:5000/x", ("127.0.0.1:5000",)) is None
    assert file_host_refusal("http://127.0.0.1:5001/x", ("127.0.0.1:5000",)) is not None


def test_stored_files_are_downloaded_over_rest_with_the_read_token(client, db, host, slack_settings, unique_channel,
                                                                   monkeypatch):
    app_settings = client.application.config["CHRONICLE_SETTINGS"]  # the route's object store: the worker's
    monkeypatch.setitem(client.application.config, "CHRONICLE_SETTINGS",
                        dataclasses.replace(app_settings, slack=slack_settings))
    c, ts = unique_channel(), "1700006000.000300"
    share(client, "TF7", c, ts, [{"id": "FDL", "name": "a.html", "mimetype": "text/html",
                                  "url_private": f"{host.base_url}/files/FDL"}])
    drain(FileWorker(db, slack_settings), finished(db, "TF7", c, ts, "FDL"))
    for path in (f"/slack/teams/TF7/channels/{c}/messages/{ts}", f"/slack/teams/TF7/channels/{c}/messages"):
        r = client.get(path, headers=ALL)
        assert r.status_code == 200 and "file://" not in r.get_data(as_text=True), path
    link = message(client, "TF7", c, ts)["files_stored"]["FDL"]
    r = client.get(link, headers=ALL)
    assert r.status_code == 200 and r.data == content_for("FDL")
    assert r.mimetype == "application/octet-stream" and r.headers["Content-Disposition"].startswith("attachment")
    assert "sandbox" in r.headers["Content-Security-Policy"] and r.headers["X-Content-Type-Options"] == "nosniff"
    assert client.get(link).status_code == 401
    assert client.get(link, headers={"Authorization": "Bearer token-t1"}).status_code == 403
    assert client.get(link.replace("FDL", "FNONE"), headers=ALL).status_code == 404
