"""The static security check: ruff's S rules (bandit's checks) find nothing unaccepted, run in
`make test` on their own, and every accepted finding says why: inline after its code, or in
pyproject.toml for the folder-wide ones listed here. An assert in trader/ only narrows an
Optional (python -O strips asserts: none may check input)."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or "ruff"
# The folder-wide acceptances, each justified beside it in pyproject.toml.
ACCEPTED = {
    "tests/**": {"S101", "S603", "S606", "S607", "S105"},
    "bench/**": {"S101", "S603", "S607"},
    "trader/**": {"S101"},
}
NOQA = re.compile(r"#\s*noqa:\s*([A-Z0-9, ]+?)(\s+-\s+\S.*|\s*)$")


def python_files() -> list[Path]:
    return [
        path
        for folder in ("trader", "tests", "bench", "deploy")
        for path in sorted((ROOT / folder).rglob("*.py"))
    ]


def test_ruff_security_rules_find_nothing_unaccepted():
    found = subprocess.run(
        [RUFF, "check", "--select", "S", "--output-format", "json", "--no-cache", "."],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    findings = json.loads(found.stdout)
    assert findings == [], [(f["filename"], f["code"], f["message"]) for f in findings]


def test_make_test_runs_the_security_check():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test: .*\bsecurity\b", makefile, re.MULTILINE)
    assert re.search(r"^security: .*\n\t.*ruff check --select S\b", makefile, re.MULTILINE)


def test_only_the_justified_folder_wide_acceptances_exist():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert "S" in config["select"]
    assert not [code for code in config.get("ignore", []) if code.startswith("S")]
    security = {
        folder: {code for code in codes if code.startswith("S")}
        for folder, codes in config["per-file-ignores"].items()
    }
    assert {folder: codes for folder, codes in security.items() if codes} == ACCEPTED


def test_every_inline_acceptance_says_why():
    unexplained = []
    for path in python_files():
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            match = NOQA.search(line)
            if match and re.search(r"\bS\d{3}\b", match.group(1)) and not match.group(2).strip():
                unexplained.append(f"{path.relative_to(ROOT)}:{number}")
    assert not unexplained, "a `# noqa: S...` needs ` - the reason`: " + ", ".join(unexplained)


def test_asserts_in_trader_only_narrow_optionals():
    checks_input = []
    for path in sorted((ROOT / "trader").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Assert):
                continue
            test = node.test
            narrows = (
                isinstance(test, ast.Compare)
                and len(test.ops) == 1
                and isinstance(test.ops[0], ast.IsNot)
                and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value is None
            )
            if not narrows:
                checks_input.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not checks_input, "raise instead of assert (python -O strips it): " + str(checks_input)
