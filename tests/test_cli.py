"""The one command line, `chronicle`: every admin command listed, the old script names kept, one set of exit codes."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from api.cli import chronicle
from api.cli.common import EXIT_CODES_DOC

ROOT = Path(__file__).resolve().parents[1]
CHRONICLE = str(Path(sys.executable).with_name("chronicle"))
GROUPS = ("activity", "erase", "migrate", "network", "node", "retention", "sample", "slack", "tagging")

# The files users and the seeds know, and the command each one now is.
WRAPPERS = {
    "runtime_scripts/cassandra_node.py": ("node",),
    "runtime_scripts/migrate.py": ("migrate",),
    "runtime_scripts/load_sample_data.py": ("sample", "load"),
    "runtime_scripts/slack_file_worker.py": ("slack", "file-worker"),
    "runtime_scripts/slack_backfill.py": ("slack", "backfill"),
    "runtime_scripts/slack_import_export.py": ("slack", "import-export"),
    "runtime_scripts/slack_export.py": ("slack", "export"),
    "runtime_scripts/slack_report.py": ("slack", "report"),
    "runtime_scripts/load_network.py": ("network", "load"),
    "runtime_scripts/network_query.py": ("network", "query"),
    "runtime_scripts/insert_new_tweets.py": ("network", "post"),
    "runtime_scripts/init_cache_for_user.py": ("network", "init-cache"),
    "runtime_scripts/compute_rankings.py": ("network", "rankings"),
    "cleaning_scripts/follower_relations.py": ("network", "clean-relations"),
    "cleaning_scripts/tweets.py": ("network", "clean-posts"),
    "cleaning_scripts/generate_network.py": ("network", "generate"),
}


def _leaves(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            out.extend(_leaves(command, (*prefix, name)))
        else:
            out.append((*prefix, name))
    return out


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = chronicle
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def _run(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=120)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _words(text: str) -> str:
    return " ".join(text.split())


def test_help_lists_every_group_and_every_command(tmp_path):
    result = _run(CHRONICLE, "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    commands = result.stdout.split("Commands:")[1].split("Every command:")[0]
    assert sorted(re.findall(r"^  (\S+)", commands, re.MULTILINE)) == list(GROUPS)
    every = result.stdout.split("Every command:")[1]
    listed = {tuple(line.strip().split("  ")[0].split()) for line in every.splitlines() if line.startswith("  ")}
    leaves = set(_leaves(chronicle))
    assert leaves <= listed
    assert {("node", "start"), ("node", "cluster", "destroy"), ("migrate",), ("sample", "load"),
            ("slack", "file-worker"), ("network", "load"), ("network", "query", "q6"), ("network", "post"),
            ("network", "init-cache"), ("network", "rankings"), ("network", "clean-relations"),
            ("network", "clean-posts"), ("network", "generate"), ("activity", "rebuild"), ("activity", "worker"),
            ("activity", "show"), ("tagging", "create-project"), ("tagging", "add-user"), ("tagging", "fill-queues"),
            ("tagging", "worker"), ("tagging", "reconcile"), ("retention", "run"), ("retention", "hold", "create")
            } <= leaves
    assert _words(EXIT_CODES_DOC) in _words(result.stdout)


def test_every_command_has_help():
    runner = CliRunner()
    for path in _leaves(chronicle):
        args = [*path[:2], "--network", "x", path[2]] if path[:2] == ("network", "query") else list(path)
        result = runner.invoke(chronicle, [*args, "--help"])
        assert result.exit_code == 0 and "Usage: chronicle " in result.output, (path, result.output)


def test_python_dash_m(tmp_path):
    result = _run(sys.executable, "-m", "api.cli", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Every command:" in result.stdout


@pytest.mark.parametrize("script", sorted(WRAPPERS))
def test_old_script_names_still_work(script, tmp_path):
    """Each old file is the command itself (`main`), and runs from any directory without path hacks."""
    spec = importlib.util.spec_from_file_location(script.replace("/", "_").removesuffix(".py"), ROOT / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main is _command(WRAPPERS[script])
    text = (ROOT / script).read_text()
    assert "sys.path" not in text and "noqa" not in text
    result = _run(sys.executable, str(ROOT / script), "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Usage: {Path(script).name} ")


def test_exit_codes_are_shared(tmp_path):
    down = {"CHRONICLE_CASSANDRA_PORT": str(_free_port()), "CHRONICLE_CONNECT_TIMEOUT": "1"}
    for args in (("migrate",), ("sample", "load"), ("slack", "file-worker", "--once"),
                 ("slack", "export", "--team", "T1", "--out", str(tmp_path / "out.zip"), "--no-progress")):
        result = _run(CHRONICLE, *args, env={**down, "CHRONICLE_FILES_ROOT": str(tmp_path)})
        assert result.returncode == 3, (args, result.stderr)
        assert "error: Cassandra unreachable" in result.stderr
    result = _run(CHRONICLE, "migrate", env={"CHRONICLE_READ_CONSISTENCY": "SOMETIMES"})
    assert result.returncode == 2 and "error: bad configuration" in result.stderr
    result = _run(CHRONICLE, "node", "status", "--port", down["CHRONICLE_CASSANDRA_PORT"],
                  env={"CHRONICLE_STATE_DIR": str(tmp_path / "state")})
    assert result.returncode == 1 and "DOWN" in result.stdout
    result = _run(CHRONICLE, "node", "cluster", "status", "-n", "12")
    assert result.returncode == 1 and "between 1 and 9 nodes" in result.stderr
    result = _run(CHRONICLE, "network", "load", "--network", "x", "--dir", str(tmp_path))
    assert result.returncode == 1 and "accounts.csv is missing" in result.stderr
    assert _run(CHRONICLE, "network", "nonsense").returncode == 2


def test_no_path_hacks_anywhere():
    hacks = ("sys.path" + ".insert", "noqa: " + "E402")  # spelled apart so this file does not match itself
    offenders = []
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).parts
        if parts[0].startswith(".") or "egg-info" in parts[0]:
            continue
        text = path.read_text()
        if any(hack in text for hack in hacks):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


# -- slack commands: ids validated, unknown workspaces and channels refused with nothing written ------------------

SLACK_ID_COMMANDS = {  # each slack command taking --team (and --channels), with the rest of a valid command line
    "backfill": [],
    "export": ["--out", "{out}"],
    "report": [],
    "analytics-rebuild": [],
    "index-search": [],
    "import-export": ["{zip}"],
}


def _slack_zip(path: Path, team: str | None, *, user: str = "UCLI1") -> Path:
    """A small Slack export: one user (of `team`, or with no team_id), #general with two messages on 2016-03-02."""
    import json
    import zipfile

    person = {"id": user, "name": "cli", **({"team_id": team} if team else {})}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("users.json", json.dumps([person]))
        zf.writestr("channels.json", json.dumps([{"id": "CCLIGENERAL", "name": "general", "created": 1456000000}]))
        zf.writestr("general/2016-03-02.json", json.dumps([
            {"type": "message", "user": user, "text": f"message {i}", "ts": f"{1456920000 + i}.000100"}
            for i in range(2)]))
    return path


