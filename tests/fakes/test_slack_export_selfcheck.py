"""Self-checks of the Slack export generator: layout, ordering, threads, the expected model, variants, memory.

No Cassandra: these only open the generated ZIPs with zipfile and json.
"""

from __future__ import annotations

import json
import re
import resource
import time
import zipfile
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.slack_export import ExportSpec, ExportSummary, file_bytes, iter_day_files, write_export

TS_RE = re.compile(r"^\d{10}\.\d{6}$")
ID_RE = {"U": re.compile(r"^U[0-9A-Z]{10}$"), "C": re.compile(r"^C[0-9A-Z]{10}$"), "F": re.compile(r"^F[0-9A-Z]{10}$")}
BASE = "http://127.0.0.1:9/host"

SMALL = ExportSpec(seed=7, n_users=5, n_deleted=1, n_bots=1, n_channels=2, n_private=1, n_archived=1, n_dms=1,
                   n_mpims=1, days=3, messages=200, thread_share=0.3, reply_count=(1, 4), reaction_share=0.3,
                   edit_share=0.2, file_share=0.15, subtype_share=0.2, mention_share=0.2, link_share=0.1,
                   non_ascii_share=0.3, pin_share=0.05, file_base_url=BASE)


def ts_key(ts: str) -> tuple[int, int]:
    sec, micro = ts.split(".")
    return int(sec), int(micro)


def utc_day(ts: str) -> str:
    return datetime.fromtimestamp(int(ts.split(".")[0]), UTC).strftime("%Y-%m-%d")


def read_json(path: Path, name: str) -> Any:
    with zipfile.ZipFile(path) as zf:
        return json.loads(zf.read(name))


def by_folder(path: Path) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """folder -> [(day, message)] in file order."""
    out: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for folder, day, msgs in sorted(iter_day_files(path)):
        out[folder].extend((day, m) for m in msgs)
    return out


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> ExportSummary:
    return write_export(tmp_path_factory.mktemp("export") / "small.zip", SMALL, keep_expected=True)


def test_root_files_and_folders(small: ExportSummary) -> None:
    with zipfile.ZipFile(small.path) as zf:
        names = set(zf.namelist())
    for root in ("users.json", "channels.json", "groups.json", "dms.json", "mpims.json", "integration_logs.json"):
        assert root in names
    assert "org_users.json" not in names and "canvases.json" not in names
    assert not any(n.startswith("__uploads/") for n in names)
    channels = read_json(small.path, "channels.json")
    groups = read_json(small.path, "groups.json")
    dms = read_json(small.path, "dms.json")
    mpims = read_json(small.path, "mpims.json")
    assert [len(channels), len(groups), len(dms), len(mpims)] == [2, 1, 1, 1]
    assert channels[0]["is_general"] and channels[0]["name"] == "general" and not channels[0]["is_archived"]
    assert channels[1]["is_archived"]
    for c in channels + groups + mpims:
        assert ID_RE["C"].match(c["id"])
        assert set(c["topic"]) == set(c["purpose"]) == {"value", "creator", "last_set"}
        assert c["creator"] in c["members"]
    assert dms[0]["id"].startswith("D") and len(dms[0]["members"]) == 2
    assert mpims[0]["name"].startswith("mpdm-")
    folders = {name.split("/")[0] for name in names if "/" in name}
    assert folders == {channels[0]["name"], channels[1]["name"], groups[0]["name"], dms[0]["id"], mpims[0]["name"]}
    assert small.folders[dms[0]["id"]] == dms[0]["id"] and small.folders[groups[0]["id"]] == groups[0]["name"]
    logs = read_json(small.path, "integration_logs.json")
    assert isinstance(logs["logs"], list) and len(logs["logs"]) == 1
    users = read_json(small.path, "users.json")
    assert len(users) == small.users == 7
    assert all(ID_RE["U"].match(u["id"]) and u["team_id"] == SMALL.team_id for u in users)
    assert [u["deleted"] for u in users].count(True) == 1 and [u["is_bot"] for u in users].count(True) == 1
    assert all({"real_name", "display_name", "image_72"} <= set(u["profile"]) for u in users)


def test_day_files_valid_sorted_and_on_their_utc_day(small: ExportSummary) -> None:
    count = 0
    seen: dict[str, set[str]] = defaultdict(set)
    for folder, day, msgs in iter_day_files(small.path):
        count += 1
        assert re.match(r"^\d{4}-\d{2}-\d{2}$", day) and msgs, (folder, day)
        keys = [ts_key(m["ts"]) for m in msgs]
        assert keys == sorted(keys), f"{folder}/{day} not oldest first"
        for m in msgs:
            assert m["type"] == "message" and TS_RE.match(m["ts"])
            assert utc_day(m["ts"]) == day, "every message, replies too, sits in the file of its own UTC day"
            assert m["ts"] not in seen[folder], "ts unique per channel"
            seen[folder].add(m["ts"])
    assert count == small.day_files
    assert sum(len(s) for s in seen.values()) == small.messages == SMALL.messages  # exact total


