"""Tagging fixtures: archived network posts to make projects from, and projects with people."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime, timedelta

import pytest

from api.network import posts
from api.network.values import Post
from api.tagging import service, worker

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
def make_project(db):
    """make_project(items=10, teams={"red": None}, people={"ann": ("red", "tagger")}, **options) -> Made."""

    def make(items: int = 10, teams: dict | None = None, people: dict | None = None, **options) -> Made:
        n = next(_ids)
        network, project = f"tagnet{n}", f"proj{n}_{datetime.now().strftime('%H%M%S%f')}"
        ids = archive_posts(db, network, 7, items)
        teams = teams if teams is not None else {"red": None}
        service.create_project(db, project, f"Project {n}", {"kind": "network", "network": network, "authors": [7]},
                               options.pop("categories", ["news", "sport", "other"]),
                               options.pop("subcategories", ["local", "world"]), teams=teams, **options)
        people = people if people is not None else {"ann": ("red", "tagger"), "bob": ("red", "tagger"),
                                                     "quinn": ("red", "qa"), "ada": ("red", "admin")}
        tokens = {user: service.add_member(db, project, user, team, role) for user, (team, role) in people.items()}
        worker.run_once(db, project)
        return Made(project, network, ids, tokens)

    return make
