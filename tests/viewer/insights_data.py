"""Data of the network and report pages' tests, put in through the real paths, and what the pages must show,
decided independently of the code under test.

The network: a small generated network cleaned and loaded by the loader (tests/network/helpers.py `load_net`,
with its brute-force Reference), then REST writes with the admin token: 30 more posts of one account (one of them
hostile text), three rankings snapshots with follows and unfollows in between (an account climbs, one falls).
The Reference follows every write, and answers Q1/Q2/Q3/Q4/Q6 by looking at everything.

The reports: a workspace filled through signed Events API requests (2 public channels, one converted to private,
two users), reports generated through the report service (one counting private channels), and the message counts
each report must show, from the plan.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Any

from api.db import Database
from api.network import cleaning, generator, job_handlers, jobs
from api.network.settings import network_settings
from api.network.tokens import index_terms
from api.slack.reports import service
from api.slack.reports.period import Period
from tests.helpers import ADMIN_TOKEN, TEST_API_TOKENS
from tests.network.helpers import load_net
from tests.network.reference import Reference
from tests.slack.helpers import channel_event, created, msg, post_event, reaction

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
HOSTILE_POST = "<script>alert('post')</script> <img src=x onerror=\"alert('img')\"> zebraquux & <b>bold</b>"
ADDED_POSTS = 30


@dataclasses.dataclass
class NetworkData:
    name: str
    ref: Reference
    author: int  # the account with the most posts (30 more written through REST)
    hostile_post: int
    reader: int  # the account following the most accounts: the home timeline shown
    climber: int  # gained followers between the first and the second snapshot
    faller: int  # lost followers between the second and the third
    snapshots: list[dict[str, list[tuple[int, int]]]]  # oldest first: {accounts: Q2, followers: Q3} as the
    # Reference computed them when each snapshot was taken
    word: str  # a word some posts hold

    @property
    def cap(self) -> int:
        return network_settings().cache_cap


def build_network(client, db: Database, directory: Path) -> NetworkData:
    """Generate, clean and load a network, then write posts, snapshots and follows through the REST API."""
    edges, posts = generator.generate(directory / "raw", accounts=80, edges=900, posts=300, seed=29)
    clean = directory / "clean"
    cleaning.clean_relations(edges, posts, clean)
    cleaning.clean_posts(posts, clean / "accounts.csv", clean, like_rate=0.01, seed=29)
    net = load_net(db, (edges, posts, clean))
    name, ref = net.name, net.ref

    by_author = collections.Counter(p["author_id"] for p in ref.posts.values())
    author = max(sorted(by_author), key=lambda a: by_author[a])
    hostile = 0
    for i in range(ADDED_POSTS):
        content = HOSTILE_POST if i == ADDED_POSTS - 3 else f"archive note {i} from the viewer tests"
        posted_at = dt.datetime(2026, 6, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=7 * i)
        r = client.post(f"/networks/{name}/posts", headers=ADMIN,
                        json={"author_id": author, "content": content, "posted_at": posted_at.isoformat()})
        assert r.status_code == 201, r.json
        ref.add_post(r.json["post"]["post_id"], author, posted_at, content)
        if content == HOSTILE_POST:
            hostile = r.json["post"]["post_id"]

    snapshots = []

    def snapshot() -> None:
        snapshots.append({"accounts": ref.q2(100), "followers": ref.q3(100)})
        queued = client.post(f"/networks/{name}/rankings", headers=ADMIN)
        assert queued.status_code == 202  # a queued job
        # What `chronicle network worker` does with it, run here directly: the queue's shards may be leased by a
        # worker of another test (up to 60 s: this fixture once waited that long); a later worker finds it done.
        job_handlers.run_job(db, name, jobs.RANKINGS, queued.json["job_id"])

    snapshot()
    # The 8th most followed gains followers from accounts that did not follow it: it climbs in the next snapshot.
    climber = snapshots[-1]["accounts"][7][0]
    newcomers = sorted(a for a in ref.usernames if a != climber and (a, climber) not in ref.edges)[:15]
    for follower in newcomers:
        r = client.put(f"/networks/{name}/accounts/{follower}/follows/{climber}", headers=ADMIN)
        assert r.status_code == 200 and r.json["changed"], r.json
        ref.follow(follower, climber)
    snapshot()
    # The 3rd most followed loses followers: it falls in the last snapshot.
    faller = snapshots[-1]["accounts"][2][0]
    for follower in sorted(ref.followers(faller))[:12]:
        r = client.delete(f"/networks/{name}/accounts/{follower}/follows/{faller}", headers=ADMIN)
        assert r.status_code == 200 and r.json["changed"], r.json
        ref.unfollow(follower, faller)
    snapshot()

    follows = collections.Counter(a for a, _ in ref.edges)
    reader = max(sorted(follows), key=lambda a: follows[a])
    # The word most posts hold (more than a page of them), the same every run.
    held = collections.Counter(t for p in ref.posts.values() for t in index_terms(p["content"]))
    word = min((t for t in held if t.isalpha() and len(t) >= 4), key=lambda t: (-held[t], t))
    return NetworkData(name, ref, author, hostile, reader, climber, faller, snapshots, word)


# -- reports ---------------------------------------------------------------------------------------------------

REPORT_BASE = int(dt.datetime(2026, 3, 1, tzinfo=dt.UTC).timestamp())
PUBLIC_REPORT = "2026-03-01-7"  # counts public channels: 3 messages a day
PRIVATE_REPORT = "2026-02-22-7"  # counts private channels too: 2 public + 1 private message a day
DAY_REPORTS = [f"2026-02-{d:02d}-1" for d in range(1, 27)]  # one-day reports: more than a page of the list


@dataclasses.dataclass
class ReportData:
    team: str
    tokens: dict[str, dict[str, Any]]
    private_token: str  # the workspace, private channels too
    public_token: str  # the workspace, public channels only
    other_token: str  # another workspace
    messages: dict[str, int]  # report id -> messages it counts (from the plan)
    names: tuple[str, ...]  # user display names in the reports


def report_tokens(team: str) -> dict[str, dict[str, Any]]:
    return {f"reports-private-{team}": {"workspaces": [team], "private": True},
            f"reports-public-{team}": {"workspaces": [team], "private": False},
            f"reports-other-{team}": {"workspaces": ["TNOTTHISONE"], "private": True}}


def new_report_team() -> str:
    return f"TR{uuid.uuid4().hex[:10].upper()}"


def api_tokens(team: str) -> str:
    return json.dumps({**TEST_API_TOKENS, **report_tokens(team)})


def _ts(day: int, second: int) -> str:
    return f"{REPORT_BASE + day * 86400 + second}.000100"


def fill_reports(client, db: Database, team: str) -> ReportData:
    """Two weeks of messages through the Events API (public channels: 2 a day in the week of 2026-02-22, 3 a day
    in the week of 2026-03-01; the private channel: 1 a day in the first week), then the reports."""
    chans = {"CRPGENERAL": "general", "CRPRANDOM": "random", "CRPSECRET": "secret-plans"}
    for i, (channel, name) in enumerate(chans.items()):
        assert post_event(client, team, created(channel, name, _ts(-30, i))).status_code == 200
    assert post_event(client, team, channel_event("channel_convert_to_private", "CRPSECRET",
                                                  _ts(-29, 0))).status_code == 200
    for user, tz in (("URA", "Europe/Berlin"), ("URB", "America/New_York")):
        assert post_event(client, team, {"type": "team_join", "event_ts": _ts(-20, 0), "user": {
            "id": user, "name": user.lower(), "tz": tz, "tz_offset": 0, "updated": REPORT_BASE - 20 * 86400,
            "profile": {"display_name": f"reader-{user}"}}}).status_code == 200
    public_per_day = collections.Counter()
    for day in range(-7, 7):
        for k, (channel, user) in enumerate((("CRPGENERAL", "URA"), ("CRPRANDOM", "URB"), ("CRPGENERAL", "URB"))):
            if day < 0 and k == 2:
                continue
            ts = _ts(day, 3600 * (9 + k))
            r = post_event(client, team, msg(channel, ts, f"day {day} message {k}", user=user))
            assert r.status_code == 200 and r.json["outcome"] == "stored", r.json
            public_per_day[day] += 1
            assert post_event(client, team, reaction("added", channel, ts, "tada", "URA" if k else "URB",
                                                     at=_ts(day, 3600 * (9 + k) + 5))).status_code == 200
        if day < 0:
            event = msg("CRPSECRET", _ts(day, 3600 * 15), f"secret day {day}", user="URA")
            event["channel_type"] = "group"  # what Slack sends once the channel is private
            r = post_event(client, team, event)
            assert r.status_code == 200 and r.json["outcome"] == "stored", r.json

    def counted(period: Period, private: bool) -> int:
        days = [(period.start - dt.date(2026, 3, 1)).days + i for i in range(period.days)]
        return sum(public_per_day[d] + (1 if private and -7 <= d < 0 else 0) for d in days)

    messages = {}
    for report_id, private in [(PUBLIC_REPORT, False), (PRIVATE_REPORT, True)] + [(d, False) for d in DAY_REPORTS]:
        period = Period.parse_id(report_id)
        service.generate(db, team, period, include_private=private)
        messages[report_id] = counted(period, private)
    tokens = report_tokens(team)
    names = tuple(tokens)
    return ReportData(team, tokens, names[0], names[1], names[2], messages, ("reader-URA", "reader-URB"))


def chart_expectation(snapshots: list[dict[str, list[tuple[int, int]]]], kind: str
                      ) -> tuple[list[int], list[tuple[str, int]], int]:
    """What a ranking's history chart must draw: the latest snapshot's first ten accounts, a point (account,
    value) for each snapshot that ranks the account, and a line for each run of two or more consecutive
    snapshots ranking it."""
    top10 = [a for a, _ in snapshots[-1][kind][:10]]
    ranked = [dict(s[kind]) for s in snapshots]
    points = [(str(a), r[a]) for a in top10 for r in ranked if a in r]
    lines = 0
    for a in top10:
        run = 0
        for r in ranked + [{}]:
            if a in r:
                run += 1
                continue
            lines += run >= 2
            run = 0
    return top10, points, lines