def test_counts_match_the_files(small: ExportSummary) -> None:
    folders = by_folder(small.path)
    per_folder = {f: len(msgs) for f, msgs in folders.items()}
    assert {small.folders[c]: n for c, n in small.per_channel.items() if n} == per_folder
    msgs = [m for ms in folders.values() for _, m in ms]
    assert sum(1 for m in msgs if m.get("reply_count")) == small.threads > 0
    assert sum(1 for m in msgs if m.get("thread_ts") and m["thread_ts"] != m["ts"]) == small.replies > 0
    assert sum(len(m.get("reactions", ())) for m in msgs) == small.reactions > 0
    assert sum(r["count"] for m in msgs for r in m.get("reactions", ())) == small.reaction_users
    assert sum(len(m.get("files", ())) for m in msgs) == small.files > 0
    assert sum(1 for m in msgs if "edited" in m) == small.edited > 0
    assert Counter(m.get("subtype", "") for m in msgs) == small.subtypes
    for subtype in ("", "channel_join", "bot_message", "thread_broadcast"):
        assert small.subtypes[subtype] > 0, subtype


def test_threads(small: ExportSummary) -> None:
    cross_day = 0
    for _folder, items in by_folder(small.path).items():
        replies: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
        parents = {}
        for day, m in items:
            if m.get("thread_ts") and m["thread_ts"] != m["ts"]:
                replies[m["thread_ts"]].append((day, m))
            elif "reply_count" in m:
                parents[m["ts"]] = (day, m)
        assert set(replies) == set(parents), "every reply has its parent in the same conversation"
        for ts, (pday, p) in parents.items():
            rs = sorted(replies[ts], key=lambda item: ts_key(item[1]["ts"]))
            assert p["thread_ts"] == ts and p["reply_count"] == len(rs)
            assert p["latest_reply"] == rs[-1][1]["ts"]
            assert all(ts_key(r["ts"]) > ts_key(ts) and r["parent_user_id"] == p["user"] for _, r in rs)
            assert p["replies"] == [{"user": r["user"], "ts": r["ts"]} for _, r in rs]
            users = list(dict.fromkeys(r["user"] for _, r in rs))
            assert p["reply_users"] == users and p["reply_users_count"] == len(users)
            cross_day += any(day != pday for day, _ in rs)
    assert cross_day == small.cross_day_threads > 0, "some thread must span day files"


def _as_expected(m: dict[str, Any]) -> dict[str, Any]:
    """The file's message in the expected model's shape."""
    is_reply = bool(m.get("thread_ts")) and m["thread_ts"] != m["ts"]
    return {"user": m.get("user"), "text": m["text"], "subtype": m.get("subtype"), "thread_ts": m.get("thread_ts"),
            "edited_ts": m["edited"]["ts"] if "edited" in m else None,
            "reactions": {r["name"]: sorted(r["users"]) for r in m.get("reactions", ())},
            "files": [f["id"] for f in m.get("files", ())], "reply_count": m.get("reply_count"),
            "parent_user_id": m.get("parent_user_id") if is_reply else None, "bot_id": m.get("bot_id")}


def test_expected_model_matches_files(small: ExportSummary) -> None:
    exp = small.expected
    assert exp is not None
    folder_to_id = {f: c for c, f in small.folders.items()}
    found = {}
    for folder, items in by_folder(small.path).items():
        for _day, m in items:
            found[(folder_to_id[folder], m["ts"])] = _as_expected(m)
            for f in m.get("files", ()):
                assert ID_RE["F"].match(f["id"]) and f["url_private"] == f"{BASE}/files/{f['id']}"
                assert f["size"] == len(file_bytes(f["id"]))
                assert exp.files[f["id"]]["channel"] == folder_to_id[folder] and exp.files[f["id"]]["ts"] == m["ts"]
            if "edited" in m:
                assert ts_key(m["edited"]["ts"]) > ts_key(m["ts"])
    assert found == exp.messages
    assert len(exp.files) == small.files
    texts = " ".join(e["text"] for e in exp.messages.values())
    assert "<@U" in texts and "<#C" in texts and not texts.isascii()

    users = read_json(small.path, "users.json")
    assert {u["id"]: {"name": u["name"], "real_name": u["real_name"], "display_name": u["profile"]["display_name"],
                      "deleted": u["deleted"], "is_bot": u["is_bot"], "tz": u.get("tz"), "team_id": u["team_id"]}
            for u in users} == exp.users
    for name, kind in (("channels.json", "public"), ("groups.json", "private"), ("mpims.json", "mpim")):
        for c in read_json(small.path, name):
            e = exp.channels[c["id"]]
            assert (e["kind"], e["private"], e["name"], e["folder"]) == (kind, kind != "public", c["name"], c["name"])
            assert (e["archived"], e["topic"], e["purpose"]) == (c["is_archived"], c["topic"]["value"],
                                                                 c["purpose"]["value"])
            assert (e["created"], e["creator"], e["members"]) == (c["created"], c["creator"], c["members"])
            assert e["pins"] == [p["id"] for p in c.get("pins", ())]
            assert all((c["id"], ts) in exp.messages for ts in e["pins"])
    dm = read_json(small.path, "dms.json")[0]
    assert exp.channels[dm["id"]]["kind"] == "dm" and exp.channels[dm["id"]]["members"] == dm["members"]


