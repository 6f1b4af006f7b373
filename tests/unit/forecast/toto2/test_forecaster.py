"""Toto 2.0 behind the Forecaster protocol, on small random weights: a batch of symbols of
different lengths and horizons forecasts as each alone, the same bars give the same
forecast, and what it cannot do is refused with a message that says why."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from trader.domain import Timeframe
from trader.forecast.protocol import ForecastRequest
from trader.forecast.random_weights import random_walk_bars, write_random_toto2
from trader.forecast.toto2 import Toto2Forecaster, load_toto2

LEVELS = (0.1, 0.3, 0.5, 0.75, 0.9)
END = datetime(2025, 6, 2, tzinfo=UTC)


@pytest.fixture(scope="module")
def forecaster(tmp_path_factory: pytest.TempPathFactory) -> Toto2Forecaster:
    directory = write_random_toto2(tmp_path_factory.mktemp("toto2") / "small", "small").directory
    return Toto2Forecaster(load_toto2(directory).model, context=200, decode_block=16)


def request(symbol: str, bars: int, horizon: int, seed: int) -> ForecastRequest:
    window = random_walk_bars(symbol, bars, timeframe=Timeframe("1h"), end=END, seed=seed)
    return ForecastRequest(symbol, window, horizon, LEVELS)


def test_a_batch_forecasts_as_each_request_alone(forecaster: Toto2Forecaster) -> None:
    requests = [
        request("A/USDT", 120, 5, 1),  # 15 patches of 8
        request("B/USDT", 117, 5, 2),  # padded to the same 15
        request("C/USDT", 300, 40, 3),  # more than the context (200): the latest 200
        request("D/USDT", 64, 40, 4),  # horizon across decode blocks of 16
    ]
    together = forecaster.forecast(requests)
    for req, forecast in zip(requests, together, strict=True):
        (alone,) = forecaster.forecast([req])
        assert forecast.symbol == req.symbol
        assert forecast.steps == req.horizon
        assert forecast.levels == LEVELS
        for field in ("close", "high", "low"):
            for level in LEVELS:
                assert forecast.quantiles[field][level] == pytest.approx(
                    alone.quantiles[field][level], rel=1e-5
                )
    assert forecaster.forecast(requests[:1])[0] == forecaster.forecast(requests[:1])[0]


def test_a_context_shorter_than_a_patch_is_refused(forecaster: Toto2Forecaster) -> None:
    with pytest.raises(ValueError, match=r"X/USDT: Toto 2.0 needs at least one patch .* got 5"):
        forecaster.forecast([request("X/USDT", 5, 3, 0)])


def test_levels_outside_the_knots_are_refused(forecaster: Toto2Forecaster) -> None:
    bars = request("A/USDT", 64, 3, 0).bars
    with pytest.raises(ValueError, match=r"0.1 to 0.9; \[0.05\] lie outside"):
        forecaster.forecast([ForecastRequest("A/USDT", bars, 3, (0.05, 0.5))])


def test_settings_it_cannot_run_are_refused(forecaster: Toto2Forecaster, tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match="decode_block = 12 is not a multiple of the model's patch"
    ):
        Toto2Forecaster(forecaster.model, decode_block=12)
    with pytest.raises(ValueError, match="bfloat16 runs on GPUs only"):
        Toto2Forecaster(forecaster.model, precision="bfloat16")
