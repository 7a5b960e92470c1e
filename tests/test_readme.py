"""README.md stays a short, true front door.

1. It has at most 300 lines (detail goes into docs/).
2. Every `chronicle <group> <command>` it shows, in a code block or inline code, is a real command, and every
   option written after it is one of that command's options (its --help, through click's CliRunner).
3. Every table created in cql/*.cql (and not dropped later) has its cqlsh query in a SELECT line of README's
   ```sql blocks.
4. Every relative link resolves: the file exists and, with an #anchor, the heading exists; every docs page is
   linked.

These tests read files and run --help only: no Cassandra.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from api.cli import chronicle

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 300

FENCE = re.compile(r"^```(\w*)\s*$")


def readme_text() -> str:
    return README.read_text(encoding="utf-8")


def split_fences(text: str) -> tuple[list[tuple[str, str]], str]:
    """(language, body) of every fenced block, and the text outside them (fences blanked, lines kept)."""
    blocks: list[tuple[str, str]] = []
    outside: list[str] = []
    lang: str | None = None
    body: list[str] = []
    for line in text.splitlines():
        match = FENCE.match(line.strip())
        if lang is None and match:
            lang, body = match.group(1), []
            outside.append("")
        elif lang is not None and line.strip() == "```":
            blocks.append((lang, "\n".join(body)))
            lang = None
            outside.append("")
        elif lang is not None:
            body.append(line)
            outside.append("")
        else:
            outside.append(line)
    assert lang is None, "README.md has an unclosed ``` block"
    return blocks, "\n".join(outside)


# ---------------------------------------------------------------------------------------------- 1. length


def test_readme_is_at_most_300_lines():
    lines = readme_text().splitlines()
    assert len(lines) <= MAX_LINES, (
        f"README.md has {len(lines)} lines, more than {MAX_LINES}: move detail into the docs/ page it links"
    )


# --------------------------------------------------------------------------------------------- 2. commands

CHRONICLE_AT = re.compile(r"(?:^|(?<=[\s/]))chronicle\s+(\S.*)$")


def command_texts(text: str) -> list[str]:
    """What follows `chronicle ` in every code-block line and inline code span of README.md."""
    blocks, outside = split_fences(text)
    found: list[str] = []
    for _lang, body in blocks:
        for line in body.replace("\\\n", " ").splitlines():
            match = CHRONICLE_AT.search(line.strip())
            if match:
                found.append(strip_comment(match.group(1)))
    for span in re.findall(r"`([^`]+)`", outside):
        match = CHRONICLE_AT.search(" ".join(span.split()))
        if match:
            found.append(match.group(1))
    return found


def strip_comment(line: str) -> str:
    """A shell line without its trailing `# comment` (a # inside quotes stays)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line


def tokens_of(rest: str) -> list[str]:
    rest = rest.replace("\\|", "|").replace("|", " | ")
    try:
        raw = shlex.split(rest)
    except ValueError:
        raw = rest.split()
    return [tok.strip("[]") for tok in raw if tok.strip("[]")]


@dataclass
class Invocation:
    """One command README names: its path under `chronicle` and the options written after it."""

    source: str
    path: list[str]
    options: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def find_option(command: click.Command, name: str) -> click.Option | None:
    for param in command.params:
        if isinstance(param, click.Option) and name in (*param.opts, *param.secondary_opts):
            return param
    return None


def parse_invocations(rest: str) -> list[Invocation]:
    """Walk the click tree along the tokens; `a | b` names alternatives at the same level."""
    done: list[Invocation] = []
    current = Invocation(source=f"chronicle {rest}", path=[])
    stack: list[click.Command] = [chronicle]
    expect_value = False
    alternative = False
    for token in tokens_of(rest):
        command = stack[-1]
        if token == "|":
            alternative = bool(current.path)
            expect_value = False
            continue
        if alternative:
            alternative = False
            parent = stack[-2]
            if isinstance(parent, click.Group) and token in parent.commands:
                done.append(current)
                current = Invocation(source=current.source, path=[*current.path[:-1], token])
                stack[-1] = parent.commands[token]
                continue
        if expect_value:
            expect_value = False
            continue
        if token.startswith("-") and token not in ("-", "--"):
            name = token.split("=", 1)[0]
            current.options.append(name)
            option = find_option(command, name)
            expect_value = option is not None and not option.is_flag and not option.count and "=" not in token
            continue
        if isinstance(command, click.Group):
            if token in command.commands:
                current.path.append(token)
                stack.append(command.commands[token])
                continue
            if token != "...":
                current.errors.append(f"{' '.join(['chronicle', *current.path])} has no command {token!r}")
            break
        # a positional argument of a command (a file, a name): nothing to check
    done.append(current)
    return done


def readme_invocations() -> list[Invocation]:
    found: list[Invocation] = []
    for rest in command_texts(readme_text()):
        found.extend(parse_invocations(rest))
    return found


def help_of(path: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(chronicle, [*path, "--help"], prog_name="chronicle")
    return result.exit_code, result.output


def test_readme_shows_chronicle_commands():
    paths = {" ".join(inv.path) for inv in readme_invocations() if inv.path}
    assert len(paths) >= 10, f"expected README to show at least 10 chronicle commands, found {sorted(paths)}"


@pytest.mark.parametrize("invocation", readme_invocations(), ids=lambda inv: inv.source[:80])
def test_every_readme_command_and_option_exists(invocation: Invocation):
    assert not invocation.errors, f"{invocation.source}: {'; '.join(invocation.errors)}"
    exit_code, output = help_of(invocation.path)
    assert exit_code == 0, f"{invocation.source}: `chronicle {' '.join(invocation.path)} --help` exited {exit_code}"
    missing = [opt for opt in invocation.options if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", output)]
    assert not missing, (
        f"{invocation.source}: `chronicle {' '.join(invocation.path)}` has no option {', '.join(missing)}"
    )


def test_command_table_names_real_commands():
    """The `| chronicle <group> | cmd, cmd, sub a|b |` rows of README's command-line table."""
    rows = re.findall(r"^\| `chronicle ([\w-]+)` \| (.*) \|\s*$", readme_text(), re.MULTILINE)
    assert rows, "README.md has no command-line table (| `chronicle <group>` | commands |)"
    wrong = []
    for group_name, cell in rows:
        group = chronicle.commands.get(group_name)
        if group is None:
            wrong.append(f"no group {group_name!r}")
            continue
        if not isinstance(group, click.Group):
            continue
        for span in re.findall(r"`([^`]+)`", cell):
            first, *rest = span.replace("\\|", "|").split()
            if first not in group.commands:
                wrong.append(f"chronicle {group_name} has no command {first!r}")
                continue
            sub = group.commands[first]
            for name in (n for word in rest for n in word.split("|") if n):
                if not isinstance(sub, click.Group) or name not in sub.commands:
                    wrong.append(f"chronicle {group_name} {first} has no command {name!r}")
    assert not wrong, "README.md's command-line table: " + "; ".join(wrong)


# ----------------------------------------------------------------------------------------------- 3. tables

TABLE_DDL = re.compile(
    r"\b(CREATE|DROP)\s+TABLE\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?(?:\{\{\s*keyspace\s*\}\}\.|\w+\.)?(\w+)",
    re.IGNORECASE,
)


def cql_tables() -> set[str]:
    tables: set[str] = set()
    for path in sorted((ROOT / "cql").glob("*.cql")):
        text = re.sub(r"(--|//)[^\n]*", "", path.read_text(encoding="utf-8"))
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
        for verb, name in TABLE_DDL.findall(text):
            if verb.upper() == "CREATE":
                tables.add(name.lower())
            else:
                tables.discard(name.lower())
    return tables


def readme_selected_tables() -> set[str]:
    blocks, _outside = split_fences(readme_text())
    selected: set[str] = set()
    for lang, body in blocks:
        if lang.lower() != "sql":
            continue
        for line in body.splitlines():
            match = re.match(r"\s*SELECT\b.*?\bFROM\s+(?:\w+\.)?(\w+)", line, re.IGNORECASE)
            if match:
                selected.add(match.group(1).lower())
    return selected


def test_every_cql_table_has_its_query_in_readme():
    tables = cql_tables()
    assert "slack_messages" in tables and len(tables) >= 20, f"cql/ parsed to too few tables: {sorted(tables)}"
    missing = sorted(tables - readme_selected_tables())
    assert not missing, f"tables of cql/ without a SELECT line in README.md's ```sql blocks: {missing}"


# ------------------------------------------------------------------------------------------------ 4. links


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip()).lower()
    text = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LN")
    return text.replace(" ", "-")


def anchors_of(path: Path) -> set[str]:
    _blocks, outside = split_fences(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    anchors: set[str] = set()
    for line in outside.splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        anchors.add(base if count == 0 else f"{base}-{count}")
    return anchors


def readme_links() -> list[str]:
    _blocks, outside = split_fences(readme_text())
    return re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", outside)


def test_every_relative_link_resolves():
    broken = []
    for link in readme_links():
        if re.match(r"[a-z]+:", link):
            continue
        target, _, anchor = link.partition("#")
        path = (README.parent / target) if target else README
        if not path.is_file():
            broken.append(f"{link}: no file {target}")
        elif anchor and path.suffix == ".md" and anchor not in anchors_of(path):
            broken.append(f"{link}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert not broken, "broken links in README.md:\n" + "\n".join(broken)


def test_every_docs_page_is_linked():
    linked = {link.partition("#")[0] for link in readme_links()}
    pages = {f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md")}
    assert not sorted(pages - linked), f"docs pages README.md does not link: {sorted(pages - linked)}"