def test_channels_json_topic_is_the_newest_topic_message(small: ExportSummary) -> None:
    exp = small.expected
    assert exp is not None
    for cid, c in exp.channels.items():
        topics = sorted((ts_key(ts), e["text"]) for (mc, ts), e in exp.messages.items()
                        if mc == cid and e["subtype"] == "channel_topic")
        if topics:
            newest = topics[-1][1]
            assert newest.endswith(f": {c['topic']}") if c["topic"] else "cleared the channel topic" in newest


def test_deterministic_and_independent_of_keep_expected(small: ExportSummary, tmp_path: Path) -> None:
    again = write_export(tmp_path / "again.zip", SMALL)
    assert again.expected is None
    assert again.path.read_bytes() == small.path.read_bytes()
    other = write_export(tmp_path / "other.zip", ExportSpec(seed=8, messages=50))
    assert other.path.read_bytes() != small.path.read_bytes()


def test_org_users_and_counts_only_parents(tmp_path: Path) -> None:
    spec = ExportSpec(seed=3, messages=300, thread_share=0.4, users_file="org_users.json", replies_list=False,
                      canvases=True, pretty=True, ascii_json=True)
    summary = write_export(tmp_path / "org.zip", spec, keep_expected=True)
    with zipfile.ZipFile(summary.path) as zf:
        names = set(zf.namelist())
        assert zf.read("general/" + next(n for n in names if n.startswith("general/")).split("/")[1]).isascii()
    assert "org_users.json" in names and "users.json" not in names and "canvases.json" in names
    assert len(read_json(summary.path, "org_users.json")) == summary.users
    parents = [m for _, _, ms in iter_day_files(summary.path) for m in ms if "reply_count" in m]
    assert parents and summary.threads == len(parents)
    for p in parents:
        assert "replies" not in p and p["reply_count"] >= 1 and p["reply_users_count"] == len(p["reply_users"])
    assert summary.messages == 300


def test_mattermost_uploads(tmp_path: Path) -> None:
    spec = ExportSpec(seed=5, messages=400, file_share=0.2, mattermost=True, file_base_url=BASE)
    summary = write_export(tmp_path / "mm.zip", spec, keep_expected=True)
    assert summary.expected is not None and summary.files > 0
    with zipfile.ZipFile(summary.path) as zf:
        uploads = {n for n in zf.namelist() if n.startswith("__uploads/")}
        assert len(uploads) == summary.files
        for fid, f in summary.expected.files.items():
            name = f"__uploads/{fid}/{f['name']}"
            assert name in uploads and zf.read(name) == file_bytes(fid)
    # the conversation folders are the same as the standard layout's
    plain = write_export(tmp_path / "plain.zip", ExportSpec(seed=5, messages=400, file_share=0.2, file_base_url=BASE))
    with zipfile.ZipFile(plain.path) as zf, zipfile.ZipFile(summary.path) as mm:
        assert set(zf.namelist()) == set(mm.namelist()) - uploads


@pytest.mark.parametrize("days,messages", [(1, 40), (1, 0), (60, 5)])
def test_edge_shapes_keep_exact_totals(tmp_path: Path, days: int, messages: int) -> None:
    summary = write_export(tmp_path / "e.zip", ExportSpec(days=days, messages=messages, thread_share=0.5))
    assert summary.messages == messages == sum(len(ms) for _, _, ms in iter_day_files(summary.path))


def test_bad_specs_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="n_users"):
        write_export(tmp_path / "x.zip", ExportSpec(n_users=1))
    with pytest.raises(ValueError, match="users_file"):
        write_export(tmp_path / "x.zip", ExportSpec(users_file="people.json"))


@pytest.mark.slow
def test_big_generation_streams(tmp_path: Path) -> None:
    spec = ExportSpec(seed=11, n_users=200, n_channels=40, n_private=10, days=730, messages=200_000,
                      start=datetime(2022, 1, 1, tzinfo=UTC))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    started = time.monotonic()
    summary = write_export(tmp_path / "big.zip", spec)
    elapsed = time.monotonic() - started
    growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert summary.messages == 200_000 and summary.expected is None
    assert growth_mb < 150, f"peak RSS grew {growth_mb:.0f} MB: generation must stream"
    assert elapsed < 300, f"{elapsed:.0f}s for 200k messages"
