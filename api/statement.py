"""A CQL statement declared once at import time (api/db.py prepares and runs it): kept apart from the Database so
that modules the Database itself calls (api/slack/versions.py) can declare statements without importing it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_TABLE_RE = re.compile(r"\b(?:FROM|INTO|UPDATE|TABLE)\s+([\w.]+)", re.IGNORECASE)
# A lightweight transaction: `IF NOT EXISTS`, `IF EXISTS` or `IF <column> ...` after the statement's WHERE/VALUES.
_CONDITIONAL_RE = re.compile(r"\sIF\s+(?:NOT\s+EXISTS|EXISTS|\w+\s*(?:=|!=|<|>|IN\b))", re.IGNORECASE)
Params = Sequence[Any] | Mapping[str, Any]


class Statement:
    """A CQL statement, declared once at import time and prepared lazily once per process.

    `name` labels its metrics; by default the verb and the table, e.g. `SELECT messages_by_bucket`. An `unpaged`
    read comes back in one response: what Cassandra requires of `IN` on the partition key with `ORDER BY` (the
    coordinator merges the partitions in order); its LIMIT is what bounds it.
    """

    def __init__(self, cql: str, *, name: str | None = None, consistency: int | None = None,
                 idempotent: bool = True, unpaged: bool = False, many_partitions: bool = False,
                 tuples: bool = False) -> None:
        self.cql = " ".join(cql.split())
        table = _TABLE_RE.search(self.cql)
        self.table = table.group(1) if table else None  # the one table it touches (checked by a test)
        self._table_span = table.span(1) if table else None
        self.name = name or f"{self.cql.split()[0].upper()} {self.table or '?'}"
        self.consistency = consistency
        self.idempotent = idempotent
        self.unpaged = unpaged
        # `IN ?` on the partition key of a write: one statement over many partitions (each a mutation of its own on
        # the node, as in a batch), never put into a batch of others (the node's batch thresholds count them).
        self.many_partitions = many_partitions
        # Rows as plain tuples, for reads of thousands of small rows: making a named tuple of each costs about a
        # third of what decoding it does.
        self.tuples = tuples
        # DDL never goes through Statement, so IF here is always a lightweight transaction.
        self.conditional = _CONDITIONAL_RE.search(self.cql) is not None

    def __repr__(self) -> str:
        return f"Statement({self.name!r})"

    def qualified(self, keyspace: str) -> str:
        """The CQL with its table named `keyspace.table`: the node warns about (and a session's USE makes
        ambiguous) prepared statements that rely on the connection's keyspace."""
        if not keyspace or self._table_span is None or "." in (self.table or ""):
            return self.cql
        start, end = self._table_span
        return f"{self.cql[:start]}{keyspace}.{self.cql[start:end]}{self.cql[end:]}"
