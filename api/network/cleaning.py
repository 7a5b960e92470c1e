"""Cleaning of the raw files into load-ready CSVs (used by cleaning_scripts/ and the built-in sample).

Both steps stream their inputs: memory grows with the number of accounts and posts (tens of thousands of
small entries), never with the number of edges or likes.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import random
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from api.network.common import generated_username, iso, stable_id

Progress = Callable[[int], None]
POST_COLUMNS = ["author", "content", "country", "date_time", "id", "language", "latitude", "longitude",
                "number_of_likes", "number_of_shares"]
CLEAN_POST_COLUMNS = ["post_id", "author_id", "author_username", "original_author", "original_id", "posted_at",
                      "content", "language", "country", "latitude", "longitude", "original_likes", "share_count"]
_BUCKETS = 32  # edge dedup spills to this many files, so each in-memory set holds ~1/32 of the edges
_PROGRESS_EVERY = 5_000  # input rows between two progress callbacks (a callback per row slows cleaning ~2x)

# How to read an edge line "A B". SNAP documents its ego-Twitter edges as "A follows B"; seed 004's scripts
# read the columns the other way ("user follower": B follows A). The reading decides who leads Q2.
FOLLOWER_FOLLOWEE, FOLLOWEE_FOLLOWER = "follower-followee", "followee-follower"
EDGE_ORDERS = (FOLLOWER_FOLLOWEE, FOLLOWEE_FOLLOWER)
DEFAULT_EDGE_ORDER = FOLLOWER_FOLLOWEE
# Whose account a real post goes to: the account named after its author ("own"), or one of the `top`
# most-followed accounts by a hash of the post id ("spread", the first versions' behaviour).
OWN, SPREAD = "own", "spread"
AUTHOR_MODES = (OWN, SPREAD)


@dataclasses.dataclass
class Report:
    read: int = 0
    written: int = 0
    dropped: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    repaired: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    extra: dict = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"read": self.read, "written": self.written, "dropped": dict(self.dropped),
                "repaired": dict(self.repaired), **self.extra}


def _noop(_n: int) -> None:
    return None


class _Batched:
    """Calls `progress` every _PROGRESS_EVERY units and once more for the rest (`flush`), so the callbacks
    add up to exactly the units counted."""

    def __init__(self, progress: Progress) -> None:
        self.progress, self.pending = progress, 0

    def __call__(self, n: int) -> None:
        self.pending += n
        if self.pending >= _PROGRESS_EVERY:
            self.progress(self.pending)
            self.pending = 0

    def flush(self) -> None:
        if self.pending:
            self.progress(self.pending)
            self.pending = 0


def count_lines(path: Path) -> int:
    """Lines of a text file, counted the way `clean_relations` reads them (the total of its progress)."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        return sum(1 for _ in handle)


def count_raw_posts(path: Path) -> int:
    """Data rows of a posts CSV, counted the way `clean_posts` reads them (the total of its progress)."""
    return sum(1 for _ in iter_raw_posts(path))


def parse_edge(parts: list[str], edge_order: str) -> tuple[int, int]:
    """The two ids of an edge line as (followee, follower) under the given reading."""
    a, b = int(parts[0]), int(parts[1])
    if edge_order == FOLLOWER_FOLLOWEE:
        return b, a
    if edge_order == FOLLOWEE_FOLLOWER:
        return a, b
    raise ValueError(f"unknown edge order {edge_order!r} (one of {', '.join(EDGE_ORDERS)})")


# -- posts CSV ------------------------------------------------------------------------------------------------
def iter_raw_posts(path: Path) -> Iterator[dict[str, str]]:
    """Rows of the raw posts CSV as dicts (the csv module handles quoted multi-line content)."""
    # utf-8-sig: a spreadsheet export may start with a byte-order mark, which must not rename `author`.
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in POST_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing columns {missing}")
        yield from reader


