"""What a message's content (attachments, Block Kit blocks: payloads.message_content) says, as text. Pure.

Search indexes and confirms a message by the words a reader sees: its text, and the text of its attachments
(pretext, author, title, text, fields, footer; the fallback only when an attachment shows nothing else) and
of its blocks (text objects of sections, headers, contexts, fields; rich text with its links, mentions and
emoji as the mrkdwn references the tokeniser reads). Bounded: at most MAX_PARTS strings, MAX_DEPTH levels of
nesting and MAX_CHARS characters, whatever the payload (content is untrusted JSON of any shape).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

MAX_PARTS = 2_000
MAX_DEPTH = 12
MAX_CHARS = 200_000

_ATTACHMENT_TEXT = ("pretext", "author_name", "title", "text", "footer")
# Rich text element -> how it reads as mrkdwn (links and mentions as references: search terms of their own).
_LINK_SCHEMES = ("http://", "https://", "mailto:")


# The JSON type of each content field whose shape Slack documents as a container (content_schemas.py types the
# inside). A payload that sends another type is not Slack's: refused (400, or skipped with its reason on import).
_LIST_OF_OBJECTS = ("attachments", "blocks", "files")
_OBJECTS = ("file", "bot_profile", "user_profile", "edited", "comment", "metadata", "room", "icons")


def shape_error(content: dict[str, Any]) -> str | None:
    """Why this content cannot be a Slack message's (a documented field of the wrong JSON type), else None."""
    for field in _LIST_OF_OBJECTS:
        value = content.get(field)
        if value is not None and not (isinstance(value, list) and all(isinstance(v, dict) for v in value)):
            return f"{field} must be a list of objects"
    for field in _OBJECTS:
        value = content.get(field)
        if value is not None and not isinstance(value, dict):
            return f"{field} must be an object"
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _attachment_parts(attachment: dict[str, Any]) -> Iterator[str]:
    shown = False
    for field in _ATTACHMENT_TEXT:
        value = _str(attachment.get(field))
        if value is not None:
            shown = True
            yield value
    fields = attachment.get("fields")
    for f in fields if isinstance(fields, list) else ():
        if isinstance(f, dict):
            for key in ("title", "value"):
                value = _str(f.get(key))
                if value is not None:
                    shown = True
                    yield value
    blocks = attachment.get("blocks")  # attachments may carry blocks of their own
    if isinstance(blocks, list):
        for part in _block_parts(blocks, 1):
            shown = True
            yield part
    if not shown and _str(attachment.get("fallback")) is not None:
        yield attachment["fallback"]


def _rich_element(element: dict[str, Any]) -> str | None:
    kind = element.get("type")
    if kind == "text":
        return _str(element.get("text"))
    if kind == "link":
        url = _str(element.get("url"))
        label = _str(element.get("text"))
        if url is None:
            return label
        return f"<{url}|{label}>" if label else f"<{url}>"
    if kind == "user" and _str(element.get("user_id")):
        return f"<@{element['user_id']}>"
    if kind == "channel" and _str(element.get("channel_id")):
        return f"<#{element['channel_id']}>"
    if kind == "usergroup" and _str(element.get("usergroup_id")):
        return f"<!subteam^{element['usergroup_id']}>"
    if kind == "broadcast" and _str(element.get("range")):
        return f"<!{element['range']}>"
    if kind == "emoji" and _str(element.get("name")):
        return f":{element['name']}:"
    if kind == "date":
        return _str(element.get("fallback"))
    return None


def _block_parts(value: Any, depth: int) -> Iterator[str]:
    """The text of a block structure: text objects and rich text elements, depth first."""
    if depth > MAX_DEPTH:
        return
    if isinstance(value, list):
        for item in value:
            yield from _block_parts(item, depth + 1)
        return
    if not isinstance(value, dict):
        return
    kind = value.get("type")
    if kind in ("plain_text", "mrkdwn"):
        text = _str(value.get("text"))
        if text is not None:
            yield text
        return
    if kind in ("text", "link", "user", "channel", "usergroup", "broadcast", "emoji", "date"):
        part = _rich_element(value)
        if part is not None:
            yield part
        return
    if kind == "image":
        alt = _str(value.get("alt_text"))
        if alt is not None:
            yield alt
    for key in ("text", "title", "fields", "elements", "accessory", "label", "placeholder", "options"):
        child = value.get(key)
        if isinstance(child, (dict, list)):
            yield from _block_parts(child, depth + 1)


def content_parts(content: dict[str, Any] | None, *, has_text: bool = False) -> Iterator[str]:
    """The strings a reader sees in a message's attachments and blocks, in order. With `has_text`, rich text
    blocks are left out: a person's message carries its text twice, as `text` (which Slack derives from the
    rich text) and as one rich_text block, and indexing both would tokenise every message twice."""
    if not content:
        return
    attachments = content.get("attachments")
    for attachment in attachments if isinstance(attachments, list) else ():
        if isinstance(attachment, dict):
            yield from _attachment_parts(attachment)
    blocks = content.get("blocks")
    if isinstance(blocks, list):
        for block in blocks:
            if not (has_text and isinstance(block, dict) and block.get("type") == "rich_text"):
                yield from _block_parts(block, 1)


def content_text(content: dict[str, Any] | None, *, has_text: bool = False) -> str:
    """content_parts joined by newlines, bounded (MAX_PARTS strings, MAX_CHARS characters)."""
    out: list[str] = []
    size = 0
    for i, part in enumerate(content_parts(content, has_text=has_text)):
        if i >= MAX_PARTS or size >= MAX_CHARS:
            break
        out.append(part[:MAX_CHARS - size])
        size += len(out[-1]) + 1
    return "\n".join(out)


def with_content_text(text: str | None, content: dict[str, Any] | None) -> str | None:
    """The message text followed by its content's text: what search indexes and confirms."""
    extra = content_text(content, has_text=bool(text))
    if not extra:
        return text
    return f"{text}\n{extra}" if text else extra


def has_link(text: str | None, content: dict[str, Any] | None) -> bool:
    """Whether the message links somewhere: a link in its text or content, an unfurl, a linked title."""
    searchable = with_content_text(text, content) or ""
    if any(f"<{scheme}" in searchable for scheme in _LINK_SCHEMES):
        return True
    attachments = (content or {}).get("attachments")
    for attachment in attachments if isinstance(attachments, list) else ():
        if isinstance(attachment, dict) and any(
                isinstance(attachment.get(k), str) and attachment[k].startswith(_LINK_SCHEMES)
                for k in ("title_link", "from_url", "original_url")):
            return True
    return False
