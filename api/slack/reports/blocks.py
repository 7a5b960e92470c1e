"""The report as Slack posts (Block Kit), and their delivery with slack-sdk's chat.postMessage.

As seed 000 did: the workspace report to a configured channel, each channel's report to `#<channel>-stats`
(when that channel exists), and a personal summary by DM to users who opted in. A post holds at most 50 blocks
(Slack's limit): a longer report goes out as several messages, in order. Section texts stay under 3,000
characters and fields under 10 per section.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

MAX_BLOCKS = 50
_MAX_TEXT = 2900  # under Slack's 3,000 per section text, with room for a line's markup
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

Block = dict[str, Any]


def _change(f: dict[str, Any], pct: bool = False) -> str:
    c = f.get("change")
    if c is None:
        return ""
    if pct:
        return f" ({'+' if c >= 0 else ''}{c * 100:.1f} pts)"
    return f" ({'+' if c >= 0 else ''}{c})"


def _header(text: str) -> Block:
    return {"type": "header", "text": {"type": "plain_text", "text": text[:150]}}


def _context(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:_MAX_TEXT]}]}


def _fields(pairs: list[tuple[str, str]]) -> list[Block]:
    return [{"type": "section", "fields": [{"type": "mrkdwn", "text": f"*{k}*\n{v}"} for k, v in pairs[i:i + 10]]}
            for i in range(0, len(pairs), 10)]


def _lines(title: str, lines: list[str]) -> list[Block]:
    """A titled list, split into sections under Slack's text limit."""
    if not lines:
        return []
    out: list[Block] = []
    current = f"*{title}*"
    for line in lines:
        if len(current) + 1 + len(line) > _MAX_TEXT:
            out.append({"type": "section", "text": {"type": "mrkdwn", "text": current}})
            current = line
        else:
            current += "\n" + line
    out.append({"type": "section", "text": {"type": "mrkdwn", "text": current}})
    return out


