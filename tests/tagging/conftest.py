"""Tagging fixtures: archived network posts to make projects from, and projects with people."""

from __future__ import annotations

import dataclasses
import itertools
import time
from datetime import UTC, datetime, timedelta

import pytest

from api.db import Database, set_db
from api.network import posts
from api.network.values import Post
from api.tagging import service, worker
from tests.clocks import ManualClock

_ids = itertools.count(1)


@dataclasses.dataclass
class Made:
    project: str
    network: str
    post_ids: list[int]
    tokens: dict[str, str]


def archive_posts(db, network: str, author: int, count: int, text: str = "post {i}") -> list[int]:
    """Archive `count` posts of one author (one a minute from 2026-01-01), returning their ids in time order."""
    base = datetime(2026, 1, 1, tzinfo=UTC)
    made = [Post(author * 1_000_000 + i, author, base + timedelta(minutes=i), f"user{author}",
                 content=text.format(i=i)) for i in range(count)]
    db.execute_many(w for p in made for w in posts.post_writes(network, p))
    return [p.post_id for p in made]


@pytest.fixture
def clocked_db(settings, db, app):
    """A Database of the test's own on a ManualClock (`clocked_db.clock.advance(s)`), installed as the app's
    (api/context.py) and the process's for the test: leases, expiry, checkpoints and cache ages move when the
    test advances it, and its caches start empty. The clock starts at the real time: the project a test makes
    with it is then stamped in the same range as what the run's other Databases write in the keyspace, and so
    read by the same ranges."""
    from api.context import EXTENSION, Context

    database = Database(settings, clock=ManualClock(start=time.time()))
    previous = app.extensions[EXTENSION]
    app.extensions[EXTENSION] = Context(previous.settings, database)
    set_db(database)
    try:
        yield database
    finally:
        set_db(db)
        app.extensions[EXTENSION] = previous
        database.close()


@pytest.fixture
def make_project(db):
    """make_project(items=10, teams={"red": None}, people={"ann": ("red", "tagger")}, database=db, **options)
    -> Made. `database` (clocked_db) stamps the project with its clock: a test on a ManualClock passes it."""

    def make(items: int = 10, teams: dict | None = None, people: dict | None = None, database: Database = db,
             **options) -> Made:
        n = next(_ids)
        network, project = f"tagnet{n}", f"proj{n}_{datetime.now().strftime('%H%M%S%f')}"
        ids = archive_posts(database, network, 7, items)
        teams = teams if teams is not None else {"red": None}
        source = {"kind": "network", "network": network, "authors": [7]}
        service.create_project(database, project, f"Project {n}", source,
                               options.pop("categories", ["news", "sport", "other"]),
                               options.pop("subcategories", ["local", "world"]), teams=teams, **options)
        people = people if people is not None else {"ann": ("red", "tagger"), "bob": ("red", "tagger"),
                                                     "quinn": ("red", "qa"), "ada": ("red", "admin")}
        tokens = {user: service.add_member(database, project, user, team, role)
                  for user, (team, role) in people.items()}
        worker.run_once(database, project)
        return Made(project, network, ids, tokens)

    return make
