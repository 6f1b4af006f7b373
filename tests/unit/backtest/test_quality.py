"""The backtest's forecaster section is scored by trader.skill: the same figures as evaluate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from trader.backtest.quality import forecast_quality, realised
from trader.domain import Forecast, Timeframe
from trader.ledger.forecast_rows import StoredQuantiles, forecast_row, read_forecast
from trader.skill import forecast_table, score

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
    references = [flat(i, prices[i], 0.02) for i in range(50)]  # a narrower naive reference
    quality = forecast_quality("toto", "SOL/USDT", forecasts, by_end, references, 64)
    assert quality is not None
    assert quality.forecasts == 50
    assert quality.naive_window == 64
    # The same forecasts through trader.skill directly, in returns.
    values = np.array([[[0.04 * (q - 0.5) for q in LEVELS]] * 2 for _ in range(50)])
    realised = np.array([[prices[i + 1] / prices[i] - 1, prices[i + 2] / prices[i] - 1]
                         for i in range(50)])  # fmt: skip
    figures = score(LEVELS, values, realised, reference=values / 2).figures()
    assert quality.crps == pytest.approx(figures.crps)
    assert quality.crps_skill == pytest.approx(figures.skill)
    assert quality.crps_skill_no_change == pytest.approx(figures.skill_no_change)
    # A forecast that is its own naive reference scores 0 exactly.
    own = forecast_quality("baseline", "SOL/USDT", forecasts, by_end, forecasts, 64)
    assert own is not None
    assert own.crps_skill == 0.0
    # The median is no change: MAE equals the naive MAE at every step, skill 0.
    assert quality.mae == pytest.approx(quality.mae_naive)
    assert quality.skill == pytest.approx(0.0)
    assert [i.nominal for i in quality.intervals] == [0.5, 0.8, 0.9]
    assert len(quality.below) == len(LEVELS)


def test_forecasts_without_outcomes_are_left_out() -> None:
    by_end = closes(10)
    prices = list(by_end.values())
    forecasts = [flat(i, prices[i], 0.04) for i in range(10)]  # the last two run past the data
    quality = forecast_quality("baseline", "SOL/USDT", forecasts, by_end, forecasts, 64)
    assert quality is not None
    assert quality.forecasts == 8
    last = forecasts[-1:]
    assert forecast_quality("baseline", "SOL/USDT", last, by_end, last, 64) is None
    with pytest.raises(ValueError, match="1 naive references for 10 forecasts"):
        forecast_quality("baseline", "SOL/USDT", forecasts, by_end, last, 64)


def test_forecasts_read_back_from_their_rows_score_exactly_as_made() -> None:
    """The backtest scores cached forecasts (their tables read straight from the stored
    arrays): the very figures of the forecasts as they were made, a missing close too."""
    by_end = closes(80)
    del by_end[sorted(by_end)[40]]  # a candle missing: the forecasts reaching it drop out
    rng = np.random.default_rng(5)
    made = []
    for end, price in list(by_end.items())[:60]:  # made at each bar's close
        spread = float(rng.uniform(0.01, 0.06))
        table = {q: [price * (1 + spread * (q - 0.5) + 0.001 * k) for k in range(3)]
                 for q in LEVELS}  # fmt: skip
        made.append(Forecast(
            "SOL/USDT", "baseline", datetime.fromtimestamp(end / 1000, UTC), Timeframe("1h"), 3,
            {"close": table, "high": table}, {"close": [price] * 3, "high": [price] * 3},
        ))  # fmt: skip
    stored = [read_forecast(forecast_row("t", f)[1:], Timeframe("1h"), check=False) for f in made]
    assert all(isinstance(f.quantiles, StoredQuantiles) for f in stored)
    np.testing.assert_array_equal(forecast_table(stored), forecast_table(made))
    np.testing.assert_array_equal(forecast_table(stored, "high"), forecast_table(made, "high"))
    ours, theirs = (
        forecast_quality("baseline", "SOL/USDT", fs, by_end, fs, 64) for fs in (stored, made)
    )
    assert ours == theirs
    assert ours is not None
    assert ours.forecasts == 59  # the one whose horizon ends at the hole is left out
    with pytest.raises(KeyError):
        forecast_table(stored, "volume")


def test_realised_closes_of_daily_bars_on_trading_days() -> None:
    """Plain dates, a weekend without bars: a step whose close is not in the data is NaN."""
    days = [datetime(2024, 1, d, tzinfo=UTC) for d in (2, 3, 4, 5, 8, 9)]  # Tue..Fri, Mon, Tue
    day_closes = {int((d + timedelta(days=1)).timestamp() * 1000): 100.0 + i
                  for i, d in enumerate(days)}  # fmt: skip
    forecasts = [
        Forecast("GOOG/USD", "baseline", d + timedelta(days=1), Timeframe("1d"), 2,
                 {"close": {q: [1.0, 1.0] for q in LEVELS}}, {"close": [1.0, 1.0]})
        for d in days[:4]
    ]  # fmt: skip
    out = realised(forecasts, day_closes)
    expected = [[101.0, 102.0], [102.0, 103.0], [103.0, np.nan], [np.nan, np.nan]]
    np.testing.assert_array_equal(out, np.array(expected))
