"""How good the forecaster was, apart from any strategy, scored by `trader.skill` (the scoring
`trader evaluate` and the daemon's live skill use).

For every tick's forecast of the close, at each step k of the horizon: the predicted return
(median / last close - 1) against the realised one (close k+1 bars later / last close - 1).
The CRPS of the whole predicted distribution against the naive reference's from the same
origin (crps_skill = 1 - CRPS / CRPS of the naive: the headline), the naive reference being the
random walk with the empirical quantiles of past moves (the baseline's construction, with
`forecast.naive_window`); against the no-change point forecast too (crps_skill_no_change,
which any spread beats). MAE is compared with the no-change forecast (predicted return 0),
whose MAE is the mean absolute realised return; skill = 1 - MAE / MAE of no change.
Calibration: how often the realised close fell at or below each quantile (a calibrated model's
q-quantile is above it a share q of the time), and inside each central interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from trader.domain import Forecast, to_epoch_ms
from trader.skill import INTERVALS, as_returns, forecast_table, score
from trader.skill.returns import FIELD


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
    mae_naive: float  # of the no-change point forecast
    skill: float | None  # 1 - MAE / MAE of no change, at the horizon's last step
    mae_by_step: tuple[float, ...]
    mae_naive_by_step: tuple[float, ...]
    below: tuple[tuple[float, float], ...]  # (level, share of realised closes at or below)
    intervals: tuple[Interval, ...]
    crps: float | None = None  # of the return, every step (quantile approximation)
    crps_skill: float | None = None  # 1 - CRPS / CRPS of the naive reference: the headline
    crps_skill_no_change: float | None = None  # 1 - CRPS / CRPS of the no-change point
    naive_window: int | None = None  # forecast.naive_window of the naive reference


def realised(forecasts: Sequence[Forecast], closes: Mapping[int, float]) -> np.ndarray:
    """[forecast, step] realised closes (NaN past the data); `closes` by bar close, epoch ms.
    Step k of a forecast closes k + 1 bars after it was made (`Forecast.step_end`)."""
    width = max((f.steps for f in forecasts), default=0)
    if not forecasts or not closes:
        return np.full((len(forecasts), width), np.nan)
    made = np.array([to_epoch_ms(f.as_of) for f in forecasts], dtype=np.int64)
    step = np.array([f.timeframe.seconds * 1000 for f in forecasts], dtype=np.int64)
    ends = made[:, None] + step[:, None] * np.arange(1, width + 1, dtype=np.int64)
    times = np.fromiter(closes.keys(), dtype=np.int64, count=len(closes))
    values = np.fromiter(closes.values(), dtype=np.float64, count=len(closes))
    order = np.argsort(times, kind="stable")
    times, values = times[order], values[order]
    at = np.minimum(np.searchsorted(times, ends), len(times) - 1)
    out = np.where(times[at] == ends, values[at], np.nan)
    out[np.arange(width)[None, :] >= np.array([f.steps for f in forecasts])[:, None]] = np.nan
    return out


def forecast_quality(
    model: str,
    symbol: str,
    forecasts: Sequence[Forecast],
    closes: Mapping[int, float],
    references: Sequence[Forecast],
    naive_window: int,
) -> Quality | None:
    """None when no forecast has its outcome in the data yet. `references`: the naive
    forecast from each forecast's origin (`CachedForecaster.naive_references`)."""
    if not forecasts:
        return None
    if len(references) != len(forecasts):
        raise ValueError(f"{len(references)} naive references for {len(forecasts)} forecasts")
    actual = realised(forecasts, closes)
    complete = ~np.isnan(actual[:, -1])
    if not complete.any():
        return None
    kept = [f for f, c in zip(forecasts, complete, strict=True) if c]
    naive = [f for f, c in zip(references, complete, strict=True) if c]
    last = np.array([closes[int(f.as_of.timestamp() * 1000)] for f in kept])
    levels = kept[0].levels
    scores = score(
        levels,
        as_returns(forecast_table(kept, FIELD), last),
        as_returns(actual[complete], last),
        reference=as_returns(forecast_table(naive, FIELD), last),
        scale=last,
    )
    steps = [scores.figures(k) for k in range(scores.steps)]
    overall = scores.figures()
    intervals = [
        Interval(round((1 - c) / 2, 10), round((1 + c) / 2, 10), c, share)
        for c in INTERVALS
        if (share := overall.coverage[str(round(c * 100))]) is not None
    ]
    mae, still = steps[-1].mae or 0.0, steps[-1].mae_no_change or 0.0
    return Quality(
        model, symbol, len(kept), scores.steps, mae, still,
        1.0 - mae / still if still > 0 else None,
        tuple(f.mae or 0.0 for f in steps), tuple(f.mae_no_change or 0.0 for f in steps),
        tuple((q, share or 0.0) for q, share in overall.calibration), tuple(intervals),
        overall.crps, overall.skill, overall.skill_no_change, naive_window,
    )  # fmt: skip
