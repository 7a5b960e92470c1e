"""Independent brute-force model of a network, in plain Python, straight from the input files.

Relations come from the raw edges file, not from the cleaned relation rows: a line "A B" means A follows B
(SNAP's documented reading, `follower-followee`, the default) or B follows A (`followee-follower`, seed 004's
reading), as the cleaning was told; posts and
likes from the cleaned posts.csv / likes.csv (ids and owners are the cleaning's output), usernames from
accounts.csv. Every query is answered by looking at everything: no index, no cache, no cap tricks.
"""

from __future__ import annotations

import collections
import csv
from datetime import datetime
from pathlib import Path

from api.network.tokens import index_terms


class Reference:
    def __init__(self, raw_edges: Path, clean_dir: Path, edge_order: str = "follower-followee") -> None:
        assert edge_order in ("follower-followee", "followee-follower"), edge_order
        self.usernames: dict[int, str] = {}
        with (clean_dir / "accounts.csv").open(newline="") as f:
            for row in csv.DictReader(f):
                self.usernames[int(row["account_id"])] = row["username"]
        self.edges: set[tuple[int, int]] = set()  # (follower, followee)
        for line in raw_edges.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] != parts[1]:
                a, b = int(parts[0]), int(parts[1])
                self.edges.add((a, b) if edge_order == "follower-followee" else (b, a))
        self.posts: dict[int, dict] = {}
        with (clean_dir / "posts.csv").open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                self.posts[int(row["post_id"])] = {
                    "post_id": int(row["post_id"]), "author_id": int(row["author_id"]),
                    "posted_at": datetime.fromisoformat(row["posted_at"].replace("Z", "+00:00")),
                    "content": row["content"]}
        self.likes: set[tuple[int, int]] = set()  # (post, user)
        self._counted: collections.Counter | None = None  # like count per post, from `likes`
        with (clean_dir / "likes.csv").open(newline="") as f:
            for row in csv.DictReader(f):
                self.likes.add((int(row["post_id"]), int(row["user_id"])))

    # -- derived ---------------------------------------------------------------------------------------------
    def followers(self, account: int) -> set[int]:
        return {a for a, b in self.edges if b == account}

    def follows(self, account: int) -> set[int]:
        return {b for a, b in self.edges if a == account}

    def like_count(self, post_id: int) -> int:
        if self._counted is None:  # recounted from the like pairs after every change
            self._counted = collections.Counter(p for p, _ in self.likes)
        return self._counted[post_id]

    # -- queries ---------------------------------------------------------------------------------------------
    def q1(self, account: int) -> list[int]:
        mine = [p for p in self.posts.values() if p["author_id"] == account]
        mine.sort(key=lambda p: (p["posted_at"], p["post_id"]), reverse=True)
        return [p["post_id"] for p in mine]

    def q2(self, n: int = 100) -> list[tuple[int, int]]:
        counts: dict[int, int] = {}
        for _, b in self.edges:
            counts[b] = counts.get(b, 0) + 1
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return ranked[:n]

    def q3(self, n: int = 100) -> list[tuple[int, int]]:
        top = {a for a, _ in self.q2(100)}
        counts: dict[int, int] = {}
        for a, b in self.edges:
            if b in top:
                counts[a] = counts.get(a, 0) + 1
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]

    def q4(self, account: int, order: str, cap: int, page: int = 25) -> tuple[int, int, list[int]]:
        followees = self.follows(account)
        timeline = [p for p in self.posts.values() if p["author_id"] in followees]
        timeline.sort(key=lambda p: (p["posted_at"], p["post_id"]), reverse=True)
        window = timeline[:cap]
        if order == "likes":
            likes = {p["post_id"]: self.like_count(p["post_id"]) for p in window}
            window = sorted(window, key=lambda p: (-likes[p["post_id"]], -p["post_id"]))
        return len(self.followers(account)), len(followees), [p["post_id"] for p in window[:page]]

    def q6(self, query: list[str], n: int = 25) -> list[int]:
        wanted = set(query)
        # Terms as the tokeniser defines them (its rules are checked one by one in test_tokens.py).
        hits = [p for p in self.posts.values() if wanted <= index_terms(p["content"])]
        # Most-liked first, then the newest (time, then id).
        hits.sort(key=lambda p: (-self.like_count(p["post_id"]), -p["posted_at"].timestamp(), -p["post_id"]))
        return [p["post_id"] for p in hits[:n]]

    # -- mutations -------------------------------------------------------------------------------------------
    def follow(self, follower: int, followee: int) -> None:
        self.edges.add((follower, followee))

    def unfollow(self, follower: int, followee: int) -> None:
        self.edges.discard((follower, followee))

    def like(self, post: int, user: int) -> None:
        self.likes.add((post, user))
        self._counted = None

    def unlike(self, post: int, user: int) -> None:
        self.likes.discard((post, user))
        self._counted = None

    def add_post(self, post_id: int, author: int, posted_at: datetime, content: str) -> None:
        self.posts[post_id] = {"post_id": post_id, "author_id": author, "posted_at": posted_at, "content": content}

    def delete_post(self, post_id: int) -> None:
        del self.posts[post_id]
        self.likes = {(p, u) for p, u in self.likes if p != post_id}
        self._counted = None