def _names(doc: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    names = doc.get("names", {})
    return names.get("users", {}), names.get("channels", {})


def workspace_blocks(doc: dict[str, Any]) -> list[Block]:
    """The workspace report: totals, channels, people, activity, reactions, mentions, threads, top messages."""
    users, chans = _names(doc)
    t, u = doc["totals"], doc["users"]
    period = doc["period"]
    blocks: list[Block] = [
        _header(f"Activity report {period['start']} – {period['end']}"),
        _context(f"{period['days']} days (UTC), compared with {doc['previous']['start']} – {doc['previous']['end']}"
                 + (" · anonymised" if doc.get("anonymised") else "")),
        *_fields([(k.replace("_", " ").capitalize(), f"{f['value']}{_change(f)}") for k, f in t.items()]),
        *_fields([
            ("Users making half the messages", f"{u['users_for_half']['value']}{_change(u['users_for_half'])}"),
            ("Top 10 posters' share", f"{u['top10_share']['value'] * 100:.1f}%{_change(u['top10_share'], True)}"),
            ("Messages per poster", f"avg {u['messages_per_poster']['average']['value']}, "
                                    f"median {u['messages_per_poster']['median']['value']}"),
            ("Words per poster", f"avg {u['words_per_poster']['average']['value']}, "
                                 f"median {u['words_per_poster']['median']['value']}"),
        ]),
        {"type": "divider"},
    ]
    blocks += _lines("Channels", [
        f"#{chans.get(c['channel'], c['channel'])}: {c['messages']['value']} messages{_change(c['messages'])}, "
        f"{c['words']['value']} words" for c in doc["channels"]])
    blocks += _lines("People", [
        f"{r['rank']['value']}. {users.get(r['user'], r['user'])}: {r['messages']['value']} messages"
        f"{_change(r['messages'])}, {r['share']['value'] * 100:.1f}% (cumulative {r['cumulative_share'] * 100:.1f}%)"
        for r in u["rows"] if r["rank"]["value"] is not None])
    weekdays = doc["activity"]["utc_weekday"]
    blocks += _lines("Activity by weekday (UTC)", [
        " · ".join(f"{_WEEKDAYS[i]} {f['value']}" for i, f in enumerate(weekdays))])
    blocks += _lines("Time zones", [f"{z['tz']}: {z['messages']['value']}" for z in doc["activity"]["timezones"]])
    blocks.append({"type": "divider"})
    r = doc["reactions"]
    blocks += _lines("Top reactions", [f":{e['emoji']}: {e['count']['value']}{_change(e['count'])}" for e in r["top"]])
    blocks += _lines("Who reacted to whom", [
        f"{users.get(p['from'], p['from'])} → {users.get(p['to'], p['to'])}: {p['count']['value']}"
        for p in r["pairs"]])
    blocks += _lines("Mentions made", [f"{users.get(m['user'], m['user'])}: {m['count']['value']}"
                                       for m in doc["mentions"]["made"]])
    blocks += _lines("Mentions received", [f"{users.get(m['user'], m['user'])}: {m['count']['value']}"
                                           for m in doc["mentions"]["received"]])
    blocks += _lines("Thread responders", [
        f"{users.get(x['user'], x['user'])}: {x['replies']['value']} replies in {x['threads']['value']} threads"
        for x in doc["threads"]["responders"]])
    for key, label, unit in (("most_reacted", "Most reacted messages", "reactions"),
                             ("most_replied", "Most replied messages", "replies")):
        blocks += _lines(label, [
            (f"<{m['permalink']}|message> in " if m.get("permalink") else "")
            + f"#{chans.get(m['channel'], m['channel'])} by {users.get(m['user'], m['user'])}: {m[unit]} {unit}"
            for m in doc["top_messages"][key]])
    if doc["new_users"]["users"]:
        blocks += _lines("New people", [users.get(x["user"], x["user"]) for x in doc["new_users"]["users"]])
    return blocks


def channel_blocks(doc: dict[str, Any], channel_id: str) -> list[Block]:
    """One channel's report (posted to #<channel>-stats)."""
    users, chans = _names(doc)
    entry = next((c for c in doc["channels"] if c["channel"] == channel_id), None)
    if entry is None:
        return []
    name = chans.get(channel_id, channel_id)
    blocks: list[Block] = [
        _header(f"#{name}: {doc['period']['start']} – {doc['period']['end']}"),
        *_fields([("Messages", f"{entry['messages']['value']}{_change(entry['messages'])}"),
                  ("Words", f"{entry['words']['value']}{_change(entry['words'])}")]),
    ]
    blocks += _lines("Who wrote", [
        f"{users.get(u, u)}: {m}{_change({'change': m - pm})}, {w} words" for u, m, pm, w, _ in entry["users"]])
    top = next((c["top"] for c in doc["reactions"]["by_channel"] if c["channel"] == channel_id), [])
    blocks += _lines("Top reactions", [f":{e['emoji']}: {e['count']['value']}" for e in top])
    return blocks


def user_blocks(doc: dict[str, Any], user_id: str) -> list[Block]:
    """One user's summary (a DM to a user who opted in): their figures and where they wrote."""
    users, chans = _names(doc)
    row = next((r for r in doc["users"]["rows"] if r["user"] == user_id), None)
    if row is None:
        return []
    blocks: list[Block] = [
        _header(f"Your week: {doc['period']['start']} – {doc['period']['end']}"),
        *_fields([("Messages", f"{row['messages']['value']}{_change(row['messages'])}"),
                  ("Words", f"{row['words']['value']}{_change(row['words'])}"),
                  ("Rank", f"{row['rank']['value'] if row['rank']['value'] is not None else '–'}"),
                  ("Share", f"{row['share']['value'] * 100:.1f}%")]),
    ]
    blocks += _lines("Where you wrote", [
        f"#{chans.get(c['channel'], c['channel'])}: {m}"
        for c in doc["channels"] for u, m, *_ in c["users"] if u == user_id and m])
    return blocks


def split(blocks: list[Block]) -> list[list[Block]]:
    """Messages of at most 50 blocks each, in order."""
    return [blocks[i:i + MAX_BLOCKS] for i in range(0, len(blocks), MAX_BLOCKS)]


@dataclasses.dataclass
class Delivery:
    posted: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (channel, ts) per message
    skipped: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (target, reason)


class PostError(RuntimeError):
    """Slack refused the workspace post (bad token, missing chat:write, unknown channel)."""


def client(token: str, base_url: str) -> WebClient:
    return WebClient(token=token, base_url=base_url, retry_handlers=[
        ConnectionErrorRetryHandler(max_retry_count=3), RateLimitErrorRetryHandler(max_retry_count=5)])


def post(web: WebClient, doc: dict[str, Any], *, channel: str, per_channel: bool = False,
         dm_users: Iterable[str] = ()) -> Delivery:
    """Post the workspace report to `channel`; with `per_channel`, each channel's report to #<name>-stats
    (skipped, with the reason, where that channel does not exist); a DM to each user of `dm_users` who posted."""
    delivery = Delivery()
    fallback = f"Activity report {doc['report_id']}"

    def send(target: str, blocks: list[Block], *, required: bool) -> None:
        for part in split(blocks):
            try:
                answer = web.chat_postMessage(channel=target, blocks=part, text=fallback)
            except (SlackClientError, OSError) as exc:  # Slack's refusal, or Slack not reachable (after retries)
                error = (exc.response.get("error", "slack_error") if isinstance(exc, SlackApiError)
                         and exc.response is not None else f"unreachable: {exc}")
                if required:
                    raise PostError(f"chat.postMessage to {target}: {error}") from None
                delivery.skipped.append((target, error))
                return
            delivery.posted.append((answer["channel"], answer["ts"]))

    send(channel, workspace_blocks(doc), required=True)
    if per_channel:
        _, chans = _names(doc)
        for entry in doc["channels"]:
            if entry["messages"]["value"]:
                send(f"#{chans.get(entry['channel'], entry['channel'])}-stats",
                     channel_blocks(doc, entry["channel"]), required=False)
    for user_id in dm_users:
        blocks = user_blocks(doc, user_id)
        if blocks:
            send(user_id, blocks, required=False)
        else:
            delivery.skipped.append((user_id, "no messages in the period"))
    return delivery
