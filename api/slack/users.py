"""Users of a workspace: profile fields, the first time Chronicle saw each user, each user's first post.

Owner of slack_users. Profiles arrive by three routes (users.list in a backfill, users.json in an export, live
`user_change` / `team_join` events) and are written `USING TIMESTAMP <Slack's updated time>`, so the newest
profile wins whatever the order of arrival. Two facts must keep the EARLIEST value instead: when Chronicle first
saw the user, and the user's first archived post (seed 000's FirstPost). They are written with an inverted write
time (`INVERTED - t`): Cassandra keeps the cell with the highest write time, which is then the smallest t. No
read before the write, no lightweight transaction, and any arrival order ends at the earliest value.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Iterable
from typing import Any

from api.caches import Cache
from api.db import Database, Params, Statement, without_none
from api.erasure import guard
from api.slack.codec import compress_json, decompress_json, is_slack_id
from api.slack.timeutil import us_to_ts

TABLES = frozenset({"slack_users"})

Write = tuple[Statement, Params]

BUCKETS = 8
# Inverted write times stay positive and far above any real event time (µs since 1970: ~1.8e15 in 2027).
INVERTED = 2**62

UPSERT_PROFILE = Statement(
    "UPDATE slack_users USING TIMESTAMP :wt SET name = :name, real_name = :real_name, "
    "display_name = :display_name, tz = :tz, tz_label = :tz_label, tz_offset = :tz_offset, deleted = :deleted, "
    "is_bot = :is_bot, is_app_user = :is_app_user, avatar_url = :avatar_url, updated_ts = :updated_ts, "
    "raw = :raw WHERE team_id = :team_id AND bucket = :bucket AND user_id = :user_id",
    name="UPSERT slack_users")
SET_FIRST_SEEN = Statement(
    "UPDATE slack_users USING TIMESTAMP ? SET first_seen = ? WHERE team_id = ? AND bucket = ? AND user_id = ?",
    name="FIRST-SEEN slack_users")
SET_FIRST_POST = Statement(
    "UPDATE slack_users USING TIMESTAMP ? SET first_post_ts = ?, first_post_channel = ? "
    "WHERE team_id = ? AND bucket = ? AND user_id = ?", name="FIRST-POST slack_users")

_COLUMNS = ("user_id, name, real_name, display_name, tz, tz_label, tz_offset, deleted, is_bot, is_app_user, "
            "avatar_url, updated_ts, first_seen, first_post_ts, first_post_channel")
SELECT_USER = Statement(
    f"SELECT {_COLUMNS} FROM slack_users WHERE team_id = ? AND bucket = ? AND user_id = ?",
    name="SELECT slack_users (one)")
SELECT_BUCKET = Statement(
    "SELECT user_id, name, real_name, display_name, tz, tz_offset, deleted, is_bot, is_app_user, first_seen, "
    "first_post_ts, first_post_channel FROM slack_users WHERE team_id = ? AND bucket = ?",
    name="SELECT slack_users (bucket)")
SELECT_TZ = Statement("SELECT tz FROM slack_users WHERE team_id = ? AND bucket = ? AND user_id = ?",
                      name="SELECT slack_users (time zone)")
SELECT_PAGE = Statement(
    f"SELECT {_COLUMNS} FROM slack_users WHERE team_id = ? AND bucket = ? AND user_id > ? LIMIT ?",
    name="SELECT slack_users (page)")
# The same page with the user object as Slack last sent it (the export's users.json).
SELECT_PAGE_RAW = Statement(
    f"SELECT {_COLUMNS}, raw FROM slack_users WHERE team_id = ? AND bucket = ? AND user_id > ? LIMIT ?",
    name="SELECT slack_users (page, raw)")


def bucket_of(user_id: str) -> int:
    return zlib.crc32(user_id.encode()) % BUCKETS


@dataclasses.dataclass(frozen=True)
class Profile:
    """A user object as Slack sends it (users.list, users.json, user_change), normalised."""

    team_id: str
    user_id: str
    updated: int  # µs: Slack's `updated`, else the time it was observed
    name: str | None = None
    real_name: str | None = None
    display_name: str | None = None
    tz: str | None = None
    tz_label: str | None = None
    tz_offset: int | None = None
    deleted: bool | None = None
    is_bot: bool | None = None
    is_app_user: bool | None = None
    avatar_url: str | None = None

    @classmethod
    def from_slack(cls, team_id: str, user: dict[str, Any], *, observed_at: int) -> Profile:
        """ValueError for an object without a Slack-shaped `id`."""
        user_id = user.get("id")
        if not is_slack_id(user_id):
            raise ValueError(f"user without a valid id: {str(user_id)[:40]!r}")
        profile = user.get("profile") if isinstance(user.get("profile"), dict) else {}
        updated = user.get("updated")
        at = (updated * 1_000_000 if isinstance(updated, int) and not isinstance(updated, bool)
              and 0 < updated < 10**11 else observed_at)

        def text(value: Any) -> str | None:
            return value if isinstance(value, str) and value else None

        def flag(value: Any) -> bool | None:
            return value if isinstance(value, bool) else None

        offset = user.get("tz_offset")
        return cls(
            team_id=team_id, user_id=user_id, updated=at, name=text(user.get("name")),
            real_name=text(user.get("real_name")) or text(profile.get("real_name")),
            display_name=text(profile.get("display_name")), tz=text(user.get("tz")),
            tz_label=text(user.get("tz_label")),
            tz_offset=offset if isinstance(offset, int) and not isinstance(offset, bool) else None,
            deleted=flag(user.get("deleted")), is_bot=flag(user.get("is_bot")),
            is_app_user=flag(user.get("is_app_user")),
            avatar_url=text(profile.get("image_192")) or text(profile.get("image_72")),
        )


def profile_writes(profile: Profile, *, seen_at: int, raw: Any = None) -> list[Write]:
    """The profile at Slack's `updated` time, and `seen_at` as first-seen time (the earliest one is kept)."""
    key = {"team_id": profile.team_id, "bucket": bucket_of(profile.user_id), "user_id": profile.user_id}
    fields = {f.name: getattr(profile, f.name) for f in dataclasses.fields(profile)
              if f.name not in ("team_id", "user_id", "updated")}
    return [
        (UPSERT_PROFILE, without_none({**key, **fields, "wt": profile.updated, "updated_ts": profile.updated,
                                       "raw": compress_json(raw) if raw is not None else None})),
        (SET_FIRST_SEEN, (INVERTED - seen_at, seen_at, key["team_id"], key["bucket"], key["user_id"])),
    ]


