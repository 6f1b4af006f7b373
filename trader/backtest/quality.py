"""How good the forecaster was, apart from any strategy.

For every tick's forecast of the close, at each step k of the horizon: the predicted return
(median / last close - 1) against the realised one (close k+1 bars later / last close - 1).
MAE is compared with the naive no-change forecast (predicted return 0), whose MAE is the mean
absolute realised return; skill = 1 - MAE / naive MAE (above 0: better than no change).
Calibration: how often the realised close fell at or below each quantile (a calibrated model's
q-quantile is above it a share q of the time), and inside each central interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from trader.domain import Forecast

FIELD = "close"


@dataclass(frozen=True)
class Interval:
    lower: float
    upper: float
    nominal: float  # upper - lower
    observed: float  # share of realised closes inside


@dataclass(frozen=True)
class Quality:
    model: str
    symbol: str
    forecasts: int  # with a realised value at the horizon
    horizon: int
    mae: float  # of the predicted return at the horizon's last step
    mae_naive: float
    skill: float | None
    mae_by_step: tuple[float, ...]
    mae_naive_by_step: tuple[float, ...]
    below: tuple[tuple[float, float], ...]  # (level, share of realised closes at or below)
    intervals: tuple[Interval, ...]


def realised(forecasts: Sequence[Forecast], closes: Mapping[int, float]) -> np.ndarray:
    """[forecast, step] realised closes (NaN past the data); `closes` by bar close, epoch ms."""
    out = np.full((len(forecasts), max((f.steps for f in forecasts), default=0)), np.nan)
    for i, forecast in enumerate(forecasts):
        for k in range(forecast.steps):
            out[i, k] = closes.get(int(forecast.step_end(k).timestamp() * 1000), np.nan)
    return out


def forecast_quality(
    model: str, symbol: str, forecasts: Sequence[Forecast], closes: Mapping[int, float]
) -> Quality | None:
    """None when no forecast has its outcome in the data yet."""
    if not forecasts:
        return None
    levels = forecasts[0].levels
    last = np.array([closes[int(f.as_of.timestamp() * 1000)] for f in forecasts])
    table = np.array(
        [[f.quantiles[FIELD][q] for q in levels] for f in forecasts], dtype=np.float64
    )  # [forecast, level, step]
    actual = realised(forecasts, closes)
    complete = ~np.isnan(actual[:, -1])
    if not complete.any():
        return None
    last, table, actual = last[complete], table[complete], actual[complete]
    median = table[:, levels.index(0.5)] if 0.5 in levels else np.median(table, axis=1)
    predicted = median / last[:, None] - 1.0
    outcome = actual / last[:, None] - 1.0
    mae_steps = np.mean(np.abs(predicted - outcome), axis=0)
    naive_steps = np.mean(np.abs(outcome), axis=0)
    below = tuple((float(q), float(np.mean(actual <= table[:, j]))) for j, q in enumerate(levels))
    intervals = []
    for i, low in enumerate(levels):
        high = round(1.0 - low, 10)
        if low < 0.5 and high in levels:
            inside = (actual >= table[:, i]) & (actual <= table[:, levels.index(high)])
            intervals.append(Interval(low, high, high - low, float(np.mean(inside))))
    mae, naive = float(mae_steps[-1]), float(naive_steps[-1])
    return Quality(
        model, symbol, int(complete.sum()), table.shape[2], mae, naive,
        1.0 - mae / naive if naive > 0 else None,
        tuple(map(float, mae_steps)), tuple(map(float, naive_steps)), below, tuple(intervals),
    )  # fmt: skip
