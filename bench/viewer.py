"""The archive viewer's channel page (issue 13): server time under load, worker CPU per page, throughput, and the
browser's first contentful paint, against gunicorn on the local node.

    .venv/bin/python -m bench.viewer [--messages 2000] [--flat-messages 600] [--requests 400]
                                     [--concurrency 1,8] [--workers 3] [--threads 8] [--fcp-runs 30]
                                     [--cold-runs 3] [--screenshot] [--profile] [--profile-pages 100] [--py-spy 10]
                                     [--keyspace chronicle_bench_viewer] [--refill] [--skip-load] [--skip-browser]
                                     [--wait-quiet 900] [--what-if names,channels]

Targets (issue 13): channel page with 50 messages, server time p99 <= 30 ms at concurrency 8; first contentful
paint of a channel page <= 500 ms from the loopback server.

1. Workspace (resumable, idempotent). The keyspace (`--keyspace`, kept between runs) is migrated with the project's
   runner (api.migrations.migrate). Workspace TVIEWBENCH is written through the backfill's own path: profiles
   (users.Profile.from_slack + users.store_profile), channel snapshots (ingest.store_channel_snapshot), and every
   message as conversations.history shows it (payloads.history_message -> ingest.history_rows, i.e.
   ingest.message_rows plus reactions -> Database.execute_many -> ingest.note_stored). Two channels:
   - "threaded": `--messages` top-level messages over ~3 months, mrkdwn with mentions of 40 users with profiles
     (and 2 without), links, emoji (and unknown custom ones), bold/italic/strike/code, code blocks, quotes,
     channel mentions, non-ASCII; 25% with reactions, 8% thread heads with 1-12 replies (5% of replies also sent
     to the channel), 5% edited, 3% with files' metadata, 3% from a bot. Replies are rows of the channel's
     timeline that the page leaves out, so a page shows fewer than 50 messages (measured: `messages_per_page`);
   - "flat": `--flat-messages` messages of the same generator without threads: every page shows 50 (the page the
     target names).
   Everything is seeded and timestamped by the plan, so a re-run writes the same cells again. A channel's
   purpose is written last and names its plan: a run that finds it skips that fill (`--refill` forces it).
2. Load. gunicorn (gunicorn.conf.py, `--workers` x `--threads`, CHRONICLE_API_TOKENS holding one token of the
   workspace, CHRONICLE_LOG_LEVEL=INFO and an access log file: the production defaults). One sign-in
   (POST /archive, form fields token and tz, Origin of the server) gives the cookies. After an untimed warm-up,
   phases at each `--concurrency` (closed loop, `--requests` requests each; forked load processes, a keep-alive
   http.client connection per thread): `page` (first page of the threaded channel), `older` (its "load older"
   fragment `.../older?cursor=`, cycling over every cursor met walking the whole channel), `page-flat`. Figures:
   - client p50/p90/p99/max (wall time around each request);
   - server time: the archive pages send no Server-Timing header, so it is read from the worker's own request
     log (api/observability.py: `latency_ms`, before_request to the app's last after_request, i.e. the view, the
     reads and the Jinja rendering, including any wait for the CPU or the GIL) and from gunicorn's access log
     (`ms`, whole request in the worker, integer ms), joined to the client's requests by the X-Request-Id each
     request sends;
   - CPU seconds of the gunicorn workers, the node and the load generator over the phase, per request (the
     node's figure includes any other client's work); the whole machine's busy share over the phase
     (/proc/stat) and the part of it not ours (`other_load_share`), to show what else was running;
   - throughput (answers / phase wall time), messages shown per page, bytes per page.
   Others share this 2-core machine: `--wait-quiet N` waits (up to N s) before each phase until it is under 15%
   busy, and each phase records the other processes of benches and tests running at its start.
3. Browser. Playwright driving Debian's chromium (tests/browser.py: CHROMIUM, CHROMIUM_ARGS), per channel. Cold:
   `--cold-runs` fresh contexts (empty cache) with the cookies set, one navigation each. Warm: one context signs
   in through the form (the sign-in and workspace pages load the shared CSS and JS), then `--fcp-runs`
   navigations to the channel page, each in a new tab (the cache as a returning reader has it). Read after the
   load event: `first-contentful-paint`, navigation timing (responseStart, domContentLoadedEventEnd,
   loadEventEnd), how the page's assets came (transfer size 0: cache; < 1,000 bytes: revalidated) and their
   caching headers. Console errors are collected. `--screenshot`: test-artifacts/bench-viewer-channel.png.
4. `--profile`: where a page's time goes, in-process (the same Flask app on the same keyspace, one thread, the
   test client): the functions the channel view calls (_STEPS) are wrapped where they are looked up, so the real
   view runs and each step's own time per request is reported (reads, view-models, mrkdwn, Jinja, the rest);
   then cProfile of `--profile-pages` requests (top functions by own and by cumulative time, ms per page).
   `--py-spy N`: also samples one gunicorn worker for N s from the start of the highest-concurrency page phase
   (.venv/bin/py-spy, raw collapsed stacks): the share of request-thread samples waiting, and the functions
   running the most.
5. `--what-if names,channels`: an experiment, not the app as it is: gunicorn serves bench/viewer_whatif.py, the
   same app with the page's user profiles and/or channel names cached per process, to measure what such a cache
   would buy (results written as viewer-whatif-<UTC time>.json).

Prints a table on stderr and one JSON object on stdout, written under bench/results/viewer-<UTC time>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import http.client
import json
import multiprocessing
import os
import pstats
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from api.config import Settings
from api.db import Database
from api.migrations import migrate
from api.node.process import read_pid
from api.observability import configure_logging
from api.slack import channels, ingest, payloads, users
from bench.scale_common import _percentile, local_node, scratch_settings, served, write_result
from bench.tagging import _children, cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TEAM = "TVIEWBENCH"
TOKEN = "bench-viewer-token"
READER_ZONE = "Europe/Berlin"
PLAN_VERSION = 1
FIRST_DAY = datetime(2026, 8, 3, 7, 0, tzinfo=UTC)
SEED = 13
MESSAGE_MARK = b'<li class="message '


def _note(part: str, figures: Any) -> None:
    print(f"{part}: {json.dumps(figures, default=str)}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ the workspace

PEOPLE = [
    ("alice", "Alice Martin", "alice"), ("bob", "Bob Okafor", ""), ("chloe", "Chloé Dubois", "chloé"),
    ("dmitri", "Дмитрий Иванов", "dima"), ("emma", "Emma Schmidt", ""), ("farid", "Farid Haddad", "farid"),
    ("grace", "Grace Hopper", "amazing grace"), ("hiro", "Hiroshi Tanaka", "田中"), ("ines", "Inês Costa", ""),
    ("jamal", "Jamal Wright", "jw"), ("kate", "Kate Nowak", ""), ("lars", "Lars Eriksson", "lars"),
    ("maya", "Maya Patel", ""), ("nora", "Nora Lindqvist", "nora"), ("omar", "Omar Suleiman", ""),
    ("priya", "Priya Raman", "priya"), ("quentin", "Quentin Blake", ""), ("rosa", "Rosa Jiménez", "rosa"),
    ("sam", "Sam Taylor", ""), ("tomas", "Tomás Novák", "tomas"), ("uma", "Uma Thurman", ""),
    ("victor", "Victor Hugo", "vh"), ("wen", "Wen Li", "wen"), ("xavier", "Xavier Dupont", ""),
    ("yara", "Yara Haddad", "yara"), ("zoe", "Zoë Keller", "zoë"), ("aaron", "Aaron Levi", ""),
    ("bea", "Beatriz Souza", "bea"), ("carl", "Carl Jung", ""), ("dana", "Dana Scully", "dana"),
    ("eli", "Eli Cohen", ""), ("fatima", "Fatima Zahra", "fatima"), ("gus", "Gus Fring", ""),
    ("hana", "Hana Kim", "hana"), ("ivan", "Ivan Petrov", ""), ("jules", "Jules Verne", "jules"),
    ("kofi", "Kofi Mensah", ""), ("lena", "Lena Meyer", "lena"), ("mo", "Mohammed Ali", ""),
    ("nia", "Nia Long", "nia"),
]
USERS = [f"U0VB{i:04d}" for i in range(len(PEOPLE))]
GHOSTS = ["U0GHOST01", "U0GHOST02"]  # mentioned, never seen: the page shows the id
TZS = [("Europe/Berlin", "Central European Summer Time", 7200), ("America/New_York", "Eastern Daylight Time", -14400),
       ("Asia/Tokyo", "Japan Standard Time", 32400), ("America/Los_Angeles", "Pacific Daylight Time", -25200)]
OTHER_CHANNELS = {"C0VBGEN01": "general", "C0VBDEP01": "deploys", "C0VBINC01": "incidents",
                  "C0VBDES01": "design", "C0VBRND01": "random", "C0VBSUP01": "support"}
SENTENCES = [
    "the deploy is green again after the config rollback", "can someone take a look at the flaky test in CI",
    "I moved the retro to Thursday afternoon", "compaction on node 3 is way behind, looking into it",
    "we should bump the driver before the next release", "latency went up after the last schema change",
    "the dashboard now shows p99 per endpoint", "shipping the archive viewer behind a flag this week",
    "does anyone know why the nightly export took twice as long", "draft of the design doc is ready for comments",
    "on-call handover notes are in the usual place", "reminder: freeze starts Friday at noon",
    "thanks for the quick fix, works for me now", "I can pair on this after lunch if that helps",
    "tombstones again, the TTL on that table is too short", "new hire onboarding checklist updated",
    "the staging cluster will be down for 20 minutes", "benchmarks look fine, numbers in the sheet",
    "let's keep the old endpoint until every client moved", "that was a typo in the migration, fixed now",
    "café talk moved to the big room", "¿alguien tiene acceso al panel de facturación?", "naïve question maybe",
]
EMOJI = ["+1", "tada", "rocket", "eyes", "heart", "white_check_mark", "fire", "joy", "thinking_face", "pray", "100",
         "sweat_smile", "wave", "raised_hands", "bug", "coffee", "warning", "sparkles"]
CUSTOM_EMOJI = ["partyparrot", "shipit", "lgtm"]  # not in the table: shown as :name:


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the fill writes: decided by the seed and the size only."""

    channel_id: str
    messages: list[dict[str, Any]]  # Slack history objects, top-level and replies, oldest first
    top_level: int
    replies: int
    purpose: str  # written last: its presence says the fill is complete

    @property
    def observed_at(self) -> int:
        """When "history" was read (µs): a day after the newest message."""
        newest = max(float(m["ts"]) for m in self.messages)
        return int((newest + 86_400) * 1_000_000)


