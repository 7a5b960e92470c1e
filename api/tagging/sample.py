"""The sample tagging project `sample` over the sample Slack workspace, with three people whose tokens each
load prints (a load issues new tokens and revokes the previous ones: only hashes are stored)."""

from __future__ import annotations

from typing import Any

from api.db import Database
from api.slack import sample as slack_sample
from api.tagging import projects, service, worker

PROJECT = "sample"
PEOPLE = (("ann", "red", "tagger"), ("bob", "blue", "tagger"), ("quinn", "red", "qa"), ("ada", "red", "admin"))


def load_sample(db: Database) -> dict[str, Any]:
    """Make the project once (its items: every sample Slack message), then give each person a new token."""
    if projects.get(db, PROJECT) is None:
        service.create_project(
            db, PROJECT, "Sample: what is the workspace talking about?",
            {"kind": "slack", "team": slack_sample.TEAM,
             "channels": [slack_sample.GENERAL, slack_sample.RANDOM, slack_sample.OLD],
             "from": "2025-11-01", "to": "2025-12-31"},
            ["announcement", "question", "social", "work"], ["urgent", "follow-up", "fyi"],
            queue_size=100, teams={"red": None, "blue": 50})
    tokens = {user: service.add_member(db, PROJECT, user, team, role) for user, team, role in PEOPLE}
    passed = worker.run_once(db, PROJECT)
    return {"project": PROJECT, "items": projects.get(db, PROJECT).total_items, "queued": passed.get("queued", 0),
            "tokens": {f"{user} ({role})": tokens[user] for user, _, role in PEOPLE}}
