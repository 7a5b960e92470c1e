"""Tagging's caches belong to a Database (db.caches), and age on its clock: two Databases, as two tests or two
processes have, never see each other's cached answers."""

from __future__ import annotations

import time

import pytest

from api.db import Database
from api.tagging import projects
from api.tagging.projects import Member
from tests.clocks import ManualClock

_TOKEN = "tg_one-token-for-two-tests"
_TAGGING_CACHES = {"tagging.tokens", "tagging.projects", "tagging.teams", "tagging.queue_positions",
                   "tagging.online_noted", "tagging.usage_guess", "tagging.event_minutes"}


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _tagging(db: Database) -> set[str]:
    return {name for name in db.caches.names() if name.startswith("tagging.")}


@pytest.mark.parametrize("run", ["first", "second"])
def test_two_tests_do_not_share_tagging_caches(clocked_db, run):
    """Run twice, each run on a Database of its own. Each run ends with a member cached for a token whose row
    it deleted: the other run must not get that answer (it reads the database, which has no such token)."""
    db = clocked_db
    assert not _tagging(db)  # a new Database starts without tagging caches
    digest = projects.hash_token(_TOKEN)
    assert projects.member_of_token(db, _TOKEN) is None  # nothing in the table, nothing left by the other run
    db.execute(projects.PUT_TOKEN, (digest, "shared", "ann", "red", "tagger"))
    try:
        assert projects.member_of_token(db, _TOKEN) is None  # "unknown" is cached too, for the TTL
        db.clock.advance(5.1)  # past tagging.tokens' 5 s on this Database's clock: read again
        found = projects.member_of_token(db, _TOKEN)
        assert found == Member("shared", "ann", "red", "tagger")
    finally:
        db.execute(projects.DROP_TOKEN, (digest,))
    assert projects.member_of_token(db, _TOKEN) == found  # still cached here: the other run must not see it


def test_two_databases_keep_their_own_tagging_caches(client, clocked_db, settings, make_project):
    """The app's Database (clocked_db) and another on the same keyspace: requests fill the app's caches only;
    a quota or token changed through the other is seen there at once, and by the app's once its own entries
    expire on its own clock."""
    made = make_project(items=3, database=clocked_db)
    other = Database(settings, clock=ManualClock(start=time.time()))
    try:
        r = client.post(f"/tagging/projects/{made.project}/next", headers=_h(made.tokens["ann"]))
        assert r.status_code == 200 and r.get_json()["item"] is not None
        assert _tagging(clocked_db) >= _TAGGING_CACHES
        assert not _tagging(other)

        assert projects.teams_cached(clocked_db, made.project) == {"red": None}
        projects.put_team(other, made.project, "red", 1)
        assert projects.teams_cached(other, made.project) == {"red": 1}
        assert projects.teams_cached(clocked_db, made.project) == {"red": None}  # its own entry, 10 s old at most
        clocked_db.clock.advance(10.1)
        assert projects.teams_cached(clocked_db, made.project) == {"red": 1}

        old = made.tokens["bob"]
        assert client.get("/tagging/me", headers=_h(old)).status_code == 200  # cached by the app's Database
        new = projects.add_member(other, made.project, "bob", "red", "tagger")  # the old token's row is deleted
        assert projects.member_of_token(other, old) is None
        assert projects.member_of_token(other, new) == Member(made.project, "bob", "red", "tagger")
        assert client.get("/tagging/me", headers=_h(old)).status_code == 200  # the app's entry, until its TTL
        clocked_db.clock.advance(5.1)
        assert client.get("/tagging/me", headers=_h(old)).status_code == 401
        assert client.get("/tagging/me", headers=_h(new)).status_code == 200
    finally:
        other.close()