def _ts(at: datetime, micro: int) -> str:
    return f"{int(at.timestamp())}.{micro % 1_000_000:06d}"


def _text(rng: random.Random) -> str:
    """One realistic mrkdwn message text."""
    parts = [rng.choice(SENTENCES)]
    if rng.random() < 0.35:
        who = rng.sample(USERS, rng.randint(1, 3)) if rng.random() < 0.95 else [rng.choice(GHOSTS)]
        parts.insert(0 if rng.random() < 0.5 else len(parts), " ".join(f"<@{u}>" for u in who))
    if rng.random() < 0.2:
        n = rng.randint(100, 9999)
        parts.append(rng.choice([f"<https://github.com/acme/chronicle/pull/{n}|PR #{n}>",
                                 f"<https://docs.example.com/runbooks/{rng.choice(SENTENCES).split()[1]}>",
                                 f"see <https://grafana.example.com/d/{n}?from=now-6h&amp;to=now|the dashboard>"]))
    if rng.random() < 0.3:
        parts.append(" ".join(f":{rng.choice(EMOJI + CUSTOM_EMOJI)}:" for _ in range(rng.randint(1, 3))))
    if rng.random() < 0.15:
        marker = rng.choice("*_~")
        parts.append(f"{marker}{rng.choice(SENTENCES).split(' ', 3)[-1]}{marker}")
    if rng.random() < 0.1:
        parts.append(f"`{rng.choice(['nodetool status', 'SELECT * FROM slack_messages', 'make lint', 'git bisect'])}`")
    if rng.random() < 0.06:
        cid = rng.choice(list(OTHER_CHANNELS))
        parts.append(f"cc <#{cid}|{OTHER_CHANNELS[cid]}>")
    if rng.random() < 0.015:
        parts.insert(0, "<!here>")
    if rng.random() < 0.03:
        parts.append("a &lt; b &amp;&amp; c &gt; d")
    text = " ".join(parts)
    if rng.random() < 0.04:
        text += "\n```\nERROR 12:03:44 compaction failed: sstable too large\n  at CompactionTask.run()\n```"
    if rng.random() < 0.04:
        text = "&gt; " + rng.choice(SENTENCES) + "\n" + text
    if rng.random() < 0.1:
        text += "\n" + rng.choice(SENTENCES)
    return text


