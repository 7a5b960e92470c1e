"""What the CLI and the HTTP endpoints call: generate (read, compute, store), get, list, post."""

from __future__ import annotations

import time
from typing import Any

from api.db import Database
from api.slack import channels
from api.slack.reports import anonymise, blocks, figures, store
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


def get(db: Database, team_id: str, report_id: str) -> dict[str, Any] | None:
    return store.load(db, team_id, report_id)


def listing(db: Database, team_id: str, *, limit: int, before: str = "~") -> tuple[list[dict[str, Any]], str | None]:
    return store.listing(db, team_id, limit=limit, before=before)


def post(document: dict[str, Any], slack: SlackSettings, *, channel: str | None = None, per_channel: bool = False,
         dm_users: tuple[str, ...] | None = None, anonymised: bool = False) -> blocks.Delivery:
    """Post a report with the workspace's bot token (blocks.PostError when Slack refuses the workspace post)."""
    token = slack.token_for(document["team_id"])
    if not token:
        raise blocks.PostError(f"no bot token for workspace {document['team_id']} (CHRONICLE_SLACK_BOT_TOKENS)")
    doc = anonymise.anonymise(document) if anonymised else document
    web = blocks.client(token, slack.api_url)
    # Personal DMs name the reader's own figures: never sent from an anonymised report.
    dms = () if anonymised else slack.report_dm_users if dm_users is None else dm_users
    return blocks.post(web, doc, channel=channel or slack.report_channel, per_channel=per_channel, dm_users=dms)
