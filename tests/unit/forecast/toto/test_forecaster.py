"""The Toto forecaster's contract: grouping, horizons, quantiles, determinism, chunked decoding.
Agreement with the reference is in tests/integration/test_toto_conformance.py."""

from __future__ import annotations

import pytest
import torch

from tests.unit.forecast.toto.builders import LEVELS, request, write_checkpoint
from trader.forecast.toto import TotoForecaster, load_toto


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_checkpoint(tmp_path_factory.mktemp("toto"))


@pytest.fixture(scope="module")
def forecaster(checkpoint) -> TotoForecaster:
    return TotoForecaster(load_toto(checkpoint), num_samples=64, seed=3)


def test_a_batch_of_unequal_contexts_and_horizons_comes_back_in_order(forecaster):
    requests = [
        request("AAA/USDT", 40, 3),
        request("BBB/USDT", 19, 12),  # a context that is not whole patches: left padding
        request("CCC/USDT", 40, 7, seed=1),
        request("DDD/USDT", 1, 1),  # a single bar still forecasts
    ]
    forecasts = forecaster.forecast(requests)
    assert [f.symbol for f in forecasts] == [r.symbol for r in requests]
    assert [f.steps for f in forecasts] == [3, 12, 7, 1]
    for forecast, r in zip(forecasts, requests, strict=True):
        assert forecast.model == "toto"
        assert forecast.as_of == r.bars[-1].end
        assert set(forecast.quantiles) == {"close", "high", "low"}
        for field in forecast.quantiles:
            assert tuple(forecast.quantiles[field]) == LEVELS
            assert len(forecast.mean[field]) == forecast.steps
            low, high = forecast.quantiles[field][0.1], forecast.quantiles[field][0.9]
            assert all(lo <= hi for lo, hi in zip(low, high, strict=True))
        # Forecasts live near the series they continue (the scaler undoes itself).
        last = r.bars[-1].close
        assert abs(forecast.quantiles["close"][0.5][0] - last) < 0.5 * last


def test_a_tick_forecast_again_is_the_same_and_another_seed_differs(checkpoint, forecaster):
    requests = [request("AAA/USDT", 40, 10), request("BBB/USDT", 40, 10, seed=1)]
    first, again = forecaster.forecast(requests), forecaster.forecast(requests)
    other = TotoForecaster(load_toto(checkpoint), num_samples=64, seed=4).forecast(requests)
    assert [f.quantiles for f in first] == [f.quantiles for f in again]
    assert first[0].quantiles != other[0].quantiles


def test_sample_paths_share_the_context_and_diverge_after_it(forecaster):
    x = 100 + torch.randn(2, 3, 24).cumsum(-1)
    valid = torch.ones_like(x, dtype=torch.bool)
    with torch.inference_mode():
        paths = forecaster.sample_paths(x, valid, 20, 32, torch.Generator().manual_seed(0))
    assert paths.shape == (2, 32, 3, 20)
    assert torch.isfinite(paths).all()
    assert paths.std(dim=1).min() > 0  # the samples differ at every step


def test_samples_are_decoded_in_chunks_with_the_same_draws(checkpoint, monkeypatch):
    import trader.forecast.toto.forecaster as module  # noqa: PLC0415

    model = load_toto(checkpoint)
    x = 100 + torch.randn(1, 3, 16).cumsum(-1)
    valid = torch.ones_like(x, dtype=torch.bool)

    def paths() -> torch.Tensor:
        with torch.inference_mode():
            return TotoForecaster(model).sample_paths(
                x, valid, 24, 8, torch.Generator().manual_seed(5)
            )

    whole = paths()
    monkeypatch.setattr(module, "DECODE_BUDGET_BYTES", 1)  # one sample path per chunk
    chunked = paths()
    assert whole.shape == chunked.shape
    # Same first patch (drawn before the fan-out); later draws come in another order.
    torch.testing.assert_close(whole[..., :8], chunked[..., :8])
    assert torch.isfinite(chunked).all()


def test_half_precision_is_refused_on_the_cpu(checkpoint):
    with pytest.raises(ValueError, match="GPUs only"):
        TotoForecaster(load_toto(checkpoint), precision="bfloat16")
