"""A network account's activity days: posts, likes and follows (both sides), built by the dirty worker from
the requests, served in the network's time zone."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from api.activity import dirty, service
from api.activity.settings import ActivitySettings, set_activity_settings
from tests.network.helpers import ADMIN


def test_likes_follows_and_posts_land_in_both_accounts_days(client, db, fresh_net):
    set_activity_settings(ActivitySettings(delay_seconds=1.0))
    try:
        n = fresh_net.name
        ids = sorted(fresh_net.ref.usernames)
        author, fan = next((a, b) for a in ids for b in ids if a != b and (b, a) not in fresh_net.ref.edges)
        posted = client.post(f"/networks/{n}/posts", headers=ADMIN,
                             json={"author_id": author, "content": "activity day test"})
        assert posted.status_code == 201, posted.json
        post_id = posted.json["post"]["post_id"]
        assert client.put(f"/networks/{n}/accounts/{fan}/follows/{author}", headers=ADMIN).status_code == 200
        assert client.put(f"/networks/{n}/posts/{post_id}/likes/{fan}", headers=ADMIN).status_code == 200
        assert client.put(f"/networks/{n}/posts/{post_id}/likes/{fan}", headers=ADMIN).status_code == 200  # again
        time.sleep(1.1)
        assert dirty.DirtyWorker(db, service.rebuild_marks).drain().days >= 2
        today = datetime.now(UTC).date().isoformat()

        def kinds(account: int) -> list[tuple[str, str | None]]:
            r = client.get(f"/networks/{n}/accounts/{account}/activity", query_string={"from": today})
            assert r.status_code == 200, r.json
            assert r.json["time_zone"] == "UTC"
            return [(e["kind"], e.get("user")) for e in r.json["days"][0]["events"]]

        author_kinds, fan_kinds = kinds(author), kinds(fan)
        assert ("post", None) in author_kinds
        assert author_kinds.count(("followed_by", str(fan))) == 1
        assert author_kinds.count(("like_received", str(fan))) == 1  # the repeated like changed nothing
        assert fan_kinds.count(("follow", str(author))) == 1 and fan_kinds.count(("like_given", str(author))) == 1
        assert client.get(f"/networks/{n}/accounts/999999999/activity", query_string={"from": today}).status_code == 404
    finally:
        set_activity_settings(None)
