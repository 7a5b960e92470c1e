"""Settings of the follower-network feature, from CHRONICLE_NETWORK_* environment variables.

| variable | default | meaning |
|---|---|---|
| CHRONICLE_NETWORK_HYBRID_THRESHOLD | 10000 | authors with this many followers or more are merged at read |
|   |   | time instead of fanned out; 0 turns hybrid off |
| CHRONICLE_NETWORK_HYBRID_HYSTERESIS | 0.1 | an author merged at read time is fanned out again only below |
|   |   | threshold x (1 - hysteresis): a count that hovers at the threshold does not flap |
| CHRONICLE_NETWORK_CACHE_CAP | 800 | home-timeline entries kept per account (Twitter's figure) |
| CHRONICLE_NETWORK_CACHE_TTL | 604800 | seconds a home-timeline entry lives (TWCS drops expired SSTables whole) |
| CHRONICLE_NETWORK_FANOUT_CONCURRENCY | 256 | cache writes in flight during a fan-out |
| CHRONICLE_NETWORK_FANOUT_BATCH | 10 | cache rows per unlogged batch, grouped by replica (1: one write per row) |
| CHRONICLE_NETWORK_PAGE_SIZE | 25 | posts on a home page and in a search answer |
| CHRONICLE_NETWORK_LIKES_RANK_MAX_AGE | 10 | seconds a reader's home window ranked by likes is reused (Q4 |
|   |   | order=likes: counts shown fresh; re-ranked in the background after this, before answering |
|   |   | after twice this); 0 ranks on every read |
| CHRONICLE_NETWORK_TIME_ZONE | UTC | the IANA time zone the network's activity days are cut in |
"""

from __future__ import annotations

import dataclasses
import zoneinfo

from api.config import env


@dataclasses.dataclass(frozen=True)
class NetworkSettings:
    hybrid_threshold: int = 10000
    hybrid_hysteresis: float = 0.1
    cache_cap: int = 800
    cache_ttl: int = 7 * 24 * 3600
    fanout_concurrency: int = 256
    fanout_batch: int = 10
    page_size: int = 25
    likes_rank_max_age: float = 10.0
    time_zone: str = "UTC"

    @property
    def hybrid(self) -> bool:
        return self.hybrid_threshold > 0

    @property
    def demote_below(self) -> int:
        """Follower count under which a celebrity is fanned out again (with hybrid off: any count)."""
        if not self.hybrid:
            return 2**62  # hybrid off: any celebrity left over is demoted on its next unfollow
        return int(self.hybrid_threshold * (1 - self.hybrid_hysteresis))

    def is_celebrity(self, follower_count: int | None) -> bool:
        return self.hybrid and (follower_count or 0) >= self.hybrid_threshold

    @classmethod
    def from_env(cls) -> NetworkSettings:
        return cls(
            hybrid_threshold=int(env("CHRONICLE_NETWORK_HYBRID_THRESHOLD", "10000")),
            hybrid_hysteresis=float(env("CHRONICLE_NETWORK_HYBRID_HYSTERESIS", "0.1")),
            cache_cap=int(env("CHRONICLE_NETWORK_CACHE_CAP", "800")),
            cache_ttl=int(env("CHRONICLE_NETWORK_CACHE_TTL", str(7 * 24 * 3600))),
            fanout_concurrency=int(env("CHRONICLE_NETWORK_FANOUT_CONCURRENCY", "256")),
            fanout_batch=int(env("CHRONICLE_NETWORK_FANOUT_BATCH", "10")),
            page_size=int(env("CHRONICLE_NETWORK_PAGE_SIZE", "25")),
            likes_rank_max_age=_non_negative("CHRONICLE_NETWORK_LIKES_RANK_MAX_AGE", env(
                "CHRONICLE_NETWORK_LIKES_RANK_MAX_AGE", "10")),
            time_zone=_zone(env("CHRONICLE_NETWORK_TIME_ZONE", "UTC")),
        )


def _non_negative(name: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise ValueError(f"{name}: {value!r} is not a number of seconds >= 0")
    return seconds


def _zone(name: str) -> str:
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"CHRONICLE_NETWORK_TIME_ZONE: unknown time zone {name!r} (an IANA name, e.g. "
                         "Europe/Berlin)") from None
    return name


_override: NetworkSettings | None = None
_from_env: NetworkSettings | None = None


def network_settings() -> NetworkSettings:
    """The settings in force: an override (tests, benchmarks) or the environment, read once per process."""
    global _from_env
    if _override is not None:
        return _override
    if _from_env is None:
        _from_env = NetworkSettings.from_env()
    return _from_env


def set_network_settings(settings: NetworkSettings | None) -> None:
    global _override
    _override = settings
