"""Slack ingest under faults: a model of what was sent, a sender that behaves like Slack, and the check of what
the archive holds afterwards, read at QUORUM.

The source writes a workspace's traffic over several channels: new messages (a tenth of them thread replies),
edits (`message_changed`, 10% of events) and deletes (`message_deleted`, 5%) of earlier messages, each
event signed with the signing secret the way Slack signs. The sender treats an answer as Slack does: a 2xx
acknowledges the event; a non-2xx answer, a timeout (Slack waits 3 s) or a failed connection is retried with
the same body and `event_id`, signed anew, with `X-Slack-Retry-Num` and `X-Slack-Retry-Reason`, up to 3 retries
after the delays given (Slack's own are about 0 s, 1 min and 5 min; the default here is compressed).

The check knows only what the client knows. An event answered 2xx must be stored; an event never
acknowledged may or may not have landed (its request may have been written before the answer was lost), so
for those both states are accepted. Per message, of the texts it had (post, then each edit in order), the
stored text must be the last acknowledged one or a later unacknowledged one; `edited_ts` must be that text's
edit time; a message whose delete was acknowledged must be deleted, one never deleted must not be.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from api.db import Database
from api.slack import messages
from api.slack.timeutil import us_to_ts
from bench.faults_common import READ_TOKEN, Attempt, Client, Phases, Scheduler, slack_signature

SLACK_TIMEOUT = 3.0  # seconds Slack waits for an answer before it counts the delivery as failed
WORDS = ("deploy", "review", "lunch", "standup", "incident", "metrics", "release", "backlog", "coffee", "design",
         "retro", "ticket", "merge", "rollback", "on-call", "budget", "roadmap", "customer", "latency", "pager")


@dataclasses.dataclass(eq=False)
class Sent:
    """One event as sent (all its deliveries share `body` and `event_id`)."""

    event_id: str
    kind: str  # post | reply | edit | delete
    message: Msg
    at: int  # µs: the post's ts, the edit's time or the delete's time
    text: str | None  # the text it sets (post, reply, edit)
    body: bytes
    index: int = 0  # which text of the message it sets: 0 the post, k the k-th edit
    attempts: list[Attempt] = dataclasses.field(default_factory=list)
    acked: bool = False
    gave_up: bool = False
    phase_sent: str = ""


@dataclasses.dataclass(eq=False)
class Msg:
    channel: str
    ts: int
    user: str
    parent: Msg | None = None  # a thread reply's head
    texts: list[Sent] = dataclasses.field(default_factory=list)  # the post, then its edits in order
    delete: Sent | None = None
    replies: list[Msg] = dataclasses.field(default_factory=list)

    @property
    def events(self) -> list[Sent]:
        return self.texts + ([self.delete] if self.delete else [])


class SlackTraffic:
    """The event source: one workspace, `channels` channels; every message, edit and delete it sent."""

    def __init__(self, team: str, channels: int, seed: int, run_tag: str) -> None:
        self.team = team
        self.channels = [f"C{team[1:]}{i:02d}" for i in range(channels)]
        self.rng = random.Random(seed)
        self.run_tag = run_tag
        self.numbers = itertools.count(1)
        self.last_us = 0
        self.msgs: list[Msg] = []
        self.sent: list[Sent] = []
        self.live: list[Msg] = []  # recent messages without a delete sent: what edits and deletes pick from
        self.lock = threading.Lock()

    def _now_us(self) -> int:
        self.last_us = max(self.last_us + 1, time.time_ns() // 1000)
        return self.last_us

    def _text(self, n: int, what: str) -> str:
        words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(2, 12)))
        return f"{what} {n} {words}"

    def _envelope(self, event_id: str, at: int, event: dict[str, Any]) -> bytes:
        return json.dumps({"token": "unused", "team_id": self.team, "api_app_id": "AFAULTS", "type": "event_callback",
                           "event_id": event_id, "event_time": at // 1_000_000, "event": event},
                          separators=(",", ":")).encode()

    def next_event(self) -> Sent:
        """The next event: 10% edits and 5% deletes of earlier messages, the rest new messages."""
        with self.lock:
            n = next(self.numbers)
            event_id = f"Ev{self.run_tag}{n:07d}"
            roll = self.rng.random()
            if roll < 0.10 and self.live:
                sent = self._edit(event_id, n, self.rng.choice(self.live[-300:]))
            elif roll < 0.15 and self.live:
                sent = self._delete(event_id, self.live.pop(self.rng.randrange(max(0, len(self.live) - 300),
                                                                               len(self.live))))
            else:
                sent = self._post(event_id, n)
            self.sent.append(sent)
            return sent

    def _post(self, event_id: str, n: int) -> Sent:
        ts = self._now_us()
        heads = [m for m in self.live[-200:] if m.parent is None]
        parent = self.rng.choice(heads) if heads and self.rng.random() < 0.10 else None
        channel = parent.channel if parent else self.rng.choice(self.channels)
        msg = Msg(channel, ts, f"U{self.rng.randint(1, 40):03d}FAULT", parent)
        text = self._text(n, "reply" if parent else "message")
        event = {"type": "message", "channel": channel, "channel_type": "channel", "user": msg.user, "text": text,
                 "ts": us_to_ts(ts), "event_ts": us_to_ts(ts)}
        if parent is not None:
            event.update(thread_ts=us_to_ts(parent.ts), parent_user_id=parent.user)
            parent.replies.append(msg)
        sent = Sent(event_id, "reply" if parent else "post", msg, ts, text, self._envelope(event_id, ts, event))
        msg.texts.append(sent)
        self.msgs.append(msg)
        self.live.append(msg)
        if len(self.live) > 2000:
            del self.live[:1000]
        return sent

    def _edit(self, event_id: str, n: int, msg: Msg) -> Sent:
        at = self._now_us()
        previous = msg.texts[-1]
        text = self._text(n, "edited")
        new = {"type": "message", "user": msg.user, "text": text, "ts": us_to_ts(msg.ts),
               "edited": {"user": msg.user, "ts": us_to_ts(at)}}
        old = {"type": "message", "user": msg.user, "text": previous.text, "ts": us_to_ts(msg.ts)}
        if previous.index:
            old["edited"] = {"user": msg.user, "ts": us_to_ts(previous.at)}
        if msg.parent is not None:
            new["thread_ts"] = old["thread_ts"] = us_to_ts(msg.parent.ts)
        event = {"type": "message", "subtype": "message_changed", "channel": msg.channel, "channel_type": "channel",
                 "hidden": True, "ts": us_to_ts(at), "event_ts": us_to_ts(at), "message": new,
                 "previous_message": old}
        sent = Sent(event_id, "edit", msg, at, text, self._envelope(event_id, at, event), index=len(msg.texts))
        msg.texts.append(sent)
        return sent

    def _delete(self, event_id: str, msg: Msg) -> Sent:
        at = self._now_us()
        previous = {"type": "message", "user": msg.user, "text": msg.texts[-1].text, "ts": us_to_ts(msg.ts)}
        if msg.parent is not None:
            previous["thread_ts"] = us_to_ts(msg.parent.ts)
        event = {"type": "message", "subtype": "message_deleted", "channel": msg.channel, "channel_type": "channel",
                 "hidden": True, "ts": us_to_ts(at), "event_ts": us_to_ts(at), "deleted_ts": us_to_ts(msg.ts),
                 "previous_message": previous}
        sent = Sent(event_id, "delete", msg, at, None, self._envelope(event_id, at, event))
        msg.delete = sent
        return sent


class SlackSender:
    """Delivers events the way Slack does (see the module doc); every attempt is recorded."""

    def __init__(self, client: Client, scheduler: Scheduler, phases: Phases, *, path: str = "/slack/events",
                 retry_delays: tuple[float, ...] = (1.0, 5.0, 15.0), timeout: float = SLACK_TIMEOUT) -> None:
        self.client, self.scheduler, self.phases = client, scheduler, phases
        self.path, self.retry_delays, self.timeout = path, retry_delays, timeout
        self.attempts: list[Attempt] = []
        self.lags: list[float] = []

    def send(self, sent: Sent, due: float) -> None:
        sent.phase_sent = self.phases.at(due)
        self.scheduler.at(due, lambda lag: self._attempt(sent, 0, None, lag))

    def _attempt(self, sent: Sent, retry: int, reason: str | None, lag: float) -> None:
        if retry == 0:
            self.lags.append(lag)
        headers = slack_signature(sent.body)
        if retry:
            headers["X-Slack-Retry-Num"] = str(retry)
            headers["X-Slack-Retry-Reason"] = reason or "http_error"
        attempt, _ = self.client.request(f"slack:{sent.kind}", "POST", self.path, body=sent.body, headers=headers,
                                         timeout=self.timeout, retry=retry)
        sent.attempts.append(attempt)
        self.attempts.append(attempt)
        if attempt.ok:
            sent.acked = True
            return
        if retry >= len(self.retry_delays):
            sent.gave_up = True
            return
        why = {"timeout": "http_timeout", "connection": "connection_failed"}.get(attempt.error or "", "http_error")
        self.scheduler.at(time.monotonic() + self.retry_delays[retry],
                          lambda lag: self._attempt(sent, retry + 1, why, lag))


# ------------------------------------------------------------------------------------------------ checks

def _channel_rows(db: Database, team: str, channel: str) -> list[messages.Message]:
    """Every message of a channel (deleted ones too), newest first, read page by page at the db's consistency."""
    out: list[messages.Message] = []
    upper = messages.MAX_US
    while True:
        page, nxt = messages.timeline(db, team, [channel], limit=500, upper=upper, include_deleted=True)
        out.extend(page)
        if nxt is None:
            return out
        upper = nxt


