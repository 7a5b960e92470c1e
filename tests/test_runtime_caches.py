"""api/caches.py: named, bounded caches on the injected clock (no database needed)."""

from __future__ import annotations

import threading

from api.caches import Caches
from tests.clocks import ManualClock


def test_a_name_is_one_cache_bounded_by_its_size() -> None:
    caches = Caches()
    first = caches.lru("t.lru", maxsize=3)
    assert caches.lru("t.lru", maxsize=3) is first and bool(first) and len(first) == 0
    for k in "abcd":
        first.set(k, k.upper())
    assert len(first) == 3 and "a" not in first  # the least recently used went
    assert first.get("b") == "B"  # a use: "c" is now the oldest
    first.set("e", "E")
    assert "c" not in first and first.missing(["b", "c", "d", "x"]) == ["c", "x"]
    assert caches.names() == ["t.lru"]


def test_ttl_entries_expire_on_the_injected_clock() -> None:
    clock = ManualClock()
    cache = Caches(clock).ttl("t.ttl", maxsize=10, ttl=5.0)
    cache.set("k", 1)
    clock.advance(4.999)
    assert "k" in cache and cache.get("k") == 1
    clock.advance(0.002)
    assert "k" not in cache and cache.get("k") is None and cache.get_or_load("k", lambda: 2) == 2


def test_clear_empties_every_cache_and_setdefault_is_atomic() -> None:
    caches = Caches()
    lists = caches.lru("t.lists", maxsize=100)
    caches.lru("t.other", maxsize=5).set(1, 1)

    def append(n: int) -> None:
        for i in range(200):
            lists.setdefault("shared", list).append((n, i))

    threads = [threading.Thread(target=append, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(lists.get("shared")) == 800  # one list, made once, whatever the interleaving
    caches.clear()
    assert len(lists) == 0 and len(caches.lru("t.other", maxsize=5)) == 0
