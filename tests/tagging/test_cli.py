"""`chronicle tagging ...` as an admin runs it: make a project, add people (the token printed once), fill the
queue, check the figures; exit codes that mean something."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.tagging.conftest import archive_posts

CHRONICLE = str(Path(sys.executable).with_name("chronicle"))


def _run(settings, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CHRONICLE_CASSANDRA_HOSTS": ",".join(settings.contact_points),
           "CHRONICLE_CASSANDRA_PORT": str(settings.cassandra_port), "CHRONICLE_KEYSPACE": settings.keyspace}
    return subprocess.run([CHRONICLE, "tagging", *args], env=env, capture_output=True, text=True, timeout=120)


def test_an_admin_makes_a_project_and_people_from_the_command_line(client, db, settings):
    ids = archive_posts(db, "clinet", 11, 5)
    source = json.dumps({"kind": "network", "network": "clinet", "authors": [11]})
    dry = _run(settings, "create-project", "--project", "clip", "--categories", "a,b", "--source", source, "--dry-run")
    assert dry.returncode == 0 and json.loads(dry.stdout)["items"] == len(ids)
    made = _run(settings, "create-project", "--project", "clip", "--categories", "a,b", "--subcategories", "x",
                "--team", "red:3", "--team", "blue", "--queue-size", "4", "--source", source)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["total_items"] == 5
    again = _run(settings, "create-project", "--project", "clip", "--categories", "a", "--source", source)
    assert again.returncode == 2 and "exists" in again.stderr
    bad = _run(settings, "create-project", "--project", "clip2", "--categories", "a",
               "--source", '{"kind": "slack"}')
    assert bad.returncode == 2 and "channels" in bad.stderr
    user = _run(settings, "add-user", "--project", "clip", "--user", "ann", "--team", "red")
    token = json.loads(user.stdout)["token"]
    assert user.returncode == 0 and token.startswith("tg_")
    assert _run(settings, "add-user", "--project", "nope", "--user", "x", "--team", "red").returncode == 4
    assert _run(settings, "add-user", "--project", "clip", "--user", "x", "--team", "green").returncode == 2
    filled = _run(settings, "fill-queues", "--project", "clip")
    assert filled.returncode == 0 and json.loads(filled.stdout)[0]["queued"] == 4  # the queue size
    item = client.post("/tagging/projects/clip/next", headers={"Authorization": f"Bearer {token}"}).get_json()
    assert item["item"]["status"] == "InProgress"
    assert _run(settings, "reconcile", "--project", "clip").returncode == 0
    assert _run(settings, "reconcile", "--project", "nope").returncode == 4
    stats = json.loads(_run(settings, "stats", "--project", "clip").stdout)
    assert stats["project"]["total"] == 5 and [t["team"] for t in stats["teams"]] == ["blue", "red"]
