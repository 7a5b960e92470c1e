"""What the CLI, the HTTP endpoints and the report worker call: generate (read, compute, store), submit (a
queued generation), run_job (what the worker does with one), job (its state), get, list, post."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from api.db import Database
from api.slack import channels, installations
from api.slack.reports import anonymise, blocks, figures, jobs, store
from api.slack.reports.period import Period
from api.slack.settings import SlackSettings


class UnknownWorkspace(LookupError):
    """Nothing of this workspace was ever archived: no report is computed or stored."""


def generate(db: Database, team_id: str, period: Period, *, include_private: bool = False,
             save: bool = True) -> dict[str, Any]:
    """Compute the report of `period` (and its comparison with the period before) and store it.

    UnknownWorkspace (nothing stored) when the workspace was never archived: an empty report of a mistyped id
    would otherwise be stored and listed as if it were a real, quiet week."""
    if not channels.workspace_known(db, team_id):
        raise UnknownWorkspace(f"workspace {team_id} is not in the archive (nothing of it was ever stored)")
    started = time.perf_counter()
    document = figures.compute(figures.read_inputs(db, team_id, period, include_private=include_private))
    document["stats"]["seconds"] = round(time.perf_counter() - started, 3)
    document["include_private"] = include_private
    if save:
        saved = store.save(db, team_id, period.report_id, document, start_day=period.start, days=period.days,
                           messages=document["totals"]["messages"]["value"])
        document["stats"]["stored_chunks"] = saved.chunks
    return document


def submit(db: Database, team_id: str, period: Period, *, include_private: bool = False, post: bool = False,
           per_channel: bool = False, anonymise: bool = False) -> dict[str, Any]:
    """Queue the generation of `period` (the report worker runs it); returns the job as `job` shows it.

    UnknownWorkspace (nothing queued) when the workspace was never archived (one row read)."""
    if not channels.workspace_known(db, team_id):
        raise UnknownWorkspace(f"workspace {team_id} is not in the archive (nothing of it was ever stored)")
    options = {"start": period.start.isoformat(), "days": period.days, "include_private": include_private,
               "post": post, "per_channel": per_channel, "anonymise": anonymise}
    job_id = jobs.submit(db, team_id, period.report_id, options)
    return {"team_id": team_id, "job_id": job_id, "report_id": period.report_id, "state": "queued",
            "options": options}


def run_job(db: Database, team_id: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """One queued generation (jobs.ReportWorker): generate and store, then post when asked. Returns (messages
    counted, what the job's status shows: the stats and the delivery)."""
    options = payload.get("options") or {}
    period = Period(dt.date.fromisoformat(options["start"]), int(options["days"]))
    document = generate(db, team_id, period, include_private=bool(options.get("include_private")))
    result: dict[str, Any] = {"stats": document.get("stats", {})}
    if options.get("post"):
        try:
            delivery = post(document, db.settings.slack, per_channel=bool(options.get("per_channel")),
                            anonymised=bool(options.get("anonymise")), db=db)
            result["delivery"] = {"posted": [{"channel": c, "ts": t} for c, t in delivery.posted],
                                  "skipped": [{"target": c, "reason": r} for c, r in delivery.skipped]}
        except blocks.PostError as exc:
            result["delivery"] = {"posted": [], "skipped": [], "error": str(exc)}
    return document["totals"]["messages"]["value"], result


def job(db: Database, team_id: str, job_id: str) -> dict[str, Any] | None:
    return store.job(db, team_id, job_id)


def get(db: Database, team_id: str, report_id: str) -> dict[str, Any] | None:
    return store.load(db, team_id, report_id)


def listing(db: Database, team_id: str, *, limit: int, before: str = "~") -> tuple[list[dict[str, Any]], str | None]:
    return store.listing(db, team_id, limit=limit, before=before)


def post(document: dict[str, Any], slack: SlackSettings, *, channel: str | None = None, per_channel: bool = False,
         dm_users: tuple[str, ...] | None = None, anonymised: bool = False,
         db: Database | None = None) -> blocks.Delivery:
    """Post a report with the workspace's bot token (blocks.PostError when Slack refuses the workspace post):
    with `db`, the installed one (installations.bot_token), else the environment's."""
    try:
        token = (installations.bot_token(db, document["team_id"], env=slack) if db is not None
                 else slack.token_for(document["team_id"]))
    except installations.NoToken as exc:
        raise blocks.PostError(str(exc)) from None
    if not token:
        raise blocks.PostError(f"no bot token for workspace {document['team_id']} (CHRONICLE_SLACK_BOT_TOKENS)")
    doc = anonymise.anonymise(document) if anonymised else document
    web = blocks.client(token, slack.api_url)
    # Personal DMs name the reader's own figures: never sent from an anonymised report.
    dms = () if anonymised else slack.report_dm_users if dm_users is None else dm_users
    return blocks.post(web, doc, channel=channel or slack.report_channel, per_channel=per_channel, dm_users=dms)