def _reactions(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for name in rng.sample(EMOJI + CUSTOM_EMOJI[:1], rng.randint(1, 3)):
        who = rng.sample(USERS, rng.randint(1, 6))
        out.append({"name": name, "users": who, "count": len(who)})
    return out


def _files(rng: random.Random, n: int) -> list[dict[str, Any]]:
    kinds = [("screenshot.png", "image/png", "png"), ("report.pdf", "application/pdf", "pdf"),
             ("export.csv", "text/csv", "csv"), ("notes.txt", "text/plain", "text")]
    out = []
    for k in range(rng.randint(1, 2)):
        name, mime, ftype = rng.choice(kinds)
        fid = f"F0VB{n:05d}{k}"
        if rng.random() < 0.2:
            out.append({"id": fid, "name": "Roadmap", "title": "Roadmap 2027", "is_external": True,
                        "external_type": "gdrive", "external_url": f"https://drive.example.com/d/{fid}",
                        "mode": "external"})
        else:
            out.append({"id": fid, "name": name, "title": name.split(".")[0].title() + f" {n}", "mimetype": mime,
                        "filetype": ftype, "size": rng.randint(2_000, 4_000_000), "mode": "hosted",
                        "url_private": f"https://files.slack.com/files-pri/{TEAM}-{fid}/{name}"})
    return out


def make_plan(n: int, *, threads: bool = True) -> Plan:
    """`n` top-level messages in one channel, ~35 minutes apart in working hours, with their threads (or none:
    then every timeline row is shown, a page holds 50 messages)."""
    rng = random.Random(SEED * 1_000_003 + n + (0 if threads else 7))
    channel_id = f"C0V{'B' if threads else 'F'}{n:07d}"
    at = FIRST_DAY
    out: list[dict[str, Any]] = []
    replies = 0
    for i in range(n):
        at += timedelta(minutes=rng.expovariate(1 / 35))
        if at.hour >= 20:  # the night off: the next day at 07:xx
            at = (at + timedelta(days=1)).replace(hour=7, minute=rng.randint(0, 59))
        user = rng.choice(USERS)
        ts = _ts(at, i)
        m: dict[str, Any] = {"type": "message", "user": user, "text": _text(rng), "ts": ts}
        if rng.random() < 0.03:
            m = {"type": "message", "subtype": "bot_message", "bot_id": "B0VBDEPLOY", "username": "deploybot",
                 "ts": ts, "text": f":rocket: deployed <https://ci.example.com/builds/{i}|build {i}> to production"}
        if rng.random() < 0.25:
            m["reactions"] = _reactions(rng)
        if rng.random() < 0.05 and "user" in m:
            m["edited"] = {"user": user, "ts": _ts(at + timedelta(minutes=rng.randint(1, 90)), i)}
        if rng.random() < 0.03:
            m["files"] = _files(rng, i)
        thread: list[dict[str, Any]] = []
        if rng.random() < (0.08 if threads else 0):
            m["thread_ts"] = ts
            reply_at = at
            for r in range(rng.randint(1, 12)):
                reply_at += timedelta(minutes=rng.randint(1, 40))
                ruser = rng.choice(USERS)
                reply = {"type": "message", "user": ruser, "text": _text(rng), "thread_ts": ts,
                         "ts": _ts(reply_at, 500_000 + i * 20 + r), "parent_user_id": user}
                if rng.random() < 0.05:
                    reply["subtype"] = "thread_broadcast"  # also sent to the channel: on the page
                if rng.random() < 0.15:
                    reply["reactions"] = _reactions(rng)
                thread.append(reply)
            replies += len(thread)
            m["reply_count"] = len(thread)
        out.append(m)
        out.extend(thread)
    purpose = (f"Viewer benchmark channel: {n} messages{'' if threads else ', no threads'} "
               f"(plan v{PLAN_VERSION}, seed {SEED})")
    return Plan(channel_id, out, n, replies, purpose)


def prepare(settings: Settings, keyspace: str, plans: dict[str, Plan], *, refill: bool) -> dict[str, Any]:
    """Migrate the keyspace and fill each plan's channel unless a complete fill of that plan is there."""
    admin = Database(settings, keyspace="")
    try:
        migrate(admin, keyspace, settings.replication_map(), log=lambda _m: None)
    finally:
        admin.close()
    db = Database(dataclasses.replace(settings, keyspace=keyspace))
    out: dict[str, Any] = {"keyspace": keyspace, "team": TEAM, "users": len(USERS), "channels": {}}
    created = int(FIRST_DAY.timestamp()) - 86_400 * 60
    try:
        for label, plan in plans.items():
            meta = channels.metadata(db, TEAM, plan.channel_id, channels.id_chain(db, TEAM, plan.channel_id))
            done = {"channel": plan.channel_id, "top_level_messages": plan.top_level, "replies": plan.replies}
            out["channels"][label] = done
            if meta is not None and meta.get("purpose") == plan.purpose and not refill:
                done["filled"] = "already (the channel's purpose names this plan)"
                continue
            started = time.perf_counter()
            observed = plan.observed_at
            for i, (handle, real, display) in enumerate(PEOPLE):
                zone, tz_label, offset = TZS[i % len(TZS)]
                user = {"id": USERS[i], "name": handle, "real_name": real, "tz": zone, "tz_label": tz_label,
                        "tz_offset": offset, "updated": int(FIRST_DAY.timestamp()) - 86_400 * 30,
                        "profile": {"real_name": real, "display_name": display}}
                users.store_profile(db, users.Profile.from_slack(TEAM, user, observed_at=observed), seen_at=observed)
            names = {**OTHER_CHANNELS, plan.channel_id: "engineering" if plan.replies else "announcements"}
            for cid, name in names.items():
                snap = ingest.ChannelSnapshot.parse({
                    "id": cid, "name": name, "is_private": False, "created": created, "creator": USERS[0],
                    "topic": {"value": f"#{name}: release train :rocket: on-call see pinned", "last_set": created},
                    "num_members": len(USERS)})
                ingest.store_channel_snapshot(db, TEAM, snap, observed_at=observed, source="backfill")
            rows = 0
            parsed = [payloads.history_message(TEAM, plan.channel_id, m) for m in plan.messages]
            for start in range(0, len(parsed), 200):
                chunk = parsed[start:start + 200]
                writes = [w for hm in chunk for w in ingest.history_rows(db, hm, observed_at=observed)]
                rows += db.execute_many(writes, batch_size=20)  # as the backfill sends them
                for hm in chunk:
                    ingest.note_stored(db, hm.message)
            # Last: the mark of a complete fill.
            ingest.update_channel(db, TEAM, plan.channel_id, created + 1, purpose=plan.purpose)
            done.update(filled=True, rows_written=rows, fill_seconds=round(time.perf_counter() - started, 1))
        _note("workspace", out)
        return out
    finally:
        db.close()


# ------------------------------------------------------------------------------------------------ HTTP

class Client:
    """A keep-alive HTTP/1.1 connection (http.client: the cheapest client, the load shares 2 cores)."""

    def __init__(self, port: int, cookie: str) -> None:
        self.port, self.cookie = port, cookie
        self.conn: http.client.HTTPConnection | None = None

    def get(self, path: str, request_id: str) -> tuple[int, bytes]:
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            try:
                self.conn.request("GET", path, headers={"Cookie": self.cookie, "X-Request-Id": request_id})
                response = self.conn.getresponse()
                return response.status, response.read()
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    return 0, b""
        return 0, b""


def _cookies(response: http.client.HTTPResponse, jar: SimpleCookie) -> None:
    for header in response.msg.get_all("Set-Cookie") or ():
        jar.load(header)


def sign_in(port: int) -> str:
    """The sign-in form as a browser sends it: GET /archive (its CSRF cookie and the form's token), then POST the
    API token, the zone and that token, same-origin; the Cookie header it grants."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    jar: SimpleCookie = SimpleCookie()
    try:
        conn.request("GET", "/archive")
        response = conn.getresponse()
        form = response.read()
        _cookies(response, jar)
        found = re.search(rb'name="csrf_token" value="([^"]+)"', form)
        if found is None:
            raise RuntimeError(f"the sign-in page ({response.status}) has no CSRF token")
        conn.request("POST", "/archive",
                     body=urlencode({"token": TOKEN, "tz": READER_ZONE, "csrf_token": found.group(1).decode()}),
                     headers={"Content-Type": "application/x-www-form-urlencoded",
                              "Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin",
                              "Cookie": "; ".join(f"{k}={v.value}" for k, v in jar.items())})
        response = conn.getresponse()
        response.read()
        _cookies(response, jar)
    finally:
        conn.close()
    if response.status != 303 or "chronicle_archive" not in jar:
        raise RuntimeError(f"sign-in answered {response.status} without the cookie")
    return "; ".join(f"{k}={v.value}" for k, v in jar.items())


_CURSOR_RE = re.compile(rb'data-(?:next-)?cursor="([^"]*)"')


def older_cursors(port: int, cookie: str, page_path: str, limit: int) -> list[str]:
    """Walk the channel from its first page through "load older": every cursor met (up to `limit`)."""
    client = Client(port, cookie)
    status, body = client.get(page_path, "walk-0")
    found = _CURSOR_RE.search(body)
    cursors: list[str] = []
    while found and found.group(1) and len(cursors) < limit:
        cursors.append(found.group(1).decode())
        status, body = client.get(f"{page_path}/older?{urlencode({'cursor': cursors[-1]})}", f"walk-{len(cursors)}")
        if status != 200:
            raise RuntimeError(f"the older fragment answered {status}")
        found = _CURSOR_RE.search(body)
    return cursors


# ------------------------------------------------------------------------------------------------ gunicorn

def _server_times(logs: Path, prefix: str) -> tuple[dict[str, float], dict[str, float]]:
    """request id -> latency_ms (the app's request log) and -> ms (gunicorn's access log), for ids of a phase."""
    app: dict[str, float] = {}
    with contextlib.suppress(FileNotFoundError), (logs / "app.log").open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if prefix in line and '"latency_ms"' in line:
                with contextlib.suppress(ValueError):
                    rec = json.loads(line)
                    if rec.get("request_id", "").startswith(prefix):
                        app[rec["request_id"]] = float(rec["latency_ms"])
    access: dict[str, float] = {}
    with contextlib.suppress(FileNotFoundError), (logs / "access.log").open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if prefix in line:
                with contextlib.suppress(ValueError):
                    rec = json.loads(line)
                    if str(rec.get("rid", "")).startswith(prefix):
                        access[rec["rid"]] = float(rec["ms"])
    return app, access


# ------------------------------------------------------------------------------------------------ machine

def _busy_jiffies() -> tuple[int, int, int]:
    """(busy, total, steal) jiffies of the whole machine so far (/proc/stat). Steal: time the hypervisor gave the
    virtual CPUs to someone else (this machine is a VM; a noisy host shows here)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    steal = fields[7] if len(fields) > 7 else 0
    return sum(fields) - idle - steal, sum(fields), steal


def wait_quiet(limit_seconds: float, threshold: float = 0.15) -> float:
    """Wait (up to `limit_seconds`) until the machine is quiet: under `threshold` of its CPUs busy over 3 s while
    this bench is between phases (the node's own background work counts too). Returns the seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < limit_seconds:
        busy0, total0, _s = _busy_jiffies()
        time.sleep(3)
        busy1, total1, _s = _busy_jiffies()
        if (busy1 - busy0) / max(1, total1 - total0) < threshold:
            break
    waited = time.monotonic() - started
    if waited > 4:
        _note("waited for a quiet machine", {"seconds": round(waited), "others": others_running()})
    return waited


def node_pid(node: Any) -> int:
    """The node's process: its pid file, else whoever listens on its native port (a node started another way)."""
    pid = read_pid(node)
    if pid:
        return pid
    found = subprocess.run(["ss", "-Hltnp", f"sport = :{node.native_port}"], capture_output=True, text=True).stdout
    match = re.search(r"pid=(\d+)", found)
    return int(match.group(1)) if match else 0


_MINE: set[int] = set()  # this run's gunicorn (master and workers) and the node it measures


def others_running() -> list[str]:
    """Other benchmark, test, server and JVM processes on the machine right now (command lines, lifetime CPU%),
    for the record: the node this run measures and this run's own processes are left out."""
    found = subprocess.run(["ps", "-eo", "pid,pcpu,args", "--sort=-pcpu"], capture_output=True, text=True).stdout
    out = []
    for line in found.splitlines()[1:]:
        pid, pcpu, cmd = line.strip().split(None, 2)
        if int(pid) in _MINE or int(pid) == os.getpid() or "bench.viewer" in cmd:
            continue
        if any(word in cmd for word in ("bench", "pytest", "gunicorn", "java", "chromium", "chronicle ")):
            out.append(f"{pid} {pcpu}% {cmd[:120]}")
    return out[:12]


# ------------------------------------------------------------------------------------------------ load

def _load_process(port: int, cookie: str, paths: list[str], per_thread: int, threads: int, tag: str, sender: Any
                  ) -> None:
    before = os.times()
    records: list[list[tuple]] = [[] for _ in range(threads)]

    def run(t: int) -> None:
        client = Client(port, cookie)
        for i in range(per_thread):
            path = paths[(t * per_thread + i) % len(paths)]
            rid = f"{tag}-{t}-{i}"
            started = time.perf_counter()
            status, body = client.get(path, rid)
            records[t].append((rid, time.perf_counter() - started, status, len(body), body.count(MESSAGE_MARK)))

    workers = [threading.Thread(target=run, args=(t,), daemon=True) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    after = os.times()
    sender.send(([r for rs in records for r in rs], after.user + after.system - before.user - before.system))
    sender.close()


def _split(concurrency: int, procs: int) -> list[int]:
    procs = max(1, min(procs, concurrency))
    return [concurrency // procs + (1 if i < concurrency % procs else 0) for i in range(procs)]


def run_load(name: str, port: int, cookie: str, paths: list[str], requests: int, concurrency: int,
             pids: dict[str, list[int]], logs: Path, load_procs: int, quiet_limit: float = 0.0) -> dict[str, Any]:
    """`requests` GETs of `paths` (round robin) by `concurrency` closed-loop clients; the phase's figures."""
    waited = wait_quiet(quiet_limit) if quiet_limit else 0.0
    others = others_running()
    ctx = multiprocessing.get_context("fork")
    tag = f"{name}-{int(time.time() * 1000) % 10**8}"
    per_thread = max(1, -(-requests // concurrency))
    procs, pipes = [], []
    cpu_before = {k: sum(cpu_seconds(p) for p in v) for k, v in pids.items()}
    busy0, total0, steal0 = _busy_jiffies()
    started = time.perf_counter()
    for i, threads in enumerate(_split(concurrency, load_procs)):
        receiver, sender = ctx.Pipe(duplex=False)
        shifted = paths[i * 7 % len(paths):] + paths[:i * 7 % len(paths)]
        proc = ctx.Process(target=_load_process, args=(port, cookie, shifted, per_thread, threads, f"{tag}-p{i}",
                                                      sender), daemon=True)
        proc.start()
        sender.close()
        procs.append(proc)
        pipes.append(receiver)
    records: list[tuple] = []
    client_cpu = 0.0
    for receiver, proc in zip(pipes, procs, strict=True):
        if not receiver.poll(600):
            raise RuntimeError(f"{name}: a load process did not report")
        got, cpu = receiver.recv()
        records.extend(got)
        client_cpu += cpu
        proc.join(timeout=30)
    wall = time.perf_counter() - started
    busy1, total1, steal1 = _busy_jiffies()
    cpu_after = {k: sum(cpu_seconds(p) for p in v) for k, v in pids.items()}
    time.sleep(0.3)  # the log lines of the last answers
    app_ms, access_ms = _server_times(logs, tag)
    ok = [r for r in records if r[2] == 200]
    cpu = {k: round(cpu_after[k] - cpu_before[k], 2) for k in pids}
    cpu["load generator"] = round(client_cpu, 2)
    machine_cpus = os.cpu_count() or 1
    machine_busy = (busy1 - busy0) / max(1, total1 - total0)
    ours = sum(cpu.values()) / (wall * machine_cpus)
    result = {
        "phase": name, "concurrency": concurrency, "requests": len(records), "ok": len(ok),
        "answers": dict(Counter(str(r[2]) for r in records)), "seconds": round(wall, 2),
        "per_second": round(len(ok) / wall, 1),
        "client": _latency([r[1] * 1000 for r in ok]),
        "server_app": _latency([app_ms[r[0]] for r in ok if r[0] in app_ms]),
        "server_gunicorn": _latency([access_ms[r[0]] for r in ok if r[0] in access_ms]),
        "messages_per_page": round(statistics.fmean(r[4] for r in ok), 1) if ok else 0,
        "bytes_per_page": round(statistics.fmean(r[3] for r in ok)) if ok else 0,
        "cpu_seconds": cpu,
        "cpu_ms_per_request": {k: round(v * 1000 / len(ok), 2) for k, v in cpu.items()} if ok else {},
        # Little's law on this machine: `concurrency` requests in flight, each needing this much CPU of the
        # machine's cores (ours only), cannot average less than this latency.
        "cpu_bound_mean_latency_ms": round(concurrency * sum(cpu.values()) * 1000 / max(1, len(ok)) / machine_cpus, 1),
        "machine_busy_share": round(machine_busy, 3),
        "other_load_share": round(max(0.0, machine_busy - ours), 3),
        "steal_share": round((steal1 - steal0) / max(1, total1 - total0), 3),
        "waited_for_quiet_s": round(waited), "others_running": others,
    }
    _note(name, result)
    return result


def _latency(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    if not ordered:
        return {"count": 0}
    return {"count": len(ordered), "p50_ms": round(_percentile(ordered, 0.50), 1),
            "p90_ms": round(_percentile(ordered, 0.90), 1), "p99_ms": round(_percentile(ordered, 0.99), 1),
            "max_ms": round(ordered[-1], 1), "mean_ms": round(statistics.fmean(ordered), 1)}


# ------------------------------------------------------------------------------------------------ py-spy

def py_spy(pid: int, seconds: float, out: Path) -> subprocess.Popen | None:
    """Sample one worker (raw collapsed stacks) in the background; None when py-spy is not installed."""
    exe = BIN / "py-spy"
    if not exe.exists():
        return None
    return subprocess.Popen([str(exe), "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "250",
                             "--format", "raw", "--output", str(out), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


_WAITS = ("Condition.wait ", "Event.wait ", "Semaphore.acquire ", "Lock.acquire ", "select ", "poll ")


def py_spy_summary(path: Path, top: int = 25) -> dict[str, Any]:
    """From py-spy's collapsed stacks of a worker's request threads: the share of samples waiting (on Cassandra's
    answers, the pool, a lock) and, of the samples running Python, the share per function (own and inclusive)."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    waiting = running = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]  # a function, not a line
        if not any("api/" in f or "jinja2" in f or "flask" in f or "werkzeug" in f for f in frames):
            continue  # not a request: gunicorn's poller, the driver's event loop
        if frames[-1].startswith(_WAITS):
            waiting += n
            continue
        running += n
        own[frames[-1]] += n
        for f in set(frames):
            inclusive[f] += n

    def pct(counter: Counter[str], keep: Any = lambda _f: True) -> list[tuple[str, float]]:
        return [(f, round(100 * n / running, 1)) for f, n in counter.most_common() if keep(f)][:top] if running else []

    return {"request_samples": waiting + running, "waiting_share": round(waiting / max(1, waiting + running), 3),
            "running_self_pct": pct(own),
            "running_inclusive_pct": pct(inclusive, lambda f: "api/" in f or "jinja2/environment" in f)}


# ------------------------------------------------------------------------------------------------ browser

# A function (page.evaluate runs it through the DevTools protocol): a string for wait_for_function would be eval'd,
# which the pages' CSP (script-src 'self', no 'unsafe-eval') refuses.
_PAINT_JS = """async () => {
  for (let i = 0; i < 400 && !performance.getEntriesByName('first-contentful-paint').length; i++) {
    await new Promise(resolve => setTimeout(resolve, 25));
  }
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  const nav = performance.getEntriesByType('navigation')[0];
  const assets = performance.getEntriesByType('resource').map(r => ({
      name: new URL(r.name).pathname, transfer: r.transferSize, duration: Math.round(r.duration * 10) / 10}));
  return {fcp: fcp ? fcp.startTime : null, responseStart: nav.responseStart, responseEnd: nav.responseEnd,
          domContentLoaded: nav.domContentLoadedEventEnd, load: nav.loadEventEnd, transfer: nav.transferSize,
          body: nav.decodedBodySize, assets: assets,
          serverTiming: (nav.serverTiming || []).map(t => t.name + '=' + t.duration),
          messages: document.querySelectorAll('#timeline li.message').length};
}"""


def _visit(context: Any, url: str, errors: list[str]) -> dict[str, Any]:
    page = context.new_page()
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        response = page.goto(url, wait_until="load")
        if response is None or response.status != 200 or "/channels/" not in page.url:
            raise RuntimeError(f"the channel page answered {response and response.status} at {page.url}")
        return page.evaluate(_PAINT_JS)
    finally:
        page.close()


def browser_runs(port: int, page_path: str, runs: int, cold_runs: int, screenshot: Path | None) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM, CHROMIUM_ARGS

    base = f"http://127.0.0.1:{port}"
    url = base + page_path
    errors: list[str] = []
    cookies = [{"name": "chronicle_archive", "value": TOKEN, "domain": "127.0.0.1", "path": "/archive",
                "httpOnly": True, "sameSite": "Strict"},
               {"name": "chronicle_tz", "value": READER_ZONE, "domain": "127.0.0.1", "path": "/archive",
                "httpOnly": True, "sameSite": "Strict"}]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            # A first context to start the browser's own machinery, so the cold runs time the page, not the launch.
            spare = browser.new_context()
            spare.new_page().goto(base + "/readyz")
            spare.close()
            cold = []
            for _ in range(cold_runs):
                context = browser.new_context(viewport={"width": 1280, "height": 900}, timezone_id=READER_ZONE)
                context.add_cookies(cookies)
                cold.append(_visit(context, url, errors))
                context.close()
            # The sign-in form's script sends the browser's zone: the reader's.
            context = browser.new_context(viewport={"width": 1280, "height": 900}, timezone_id=READER_ZONE)
            page = context.new_page()
            page.goto(base + "/archive")
            page.fill("input[name=token]", TOKEN)
            with page.expect_navigation():
                page.locator("form button[type=submit], form input[type=submit]").first.click()
            signed_in_at = page.url
            page.close()
            warm = [_visit(context, url, errors) for _ in range(runs)]
            if screenshot is not None:
                page = context.new_page()
                page.goto(url, wait_until="load")
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot))
                page.close()
            context.close()
        finally:
            browser.close()

    def figures(visits: list[dict[str, Any]]) -> dict[str, Any]:
        out = {key: _latency([v[key] for v in visits if v.get(key) is not None])
               for key in ("fcp", "responseStart", "domContentLoaded", "load")}
        out["messages_shown"] = sorted({v["messages"] for v in visits})
        out["html_bytes"] = round(statistics.fmean(v["body"] for v in visits))
        assets: dict[str, Counter[str]] = {}
        durations: dict[str, list[float]] = {}
        for v in visits:
            for a in v["assets"]:
                how = "cache" if a["transfer"] == 0 else ("revalidated" if a["transfer"] < 1000 else "downloaded")
                assets.setdefault(a["name"], Counter())[how] += 1
                durations.setdefault(a["name"], []).append(a["duration"])
        out["assets"] = {k: dict(c) for k, c in assets.items()}
        out["asset_fetch_ms_median"] = {k: round(statistics.median(v), 1) for k, v in durations.items()}
        return out

    asset_headers = {}
    for name in {a["name"] for v in warm + cold for a in v["assets"]}:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", name)
        response = conn.getresponse()
        response.read()
        asset_headers[name] = {h: response.getheader(h) for h in ("Cache-Control", "ETag", "Last-Modified")}
        conn.close()
    result = {"runs": runs, "cold_runs": cold_runs, "signed_in_at": signed_in_at.replace(base, ""),
              "asset_headers": asset_headers,
              "warm": figures(warm), "cold": figures(cold) if cold else None,
              "cold_fcp_ms": [round(v["fcp"], 1) for v in cold], "console_errors": errors[:10],
              "screenshot": str(screenshot.relative_to(ROOT)) if screenshot else None}
    _note("browser", {k: result[k] for k in ("cold_fcp_ms", "console_errors")} | {"warm_fcp": result["warm"]["fcp"]})
    return result


# ------------------------------------------------------------------------------------------------ profile

# What the channel view calls, wrapped by name where it is looked up (a module attribute), so the real view runs
# and its steps are timed however it is arranged today. A name the code no longer has is skipped.
_STEPS = [
    ("api.viewer.slack_pages", "current_reader", "sign-in check"),
    ("api.slack.channels", "id_chain", "read: channel id chain"),
    ("api.slack.channels", "metadata", "channel metadata"),
    ("api.slack.messages", "timeline", "read: timeline page"),
    ("api.viewer.views", "channel_names", "read: channel names (index)"),
    ("api.viewer.views", "reply_counts", "read: reply counts"),
    ("api.viewer.views", "user_names", "user names"),
    ("api.viewer.views", "user_profiles", "read: user profiles"),
    ("api.viewer.views", "message_views", "view-models"),
    ("api.viewer.render", "message_html", "mrkdwn rendering"),
    ("api.viewer.views", "with_days", "day groups"),
    ("api.viewer.slack_pages", "render_template", "Jinja rendering"),
]


class _StepTimer:
    """Wraps the _STEPS functions: per request, each step's own time (its time minus the wrapped steps it called,
    on the request's thread) and its calls."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.current: dict[str, list[float]] = {}  # step -> [own seconds, calls] of the request in progress
        self.undo: list[tuple[Any, str, Any]] = []

    def install(self) -> list[str]:
        import importlib

        missing = []
        for module_name, attr, step in _STEPS:
            module = importlib.import_module(module_name)
            fn = getattr(module, attr, None)
            if fn is None:
                missing.append(f"{module_name}.{attr}")
                continue
            self.undo.append((module, attr, fn))
            setattr(module, attr, self._wrap(fn, step))
        return missing

    def uninstall(self) -> None:
        for module, attr, fn in reversed(self.undo):
            setattr(module, attr, fn)

    def _wrap(self, fn: Any, step: str) -> Any:
        timer = self

        def wrapped(*a: Any, **kw: Any) -> Any:
            stack = timer.local.__dict__.setdefault("stack", [])
            stack.append(0.0)  # time spent in wrapped callees
            started = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                elapsed = time.perf_counter() - started
                inner = stack.pop()
                if stack:
                    stack[-1] += elapsed
                entry = timer.current.setdefault(step, [0.0, 0])
                entry[0] += elapsed - inner
                entry[1] += 1

        return wrapped


def profile_in_process(settings: Settings, keyspace: str, channel_id: str, pages: int) -> dict[str, Any]:
    """The channel page through the Flask test client in this process (one thread, no HTTP server): each step's
    own time per request, then cProfile of `pages` requests (functions by own and by cumulative time)."""
    from api.app import create_app

    tokens = json.dumps({TOKEN: {"workspaces": [TEAM]}})
    app_settings = dataclasses.replace(settings, keyspace=keyspace, api_tokens=tokens, log_level="WARNING")
    db = Database(app_settings)
    app = create_app(app_settings, database=db)
    path = f"/archive/teams/{TEAM}/channels/{channel_id}"
    client = app.test_client()
    client.set_cookie("chronicle_archive", TOKEN, path="/archive")
    client.set_cookie("chronicle_tz", READER_ZONE, path="/archive")
    for _ in range(10):  # prepared statements, templates, emoji table
        if client.get(path).status_code != 200:
            raise RuntimeError("the channel page did not answer 200 in-process")
    timer = _StepTimer()
    missing = timer.install()
    per_step: dict[str, list[float]] = {}
    calls: dict[str, int] = {}
    whole = []
    try:
        for _ in range(pages):
            timer.current = {}
            t = time.perf_counter()
            client.get(path)
            total = time.perf_counter() - t
            whole.append(total * 1000)
            accounted = 0.0
            for step, (own, n) in timer.current.items():
                per_step.setdefault(step, []).append(own * 1000)
                calls[step] = n
                accounted += own
            per_step.setdefault("rest (Flask, hooks, logging, headers)", []).append((total - accounted) * 1000)
    finally:
        timer.uninstall()
    steps = {k: {"median_ms": round(statistics.median(v), 2), "p90_ms": round(_percentile(sorted(v), 0.9), 2),
                 "calls": calls.get(k)} for k, v in per_step.items()}
    cpu0 = time.process_time()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(pages):
        client.get(path)
    profiler.disable()
    cpu_per_page = (time.process_time() - cpu0) * 1000 / pages
    db.close()
    stats = pstats.Stats(profiler)

    def top(by_own: bool, n: int = 25) -> list[tuple[str, float, float]]:
        rows = [(f"{Path(file).parent.name}/{Path(file).name}:{line} {fn} ({nc // pages} calls)", tt, ct)
                for (file, line, fn), (_cc, nc, tt, ct, _callers) in stats.stats.items()]  # type: ignore[attr-defined]
        rows.sort(key=lambda r: -(r[1] if by_own else r[2]))
        return [(name, round(tt * 1000 / pages, 2), round(ct * 1000 / pages, 2)) for name, tt, ct in rows[:n]]

    result = {"pages": pages, "steps_own_ms": steps, "steps_missing": missing,
              "whole_request_ms": _latency(whole),
              "cpu_ms_per_page_under_cprofile": round(cpu_per_page, 2),
              "top_own_ms_per_page [name, own, cumulative]": top(True),
              "top_cumulative_ms_per_page [name, own, cumulative]": top(False, 35)}
    _note(f"profile {channel_id}", {"whole": result["whole_request_ms"], "steps": steps})
    return result


# ------------------------------------------------------------------------------------------------ main

def run(args: argparse.Namespace) -> dict[str, Any]:
    node = local_node()
    settings = scratch_settings(args.keyspace, node=node, request_timeout=60.0)
    result: dict[str, Any] = {"bench": "viewer", "args": vars(args), "cpus": os.cpu_count(),
                              "started": datetime.now(UTC).isoformat(), "others_at_start": others_running(),
                              "loadavg_at_start": os.getloadavg()}
    _note("others at start", result["others_at_start"])
    # What was measured: others edit api/ while benches run, so the tree's state goes with the figures.
    def git(*words: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *words], capture_output=True, text=True).stdout

    result["code"] = {"commit": git("rev-parse", "HEAD").strip(),
                      "modified": git("status", "--short", "api", "gunicorn.conf.py").splitlines()}
    plans = {"threaded": make_plan(args.messages)}
    if args.flat_messages:
        plans["flat"] = make_plan(args.flat_messages, threads=False)
    result["workspace"] = prepare(settings, args.keyspace, plans, refill=args.refill)
    pages = {label: f"/archive/teams/{TEAM}/channels/{plan.channel_id}" for label, plan in plans.items()}
    page_path = pages["threaded"]
    logs = Path(os.environ.get("TMPDIR", "/tmp")) / f"chronicle-bench-viewer-{os.getpid()}"
    (logs / "metrics").mkdir(parents=True, exist_ok=True)
    result["logs"] = str(logs)
    env = {"CHRONICLE_API_TOKENS": json.dumps({TOKEN: {"workspaces": [TEAM]}}),
           # Production defaults: INFO request log (the server time read below) and an access log.
           "CHRONICLE_LOG_LEVEL": "INFO", "CHRONICLE_ACCESS_LOG": str(logs / "access.log"),
           "PYTHONUNBUFFERED": "1", "CHRONICLE_BENCH_WHATIF": args.what_if}
    # An experiment (--what-if) serves the same app with some lookups cached (bench/viewer_whatif.py).
    app = "bench.viewer_whatif:app" if args.what_if else "api.wsgi:app"
    with served(settings, logs, workers=args.workers, threads=args.threads, env=env, app=app,
                app_log="app.log") as srv:
        port, master = srv.port, srv.master
        cookie = sign_in(port)
        workers = _children(master.pid)
        pids = {"gunicorn workers": workers, "cassandra": [node_pid(node)]}
        _MINE.update([master.pid, *workers, *pids["cassandra"]])
        cursors = older_cursors(port, cookie, page_path, limit=200)
        result["older_pages"] = len(cursors)
        older_paths = [f"{page_path}/older?{urlencode({'cursor': c})}" for c in cursors]
        kinds = [("page", [page_path]), ("older", older_paths)]
        if "flat" in pages:
            kinds.append(("page-flat", [pages["flat"]]))
        phases = []
        if not args.skip_load:
            # Untimed: every worker's session, prepared statements and compiled templates.
            run_load("warmup", port, cookie, [p for _k, paths in kinds for p in paths], 30 * args.workers, 8, pids,
                     logs, args.load_procs)
            spy = None
            for c in args.concurrency:
                for kind, paths in kinds:
                    if args.py_spy and c == max(args.concurrency) and kind == "page":
                        spy = py_spy(workers[0], args.py_spy, logs / "py-spy.txt")
                    phases.append(run_load(f"{kind}-c{c}", port, cookie, paths, args.requests, c, pids, logs,
                                           args.load_procs, args.wait_quiet))
            if spy is not None:
                _out, err = spy.communicate(timeout=args.py_spy + 60)
                spy_file = logs / "py-spy.txt"
                result["py_spy"] = (py_spy_summary(spy_file) if spy_file.exists()
                                    else {"error": err.decode(errors="replace")[-500:]})
        result["phases"] = phases
        if not args.skip_browser:
            if args.wait_quiet:
                wait_quiet(args.wait_quiet)
            shot = ROOT / "test-artifacts" / "bench-viewer-channel.png" if args.screenshot else None
            result["browser"] = {label: browser_runs(port, path, args.fcp_runs, args.cold_runs,
                                                     shot if label == "threaded" else None)
                                 for label, path in pages.items()}
    if args.profile:
        if args.wait_quiet:
            wait_quiet(args.wait_quiet)
        result["profile"] = {label: profile_in_process(settings, args.keyspace, plan.channel_id, args.profile_pages)
                             for label, plan in plans.items()}
    result["others_at_end"] = others_running()
    result["loadavg_at_end"] = os.getloadavg()
    result["verdict"] = verdict(result)
    _table(result)
    return result


def verdict(result: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if result["phases"]:
        out["every answer 200"] = all(p["ok"] == p["requests"] for p in result["phases"])
    for p in result["phases"]:
        if p["concurrency"] == 8 and p["phase"].startswith("page"):
            out[f"{p['phase']}: server p99 <= 30 ms (app log)"] = p["server_app"].get("p99_ms", 1e9) <= 30
    for label, b in (result.get("browser") or {}).items():
        out[f"{label}: FCP p90 <= 500 ms (warm)"] = b["warm"]["fcp"].get("p90_ms", 1e9) <= 500
        out[f"{label}: FCP max <= 500 ms (warm)"] = b["warm"]["fcp"].get("max_ms", 1e9) <= 500
        if b["cold"]:
            out[f"{label}: FCP max <= 500 ms (cold)"] = b["cold"]["fcp"].get("max_ms", 1e9) <= 500
    return out


def _table(result: dict[str, Any]) -> None:
    lines = ["", "| phase | c | req/s | client p50/p90/p99 ms | server (app log) p50/p90/p99 ms | "
                 "gunicorn p50/p99 ms | worker CPU ms/req | node CPU ms/req | msgs/page | other load |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for p in result["phases"]:
        c, s, g, cpu = p["client"], p["server_app"], p["server_gunicorn"], p["cpu_ms_per_request"]
        lines.append(f"| {p['phase']} | {p['concurrency']} | {p['per_second']} | "
                     f"{c.get('p50_ms')} / {c.get('p90_ms')} / {c.get('p99_ms')} | "
                     f"{s.get('p50_ms')} / {s.get('p90_ms')} / {s.get('p99_ms')} | "
                     f"{g.get('p50_ms')} / {g.get('p99_ms')} | "
                     f"{cpu.get('gunicorn workers')} | {cpu.get('cassandra')} | {p['messages_per_page']} | "
                     f"{p['other_load_share']:.0%} |")
    for page, b in (result.get("browser") or {}).items():
        for label in ("warm", "cold"):
            fig = b.get(label)
            if fig:
                f, r, d, load = fig["fcp"], fig["responseStart"], fig["domContentLoaded"], fig["load"]
                lines.append(f"browser, {page} channel, {label} ({f['count']} runs, {fig['messages_shown']} messages): "
                             f"FCP p50 {f.get('p50_ms')} / "
                             f"p90 {f.get('p90_ms')} / max {f.get('max_ms')} ms; "
                             f"responseStart p50 {r.get('p50_ms')}, DCL p50 {d.get('p50_ms')}, "
                             f"load p50 {load.get('p50_ms')} ms; assets {fig['assets']}")
        lines.append(f"console errors: {len(b['console_errors'])}")
    for page, prof in (result.get("profile") or {}).items():
        lines.append(f"in-process, {page} channel: whole request p50 {prof['whole_request_ms'].get('p50_ms')} ms; "
                     "own time per step (median ms): " + ", ".join(
                         f"{k} {v['median_ms']}" for k, v in prof["steps_own_ms"].items()))
    if result["args"].get("what_if"):
        lines.append(f"EXPERIMENT (--what-if {result['args']['what_if']}): not the app as it is")
    lines.append(f"verdict: {result['verdict']}")
    print("\n".join(lines), file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keyspace", default="chronicle_bench_viewer", help="kept between runs (resumable fill)")
    parser.add_argument("--messages", type=int, default=2000, help="top-level messages of the channel")
    parser.add_argument("--flat-messages", type=int, default=600,
                        help="messages of a second channel without threads (every page shows 50); 0: none")
    parser.add_argument("--refill", action="store_true", help="write the workspace again even if complete")
    parser.add_argument("--requests", type=int, default=400, help="requests per phase")
    parser.add_argument("--concurrency", default="1,8", help="comma-separated client concurrencies")
    parser.add_argument("--load-procs", type=int, default=2, help="load-generator processes (threads split)")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers (gunicorn.conf.py default)")
    parser.add_argument("--threads", type=int, default=8, help="gunicorn threads per worker (gunicorn.conf.py)")
    parser.add_argument("--fcp-runs", type=int, default=30, help="warm browser navigations")
    parser.add_argument("--cold-runs", type=int, default=3, help="cold browser navigations (fresh contexts)")
    parser.add_argument("--screenshot", action="store_true", help="save test-artifacts/bench-viewer-channel.png")
    parser.add_argument("--what-if", default="", help="an experiment, not the app as it is: 'names', 'channels' "
                        "or both, comma-separated: those lookups cached per process (bench/viewer_whatif.py)")
    parser.add_argument("--wait-quiet", type=float, default=0.0, help="before each phase, wait up to this many "
                        "seconds for the machine to be quiet (< 15%% busy): others share it")
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument("--skip-browser", action="store_true")
    parser.add_argument("--profile", action="store_true", help="in-process step timings and cProfile")
    parser.add_argument("--profile-pages", type=int, default=100)
    parser.add_argument("--py-spy", type=float, default=0.0, help="seconds of py-spy on one worker at top c")
    args = parser.parse_args(argv)
    args.concurrency = [int(c) for c in str(args.concurrency).split(",") if c]
    configure_logging("WARNING", stream=sys.stderr)
    # A SIGTERM unwinds like an exception, so the gunicorn this run started is stopped too (not left orphaned).
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))
    write_result("viewer-whatif" if args.what_if else "viewer", run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
