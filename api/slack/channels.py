"""Channel tables: metadata, names history, the per-workspace channel index; the rows channel events write,
and the reads behind the channel endpoints.

Owner of slack_channels, slack_channel_names and slack_channel_index. Which rows one channel event writes,
and in which order, is ingest.py's part (`update_channel`, `delete_channel`): this module builds each row.

Each channel event writes its cells `USING TIMESTAMP <event time µs>`. `archived` and `deleted` are only ever
written true; unarchive deletes the `archived` cell at its own event time, so archive/unarchive in any
arrival order end as the newer of the two says. A renamed channel keeps one row per name in
slack_channel_names (keyed by the rename time), read newest first LIMIT 20.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from api.db import Database, Params, Statement, without_none
from api.slack.codec import compress_json, decode_json, decompress_json, encode_json
from api.slack.timeutil import us_to_ts

TABLES = frozenset({"slack_channels", "slack_channel_names", "slack_channel_index", "slack_channel_members"})

Write = tuple[Statement, Params]

NAMES_HISTORY_CAP = 20
MAX_ID_CHAIN = 8  # channel_id_changed hops followed on read (each is one row read)

UPDATE_CHANNEL = Statement(
    "UPDATE slack_channels USING TIMESTAMP :wt SET name = :name, created_ts = :created_ts, creator = :creator, "
    "visibility = :visibility, purpose = :purpose, topic = :topic, prev_channel_id = :prev_channel_id, "
    "next_channel_id = :next_channel_id, raw = :raw WHERE team_id = :team_id AND channel_id = :channel_id",
    name="UPSERT slack_channels")
SET_LISTED = Statement(
    "UPDATE slack_channels USING TIMESTAMP ? SET listed = ? WHERE team_id = ? AND channel_id = ?",
    name="LISTED slack_channels")
SELECT_LISTED = Statement("SELECT listed FROM slack_channels WHERE team_id = ? AND channel_id = ?",
                          name="SELECT slack_channels (listed)")
SET_ARCHIVED = Statement(
    "UPDATE slack_channels USING TIMESTAMP ? SET archived = true WHERE team_id = ? AND channel_id = ?",
    name="ARCHIVE slack_channels")
UNSET_ARCHIVED = Statement(
    "DELETE archived FROM slack_channels USING TIMESTAMP ? WHERE team_id = ? AND channel_id = ?",
    name="UNARCHIVE slack_channels")
SET_DELETED = Statement(
    "UPDATE slack_channels USING TIMESTAMP ? SET deleted = true WHERE team_id = ? AND channel_id = ?",
    name="DELETE-FLAG slack_channels")
INSERT_NAME = Statement(
    "INSERT INTO slack_channel_names (team_id, channel_id, named_at, name) VALUES (?, ?, ?, ?) USING TIMESTAMP ?")
UPDATE_INDEX = Statement(
    "UPDATE slack_channel_index USING TIMESTAMP :wt SET name = :name, visibility = :visibility, "
    "prev_channel_id = :prev_channel_id, next_channel_id = :next_channel_id "
    "WHERE team_id = :team_id AND channel_id = :channel_id", name="UPSERT slack_channel_index")
SET_INDEX_DELETED = Statement(
    "UPDATE slack_channel_index USING TIMESTAMP ? SET deleted = true WHERE team_id = ? AND channel_id = ?",
    name="DELETE-FLAG slack_channel_index")

INSERT_MEMBERS = Statement(
    "INSERT INTO slack_channel_members (team_id, channel_id, observed_at, members, source) VALUES (?, ?, ?, ?, ?)")
# A channel known only from its messages (the app joined a workspace whose channels already existed): listed in
# the index by id, so reports find it; its name arrives with the next channel event or history snapshot.
TOUCH_INDEX = Statement("INSERT INTO slack_channel_index (team_id, channel_id) VALUES (?, ?)",
                        name="TOUCH slack_channel_index")
SELECT_MEMBERS = Statement(
    "SELECT observed_at, members, source FROM slack_channel_members WHERE team_id = ? AND channel_id = ? "
    "AND observed_at >= ? AND observed_at < ? LIMIT ?")
SELECT_CHANNEL = Statement(
    "SELECT channel_id, name, created_ts, creator, visibility, archived, deleted, purpose, topic, "
    "prev_channel_id, next_channel_id FROM slack_channels WHERE team_id = ? AND channel_id = ?")
SELECT_CHAIN = Statement(
    "SELECT channel_id, visibility, prev_channel_id FROM slack_channels WHERE team_id = ? AND channel_id = ?",
    name="SELECT slack_channels (chain)")
SELECT_VISIBILITY = Statement(
    "SELECT visibility, prev_channel_id FROM slack_channels WHERE team_id = ? AND channel_id = ?",
    name="SELECT slack_channels (visibility)")
SELECT_NAMES = Statement(
    f"SELECT named_at, name FROM slack_channel_names WHERE team_id = ? AND channel_id = ? "
    f"LIMIT {NAMES_HISTORY_CAP}")
_INDEX_COLUMNS = "channel_id, name, deleted, visibility, prev_channel_id, next_channel_id"
SELECT_INDEX_PAGE = Statement(
    f"SELECT {_INDEX_COLUMNS} FROM slack_channel_index WHERE team_id = ? AND channel_id > ? LIMIT ?",
    name="SELECT slack_channel_index (page)")
SELECT_INDEX_ALL = Statement(
    f"SELECT {_INDEX_COLUMNS} FROM slack_channel_index WHERE team_id = ?", name="SELECT slack_channel_index (all)")
SELECT_INDEX_ONE = Statement(
    f"SELECT {_INDEX_COLUMNS} FROM slack_channel_index WHERE team_id = ? AND channel_id = ?",
    name="SELECT slack_channel_index (one)")
SELECT_INDEX_ANY = Statement("SELECT channel_id FROM slack_channel_index WHERE team_id = ? LIMIT 1",
                             name="SELECT slack_channel_index (any)")


# -- writes: each row built here; ingest.py sends them, in its order --------------------------------------

def name_write(team_id: str, channel_id: str, at: int, name: str) -> Write:
    """The names-history row of a name the channel got at `at`."""
    return (INSERT_NAME, (team_id, channel_id, at, name, at))


def index_write(team_id: str, channel_id: str, at: int, *, name: str | None = None,
                visibility: str | None = None, prev_channel_id: str | None = None,
                next_channel_id: str | None = None) -> Write | None:
    """The channel's index entry with the given fields; None when none of them is in the index."""
    if name is None and visibility is None and not prev_channel_id and not next_channel_id:
        return None
    return (UPDATE_INDEX, without_none({
        "wt": at, "team_id": team_id, "channel_id": channel_id, "name": name, "visibility": visibility,
        "prev_channel_id": prev_channel_id, "next_channel_id": next_channel_id}))


