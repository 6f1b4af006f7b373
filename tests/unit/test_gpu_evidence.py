"""Every GPU figure the README quotes is listed in docs/evidence/README.md beside a file that
exists, and every evidence file says where it ran (device, driver, torch, CUDA) and how."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import ROOT

EVIDENCE = ROOT / "docs" / "evidence"
# A paragraph that names a GPU model quotes GPU figures.
GPU = re.compile(r"\b(?:H100|H200|A100|A10G?|L4|L40S?|T4|V100|B200|GB200|RTX \d{4})\b")
# Ratios (1.22x, 3.3-6.4x) and measured quantities (4.1 ms, 609.8 windows/s, 3,305 MB).
FIGURE = re.compile(
    r"\b\d[\d,]*(?:\.\d+)?(?:-\d+(?:\.\d+)?)?x\b|\b\d[\d,]*(?:\.\d+)? ?(?:ms|windows/s|MB|GB)\b"
)
LINK = re.compile(r"\]\((docs/evidence/[^)#\s]+)\)")


def unlisted(readme: str, root: Path) -> list[str]:
    """What the README quotes of the GPU without its evidence: each problem, in words."""
    listed = (root / "docs" / "evidence" / "README.md").read_text()
    problems = []
    for paragraph in re.split(r"\n\s*\n", readme):
        figures = FIGURE.findall(paragraph)
        if not GPU.search(paragraph) or not figures:
            continue
        files = [link for link in LINK.findall(paragraph) if not link.endswith("README.md")]
        if not files:
            problems.append(f"no evidence file linked beside {figures}: {paragraph[:80]!r}")
        for link in files:
            if not (root / link).is_file():
                problems.append(f"{link} does not exist")
            elif Path(link).name not in listed:
                problems.append(f"{link} is not listed in docs/evidence/README.md")
        problems += [f"{f} is not in docs/evidence/README.md" for f in figures if f not in listed]
    return problems


def test_every_gpu_figure_the_readme_quotes_is_listed_with_its_evidence_file():
    readme = (ROOT / "README.md").read_text()
    assert GPU.search(readme)  # the check below has figures to check
    assert unlisted(readme, ROOT) == []


def test_a_gpu_figure_without_its_evidence_is_caught(tmp_path: Path):
    (tmp_path / "docs" / "evidence").mkdir(parents=True)
    (tmp_path / "docs" / "evidence" / "README.md").write_text("| run | 1.22x | [a](a.json) |\n")
    (tmp_path / "docs" / "evidence" / "a.json").write_text("{}")
    quoted = "On an H200 the step is 1.22x the reference's ([evidence](docs/evidence/a.json))."
    assert unlisted(quoted, tmp_path) == []
    assert unlisted(quoted.replace("1.22x", "1.5x"), tmp_path) == [
        "1.5x is not in docs/evidence/README.md"
    ]
    assert unlisted("On an H200 it takes 4.1 ms.", tmp_path) == [
        "no evidence file linked beside ['4.1 ms']: 'On an H200 it takes 4.1 ms.'",
        "4.1 ms is not in docs/evidence/README.md",
    ]
    assert unlisted(quoted.replace("a.json", "b.json"), tmp_path) == [
        "docs/evidence/b.json does not exist"
    ]


def test_every_evidence_file_says_where_and_how_it_ran():
    listed = (EVIDENCE / "README.md").read_text()
    files = sorted(EVIDENCE.glob("*.json"))
    assert files
    for path in files:
        run = json.loads(path.read_text())
        for key in ("device", "driver", "torch", "cuda", "command", "figures", "status"):
            assert key in run, f"{path.name} has no {key}"
        assert run["device"]
        assert run["command"]
        assert run["figures"]
        assert f"]({path.name})" in listed, f"{path.name} is not linked from the README"
    for link in re.findall(r"\]\(([^)#\s]+)\)", listed):
        assert (EVIDENCE / link).is_file(), link
