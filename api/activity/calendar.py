"""Local days: which UTC interval a local day covers in a time zone, and which local days an interval touches.

Time zones are IANA names resolved by zoneinfo, so a day across a daylight-saving change is 23 or 25 hours long.
An unknown or absent zone is UTC.
"""

from __future__ import annotations

import bisect
import functools
import zoneinfo
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

US = 1_000_000


@functools.lru_cache(maxsize=1024)
def zone(name: str | None) -> tzinfo:
    if not name:
        return UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return UTC


def zone_name(name: str | None) -> str:
    """The name a day is recorded with: the zone's own name, or UTC when it does not resolve."""
    found = zone(name)
    return name if found is not UTC and name else "UTC"


def day_start_us(day: date, tz: tzinfo) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=tz).timestamp() * US)


def window(day: date, tz: tzinfo) -> tuple[int, int]:
    """[start, end) of a local day in epoch µs. The last day Python's calendar has (9999-12-31, as a search's
    `on:` may name) ends 24 hours after it starts: there is no next day to start."""
    start = day_start_us(day, tz)
    return start, day_start_us(day + timedelta(days=1), tz) if day < date.max else start + 86_400 * US


def local_day(at_us: int, tz: tzinfo) -> date:
    return datetime.fromtimestamp(at_us / US, tz).date()


def cut_into_days(events: Iterable[dict[str, Any]], days: Sequence[date], tz: tzinfo
                  ) -> dict[date, list[dict[str, Any]]]:
    """The events (each with `at`, epoch µs) by the local day of `days` they fall in (`days` ascending and
    contiguous or not; an event outside them is dropped). One bisection per event over the days' starts."""
    starts = [day_start_us(d, tz) for d in days]
    ends = [day_start_us(d + timedelta(days=1), tz) for d in days]
    out: dict[date, list[dict[str, Any]]] = {}
    for event in events:
        at = event["at"]
        i = bisect.bisect_right(starts, at) - 1
        if i >= 0 and at < ends[i]:
            out.setdefault(days[i], []).append(event)
    return out


def days_touching(start_us: int, end_us: int, tz: tzinfo) -> list[date]:
    """The local days that overlap [start_us, end_us)."""
    first, last = local_day(start_us, tz), local_day(max(start_us, end_us - 1), tz)
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def date_range(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]
