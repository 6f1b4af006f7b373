"""A grid's summary: every run in one table, sorted by the metric asked for, each linked to its
own report; and what trying that many runs means for the best of them.

The best run is never "the result": the summary states how many trials were run and the
deflated Sharpe ratio of the best (Bailey and López de Prado, 2014), the probability that its
true Sharpe ratio is above zero once the luck of being the best of that many is taken off.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trader.backtest.deflated import Deflated, deflated_sharpe
from trader.backtest.document import Block, Heading, Paragraph, Table, text_table, write_pages
from trader.backtest.grid import Axis
from trader.backtest.stats import Performance
from trader.backtest.trials import TrialResult
from trader.private_files import write_file


@dataclass(frozen=True)
class Metric:
    name: str
    title: str
    value: Callable[[Performance], float | None]
    higher_is_better: bool = True


METRICS = {
    "sharpe": Metric("sharpe", "Sharpe ratio (annualised)", lambda p: p.sharpe),
    "sortino": Metric("sortino", "Sortino ratio (annualised)", lambda p: p.sortino),
    "return": Metric("return", "total return", lambda p: p.total_return),
    "annual": Metric("annual", "annualised return", lambda p: p.annual_return),
    "drawdown": Metric("drawdown", "max drawdown", lambda p: p.max_drawdown, False),
}


def ranked(results: Sequence[TrialResult], metric: Metric) -> list[TrialResult]:
    """Best first; runs without the figure (no variation) last, in grid order."""

    def key(result: TrialResult) -> tuple[bool, float, int]:
        value = metric.value(result.performance)
        if value is None or math.isnan(value):
            return (True, 0.0, result.trial.number)
        return (False, -value if metric.higher_is_better else value, result.trial.number)

    return sorted(results, key=key)


def deflated(results: Sequence[TrialResult]) -> tuple[TrialResult, Deflated] | None:
    """The run with the highest Sharpe ratio and its DSR among all the grid's runs; None when
    no run's returns varied."""
    candidates = [r for r in results if r.moments.sharpe is not None]
    if not candidates:
        return None
    best = max(candidates, key=lambda r: (r.moments.sharpe or 0.0, -r.trial.number))
    sharpes = [r.moments.sharpe for r in results]
    return best, deflated_sharpe(best.moments, sharpes, len(results))


def statement(results: Sequence[TrialResult]) -> list[str]:
    """What the grid's best run is worth, in words."""
    n = len(results)
    found = deflated(results)
    if found is None:
        return [f"{n} trials; none varied (no trade, or flat returns): no Sharpe ratio to judge."]
    best, dsr = found
    per_year = best.periods_per_year
    annual = (dsr.best_sharpe or 0.0) * math.sqrt(per_year)
    luck = dsr.expected_max_sharpe * math.sqrt(per_year)
    verdict = (
        "evidence of skill at the 95% level"
        if dsr.probability >= 0.95
        else "not evidence of skill (95% would be)"
    )
    return [
        f"{n} trials. The highest Sharpe ratio, {annual:.2f} annualised, is run "
        f"{best.trial.name} ({best.trial.strategy} on {best.trial.symbol}, "
        f"{best.trial.describe()}): it is the best of {n}, not the result.",
        f"Deflated Sharpe ratio (Bailey and López de Prado, 2014) over the {n} trials: "
        f"{dsr.probability:.3f}, the probability that its true Sharpe ratio is above zero once "
        f"the luck of the best of {n} is taken off (by chance alone the best of {n} would "
        f"reach about {luck:.2f} annualised, from the spread of the trials' Sharpe ratios; its "
        f"own returns' skew {best.moments.skewness:.2f} and kurtosis "
        f"{best.moments.kurtosis:.2f} count too): {verdict}.",
    ]


def _figure(value: float | None, percent: bool = False) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:+.2%}" if percent else f"{value:.2f}"


def table(
    results: Sequence[TrialResult], axes: Sequence[Axis], metric: Metric, links: bool
) -> Table:
    header = ["rank", "run", "symbol", "strategy", *(a.key for a in axes), "Sharpe", "Sortino",
              "return", "max DD", "trades", "buy & hold"]  # fmt: skip
    if links:
        header.append("report")
    rows = []
    for rank, result in enumerate(ranked(results, metric), start=1):
        p, params = result.performance, dict(result.trial.params)
        row = [
            str(rank), result.trial.name, result.trial.symbol, result.trial.strategy,
            *(params.get(a.key, "") for a in axes), _figure(p.sharpe), _figure(p.sortino),
            _figure(p.total_return, True), f"{p.max_drawdown:.2%}", str(result.trades),
            _figure(result.hold.total_return, True),
        ]  # fmt: skip
        if links:
            row.append(f"[report](runs/{result.trial.name}/report.html)")
        rows.append(row)
    numeric = [True, False, False, False, *(False for _ in axes), True, True, True, True, True,
               True] + ([False] if links else [])  # fmt: skip
    return Table(header, rows, numeric)


def terminal(results: Sequence[TrialResult], axes: Sequence[Axis], metric: Metric) -> str:
    head = f"grid: {len(results)} runs, sorted by {metric.title} (best first)\n"
    return head + text_table(table(results, axes, metric, links=False)) + _lines(results)


def _lines(results: Sequence[TrialResult]) -> str:
    return "".join(f"{line}\n" for line in statement(results))


def write(
    results: Sequence[TrialResult], axes: Sequence[Axis], metric: Metric, folder: Path
) -> list[Path]:
    """grid.md, grid.html and grid.json in `folder` (each run's report in runs/NNN/), each
    written whole and private."""
    blocks: list[Block] = [
        Heading(1, f"Grid of {len(results)} backtests"),
        Paragraph(f"Sorted by {metric.title}, best first. Each run's report is linked."),
        table(results, axes, metric, links=True),
        Heading(2, "The best of many"),
        *(Paragraph(text) for text in statement(results)),
    ]
    plain = json.dumps(_plain(results, axes, metric), indent=2) + "\n"
    pages = write_pages(folder, "grid", "Grid of backtests", blocks)
    return [*pages, write_file(folder / "grid.json", plain, what="the report folder")]


def _plain(results: Sequence[TrialResult], axes: Sequence[Axis], metric: Metric) -> dict[str, Any]:
    found = deflated(results)
    return {
        "trials": len(results),
        "sorted_by": metric.name,
        "axes": {a.key: list(a.values) for a in axes},
        "deflated_sharpe": None if found is None else {
            "best_run": found[0].trial.name,
            "probability": found[1].probability,
            "best_sharpe_per_bar": found[1].best_sharpe,
            "expected_max_sharpe_per_bar": found[1].expected_max_sharpe,
        },
        "runs": [
            {
                "run": r.trial.name, "symbol": r.trial.symbol, "strategy": r.trial.strategy,
                "params": dict(r.trial.params), "sharpe": r.performance.sharpe,
                "sortino": r.performance.sortino, "total_return": r.performance.total_return,
                "max_drawdown": r.performance.max_drawdown, "trades": r.trades,
                "fills": r.fills, "buy_and_hold_return": r.hold.total_return,
                "report": f"runs/{r.trial.name}/report.html" if r.report else None,
                "seconds": r.seconds, "problems": list(r.problems),
            }
            for r in ranked(results, metric)
        ],
    }  # fmt: skip