def channel_write(team_id: str, channel_id: str, at: int, *, name: str | None = None,
                  created_ts: int | None = None, creator: str | None = None, visibility: str | None = None,
                  purpose: str | None = None, topic: str | None = None, prev_channel_id: str | None = None,
                  next_channel_id: str | None = None, raw: Any = None) -> Write:
    """The channel row's given fields at event time `at` (absent ones are left as they are)."""
    return (UPDATE_CHANNEL, without_none({
        "wt": at, "team_id": team_id, "channel_id": channel_id, "name": name, "created_ts": created_ts,
        "creator": creator, "visibility": visibility, "purpose": purpose, "topic": topic,
        "prev_channel_id": prev_channel_id, "next_channel_id": next_channel_id,
        "raw": compress_json(raw) if raw is not None else None}))


def index_deleted_write(team_id: str, channel_id: str, at: int) -> Write:
    return (SET_INDEX_DELETED, (at, team_id, channel_id))


def channel_deleted_write(team_id: str, channel_id: str, at: int) -> Write:
    return (SET_DELETED, (at, team_id, channel_id))


def set_archived(db: Database, team_id: str, channel_id: str, at: int, archived: bool) -> None:
    db.execute(SET_ARCHIVED if archived else UNSET_ARCHIVED, (at, team_id, channel_id))


