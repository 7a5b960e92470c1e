"""Slack timestamps <-> integer microseconds, and the day buckets of the message tables."""

from __future__ import annotations

import re

US_PER_SECOND = 1_000_000
US_PER_DAY = 86_400 * US_PER_SECOND
# ASCII digits only, the whole string: the pattern the OpenAPI document states for every ts parameter.
TS_PATTERN = r"^[0-9]{1,12}(\.[0-9]{1,6})?$"
_TS_RE = re.compile(TS_PATTERN)


class BadTimestamp(ValueError):
    pass


def ts_to_us(value: str | int | float) -> int:
    """'1620000000.000200' -> 1620000000000200 exactly (no float rounding for strings)."""
    if isinstance(value, bool):
        raise BadTimestamp(f"not a Slack timestamp: {value!r}")
    if isinstance(value, int | float):
        if not 0 <= value < 10**12:  # also rejects NaN; keeps µs within the bigint columns
            raise BadTimestamp(f"not a Slack timestamp: {value!r}")
        return value * US_PER_SECOND if isinstance(value, int) else round(value * US_PER_SECOND)
    if not isinstance(value, str) or not _TS_RE.fullmatch(value):
        raise BadTimestamp(f"not a Slack timestamp: {value!r}")
    seconds, _, frac = value.partition(".")
    return int(seconds) * US_PER_SECOND + int((frac + "000000")[:6])


# Messages are stored only before 9999-12-30 UTC: pages show their dates in every time zone (up to 14 hours
# ahead of UTC), and Python's dates end with the year 9999.
MESSAGE_US_LIMIT = (253_402_300_800 - 2 * 86_400) * US_PER_SECOND


def message_ts_to_us(value: str | int | float) -> int:
    """`ts_to_us` of a message's own ts (or its thread's): BadTimestamp from the year 10000 on."""
    us = ts_to_us(value)
    if us >= MESSAGE_US_LIMIT:
        raise BadTimestamp(f"not a Slack timestamp: {value!r} is after 9999-12-29")
    return us


def us_to_ts(us: int) -> str:
    """1620000000000200 -> '1620000000.000200' (Slack's 6-decimal form)."""
    return f"{us // US_PER_SECOND}.{us % US_PER_SECOND:06d}"


def day_of(us: int) -> int:
    """The UTC day number (days since 1970-01-01) of a time in microseconds: the message partition bucket."""
    return us // US_PER_DAY


def is_ts(value: object) -> bool:
    return isinstance(value, str) and _TS_RE.fullmatch(value) is not None
