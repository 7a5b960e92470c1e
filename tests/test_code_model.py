"""The code model, checked: every table has exactly one owner module, every statement touches only its
module's tables, and api/ has no import cycle (cross-table work lives in one module that calls the owners)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import api
from api.db import Statement

ROOT = Path(__file__).resolve().parents[1]
SYSTEM_KEYSPACES = ("system.", "system_schema.")


# Importing these has effects (the WSGI app installs a database for the process; __main__ runs the CLI);
# neither declares statements.
_ENTRY_POINTS = ("api.wsgi", "api.cli.__main__")


def _modules() -> dict[str, object]:
    return {info.name: importlib.import_module(info.name)
            for info in pkgutil.walk_packages(api.__path__, "api.") if info.name not in _ENTRY_POINTS}


def _schema_tables() -> set[str]:
    text = "\n".join(p.read_text() for p in sorted((ROOT / "cql").glob("*.cql")))
    tables = set(re.findall(r"CREATE TABLE IF NOT EXISTS \{\{keyspace\}\}\.(\w+)", text))
    dropped = set(re.findall(r"DROP TABLE IF EXISTS \{\{keyspace\}\}\.(\w+)", text))
    return (tables - dropped) | {"schema_migrations"}  # created by the migration runner itself


def _statement_calls(path: Path) -> int:
    tree = ast.parse(path.read_text())
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.Call)
               and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Statement")


def test_every_statement_touches_only_its_modules_tables():
    wrong = []
    for name, module in _modules().items():
        statements = [v for v in vars(module).values() if isinstance(v, Statement)]
        source = Path(module.__file__)
        # Statements are module-level constants (prepared once per process), never built inside functions.
        declared = _statement_calls(source)
        assert len(statements) == declared, f"{name}: {declared} Statement(...), {len(statements)} module-level"
        owned = getattr(module, "TABLES", frozenset())
        for statement in statements:
            if statement.table is None or statement.table.startswith(SYSTEM_KEYSPACES):
                continue
            if statement.table not in owned:
                wrong.append(f"{name}: {statement.name!r} touches {statement.table}, owned: {sorted(owned)}")
    assert wrong == []


def test_every_table_has_exactly_one_owner():
    owners: dict[str, list[str]] = {}
    for name, module in _modules().items():
        for table in getattr(module, "TABLES", ()):
            owners.setdefault(table, []).append(name)
    tables = _schema_tables()
    assert {t: o for t, o in owners.items() if len(o) > 1} == {}, "tables owned twice"
    assert sorted(tables - owners.keys()) == [], "tables without an owner"
    assert sorted(owners.keys() - tables) == [], "owned tables that the schema does not create"


def _imports(path: Path) -> set[str]:
    """The api.* modules a file imports, including imports inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("api"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""  # api/ uses absolute imports only
            if not node.level and base.startswith("api"):
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)
    return found


def test_no_import_cycle_in_api():
    files = {info.name: Path(importlib.util.find_spec(info.name).origin)
             for info in pkgutil.walk_packages(api.__path__, "api.")}
    files["api"] = Path(api.__file__)
    graph = {name: {m for m in _imports(path) if m in files and m != name} for name, path in files.items()}
    # A package's __init__ importing its own submodules is not a cycle of the code model; leave packages out.
    packages = {name for name, path in files.items() if path.name == "__init__.py"}
    graph = {n: {m for m in deps if m not in packages} for n, deps in graph.items() if n not in packages}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(trail[trail.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == []


def test_the_checks_catch_what_they_look_for():
    """The ownership and cycle detectors are not vacuous: a foreign statement and a cycle are found."""
    foreign = Statement("SELECT * FROM slack_messages WHERE team_id = ?")
    assert foreign.table == "slack_messages"
    from api.network import posts

    assert foreign.table not in posts.TABLES
    assert _imports(ROOT / "api" / "network" / "actions.py") >= {"api.network.posts"}


def test_every_bench_script_imports():
    """The benches run by hand, not in the suite: an import broken by a move elsewhere is found here, not at the
    start of an hour-long run. In a process of its own: some build a WSGI app when imported (gunicorn serves
    them), which installs a Database for the process."""
    modules = [f"bench.{script.stem}" for script in sorted((ROOT / "bench").glob("*.py"))]
    assert len(modules) > 20
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    done = subprocess.run([sys.executable, "-c", code, *modules], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