# The earliest first post (and first-seen time) this process has written per (team, user): a later one need not
# be written again (the stored value can only be earlier or equal). Bounded; forgetting only costs a redundant
# write, and a value is noted only once written, so the stored one is never later than the cached one.
_FIRST_POSTS = "slack.first_posts_written"
_FIRST_SEEN = "slack.first_seen_written"
_FIRST_MAX = 200_000


def _earliest(db: Database, name: str) -> Cache:
    return db.caches.lru(name, maxsize=_FIRST_MAX)


def first_post_writes(db: Database, team_id: str, user_id: str, channel_id: str, ts: int) -> list[Write]:
    """The user's first post candidate (the earliest ts wins); nothing when this process already wrote an
    earlier one."""
    known = _earliest(db, _FIRST_POSTS).get((team_id, user_id))
    if known is not None and known <= ts:
        return []
    return [(SET_FIRST_POST, (INVERTED - ts, ts, channel_id, team_id, bucket_of(user_id), user_id))]


def first_seen_writes(db: Database, team_id: str, user_ids: Iterable[tuple[str, int]]) -> list[Write]:
    """First-seen candidates (user, when: a message, a reaction, a join the archive shows them in); the
    earliest wins. Nothing for a user this process already wrote an earlier or equal time for."""
    earliest = _earliest(db, _FIRST_SEEN)
    out: list[Write] = []
    for user_id, at in user_ids:
        known = earliest.get((team_id, user_id))
        if known is None or at < known:
            out.append((SET_FIRST_SEEN, (INVERTED - at, at, team_id, bucket_of(user_id), user_id)))
    return out


def _note_earliest(cache: Cache, key: tuple[str, str], at: int) -> None:
    known = cache.get(key)
    if known is None or at < known:
        cache.set(key, at)


def note_first_seen(db: Database, team_id: str, user_ids: Iterable[tuple[str, int]]) -> None:
    """`first_seen_writes` for these succeeded."""
    earliest = _earliest(db, _FIRST_SEEN)
    for user_id, at in user_ids:
        _note_earliest(earliest, (team_id, user_id), at)


def note_first_post(db: Database, team_id: str, user_id: str, ts: int) -> None:
    """`first_post_writes` for this post succeeded."""
    _note_earliest(_earliest(db, _FIRST_POSTS), (team_id, user_id), ts)


def erased(db: Database, profile: Profile) -> bool:
    """The profile is its person's as of before their erasure (api/erasure/guard.py): it is not written again."""
    return guard.covers(db, f"slack:{profile.team_id}", profile.user_id, profile.updated)


def store_profile(db: Database, profile: Profile, *, seen_at: int, raw: Any = None) -> None:
    """The profile, unless its person's erasure took it away (`erased`)."""
    if erased(db, profile):
        return
    db.execute_many(profile_writes(profile, seen_at=seen_at, raw=raw))