def _acceptable_texts(msg: Msg) -> list[Sent]:
    """The texts the message may show: from the last acknowledged one on (all, when none was acknowledged)."""
    acked = [s.index for s in msg.texts if s.acked]
    first = max(acked) if acked else 0
    return [s for s in msg.texts if s.index >= first]


def _expected_history(msg: Msg) -> tuple[dict[int, str], dict[int, tuple[str, set[str]]]]:
    """(every version time -> the text the model allows there, the versions acknowledged events require ->
    (text, the events that require it))."""
    allowed = {s.at: s.text for s in msg.texts}
    required: dict[int, tuple[str, set[str]]] = {}
    for s in msg.texts:
        if not s.acked:
            continue
        required.setdefault(s.at, (s.text, set()))[1].add(s.event_id)
        if s.index:  # an edit also records the text it replaced, at that text's time
            prev = msg.texts[s.index - 1]
            required.setdefault(prev.at, (prev.text, set()))[1].add(s.event_id)
    return allowed, required


def verify(db: Database, traffic: SlackTraffic, *, examples: int = 8) -> dict[str, Any]:
    """What the archive holds against what was sent (db: reads at QUORUM). Counts per event and per message."""
    team = traffic.team
    problems: dict[str, list[str]] = {"lost": [], "duplicates": [], "wrong_state": [], "unexpected": [],
                                      "half_written": []}
    stored: dict[tuple[str, int], messages.Message] = {}
    for channel in traffic.channels:
        rows = _channel_rows(db, team, channel)
        seen = Counter(m.ts for m in rows)
        for ts, n in seen.items():
            if n > 1:
                problems["duplicates"].append(f"{channel}/{us_to_ts(ts)} listed {n} times")
        for m in rows:
            stored[(channel, m.ts)] = m
    model = {(m.channel, m.ts): m for m in traffic.msgs}
    for key in stored.keys() - model.keys():
        problems["unexpected"].append(f"{key[0]}/{us_to_ts(key[1])} was never sent")

    lost_events: set[str] = set()

    def check(msg: Msg) -> None:
        key = (msg.channel, msg.ts)
        row = stored.get(key)
        where = f"{msg.channel}/{us_to_ts(msg.ts)}"
        writes_row = [s for s in msg.texts if s.acked]  # a post and each edit write the whole message row
        if row is None:
            direct = messages.find(db, team, [msg.channel], msg.ts, include_deleted=True)
            if direct is not None:
                what = "acknowledged" if writes_row else "unacknowledged"
                problems["half_written"].append(f"{where} ({what}): the row exists but its day is not listed")
            if writes_row:
                problems["lost"].append(f"{where}: {len(writes_row)} acknowledged write(s), message absent")
                lost_events.update(s.event_id for s in writes_row)
            if msg.delete is not None and msg.delete.acked and writes_row:
                lost_events.add(msg.delete.event_id)
            return
        # The text: the last acknowledged one, or a later one whose answer was lost.
        options = _acceptable_texts(msg)
        match = next((s for s in options if s.text == row.text), None)
        if match is None:
            problems["wrong_state"].append(f"{where}: text {row.text!r:.60} is none of the acceptable "
                                           f"{[s.text[:30] for s in options]}")
        elif row.edited_ts != (match.at if match.index else None):
            problems["wrong_state"].append(f"{where}: edited_ts {row.edited_ts} but the text is of {match.at}")
        # The delete.
        if msg.delete is None and row.deleted:
            problems["wrong_state"].append(f"{where}: deleted, but no delete was sent")
        elif msg.delete is not None and msg.delete.acked:
            if not row.deleted:
                problems["lost"].append(f"{where}: delete acknowledged, message not deleted")
                lost_events.add(msg.delete.event_id)
            elif row.deleted_ts != msg.delete.at:
                problems["wrong_state"].append(f"{where}: deleted_ts {row.deleted_ts} != {msg.delete.at}")
        # The edit history: every version is one the model allows; every acknowledged one is there.
        found = messages.find_with_history(db, team, [msg.channel], msg.ts, include_deleted=True)
        history = {} if found is None else {int(h["ts"].replace(".", "")): h["text"] for h in found[1]}
        allowed, required = _expected_history(msg)
        for at, text in history.items():
            if allowed.get(at) != text:
                problems["wrong_state"].append(f"{where}: history has {text!r:.40} at {at}, never sent there")
        for at, (text, needed_by) in required.items():
            if history.get(at) != text:
                problems["lost"].append(f"{where}: acknowledged version at {us_to_ts(at)} missing from history")
                lost_events.update(needed_by)
        # A thread head: each acknowledged reply listed once; the reply count when every event is known.
        if msg.replies:
            replies, _ = messages.thread(db, team, [msg.channel], msg.ts, limit=1000, after=msg.ts,
                                         include_deleted=True)
            listed = Counter(r.ts for r in replies)
            for ts, n in listed.items():
                if n > 1:
                    problems["duplicates"].append(f"{where}: reply {us_to_ts(ts)} listed {n} times")
            for reply in msg.replies:
                if any(s.acked for s in reply.texts) and reply.ts not in listed:
                    problems["lost"].append(f"{where}: acknowledged reply {us_to_ts(reply.ts)} not in the thread")
                    lost_events.update(s.event_id for s in reply.texts if s.acked)
            if all(s.acked for r in msg.replies for s in r.events):
                wanted = sum(1 for r in msg.replies if r.delete is None)
                if row.reply_count != wanted:
                    problems["wrong_state"].append(f"{where}: reply_count {row.reply_count}, expected {wanted}")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(check, traffic.msgs))
    kinds = Counter(s.kind for s in traffic.sent)
    acked = [s for s in traffic.sent if s.acked]
    return {
        "events_sent": len(traffic.sent), "by_kind": dict(kinds), "acknowledged": len(acked),
        "never_acknowledged": sum(1 for s in traffic.sent if s.gave_up),
        "unresolved": sum(1 for s in traffic.sent if not s.acked and not s.gave_up),
        "messages": len(traffic.msgs), "messages_stored": len(stored),
        "lost": len(lost_events), "lost_messages": len(problems["lost"]),
        "duplicates": len(problems["duplicates"]), "wrong_final_states": len(problems["wrong_state"]),
        "unexpected": len(problems["unexpected"]), "half_written": len(problems["half_written"]),
        "examples": {k: v[:examples] for k, v in problems.items() if v},
    }


