"""What an evaluation prints: a table for the terminal, one JSON object, and a folder with
report.md, a self-contained report.html and the PNG plots."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trader.backtest.document import (
    Block,
    Bullets,
    Heading,
    Image,
    Paragraph,
    Table,
    text_table,
    write_pages,
)
from trader.evaluate.plots import calibration_plot, crps_time_plot, skill_plot
from trader.evaluate.run import CONFIDENCE, NAIVE, REPLICATES, Evaluation, Row
from trader.private_files import write_file
from trader.skill import INTERVALS, Interval, naive_reference

ESTIMATOR = (
    "CRPS: the quantile (pinball) approximation of Berrisch and Ziel, twice the mean pinball "
    "loss over the forecast's quantile levels (scoringrules.crps_quantile), of the return "
    "(close k bars later / close at the origin - 1); not the sample-based estimator: the "
    "forecasts are kept as quantiles. It approaches the CRPS as the levels fill (0, 1) evenly "
    "and leaves out the tails beyond the outermost levels."
)
SIGNIFICANCE = 0.05


def _pct(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value * 100:.{digits}f}%"


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _with(value: str, interval: Interval | None, fmt: Any) -> str:
    if interval is None or interval.low is None or interval.high is None:
        return value
    return f"{value} [{fmt(interval.low)}, {fmt(interval.high)}]"


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def figures_table(result: Evaluation) -> Table:
    rows = []
    for row in result.rows:
        f, ci = row.figures, row.intervals
        rows.append([
            row.model, row.symbol, f"{f.scored // max(result.horizon, 1):,}",
            _with(_pct(f.crps), ci.get("crps"), _pct),
            _with(_num(f.skill), ci.get("skill"), _num),
            _with(_num(f.skill_no_change), ci.get("skill_no_change"), _num),
            _with(_num(f.mase), ci.get("mase"), _num),
            _num(f.wql, 4), _pct(f.mae), _pct(f.hit_rate, 1),
            *[_pct(f.coverage[str(round(c * 100))], 1) for c in INTERVALS],
        ])  # fmt: skip
    header = ["model", "symbol", "origins", "CRPS", "skill", "skill vs no-change point",
              "MASE (vs no change)", "wQL", "MAE", "hit rate",
              *[f"cov {round(c * 100)}%" for c in INTERVALS]]  # fmt: skip
    return Table(header, rows, [False, False, *[True] * (len(header) - 2)])


def _naive(result: Evaluation) -> str:
    return naive_reference(result.naive_window, result.context, result.horizon)


def skill_note(result: Evaluation) -> str:
    return (
        f"skill = 1 - CRPS / CRPS of the naive reference, {_naive(result)}; "
        "skill vs no-change point: 1 - CRPS / CRPS of the no-change point forecast (any "
        "spread earns some); MASE: MAE of the median / MAE of no change"
    )


def _verdict(first: str, second: str, mean: float | None, p: float | None) -> str:
    if p is None and mean == 0.0:
        return "the same losses: no difference"
    if p is None or mean is None:
        return "not testable (too few origins, or losses never differ)"
    if p >= SIGNIFICANCE:
        return f"no difference at {SIGNIFICANCE:.0%}"
    return f"{first if mean < 0 else second} better at {SIGNIFICANCE:.0%}"


def tests_table(result: Evaluation) -> Table:
    rows = [
        [t.symbol, t.first, t.second, _pct(t.test.mean_difference, 4),
         _num(t.test.statistic, 2), "n/a" if t.test.p_value is None else f"{t.test.p_value:.4f}",
         _verdict(t.first, t.second, t.test.mean_difference, t.test.p_value)]
        for t in result.tests
    ]  # fmt: skip
    header = ["symbol", "model", "against", "mean CRPS difference", "DM", "p-value", "verdict"]
    return Table(header, rows, [False, False, False, True, True, True, False])


def step_table(result: Evaluation, symbol: str) -> Table:
    """CRPS skill per step, each model a column."""
    rows = [r for r in result.rows if r.symbol == symbol and r.model != NAIVE]
    lines = []
    for k in range(result.horizon):
        lines.append([str(k + 1), *[
            _with(_num(r.by_step[k].skill), r.step_intervals[k].get("skill"), _num) for r in rows
        ]])  # fmt: skip
    return Table(["step", *[r.model for r in rows]], lines, [True] * (len(rows) + 1))


def _period(result: Evaluation) -> str:
    ends = [e for o in result.origins.values() for e in o.ends_ms]
    return f"{_when(min(ends))} .. {_when(max(ends))} UTC" if ends else "no origins"


def _origin_notes(result: Evaluation) -> list[str]:
    notes = []
    for symbol, o in result.origins.items():
        every = "every bar" if o.spacing == 1 else f"every {o.spacing} bars"
        notes.append(
            f"{symbol}: {len(o.ends_ms):,} origins ({every}) of {o.candidates:,} in the "
            f"period; {o.incomplete:,} left out because the data ended or a bar was missing "
            f"within their {result.horizon}-bar horizon; bootstrap blocks of "
            f"{result.block.get(symbol, 1)} origins"
        )
    return notes


def terminal_summary(result: Evaluation) -> str:
    s = result.settings
    lines = [
        f"evaluate {', '.join(result.origins)} {s.market.timeframe} {_period(result)}: "
        f"horizon {result.horizon}, context {result.context}, models {', '.join(result.models)}",
        *[f"  {note}" for note in _origin_notes(result) + result.notes],
        f"  {ESTIMATOR}",
        f"  [low, high]: {CONFIDENCE:.0%} block-bootstrap interval over origins "
        f"({REPLICATES} resamples)",
        f"  {skill_note(result)}",
    ]
    return (
        "\n".join(lines)
        + "\n"
        + text_table(figures_table(result))
        + "\nDiebold-Mariano (per-origin mean CRPS; negative difference: the model's is lower; "
        "naive: the naive reference)\n" + text_table(tests_table(result))
    )


def _plots(result: Evaluation, folder: Path) -> list[Image]:
    images = []
    for symbol, origins in result.origins.items():
        rows = [r for r in result.rows if r.symbol == symbol]
        slug = symbol.replace("/", "")
        made = [
            Image(f"skill_{slug}.png", f"{symbol}: CRPS skill and MASE by horizon step"),
            Image(f"calibration_{slug}.png", f"{symbol}: calibration and interval coverage"),
            Image(f"crps_time_{slug}.png", f"{symbol}: CRPS over time"),
        ]
        skill_plot(folder / made[0].file, made[0].caption, rows)
        calibration_plot(folder / made[1].file, made[1].caption, rows)
        crps_time_plot(folder / made[2].file, made[2].caption, origins.ends_ms, rows)
        images += made
    return images


def _blocks(result: Evaluation, images: Sequence[Image]) -> list[Block]:
    s = result.settings
    blocks: list[Block] = [
        Heading(1, f"Forecast evaluation: {', '.join(result.origins)} {s.market.timeframe}"),
        Paragraph(
            f"Models {', '.join(result.models)}, each forecasting {result.horizon} bars ahead "
            f"from a window of {result.context} bars at every origin in {_period(result)}; "
            f"data: {', '.join(f'`{Path(p).name}`' for p in result.files)}; quantile levels "
            f"{', '.join(f'{q:g}' for q in result.levels)}; written "
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC."
        ),
        Bullets(_origin_notes(result) + result.notes),
        Heading(2, "Figures"),
        figures_table(result),
        Paragraph(
            f"{ESTIMATOR} Skill: 1 - CRPS / CRPS of the naive reference over the same origins "
            f"and steps (above 0: better than naive), the naive reference being "
            f"{_naive(result)}: the baseline at that lookback scores 0. "
            "Skill vs no-change point: the same against the no-change point forecast, which "
            "any forecast with a spread beats by some 0.2 without knowing anything; shown, not "
            "the headline. MASE: MAE of the median return / MAE of no change (the no-change "
            "point forecast, as MASE is defined). wQL: weighted quantile loss of the "
            "price (sum of 2 x pinball over the sum of realised prices, mean over levels). Hit "
            "rate: how often the median's direction was the return's, where it had one. Cov: "
            "share of outcomes inside the central interval. In brackets: the "
            f"{CONFIDENCE:.0%} interval from a moving-block bootstrap over origins "
            f"({REPLICATES} resamples, blocks spanning the horizon's overlap). The naive "
            "and baseline rows are always there as yardsticks."
        ),
        Heading(2, "Diebold-Mariano tests"),
        tests_table(result),
        Paragraph(
            "Each model against the naive reference and against each other: equal expected "
            "loss of the per-origin mean CRPS, with a Bartlett long-run "
            "variance over the horizon's overlap and the Harvey-Leybourne-Newbold correction "
            "(Student t)."
        ),
    ]
    for symbol in result.origins:
        blocks += [Heading(2, f"Skill by horizon step: {symbol}"), step_table(result, symbol)]
    blocks += [Heading(2, "Plots"), *images, Heading(2, "Forecasts"), Bullets([
        f"{use.model}: {use.windows:,} windows; {use.computed:,} forecast now in "
        f"{use.batches:,} batches, {use.reused:,} from the cache "
        f"({result.forecast_seconds.get(use.model, 0.0):,.1f} s); weights "
        f"`{use.description.get('weights') or 'none'}`"
        for use in result.cache
    ] + [f"scoring took {result.scoring_seconds:,.2f} s"])]  # fmt: skip
    return blocks


def _plain(value: object) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _row_json(row: Row) -> dict[str, Any]:
    return {
        "model": row.model,
        "symbol": row.symbol,
        "figures": _plain(row.figures),
        "intervals": {k: _plain(v) for k, v in row.intervals.items()},
        "by_step": [
            {"figures": _plain(f), "intervals": {k: _plain(v) for k, v in iv.items()}}
            for f, iv in zip(row.by_step, row.step_intervals, strict=True)
        ],
    }


def evaluation_json(result: Evaluation) -> dict[str, Any]:
    return {
        "symbols": list(result.origins),
        "timeframe": result.settings.market.timeframe,
        "files": result.files,
        "models": result.models,
        "horizon": result.horizon,
        "context": result.context,
        "levels": list(result.levels),
        "estimator": ESTIMATOR,
        "naive": {
            "window": result.naive_window,
            "reference": _naive(result),
        },
        "skill": skill_note(result),
        "confidence": CONFIDENCE,
        "replicates": REPLICATES,
        "origins": {
            s: {
                "scored": len(o.ends_ms),
                "in_period": o.candidates,
                "incomplete": o.incomplete,
                "spacing": o.spacing,
                "first": _when(o.ends_ms[0]),
                "last": _when(o.ends_ms[-1]),
                "block": result.block.get(s),
            }
            for s, o in result.origins.items()
        },
        "notes": result.notes,
        "rows": [_row_json(r) for r in result.rows],
        "tests": [
            {"symbol": t.symbol, "model": t.first, "against": t.second, **_plain(t.test)}
            for t in result.tests
        ],
        "forecast_seconds": result.forecast_seconds,
        "scoring_seconds": result.scoring_seconds,
        "cache": [_plain(use) for use in result.cache],
    }


def write_report(result: Evaluation, folder: Path) -> list[Path]:
    """report.md, report.html, evaluation.json and the plots, each written whole and
    private; the files written."""
    images = _plots(result, folder)
    blocks = _blocks(result, images)
    title = f"Forecast evaluation {', '.join(result.origins)}"
    write_pages(folder, "report", title, blocks)
    text = json.dumps(evaluation_json(result), indent=2) + "\n"
    write_file(folder / "evaluation.json", text, what="the report folder")
    return [*(folder / i.file for i in images), *(folder / n for n in _FILES)]


_FILES = ("report.md", "report.html", "evaluation.json")


def dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=2, allow_nan=False, default=str) + "\n"
