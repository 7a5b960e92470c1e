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
    def from_row(cls, row: Any, counts: Any = None) -> Account:
        """A network_accounts row and its network_account_counts row (absent counts read as 0)."""
        if counts is None:
            return cls(row.account_id, row.username)
        return cls(row.account_id, row.username, counts.followers or 0, counts.follows or 0)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(slots=True)
class Post:
    """A post. Treated as immutable (`with_likes` and `dataclasses.replace` give new values); not frozen only
    because a frozen dataclass is built about 2.5x slower, and a home page by likes builds 825 of them."""

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
        col = getattr
        return cls(row.post_id, author_id if author_id is not None else row.author_id, to_utc(row.posted_at),
                   col(row, "author_username", None), col(row, "original_author", None), col(row, "content", None),
                   col(row, "language", None), col(row, "country", None), col(row, "latitude", None),
                   col(row, "longitude", None), col(row, "like_count", None) or 0, col(row, "share_count", None) or 0)

    def with_likes(self, like_count: int) -> Post:
        # Positional construction: dataclasses.replace costs about 10x more, and Q4 by likes calls this 800 times.
        return Post(self.post_id, self.author_id, self.posted_at, self.author_username, self.original_author,
                    self.content, self.language, self.country, self.latitude, self.longitude, like_count,
                    self.share_count)

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "posted_at": iso(self.posted_at)}

    def api_json(self) -> dict[str, Any]:
        """What schemas.PostSchema dumps (the API's contract), built directly: a home page answers 25 of them, and
        marshmallow spent ~12 calls per field (tests/network/test_api_json.py holds them equal)."""
        return {"post_id": self.post_id, "author_id": self.author_id, "like_count": self.like_count,
                "author_username": self.author_username, "content": self.content, "language": self.language,
                "country": self.country, "latitude": self.latitude, "longitude": self.longitude,
                "original_author": self.original_author, "posted_at": self.posted_at.isoformat(),
                "share_count": self.share_count}