def index_touch_write(team_id: str, channel_id: str) -> Write:
    return (TOUCH_INDEX, (team_id, channel_id))


def members_write(team_id: str, channel_id: str, at: int, members: int, source: str) -> Write:
    """One observation of a channel's member count (seed 000's ChannelMembers log)."""
    return (INSERT_MEMBERS, (team_id, channel_id, at, members, source))


# -- reads ------------------------------------------------------------------------------------------------

def listed_write(team_id: str, channel_id: str, at: int, obj: dict[str, Any]) -> Write:
    """The channel object as history listed it at `at` (members, pins, every field)."""
    return (SET_LISTED, (at, encode_json(obj), team_id, channel_id))


def listed(db: Database, team_id: str, channel_id: str) -> dict[str, Any]:
    """The channel object as history last listed it ({} when never listed)."""
    row = db.execute(SELECT_LISTED, (team_id, channel_id)).one()
    value = decode_json(row.listed) if row is not None and row.listed else {}
    return value if isinstance(value, dict) else {}


def current(db: Database, team_id: str, channel_id: str) -> Any | None:
    """The channel's own row (no id chain): what a history snapshot compares with before it writes."""
    return db.execute(SELECT_CHANNEL, (team_id, channel_id)).one()


def member_counts(db: Database, team_id: str, channel_id: str, *, since: int = 0, until: int = 2**62,
                  limit: int = 1000) -> list[tuple[int, int, str]]:
    """(observed_at µs, members, source) newest first."""
    return [(r.observed_at, r.members, r.source)
            for r in db.execute(SELECT_MEMBERS, (team_id, channel_id, since, until, limit))]


def start_member_counts(db: Database, team_id: str, channel_id: str, *, since: int, until: int,
                        limit: int = 1000) -> Any:
    """Start reading a channel's member-count log in [since, until) (a future of rows, newest first)."""
    return db.execute_async(SELECT_MEMBERS, (team_id, channel_id, since, until, limit))


def visibility(db: Database, team_id: str, channel_id: str) -> str | None:
    """The recorded visibility of a channel we archive; None when we never saw it."""
    row = db.execute(SELECT_VISIBILITY, (team_id, channel_id)).one()
    return None if row is None else (row.visibility or "public")


def id_chain(db: Database, team_id: str, channel_id: str, *, full: bool = True) -> list[Any]:
    """The channel's row, then the rows of its previous ids (channel_id_changed), newest id first.

    full=False reads only what access checks and message reads need (id, visibility, previous id)."""
    stmt = SELECT_CHANNEL if full else SELECT_CHAIN
    rows, seen, current = [], set(), channel_id
    while current and current not in seen and len(rows) < MAX_ID_CHAIN:
        seen.add(current)
        row = db.execute(stmt, (team_id, current)).one()
        if row is None:
            if not rows:
                rows.append(None)  # unknown channel: messages may still exist (app added later)
            break
        rows.append(row)
        current = row.prev_channel_id
    return rows


CHAIN_CACHE = "slack.channel_chains"


def id_chain_at(db: Database, team_id: str, channel_id: str, version: Hashable) -> list[Any]:
    """`id_chain(full=False)` as of `version`, the channel's page version read before this call
    (api/slack/versions.py): a chain of one id is kept per process while that version stays, since every write to
    the channel's row advances it. A longer chain (previous ids: rare) is read each time, as their rows have
    versions of their own."""
    cache = db.caches.lru(CHAIN_CACHE, maxsize=4096)
    held = cache.get((team_id, channel_id))
    if held is not None and held[0] == version:
        return held[1]
    chain = id_chain(db, team_id, channel_id, full=False)
    if len(chain) == 1:
        cache.set((team_id, channel_id), (version, chain))
    return chain


