"""The shortfall report's PNG plots, drawn with matplotlib's Agg renderer (no display, no pyplot
state), written whole and private as the backtest's are (`save_png`):

- equity: the daemon's booked equity and its replay's, and the difference below;
- attribution: a waterfall from the replay's P&L, part by part, to the daemon's;
- slippage: the mean slippage of fills by hour of the day (UTC) and by side and order type.

Amounts are drawn as floats: a picture, not the ledger's money (the tables are exact)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure

from trader.backtest.plots import DPI, save_png

ACTUAL_COLOUR = "#d62728"
MODELLED_COLOUR = "#1f77b4"
_UP, _DOWN, _TOTAL = "#2ca02c", "#d62728", "#7f7f7f"

Curve = Sequence[tuple[datetime, Decimal]]


def _dates(axis: Axes) -> None:
    locator = AutoDateLocator()  # type: ignore[no-untyped-call]
    axis.xaxis.set_major_locator(locator)
    axis.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]


def _times(points: Curve) -> np.ndarray:
    return np.array([at.replace(tzinfo=None) for at, _ in points], dtype="datetime64[us]")


def equity_plot(
    path: Path, title: str, actual: Curve, modelled: Curve, names: tuple[str, str]
) -> None:
    """Both runs' booked equity; below, the daemon's less the replay's at the times both
    booked one (a tick only one of them ran has no difference drawn)."""
    figure = Figure(figsize=(12, 7), dpi=DPI, layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(3, 1.4))
    for points, name, colour in ((modelled, names[1], MODELLED_COLOUR),
                                 (actual, names[0], ACTUAL_COLOUR)):  # fmt: skip
        if points:
            top.plot(_times(points), [float(v) for _, v in points], color=colour,
                     linewidth=1.3, label=name)  # fmt: skip
    top.set_ylabel("equity")
    top.set_title(title)
    top.legend(loc="upper left", frameon=False)
    top.grid(True, alpha=0.3)
    booked = dict(modelled)
    both = [(at, value - booked[at]) for at, value in actual if at in booked]
    if both:
        bottom.plot(_times(both), [float(v) for _, v in both], color="#555555", linewidth=1.1)
    bottom.axhline(0.0, color="#999999", linewidth=0.8)
    bottom.set_ylabel("difference")
    bottom.grid(True, alpha=0.3)
    _dates(bottom)
    save_png(figure, path)


def waterfall_plot(
    path: Path,
    title: str,
    start: tuple[str, Decimal],
    steps: Sequence[tuple[str, Decimal]],
    end: tuple[str, Decimal],
) -> None:
    """A bar for `start` (the replay's P&L), one floating bar per step (each part, up or
    down from where the last one left off), and a bar for `end` (the daemon's P&L)."""
    labels = [start[0], *(name for name, _ in steps), end[0]]
    bottoms, heights, colours = [0.0], [float(start[1])], [_TOTAL]
    level = float(start[1])
    for _, value in steps:
        bottoms.append(level)
        heights.append(float(value))
        colours.append(_UP if value >= 0 else _DOWN)
        level += float(value)
    bottoms.append(0.0)
    heights.append(float(end[1]))
    colours.append(_TOTAL)
    figure = Figure(figsize=(max(7.0, 1.1 * len(labels) + 2), 5.5), dpi=DPI, layout="constrained")
    axis = figure.subplots()
    x = np.arange(len(labels))
    bars = axis.bar(x, heights, bottom=bottoms, color=colours, width=0.6)
    axis.bar_label(bars, labels=[f"{h:+,.2f}" for h in heights], fontsize=8, padding=2)
    for i in range(len(labels) - 1):  # the connector: where each bar leaves the level
        top = bottoms[i] + heights[i]
        axis.plot([i + 0.3, i + 0.7], [top, top], color="#999999", linewidth=0.8)
    axis.axhline(0.0, color="#999999", linewidth=0.8)
    axis.set_xticks(x, labels, rotation=30, ha="right")
    axis.set_ylabel("P&L")
    axis.set_title(title)
    axis.grid(True, axis="y", alpha=0.3)
    save_png(figure, path)


def slippage_plot(
    path: Path,
    title: str,
    by_hour: Mapping[str, Mapping[int, float]],
    by_kind: Mapping[str, Mapping[str, float]],
) -> None:
    """Mean slippage in bps per run (`by_hour`: run -> hour -> mean; `by_kind`: run ->
    "buy market" ... -> mean), side by side."""
    figure = Figure(figsize=(12, 4.8), dpi=DPI, layout="constrained")
    left, right = figure.subplots(1, 2, width_ratios=(2, 1))
    colours = (ACTUAL_COLOUR, MODELLED_COLOUR)
    hours = np.arange(24)
    width = 0.8 / max(1, len(by_hour))
    for i, (run, hourly) in enumerate(by_hour.items()):
        heights = [hourly.get(h, 0.0) for h in range(24)]
        offset = (i - (len(by_hour) - 1) / 2) * width
        left.bar(hours + offset, heights, width, color=colours[i % 2], label=run)
    left.set_xticks(hours, [f"{h:02d}" for h in hours], fontsize=8)
    left.set_xlabel("hour of the fill (UTC)")
    left.set_ylabel("mean slippage (bps)")
    left.set_title("by hour")
    left.legend(loc="best", frameon=True, framealpha=0.9)
    left.axhline(0.0, color="#999999", linewidth=0.8)
    left.grid(True, axis="y", alpha=0.3)
    kinds = sorted({k for means in by_kind.values() for k in means})
    x = np.arange(len(kinds))
    width = 0.8 / max(1, len(by_kind))
    for i, (run, kind_means) in enumerate(by_kind.items()):
        offset = (i - (len(by_kind) - 1) / 2) * width
        heights = [kind_means.get(k, 0.0) for k in kinds]
        bars = right.bar(x + offset, heights, width, color=colours[i % 2], label=run)
        right.bar_label(bars, fmt="%.1f", fontsize=8)
    right.set_xticks(x, kinds)
    right.set_title("by side and order type")
    right.axhline(0.0, color="#999999", linewidth=0.8)
    right.grid(True, axis="y", alpha=0.3)
    figure.suptitle(title)
    save_png(figure, path)