def count_authors(posts_path: Path) -> list[str]:
    """The post authors, most posts first (ties by name): the order in which they take the top ids."""
    counts = collections.Counter(row["author"].strip() for row in iter_raw_posts(posts_path) if row["author"])
    return [a for a, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


# -- follower relations ----------------------------------------------------------------------------------------
def clean_relations(edges_path: Path, posts_path: Path | None, out_dir: Path, *,
                    edge_order: str = DEFAULT_EDGE_ORDER, progress: Progress = _noop) -> Report:
    """edges (two ids per line, read as `edge_order`) -> accounts.csv and relations.csv (two rows per
    distinct edge). `progress` is called with the number of edge lines read (they add up to `count_lines`).

    The post authors take the ids with the most followers (most posts -> most followers); every other id
    gets a deterministic generated username.
    """
    parse_edge(["1", "2"], edge_order)  # an unknown reading fails before any file is written
    report = Report()
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / ".edges_tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    _spill_edges(edges_path, edge_order, tmp, report, _Batched(progress))
    followers, follows = _distinct_edges(tmp, report)
    accounts = set(followers) | set(follows)
    authors = count_authors(posts_path) if posts_path else []
    ranked = sorted(accounts, key=lambda a: (-followers[a], a))
    names = {acc: author for acc, author in zip(ranked, authors, strict=False)}
    if len(authors) > len(ranked):
        report.extra["authors_without_account"] = authors[len(ranked):]

    def name(acc: int) -> str:
        return names.get(acc) or generated_username(acc)

    with (out_dir / "accounts.csv").open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["account_id", "username", "follower_count", "follows_count"])
        for acc in sorted(accounts):
            writer.writerow([acc, name(acc), followers[acc], follows[acc]])
    _write_relations(out_dir / "relations.csv", tmp, name, report)
    shutil.rmtree(tmp, ignore_errors=True)
    report.extra.update(edge_order=edge_order, accounts=len(accounts), relation_rows=2 * report.written,
                        author_accounts={a: acc for acc, a in names.items()})
    return report


def _spill_edges(edges_path: Path, edge_order: str, tmp: Path, report: Report, advance: _Batched) -> None:
    """Every well-formed edge (user, follower) into one of _BUCKETS spill files by user: memory stays bounded
    whatever the number of edges. Blank, malformed and self-follow lines are counted and dropped."""
    spills = [(tmp / f"{i}.txt").open("w") for i in range(_BUCKETS)]
    try:
        with edges_path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                report.read += 1
                advance(1)
                parts = line.split()
                if not parts:
                    report.dropped["blank line"] += 1
                    continue
                if len(parts) != 2 or not all(p.isdigit() for p in parts):
                    report.dropped["malformed line (expected two integer ids)"] += 1
                    continue
                user, follower = parse_edge(parts, edge_order)  # user: the account being followed
                if user == follower:
                    report.dropped["self-follow"] += 1
                    continue
                spills[user % _BUCKETS].write(f"{user} {follower}\n")
    finally:
        advance.flush()
        for f in spills:
            f.close()


def _distinct_edges(tmp: Path, report: Report) -> tuple[collections.Counter, collections.Counter]:
    """Each spill bucket's distinct edges, sorted by user, into `u<i>.txt` (duplicates counted and dropped);
    returns (followers per account, follows per account)."""
    followers: collections.Counter = collections.Counter()
    follows: collections.Counter = collections.Counter()
    for i in range(_BUCKETS):
        seen: set[tuple[int, int]] = set()
        with (tmp / f"{i}.txt").open() as spill:
            for line in spill:
                a, b = line.split()
                edge = (int(a), int(b))
                if edge in seen:
                    report.dropped["duplicate edge"] += 1
                    continue
                seen.add(edge)
                followers[edge[0]] += 1
                follows[edge[1]] += 1
        with (tmp / f"u{i}.txt").open("w") as unique:  # this bucket's distinct edges, grouped by user
            unique.writelines(f"{a} {b}\n" for a, b in sorted(seen))
    return followers, follows