# -- reads ------------------------------------------------------------------------------------------------

def _to_json(row: Any) -> dict[str, Any] | None:
    if row.updated_ts is None and row.name is None and row.first_post_ts is None:
        return None  # a row holding only the first-seen time: nothing to show yet
    out = {
        "user_id": row.user_id, "name": row.name, "real_name": row.real_name, "display_name": row.display_name,
        "tz": row.tz, "tz_label": row.tz_label, "tz_offset": row.tz_offset, "deleted": row.deleted,
        "is_bot": row.is_bot, "is_app_user": row.is_app_user, "avatar_url": row.avatar_url,
        "updated_ts": us_to_ts(row.updated_ts) if row.updated_ts is not None else None,
        "first_seen_ts": us_to_ts(row.first_seen) if row.first_seen is not None else None,
    }
    if row.first_post_ts is not None:
        out["first_post"] = {"ts": us_to_ts(row.first_post_ts), "channel_id": row.first_post_channel}
    return {k: v for k, v in out.items() if v is not None}


def get(db: Database, team_id: str, user_id: str) -> dict[str, Any] | None:
    """One user with their first post; None when no profile is known."""
    row = db.execute(SELECT_USER, (team_id, bucket_of(user_id), user_id)).one()
    return _to_json(row) if row is not None else None


def profiles(db: Database, team_id: str, user_ids: Iterable[str]) -> dict[str, dict[str, Any] | None]:
    """Several users as `get` shows them (None when no profile is known), read concurrently: the names a page
    shows."""
    futures = {u: db.execute_async(SELECT_USER, (team_id, bucket_of(u), u)) for u in dict.fromkeys(user_ids)}
    out: dict[str, dict[str, Any] | None] = {}
    for user_id, future in futures.items():
        row = future.result().one()
        out[user_id] = _to_json(row) if row is not None else None
    return out


def time_zones(db: Database, team_id: str, user_ids: Iterable[str]) -> dict[str, str | None]:
    """Each user's IANA time zone (None when the profile or its zone is unknown), read concurrently."""
    futures = {u: db.execute_async(SELECT_TZ, (team_id, bucket_of(u), u)) for u in dict.fromkeys(user_ids)}
    out: dict[str, str | None] = {}
    for user_id, future in futures.items():
        row = future.result().one()
        out[user_id] = row.tz if row is not None else None
    return out


def every_user(db: Database, team_id: str) -> list[Any]:
    """Every user row of a workspace (the 8 bucket partitions, read concurrently): what a report counts users
    and time zones from. Bounded by the workspace's size (5,000 users read in ~0.1 s)."""
    futures = [db.execute_async(SELECT_BUCKET, (team_id, bucket)) for bucket in range(BUCKETS)]
    rows: list[Any] = []
    for future in futures:
        result = future.result()
        rows.extend(result.current_rows)
        while result.has_more_pages:
            result.fetch_next_page()
            rows.extend(result.current_rows)
    return rows


def page(db: Database, team_id: str, *, limit: int, bucket: int = 0, after: str = "", with_slack_object: bool = False
         ) -> tuple[list[dict[str, Any]], tuple[int, str] | None]:
    """Users in (bucket, user_id) order after position (bucket, after); returns (users, next position).
    `with_slack_object`: each also has `slack_object`, the user object as Slack last sent it (when kept)."""
    out: list[dict[str, Any]] = []
    last = (bucket, after)
    while bucket < BUCKETS:
        want = limit + 1 - len(out)
        rows = list(db.execute(SELECT_PAGE_RAW if with_slack_object else SELECT_PAGE, (team_id, bucket, after, want)))
        for row in rows:
            after = row.user_id
            user = _to_json(row)
            if user is None:
                continue
            if with_slack_object and row.raw:
                user["slack_object"] = decompress_json(row.raw)
            if len(out) == limit:
                return out, last
            out.append(user)
            last = (bucket, row.user_id)
        if len(rows) < want:
            bucket, after = bucket + 1, ""
    return out, None


# An erased person's profile row goes at the highest write time the table uses (the inverted first-seen
# times sit just below it): every later arrival of them (a redelivered event, a re-import) writes below it and
# stays invisible.
ERASE_USER = Statement("DELETE FROM slack_users USING TIMESTAMP ? WHERE team_id = ? AND bucket = ? AND user_id = ?",
                       name="DELETE slack_users (erased)")


def erase_write(team_id: str, user_id: str) -> Write:
    return (ERASE_USER, (INVERTED, team_id, bucket_of(user_id), user_id))


def get_any(db: Database, team_id: str, user_id: str) -> Any | None:
    """The row of a user, profile or not (the erasure proof)."""
    return db.execute(SELECT_USER, (team_id, bucket_of(user_id), user_id)).one()
