"""Live skill: one forecast scored once its horizon's bars have closed, a rolling window of the
latest scored forecasts per model and symbol, and the signs of an unstable model.

A forecast's score is the sums `Scores.sums()` gives for one origin (every figure's numerator
and denominator over its steps), so a window of them adds up to the same figures `trader
evaluate` reports over those origins. The naive reference, the random walk with the empirical
quantiles of past moves made from the same origin (the baseline's construction, handed in by
the daemon), is scored beside every model by the same rules, and as model "naive" itself; the
no-change point forecast stays as the labelled `skill_no_change` and MASE.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from trader.domain import Forecast
from trader.skill.returns import FIELD, as_returns, forecast_table
from trader.skill.rules import INTERVALS, interval_name, median_of, score

NAIVE = "naive"
SCORED, GAP, EXPIRED = "scored", "gap", "expired"  # what became of a forecast's horizon
OUTCOMES = (SCORED, GAP, EXPIRED)
# Kronos clips its normalised inputs at 5 standard deviations of the window: a forecast at or
# beyond that band, or at a price of 0 or less (Toto replaces draws that overflow with 0), is
# the model saturating, not forecasting.
CLIP_SIGMAS = 5.0

Sums = Mapping[str, tuple[float, float]]


@dataclass(frozen=True)
class LiveScore:
    """One forecast, scored: `sums` per figure (numerator, denominator) over its steps."""

    model: str
    symbol: str
    as_of_ms: int
    steps: int
    sums: Sums
    naive: Sums  # the naive reference from the same origin, scored as a model


def score_one(
    forecast: Forecast, reference: Forecast, last: float, closes: Sequence[float]
) -> tuple[Sums, Sums]:
    """The model's and the naive reference's sums, from the close at the origin and the
    `forecast.steps` closes that came after it; `reference`: the naive forecast from the same
    origin, at the same levels and steps."""
    if len(closes) != forecast.steps:
        raise ValueError(f"{len(closes)} closes for a {forecast.steps}-step forecast")
    base = np.array([last])
    values = as_returns(forecast_table([forecast]), base)
    naive_values = as_returns(forecast_table([reference]), base)
    realised = as_returns(np.array([closes], dtype=np.float64), base)
    levels = forecast.levels
    if reference.levels != levels or reference.steps != forecast.steps:
        raise ValueError(
            f"the naive reference's levels {reference.levels} and {reference.steps} steps "
            f"differ from {forecast.model}'s {levels} and {forecast.steps}"
        )
    model = score(levels, values, realised, reference=naive_values, scale=base).sums()
    naive = score(levels, naive_values, realised, reference=naive_values, scale=base).sums()

    def plain(sums: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, tuple[float, float]]:
        return {k: (float(num[0]), float(den[0])) for k, (num, den) in sums.items()}

    return plain(model), plain(naive)


@dataclass(frozen=True)
class WindowFigures:
    """What the metrics show for a model on a symbol over its window (None: not yet known)."""

    forecasts: int
    crps: float | None  # mean per step, of the return
    mase: float | None  # against the no-change point forecast
    skill_vs_naive: float | None  # 1 - CRPS / CRPS of the probabilistic naive: the headline
    coverage: Mapping[str, float | None]
    skill_vs_no_change: float | None = None  # 1 - CRPS / CRPS of the no-change point


class RollingSkill:
    """The last `window` scored forecasts per (model, symbol), and the naive reference's."""

    def __init__(self, window: int) -> None:
        self.window = window
        self._scores: dict[tuple[str, str], deque[Sums]] = {}

    def add(self, model: str, symbol: str, sums: Sums) -> None:
        self._scores.setdefault((model, symbol), deque(maxlen=self.window)).append(sums)

    def figures(self, model: str, symbol: str) -> WindowFigures:
        entries = self._scores.get((model, symbol), deque())

        def ratio(name: str) -> float | None:
            top = sum(e[name][0] for e in entries if name in e)
            bottom = sum(e[name][1] for e in entries if name in e)
            return top / bottom if bottom > 0 else None

        skill, point = ratio("skill"), ratio("skill_no_change")
        return WindowFigures(
            len(entries),
            ratio("crps"),
            ratio("mase"),
            None if skill is None else 1.0 - skill,
            {interval_name(c): ratio(f"coverage_{interval_name(c)}") for c in INTERVALS},
            None if point is None else 1.0 - point,
        )

    def keys(self) -> list[tuple[str, str]]:
        return sorted(self._scores)


# --- stability -----------------------------------------------------------------------------


def clipped(forecast: Forecast, closes: Sequence[float]) -> bool:
    """A quantile of the close at a non-positive price, or at the window's clip band."""
    table = np.asarray([forecast.quantiles[FIELD][q] for q in forecast.levels])
    if np.any(table <= 0):
        return True
    window = np.asarray(closes, dtype=np.float64)
    spread = float(window.std())
    if spread <= 0:
        return False
    return bool(np.any(np.abs(table - float(window.mean())) >= CLIP_SIGMAS * spread))


def bar_volatility(closes: Sequence[float]) -> float | None:
    """Standard deviation of the window's one-bar log returns (None: too few, or flat)."""
    prices = np.asarray(closes, dtype=np.float64)
    if prices.size < 3 or np.any(prices <= 0):
        return None
    sigma = float(np.diff(np.log(prices)).std(ddof=1))
    return sigma if sigma > 0 else None


def spread_ratio(forecast: Forecast, last: float, closes: Sequence[float]) -> float | None:
    """The first step's predicted spread, as a standard deviation (its widest central
    interval read as a normal's), over the window's realised one-bar volatility: 1 when the
    model's uncertainty matches the market's recent moves."""
    sigma = bar_volatility(closes)
    levels = forecast.levels
    low = levels[0]
    high = next((q for q in levels if math.isclose(q, 1 - low, abs_tol=1e-9)), None)
    if sigma is None or high is None or low >= 0.5:
        return None
    width = forecast.quantile(FIELD, high, 0) - forecast.quantile(FIELD, low, 0)
    z = NormalDist().inv_cdf(high) - NormalDist().inv_cdf(low)
    return float(width / last / z / sigma)


def median_return(forecast: Forecast, last: float) -> float:
    """The median forecast of the horizon's last step, as a return."""
    levels = np.asarray(forecast.levels)
    values = np.asarray([forecast.quantiles[FIELD][q][-1] for q in forecast.levels])
    return float(median_of(levels, values)) / last - 1.0


def jump_sigmas(previous: float, current: float, sigma: float, steps: int) -> float:
    """How far the median moved between two ticks, in the horizon's realised sigmas."""
    return abs(current - previous) / (sigma * math.sqrt(steps))


@dataclass(frozen=True)
class Stability:
    """A model's forecasts at one tick."""

    model: str
    asked: int  # symbols it was asked to forecast
    failed: int  # ... for which it gave nothing usable (non-finite, an error)
    clipped: Sequence[str]  # symbols whose forecast sat at a clip bound
    spread_ratio: Mapping[str, float]  # symbol -> predicted over realised volatility
    jumps: Sequence[str]  # symbols whose median jumped beyond the limit


@dataclass
class SkillUpdate:
    """What one tick changed: new scores (and forecasts that could not be scored), by
    (model, symbol) the window figures now, and each model's stability."""

    scores: list[LiveScore] = field(default_factory=list)
    unscored: list[tuple[str, str, str]] = field(default_factory=list)  # model, symbol, why
    touched: set[tuple[str, str]] = field(default_factory=set)
    stability: list[Stability] = field(default_factory=list)
