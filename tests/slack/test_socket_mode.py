"""Socket Mode end to end: slack-sdk's client (api/slack/socket_mode.py) against the loopback stand-ins of Slack's
Web API (apps.connections.open) and Socket Mode WebSocket server (tests/fakes/slack_socket_mode.py), storing into
the test keyspace; every check compares the archive's rows with the events sent."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from cassandra import OperationTimedOut
from click.testing import CliRunner

from api.cli import chronicle as cli
from api.config import ConfigError, SlackSettings
from api.slack import event_inbox, events, messages
from api.slack.socket_mode import SocketModeError, SocketModeIngest, Stats, sdk_logger
from api.slack.timeutil import ts_to_us
from api.worker_loop import StopOnSignal, run_worker
from tests.fakes.slack_socket_mode import FakeSlackSocketMode
from tests.fakes.slack_web_api import DEFAULT_TOKEN, FakeSlackWebApi
from tests.slack.helpers import envelope, msg

APP_TOKEN = "xapp-1-A0FAKEAPP-1234567890-0123456789abcdef0123456789abcdef"
BASE = 1_767_225_600  # 2026-01-01


def _team() -> str:
    return f"T{uuid.uuid4().hex[:10].upper()}"


def _events(team: str, n: int, channels: int = 3) -> list[dict]:
    """n message events (payloads as the Events API sends them), spread over channels and two days."""
    out = []
    for i in range(n):
        channel = f"CSOCK{i % channels}"
        ts = f"{BASE + i * 577}.{i:06d}"
        out.append(envelope(team, msg(channel, ts, f"socket mode message {i}", user=f"U{i % 7}"),
                            event_id=f"Ev{team}{i:05d}"))
    return out


def _archived(db, team: str, sent: list[dict]) -> dict[tuple[str, int], str | None]:
    """(channel, ts) -> text of every message row the archive holds in the channels and range of `sent`."""
    found: dict[tuple[str, int], str | None] = {}
    for channel in sorted({p["event"]["channel"] for p in sent}):
        for row in messages.stored_between(db, team, channel, ts_to_us(f"{BASE}.000000"), 2**62):
            assert (channel, row.ts) not in found, "a message row listed twice"
            message = messages.find(db, team, [channel], row.ts, include_deleted=True)
            found[(channel, row.ts)] = message.text if message is not None else None
    return found


def _expected(sent: list[dict]) -> dict[tuple[str, int], str]:
    return {(p["event"]["channel"], ts_to_us(p["event"]["ts"])): p["event"]["text"] for p in sent}


@contextmanager
def _slack(**fake_options: float) -> Iterator[tuple[FakeSlackWebApi, FakeSlackSocketMode]]:
    with FakeSlackWebApi() as web, FakeSlackSocketMode(**fake_options) as socket_mode:
        web.tokens[APP_TOKEN] = {"connections:write"}
        web.socket_mode = socket_mode
        yield web, socket_mode


@contextmanager
def _receiving(db, settings, web: FakeSlackWebApi) -> Iterator[tuple[SocketModeIngest, Stats]]:
    """A started SocketModeIngest with the worker loop checking it every 0.1 s on a thread (as the command runs
    it); closed (drained) on the way out. Yields it and the running total of its passes."""
    slack = dataclasses.replace(settings.slack, socket_ping_interval=1.0, socket_concurrency=4)
    receiver = SocketModeIngest(db, dataclasses.replace(settings, slack=slack), app_token=APP_TOKEN,
                                api_url=web.base_url)
    receiver.start()
    total = Stats()
    stop = StopOnSignal("envelope")
    loop = threading.Thread(target=run_worker, args=(receiver.check,), daemon=True,
                            kwargs={"idle": lambda _s: True, "interval": 0.1, "stop": stop, "on_pass": total.add,
                                    "finish": receiver.close})
    loop.start()
    try:
        yield receiver, total
    finally:
        stop.set()
        loop.join(15)
        total.add(receiver.check())


def test_events_converge_across_forced_reconnects(db, settings):
    """300 events while the connection is replaced three ways (Slack's disconnect, a FIN without a close frame,
    a reset): every event is in the archive once, with its text, nothing else is; every envelope was acked; an
    envelope redelivered after a drop was stored again harmlessly."""
    team = _team()
    sent = _events(team, 300)
    with _slack() as (_web, socket_mode), _receiving(db, settings, _web) as (_receiver, total):
        socket_mode.wait_connected()
        forced = {75: lambda: socket_mode.disconnect("refresh_requested"), 150: lambda: socket_mode.drop("eof"),
                  225: lambda: socket_mode.drop("reset")}
        for i, payload in enumerate(sent):
            if i in forced:
                forced[i]()
                socket_mode.wait_connected(timeout=10)  # replaced well before slack-sdk's own ping monitor
            socket_mode.send_event(payload)
        socket_mode.wait_all_acked(timeout=60)
        assert socket_mode.given_up == []
    assert _archived(db, team, sent) == _expected(sent)
    assert total.reconnects >= 3 and socket_mode.connections >= 4  # the first, and one per forced reconnect
    assert total.stored >= 300 and total.failed == 0 and total.refused == 0
    # Stored more than once only when Slack delivered it again (after a drop), never otherwise.
    assert total.stored - 300 <= sum(1 for _envelope, retry, _conn in socket_mode.deliveries if retry)


def test_an_envelope_not_recorded_is_redelivered_and_a_failed_archive_write_is_retried(db, settings, monkeypatch):
    """An envelope whose inbox row could not be written (Cassandra timed out) is not acknowledged: Slack's
    redelivery (retry_attempt 1) stores it. An archive write that fails after the ack is tried again from memory
    (acked once, retried once). The same event delivered twice more (an ack lost with its socket) leaves one
    message row."""
    team = _team()
    sent = _events(team, 4, channels=1)
    record, handle = event_inbox.record, events.handle
    record_fails, archive_fails = {sent[1]["event_id"]}, {sent[3]["event_id"]}

    def flaky_record(db_, received_us, envelope_id, payload):
        if json.loads(payload)["event_id"] in record_fails:
            record_fails.clear()
            raise OperationTimedOut("test: the inbox write timed out")
        return record(db_, received_us, envelope_id, payload)

    def flaky_handle(db_, settings_, env):
        if getattr(env, "event_id", None) in archive_fails:
            archive_fails.clear()
            raise OperationTimedOut("test: the archive write timed out")
        return handle(db_, settings_, env)

    monkeypatch.setattr(event_inbox, "record", flaky_record)
    monkeypatch.setattr(events, "handle", flaky_handle)
    with _slack(ack_timeout=0.5) as (web, socket_mode), _receiving(db, settings, web) as (_receiver, total):
        socket_mode.wait_connected()
        ids = [socket_mode.send_event(p) for p in sent]
        duplicates = [socket_mode.send_event(sent[2]), socket_mode.send_event(sent[2])]
        socket_mode.wait_all_acked(timeout=20)
    retried = [(env_id, retry) for env_id, retry, _conn in socket_mode.deliveries if env_id == ids[1]]
    assert retried == [(ids[1], 0), (ids[1], 1)]  # refused once (no ack), stored on Slack's redelivery
    assert [(env_id, retry) for env_id, retry, _conn in socket_mode.deliveries if env_id == ids[3]] == [(ids[3], 0)]
    assert all(socket_mode.acks[i] == 1 for i in ids + duplicates)
    assert (total.failed, total.redelivered, total.retried, total.stored) == (1, 1, 1, 6)
    assert _archived(db, team, sent) == _expected(sent)


@pytest.mark.parametrize("ending", ["died", "stopped"])
def test_what_a_receiver_acknowledged_but_did_not_archive_is_replayed_by_the_next(db, settings, monkeypatch,
                                                                                    ending):
    """A receiver acknowledges envelopes, then dies (no progress for DEAD_AFTER_S: here 0) or stops while its
    archive writes fail (Cassandra down): Slack will not send them again. The next receiver to start replays them
    from the inbox before it connects; each is archived once, and the old receiver's range is finished (a third
    receiver replays nothing)."""
    team = _team()
    sent = _events(team, 6, channels=2)
    monkeypatch.setattr(event_inbox, "DEAD_AFTER_S", 0)
    handle = events.handle

    def down(_db, _settings, _env):
        raise OperationTimedOut("test: Cassandra is down for the archive")

    with _slack() as (web, socket_mode):
        first = SocketModeIngest(db, settings, app_token=APP_TOKEN, api_url=web.base_url)
        first.start()  # (it replays what earlier receivers left, with the archive up)
        monkeypatch.setattr(events, "handle", down)
        socket_mode.wait_connected()
        for payload in sent:
            socket_mode.send_event(payload)
        socket_mode.wait_all_acked(timeout=20)
        assert first.check().received == len(sent)
        if ending == "stopped":
            first.close(drain_seconds=0.5)
        else:  # it dies: its connection goes, nothing more is written or tried
            first._closing = True
            first._archiver.shutdown(wait=False, cancel_futures=True)
            first.client.close()
    assert _archived(db, team, sent) == {}  # acked, not archived
    monkeypatch.setattr(events, "handle", handle)
    with _slack() as (web, _socket_mode):
        second = SocketModeIngest(db, settings, app_token=APP_TOKEN, api_url=web.base_url)
        second.start()
        replayed = second.check().replayed
        second.close()
        third = SocketModeIngest(db, settings, app_token=APP_TOKEN, api_url=web.base_url)
        assert third.replay() == 0
    assert replayed >= len(sent)
    assert _archived(db, team, sent) == _expected(sent)


def test_a_bad_payload_is_acknowledged_and_stores_nothing(db, settings):
    """A payload the Events endpoint would answer 400 is acknowledged (a redelivery would be refused again);
    non-event envelopes are acknowledged and ignored."""
    team = _team()
    good = _events(team, 1, channels=1)
    bad = dict(good[0], event_time="yesterday")
    with _slack() as (web, socket_mode), _receiving(db, settings, web) as (_receiver, total):
        socket_mode.wait_connected()
        ids = [socket_mode.send_event(bad), socket_mode.send_event(good[0])]
        socket_mode.wait_all_acked(timeout=20)
    assert [socket_mode.acks[i] for i in ids] == [1, 1]
    assert (total.refused, total.stored) == (1, 1)
    assert _archived(db, team, good) == _expected(good)


def test_the_app_token_is_checked_and_never_logged(db, settings, caplog):
    caplog.set_level(logging.DEBUG)
    with _slack() as (web, socket_mode):
        web.tokens[DEFAULT_TOKEN] = {"connections:write"}
        with pytest.raises(SocketModeError, match="not_allowed_token_type"):  # a bot token cannot open one
            SocketModeIngest(db, settings, app_token=DEFAULT_TOKEN, api_url=web.base_url).start()
        with pytest.raises(SocketModeError, match="invalid_auth"):
            SocketModeIngest(db, settings, app_token="xapp-1-revoked", api_url=web.base_url).start()
        with _receiving(db, settings, web):
            socket_mode.wait_connected()
            socket_mode.disconnect("warning")
            socket_mode.wait_connected()
    assert socket_mode.connections == 2
    sdk_logger().warning("as slack-sdk would: body_params: %s, url: %s", {"token": APP_TOKEN},
                         "wss://wss.slack.com/link/?ticket=0123abcd&app_id=A1")
    assert "ticket=[redacted]&app_id=A1" in caplog.text
    logged = caplog.text + "".join(str(r.args) for r in caplog.records)
    assert "connections.open" in logged or "session" in logged  # slack-sdk did log
    assert APP_TOKEN not in logged and "xapp-1-revoked" not in logged
    assert "ticket=" not in logged.replace("ticket=[redacted]", "")  # the one-use WebSocket URL either
    assert APP_TOKEN not in repr(dataclasses.replace(settings.slack, app_token=APP_TOKEN))


def test_socket_mode_settings(monkeypatch):
    monkeypatch.setenv("CHRONICLE_SLACK_SOCKET_MODE", "on")
    monkeypatch.delenv("CHRONICLE_SLACK_APP_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="CHRONICLE_SLACK_APP_TOKEN is empty"):
        SlackSettings.from_env()
    monkeypatch.setenv("CHRONICLE_SLACK_APP_TOKEN", "xoxb-not-an-app-token")
    with pytest.raises(ConfigError, match="not an app-level token") as refused:
        SlackSettings.from_env()
    assert "xoxb-not-an-app-token" not in str(refused.value)
    monkeypatch.setenv("CHRONICLE_SLACK_APP_TOKEN", APP_TOKEN)
    slack = SlackSettings.from_env()
    assert (slack.socket_mode, slack.app_token) == (True, APP_TOKEN)


def test_the_command_stores_events_and_stops_cleanly(db, settings, monkeypatch):
    """`chronicle slack socket-mode`: without a token exit 2; with one it stores what is delivered, and stops
    after --max-passes printing its totals."""
    result = CliRunner().invoke(cli, ["slack", "socket-mode", "--max-passes", "1"])
    assert result.exit_code == 2, result.output
    team = _team()
    sent = _events(team, 10, channels=2)
    with _slack() as (web, socket_mode):
        slack = dataclasses.replace(settings.slack, app_token=APP_TOKEN, api_url=web.base_url)
        monkeypatch.setattr(db, "settings", dataclasses.replace(settings, slack=slack))
        for payload in sent:
            socket_mode.send_event(payload)
        result = CliRunner().invoke(cli, ["slack", "socket-mode", "--interval", "0.1", "--max-passes", "20"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["stored"] == 10
        assert not socket_mode.unacked()
    assert _archived(db, team, sent) == _expected(sent)
    assert APP_TOKEN not in result.output
