from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trader.domain import Direction, DomainError, Forecast, Signal, Timeframe

AS_OF = datetime(2024, 1, 1, tzinfo=UTC)
LEVELS = (0.1, 0.4, 0.5, 0.6, 0.9)


def make(steps: int = 2, series_steps: int | None = None, **overrides: object) -> Forecast:
    n = steps if series_steps is None else series_steps
    quantiles = {
        "close": {q: [100 + 10 * q + s for s in range(n)] for q in LEVELS},
        "high": {q: [110 + 10 * q + s for s in range(n)] for q in LEVELS},
    }
    mean = {"close": [105.0 + s for s in range(n)], "high": [115.0 + s for s in range(n)]}
    fields = {"quantiles": quantiles, "mean": mean, "steps": steps} | overrides
    return Forecast("SOL/USDT", "baseline", AS_OF, Timeframe("1h"), **fields)  # type: ignore[arg-type]


def test_a_forecast_is_read_by_field_level_and_step():
    forecast = make(steps=3)
    assert forecast.levels == LEVELS
    assert forecast.quantile("close", 0.5, 0) == 105.0
    assert forecast.quantile("high", 0.9) == 119.0 + 2
    assert forecast.step_end(0) == AS_OF + timedelta(hours=1)
    with pytest.raises(DomainError, match="no 'volume' quantile"):
        forecast.quantile("volume", 0.5)


@given(st.sampled_from(["close", "high"]), st.sampled_from(LEVELS), st.integers(0, 1))
def test_a_forecast_with_a_non_finite_value_anywhere_is_refused(field, level, step):
    forecast = make()
    quantiles = {f: {q: list(v) for q, v in t.items()} for f, t in forecast.quantiles.items()}
    quantiles[field][level][step] = float("nan")
    with pytest.raises(DomainError, match="non-finite"):
        make(quantiles=quantiles)


@given(st.sampled_from(LEVELS[:-1]), st.integers(0, 1))
def test_crossing_quantiles_are_refused(level, step):
    forecast = make()
    quantiles = {f: {q: list(v) for q, v in t.items()} for f, t in forecast.quantiles.items()}
    quantiles["close"][level][step] = 1e6
    with pytest.raises(DomainError, match="above quantile"):
        make(quantiles=quantiles)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"steps": 0}, "positive int"),
        ({"steps": 3, "series_steps": 2}, "expected 3 steps"),
        ({"quantiles": {}, "mean": {}}, "no fields"),
        ({"mean": {"close": [1.0, 2.0]}}, "mean fields"),
        ({"quantiles": {"close": {1.0: [1, 2]}, "high": {1.0: [1, 2]}}}, "outside"),
        (
            {"quantiles": {"close": {0.5: [1, 2]}, "high": {0.4: [1, 2]}}},
            "same quantile levels",
        ),
    ],
)
def test_a_malformed_forecast_is_refused(overrides, message):
    with pytest.raises(DomainError, match=message):
        make(**overrides)


def test_a_forecast_needs_an_aware_as_of_time():
    with pytest.raises(DomainError, match="timezone-aware"):
        Forecast(
            "SOL/USDT", "m", datetime(2024, 1, 1), Timeframe("1h"), 1, {"c": {0.5: [1]}}, {"c": [1]}
        )


def test_a_signal_states_its_reason_and_its_inputs_are_frozen():
    inputs = {"edge_bps": 12.5}
    signal = Signal(
        "ci_guard", "SOL/USDT", AS_OF, Direction.FLAT, "no trade: band too wide", inputs
    )
    inputs["edge_bps"] = 0.0
    assert signal.inputs["edge_bps"] == 12.5
    with pytest.raises(TypeError):
        signal.inputs["x"] = 1  # type: ignore[index]
    with pytest.raises(DomainError, match="reason"):
        Signal("ci_guard", "SOL/USDT", AS_OF, Direction.LONG, "  ")
    with pytest.raises(DomainError, match="Direction"):
        Signal("ci_guard", "SOL/USDT", AS_OF, "long", "why")  # type: ignore[arg-type]
