"""Seeded generator of look-alike raw input files, with the real files' shapes and quirks.

* edges: two ids per line, space separated (SNAP twitter_combined.txt), by default `follower followee` as SNAP
  documents its edges (`edge_order`, see cleaning.EDGE_ORDERS), heavy-tailed in-degree, a few duplicate edges
  and self-loops like real crawls;
* posts: CSV `author,content,country,date_time,id,language,latitude,longitude,number_of_likes,
  number_of_shares`, 20 authors, 2009-2017, `dd/mm/yyyy HH:MM` dates, ids partly in scientific notation
  (`5.34896E+17`, so they collide), quoted multi-line content with commas and quotes, mostly empty geo
  columns, plus a few rows that cleaning must drop (exact duplicates, a bad date).
"""

from __future__ import annotations

import bisect
import csv
import itertools
import random
from datetime import datetime, timedelta
from pathlib import Path

from api.network.cleaning import DEFAULT_EDGE_ORDER, FOLLOWER_FOLLOWEE, parse_edge

AUTHORS = ("katyperry", "justinbieber", "BarackObama", "rihanna", "taylorswift13", "ladygaga", "TheEllenShow",
           "Cristiano", "YouTube", "jtimberlake", "KimKardashian", "ArianaGrande", "ddlovato", "selenagomez",
           "cnnbrk", "britneyspears", "shakira", "jimmyfallon", "twitter", "narendramodi")
_WORDS = ("love", "new", "music", "tour", "thank", "you", "fans", "today", "tonight", "video", "watch", "world",
          "happy", "birthday", "album", "show", "live", "best", "night", "day", "time", "great", "vote", "song",
          "team", "game", "family", "friends", "amazing", "proud", "news", "now", "the", "a", "to", "of", "and",
          "in", "is", "for", "on", "with", "my", "we", "so", "this", "all", "just", "be", "get", "out", "here",
          "big", "dance", "summer", "Grammy", "London", "Paris", "Tokyo", "Rio", "Mañana", "Straße", "CAFÉ",
          "premiere", "ticket", "stage", "dream", "hope", "change", "health", "climate", "election", "goal",
          "match", "movie", "book", "photo", "selfie", "cake", "party", "studio", "radio", "magic", "ocean")
_LANGS = ("en", "en", "en", "en", "es", "pt", "fr", "und", "ja", "hi")
_COUNTRIES = ("", "", "", "", "US", "GB", "BR", "IN", "FR")


def generate_edges(path: Path, *, accounts: int, edges: int, seed: int, edge_order: str = DEFAULT_EDGE_ORDER
                   ) -> int:
    """Write `edges` lines (plus a few quirks) in `edge_order`; returns the number of lines written. The
    graph is the same for either order (same seed): only the column order of the lines differs."""
    parse_edge(["1", "2"], edge_order)  # an unknown order fails before the file is opened
    snap = edge_order == FOLLOWER_FOLLOWEE
    rng = random.Random(seed)
    ids = rng.sample(range(10_000, 3_000_000_000), accounts)
    # Zipf-like popularity over a random order. At full size (offset 50, exponent 0.9) the most-followed
    # account gets ~3,200 followers and the 100th ~1,200, close to SNAP twitter_combined (max in-degree 3,383);
    # small test networks use a steeper curve so a few accounts clearly lead.
    offset, exponent = (50, 0.9) if accounts > 20_000 else (8, 1.1)
    weights = [1.0 / (rank + offset) ** exponent for rank in range(accounts)]
    cum = list(itertools.accumulate(weights))
    total = cum[-1]
    written = 0
    with path.open("w", encoding="ascii", newline="\n") as out:
        for _ in range(edges):
            user = ids[bisect.bisect_left(cum, rng.random() * total)]
            follower = ids[rng.randrange(accounts)]
            while follower == user:
                follower = ids[rng.randrange(accounts)]
            line = f"{follower} {user}\n" if snap else f"{user} {follower}\n"
            out.write(line)
            written += 1
            if written % 997 == 0:  # real crawls repeat edges now and then
                out.write(line)
                written += 1
        out.write(f"{ids[0]} {ids[0]}\n")  # a self-loop, which cleaning drops
        written += 1
    return written


def _content(rng: random.Random) -> str:
    n = rng.randint(3, 22)
    words = [rng.choice(_WORDS) if rng.random() < 0.85 else f"#{rng.choice(_WORDS)}{rng.randint(1, 99)}"
             for _ in range(n)]
    text = " ".join(words)
    roll = rng.random()
    if roll < 0.08:
        text = text.replace(" ", "\n", 2)  # quoted multi-line content
    elif roll < 0.16:
        text = f'"{text}", she said, "ok"'
    elif roll < 0.20:
        text += " https://t.co/" + "".join(rng.choice("abcdefghXYZ0123") for _ in range(10))
    return text.capitalize()


def generate_posts(path: Path, *, posts: int, seed: int) -> int:
    """Write a posts CSV of `posts` data rows (plus 2 duplicates and 1 bad-date row); returns rows written."""
    rng = random.Random(seed + 1)
    start = datetime(2009, 1, 1)
    span = int((datetime(2017, 12, 31) - start).total_seconds() // 60)
    rows = []
    for _ in range(posts):
        when = start + timedelta(minutes=rng.randrange(span))
        raw_id = rng.randrange(10**17, 9 * 10**17)
        id_text = f"{raw_id / 1e17:.5f}E+17" if rng.random() < 0.6 else str(raw_id)
        likes = int(rng.paretovariate(1.2) * 800) if rng.random() < 0.97 else 0
        geo = rng.random() < 0.05
        rows.append([
            AUTHORS[min(int(rng.expovariate(0.18)), len(AUTHORS) - 1)],
            _content(rng),
            rng.choice(_COUNTRIES),
            when.strftime("%d/%m/%Y %H:%M"),
            id_text,
            rng.choice(_LANGS),
            f"{rng.uniform(-60, 60):.6f}" if geo else "",
            f"{rng.uniform(-150, 150):.6f}" if geo else "",
            str(likes),
            str(int(likes * rng.uniform(0.05, 0.6))),
        ])
    rows.insert(len(rows) // 3, list(rows[len(rows) // 5]))  # exact duplicate rows, which cleaning drops
    rows.insert(len(rows) // 2, list(rows[len(rows) // 7]))
    rows.insert(len(rows) // 4, [AUTHORS[0], "Row with a broken date", "", "31/02/2015 25:99", "123", "en",
                                 "", "", "3", "1"])
    with path.open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["author", "content", "country", "date_time", "id", "language", "latitude", "longitude",
                         "number_of_likes", "number_of_shares"])
        writer.writerows(rows)
    return len(rows)


def generate(directory: Path, *, accounts: int, edges: int, posts: int, seed: int,
             edge_order: str = DEFAULT_EDGE_ORDER) -> tuple[Path, Path]:
    """Write `twitter_combined.txt` and `tweets.csv` into `directory`; returns (edges path, posts path)."""
    directory.mkdir(parents=True, exist_ok=True)
    edges_path, posts_path = directory / "twitter_combined.txt", directory / "tweets.csv"
    generate_edges(edges_path, accounts=accounts, edges=edges, seed=seed, edge_order=edge_order)
    generate_posts(posts_path, posts=posts, seed=seed)
    return edges_path, posts_path
