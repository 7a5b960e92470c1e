"""Bench-only WSGI app: Chronicle's app plus a Twissandra-style home timeline route, so both are measured
through the same gunicorn, Flask and JSON stack. Never part of the product.

Twissandra kept post ids in the timeline and read each post on its own, one round trip per post.
"""

from __future__ import annotations

from flask import jsonify

from api.app import create_app
from api.db import Statement, get_db
from api.network import accounts, posts

TWISS_IDS = Statement("SELECT post_id FROM bench_twissandra_timeline WHERE account_id = ? LIMIT 25")

app = create_app()


@app.get("/bench/twissandra/<network>/<int:account_id>")
def twissandra_home(network: str, account_id: int):
    db = get_db()
    account = accounts.get_account(db, network, account_id)
    ids = [r.post_id for r in db.execute(TWISS_IDS, (account_id,))]
    found = [posts.get_post(db, network, p) for p in ids]  # one read per post
    return jsonify({"account": account.to_json() if account else None,
                    "posts": [p.to_json() for p in found if p]})
