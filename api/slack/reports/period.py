"""The period a report covers: UTC days [start, start + days), compared with the `days` before it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re

from api.slack.timeutil import US_PER_DAY

MAX_DAYS = 31  # a report reads 2 x days channel-day partitions per channel: bounded
_ID_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})-(\d{1,2})$")
_EPOCH = dt.date(1970, 1, 1)
LAST_START = dt.date(2199, 12, 31)


class BadPeriod(ValueError):
    """A report id or period that names no valid period (answered 400/404 with the reason)."""


@dataclasses.dataclass(frozen=True)
class Period:
    start: dt.date
    days: int

    def __post_init__(self) -> None:
        if not 1 <= self.days <= MAX_DAYS:
            raise BadPeriod(f"days must be between 1 and {MAX_DAYS}")
        if not _EPOCH <= self.start <= LAST_START:
            raise BadPeriod(f"the first day must be between {_EPOCH} and {LAST_START}")

    @property
    def report_id(self) -> str:
        return f"{self.start.isoformat()}-{self.days}"

    @property
    def end(self) -> dt.date:
        return self.start + dt.timedelta(days=self.days)

    @property
    def previous(self) -> Period:
        return Period(self.start - dt.timedelta(days=self.days), self.days)

    @property
    def first_day(self) -> int:
        """Days since 1970-01-01 of the first day (the `day` of slack_messages)."""
        return (self.start - _EPOCH).days

    @property
    def lower_us(self) -> int:
        return self.first_day * US_PER_DAY

    @property
    def upper_us(self) -> int:
        return (self.first_day + self.days) * US_PER_DAY

    def to_json(self) -> dict[str, object]:
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "days": self.days}

    @classmethod
    def parse_id(cls, report_id: str) -> Period:
        match = _ID_RE.match(report_id)
        if match is None:
            raise BadPeriod("a report id is {start_day}-{days}, e.g. 2026-11-15-7")
        try:
            start = dt.date.fromisoformat(match.group(1))
        except ValueError:
            raise BadPeriod(f"no such day: {match.group(1)}") from None
        return cls(start, int(match.group(2)))


def last_full_week(today: dt.date) -> Period:
    """The latest Sunday-start week that has ended by `today` (seed 000's weekly report)."""
    this_sunday = today - dt.timedelta(days=(today.weekday() + 1) % 7)
    return Period(this_sunday - dt.timedelta(days=7), 7)
