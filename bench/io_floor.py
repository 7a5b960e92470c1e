"""The I/O floor of a like: the same rounds of requests as `actions.like`, sent by the driver alone.

No HTTP, no Flask, no Chronicle code on the path: prepared statements on two probe tables in the scratch
keyspace, sent through the session the API uses (same driver settings and row factory). What it takes is what
the driver and the node take for a like's requests on this machine, whatever the application does on top; the
scale suite measures it beside the real like (`like_io_floor` beside `like_unlike_hot_post`) so the two figures
come from one run.

The rounds, as `actions.like` and its route send them:
1. the post and the liker, read at once;
2. the claim, a lightweight transaction on the liker's row;
3. the counter change, with the like's other writes (an unlogged batch over six partitions) and the read of
   its terms' top-list states (one IN read over three partitions, at LOCAL_QUORUM) sent beside it;
4. the count, read at LOCAL_QUORUM;
5. the copies of the count (an unlogged batch over six partitions); then the writes of round 3 are awaited.
Calls alternate a claim (INSERT IF NOT EXISTS) and its undo (DELETE IF EXISTS) on the same row, as the scale
suite's like/unlike loop does.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.query import BatchStatement, BatchType

from api.db import Database

ROWS, COUNTS = "like_io_floor_rows", "like_io_floor_counts"
_PARTITIONS_PER_BATCH = 6  # the like's copies: the post's two rows, three postings, a top-list row
_STATES = [-1, -2, -3]  # the rows standing for the top-list states of the post's three terms (batch keys are <= -100)


class LikeIoFloor:
    """`with LikeIoFloor(db) as call:` creates the probe tables, yields the callable, drops them after."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.keys = itertools.count(1)
        self.local = threading.local()

    def __enter__(self) -> LikeIoFloor:
        ks = self.db.keyspace
        self.db.execute_raw(f"CREATE TABLE IF NOT EXISTS {ks}.{ROWS} (k bigint, c bigint, v int, PRIMARY KEY (k, c))")
        self.db.execute_raw(f"CREATE TABLE IF NOT EXISTS {ks}.{COUNTS} (k bigint PRIMARY KEY, n counter)")
        session = self.db.session
        self.read = session.prepare(f"SELECT v FROM {ks}.{ROWS} WHERE k = ? AND c = ?")
        self.claim = session.prepare(f"INSERT INTO {ks}.{ROWS} (k, c, v) VALUES (?, 0, 1) IF NOT EXISTS")
        self.unclaim = session.prepare(f"DELETE FROM {ks}.{ROWS} WHERE k = ? AND c = 0 IF EXISTS")
        for lwt in (self.claim, self.unclaim):
            lwt.serial_consistency_level = ConsistencyLevel.LOCAL_SERIAL
        self.write = session.prepare(f"INSERT INTO {ks}.{ROWS} (k, c, v) VALUES (?, ?, 2)")
        self.add = session.prepare(f"UPDATE {ks}.{COUNTS} SET n = n + ? WHERE k = ?")
        self.count = session.prepare(f"SELECT n FROM {ks}.{COUNTS} WHERE k = ?")
        self.states = session.prepare(f"SELECT v FROM {ks}.{ROWS} WHERE k IN ? AND c = 0")
        for read in (self.count, self.states):
            read.consistency_level = ConsistencyLevel.LOCAL_QUORUM
        for state in _STATES:
            session.execute(self.write, (state, 0))
        return self

    def __exit__(self, *exc: Any) -> None:
        for table in (ROWS, COUNTS):
            self.db.execute_raw(f"DROP TABLE IF EXISTS {self.db.keyspace}.{table}", timeout=60)

    def _batch(self, key: int, column: int) -> BatchStatement:
        batch = BatchStatement(batch_type=BatchType.UNLOGGED)
        for i in range(_PARTITIONS_PER_BATCH):
            batch.add(self.write, (-(key * 100 + i), column))
        return batch

    def __call__(self) -> None:
        """One like (or, every other call of a thread, its undo) of the I/O shape above."""
        pending = getattr(self.local, "pending", None)
        key, undo = (pending, True) if pending is not None else (next(self.keys), False)
        self.local.pending = None if undo else key
        s = self.db.session
        post, liker = s.execute_async(self.read, (key, 1)), s.execute_async(self.read, (key, 2))
        post.result(), liker.result()
        s.execute(self.unclaim if undo else self.claim, (key,))
        states = s.execute_async(self.states, (_STATES,))
        beside = s.execute_async(self._batch(key, 1))
        s.execute(self.add, (-1 if undo else 1, 0))
        s.execute(self.count, (0,))
        states.result()
        s.execute(self._batch(key, 2))
        beside.result()
