"""A deterministic generator of Slack workspace export ZIPs in the official layout (Slack's export, slackdump export).

Layout written (folder names are what Slack and slackdump use):
  users.json | org_users.json      list of user objects (humans, deleted humans, bot users)
  channels.json                    public channels; groups.json private ones; dms.json; mpims.json
  integration_logs.json            {"logs": [...]}; canvases.json only when ExportSpec.canvases
  <channel name>/YYYY-MM-DD.json   public and private channels, one file per UTC day with messages, oldest first
  <DM id>/YYYY-MM-DD.json          direct messages; <mpim name>/... for group DMs
  __uploads/<file id>/<name>       Mattermost variant only: the bytes the fake file host serves for that id

Used by the `import-export` tests (with `keep_expected=True`, an expected model built from the generator's own
random choices, never from Chronicle code) and by the 1M-message benchmark: generation streams, holding only one
conversation day plus the replies already scheduled for the next `thread_span_days` days, so memory stays flat.

Everything comes from one `random.Random(seed)` consumed in a fixed order, and ZIP entries carry a fixed date, so
one spec always gives a byte-identical ZIP (with or without `keep_expected`).
"""

from __future__ import annotations

import json
import random
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.fakes.slack_file_host import content_for

DAY = 86_400
_ZIP_DATE = (2020, 1, 1, 0, 0, 0)  # fixed so the bytes depend on the spec only
_ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"

_SENTENCES = (  # word pool for message text
    "the deploy is green again after the rollback we should check logs for that tenant before lunch "
    "please review my pull request when you have a minute cassandra compaction looks slow on node three "
    "standup moved to ten thanks everyone who joined the retro yesterday can someone take the pager tonight "
    "latency spiked around noon but recovered quickly I will write the postmortem draft today ok sounds good"
)
_WORDS = _SENTENCES.split()
_NON_ASCII = ("🎉", "🚀 ship it", "café", "naïve façade", "Zoë", "日本語のテキスト", "привет", "✅ done", "¿qué tal?",
              "👍🏽")
_EMOJI = ("+1", "heart", "tada", "eyes", "rocket", "white_check_mark", "joy", "pray", "fire", "thinking_face")
_TOPICS = ("Release train", "On-call: see pinned", "Quarterly planning ✨", "Incidents only", "Café talk",
           "Deploys and rollbacks", "")
_PURPOSES = ("Team chat", "Announcements", "Ask anything", "Build notifications", "Random stuff 🎲")
_CHANNEL_WORDS = ("general", "random", "engineering", "deploys", "incidents", "design", "support", "sales",
                  "marketing", "data", "infra", "frontend", "backend", "mobile", "security", "hiring", "social",
                  "announcements", "ops", "qa")
_PEOPLE = (("alice", "Alice Martin"), ("bob", "Bob Okafor"), ("chloe", "Chloé Dubois"), ("dmitri", "Дмитрий Иванов"),
           ("emma", "Emma Schultz"), ("farid", "Farid Haddad"), ("gao", "高明"), ("hana", "Hana Sato"),
           ("ines", "Inês Costa"), ("jose", "José Núñez"), ("kofi", "Kofi Mensah"), ("lena", "Lena Müller"),
           ("mia", "Mia Johansson"), ("noah", "Noah Levi"), ("olga", "Olga Nowak"), ("zoe", "Zoë Brooks"))
_BOTS = ("deploybot", "pagerbot", "github", "jira", "standupbot")
_TZS = (("America/Los_Angeles", "Pacific Standard Time", -28800), ("Europe/Paris", "Central European Time", 3600),
        ("Asia/Tokyo", "Japan Standard Time", 32400), ("UTC", "Coordinated Universal Time", 0))
# (name, mimetype, filetype); one non-ASCII name exercises __uploads paths and Content-Disposition handling
_FILE_KINDS = (("screenshot.png", "image/png", "png"), ("report.pdf", "application/pdf", "pdf"),
               ("notes.txt", "text/plain", "text"), ("data.csv", "text/csv", "csv"),
               ("résumé.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", "docx"))
_UNKNOWN_SUBTYPES = ("reminder_add", "zz_future_subtype")


