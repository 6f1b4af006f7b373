"""The backtest's forecaster section is scored by trader.skill: the same figures as evaluate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from trader.backtest.quality import forecast_quality
from trader.domain import Forecast, Timeframe
from trader.skill import score

LEVELS = tuple(round(0.05 * i, 2) for i in range(1, 20))
T0 = datetime(2024, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def closes(n: int) -> dict[int, float]:
    rng = np.random.default_rng(3)
    prices = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    return {int((T0 + (i + 1) * HOUR).timestamp() * 1000): float(p) for i, p in enumerate(prices)}


def flat(at: int, close: float, spread: float, steps: int = 2) -> Forecast:
    """Quantiles spread evenly around no change."""
    table = {q: [close * (1 + spread * (q - 0.5))] * steps for q in LEVELS}
    fields = {"close": table}
    return Forecast(
        "SOL/USDT", "baseline", T0 + (at + 1) * HOUR, Timeframe("1h"), steps, fields,
        {"close": [close] * steps},
    )  # fmt: skip


def test_quality_is_the_skill_modules_figures() -> None:
    by_end = closes(60)
    prices = list(by_end.values())
    forecasts = [flat(i, prices[i], 0.04) for i in range(50)]
    quality = forecast_quality("baseline", "SOL/USDT", forecasts, by_end)
    assert quality is not None
    assert quality.forecasts == 50
    # The same forecasts through trader.skill directly, in returns.
    values = np.array([[[0.04 * (q - 0.5) for q in LEVELS]] * 2 for _ in range(50)])
    realised = np.array([[prices[i + 1] / prices[i] - 1, prices[i + 2] / prices[i] - 1]
                         for i in range(50)])  # fmt: skip
    figures = score(LEVELS, values, realised).figures()
    assert quality.crps == pytest.approx(figures.crps)
    assert quality.crps_skill == pytest.approx(figures.skill)
    # The median is no change: MAE equals the naive MAE at every step, skill 0.
    assert quality.mae == pytest.approx(quality.mae_naive)
    assert quality.skill == pytest.approx(0.0)
    assert [i.nominal for i in quality.intervals] == [0.5, 0.8, 0.9]
    assert len(quality.below) == len(LEVELS)


def test_forecasts_without_outcomes_are_left_out() -> None:
    by_end = closes(10)
    prices = list(by_end.values())
    forecasts = [flat(i, prices[i], 0.04) for i in range(10)]  # the last two run past the data
    quality = forecast_quality("baseline", "SOL/USDT", forecasts, by_end)
    assert quality is not None
    assert quality.forecasts == 8
    assert forecast_quality("baseline", "SOL/USDT", forecasts[-1:], by_end) is None
