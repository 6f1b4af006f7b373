"""Forecasts of a price as forecasts of its return: the unit every figure is scored in.

A forecast made at a bar's close with last close c predicts the close k bars later; its
quantiles q become returns q / c - 1 (a monotone map, so quantiles stay quantiles), and the
close that came, y, the realised return y / c - 1. Returns make symbols and periods of
different price levels comparable, and the no-change forecast is the return 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from trader.domain import Forecast
from trader.ledger.forecast_rows import StoredQuantiles

FIELD = "close"


def forecast_table(forecasts: Sequence[Forecast], field: str = FIELD) -> np.ndarray:
    """[forecast, step, level] of `field`'s quantiles (every forecast with the same levels and
    steps)."""
    if not forecasts:
        return np.zeros((0, 0, 0))
    stored = [q for f in forecasts if isinstance(q := f.quantiles, StoredQuantiles)]
    if len(stored) == len(forecasts) and len({q.layout for q in stored}) == 1:
        # Read back from a ledger or a cache, alike: each table straight from its array.
        shape = (len(forecasts), len(forecasts[0].levels), forecasts[0].steps)
        tables = [np.frombuffer(q.values_of(field), dtype=np.float64) for q in stored]
        return np.stack(tables).reshape(shape).transpose(0, 2, 1)
    levels, steps = forecasts[0].levels, forecasts[0].steps
    for f in forecasts:
        if f.levels != levels or f.steps != steps:
            raise ValueError(
                f"{f.model} {f.symbol} at {f.as_of}: levels {f.levels} and {f.steps} steps "
                f"differ from the batch's {levels} and {steps}"
            )
    return np.array(
        [[f.quantiles[field][q] for q in levels] for f in forecasts], dtype=np.float64
    ).transpose(0, 2, 1)


def as_returns(prices: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Prices [origin, ...] as returns on each origin's last close `last` [origin]."""
    base = np.asarray(last, dtype=np.float64).reshape((-1,) + (1,) * (prices.ndim - 1))
    return prices / base - 1.0
