"""The network's domain values: an account and a post, each built from a row in one place (`from_row`) and
turned into JSON in one place (`to_json`; the HTTP schemas read the same attributes)."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from api.network.common import iso, to_utc


@dataclasses.dataclass(frozen=True)
class Account:
    account_id: int
    username: str | None
    follower_count: int = 0
    follows_count: int = 0

    @classmethod
    def from_row(cls, row: Any) -> Account:
        """A network_accounts row (absent counts read as 0)."""
        return cls(row.account_id, row.username, row.follower_count or 0, row.follows_count or 0)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Post:
    post_id: int
    author_id: int
    posted_at: datetime  # aware, UTC, millisecond precision (what Cassandra keeps)
    author_username: str | None = None
    original_author: str | None = None
    content: str | None = None
    language: str | None = None
    country: str | None = None
    latitude: float | None = None
    longitude: float | None = None
    like_count: int = 0
    share_count: int = 0

    @classmethod
    def from_row(cls, row: Any, author_id: int | None = None) -> Post:
        """A row of any table holding posts (posts_by_id, posts_by_author, a home cache, the word index);
        columns a table does not have read as absent. `author_id` when the row's key does not carry it."""
        def col(name: str) -> Any:
            return getattr(row, name, None)

        return cls(
            post_id=row.post_id, author_id=author_id if author_id is not None else row.author_id,
            posted_at=to_utc(row.posted_at), author_username=col("author_username"),
            original_author=col("original_author"), content=col("content"), language=col("language"),
            country=col("country"), latitude=col("latitude"), longitude=col("longitude"),
            like_count=col("like_count") or 0, share_count=col("share_count") or 0)

    def with_likes(self, like_count: int) -> Post:
        return dataclasses.replace(self, like_count=like_count)

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "posted_at": iso(self.posted_at)}
