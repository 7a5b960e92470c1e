"""The runtime scripts answer like the reference too (run in-process with click's runner, same database)."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from api.network.settings import network_settings, set_network_settings
from tests.network.helpers import CAP, exact_settings, load_script

SCRIPTS = ("runtime_scripts/load_network.py", "runtime_scripts/insert_new_tweets.py",
           "runtime_scripts/init_cache_for_user.py", "runtime_scripts/compute_rankings.py",
           "runtime_scripts/network_query.py", "cleaning_scripts/generate_network.py")


@pytest.fixture(scope="module")
def scripts():
    return {name.split("/")[-1].removesuffix(".py"): load_script(name) for name in SCRIPTS}


def run(script, *args, code: int = 0):
    result = CliRunner().invoke(script.main, [str(a) for a in args])
    assert result.exit_code == code, (args, result.output, result.exception)
    return json.loads(result.stdout) if code == 0 and result.stdout.strip().startswith(("{", "[")) else result


def test_help_everywhere(scripts):
    for script in scripts.values():
        assert CliRunner().invoke(script.main, ["--help"]).exit_code == 0
    for sub in ("q1", "q2", "q3", "q4", "q6"):
        assert CliRunner().invoke(scripts["network_query"].main, ["--network", "x", sub, "--help"]).exit_code == 0


def test_queries_through_scripts(net, scripts):
    ref, q = net.ref, scripts["network_query"]
    set_network_settings(exact_settings(hybrid_threshold=ref.q2(5)[-1][1], cache_cap=CAP))
    for account, _ in ref.q2(6):
        got = run(q, "--network", net.name, "q1", "--account-id", account)
        assert [p["post_id"] for p in got] == ref.q1(account)
        for order in ("newest", "likes"):
            home = run(q, "--network", net.name, "q4", "--account-id", account, "--order", order)
            followers, follows, want = ref.q4(account, order, network_settings().cache_cap)
            assert [p["post_id"] for p in home["posts"]] == want
            assert (home["account"]["follower_count"], home["account"]["follows_count"]) == (followers, follows)
    for words in (["love"], ["LOVE", "tour"], ["happy", "birthday", "world"]):
        got = run(q, "--network", net.name, "q6", *words)
        assert [p["post_id"] for p in got["posts"]] == ref.q6([w.casefold() for w in words])
    run(q, "--network", net.name, "q6", "...", code=2)
    run(q, "--network", net.name, "q1", "--account-id", 1, code=4)


def test_rankings_script_appends_snapshots(fresh_net, scripts):
    net = fresh_net
    ref, q = net.ref, scripts["network_query"]
    run(q, "--network", net.name, "q2", "--history", 1000, code=4)  # a new network has no snapshot yet
    dry = run(scripts["compute_rankings"], "--network", net.name, "--dry-run")
    assert [(a["account_id"], a["follower_count"]) for a in dry["accounts"]] == ref.q2()
    assert [(a["account_id"], a["follows_top"]) for a in dry["followers"]] == ref.q3()
    run(q, "--network", net.name, "q2", "--history", 1000, code=4)  # the dry run appended nothing
    snap = run(scripts["compute_rankings"], "--network", net.name)
    assert [(a["account_id"], a["follower_count"]) for a in snap["accounts"]] == ref.q2()
    assert [(a["account_id"], a["follows_top"]) for a in snap["followers"]] == ref.q3()
    after = run(q, "--network", net.name, "q2", "--history", 1000)
    assert [a["snapshot_id"] for a in after] == [snap["snapshot_id"]]
    latest = run(q, "--network", net.name, "q3")
    assert [(a["account_id"], a["follows_top"]) for a in latest["followers"]] == ref.q3()
    run(q, "--network", net.name, "q2", "--at", "2001-01-01T00:00:00Z", code=4)


def test_insert_new_tweets_and_init_cache(fresh_net, scripts, tmp_path):
    net = fresh_net
    ref, q = net.ref, scripts["network_query"]
    author = next(a for a, _ in ref.q2(100)[40:] if ref.followers(a))
    readers = sorted(ref.followers(author))[:4]
    for r in readers:  # caches exist before the insert
        run(scripts["init_cache_for_user"], "--network", net.name, "--account-id", r)
    dry = run(scripts["insert_new_tweets"], "--network", net.name, "--author-id", author, "--content", "x",
              "--dry-run")
    assert dry["posts"] == [{"author_id": author, "would_fan_out_to": len(ref.followers(author))}]
    out = run(scripts["insert_new_tweets"], "--network", net.name, "--author-id", author, "--content",
              "Script post about the ocean", "--quiet")
    post = out["posts"][0]
    assert post["fanned_out_to"] == len(ref.followers(author))
    ref.add_post(post["post_id"], author, datetime.fromisoformat(post["posted_at"]).astimezone(UTC),
                 "Script post about the ocean")
    batch = tmp_path / "new.csv"
    batch.write_text(f"author_id,content,posted_at\n{author},Batch one ocean,2017-12-31T23:59:00Z\n"
                     f"{author},Batch two ocean,\n")
    out = run(scripts["insert_new_tweets"], "--network", net.name, "--file", batch, "--quiet")
    for p, text in zip(out["posts"], ("Batch one ocean", "Batch two ocean"), strict=True):
        ref.add_post(p["post_id"], author, datetime.fromisoformat(p["posted_at"]).astimezone(UTC), text)
    for r in readers:
        for order in ("newest", "likes"):
            home = run(q, "--network", net.name, "q4", "--account-id", r, "--order", order)
            assert [p["post_id"] for p in home["posts"]] == ref.q4(r, order, network_settings().cache_cap)[2]
    built = run(scripts["init_cache_for_user"], "--network", net.name, "--account-id", readers[0])
    assert built["entries"] >= min(network_settings().cache_cap, len(
        [p for p in ref.posts.values() if p["author_id"] in ref.follows(readers[0])]))
    run(scripts["init_cache_for_user"], "--network", net.name, "--account-id", 1, code=4)
    run(scripts["insert_new_tweets"], "--network", net.name, "--author-id", 1, "--content", "x", code=4)
    assert [p["post_id"] for p in run(q, "--network", net.name, "q1", "--account-id", author)] == ref.q1(author)


def test_load_network_script_dry_run_and_errors(net, scripts, tmp_path):
    dry = run(scripts["load_network"], "--network", net.name, "--dir", net.clean, "--dry-run")
    with (net.clean / "relations.csv").open(newline="") as f:
        assert dry["rows"]["relations"] == sum(1 for _ in csv.reader(f)) - 1
    run(scripts["load_network"], "--network", net.name, "--dir", tmp_path, code=1)
    run(scripts["load_network"], "--network", net.name, code=2)
