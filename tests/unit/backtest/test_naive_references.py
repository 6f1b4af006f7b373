"""The backtest's naive reference is the baseline forecaster's code on each forecast's own
window: for the baseline at the same lookback, computed afresh, it is the baseline's forecast
exactly (so its CRPS skill is 0 by construction, not by luck). Real bars: the first 700 hours
of SOL/USDT (tests/data/README.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from tests.recorded import SOLUSDT_1H
from trader.backtest.cache import ForecastCache
from trader.backtest.forecasts import forecast_ahead
from trader.backtest.windows import SymbolWindows
from trader.domain import Forecast
from trader.forecast.baseline import BaselineForecaster
from trader.forecast.protocol import CompileStats, ForecastRequest
from trader.market.calendars.calendar import TradingCalendar
from trader.market.replay import read_recording
from trader.skill import forecast_table

LEVELS = [round(0.05 * k, 2) for k in range(1, 20)]
CONTEXT, HORIZON = 300, 3


class Disguised:
    """The baseline under another name and class: the references are then computed, not
    taken from the forecasts themselves."""

    name = "disguised"
    mode = "eager"
    compile_stats = CompileStats()

    def __init__(self, lookback: int) -> None:
        self.lookback = lookback  # in the forecast cache's key
        self.inner = BaselineForecaster(lookback)

    def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        return self.inner.forecast(requests)


def test_the_reference_is_the_baselines_forecast_from_the_same_window(tmp_path: Path) -> None:
    whole = read_recording(SOLUSDT_1H, "SOL/USDT")
    recording = replace(whole, rows=whole.rows[:700])
    windows = {
        "SOL/USDT": SymbolWindows(
            recording, CONTEXT, calendar=TradingCalendar.always_open(), min_contiguous=None
        )
    }
    ends = {"SOL/USDT": sorted(windows["SOL/USDT"].by_end)[::7]}
    cache = ForecastCache(tmp_path / "cache")
    try:
        for lookback, same in ((256, True), (64, False)):
            served = forecast_ahead(
                Disguised(lookback), windows, ends, cache, horizon=HORIZON, quantiles=LEVELS,
                context=CONTEXT, batch=4,
            )  # fmt: skip
            made = [served.cached("SOL/USDT", e) for e in ends["SOL/USDT"]]
            forecasts = [f for f in made if f is not None]
            assert len(forecasts) == len(ends["SOL/USDT"]) > 50
            naive = served.naive_references(forecasts, 256)
            assert [(f.symbol, f.as_of, f.steps) for f in naive] == [
                (f.symbol, f.as_of, f.steps) for f in forecasts
            ]
            equal = np.array_equal(forecast_table(naive), forecast_table(forecasts))
            assert equal is same
    finally:
        cache.close()
