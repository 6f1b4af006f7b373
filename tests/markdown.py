"""Reading the reports' Markdown back in tests: a section under its heading, a table's rows."""

from __future__ import annotations


def section(markdown: str, heading: str) -> str:
    """The text under `## heading`, up to the next `## ` heading or the end."""
    start = markdown.index(f"## {heading}\n")
    rest = markdown[start + len(heading) + 4 :]
    return rest[: rest.find("\n## ")] if "\n## " in rest else rest


def table(text: str) -> list[list[str]]:
    """The first Markdown table in `text`, without its header and rule."""
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("| "):
            lines.append(line)
        elif lines:
            break
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[2:]]
