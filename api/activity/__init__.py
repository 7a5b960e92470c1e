"""Per-account, per-day activity (seed 002): one compressed row per account and local day, rebuilt whole.

`events.py` (the event format), `codec.py` (blob codecs), `calendar.py` (local days), `store.py` (the
activity_days table), `dirty.py` (marks from live ingest, the worker), `service.py` (build, rebuild, read),
`http.py` + `schemas.py` (the endpoints), `settings.py`. The archives' sources: api/slack/activity.py,
api/network/activity.py.
"""
