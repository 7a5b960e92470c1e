"""A stored report read while it is regenerated in a loop, on the real 3-node cluster (RF 3, default levels:
writes LOCAL_QUORUM, reads LOCAL_ONE except the report's pointer and chunks, read at LOCAL_QUORUM): every GET
answers 200 with one whole generation, never a 500 (before 0180 a LOCAL_ONE replica could show the new pointer
before the chunks: `CorruptReport`).

Slow (the cluster takes about a minute to start): `pytest -m slow`."""

from __future__ import annotations

import threading
import uuid

import pytest

from api.slack.reports import store
from tests.slack.helpers import ALL
from tests.slack.test_cluster_slack import cluster_app  # noqa: F401 - the fixture: the app on the cluster

pytestmark = pytest.mark.slow


def test_report_get_never_fails_while_the_report_is_regenerated(cluster_app, monkeypatch):  # noqa: F811
    app, db = cluster_app
    client = app.test_client()
    monkeypatch.setattr(store, "CHUNK_BYTES", 1024)  # many chunks per generation: many chances to see a mix
    team, report_id = f"T{uuid.uuid4().hex[:10].upper()}", "2026-03-01-7"

    def document(n: int) -> dict:
        filler = {f"U{n:03d}{i:04d}": uuid.uuid4().hex * 4 for i in range(60 + 5 * (n % 7))}
        return {"team_id": team, "report_id": report_id, "generated_at": f"generation-{n}",
                "names": {"users": filler, "channels": {}}}

    documents = [document(n) for n in range(40)]
    store.save(db, team, report_id, documents[0], start_day=None, days=7, messages=0)
    done, statuses, seen = threading.Event(), [], []

    def regenerate() -> None:
        try:
            for doc in documents[1:]:
                store.save(db, team, report_id, doc, start_day=None, days=7, messages=0)
        finally:
            done.set()

    writer = threading.Thread(target=regenerate)
    writer.start()
    try:
        while not done.is_set():
            r = client.get(f"/slack/teams/{team}/reports/{report_id}", headers=ALL)
            statuses.append(r.status_code)
            if r.status_code == 200:
                seen.append(r.get_json())
    finally:
        writer.join(120)
    assert set(statuses) == {200}, {s: statuses.count(s) for s in set(statuses)}
    assert len(seen) > 20
    for doc in seen:  # one whole generation each time
        n = int(doc["generated_at"].split("-")[1])
        assert doc["names"] == documents[n]["names"]
