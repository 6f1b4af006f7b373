"""The evaluation's PNG plots (matplotlib's Agg renderer, no pyplot state): skill and MASE by
horizon step with their bootstrap intervals, calibration and coverage, and CRPS over time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from trader.backtest.plots import DPI, _dates, _times, save_png
from trader.evaluate.run import NAIVE, Row
from trader.skill import INTERVALS

_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#17becf")
NAIVE_STYLE = {"color": "#555555", "linestyle": "--", "linewidth": 1.2}


def _colour(index: int) -> str:
    return _COLOURS[index % len(_COLOURS)]


def _series(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def skill_plot(path: Path, title: str, rows: Sequence[Row]) -> None:
    """Per step: 1 - CRPS / CRPS of the naive reference, and MASE (against no change), each
    with its 90% interval."""
    figure = Figure(figsize=(12, 5), dpi=DPI, layout="constrained")
    left, right = figure.subplots(1, 2)
    models = [r for r in rows if r.model != NAIVE]
    for i, row in enumerate(models):
        steps = np.arange(1, len(row.by_step) + 1)
        for axis, name, values in (
            (left, "skill", [f.skill for f in row.by_step]),
            (right, "mase", [f.mase for f in row.by_step]),
        ):
            axis.plot(steps, _series(values), marker="o", markersize=3, color=_colour(i),
                      label=row.model)  # fmt: skip
            low = _series([iv[name].low for iv in row.step_intervals])
            high = _series([iv[name].high for iv in row.step_intervals])
            axis.fill_between(steps, low, high, color=_colour(i), alpha=0.18, linewidth=0)
    left.axhline(0.0, label="naive random walk", **NAIVE_STYLE)
    right.axhline(1.0, label="no change", **NAIVE_STYLE)
    left.set_ylabel("CRPS skill: 1 - CRPS / CRPS of the naive reference")
    right.set_ylabel("MASE of the median (no change = 1)")
    for axis in (left, right):
        axis.set_xlabel("horizon step (bars ahead)")
        axis.grid(True, alpha=0.3)
        axis.legend(loc="best", frameon=False)
    left.set_title("skill by step (shaded: 90% block-bootstrap interval)")
    right.set_title("MASE by step")
    figure.suptitle(title)
    save_png(figure, path)


def calibration_plot(path: Path, title: str, rows: Sequence[Row]) -> None:
    """Left: the share of outcomes at or below each quantile (all steps); right: coverage of
    the central intervals against their nominal width."""
    figure = Figure(figsize=(12, 5), dpi=DPI, layout="constrained")
    left, right = figure.subplots(1, 2)
    models = [r for r in rows if r.model != NAIVE]
    left.plot([0, 1], [0, 1], color="#999999", linewidth=0.8, label="perfect calibration")
    for i, row in enumerate(models):
        levels = [q for q, _ in row.figures.calibration]
        shares = _series([s for _, s in row.figures.calibration])
        left.plot(levels, shares, marker="o", markersize=3, color=_colour(i), label=row.model)
    left.set_xlim(0, 1)
    left.set_ylim(0, 1)
    left.set_xlabel("quantile level")
    left.set_ylabel("share of outcomes at or below it")
    left.set_title("quantile calibration (all steps)")
    left.legend(loc="upper left", frameon=False)
    left.grid(True, alpha=0.3)
    names = [f"{round(c * 100)}%" for c in INTERVALS]
    x = np.arange(len(names))
    width = 0.8 / (len(models) + 1)
    right.bar(x - 0.4 + width / 2, INTERVALS, width, color="#bbbbbb", label="nominal")
    for i, row in enumerate(models):
        shares = _series([row.figures.coverage[str(round(c * 100))] for c in INTERVALS])
        bars = right.bar(x - 0.4 + width * (i + 1.5), shares, width, color=_colour(i),
                         label=row.model)  # fmt: skip
        right.bar_label(bars, fmt="%.2f", fontsize=7)
    right.set_xticks(x, names)
    right.set_ylim(0, 1.05)
    right.set_ylabel("share of outcomes inside")
    right.set_title("central interval coverage (all steps)")
    right.legend(loc="upper left", frameon=False)
    right.grid(True, axis="y", alpha=0.3)
    figure.suptitle(title)
    save_png(figure, path)


def crps_time_plot(path: Path, title: str, ends_ms: Sequence[int], rows: Sequence[Row]) -> None:
    """Each model's CRPS (mean over the horizon) per origin, smoothed over a rolling window of
    origins, beside no change's."""
    figure = Figure(figsize=(12, 5), dpi=DPI, layout="constrained")
    axis = figure.subplots()
    x = _times(list(ends_ms))
    window = max(1, len(ends_ms) // 40)
    for i, row in enumerate(rows):
        smooth = _trailing_mean(row.crps_by_origin * 100, window)
        style = NAIVE_STYLE if row.model == NAIVE else {"color": _colour(i - 1), "linewidth": 1.1}
        axis.plot(x, smooth, label=row.model, **style)  # type: ignore[arg-type]
    axis.set_ylabel("CRPS of the return (%), mean over the horizon")
    smoothing = "each origin" if window == 1 else f"mean of the last {window} origins"
    axis.set_title(f"{title} ({smoothing})")
    axis.legend(loc="upper left", frameon=False)
    axis.grid(True, alpha=0.3)
    _dates(axis)
    save_png(figure, path)


def _trailing_mean(values: np.ndarray, window: int) -> np.ndarray:
    """The mean of each value and the `window - 1` before it (fewer at the start)."""
    sums = np.concatenate([[0.0], np.cumsum(np.nan_to_num(values))])
    counts = np.concatenate([[0.0], np.cumsum(np.isfinite(values))])
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(ends - window, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray((sums[ends] - sums[starts]) / (counts[ends] - counts[starts]))