def chain_ids(chain: list[Any], channel_id: str) -> list[str]:
    return [channel_id] + [r.channel_id for r in chain[1:] if r is not None]


def is_private(chain: list[Any]) -> bool:
    """The newest visibility along the id chain (a renamed id inherits its predecessor's, as metadata does)."""
    visibility = next((r.visibility for r in chain if r is not None and r.visibility), None)
    return visibility == "private"


def metadata(db: Database, team_id: str, channel_id: str, chain: list[Any]) -> dict[str, Any] | None:
    """Channel metadata; a field the new id never received is carried over from the previous id(s)."""
    rows = [r for r in chain if r is not None]
    if not rows:
        return None
    names: list[tuple[int, str]] = []
    for r in rows:
        names.extend((n.named_at, n.name) for n in db.execute(SELECT_NAMES, (team_id, r.channel_id)))
    names.sort(reverse=True)

    def first(field: str) -> Any:
        return next((getattr(r, field) for r in rows if getattr(r, field) is not None), None)

    head = rows[0]
    out = {
        "team_id": team_id, "channel_id": channel_id,
        "name": names[0][1] if names else first("name"),
        "names_history": [{"name": n, "ts": us_to_ts(t)} for t, n in names[:NAMES_HISTORY_CAP]],
        "visibility": first("visibility") or "public",
        "archived": True if head.archived else None,
        "deleted": True if head.deleted else None,
        "purpose": first("purpose"), "topic": first("topic"),
        "created_ts": us_to_ts(first("created_ts")) if first("created_ts") is not None else None,
        "creator": first("creator"),
        "prev_channel_id": head.prev_channel_id, "next_channel_id": head.next_channel_id,
    }
    return {k: v for k, v in out.items() if v is not None}


def workspace_known(db: Database, team_id: str) -> bool:
    """Whether Chronicle has archived anything of this workspace: every stored message and channel event lists
    its channel in the workspace's index, so an empty index partition is a workspace never seen (one row read)."""
    return db.execute(SELECT_INDEX_ANY, (team_id,)).one() is not None


def every_indexed(db: Database, team_id: str) -> list[Any]:
    """Every row of a workspace's channel index (one partition, bounded by the workspace's channel count)."""
    return list(db.execute(SELECT_INDEX_ALL, (team_id,)))


# One cache, one lifetime for the workspace's private channel set: the search directory, the activity routes and
# the archive pages all ask here. Short: it is an access rule (a channel made private is hidden within 10 s).
PRIVATE_CHANNELS_TTL = 10.0
PRIVATE_CHANNELS_CACHE = "slack.private_channels"


def private_channels(db: Database, team_id: str) -> frozenset[str]:
    """Every channel id of the workspace whose messages need the private scope: an id whose newest visibility
    along its own id chain is private (`is_private`, as the reads decide), and its previous ids (they hold the
    channel's older messages). From the channel index (one partition), cached in `db.caches`."""

    def load() -> frozenset[str]:
        by_id = {r.channel_id: r for r in every_indexed(db, team_id)}
        private: set[str] = set()
        for channel_id in by_id:
            chain, current = [], channel_id
            while current in by_id and current not in chain and len(chain) < MAX_ID_CHAIN:
                chain.append(current)
                current = by_id[current].prev_channel_id
            if next((by_id[c].visibility for c in chain if by_id[c].visibility), None) == "private":
                private.update(chain)
        return frozenset(private)

    cache = db.caches.ttl(PRIVATE_CHANNELS_CACHE, maxsize=4096, ttl=PRIVATE_CHANNELS_TTL)
    return cache.get_or_load(team_id, load)


