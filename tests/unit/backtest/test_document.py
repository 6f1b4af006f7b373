"""One report, two renderings: Markdown beside its PNGs, and HTML with nothing outside it."""

from __future__ import annotations

import base64

from trader.backtest.document import (
    Bullets,
    Code,
    Heading,
    Image,
    Paragraph,
    Table,
    markdown,
    page,
    text_table,
)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
TABLE = Table(["strategy", "Sharpe"], [["simple", "1.23"], ["a|b", "-0.50"]], [False, True])


def blocks():
    return [
        Heading(1, "Backtest <SOL>"),
        Paragraph("a `code` span & more"),
        Bullets(["one", "two"]),
        TABLE,
        Code("x < y"),
        Image("equity.png", "equity"),
    ]


def test_markdown_links_the_pngs_and_escapes_table_pipes():
    text = markdown(blocks())
    assert text.startswith("# Backtest <SOL>\n")
    assert "| :--- | ---: |" in text
    assert "| a\\|b | -0.50 |" in text
    assert "![equity](equity.png)" in text
    assert "```\nx < y\n```" in text


def test_html_is_one_file_with_the_images_inlined_and_text_escaped(tmp_path):
    (tmp_path / "equity.png").write_bytes(PNG)
    html = page("title", blocks(), tmp_path)
    assert "<h1>Backtest &lt;SOL&gt;</h1>" in html
    assert "a <code>code</code> span &amp; more" in html
    assert f'src="data:image/png;base64,{base64.b64encode(PNG).decode()}"' in html
    assert "equity.png" not in html  # no file outside the page
    assert '<td class="n">1.23</td>' in html
    assert "<pre>x &lt; y</pre>" in html


def test_the_terminal_table_lines_up_numbers_on_the_right():
    lines = text_table(TABLE).splitlines()
    assert lines[0] == "strategy  Sharpe"
    assert lines[1] == "--------  ------"
    assert lines[2] == "simple      1.23"
    assert lines[3] == "a|b        -0.50"
