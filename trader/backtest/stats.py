"""Performance statistics of an equity curve, annualised by the bar frequency.

The curve is E_0 (the starting cash, before the first tick) and E_1 .. E_N (equity after each
tick). With per-bar simple returns r_i = E_i / E_(i-1) - 1, P periods a year and an annual
risk-free rate rf (per bar: rf_p = (1 + rf)^(1/P) - 1):

    total return       E_N / E_0 - 1
    annualised return  (E_N / E_0)^(P / N) - 1
    volatility         std(r, ddof=1) * sqrt(P)
    Sharpe             mean(r - rf_p) / std(r, ddof=1) * sqrt(P)
    Sortino            mean(r - rf_p) / sqrt(mean(min(r - rf_p, 0)^2)) * sqrt(P)
    max drawdown       max over i of 1 - E_i / max(E_0 .. E_i)  (the ledger's equity.drawdown,
                       whose maximum it is, but for the closing out at the end)

The drawdown's duration runs from the peak before the deepest trough to the first bar back at
that peak (or to the end, flagged as not recovered). A ratio whose denominator is zero (no
variation, no losing bar) is None, never a number made up.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike


@dataclass(frozen=True)
class Annualisation:
    periods_per_year: float
    calendar: str  # the symbols' calendars: "continuous", "XNYS", ...
    explanation: str


@dataclass(frozen=True)
class Performance:
    start: float
    end: float
    periods: int  # N, the number of returns
    years: float
    total_return: float
    annual_return: float | None
    volatility: float | None
    sharpe: float | None
    sortino: float | None
    max_drawdown: float
    max_drawdown_peak: int  # index in the curve of the peak before it
    max_drawdown_bars: int  # peak to recovery (or to the end)
    max_drawdown_recovered: bool
    longest_drawdown_bars: int


def returns(equity: ArrayLike) -> np.ndarray:
    curve = np.asarray(equity, dtype=np.float64)
    return curve[1:] / curve[:-1] - 1.0


def performance(
    equity: ArrayLike, periods_per_year: float, risk_free_rate: float = 0.0
) -> Performance:
    """Statistics of E_0 .. E_N (see the module's formulas)."""
    curve = np.asarray(equity, dtype=np.float64)
    if len(curve) < 2:
        raise ValueError("an equity curve needs a start and at least one tick")
    if not np.all(np.isfinite(curve)) or np.any(curve <= 0):
        raise ValueError("equity must stay positive and finite for returns to mean anything")
    r = returns(curve)
    n = len(r)
    excess = r - ((1.0 + risk_free_rate) ** (1.0 / periods_per_year) - 1.0)
    growth = curve[-1] / curve[0]
    std = float(np.std(r, ddof=1)) if n > 1 else 0.0
    downside = float(np.sqrt(np.mean(np.minimum(excess, 0.0) ** 2)))
    scale = math.sqrt(periods_per_year)
    worst = drawdown(curve)
    return Performance(
        start=float(curve[0]),
        end=float(curve[-1]),
        periods=n,
        years=n / periods_per_year,
        total_return=float(growth - 1.0),
        annual_return=float(growth ** (periods_per_year / n) - 1.0),
        volatility=std * scale if n > 1 else None,
        sharpe=float(np.mean(excess)) / std * scale if std > 0 else None,
        sortino=float(np.mean(excess)) / downside * scale if downside > 0 else None,
        max_drawdown=worst.depth,
        max_drawdown_peak=worst.peak,
        max_drawdown_bars=worst.bars,
        max_drawdown_recovered=worst.recovered,
        longest_drawdown_bars=worst.longest,
    )


def drawdown_series(equity: ArrayLike) -> np.ndarray:
    """1 - E_i / max(E_0 .. E_i) for every i: 0 at a new high."""
    curve = np.asarray(equity, dtype=np.float64)
    return 1.0 - curve / np.maximum.accumulate(curve)


@dataclass(frozen=True)
class Drawdown:
    depth: float  # the deepest, as a share of the peak before it
    peak: int  # index of that peak in the curve
    bars: int  # from the peak to the first bar back at it (or to the end)
    recovered: bool
    longest: int  # bars, the longest of any drawdown measured the same way


def drawdown(equity: ArrayLike) -> Drawdown:
    """The deepest drawdown and how long it lasted; and the longest of any."""
    curve = np.asarray(equity, dtype=np.float64)
    peaks = np.maximum.accumulate(curve)
    depths = 1.0 - curve / peaks
    trough = int(np.argmax(depths))
    depth = float(depths[trough])
    if depth <= 0:
        return Drawdown(0.0, 0, 0, True, 0)
    at_high = curve >= peaks
    highs = np.flatnonzero(at_high).tolist()
    # Episodes run from one high to the next high after a dip (or to the end).
    longest = 0
    peak, duration, recovered = highs[-1], len(curve) - 1 - highs[-1], False
    for before, after in itertools.pairwise(highs):
        if after - before > 1:
            longest = max(longest, after - before)
            if before < trough < after:
                peak, duration, recovered = before, after - before, True
    if not at_high[-1]:
        longest = max(longest, len(curve) - 1 - highs[-1])
    return Drawdown(depth, peak, duration, recovered, longest)
