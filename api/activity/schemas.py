"""OpenAPI schemas of the activity endpoints. The event format itself: api/activity/events.py, docs/activity.md."""

from __future__ import annotations

from datetime import date
from typing import Any

from marshmallow import Schema, ValidationError, fields, validate
from webargs.fields import DelimitedList

from api.activity import calendar
from api.activity.store import MAX_DAYS

FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(2199, 12, 31)
_DAY_RANGE = validate.Range(FIRST_DAY, LAST_DAY, error="must be a day from 1970-01-01 to 2199-12-31")


class ActivityArgs(Schema):
    from_ = fields.Date(data_key="from", validate=_DAY_RANGE, metadata={
        "description": "first local day (YYYY-MM-DD); with `to`, a range of at most 31 days"})
    to = fields.Date(validate=_DAY_RANGE, metadata={"description": "last local day, inclusive [default: from]"})
    dates = DelimitedList(fields.Date(validate=_DAY_RANGE), metadata={
        "description": "instead of from/to: a comma-separated list of up to 31 local days (the batch form)"})
    summary = fields.Boolean(load_default=False, metadata={
        "description": "per-day counts by event kind instead of the events"})



def asked_days(args: dict[str, Any]) -> tuple[list[date], bool]:
    """The days a request asks for, in order, and whether they form one range. Checked after the token (a request
    without one gets 401 whatever its parameters), so it raises ValidationError rather than living in the schema.
    """
    has_range, has_dates = "from_" in args or "to" in args, "dates" in args
    if has_range == has_dates:
        raise ValidationError("give either from (and to) or dates")
    if has_dates:
        days = sorted(set(args["dates"]))
        if not days:
            raise ValidationError("dates: at least one day", "dates")
        if len(days) > MAX_DAYS:
            raise ValidationError(f"dates: at most {MAX_DAYS} days", "dates")
        return days, False
    if "from_" not in args:
        raise ValidationError("from is required with to", "from")
    first, last = args["from_"], args.get("to", args["from_"])
    if last < first:
        raise ValidationError("to is before from", "to")
    if (last - first).days + 1 > MAX_DAYS:
        raise ValidationError(f"from..to spans {(last - first).days + 1} days; at most {MAX_DAYS}", "to")
    return calendar.date_range(first, last), True


class _Events(fields.List):
    """The day's events as decoded: plain JSON values already, passed through as they are (a 31-day range holds
    hundreds of events; validating each on the way out would double the cost of the response)."""

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return value


class ActivityDaySchema(Schema):
    date = fields.String(required=True, metadata={"description": "the local day, YYYY-MM-DD"})
    event_count = fields.Integer(required=True, metadata={
        "description": "events of the day (a counted event as its count)"})
    events = _Events(fields.Dict(), metadata={
        "description": "the day's events in time order (absent with summary): at (epoch µs), kind, and the "
                       "fields of the kind (docs/activity.md). A day of more than 500 events keeps the first 2 "
                       "of each 15-minute slot; the others are counted events: {at: the slot's start, kind, "
                       "count, channel or post}"})
    counts = fields.Dict(keys=fields.String(), values=fields.Integer(), metadata={
        "description": "events per kind (summary only)"})


class ActivitySchema(Schema):
    archive = fields.String(required=True, metadata={"description": "slack:<team_id> or network:<network>"})
    account = fields.String(required=True)
    time_zone = fields.String(required=True, metadata={"description": "the IANA zone the days are cut in"})
    days = fields.List(fields.Nested(ActivityDaySchema), required=True, metadata={
        "description": "every day asked for, in order; a day without events is empty"})