@dataclass
class ExportSpec:
    """What to generate. `messages` is EXACT: the total number of message objects in all day files (top-level
    messages, replies, joins, bot and topic messages). Shares are per-message probabilities."""

    seed: int = 1
    team_id: str = "T0EXPORT01"
    team_domain: str = "chronicle-test"
    n_users: int = 8  # active humans; at least 2
    n_deleted: int = 0  # deleted humans: in users.json, in no member list, may still author public messages
    n_bots: int = 1
    n_channels: int = 3  # public channels, the first is #general
    n_private: int = 1
    n_archived: int = 0  # the last n public channels (never #general) are archived
    n_dms: int = 0
    n_mpims: int = 0
    days: int = 7
    start: datetime | float = datetime(2023, 1, 2, tzinfo=UTC)  # normalised to the UTC midnight before it
    messages: int = 200
    thread_share: float = 0.1  # of plain top-level messages that get replies
    reply_count: tuple[int, int] = (1, 6)  # inclusive; the last day's threads may be cut to hit `messages`
    thread_span_days: int = 2  # a reply lands on the parent's day or up to this many days later
    same_day_reply_share: float = 0.6
    reaction_share: float = 0.1
    edit_share: float = 0.05
    file_share: float = 0.03
    subtype_share: float = 0.05  # top-level: channel_join, bot_message, channel_topic/purpose, unknown
    broadcast_share: float = 0.1  # of replies: subtype thread_broadcast
    mention_share: float = 0.1
    link_share: float = 0.05
    non_ascii_share: float = 0.1
    user_profile_share: float = 0.5
    rich_share: float = 0.0  # of user messages: Block Kit rich text of the text, and a link unfurl attachment
    pin_share: float = 0.01  # of plain top-level messages, at most 3 pins per channel
    replies_list: bool = True  # parents carry "replies": [{user, ts}] (older exports) besides the counts
    users_file: str = "users.json"  # or "org_users.json" (Enterprise Grid exports)
    mattermost: bool = False
    canvases: bool = False
    pretty: bool = False  # Slack's own export indents by 4; compact is much faster for big runs
    ascii_json: bool = False  # \\u escapes instead of raw UTF-8
    compresslevel: int = 6
    file_base_url: str = "https://files.slack.com"


@dataclass
class ExpectedModel:
    """What an importer should end up with, from the generator's own choices.

    messages[(channel_id, ts)] = {user, text, subtype, thread_ts, edited_ts, reactions: {emoji: sorted users},
                                  files: [ids], reply_count (parents only, else None), parent_user_id, bot_id}
    users[user_id] = {name, real_name, display_name, deleted, is_bot, tz, team_id}
    channels[id] = {name, kind (public|private|dm|mpim), private, archived, topic, purpose, created, creator,
                    members, folder, pins: [ts]}
    files[file_id] = {name, mimetype, size, channel, ts, user, url_private}
    """

    messages: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    channels: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class ExportSummary:
    path: Path
    messages: int = 0
    per_channel: dict[str, int] = field(default_factory=dict)  # channel id -> messages (zero-message ones too)
    folders: dict[str, str] = field(default_factory=dict)  # channel id -> folder name in the ZIP
    threads: int = 0  # parents with at least one reply
    cross_day_threads: int = 0  # threads with a reply in a later day file than the parent
    replies: int = 0
    reactions: int = 0  # emoji entries
    reaction_users: int = 0  # sum of their counts
    files: int = 0
    edited: int = 0
    pins: int = 0
    subtypes: Counter[str] = field(default_factory=Counter)  # "" for plain messages
    users: int = 0
    channels: int = 0  # public + private
    conversations: int = 0  # channels + DMs + mpims
    day_files: int = 0
    zip_bytes: int = 0
    expected: ExpectedModel | None = None


@dataclass
class _Conv:
    id: str
    kind: str
    name: str | None
    folder: str
    members: list[str]
    authors: list[str]
    created: int
    creator: str
    archived: bool = False
    topic: dict[str, Any] = field(default_factory=dict)
    purpose: dict[str, Any] = field(default_factory=dict)
    topic_key: int = 0  # ts key of the latest channel_topic message: channels.json shows the newest
    purpose_key: int = 0
    pins: list[dict[str, Any]] = field(default_factory=list)