# Bounds on one index request: rows read in all (a page of mostly hidden channels stops early, with a cursor).
INDEX_ROW_BUDGET = 2000


def index_page(db: Database, team_id: str, *, limit: int, after: str = "", include_deleted: bool = False,
               include_private: bool = True) -> tuple[list[dict[str, Any]], str | None]:
    """One page of the workspace's channels in channel id order, after channel id `after` (exclusive).

    Returns (entries, next position or None). Reads slices of the one index partition, at most
    INDEX_ROW_BUDGET rows per request. A new id without a name of its own shows its previous id's name (looked
    up by key when it is not on this page). Deleted channels are left out unless `include_deleted` (then shown as
    deleted_<name>, "deleted": true); private-converted ones unless `include_private`.
    """
    out: list[dict[str, Any]] = []
    scanned, position = 0, after
    while scanned < INDEX_ROW_BUDGET:
        want = min(max(limit + 1 - len(out), 50), INDEX_ROW_BUDGET - scanned)
        rows = list(db.execute(SELECT_INDEX_PAGE, (team_id, position, want)))
        scanned += len(rows)
        known = {r.channel_id: r for r in rows}
        for r in rows:
            entry = _index_entry(db, team_id, r, known)
            if entry is not None and (include_deleted or not r.deleted) and (
                    include_private or entry["visibility"] != "private"):
                if len(out) == limit:
                    return out, out[-1]["channel_id"]
                out.append(entry)
            position = r.channel_id
        if len(rows) < want:
            return out, None
    return out, position  # the row budget ran out: the next page goes on from the last row read


def _index_entry(db: Database, team_id: str, r: Any, known: dict[str, Any]) -> dict[str, Any] | None:
    name, vis, hops, prev = r.name, r.visibility, 0, r.prev_channel_id
    while (name is None or vis is None) and prev and hops < MAX_ID_CHAIN:
        row = known.get(prev)
        if row is None:
            row = known[prev] = db.execute(SELECT_INDEX_ONE, (team_id, prev)).one()
        if row is None:
            break
        name, vis = name or row.name, vis or row.visibility
        prev, hops = row.prev_channel_id, hops + 1
    if name is None:
        return None  # nothing known but a flag: not listable yet
    item = {"channel_id": r.channel_id, "name": f"deleted_{name}" if r.deleted else name,
            "visibility": vis or "public", "deleted": True if r.deleted else None,
            "prev_channel_id": r.prev_channel_id, "next_channel_id": r.next_channel_id}
    return {k: v for k, v in item.items() if v is not None}


SELECT_NAMING = Statement("SELECT creator, raw, listed FROM slack_channels WHERE team_id = ? AND channel_id = ?",
                          name="SELECT slack_channels (people)")
REWRITE_PEOPLE = Statement(
    "UPDATE slack_channels USING TIMESTAMP :wt SET creator = :creator, raw = :raw, listed = :listed "
    "WHERE team_id = :team_id AND channel_id = :channel_id", name="REWRITE slack_channels")


def people_rows(db: Database, team_id: str) -> dict[str, Any]:
    """Each channel's creator and the objects Slack sent (raw, as listed), decoded: who they name."""
    futures = {r.channel_id: db.execute_async(SELECT_NAMING, (team_id, r.channel_id))
               for r in every_indexed(db, team_id)}
    out = {}
    for channel_id, future in futures.items():
        row = future.result().one()
        if row is not None:
            out[channel_id] = (row.creator, decompress_json(row.raw) if row.raw else None,
                               decode_json(row.listed) if row.listed else None)
    return out


def rewrite_people_write(team_id: str, channel_id: str, at: int, *, creator: str | None, raw: Any, listed: Any
                         ) -> Write:
    return (REWRITE_PEOPLE, without_none({
        "wt": at, "team_id": team_id, "channel_id": channel_id, "creator": creator,
        "raw": compress_json(raw) if raw is not None else None,
        "listed": encode_json(listed) if listed is not None else None}))