def retry_figures(traffic: SlackTraffic) -> dict[str, Any]:
    """How many deliveries each event needed, and what the retries met."""
    deliveries = Counter(len(s.attempts) for s in traffic.sent)
    return {"events_retried": sum(1 for s in traffic.sent if len(s.attempts) > 1),
            "retries": sum(len(s.attempts) - 1 for s in traffic.sent if s.attempts),
            "deliveries_per_event": {str(k): v for k, v in sorted(deliveries.items())},
            "acked_on_retry": sum(1 for s in traffic.sent if s.acked and len(s.attempts) > 1)}


def probe_reads(port: int, team: str, msgs: list[Msg], up_at: float, *, limit: int = 300) -> dict[str, Any]:
    """Right after a node rejoined: read back (REST, the default LOCAL_ONE) messages acknowledged while it was
    down. A 404 is a stale read: the replica that answered has not yet received the write (hinted handoff)."""
    sample = [m for m in msgs if m.texts[0].acked and m.delete is None][:limit]
    client = Client(port)
    headers = {"Authorization": f"Bearer {READ_TOKEN}"}
    results: list[tuple[float, int | None]] = []

    def read(msg: Msg) -> None:
        path = f"/slack/teams/{team}/channels/{msg.channel}/messages/{us_to_ts(msg.ts)}"
        attempt, _ = client.request("read:message", "GET", path, headers=headers, timeout=5.0)
        results.append((attempt.started - up_at, attempt.status))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(read, sample))
    stale = sorted(t for t, status in results if status == 404)
    return {"reads": len(results), "status": dict(Counter(str(s) for _, s in results)), "stale_404": len(stale),
            "stale_window_s": [round(stale[0], 1), round(stale[-1], 1)] if stale else None,
            "read_window_s": [round(min(t for t, _ in results), 1), round(max(t for t, _ in results), 1)]
            if results else None}