def _team() -> str:
    import uuid

    return f"T{uuid.uuid4().hex[:12].upper()}"


def _slack(db, *args: str):
    keyspace = [] if args[0] == "backfill" else ["--keyspace", db.keyspace]
    progress = ["--no-progress"] if args[0] not in ("report",) else []
    return CliRunner().invoke(chronicle, ["slack", *args, *keyspace, *progress])


@pytest.mark.parametrize("command", sorted(SLACK_ID_COMMANDS))
def test_slack_team_and_channel_ids_are_checked_before_anything_runs(command, tmp_path):
    out, zip_path = tmp_path / "out.zip", _slack_zip(tmp_path / "in.zip", "TCLI")
    rest = [a.format(out=out, zip=zip_path) for a in SLACK_ID_COMMANDS[command]]
    for bad in ("bad team", "t1", "T1\n", "T" * 65, ""):
        result = CliRunner().invoke(chronicle, ["slack", command, *rest, "--team", bad])
        assert result.exit_code == 2, (command, bad, result.output)
        assert "is not a Slack workspace id" in result.output, result.output
    if command in ("backfill", "export", "analytics-rebuild", "index-search"):
        for bad in ("bad channel", ",", "General", "a.b", "C1;DROP"):
            result = CliRunner().invoke(chronicle, ["slack", command, *rest, "--team", "T1", "--channels", bad])
            assert result.exit_code == 2, (command, bad, result.output)
            assert "is not a Slack channel id" in result.output or "names no channel" in result.output
    if command in ("analytics-rebuild", "index-search"):  # ids only: a name is refused
        result = CliRunner().invoke(chronicle, ["slack", command, "--team", "T1", "--channels", "general"])
        assert result.exit_code == 2 and "'general' is not a Slack channel id" in result.output
    assert not out.exists() and not Path(f"{out}.partial").exists()