def _write_relations(path: Path, tmp: Path, name: Callable[[int], str], report: Report) -> None:
    """relations.csv: rows grouped by partition (all followers of one account, then all follows of one
    account), so the loader can write each group as one single-partition batch."""
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["account_id", "account_username", "rel_type", "target_id", "target_username"])
        by_follower = [(tmp / f"f{i}.txt").open("w") for i in range(_BUCKETS)]
        try:
            for i in range(_BUCKETS):
                with (tmp / f"u{i}.txt").open() as unique:
                    for line in unique:
                        a, b = line.split()
                        user, follower = int(a), int(b)
                        writer.writerow([user, name(user), "follower", follower, name(follower)])
                        by_follower[follower % _BUCKETS].write(f"{follower} {user}\n")
                        report.written += 1
        finally:
            for f in by_follower:
                f.close()
        for i in range(_BUCKETS):
            with (tmp / f"f{i}.txt").open() as spill:
                pairs = sorted(tuple(map(int, line.split())) for line in spill)
            for follower, user in pairs:
                writer.writerow([follower, name(follower), "follows", user, name(user)])


# -- posts and likes -------------------------------------------------------------------------------------------
def parse_date(value: str, order: str = "dmy") -> datetime | None:
    """`04/03/2017 11:47` -> aware UTC datetime (day first by default), None when it is not a date."""
    fmt = "%d/%m/%Y %H:%M" if order == "dmy" else "%m/%d/%Y %H:%M"
    value = value.strip()
    for f in (fmt, fmt + ":%S"):
        try:
            return datetime.strptime(value, f).replace(tzinfo=UTC)
        except ValueError:
            continue
    try:  # already ISO 8601
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _int(value: str) -> int | None:
    value = value.strip()
    if not value:
        return 0
    try:
        return int(float(value)) if any(c in value for c in ".eE") else int(value)
    except ValueError:
        return None


def read_accounts(accounts_path: Path) -> list[tuple[int, str, int, int]]:
    with accounts_path.open(newline="") as handle:
        reader = csv.reader(handle)
        next(reader)
        return [(int(a), u, int(f), int(g)) for a, u, f, g in reader]


def clean_posts(posts_path: Path, accounts_path: Path, out_dir: Path, *, like_rate: float = 0.001,
                seed: int = 4, date_order: str = "dmy", authors: str = OWN, top: int = 100,
                progress: Progress = _noop) -> Report:
    """posts CSV -> posts.csv (repaired ids, ISO dates, each post on its author's account) and likes.csv.

    Owner: with `authors="own"` a post goes to the account that bears its author's name (clean_relations
    named the most-followed accounts after the authors), so that account shows exactly its author's posts;
    an author without such an account (more authors than accounts, or another accounts.csv) is spread as
    below and counted in the report. With `authors="spread"` every post goes to one of the `top`
    most-followed accounts by a hash of its id. `original_author` keeps the author's name either way.
    Ids: a plain integer id that was not seen before is kept; an id in scientific notation (precision lost)
    or a repeated one gets a stable id hashed from author, date and content. Exact duplicate rows are dropped.
    Likes: round(number_of_likes * like_rate) distinct accounts per post, drawn with a per-post seed.
    `progress` is called with the number of raw rows read (they add up to `count_raw_posts`).
    """
    if authors not in AUTHOR_MODES:
        raise ValueError(f"unknown authors mode {authors!r} (one of {', '.join(AUTHOR_MODES)})")
    report = Report()
    advance = _Batched(progress)
    out_dir.mkdir(parents=True, exist_ok=True)
    accounts = read_accounts(accounts_path)
    ranked = sorted(accounts, key=lambda a: (-a[2], a[0]))[:top]
    named = {a[1]: a for a in accounts} if authors == OWN else {}
    spread_authors: collections.Counter = collections.Counter()
    on_own = 0  # posts that sit on the account bearing their author's name
    all_ids = sorted(a[0] for a in accounts)
    ids = _PostIds()
    likes_written = 0
    with (out_dir / "posts.csv").open("w", newline="", encoding="utf-8") as pout, \
            (out_dir / "likes.csv").open("w", newline="") as lout:
        pw, lw = csv.writer(pout), csv.writer(lout)
        pw.writerow(CLEAN_POST_COLUMNS)
        lw.writerow(["post_id", "user_id"])
        for row in iter_raw_posts(posts_path):
            report.read += 1
            advance(1)
            post = _checked_post(row, date_order, report)
            if post is None:
                continue
            author, posted, likes, shares = post
            post_id = ids.new_id(row, author, report)
            if post_id is None:
                continue
            owner = named.get(author)
            if owner is None:
                owner = ranked[stable_id(str(post_id)) % len(ranked)]
                spread_authors[author] += 1
            on_own += owner[1] == author
            lat, lon = (row.get("latitude") or "").strip(), (row.get("longitude") or "").strip()
            pw.writerow([post_id, owner[0], owner[1], author, row["id"].strip(), iso(posted), row.get("content") or "",
                         (row.get("language") or "").strip(), (row.get("country") or "").strip(), lat, lon,
                         likes, shares])
            report.written += 1
            likes_written += _write_likes(lw, post_id, likes, like_rate, seed, all_ids)
    advance.flush()
    report.extra.update(likes=likes_written, like_rate=like_rate, authors=authors,
                        posts_on_own_account=on_own)
    if spread_authors:
        report.extra.update(spread_over=len(ranked), spread_posts_by_author=dict(sorted(spread_authors.items())))
    return report


