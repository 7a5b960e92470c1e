"""Statistics as sums over the effort log: how each event changes the figures, and the top-5 lists.

Pure functions (no database): the project owner applies new events with them, and reconcile recomputes every
figure from the whole log with the same rules.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from api.tagging.effort import Event

Figures = dict[tuple[str, str], dict[str, int]]
TOP = 5
USE_SCOPES = {"categories": "category", "subcategories": "subcategory", "keywords": "keyword"}


def _add(figures: Figures, changed: Figures, scope: str, name: str, figure: str, delta: int) -> None:
    row = figures.setdefault((scope, name), {})
    row[figure] = row.get(figure, 0) + delta
    changed.setdefault((scope, name), {})[figure] = row[figure]


def apply(figures: Figures, events: Iterable[Event]) -> Figures:
    """Add the events to `figures` in place; returns the changed rows with their new values."""
    changed: Figures = {}
    for e in events:
        people = [("team", e.team), ("user", e.user)]
        if e.kind == "claimed":
            _add(figures, changed, "project", "", "claimed", 1)
            for scope, name in people:
                if name:
                    _add(figures, changed, scope, name, "assigned", 1)
        elif e.kind == "tagged":
            _add(figures, changed, "project", "", "tagged", 1)
            for scope, name in people:
                if name:
                    _add(figures, changed, scope, name, "finished", 1)
                    _add(figures, changed, scope, name, "time_ms", e.duration_ms or 0)
            for field, scope in USE_SCOPES.items():
                for used in getattr(e, field):
                    _add(figures, changed, scope, used, "uses", 1)
        elif e.kind == "verified":
            outcome = "correct" if e.result == "Correct" else "incorrect"
            _add(figures, changed, "project", "", "verified", 1)
            _add(figures, changed, "project", "", outcome, 1)
            for scope, name in people:
                if name:
                    _add(figures, changed, scope, name, outcome, 1)
        elif e.kind == "returned":
            _add(figures, changed, "project", "", "returned", 1)
            for scope, name in people:
                if name:
                    _add(figures, changed, scope, name, "returned", 1)
        elif e.kind in ("disabled", "missing"):
            _add(figures, changed, "project", "", e.kind, 1)
    return changed


def top(figures: Figures, field: str, k: int = TOP) -> list[tuple[str, int]]:
    """The k most used categories, subcategories or keywords: count descending, then name."""
    scope = USE_SCOPES[field]
    used = ((name, row.get("uses", 0)) for (s, name), row in figures.items() if s == scope)
    return heapq.nsmallest(k, used, key=lambda nc: (-nc[1], nc[0]))


def recompute(events: Iterable[Event]) -> Figures:
    figures: Figures = {}
    apply(figures, events)
    return figures