def file_bytes(file_id: str) -> bytes:
    """The bytes of a generated file: what FakeSlackFileHost serves for /files/<id> and what __uploads holds."""
    return content_for(file_id)


def _b36(n: int, width: int) -> str:
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = _ALNUM[r] + out
    return out.rjust(width, "0")


def _epoch(start: datetime | float) -> int:
    if isinstance(start, datetime):
        return int((start if start.tzinfo else start.replace(tzinfo=UTC)).timestamp())
    return int(start)


def _check(spec: ExportSpec) -> None:
    lo, hi = spec.reply_count
    problems = [
        spec.n_users < 2 and "n_users must be >= 2",
        spec.n_channels < 1 and "n_channels must be >= 1",
        spec.days < 1 and "days must be >= 1",
        spec.messages < 0 and "messages must be >= 0",
        not 1 <= lo <= hi and "reply_count must be (lo, hi) with 1 <= lo <= hi",
        spec.n_archived >= spec.n_channels and "n_archived must be < n_channels (#general stays open)",
        spec.users_file not in ("users.json", "org_users.json") and "users_file: users.json or org_users.json",
        spec.thread_span_days < 0 and "thread_span_days must be >= 0",
    ]
    if errors := [p for p in problems if p]:
        raise ValueError("; ".join(errors))


