"""The tagging workflow's time stamps, read from the database's clock (`db.clock`, api/clock.py).

Every time tagging writes as a value (lease start and end, hold reservations, effort events, the lease log,
checkpoints, "online") is later compared with "now" read here, so both sides come from the same clock: a test
that gives its Database a ManualClock moves leases, expiry and checkpoints by advancing it. Cassandra's own
cell timestamps are not these: they stay the driver's (tagging never writes `USING TIMESTAMP`), so which write
wins is never decided by a test clock, and the owner lease's `USING TTL` runs on the node's clock.
"""

from __future__ import annotations

from api.db import Database


def now_us(db: Database) -> int:
    """Microseconds since the epoch on `db`'s clock."""
    return int(db.clock.time() * 1_000_000)
