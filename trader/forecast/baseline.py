"""The yardstick: a no-change forecast whose quantiles are those of recent history.

For step k (1-based) and each field, the quantiles are the empirical quantiles of
log(field[t+k] / close[t]) over the lookback, applied to the last close; the mean close is the
last close itself (no change). It needs no weights and is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from trader.domain import Forecast
from trader.forecast.protocol import FIELDS, CompileStats, ForecastRequest


class BaselineForecaster:
    name = "baseline"
    mode = "eager"
    compile_stats = CompileStats()  # nothing is compiled

    def __init__(self, lookback: int = 256) -> None:
        if lookback < 8:
            raise ValueError("the baseline needs a lookback of at least 8 bars")
        self.lookback = lookback

    def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        return [self._one(request) for request in requests]

    def _one(self, request: ForecastRequest) -> Forecast:
        bars = request.bars[-(self.lookback + request.horizon) :]
        if len(bars) < request.horizon + 8:
            raise ValueError(
                f"{request.symbol}: {len(bars)} bars are too few for a {request.horizon}-step "
                "baseline forecast"
            )
        series = {f: np.log([getattr(b, f) for b in bars]) for f in FIELDS}
        last_close = bars[-1].close
        levels = np.asarray(request.quantiles, dtype=float)
        quantiles: dict[str, dict[float, list[float]]] = {f: {} for f in FIELDS}
        mean: dict[str, list[float]] = {f: [] for f in FIELDS}
        by_step: dict[str, list[np.ndarray]] = {f: [] for f in FIELDS}
        for k in range(1, request.horizon + 1):
            base = series["close"][:-k]
            for field in FIELDS:
                ratios = series[field][k:] - base
                by_step[field].append(last_close * np.exp(np.quantile(ratios, levels)))
                mean[field].append(
                    last_close if field == "close" else float(last_close * np.exp(ratios).mean())
                )
        for field in FIELDS:
            table = np.stack(by_step[field], axis=1)  # level x step
            quantiles[field] = {float(q): table[i].tolist() for i, q in enumerate(levels)}
        return Forecast(
            request.symbol,
            self.name,
            bars[-1].end,
            bars[-1].timeframe,
            request.horizon,
            quantiles,
            mean,
        )
