"""A walk-forward's summary: per symbol and strategy, each fold's choice (made on its training
window) and how it did on the test window after it, and the test windows stitched into one
out-of-sample line. Training figures appear only as what the choice was made on."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trader.backtest.document import Block, Heading, Paragraph, Table, text_table, write_pages
from trader.backtest.grid import Axis
from trader.backtest.grid_report import Metric
from trader.backtest.trials import TrialResult
from trader.backtest.walk_forward import stitched
from trader.config.schema import Settings
from trader.private_files import write_file


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.2%}"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _day(period: object) -> str:
    begin, end = getattr(period, "begin", None), getattr(period, "end", None)
    return f"{begin:%Y-%m-%d} .. {end:%Y-%m-%d}" if begin and end else "whole"


def _groups(tested: Sequence[TrialResult]) -> dict[tuple[str, str], list[TrialResult]]:
    groups: dict[tuple[str, str], list[TrialResult]] = {}
    for result in sorted(tested, key=lambda r: r.trial.fold or 0):
        groups.setdefault((result.trial.symbol, result.trial.strategy), []).append(result)
    return groups


def _tables(
    trained: Sequence[TrialResult],
    tested: Sequence[TrialResult],
    axes: Sequence[Axis],
    metric: Metric,
    settings: Settings,
    links: bool,
) -> list[tuple[str, Table, str]]:
    """(title, fold table, out-of-sample line) per symbol and strategy."""
    out = []
    rf = settings.backtest.risk_free_rate
    for (symbol, strategy), tests in _groups(tested).items():
        rows = []
        for test in tests:
            chosen = dict(test.trial.params)
            pool = [
                r for r in trained
                if (r.trial.symbol, r.trial.strategy, r.trial.fold)
                == (symbol, strategy, test.trial.fold)
            ]  # fmt: skip
            train = next(r for r in pool if r.trial.params == test.trial.params)
            p = test.performance
            row = [
                str(test.trial.fold), _day(train.trial.period), _day(test.trial.period),
                *(chosen.get(a.key, "") for a in axes), _num(metric.value(train.performance)),
                _num(p.sharpe), _pct(p.total_return), f"{p.max_drawdown:.2%}",
                _pct(test.hold.total_return),
            ]  # fmt: skip
            if links:
                row.append(f"[report](runs/{test.trial.name}/report.html)")
            rows.append(row)
        header = ["fold", "trained on", "tested on", *(a.key for a in axes),
                  f"train {metric.name}", "test Sharpe", "test return", "test max DD",
                  "buy & hold"] + (["report"] if links else [])  # fmt: skip
        numeric = [True, False, False, *(False for _ in axes), True, True, True, True, True]
        table = Table(header, rows, numeric + ([False] if links else []))
        oos = stitched(tests, tests[0].periods_per_year, rf)
        line = (
            f"out of sample ({len(tests)} test windows stitched, {oos.periods:,} bars): "
            f"Sharpe {_num(oos.sharpe)}, return {_pct(oos.total_return)}, max drawdown "
            f"{oos.max_drawdown:.2%}"
        )
        out.append((f"{strategy} on {symbol}", table, line))
    return out


def _preamble(trained: Sequence[TrialResult], tested: Sequence[TrialResult], metric: Metric) -> str:
    folds = len({(r.trial.symbol, r.trial.strategy, r.trial.fold) for r in tested})
    per_fold = len(trained) // max(folds, 1)
    return (
        f"walk-forward: {folds} folds; on each training window the best of {per_fold} "
        f"combinations by {metric.title} was chosen, then run on the test window after it. "
        "Only test windows are reported below."
    )


def walk_forward_summary(
    trained: Sequence[TrialResult],
    tested: Sequence[TrialResult],
    axes: Sequence[Axis],
    metric: Metric,
    settings: Settings,
) -> str:
    parts = [_preamble(trained, tested, metric) + "\n"]
    for title, table, line in _tables(trained, tested, axes, metric, settings, links=False):
        parts += [f"{title}\n", text_table(table), f"{line}\n"]
    return "".join(parts)


def write_walk_forward(
    trained: Sequence[TrialResult],
    tested: Sequence[TrialResult],
    axes: Sequence[Axis],
    metric: Metric,
    settings: Settings,
    folder: Path,
) -> list[Path]:
    """walk_forward.md, .html and .json in `folder` (each test run's report in runs/NNN/),
    each written whole and private."""
    blocks: list[Block] = [
        Heading(1, "Walk-forward"),
        Paragraph(_preamble(trained, tested, metric)),
    ]
    plain: dict[str, Any] = {"sorted_by": metric.name, "lines": []}
    for title, table, line in _tables(trained, tested, axes, metric, settings, links=True):
        blocks += [Heading(2, title), table, Paragraph(line)]
        plain["lines"].append({"title": title, "out_of_sample": line, "folds": table.rows})
    text = json.dumps(plain, indent=2, default=str) + "\n"
    pages = write_pages(folder, "walk_forward", "Walk-forward", blocks)
    return [*pages, write_file(folder / "walk_forward.json", text, what="the report folder")]
