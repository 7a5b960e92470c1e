"""What the analytics read from a message's text (Slack mrkdwn): its word count and the users it mentions.

Pure functions, no database: ingest writes their results with the text (messages.message_writes), and the
report counts them. The definitions are documented in docs/slack-reports.md.
"""

from __future__ import annotations

import re

# <@U123ABC> or <@U123ABC|name>: Slack's user mention (W... for Enterprise Grid users).
_MENTION_RE = re.compile(r"<@([UW][A-Z0-9]{2,})(?:\|[^>]*)?>")


def word_count(text: str) -> int:
    """Whitespace-separated words, as seed 000 counted them (a mention or a link is one word)."""
    return len(text.split())


def mentioned_users(text: str, author: str | None) -> frozenset[str]:
    """The distinct users a text mentions, the author's mention of themself left out."""
    return frozenset(u for u in _MENTION_RE.findall(text) if u != author)
