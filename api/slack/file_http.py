"""A stored Slack file over REST, for read tokens: the download link that messages give in `files_stored`.

The object store's URIs (`file:///...`, `s3://bucket/...`) say where Chronicle keeps files on its own hosts: they
are never sent to API clients. A message's `files_stored` maps each stored file to this route instead
(`download_links`), which checks the message's own access (workspace, private-converted channel) like
GET .../messages/<ts> and streams the stored bytes as an attachment under a sandbox CSP: whatever was uploaded to
Slack never runs as a page of Chronicle's origin.
"""

from __future__ import annotations

from typing import Any

from flask import Response, current_app, send_file
from flask_smorest import Blueprint, abort

from api.auth import require_workspace
from api.context import get_db
from api.slack import channels, files, messages
from api.slack.codec import ID_PATTERN, is_slack_id
from api.slack.schemas import error_responses, path_parameters
from api.slack.timeutil import is_ts, ts_to_us

blp = Blueprint("slack_files", __name__, description="Files of Slack messages as Chronicle stored them")

FILE_CSP = "default-src 'none'; sandbox; frame-ancestors 'none'"
_FILE_ID = {"in": "path", "name": "file_id", "required": True, "description": "Slack file id",
            "schema": {"type": "string", "pattern": ID_PATTERN}}
_errors = error_responses(blp, {401: "missing or unknown token", 403: "token not allowed",
                                404: "no such message, or the file is not stored (not fetched yet, failed, external)",
                                503: "database unavailable"})


def download_path(team_id: str, channel_id: str, ts: str, file_id: str) -> str:
    return f"/slack/teams/{team_id}/channels/{channel_id}/messages/{ts}/files/{file_id}"


def download_links(message: dict[str, Any], team_id: str, channel_id: str | None = None) -> dict[str, Any]:
    """A message as Message.to_json gives it, with `files_stored` mapping each stored file to its download path
    (never the object store's URI), under `channel_id` (the channel the client asked for; default: the message's
    own, which may be a previous id of it). Changes `message` in place and returns it."""
    stored = message.get("files_stored")
    if stored:
        channel = channel_id or message["channel_id"]
        message["files_stored"] = {file_id: download_path(team_id, channel, message["ts"], file_id)
                                   for file_id in stored}
    return message




@blp.route("/slack/teams/<team_id>/channels/<channel_id>/messages/<ts>/files/<file_id>", methods=["GET"],
           parameters=[*path_parameters("team_id", "channel_id", "ts"), _FILE_ID])
@blp.response(200, description="the stored file, as an attachment")
@blp.doc(security=[{"bearer": []}], responses={200: {"content": {
    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}})
@_errors(401, 403, 404, 503)
def stored_file(team_id: str, channel_id: str, ts: str, file_id: str):
    """A file of a message as Chronicle stored it (the link in the message's `files_stored`), with the message's
    own access checks; deleted messages' files too (as `include_deleted=true` shows them)."""
    settings = current_app.config["CHRONICLE_SETTINGS"]
    for value in (team_id, channel_id, file_id):
        if not is_slack_id(value):
            abort(404, message=f"no such id: {value[:80]!r}")
    if not is_ts(ts):
        abort(404, message=f"{ts[:40]!r} is not a Slack message timestamp")
    require_workspace(settings, team_id)
    db = get_db()
    chain = channels.id_chain(db, team_id, channel_id, full=False)
    if channels.is_private(chain):
        require_workspace(settings, team_id, private=True)
    message = messages.find(db, team_id, channels.chain_ids(chain, channel_id), ts_to_us(ts), include_deleted=True)
    if message is None or file_id not in (message.files_stored or {}):
        abort(404, message=f"file {file_id} of message {ts} is not stored")
    meta = next((f for f in message.files or () if isinstance(f, dict) and f.get("id") == file_id), {})
    try:
        body = files.open_stored(db, settings.slack, team_id, message.channel_id, message.ts, file_id)
    except (FileNotFoundError, ValueError):
        abort(404, message=f"file {file_id} is missing from the object store")
    response: Response = send_file(body, mimetype="application/octet-stream", as_attachment=True,
                                   download_name=files.download_name(meta, file_id), conditional=False, etag=False,
                                   max_age=0)
    response.headers["Content-Security-Policy"] = FILE_CSP
    response.headers["Cache-Control"] = "no-store"
    return response
