"""The process's caches: named, bounded, locked, timed by the injected clock, and cleared together.

Each `Database` owns one `Caches` (`db.caches`): what is cached is read from that database, so a test's own
Database starts with empty caches, and `clear()` empties every one of them (the test fixtures call it). Code
asks for its cache by name where it uses it (`db.caches.ttl("slack.private_channels", maxsize=..., ttl=...)`);
the first call creates it, later calls return the same one. Built on cachetools (LRU and TTL eviction), with
one lock per cache because cachetools' caches are not thread-safe and gunicorn threads share them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import cachetools

from api.clock import SYSTEM, Clock

_MISSING = object()


class Cache:
    """One named cache: a cachetools LRU or TTL cache behind a lock."""

    def __init__(self, name: str, store: cachetools.Cache) -> None:
        self.name = name
        self._store = store
        self._lock = threading.Lock()

    @property
    def maxsize(self) -> float:
        return self._store.maxsize

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            return self._store.get(key, default)

    def __contains__(self, key: Hashable) -> bool:
        # A membership test does not count as a use (LRU order moves on `get` and `set` only): the caches asked
        # this way mark rows already written, on the import's hot path, where a reorder per key cost 7% of CPU.
        with self._lock:
            return key in self._store

    def set(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._store[key] = value

    def add_all(self, keys: Iterable[Hashable], value: Any = None) -> None:
        """Mark many keys at once (for caches of "already written" keys)."""
        with self._lock:
            for key in keys:
                self._store[key] = value

    def missing(self, keys: Iterable[Hashable]) -> list[Hashable]:
        """The keys not in the cache, in order (one lock for many: the import checks ~30 keys a message)."""
        with self._lock:
            store = self._store
            return [k for k in keys if k not in store]

    def setdefault(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The value under `key`, or `make()`'s, stored (atomically: for values that are appended to)."""
        with self._lock:
            value = self._store.get(key, _MISSING)
            if value is _MISSING:
                value = self._store[key] = make()
            return value

    def pop(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            return self._store.pop(key, default)

    def get_or_load(self, key: Hashable, load: Callable[[], Any]) -> Any:
        """The cached value, or `load()`'s, cached. `load` runs outside the lock (it may read the database):
        two threads missing at once may both load; the value is the same."""
        value = self.get(key, _MISSING)
        if value is _MISSING:
            value = load()
            self.set(key, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._store.clear()

    def __bool__(self) -> bool:
        return True  # a cache is a cache even when empty (`caches.get(name) or ...` relies on it)

    def __len__(self) -> int:
        with self._lock:
            return len(self._store)


class Caches:
    """The named caches of one Database."""

    def __init__(self, clock: Clock = SYSTEM) -> None:
        self.clock = clock
        self._caches: dict[str, Cache] = {}
        self._lock = threading.Lock()

    def lru(self, name: str, *, maxsize: int, getsizeof: Callable[[Any], int] | None = None) -> Cache:
        """A cache of at most `maxsize` entries (or, with `getsizeof`, of values whose sizes add up to at most
        `maxsize`); the least recently used goes first."""
        # The lookup comes first and alone: the import asks for its caches about eight times a message.
        return self._caches.get(name) or self._made(
            name, lambda: cachetools.LRUCache(maxsize=maxsize, getsizeof=getsizeof))

    def ttl(self, name: str, *, maxsize: int, ttl: float) -> Cache:
        """A cache whose entries expire `ttl` seconds (of the injected clock) after they were set."""
        return self._caches.get(name) or self._made(
            name, lambda: cachetools.TTLCache(maxsize=maxsize, ttl=ttl, timer=self.clock.monotonic))

    def _made(self, name: str, make: Callable[[], cachetools.Cache]) -> Cache:
        with self._lock:
            cache = self._caches.get(name)
            if cache is None:
                cache = self._caches[name] = Cache(name, make())
        return cache

    def names(self) -> list[str]:
        return sorted(self._caches)

    def clear(self) -> None:
        """Empty every cache (a test starts from a cold process; an admin action that changes what is cached)."""
        for cache in list(self._caches.values()):
            cache.clear()
