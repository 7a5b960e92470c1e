"""The access audit log (api/audit.py, api/audit_http.py): every read of archive content through REST, the archive
pages and the CLI's export and report is one row — who (a token's id, never the token), what, when, from where,
the status — readable by admins over a time range, in time order, paged; rows expire by TTL."""

from __future__ import annotations

import hashlib
import time
import uuid
from datetime import UTC, datetime, timedelta

from click.testing import CliRunner

from api import audit
from api.cli import chronicle as cli
from tests.helpers import ADMIN_TOKEN, READ_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
READ = {"Authorization": f"Bearer {READ_TOKEN}"}


def _iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def _logged(client, since: datetime, marker: str, **params) -> list[dict]:
    """Every entry from `since` to a second from now whose target names `marker`, through the admin endpoint."""
    found, cursor = [], None
    until = _iso(datetime.now(UTC) + timedelta(seconds=1))  # a cursor belongs to its range: the same each page
    while True:
        query = {"from": _iso(since), "to": until, "limit": 500, **params}
        if cursor:
            query["cursor"] = cursor
        page = client.get("/admin/audit", headers=ADMIN, query_string=query)
        assert page.status_code == 200, page.json
        found += [e for e in page.json["entries"] if marker in e["target"]]
        cursor = page.json["next_cursor"]
        if not cursor:
            return found


def _settle() -> None:
    time.sleep(0.3)  # the request does not wait for its entry's write


def test_every_content_read_is_logged_with_a_token_id_never_the_token(client, db):
    since = datetime.now(UTC) - timedelta(seconds=1)
    team = f"TAUD{uuid.uuid4().hex[:8].upper()}"
    rest = client.get(f"/slack/teams/{team}/channels", headers=READ)
    refused = client.get(f"/slack/teams/{team}/channels")
    client.set_cookie("chronicle_archive", READ_TOKEN, path="/archive")
    page = client.get(f"/archive/teams/{team}")
    assert client.get("/healthz").status_code == 200  # not content: not logged
    _settle()
    entries = _logged(client, since, team)
    by_via = sorted((e["via"], e["actor"], e["status"]) for e in entries)
    assert by_via == sorted([("rest", "token", rest.status_code), ("rest", "anonymous", refused.status_code),
                             ("pages", "token", page.status_code)])
    token_id = hashlib.sha256(READ_TOKEN.encode()).hexdigest()[:16]
    for entry in entries:
        assert entry["token_id"] == (None if entry["actor"] == "anonymous" else token_id)
        assert entry["remote"] == "127.0.0.1" and entry["action"].startswith("GET /")
    assert {e["action"] for e in entries if e["via"] == "rest"} == {"GET /slack/teams/<team_id>/channels"}
    # The token itself is nowhere in the table (today's partitions, every column), and each row expires.
    day = int(time.time()) // 86_400
    rows = [r for shard in range(audit.SHARDS) for r in db.execute_raw(
        f"SELECT actor, token_id, target, action, remote, TTL(actor) AS ttl FROM {db.keyspace}.audit_log "
        f"WHERE day = {day} AND shard = {shard}")]
    assert rows and not any(READ_TOKEN in " ".join(str(v) for v in r) for r in rows)
    assert all(0 < r.ttl <= db.settings.audit_retention_days * 86_400 for r in rows)


def test_the_log_is_admin_only_ranged_and_paged_in_time_order(client):
    since = datetime.now(UTC) - timedelta(seconds=1)
    team = f"TAUD{uuid.uuid4().hex[:8].upper()}"
    for i in range(5):
        client.get(f"/slack/teams/{team}/channels", headers=READ, query_string={"limit": i + 1})
    _settle()
    until = _iso(datetime.now(UTC) + timedelta(seconds=1))
    query = {"from": _iso(since), "to": until}
    assert client.get("/admin/audit", query_string=query).status_code == 401
    assert client.get("/admin/audit", headers=READ, query_string=query).status_code == 403
    backwards = client.get("/admin/audit", headers=ADMIN, query_string={"from": until, "to": _iso(since)})
    assert backwards.status_code == 422 and "after" in str(backwards.json)
    too_long = client.get("/admin/audit", headers=ADMIN,
                          query_string={"from": _iso(since - timedelta(days=40)), "to": until})
    assert too_long.status_code == 422 and "31 days" in str(too_long.json)
    forged = client.get("/admin/audit", headers=ADMIN, query_string={**query, "cursor": "eyJ0IjoxfQ.AAAA"})
    assert forged.status_code == 400
    whole = _logged(client, since, team)
    paged = _logged(client, since, team, limit=2)
    assert [e["entry_id"] for e in paged] == [e["entry_id"] for e in whole]
    assert [e["target"].rsplit("=", 1)[1] for e in whole] == ["1", "2", "3", "4", "5"]  # in time order
    assert [e["at"] for e in whole] == sorted(e["at"] for e in whole)


def test_a_cli_export_is_logged_with_who_ran_it(client, db, tmp_path):
    since = datetime.now(UTC) - timedelta(seconds=1)
    team = f"TAUD{uuid.uuid4().hex[:8].upper()}"
    result = CliRunner().invoke(cli, ["slack", "export", "--team", team, "--out", str(tmp_path / "x.zip")])
    assert result.exit_code == 4, result.output  # a workspace not in the archive: nothing exported
    (entry,) = _logged(client, since, team)
    assert (entry["via"], entry["action"], entry["status"]) == ("cli", "chronicle slack export", 0)
    assert entry["actor"].startswith("cli:") and entry["token_id"] is None
