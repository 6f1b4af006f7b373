"""The Kronos forecaster: bars in, quantile forecasts out, for batches of unequal requests."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
import torch

from tests.recorded import VIX_1D_NO_VOLUME
from tests.unit.forecast.kronos import builders
from trader.domain import Bar
from trader.forecast.kronos import inputs, predictor
from trader.forecast.kronos.sampling import Sampling
from trader.forecast.protocol import ForecastRequest
from trader.market.hygiene import parse_rows
from trader.market.replay import read_recording

LEVELS = (0.1, 0.5, 0.9)


def request(n: int, horizon: int = 4, *, symbol: str = "SOL/USDT", seed: int = 0, **kw):
    return ForecastRequest(
        symbol, builders.bars(n, symbol=symbol, seed=seed, **kw), horizon, LEVELS
    )


def test_sample_paths_come_out_as_quantiles_and_means():
    forecaster = builders.forecaster(sample_count=32, sampling=Sampling(temperature=1.0))
    req = request(40, horizon=5)
    [paths] = forecaster.paths([req])
    [forecast] = forecaster.forecast([req])
    assert paths.shape == (32, 5, 6)
    assert forecast.model == "kronos"
    assert forecast.symbol == "SOL/USDT"
    assert forecast.as_of == req.bars[-1].end
    assert forecast.timeframe == req.bars[-1].timeframe
    assert forecast.steps == 5
    assert set(forecast.quantiles) == {"open", "high", "low", "close", "volume"}
    assert forecast.levels == LEVELS
    close = paths[..., 3].double()
    assert forecast.mean["close"] == pytest.approx(close.mean(0).tolist(), rel=1e-12)
    for level in LEVELS:
        expected = torch.quantile(close, level, dim=0).tolist()
        assert list(forecast.quantiles["close"][level]) == pytest.approx(expected, rel=1e-12)
    # The paths differ, so the band has width: not only the mean of the paths comes out.
    low, high = forecast.quantiles["close"][0.1], forecast.quantiles["close"][0.9]
    assert all(hi > lo for lo, hi in zip(low, high, strict=True))


def test_greedy_paths_are_all_the_same_path():
    forecaster = builders.forecaster(sample_count=4)
    [paths] = forecaster.paths([request(30)])
    assert all(torch.equal(paths[0], p) for p in paths[1:])


def test_a_batch_of_unequal_requests_gives_what_each_gives_alone():
    forecaster = builders.forecaster(max_context=48, sample_count=2)
    batch = [
        request(30, 6, symbol="A/USDT", seed=1),
        request(70, 3, symbol="B/USDT", seed=2),  # more bars than max_context: the last 48
        request(30, 6, symbol="C/USDT", seed=3),
        request(45, 8, symbol="D/USDT", seed=4),  # slides past max_context
    ]
    together = forecaster.paths(batch)
    for req, paths in zip(batch, together, strict=True):
        [alone] = forecaster.paths([req])
        assert paths.shape == (2, req.horizon, 6)
        torch.testing.assert_close(paths, alone, rtol=1e-5, atol=1e-4)
    forecasts = forecaster.forecast(batch)
    assert [(f.symbol, f.steps) for f in forecasts] == [(r.symbol, r.horizon) for r in batch]


def test_a_batch_too_large_for_the_cache_budget_runs_in_chunks(monkeypatch):
    forecaster = builders.forecaster(max_context=48, sample_count=2)
    batch = [request(30 + i, 3, symbol=f"S{i}/USDT", seed=i) for i in range(4)]
    whole = forecaster.paths(batch)
    chunks = []
    original = forecaster._paths

    def spy(requests):
        chunks.append([r.symbol for r in requests])
        return original(requests)

    monkeypatch.setattr(predictor, "CACHE_BUDGET_BYTES", 1)
    monkeypatch.setattr(forecaster, "_paths", spy)
    chunked = forecaster.paths(batch)
    assert chunks == [[r.symbol] for r in batch]
    for a, b in zip(whole, chunked, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-4)


def test_only_the_last_max_context_bars_are_read():
    forecaster = builders.forecaster(max_context=32, sample_count=3, sampling=Sampling())
    long = request(50)
    short = ForecastRequest(long.symbol, long.bars[-32:], long.horizon, long.quantiles)
    torch.testing.assert_close(forecaster.paths([long]), forecaster.paths([short]))


def test_a_rerun_gives_the_same_paths_and_another_seed_others():
    sampling = Sampling(temperature=1.0)
    req = [request(30)]
    first = builders.forecaster(sample_count=8, sampling=sampling).paths(req)[0]
    again = builders.forecaster(sample_count=8, sampling=sampling).paths(req)[0]
    other = builders.forecaster(sample_count=8, sampling=sampling, seed=1).paths(req)[0]
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


def test_an_empty_batch_forecasts_nothing():
    assert builders.forecaster().forecast([]) == []


@pytest.mark.parametrize(
    ("req", "message"),
    [
        (request(1), "at least 2 bars"),
        (request(30, horizon=65), "horizon 65 is outside 1..64"),
        (request(30, horizon=0), "horizon 0 is outside"),
    ],
)
def test_requests_it_cannot_serve_are_refused(req, message):
    with pytest.raises(ValueError, match=message):
        builders.forecaster(max_context=64).forecast([req])


def test_bars_out_of_order_or_of_another_symbol_are_refused():
    bars = builders.bars(10)
    swapped = [*bars[:4], bars[5], bars[4], *bars[6:]]
    with pytest.raises(ValueError, match="not one timeframe in time order"):
        builders.forecaster().forecast([ForecastRequest("SOL/USDT", swapped, 2, LEVELS)])
    other = [*bars[:-1], replace(bars[-1], symbol="BTC/USDT")]
    with pytest.raises(ValueError, match="bars of another symbol"):
        builders.forecaster().forecast([ForecastRequest("SOL/USDT", other, 2, LEVELS)])


def test_normalisation_is_a_clipped_population_z_score():
    values = np.asfortranarray(
        np.array([[1, 2, 3, 4, 5, 100]] * 40 + [[2, 3, 4, 5, 500, 100]], dtype=np.float32)
    )
    normed, mean, std = inputs.normalise(values)
    assert normed.dtype == np.float32
    assert mean[0] == pytest.approx(41 / 41 + 1 / 41)
    assert std[0] == pytest.approx(np.sqrt(40) / 41)  # ddof 0
    assert normed[-1, 4] == 5.0  # an outlier 6.3 std out is clipped
    assert np.all(normed[:, 5] == 0)  # a constant column: (x - mean) / (0 + 1e-5)
    back = inputs.denormalise(torch.from_numpy(normed[:-1]), mean, std).numpy()
    np.testing.assert_allclose(back, values[:-1], rtol=1e-5)


def test_a_missing_quote_volume_is_volume_times_the_mean_price():
    bars = builders.bars(3, quote=False)
    values = inputs.bar_values(bars)
    for bar, row in zip(bars, values, strict=True):
        mean_price = (bar.open + bar.high + bar.low + bar.close) / 4
        assert row[5] == np.float32(bar.volume * mean_price)
    with_quote = inputs.bar_values(builders.bars(3))
    assert [row[5] for row in with_quote] == [np.float32(b.quote_volume) for b in builders.bars(3)]


def test_time_features_are_those_of_the_bar_open_times_and_the_bars_to_come():
    start = datetime(2024, 2, 29, 23, 0, tzinfo=UTC)  # a Thursday
    bars = builders.bars(2, start=start)
    window = inputs.window(bars, horizon=2)
    assert window.stamps.tolist() == [[0, 23, 3, 29, 2], [0, 0, 4, 1, 3]]
    assert window.future.tolist() == [[0, 1, 4, 1, 3], [0, 2, 4, 1, 3]]
    assert bars[-1].start + timedelta(hours=1) == datetime(2024, 3, 1, 1, tzinfo=UTC)


def test_a_file_without_volume_gives_kronos_volume_and_amount_0_as_its_reference_fills_them():
    # The reference predictor (shiyu-coder/Kronos, model/kronos.py, KronosPredictor.predict)
    # fills a frame without a volume column with volume 0.0 and amount 0.0. The VIX index
    # (tests/data, vega-datasets) has no volume: its bars reach Kronos the same way.
    vix = read_recording(VIX_1D_NO_VOLUME, "VIX/USD")
    bars = [b for b in parse_rows(vix.rows, vix.symbol, vix.timeframe) if isinstance(b, Bar)]
    values = inputs.bar_values(bars)
    assert len(values) == 44
    assert not values[:, 4:].any()
    assert values[:, 3].tolist() == [np.float32(b.close) for b in bars]