class _Generator:
    def __init__(self, spec: ExportSpec, zf: zipfile.ZipFile, summary: ExportSummary, keep_expected: bool) -> None:
        self.spec = spec
        self.zf = zf
        self.summary = summary
        self.exp = ExpectedModel() if keep_expected else None
        self.rng = random.Random(spec.seed)
        self.day0 = _epoch(spec.start) // DAY * DAY
        self.days = [datetime.fromtimestamp(self.day0 + d * DAY, UTC).strftime("%Y-%m-%d") for d in range(spec.days)]
        self.file_counter = 0
        if spec.pretty:
            self._encoder = json.JSONEncoder(indent=4, ensure_ascii=spec.ascii_json)
        else:
            self._encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=spec.ascii_json)
        self.humans: list[str] = []
        self.deleted: list[str] = []
        self.bots: list[tuple[str, str, str]] = []  # (user id, bot id, username)
        self.profiles: dict[str, dict[str, Any]] = {}
        self.convs: list[_Conv] = []

    # --- output helpers -------------------------------------------------------------------------------------

    def _put(self, name: str, data: bytes) -> None:
        info = zipfile.ZipInfo(name, _ZIP_DATE)
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16  # readable when unzipped
        self.zf.writestr(info, data, compresslevel=self.spec.compresslevel)

    def _put_json(self, name: str, obj: Any) -> None:
        self._put(name, self._encoder.encode(obj).encode())

    # --- workspace ------------------------------------------------------------------------------------------

    def users(self) -> None:
        spec, rng = self.spec, self.rng
        objs: list[dict[str, Any]] = []
        n_h = spec.n_users + spec.n_deleted
        for i in range(n_h + spec.n_bots):
            uid = "U" + _b36(i, 3) + "".join(rng.choices(_ALNUM, k=7))
            deleted = spec.n_users <= i < n_h
            is_bot = i >= n_h
            if is_bot:
                handle = _BOTS[(i - n_h) % len(_BOTS)] + ("" if i - n_h < len(_BOTS) else str(i - n_h))
                real, display = handle.capitalize(), ""
                bot_id = "B" + _b36(i, 3) + "".join(rng.choices(_ALNUM, k=7))
                self.bots.append((uid, bot_id, handle))
            else:
                base, real = _PEOPLE[i % len(_PEOPLE)]
                handle = base if i < len(_PEOPLE) else f"{base}{i}"
                display = real.split()[0] if rng.random() < 0.7 else ""
                (self.deleted if deleted else self.humans).append(uid)
            tz, tz_label, tz_offset = rng.choice(_TZS)
            avatar = "".join(rng.choices("0123456789abcdef", k=12))
            img = f"https://avatars.slack-edge.com/2022-01-01/{avatar}_72.png"
            profile: dict[str, Any] = {
                "title": "", "phone": "", "skype": "", "real_name": real, "real_name_normalized": real,
                "display_name": display, "display_name_normalized": display, "status_text": "", "status_emoji": "",
                "avatar_hash": avatar, "image_24": img.replace("_72", "_24"), "image_48": img.replace("_72", "_48"),
                "image_72": img, "image_192": img.replace("_72", "_192"), "first_name": real.split()[0],
                "last_name": " ".join(real.split()[1:]), "team": spec.team_id,
            }
            if is_bot:
                profile["bot_id"] = self.bots[-1][1]
                profile["api_app_id"] = "A" + self.bots[-1][1][1:]
            obj: dict[str, Any] = {"id": uid, "team_id": spec.team_id, "name": handle, "deleted": deleted,
                                   "color": "9f69e7", "real_name": real, "profile": profile}
            if not deleted:  # Slack drops tz and role flags from deleted users
                obj.update(tz=tz, tz_label=tz_label, tz_offset=tz_offset, is_admin=i == 0, is_owner=i == 0,
                           is_primary_owner=i == 0, is_restricted=False, is_ultra_restricted=False)
            obj.update(is_bot=is_bot, is_app_user=False, updated=self.day0 - rng.randrange(365 * DAY))
            objs.append(obj)
            # the short form Slack embeds in messages as "user_profile"
            self.profiles[uid] = {"avatar_hash": avatar, "image_72": img, "first_name": profile["first_name"],
                                  "real_name": real, "display_name": display, "team": spec.team_id,
                                  "name": handle, "is_restricted": False, "is_ultra_restricted": False}
            if self.exp is not None:
                self.exp.users[uid] = {"name": handle, "real_name": real, "display_name": display, "deleted": deleted,
                                       "is_bot": is_bot, "tz": None if deleted else tz, "team_id": spec.team_id}
        self.summary.users = len(objs)
        self._put_json(spec.users_file, objs)

    def conversations(self) -> None:
        spec, rng = self.spec, self.rng
        humans = self.humans
        n = 0

        def new_id(prefix: str) -> str:
            nonlocal n
            n += 1
            return prefix + _b36(n, 3) + "".join(rng.choices(_ALNUM, k=7))

        def created_by(members: list[str]) -> tuple[int, str]:
            return self.day0 - rng.randint(1, 365) * DAY + rng.randrange(DAY), rng.choice(members)

        def text_field(choices: tuple[str, ...], creator: str, created: int) -> dict[str, Any]:
            value = rng.choice(choices)
            return {"value": value, "creator": creator if value else "", "last_set": created if value else 0}

        total = spec.n_channels + spec.n_private
        for i in range(total):
            private = i >= spec.n_channels
            j = i - spec.n_channels if private else i
            word = _CHANNEL_WORDS[j % len(_CHANNEL_WORDS)]
            name = word if j < len(_CHANNEL_WORDS) else f"{word}-{j // len(_CHANNEL_WORDS)}"
            if private:
                name = "priv-" + name
            if i == 0:
                members = list(humans)
            else:
                members = sorted(rng.sample(humans, rng.randint(2, len(humans))), key=humans.index)
            created, creator = created_by(members)
            conv = _Conv(id=new_id("C"), kind="private" if private else "public", name=name, folder=name,
                         members=members, authors=members + (self.deleted if not private else []),
                         created=created, creator=creator,
                         archived=not private and i > 0 and i >= spec.n_channels - spec.n_archived)
            conv.topic = text_field(_TOPICS, creator, created)
            conv.purpose = text_field(_PURPOSES, creator, created)
            self.convs.append(conv)
        for _ in range(spec.n_dms):
            members = rng.sample(humans, 2)
            created, creator = created_by(members)
            dm_id = new_id("D")
            self.convs.append(_Conv(id=dm_id, kind="dm", name=None, folder=dm_id, members=members,
                                    authors=members, created=created, creator=creator))
        for k in range(spec.n_mpims):
            members = rng.sample(humans, min(len(humans), rng.randint(3, 4)))
            created, creator = created_by(members)
            handles = "--".join(self._handle(u) for u in members)
            name = f"mpdm-{handles}-{k + 1}"
            self.convs.append(_Conv(id=new_id("C"), kind="mpim", name=name, folder=name, members=members,
                                    authors=members, created=created, creator=creator,
                                    topic={"value": "", "creator": "", "last_set": 0},
                                    purpose={"value": "", "creator": "", "last_set": 0}))
        self.summary.channels = total
        self.summary.conversations = len(self.convs)

    def _handle(self, uid: str) -> str:
        return str(self.profiles[uid]["name"])

    def metadata(self) -> None:
        """channels.json & co, written last so topics, purposes and pins reflect the messages."""
        spec = self.spec
        by_kind: dict[str, list[dict[str, Any]]] = {"public": [], "private": [], "dm": [], "mpim": []}
        for c in self.convs:
            if c.kind == "dm":
                obj: dict[str, Any] = {"id": c.id, "created": c.created, "members": c.members}
            else:
                obj = {"id": c.id, "name": c.name, "created": c.created, "creator": c.creator,
                       "is_archived": c.archived, "is_general": c.kind == "public" and c is self.convs[0],
                       "members": c.members, "topic": c.topic, "purpose": c.purpose}
                if c.pins:
                    obj["pins"] = c.pins
            by_kind[c.kind].append(obj)
            if self.exp is not None:
                self.exp.channels[c.id] = {
                    "name": c.name, "kind": c.kind, "private": c.kind != "public", "archived": c.archived,
                    "topic": c.topic.get("value", ""), "purpose": c.purpose.get("value", ""), "created": c.created,
                    "creator": c.creator, "members": list(c.members), "folder": c.folder,
                    "pins": [p["id"] for p in c.pins]}
        self._put_json("channels.json", by_kind["public"])
        self._put_json("groups.json", by_kind["private"])
        self._put_json("dms.json", by_kind["dm"])
        self._put_json("mpims.json", by_kind["mpim"])
        general = self.convs[0]
        logs = [{"user_id": self.humans[0], "user_name": self._handle(self.humans[0]), "bot_id": bot_id,
                 "date": str(self.day0 - DAY * (k + 1)), "change_type": "added", "service_type": "Bot",
                 "service_id": bot_id, "scope": "incoming-webhook", "channel": general.name, "reason": ""}
                for k, (_uid, bot_id, _name) in enumerate(self.bots)]
        self._put_json("integration_logs.json", {"logs": logs})
        if spec.canvases:
            canvases = [{"id": "F" + c.id[1:] + "CV", "title": f"{c.name} canvas", "date_created": c.created,
                         "user": c.creator, "channel": c.id} for c in self.convs if c.kind == "public"]
            self._put_json("canvases.json", canvases)

    # --- messages -------------------------------------------------------------------------------------------

    def messages(self) -> None:
        spec, rng = self.spec, self.rng
        # busier and quieter conversations; DMs are quiet. Integer weights so the split is exact.
        weights = [int(1000 * (0.3 if c.kind == "dm" else 1.0) * (0.2 + rng.random() * 3)) + 1 for c in self.convs]
        day_w = []
        for d in range(spec.days):
            weekend = datetime.fromtimestamp(self.day0 + d * DAY, UTC).weekday() >= 5
            day_w.append(int(1000 * (0.25 if weekend else 1.0) * (0.5 + rng.random())) + 1)
        cum_days = []
        acc = 0
        for w in day_w:
            acc += w
            cum_days.append(acc)
        total_w, acc = sum(weights), 0
        for conv, w in zip(self.convs, weights, strict=True):
            before = spec.messages * acc // total_w
            acc += w
            self._conversation(conv, spec.messages * acc // total_w - before, cum_days)

    def _text(self, conv: _Conv) -> str:
        rng, spec = self.rng, self.spec
        words = rng.choices(_WORDS, k=rng.randint(3, 16))
        r = rng.random()
        if r < spec.mention_share:
            words.insert(rng.randrange(len(words)), f"<@{rng.choice(conv.members)}>")
        elif r < spec.mention_share + spec.link_share:
            target = self.convs[rng.randrange(spec.n_channels)]  # links point at public channels
            words.append(f"<#{target.id}|{target.name}>")
        if rng.random() < spec.non_ascii_share:
            words.append(rng.choice(_NON_ASCII))
        return " ".join(words)

    def _user_msg(self, user: str, text: str, ts: str) -> dict[str, Any]:
        rng = self.rng
        cid = f"{rng.getrandbits(128):032x}"
        msg: dict[str, Any] = {"client_msg_id": f"{cid[:8]}-{cid[8:12]}-{cid[12:16]}-{cid[16:20]}-{cid[20:]}",
                               "type": "message", "text": text, "user": user, "ts": ts, "team": self.spec.team_id}
        if rng.random() < self.spec.user_profile_share:
            msg["user_profile"] = self.profiles[user]
        if self.spec.rich_share and rng.random() < self.spec.rich_share:
            # As Slack's clients post a message: its text as one rich_text block, and a link's unfurl (the
            # shapes of Slack's rich text and attachment references).
            msg["blocks"] = [{"type": "rich_text", "block_id": cid[:5], "elements": [
                {"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}]}]
            word = rng.choice(_WORDS)
            msg["attachments"] = [{
                "id": 1, "service_name": "Docs", "title": f"{word} notes", "title_link": f"https://docs.example/{word}",
                "text": " ".join(rng.choices(_WORDS, k=12)), "fallback": f"Docs: {word} notes",
                "from_url": f"https://docs.example/{word}", "original_url": f"https://docs.example/{word}",
                "service_icon": "https://docs.example/favicon.png",
                "fields": [{"title": "Owner", "value": rng.choice(_WORDS), "short": True}]}]
        return msg

    def _decorate(self, msg: dict[str, Any], user: str, sec: int, conv: _Conv, ts: str,
                  pending_uploads: list[tuple[str, str]]) -> tuple[str | None, dict[str, list[str]], list[str]]:
        """Edits, reactions, files. Returns them as the expected model sees them (empty when not kept)."""
        rng, spec, s = self.rng, self.spec, self.summary
        edited_ts = None
        reactions: dict[str, list[str]] = {}
        file_ids: list[str] = []
        if rng.random() < spec.edit_share:
            edited_ts = f"{sec + rng.randint(5, DAY)}.000000"  # always after the message's own second
            msg["edited"] = {"user": user, "ts": edited_ts}
            s.edited += 1
        if rng.random() < spec.reaction_share:
            entries = []
            for name in rng.sample(_EMOJI, rng.randint(1, 3)):
                users = rng.sample(conv.members, rng.randint(1, min(4, len(conv.members))))
                entries.append({"name": name, "users": users, "count": len(users)})
                s.reaction_users += len(users)
                if self.exp is not None:
                    reactions[name] = sorted(users)
            msg["reactions"] = entries
            s.reactions += len(entries)
        if rng.random() < spec.file_share:
            files = []
            for _ in range(1 if rng.random() < 0.8 else 2):
                self.file_counter += 1
                fid = "F" + _b36(self.file_counter, 4) + "".join(rng.choices(_ALNUM, k=6))
                name, mimetype, filetype = rng.choice(_FILE_KINDS)
                size = len(file_bytes(fid))
                url = f"{spec.file_base_url}/files/{fid}"
                files.append({"id": fid, "created": sec, "timestamp": sec, "name": name, "title": name,
                              "mimetype": mimetype, "filetype": filetype, "user": user, "size": size,
                              "mode": "hosted", "is_external": False, "is_public": conv.kind == "public",
                              "url_private": url, "url_private_download": url + "?download=1",
                              "permalink": f"https://{spec.team_domain}.slack.com/files/{user}/{fid}/{name}"})
                if spec.mattermost:
                    pending_uploads.append((fid, name))
                if self.exp is not None:
                    file_ids.append(fid)
                    self.exp.files[fid] = {"name": name, "mimetype": mimetype, "size": size, "channel": conv.id,
                                           "ts": ts, "user": user, "url_private": url}
            msg["files"] = files
            msg["upload"] = True
            s.files += len(files)
        return edited_ts, reactions, file_ids

    def _record(self, conv: _Conv, ts: str, user: str | None, text: str, subtype: str | None,
                thread_ts: str | None, decor: tuple[str | None, dict[str, list[str]], list[str]],
                reply_count: int | None = None, parent_user_id: str | None = None, bot_id: str | None = None) -> None:
        self.summary.subtypes[subtype or ""] += 1
        if self.exp is not None:
            self.exp.messages[(conv.id, ts)] = {
                "user": user, "text": text, "subtype": subtype, "thread_ts": thread_ts, "edited_ts": decor[0],
                "reactions": decor[1], "files": decor[2], "reply_count": reply_count,
                "parent_user_id": parent_user_id, "bot_id": bot_id}

    def _conversation(self, conv: _Conv, total: int, cum_days: list[int]) -> None:
        spec, rng = self.spec, self.rng
        rand = rng.random
        last = spec.days - 1
        lo, hi = spec.reply_count
        sub_cut = spec.subtype_share if conv.kind != "dm" else 0.0
        # day index -> [(sort key, message)]: replies scheduled ahead by their parent; bounded by thread_span_days
        pending: dict[int, list[tuple[int, dict[str, Any]]]] = {}
        micro_next: dict[int, int] = {}  # day index -> next microsecond counter: ts unique within the channel
        committed = 0  # messages placed so far, including replies scheduled for later days
        written = 0
        for d in range(spec.days):
            items = pending.pop(d, [])
            uploads: list[tuple[str, str]] = []
            day_start = self.day0 + d * DAY
            target = total if d == last else total * cum_days[d] // cum_days[-1]
            while committed < target:
                committed += 1
                sec = day_start + rng.randrange(DAY)
                micro = micro_next.get(d, 1)
                micro_next[d] = micro + 1
                ts = f"{sec}.{micro:06d}"
                key = sec * 1_000_000 + micro
                if rand() < sub_cut:
                    items.append((key, self._special(conv, sec, ts, key)))
                    continue
                user = rng.choice(conv.authors)
                text = self._text(conv)
                msg = self._user_msg(user, text, ts)
                decor = self._decorate(msg, user, sec, conv, ts, uploads)
                if conv.kind in ("public", "private") and len(conv.pins) < 3 and rand() < spec.pin_share:
                    conv.pins.append({"id": ts, "type": "C", "created": sec + 60, "user": user, "owner": user})
                    self.summary.pins += 1
                n_replies = 0
                if rand() < spec.thread_share:
                    n_replies = min(rng.randint(lo, hi), total - committed)  # never overshoot the exact total
                if n_replies:
                    committed += n_replies
                    self._thread(conv, msg, d, sec, n_replies, items, pending, micro_next, uploads)
                self._record(conv, ts, user, text, None, ts if n_replies else None, decor,
                             reply_count=n_replies or None)
                items.append((key, msg))
            micro_next.pop(d, None)
            if items:
                items.sort(key=lambda item: item[0])  # keys are unique per channel, so this is the ts order
                self._put(f"{conv.folder}/{self.days[d]}.json", self._encoder.encode([m for _, m in items]).encode())
                self.summary.day_files += 1
                written += len(items)
            for fid, name in uploads:
                self._put(f"__uploads/{fid}/{name}", file_bytes(fid))
        assert not pending and written == total, (conv.id, written, total)
        self.summary.per_channel[conv.id] = written
        self.summary.folders[conv.id] = conv.folder
        self.summary.messages += written

    def _special(self, conv: _Conv, sec: int, ts: str, key: int) -> dict[str, Any]:
        """A top-level message with a subtype (never a thread parent)."""
        rng = self.rng
        r = rng.random()
        if r < 0.35 or (r < 0.7 and not self.bots):
            user = rng.choice(conv.members)
            text = f"<@{user}> has joined the channel"
            msg = {"type": "message", "subtype": "channel_join", "ts": ts, "user": user, "text": text}
            self._record(conv, ts, user, text, "channel_join", None, (None, {}, []))
            return msg
        if r < 0.7:
            _uid, bot_id, username = rng.choice(self.bots)
            text = self._text(conv)
            msg = {"type": "message", "subtype": "bot_message", "text": text, "ts": ts, "bot_id": bot_id,
                   "username": username}
            self._record(conv, ts, None, text, "bot_message", None, (None, {}, []), bot_id=bot_id)
            return msg
        if r < 0.9:
            kind = "topic" if r < 0.8 else "purpose"
            user = rng.choice(conv.members)
            value = rng.choice(_TOPICS if kind == "topic" else _PURPOSES)
            text = f"<@{user}> set the channel {kind}: {value}" if value else f"<@{user}> cleared the channel {kind}"
            msg = {"type": "message", "subtype": f"channel_{kind}", "ts": ts, "user": user, "text": text,
                   kind: value}
            # generation within a day is not in ts order: keep the newest for channels.json
            if key > getattr(conv, f"{kind}_key"):
                setattr(conv, f"{kind}_key", key)
                setattr(conv, kind, {"value": value, "creator": user if value else "", "last_set": sec})
            self._record(conv, ts, user, text, f"channel_{kind}", None, (None, {}, []))
            return msg
        subtype = rng.choice(_UNKNOWN_SUBTYPES)
        user = rng.choice(conv.members)
        text = self._text(conv)
        msg = {"type": "message", "subtype": subtype, "ts": ts, "user": user, "text": text}
        self._record(conv, ts, user, text, subtype, None, (None, {}, []))
        return msg

    def _thread(self, conv: _Conv, parent: dict[str, Any], d: int, sec: int, n: int,
                items: list[tuple[int, dict[str, Any]]], pending: dict[int, list[tuple[int, dict[str, Any]]]],
                micro_next: dict[int, int], uploads: list[tuple[str, str]]) -> None:
        """Decide all replies now (the parent's day file is written first and needs their counts and ts), file
        same-day ones into `items` and later ones into `pending` for the day of their own ts."""
        spec, rng = self.spec, self.rng
        rand = rng.random
        last = spec.days - 1
        span = min(spec.thread_span_days, last - d)
        day_end = self.day0 + (d + 1) * DAY - 1
        slots = []
        for _ in range(n):
            if span == 0 or rand() < spec.same_day_reply_share:
                rd, rsec = d, rng.randint(sec, day_end)  # same second is fine: the micro counter is higher
            else:
                rd = d + rng.randint(1, span)
                rsec = self.day0 + rd * DAY + rng.randrange(DAY)
            micro = micro_next.get(rd, 1)
            micro_next[rd] = micro + 1
            slots.append((rsec * 1_000_000 + micro, rd, rsec, micro))
        slots.sort()
        parent_ts, parent_user = parent["ts"], parent["user"]
        reply_users: list[str] = []
        replies = []
        for key, rd, rsec, micro in slots:
            user = rng.choice(conv.members)
            ts = f"{rsec}.{micro:06d}"
            text = self._text(conv)
            msg = self._user_msg(user, text, ts)
            msg["thread_ts"] = parent_ts
            msg["parent_user_id"] = parent_user
            subtype = None
            if rand() < spec.broadcast_share:
                subtype = msg["subtype"] = "thread_broadcast"
            # files of a later-day reply are uploaded with that day; same list is fine for the ZIP either way
            decor = self._decorate(msg, user, rsec, conv, ts, uploads)
            self._record(conv, ts, user, text, subtype, parent_ts, decor, parent_user_id=parent_user)
            (items if rd == d else pending.setdefault(rd, [])).append((key, msg))
            if user not in reply_users:
                reply_users.append(user)
            replies.append({"user": user, "ts": ts})
        parent["thread_ts"] = parent_ts
        parent["reply_count"] = n
        parent["reply_users_count"] = len(reply_users)
        parent["latest_reply"] = replies[-1]["ts"]
        parent["reply_users"] = reply_users
        if spec.replies_list:
            parent["replies"] = replies
        parent["is_locked"] = False
        parent["subscribed"] = False
        self.summary.threads += 1
        self.summary.replies += n
        if slots[-1][1] > d:
            self.summary.cross_day_threads += 1


def write_export(path: str | Path, spec: ExportSpec, *, keep_expected: bool = False) -> ExportSummary:
    """Write the export ZIP to `path` and return its counts (and the expected model when `keep_expected`;
    that one holds every message, so keep it for small exports)."""
    _check(spec)
    path = Path(path)
    summary = ExportSummary(path=path)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        gen = _Generator(spec, zf, summary, keep_expected)
        gen.users()
        gen.conversations()
        gen.messages()
        gen.metadata()
    summary.expected = gen.exp
    summary.zip_bytes = path.stat().st_size
    return summary


def iter_day_files(path: str | Path) -> Iterator[tuple[str, str, list[dict[str, Any]]]]:
    """(folder, YYYY-MM-DD, messages) for every conversation day file in an export ZIP, in ZIP order."""
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            folder, _, base = name.partition("/")
            if base and "/" not in base and base.endswith(".json") and folder != "__uploads":
                yield folder, base[:-5], json.loads(zf.read(name))
