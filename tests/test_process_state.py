"""No hidden process-wide state: module-level mutable values and `global` rebinding are confined to the places
listed below, each with its reason. Caches live in each Database's registry (api/caches.py), time comes from its
clock (api/clock.py), so a test's Database starts cold and isolated; a new module-level dict, list, set or cache
fails this test until it moves there (or is listed here with a reason a reviewer accepts)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_MUTABLE_CALLS = {"dict", "list", "set", "OrderedDict", "defaultdict", "deque", "Counter", "WeakValueDictionary",
                  "WeakKeyDictionary", "LRUCache", "TTLCache", "Cache", "bytearray"}

# (module, name): why it is process state and not a cache of the Database.
ALLOWED = {
    ("api/db.py", "_db"): "the process's Database itself (set by the app factory, the CLI root and tests)",
    ("api/activity/service.py", "_job"): "a spawned rebuild process's own Database and plan (pool initializer)",
    ("api/erasure/slack.py", "_CHILD"): "a spawned erasure process's own Database and request (pool initializer)",
}


def _module_state(path: Path) -> list[tuple[str, int]]:
    """(name, line) of every module-level binding to a mutable value, and of every name a function rebinds
    with `global`."""
    tree = ast.parse(path.read_text())
    found: list[tuple[str, int]] = []
    for node in tree.body:
        targets: list[ast.expr] = []
        value = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        if value is None:
            continue
        mutable = isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)) or (
            isinstance(value, ast.Call)
            and getattr(value.func, "id", getattr(value.func, "attr", None)) in _MUTABLE_CALLS)
        if mutable:
            found += [(t.id, node.lineno) for t in targets
                      if isinstance(t, ast.Name) and not t.id.isupper() and t.id != "__all__"]
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found += [(name, node.lineno) for name in node.names]
    return found


def test_no_module_level_mutable_state_outside_the_listed_places() -> None:
    found = {}
    for path in sorted((ROOT / "api").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for name, line in _module_state(path):
            if (rel, name) not in ALLOWED:
                found.setdefault(f"{rel}:{name}", line)
    assert not found, f"module-level mutable state (move it into db.caches / the Database, or list it): {found}"


def test_upper_case_module_constants_are_not_mutated() -> None:
    """Constants may be dicts or sets (tables of names), but nothing may change them after import: no
    subscript assignment, `.update`, `.add`, `.append`, `.clear` or `.pop` on an UPPER_CASE module name."""
    mutators = {"update", "add", "append", "extend", "clear", "pop", "popitem", "setdefault", "remove", "discard"}
    changed = []
    for path in sorted((ROOT / "api").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            target = None
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                for t in getattr(node, "targets", [getattr(node, "target", None)]):
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                        target = t.value.id
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in mutators and isinstance(node.func.value, ast.Name):
                target = node.func.value.id
            if target and target.isupper() and len(target) > 1:
                changed.append(f"{path.relative_to(ROOT)}:{node.lineno}: {target}")
    assert not changed, changed


def test_the_checker_finds_what_it_should() -> None:
    """The scan itself: a module dict, a cache object and a `global` are found; constants and locals are not."""
    sample = ROOT / "tests" / "fixtures" / "process_state_sample.py.txt"
    names = {name for name, _line in _module_state(sample)}
    assert names == {"_seen", "_store", "_counter"}


def test_the_environment_is_read_in_one_module() -> None:
    """Only api/config.py reads os.environ (docs/architecture.md): every other module takes its settings from
    there, so a bad value fails at start-up naming its variable (tests/test_config.py)."""
    readers = []
    for path in sorted((ROOT / "api").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "api/config.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv") and \
                    getattr(node.value, "id", None) == "os":
                readers.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and node.module == "api.config" and \
                    any(alias.name == "env" for alias in node.names):
                readers.append(f"{rel}:{node.lineno} (imports env)")
    assert readers == [], readers
