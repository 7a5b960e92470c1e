"""Follower-network writes under faults: a network with one author followed by N accounts (10,000 by default),
posts by that author fanned out to every follower's home cache, follows and likes, all through the REST API,
and the check afterwards (reads at QUORUM, the reconcile job, every follower's home page through REST).

The author stays below the hybrid threshold (CHRONICLE_NETWORK_HYBRID_THRESHOLD is set above the follower
count), so every post takes the fan-out path the suite is about. Half of the followers (by default) have a
home cache built before the run, so their home page comes from the cache the fan-out wrote; the others' is
built on their first read, from the author's posts.

What a client does on a failure: follows and likes are PUTs, idempotent by design, retried after a 5xx,
a timeout or a dropped connection (up to 3 times). A new post is a POST carrying an Idempotency-Key of its own,
sent again with every retry: a retry after a lost answer writes that same post again (or answers what the first
attempt answered), never a second one. The suite counts the copies all the same: each post's content is
unique, so a second stored post with the same content is a duplicate.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import random
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from api.db import Database
from api.network import accounts, home, likes, loader, posts, relations
from api.network.relations import FOLLOWER, FOLLOWS
from api.network.settings import NetworkSettings, set_network_settings
from bench.faults_common import ADMIN_TOKEN, Attempt, Client, Phases, Scheduler, log
from bench.scale_common import BIN, ROOT

AUTHOR = 1
FOLLOWERS0 = 1_000_000  # follower i is FOLLOWERS0 + i
SPARE0 = 2_000_000  # accounts that start following the author during the run
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"}
RETRY_DELAYS = (1.0, 3.0, 9.0)
PAGE_SIZE = 25  # CHRONICLE_NETWORK_PAGE_SIZE default: posts on a home page


def threshold_for(followers: int, spare: int) -> int:
    """A hybrid threshold above any count the author can reach: the author is always fanned out."""
    return max(10_000, 2 * (followers + spare + 1))


@dataclasses.dataclass
class Network:
    name: str
    followers: list[int]
    spare: list[int]
    prebuilt: set[int]


def setup(db: Database, name: str, followers: int, spare: int, workdir: Path, *, prebuild: float = 0.5,
          seed: int = 3) -> Network:
    """Accounts and relations through the project's loader (cleaned CSV files), then home caches of a fraction
    of the followers built as a first read would build them."""
    set_network_settings(dataclasses.replace(NetworkSettings.from_env(),
                                             hybrid_threshold=threshold_for(followers, spare)))
    workdir.mkdir(parents=True, exist_ok=True)
    follower_ids = [FOLLOWERS0 + i for i in range(followers)]
    spare_ids = [SPARE0 + i for i in range(spare)]
    with (workdir / "accounts.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["account_id", "username", "follower_count", "follows_count"])
        w.writerow([AUTHOR, f"u{AUTHOR}", followers, 0])
        for a in follower_ids:
            w.writerow([a, f"u{a}", 0, 1])
        for a in spare_ids:
            w.writerow([a, f"u{a}", 0, 0])
    with (workdir / "relations.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["account_id", "username", "rel_type", "target_id", "target_username"])
        for a in follower_ids:
            w.writerow([a, f"u{a}", FOLLOWS, AUTHOR, f"u{AUTHOR}"])
            w.writerow([AUTHOR, f"u{AUTHOR}", FOLLOWER, a, f"u{a}"])
    started = time.monotonic()
    loader.load(db, "accounts", name, workdir / "accounts.csv")
    loader.load(db, "relations", name, workdir / "relations.csv")
    rng = random.Random(seed)
    prebuilt = set(rng.sample(follower_ids, int(len(follower_ids) * prebuild)))
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda a: home.build_cache(db, name, a), sorted(prebuilt)))
    log(f"network {name}: {followers} followers, {spare} spare accounts, {len(prebuilt)} caches built "
        f"in {time.monotonic() - started:.0f} s")
    return Network(name, follower_ids, spare_ids, prebuilt)


@dataclasses.dataclass(eq=False)
class Op:
    """One write as the client sent it: all its attempts, and whether one was acknowledged."""

    kind: str  # post | follow | like
    a: int  # post: author; follow: follower; like: liker
    b: int = 0  # follow: followee; like: post id
    content: str = ""
    key: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex)  # a post's Idempotency-Key
    post_id: int | None = None  # a post, from its acknowledgement
    fanned_out_to: int | None = None
    attempts: list[Attempt] = dataclasses.field(default_factory=list)
    acked: bool = False
    gave_up: bool = False
    phase_sent: str = ""
    on_sent: Callable[[int], None] | None = None  # told the local port once the first attempt is on the wire


class NetworkTraffic:
    """Posts by the author, follows (spare accounts of the author, followers of each other) and likes of
    acknowledged posts by followers; each follow and like pair used once."""

    def __init__(self, net: Network, client: Client, scheduler: Scheduler, phases: Phases, *, seed: int = 5,
                 post_timeout: float = 60.0, timeout: float = 10.0, run_tag: str = "") -> None:
        self.net, self.client, self.scheduler, self.phases = net, client, scheduler, phases
        self.rng = random.Random(seed)
        self.post_timeout, self.timeout, self.run_tag = post_timeout, timeout, run_tag
        self.ops: list[Op] = []
        self.attempts: list[Attempt] = []
        self.lock = threading.Lock()
        self.spare_left = list(net.spare)
        self.rng.shuffle(self.spare_left)
        self.pairs: set[tuple[int, int]] = set()
        self.acked_posts: list[int] = []
        self.posts_sent = 0

    # -- what is sent ------------------------------------------------------------------------------------------
    def post(self, due: float, on_sent: Callable[[int], None] | None = None) -> Op:
        with self.lock:
            self.posts_sent += 1
            content = f"fault post {self.run_tag} {self.posts_sent} {self.rng.getrandbits(48):012x}"
            op = Op("post", AUTHOR, content=content, on_sent=on_sent)
            self.ops.append(op)
        self._send(op, due)
        return op

    def follow(self, due: float) -> None:
        with self.lock:
            if self.spare_left and self.rng.random() < 0.5:
                pair = (self.spare_left.pop(), AUTHOR)
            else:
                pair = tuple(self.rng.sample(self.net.followers, 2))
                if pair in self.pairs:
                    return
            self.pairs.add(pair)
            op = Op("follow", *pair)
            self.ops.append(op)
        self._send(op, due)

    def like(self, due: float) -> None:
        with self.lock:
            if not self.acked_posts:
                return
            pair = (self.rng.choice(self.net.followers), self.rng.choice(self.acked_posts))
            if ("like", *pair) in self.pairs:
                return
            self.pairs.add(("like", *pair))
            op = Op("like", *pair)
            self.ops.append(op)
        self._send(op, due)

    def _send(self, op: Op, due: float) -> None:
        op.phase_sent = self.phases.at(due)
        self.scheduler.at(due, lambda _lag: self._attempt(op, 0))

    def _attempt(self, op: Op, retry: int) -> None:
        net = self.net.name
        if op.kind == "post":
            body = json.dumps({"author_id": op.a, "content": op.content}).encode()
            attempt, data = self.client.request("network:post", "POST", f"/networks/{net}/posts", body=body,
                                                headers=ADMIN | {"Idempotency-Key": op.key},
                                                timeout=self.post_timeout, retry=retry,
                                                on_sent=op.on_sent if retry == 0 else None)
        elif op.kind == "follow":
            attempt, data = self.client.request("network:follow", "PUT",
                                                f"/networks/{net}/accounts/{op.a}/follows/{op.b}",
                                                headers=ADMIN, timeout=self.timeout, retry=retry)
        else:
            attempt, data = self.client.request("network:like", "PUT", f"/networks/{net}/posts/{op.b}/likes/{op.a}",
                                                headers=ADMIN, timeout=self.timeout, retry=retry)
        op.attempts.append(attempt)
        self.attempts.append(attempt)
        if attempt.ok:
            op.acked = True
            if op.kind == "post":
                answer = json.loads(data)
                op.post_id, op.fanned_out_to = answer["post"]["post_id"], answer["fanned_out_to"]
                with self.lock:
                    self.acked_posts.append(op.post_id)
            return
        retryable = attempt.status is None or attempt.status >= 500
        if not retryable or retry >= len(RETRY_DELAYS):
            op.gave_up = True
            return
        self.scheduler.at(time.monotonic() + RETRY_DELAYS[retry], lambda _lag: self._attempt(op, retry + 1))


# ------------------------------------------------------------------------------------------------ checks

def reconcile(env: dict[str, str], network: str, accounts: list[int], post_ids: list[int], *,
              dry_run: bool) -> dict[str, Any]:
    """`chronicle network reconcile` as an operator runs it (the service's default consistency levels)."""
    cmd = [str(BIN / "chronicle"), "network", "reconcile", "--network", network,
           *(f"--account-id={a}" for a in accounts), *(f"--post-id={p}" for p in post_ids)]
    if dry_run:
        cmd.append("--dry-run")
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    out: dict[str, Any] = {"exit": done.returncode, "seconds": round(time.monotonic() - started, 1)}
    if done.returncode == 0:
        report = json.loads(done.stdout)
        out.update(accounts_checked=report["accounts_checked"], accounts_repaired=len(report["accounts_repaired"]),
                   posts_repaired=len(report["posts_repaired"]))
    else:
        out["stderr"] = done.stderr[-800:]
    return out


def _likers(db: Database, network: str, post_id: int) -> set[int]:
    # The owner's own statement (api/network/likes.py): who liked the post, the whole partition.
    return {r.user_id for r in db.execute(likes.LIKERS, (network, post_id), fetch_size=5000, timeout=60)}


def verify_writes(db: Database, traffic: NetworkTraffic, *, examples: int = 8) -> dict[str, Any]:
    """Posts, follows and likes against the model (db: reads at QUORUM); counts are checked by `verify_counts`
    after the reconcile job."""
    net = traffic.net.name
    problems: dict[str, list[str]] = {"lost": [], "duplicates": [], "half_written": [], "unexpected": []}
    ops = traffic.ops
    post_ops = [o for o in ops if o.kind == "post"]
    stored = posts.posts_of_author(db, net, AUTHOR, 10_000)
    by_content = Counter(p.content for p in stored)
    sent_contents = {o.content: o for o in post_ops}
    stored_ids = {p.post_id for p in stored}
    for content, n in by_content.items():
        if content not in sent_contents:
            problems["unexpected"].append(f"post {content!r} was never sent")
        elif n > 1:
            op = sent_contents[content]
            problems["duplicates"].append(f"post {content!r} stored {n} times ({len(op.attempts)} attempts, "
                                          f"outcomes {[a.outcome for a in op.attempts]})")
    for op in post_ops:
        if op.acked and op.post_id not in stored_ids:
            problems["lost"].append(f"post {op.post_id} ({op.content!r}) acknowledged, not among the author's posts")
    for p in stored:
        if posts.get_post(db, net, p.post_id) is None:
            problems["half_written"].append(f"post {p.post_id}: in posts_by_author, not in posts_by_id")
    acked_ids = {o.post_id for o in post_ops if o.acked}
    orphans = [p for p in stored if p.post_id not in acked_ids]

    # Follows: both rows, for each pair sent.
    follower_sets: dict[int, set[int]] = {}
    follows_sets: dict[int, set[int]] = {}

    def followers_of(b: int) -> set[int]:
        if b not in follower_sets:
            follower_sets[b] = set(relations.ids(db, net, b, FOLLOWER))
        return follower_sets[b]

    def follows_of(a: int) -> set[int]:
        if a not in follows_sets:
            follows_sets[a] = set(relations.ids(db, net, a, FOLLOWS))
        return follows_sets[a]

    for op in (o for o in ops if o.kind == "follow"):
        forward, backward = op.b in follows_of(op.a), op.a in followers_of(op.b)
        if op.acked and not (forward and backward):
            problems["lost"].append(f"follow {op.a}->{op.b} acknowledged; follows row {forward}, follower row "
                                    f"{backward}")
        elif forward != backward:
            problems["half_written"].append(f"follow {op.a}->{op.b} (unacknowledged, gave up): follows row "
                                            f"{forward}, follower row {backward}")
    # Likes: both rows.
    likers = {p: _likers(db, net, p) for p in sorted(stored_ids)}
    liked_by: dict[int, set[int]] = {}
    for op in (o for o in ops if o.kind == "like"):
        if op.a not in liked_by:
            liked_by[op.a] = {r["post_id"] for r in likes.likes_of_user(db, net, op.a, 10_000)}
        by_post, by_user = op.a in likers.get(op.b, set()), op.b in liked_by[op.a]
        if op.acked and not (by_post and by_user):
            problems["lost"].append(f"like {op.a}->{op.b} acknowledged; likes_by_post {by_post}, likes_by_user "
                                    f"{by_user}")
        elif by_post != by_user:
            problems["half_written"].append(f"like {op.a}->{op.b} (unacknowledged): likes_by_post {by_post}, "
                                            f"likes_by_user {by_user}")
    kinds = Counter(o.kind for o in ops)
    return {
        "ops_sent": dict(kinds), "acknowledged": dict(Counter(o.kind for o in ops if o.acked)),
        "never_acknowledged": dict(Counter(o.kind for o in ops if o.gave_up)),
        "unresolved": sum(1 for o in ops if not o.acked and not o.gave_up),
        "posts_stored": len(stored), "posts_stored_unacknowledged": len(orphans),
        "lost": len(problems["lost"]), "duplicates": len(problems["duplicates"]),
        "half_written": len(problems["half_written"]), "unexpected": len(problems["unexpected"]),
        "examples": {k: v[:examples] for k, v in problems.items() if v},
        "_stored": stored, "_orphans": orphans,
    }


def touched_accounts(traffic: NetworkTraffic) -> list[int]:
    out = {AUTHOR}
    for op in traffic.ops:
        if op.kind == "follow":
            out.update((op.a, op.b))
    return sorted(out)


def verify_counts(db: Database, traffic: NetworkTraffic, stored: list[Any], *, examples: int = 8) -> dict[str, Any]:
    """After the reconcile job: every touched account's follower/follows counter equals its relation rows, and
    every post's like counter (and the count published on the post) equals its likes_by_post rows (QUORUM)."""
    net = traffic.net.name
    wrong: list[str] = []
    ids = touched_accounts(traffic)
    counters = {}
    for i in range(0, len(ids), 200):
        counters.update(accounts.fresh_counts(db, net, ids[i:i + 200]))
    for a in ids:
        true = (relations.count(db, net, a, FOLLOWER), relations.count(db, net, a, FOLLOWS))
        if counters[a] != true:
            wrong.append(f"account {a}: counters {counters[a]}, relation rows {true}")
    post_ids = [p.post_id for p in stored]
    published = posts.like_counts(db, net, post_ids)
    for p in post_ids:
        true = len(_likers(db, net, p))
        counter = likes.count(db, net, p)
        if counter != true or published.get(p) != true:
            wrong.append(f"post {p}: like counter {counter}, shown on the post {published.get(p)}, likes {true}")
    return {"accounts_checked": len(ids), "posts_checked": len(post_ids), "wrong_counts": len(wrong),
            "examples": wrong[:examples]}


def verify_homes(port: int, network: str, followers: list[int], stored: list[Any], acked_ids: set[int],
                 prebuilt: set[int], *, concurrency: int = 12) -> dict[str, Any]:
    """Every follower's home page (Q4 through REST, the default LOCAL_ONE reads) against the author's newest
    stored posts: the acknowledged ones among them must all be shown."""
    expected = sorted(stored, key=lambda p: (p.posted_at, p.post_id), reverse=True)[:PAGE_SIZE]
    expected_ids = {p.post_id for p in expected}
    want_acked = expected_ids & acked_ids
    want_orphans = expected_ids - acked_ids
    client = Client(port)
    results: dict[int, tuple[int | None, set[int], bool]] = {}

    def read(account: int) -> None:
        attempt, data = client.request("read:home", "GET", f"/networks/{network}/accounts/{account}/home",
                                       timeout=30.0)
        if attempt.ok:
            body = json.loads(data)
            results[account] = (attempt.status, {p["post_id"] for p in body["posts"]}, body.get("cache_rebuilt"))
        else:
            results[account] = (attempt.status, set(), False)

    started = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(read, followers))
    seconds = time.monotonic() - started
    missing_acked = {a: want_acked - shown for a, (_s, shown, _r) in results.items() if want_acked - shown}
    missing_orphan = Counter(p for _a, (_s, shown, _r) in results.items() for p in want_orphans - shown)
    failed = Counter(str(s) for s, _shown, _r in results.values() if s != 200)
    return {
        "followers_read": len(results), "seconds": round(seconds, 1), "reads_per_s": round(len(results) / seconds, 1),
        "non_200": dict(failed), "posts_expected": len(expected_ids), "acknowledged_expected": len(want_acked),
        "followers_missing_acknowledged": len(missing_acked),
        "followers_missing_acknowledged_cached": sum(1 for a in missing_acked if a in prebuilt),
        "cache_rebuilt_by_read": sum(1 for _s, _shown, r in results.values() if r),
        "unacknowledged_posts_shown_to": {str(p): len(results) - missing_orphan.get(p, 0) for p in want_orphans},
        "_missing": sorted(missing_acked),
    }
