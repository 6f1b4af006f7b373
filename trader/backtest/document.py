"""A report as a few kinds of blocks, written once and rendered as Markdown (beside its PNG
files) or as one self-contained HTML file (the images inlined)."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trader.private_files import write_file


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Paragraph:
    text: str  # `code` spans are the only markup


@dataclass(frozen=True)
class Bullets:
    items: Sequence[str]


@dataclass(frozen=True)
class Table:
    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    numeric: Sequence[bool]  # right-aligned columns


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Image:
    file: str  # relative to the report's folder
    caption: str


Block = Heading | Paragraph | Bullets | Table | Code | Image


def markdown(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {block.text}")
        elif isinstance(block, Paragraph):
            out.append(block.text)
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {item}" for item in block.items))
        elif isinstance(block, Table):
            cells = [list(block.header), *map(list, block.rows)]
            escaped = [[c.replace("|", "\\|") for c in row] for row in cells]
            rule = ["---:" if n else ":---" for n in block.numeric]
            lines = [escaped[0], rule, *escaped[1:]]
            out.append("\n".join("| " + " | ".join(row) + " |" for row in lines))
        elif isinstance(block, Code):
            out.append(f"```\n{block.text}\n```")
        else:
            out.append(f"![{block.caption}]({block.file})\n\n*{block.caption}*")
    return "\n\n".join(out) + "\n"


_CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f;
       max-width: 1200px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }
th, td { padding: 4px 8px; border-bottom: 1px solid #e5e5e5; white-space: nowrap; }
th { background: #f5f5f7; text-align: left; } td.n { text-align: right;
     font-variant-numeric: tabular-nums; }
tr:hover td { background: #fafafa; }
code, pre { font: 13px ui-monospace, SFMono-Regular, Menlo, monospace; background: #f5f5f7; }
pre { padding: 0.8em; overflow-x: auto; } figure { margin: 1.5em 0; }
img { max-width: 100%; border: 1px solid #eee; } figcaption { color: #555; font-size: 13px; }
"""


def _inline(text: str) -> str:
    """`code` spans, and [links](to/a/file) to a file beside the page (no other address)."""
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text, quote=False))
    return re.sub(r"\[([^\]]+)\]\(([^():\s]+)\)", r'<a href="\2">\1</a>', escaped)


def page(title: str, blocks: Sequence[Block], folder: Path) -> str:
    """One HTML file with nothing outside it: styles inline, images as data URIs."""
    body: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{_inline(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            body.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Bullets):
            items = "".join(f"<li>{_inline(item)}</li>" for item in block.items)
            body.append(f"<ul>{items}</ul>")
        elif isinstance(block, Table):
            head = "".join(f"<th>{html.escape(h)}</th>" for h in block.header)
            rows = "".join(
                "<tr>"
                + "".join(
                    f'<td class="n">{_inline(c)}</td>' if n else f"<td>{_inline(c)}</td>"
                    for c, n in zip(row, block.numeric, strict=True)
                )
                + "</tr>"
                for row in block.rows
            )
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(block, Code):
            body.append(f"<pre>{html.escape(block.text)}</pre>")
        else:
            data = base64.b64encode((folder / block.file).read_bytes()).decode()
            caption = html.escape(block.caption)
            body.append(
                f'<figure><img src="data:image/png;base64,{data}" alt="{caption}">'
                f"<figcaption>{caption}</figcaption></figure>"
            )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def write_pages(folder: Path, stem: str, title: str, blocks: Sequence[Block]) -> list[Path]:
    """`stem`.md and `stem`.html in `folder`, each written whole and private (`write_file`:
    a link planted at either name is refused, never written through)."""
    return [
        write_file(folder / f"{stem}.md", markdown(blocks), what="the report folder"),
        write_file(folder / f"{stem}.html", page(title, blocks, folder), what="the report folder"),
    ]


def text_table(table: Table) -> str:
    """A table for the terminal: columns padded, numbers right-aligned."""
    rows = [list(table.header), *map(list, table.rows)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(table.header))]
    lines = []
    for index, row in enumerate(rows):
        cells = [
            c.rjust(w) if n and index else c.ljust(w)
            for c, w, n in zip(row, widths, table.numeric, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"