def _checked_post(row: dict[str, str], date_order: str, report: Report
                  ) -> tuple[str, datetime, int, int] | None:
    """(author, posted, likes, shares) of a raw row, or None with the reason counted in `report.dropped`."""
    author = (row.get("author") or "").strip()
    if not author or None in row or row.get("number_of_likes") is None:
        report.dropped["malformed row (missing author or columns)"] += 1
        return None
    posted = parse_date(row["date_time"] or "", date_order)
    if posted is None:
        report.dropped["unparseable date_time"] += 1
        return None
    likes, shares = _int(row["number_of_likes"]), _int(row["number_of_shares"] or "")
    if likes is None or shares is None or likes < 0:
        report.dropped["non-numeric number_of_likes/shares"] += 1
        return None
    return author, posted, likes, shares


class _PostIds:
    """Rows seen (exact duplicates dropped) and post ids given: a plain integer id seen for the first time is
    kept; an id in scientific notation (precision lost) or a repeated one gets a stable id hashed from author,
    date and content."""

    def __init__(self) -> None:
        self.seen_rows: set[int] = set()
        self.seen_ids: set[int] = set()

    def new_id(self, row: dict[str, str], author: str, report: Report) -> int | None:
        """The post id of `row`, or None for an exact duplicate of a row seen before (counted)."""
        content = row.get("content") or ""
        fingerprint = stable_id(author, row["date_time"], content, row["id"])
        if fingerprint in self.seen_rows:
            report.dropped["exact duplicate row"] += 1
            return None
        self.seen_rows.add(fingerprint)
        raw_id = row["id"].strip()
        post_id = int(raw_id) if raw_id.isdigit() and 0 < int(raw_id) < 2**63 else None
        if post_id is None:
            report.repaired["id in scientific notation or invalid"] += 1
        elif post_id in self.seen_ids:
            report.repaired["id collision"] += 1
            post_id = None
        salt = 0
        while post_id is None or post_id in self.seen_ids:
            post_id = stable_id(author, row["date_time"], content, str(salt))
            salt += 1
        self.seen_ids.add(post_id)
        return post_id


def _write_likes(writer: Any, post_id: int, likes: int, like_rate: float, seed: int, all_ids: list[int]) -> int:
    """round(likes * like_rate) distinct accounts liking the post, drawn with a per-post seed; returns how many."""
    k = min(round(likes * like_rate), len(all_ids))
    if k:
        rng = random.Random(seed * 1_000_003 + post_id)
        for idx in sorted(rng.sample(range(len(all_ids)), k)):
            writer.writerow([post_id, all_ids[idx]])
    return k
