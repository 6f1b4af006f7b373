"""The report's PNG plots, drawn with matplotlib's Agg renderer (no display, no pyplot state).

- equity: each strategy's growth of 1 beside buy-and-hold (log scale), drawdowns below;
- forecast bands: the last forecasts' central intervals at the horizon against the close;
- calibration: how often the close fell below each quantile, and inside each interval.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from trader.backtest.quality import Quality
from trader.backtest.stats import drawdown_series
from trader.domain import Forecast
from trader.private_files import write_file

DPI = 110
_COLOURS = {"simple": "#1f77b4", "ci_guard": "#ff7f0e", "maxdiff": "#2ca02c"}
_OTHERS = ("#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
HOLD_STYLE = {"color": "#555555", "linestyle": "--", "linewidth": 1.2}


def save_png(figure: Figure, path: Path, dpi: float | str = "figure") -> None:
    """`figure` as a PNG at `path`, written whole and private by `write_file` (matplotlib
    opening the path itself would write through a link planted there)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    write_file(path, buffer.getvalue(), what="the report folder")


def _times(ms: Sequence[int] | np.ndarray) -> np.ndarray:
    return np.asarray(ms, dtype="datetime64[ms]")


def _colour(strategy: str, index: int) -> str:
    return _COLOURS.get(strategy.split("+", maxsplit=1)[0], _OTHERS[index % len(_OTHERS)])


def _dates(axis: Axes) -> None:
    locator = AutoDateLocator()  # type: ignore[no-untyped-call]
    axis.xaxis.set_major_locator(locator)
    axis.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]


def equity_plot(
    path: Path,
    title: str,
    ticks_ms: np.ndarray,
    curves: Mapping[str, np.ndarray],
    hold: np.ndarray | None,
) -> None:
    """`curves`: E_0 .. E_N per strategy (E_0 drawn at the first tick)."""
    figure = Figure(figsize=(12, 7), dpi=DPI, layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(3, 1.4))
    x = _times(np.concatenate([[ticks_ms[0]], ticks_ms]))
    series = [(name, curve, {"color": _colour(name, i), "linewidth": 1.3})
              for i, (name, curve) in enumerate(curves.items())]  # fmt: skip
    if hold is not None:
        series.append(("buy and hold", hold, HOLD_STYLE))
    for name, curve, style in series:
        growth = curve / curve[0]
        top.plot(x, growth, label=f"{name} ({growth[-1] - 1:+.1%})", **style)
        bottom.plot(x, -100 * drawdown_series(curve), **style)
    top.set_yscale("log")
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    top.yaxis.set_major_formatter(plain)
    low, high = top.get_ylim()
    if high / low < 3:  # a narrow range: round linear steps (a decade's ticks would miss it)
        top.yaxis.set_major_locator(MaxNLocator(nbins=8, steps=[1, 2, 5, 10]))
    else:  # labels at 1, 2, 5 of each decade
        top.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    top.yaxis.set_minor_formatter(NullFormatter())
    top.axhline(1.0, color="#999999", linewidth=0.8)
    top.set_ylabel("growth of 1 (log scale)")
    top.set_title(title)
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    top.grid(True, which="major", alpha=0.3)
    bottom.set_ylabel("drawdown (%)")
    bottom.grid(True, alpha=0.3)
    _dates(bottom)
    save_png(figure, path)


def band_plot(
    path: Path, title: str, forecasts: Sequence[Forecast], closes: Mapping[int, float]
) -> None:
    """The central intervals of the close at the horizon's last step, at the time they
    forecast, against the close that came."""
    figure = Figure(figsize=(12, 5.5), dpi=DPI, layout="constrained")
    axis = figure.subplots()
    step = forecasts[0].steps - 1
    targets = [int(f.step_end(step).timestamp() * 1000) for f in forecasts]
    x = _times(targets)
    levels = forecasts[0].levels
    pairs = [(q, round(1 - q, 10)) for q in levels if q < 0.5 and round(1 - q, 10) in levels]
    shades = np.linspace(0.18, 0.38, max(1, len(pairs)))
    for (low, high), alpha in zip(pairs, shades, strict=False):
        axis.fill_between(
            x,
            [f.quantile("close", low, step) for f in forecasts],
            [f.quantile("close", high, step) for f in forecasts],
            color="#1f77b4", alpha=float(alpha), linewidth=0,
            label=f"{low:.0%}-{high:.0%} interval",
        )  # fmt: skip
    if 0.5 in levels:
        axis.plot(x, [f.quantile("close", 0.5, step) for f in forecasts], color="#1f77b4",
                  linewidth=0.9, label="median forecast")  # fmt: skip
    known = [(t, closes[e]) for t, e in zip(x, targets, strict=True) if e in closes]
    if known:
        axis.plot([t for t, _ in known], [c for _, c in known], color="black", linewidth=1.1,
                  label="realised close")  # fmt: skip
    axis.set_title(title)
    axis.set_ylabel("price")
    axis.legend(loc="best", frameon=True, framealpha=0.9, ncols=2)
    axis.grid(True, alpha=0.3)
    _dates(axis)
    save_png(figure, path)


def calibration_plot(path: Path, title: str, quality: Quality) -> None:
    figure = Figure(figsize=(11, 4.8), dpi=DPI, layout="constrained")
    left, right = figure.subplots(1, 2)
    levels = [q for q, _ in quality.below]
    observed = [share for _, share in quality.below]
    left.plot([0, 1], [0, 1], color="#999999", linewidth=0.8, label="perfect calibration")
    left.plot(levels, observed, marker="o", color="#1f77b4", label="observed")
    for q, share in quality.below:
        left.annotate(f"{share:.2f}", (q, share), textcoords="offset points", xytext=(6, -12),
                      fontsize=8)  # fmt: skip
    left.set_xlim(0, 1)
    left.set_ylim(0, 1)
    left.set_xlabel("quantile level")
    left.set_ylabel("share of closes at or below it")
    left.set_title("quantiles (all steps)")
    left.legend(loc="upper left", frameon=False)
    left.grid(True, alpha=0.3)
    names = [f"{i.lower:.0%}-{i.upper:.0%}" for i in quality.intervals]
    x = np.arange(len(names))
    right.bar(x - 0.2, [i.nominal for i in quality.intervals], 0.4, color="#bbbbbb",
              label="nominal")  # fmt: skip
    bars = right.bar(x + 0.2, [i.observed for i in quality.intervals], 0.4, color="#1f77b4",
                     label="observed")  # fmt: skip
    right.bar_label(bars, fmt="%.3f", fontsize=8)
    right.set_xticks(x, names)
    right.set_ylim(0, 1)
    right.set_ylabel("share of closes inside")
    right.set_title("central intervals")
    right.legend(loc="upper left", frameon=False)
    right.grid(True, axis="y", alpha=0.3)
    figure.suptitle(title)
    save_png(figure, path)