def test_slack_export_of_an_unknown_workspace_or_channel_exits_4_and_writes_no_file(db, tmp_path):
    from api.slack import zip_import

    team = _team()
    zip_import.import_export(db, str(_slack_zip(tmp_path / "in.zip", team)), team_id=team)
    out = tmp_path / "out.zip"
    never = _team()
    result = _slack(db, "export", "--team", never, "--out", str(out))
    assert result.exit_code == 4, result.output
    assert f"workspace {never} is not in the archive" in result.output
    for channels in ("CNOSUCHCHANNEL", "general,nosuchname"):
        result = _slack(db, "export", "--team", team, "--out", str(out), "--channels", channels)
        assert result.exit_code == 4, result.output
        missing = channels.split(",")[-1]
        assert f"no channel {missing} in workspace {team}'s archive" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.zip"]  # no ZIP, not even an empty or partial one
    out.write_bytes(b"an older export")
    assert _slack(db, "export", "--team", never, "--out", str(out)).exit_code == 4
    assert out.read_bytes() == b"an older export"  # refused before the file is opened
    for channels in ("general", "CCLIGENERAL", "#general"):
        result = _slack(db, "export", "--team", team, "--out", str(out), "--channels", channels)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["messages"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.zip", "out.zip"]


def test_a_failed_export_leaves_no_file_behind(db, tmp_path, monkeypatch):
    from api.slack import zip_export, zip_import

    team = _team()
    zip_import.import_export(db, str(_slack_zip(tmp_path / "in.zip", team)), team_id=team)

    def broken(*_args, **_kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(zip_export, "_export_channel", broken)
    with pytest.raises(OSError, match="disk full"):
        zip_export.export(db, team, str(tmp_path / "out.zip"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.zip"]


def test_slack_report_of_an_unknown_workspace_exits_4_and_stores_nothing(db, tmp_path):
    from api.slack.reports import service

    never = _team()
    out = tmp_path / "report.json"
    result = _slack(db, "report", "--team", never, "--start", "2016-02-28", "--out", str(out))
    assert result.exit_code == 4, result.output
    assert f"workspace {never} is not in the archive" in result.output
    assert not out.exists()
    assert service.get(db, never, "2016-02-28-7") is None
    assert service.listing(db, never, limit=10)[0] == []
    assert _slack(db, "report", "--team", never, "--start", "2016-02-28", "--stored").exit_code == 4
    team = _team()
    from api.slack import zip_import

    zip_import.import_export(db, str(_slack_zip(tmp_path / "in.zip", team)), team_id=team)
    result = _slack(db, "report", "--team", team, "--start", "2016-02-28")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["totals"]["messages"]["value"] == 2


def test_slack_import_export_refuses_a_team_the_export_does_not_name(db, tmp_path):
    from api.slack import channels, users

    export_team, other = _team(), _team()
    path = _slack_zip(tmp_path / "in.zip", export_team)
    for args in ((), ("--dry-run",)):
        result = _slack(db, "import-export", str(path), "--team", other, *args)
        assert result.exit_code == 4, result.output
        assert f"belongs to workspace {export_team}" in result.output and other in result.output
    for team in (export_team, other):  # nothing written, under either id
        assert not channels.workspace_known(db, team) and users.get(db, team, "UCLI1") is None
    result = _slack(db, "import-export", str(path), "--team", export_team)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["messages"] == 2 and channels.workspace_known(db, export_team)
    anonymous = _slack_zip(tmp_path / "anon.zip", None)  # users.json names no workspace: --team is taken
    result = _slack(db, "import-export", str(anonymous), "--team", other)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["team_id"] == other
    assert _slack(db, "import-export", str(_slack_zip(tmp_path / "a2.zip", None))).exit_code == 1  # no workspace


@pytest.mark.parametrize("command", ["analytics-rebuild", "index-search"])
def test_slack_rebuild_commands_refuse_unknown_workspaces_and_channels(db, tmp_path, command):
    from api.slack import zip_import

    team = _team()
    zip_import.import_export(db, str(_slack_zip(tmp_path / "in.zip", team)), team_id=team)
    result = _slack(db, command, "--team", _team(), "--dry-run")
    assert result.exit_code == 4 and "is not in the archive" in result.output, result.output
    result = _slack(db, command, "--team", team, "--channels", "CCLIGENERAL,CNOSUCH", "--dry-run")
    assert result.exit_code == 4 and f"no channel CNOSUCH in workspace {team}'s archive" in result.output
    result = _slack(db, command, "--team", team, "--channels", "CCLIGENERAL", "--dry-run")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["channels"] == 1


def test_a_bad_setting_stops_a_command_with_exit_2_naming_the_variable():
    """Settings are read and checked once, by the root's runtime, before the command touches anything."""
    result = CliRunner().invoke(chronicle, ["migrate", "--dry-run", "--keyspace", "never_created"],
                                env={"CHRONICLE_NETWORK_PAGE_SIZE": "lots"})
    assert result.exit_code == 2, result.output
    assert "CHRONICLE_NETWORK_PAGE_SIZE" in result.output


def test_a_command_runs_with_one_database_from_the_root_runtime_closed_when_it_ends(db):
    """A command asking twice gets one Database; one it built for another keyspace is closed at the end and
    never replaces the process's installed one."""
    from api.cli.common import Runtime, database
    from api.db import installed_db

    with click.Context(chronicle) as ctx:
        ctx.obj = Runtime()
        ctx.call_on_close(ctx.obj.close)
        assert database() is db  # in-process, no other keyspace asked: the process's own
    with click.Context(chronicle) as ctx:
        ctx.obj = Runtime()
        ctx.call_on_close(ctx.obj.close)
        own = database("system")
        assert own is not db and database() is own
        assert own.execute_raw("SELECT release_version FROM system.local").one() is not None
        with pytest.raises(click.UsageError):
            database("another_keyspace")
    assert installed_db() is db
    assert own._session is None  # closed with its command


@pytest.mark.parametrize("args", [
    ["erase"],  # neither a person nor an account
    ["erase", "--team", "T1", "--network", "n1", "--account", "1"],  # both
    ["erase", "--network", "n1"],  # an account needs its network and its id
    ["erase", "--team", "T1"],
    ["erase", "--team", "t1", "--user", "U1"],  # not a Slack id
    ["retention", "run"],
    ["retention", "run", "--team", "T1", "--network", "n1"],
    ["retention", "show", "--network", "no such"],
    ["retention", "hold", "list", "--network", "bad/name"],
])
def test_erase_and_retention_say_whose_archive_before_anything_runs(args):
    """Exit 2 with the reason, before any connection (the node is not even asked)."""
    result = CliRunner().invoke(chronicle, args)
    assert result.exit_code == 2, result.output
    assert "--team" in result.output or "--network" in result.output, result.output


def test_yield_cpu_lowers_every_thread_of_the_process_and_those_it_starts():
    """`retention run --nice` (default 10): Linux keeps a niceness per thread, and the driver's I/O thread may
    run before the command lowers its own; every thread, before and after, must end up below the API's."""
    script = """
import os, threading, time
from api.cli.common import yield_cpu
started = threading.Event(); stop = threading.Event()
def spin():
    started.set(); stop.wait()
before = threading.Thread(target=spin); before.start(); started.wait()
print(yield_cpu(7))
after = threading.Thread(target=spin); after.start()
time.sleep(0.1)
print(sorted({os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir('/proc/self/task')}))
print(yield_cpu(3))  # never raised back up
stop.set()
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[1], check=True).stdout.split("\n")
    assert out[:3] == ["7", "[7]", "7"], out
