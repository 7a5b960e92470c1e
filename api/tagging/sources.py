"""What a project's items are: the archived messages/posts its source names, listed when the project is made and
resolved (text, author, time, thread context) when an item is shown.

A reference is `slack:<team>:<channel>:<ts us>` or `network:<network>:<post id>`. An item whose message or
post was deleted since the project was made resolves to `{"missing": true}`: shown as such, never an error.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

from api.db import Database
from api.network import posts, search
from api.network.tokens import query_terms
from api.slack import channels, messages, users
from api.slack.timeutil import us_to_ts

MAX_QUERY_ITEMS = 100_000  # a word-query source takes at most this many of the most-liked matching posts
_THREAD_CONTEXT = 5


class SourceError(ValueError):
    """A source that names nothing Chronicle can list (the reason is the message)."""


def _day_us(value: str, what: str) -> int:
    try:
        day = date.fromisoformat(value)
    except (TypeError, ValueError) as exc:
        raise SourceError(f"{what}: {value!r} is not a date (YYYY-MM-DD)") from exc
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()) * 1_000_000


def validate(source: dict[str, Any]) -> dict[str, Any]:
    """The source in its stored form; SourceError when it is malformed."""
    kind = source.get("kind")
    if kind == "slack":
        team, chans = source.get("team"), source.get("channels")
        if not isinstance(team, str) or not team or not isinstance(chans, list) or not chans \
                or not all(isinstance(c, str) and c for c in chans):
            raise SourceError("a slack source needs 'team' and a non-empty list of 'channels'")
        first, last = _day_us(source.get("from"), "from"), _day_us(source.get("to"), "to")
        if last < first:
            raise SourceError("'to' is before 'from'")
        return {"kind": "slack", "team": team, "channels": chans, "from": source["from"], "to": source["to"]}
    if kind == "network":
        network, authors, query = source.get("network"), source.get("authors"), source.get("query")
        if not isinstance(network, str) or not network:
            raise SourceError("a network source needs 'network'")
        if (authors is None) == (query is None):
            raise SourceError("a network source needs exactly one of 'authors' (a list of ids) or 'query'")
        if authors is not None:
            if not isinstance(authors, list) or not authors or not all(isinstance(a, int) for a in authors):
                raise SourceError("'authors' must be a non-empty list of account ids")
            return {"kind": "network", "network": network, "authors": authors}
        if not isinstance(query, str) or not query_terms(query):
            raise SourceError("'query' must hold at least one word")
        return {"kind": "network", "network": network, "query": query}
    raise SourceError("source 'kind' must be 'slack' or 'network'")


def refs(db: Database, source: dict[str, Any]) -> Iterator[str]:
    """The references of every item the source names, in a stable order (channel, then time; author, then
    time; or search rank)."""
    if source["kind"] == "slack":
        team = source["team"]
        lower = _day_us(source["from"], "from")
        upper = _day_us(source["to"], "to") + 86_400_000_000
        for channel in source["channels"]:
            rows = sorted(messages.stored_between(db, team, channel, lower, upper), key=lambda r: r.ts)
            for row in rows:
                if row.msg_ts is not None and not row.deleted:
                    yield f"slack:{team}:{channel}:{row.ts}"
    elif "authors" in source:
        network = source["network"]
        for author in source["authors"]:
            found = posts.posts_of_author(db, network, author, MAX_QUERY_ITEMS)
            for post in sorted(found, key=lambda p: (p.posted_at, p.post_id)):
                yield f"network:{network}:{post.post_id}"
    else:
        network = source["network"]
        found = search.search(db, network, query_terms(source["query"]),
                              lambda ids: posts.like_counts(db, network, ids), MAX_QUERY_ITEMS)
        for post in found.posts:
            yield f"network:{network}:{post.post_id}"


def _slack_name(db: Database, team: str, user: str | None, names: dict[str, str | None]) -> str | None:
    if user is None:
        return None
    if user not in names:
        profile = users.get(db, team, user) or {}
        names[user] = profile.get("display_name") or profile.get("real_name") or profile.get("name")
    return names[user]


def resolve(db: Database, ref: str) -> dict[str, Any]:
    """What the tagger sees of an item: text, author, time, and for a Slack reply its thread so far."""
    kind, _, rest = ref.partition(":")
    if kind == "slack":
        team, channel, ts = rest.split(":")
        chain = channels.chain_ids(channels.id_chain(db, team, channel), channel) or [channel]
        message = messages.find(db, team, chain, int(ts), include_deleted=False)
        meta = channels.current(db, team, channel)
        channel_name = (getattr(meta, "name", None) or channel) if meta is not None else channel
        if message is None:
            return {"ref": ref, "kind": "slack", "missing": True, "channel": channel_name, "thread": []}
        names: dict[str, str | None] = {}
        thread = []
        if message.thread_ts is not None and message.thread_ts != message.ts:
            parent = messages.find(db, team, chain, message.thread_ts, include_deleted=False)
            replies, _ = messages.thread(db, team, chain, message.thread_ts, limit=200, after=0,
                                         include_deleted=False)
            earlier = ([parent] if parent is not None else []) + [r for r in replies if r.ts < message.ts]
            thread = [{"author": _slack_name(db, team, m.user, names) or m.user, "text": m.text or "",
                       "time": iso(m.ts)} for m in earlier[-_THREAD_CONTEXT:]]
        return {"ref": ref, "kind": "slack", "missing": False, "text": message.text or "",
                "author": _slack_name(db, team, message.user, names) or message.user or message.username,
                "author_id": message.user, "time": iso(message.ts),
                "channel": channel_name,
                "ts": us_to_ts(message.ts), "thread": thread}
    network, _, post_id = rest.partition(":")
    post = posts.get_post(db, network, int(post_id))
    if post is None:
        return {"ref": ref, "kind": "network", "missing": True, "thread": []}
    return {"ref": ref, "kind": "network", "missing": False, "text": post.content or "",
            "author": post.author_username or str(post.author_id), "author_id": str(post.author_id),
            "time": post.posted_at.isoformat().replace("+00:00", "Z"), "channel": None, "thread": []}


def iso(us: int) -> str:
    """Epoch microseconds as ISO 8601 UTC with a Z."""
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)).isoformat().replace("+00:00", "Z")


__all__ = ["SourceError", "iso", "refs", "resolve", "validate"]
