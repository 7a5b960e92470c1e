"""The one command line, `chronicle`: every admin command listed, the old script names kept, one set of exit codes."""

from __future__ import annotations

import importlib.util
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
GROUPS = ("activity", "migrate", "network", "node", "sample", "slack", "tagging")

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
            ("tagging", "worker"), ("tagging", "reconcile")} <= leaves
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
