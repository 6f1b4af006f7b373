"""The rules ARCHITECTURE.md states, checked on the code: packages import only lower floors,
no two modules import each other (directly or round a circle, type-only imports included),
no class over 300 lines and no module over 450, argparse only in trader/cli/."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "trader"
DOC = ROOT / "ARCHITECTURE.md"
MAX_CLASS_LINES = 300
MAX_MODULE_LINES = 450


def modules() -> dict[str, Path]:
    """trader's modules by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The trader modules `name` imports anywhere in its file (functions, TYPE_CHECKING)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            # `from package import module` names the module; `from module import name`, the
            # module (a package's __init__ runs on any import below it, so it is no edge).
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        for target in targets:
            module = target
            while module and module not in known:
                module = module.rpartition(".")[0]
            if module and module != name:
                yield module


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: set(imported(name, path, known)) for name, path in known.items()}


def floor_of(module: str) -> str:
    """The floor's key of a module: its package below trader (trader itself: "trader")."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "trader"


def floors() -> dict[str, int]:
    """ARCHITECTURE.md's floor table: `| N | `a`, `b` | job |` rows, floor 0 at the bottom."""
    table = {}
    for line in DOC.read_text().splitlines():
        row = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", line)
        if row:
            for key in re.findall(r"`([\w.]+)`", row.group(2)):
                table[key.removeprefix("trader.")] = int(row.group(1))
    return table


def exempt() -> set[str]:
    """Paths ARCHITECTURE.md exempts from the size limits (generated or data modules)."""
    text = DOC.read_text()
    section = text.partition("## Exempt from the size limits")[2].partition("\n## ")[0]
    return set(re.findall(r"`(trader/[\w/.]+\.py)`", section))


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Groups of more than one module that import one another round a circle (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for child in sorted(edges[node]):
            if child not in index:
                visit(child)
                low[node] = min(low[node], low[child])
            elif child in stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            group = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_two_modules_import_each_other_even_round_a_circle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_package_has_a_floor_and_imports_only_lower_floors():
    table, edges = floors(), graph()
    unplaced = sorted({floor_of(m) for m in edges} - set(table))
    assert unplaced == [], f"add these to ARCHITECTURE.md's floor table: {unplaced}"
    upward = sorted(
        f"{module} -> {target} (floor {table[floor_of(module)]} -> {table[floor_of(target)]})"
        for module, targets in edges.items()
        for target in targets
        if floor_of(module) != floor_of(target)
        and table[floor_of(target)] >= table[floor_of(module)]
        and floor_of(target) != "trader"
    )
    assert upward == []


def test_domain_imports_only_the_standard_library_and_no_io():
    io = {"asyncio", "http", "io", "os", "pathlib", "shutil", "socket", "sqlite3", "subprocess",
          "tempfile", "threading", "time", "urllib"}  # fmt: skip
    found = set()
    for path in (PACKAGE / "domain").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
    libraries = found - {"trader", "__future__"}
    assert libraries - set(sys.stdlib_module_names) == set()
    assert libraries & io == set()


def test_no_class_over_300_lines_and_no_module_over_450():
    skip = exempt()
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative in skip:
            continue
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{relative}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    too_long.append(f"{relative}: class {node.name} {lines} lines")
    assert too_long == []


def test_command_line_parsing_lives_only_in_the_cli_package():
    parsing = sorted(
        path.relative_to(ROOT).as_posix()
        for path in PACKAGE.rglob("*.py")
        if re.search(r"^\s*(import argparse|from argparse import)", path.read_text(), re.M)
        and "cli" not in path.relative_to(PACKAGE).parts[:1]
    )
    assert parsing == []


def test_every_path_architecture_md_names_exists():
    named = set(re.findall(r"`([\w./]+/[\w./]*)`", DOC.read_text()))
    missing = sorted(p for p in named if not (PACKAGE / p).exists() and not (ROOT / p).exists())
    assert named
    assert missing == []
