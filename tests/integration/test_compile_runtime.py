"""Compiled Kronos as the daemon would run it, counted by torch's own reports: it recompiles
as its KV cache grows, so the guard turns it back to eager and it keeps giving eager's
forecasts (which is why the daemon refuses compiled Kronos). Compiled Toto's zero recompiles
after warm-up are proven in test_toto_conformance.py."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import torch

from trader.config.forecast_settings import KronosSettings
from trader.domain import Timeframe
from trader.forecast.kronos import KronosForecaster
from trader.forecast.kronos.loading import load_model, load_tokenizer
from trader.forecast.kronos.sampling import Sampling
from trader.forecast.protocol import ForecastRequest
from trader.forecast.random_weights import random_walk_bars, write_random
from trader.forecast.runtime import ModelRuntime

pytestmark = pytest.mark.integration

LEVELS = (0.1, 0.5, 0.9)
HOUR = Timeframe("1h")
END = datetime(2025, 3, 1, tzinfo=UTC)
SYMBOLS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
# (symbols, context bars, horizon) per tick, the first being the warm-up.
TICKS = [(1, 60, 4), (1, 50, 4), (2, 64, 6), (1, 40, 3), (2, 64, 8)]


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def tick(index: int, symbols: int, context: int, horizon: int) -> list[ForecastRequest]:
    out = []
    for s in range(symbols):
        bars = random_walk_bars(SYMBOLS[s], 200, timeframe=HOUR, end=END, seed=s)
        window = bars[: len(bars) - len(TICKS) + index][-context:]
        out.append(ForecastRequest(SYMBOLS[s], window, horizon, LEVELS))
    return out


def quantiles(forecasts) -> list[float]:
    return [v for f in forecasts for t in f.quantiles.values() for q in t.values() for v in q]


def test_compiled_kronos_recompiles_so_the_guard_turns_it_to_eager_and_it_keeps_serving(tmp_path):
    random = write_random("kronos", tmp_path / "kronos", size="small")
    assert random.tokenizer is not None
    settings = KronosSettings(sample_count=4, max_context=64)

    def forecaster(runtime: ModelRuntime) -> KronosForecaster:
        return KronosForecaster(
            load_model(random.directory),
            load_tokenizer(random.tokenizer),
            max_context=settings.max_context,
            sample_count=settings.sample_count,
            sampling=Sampling(settings.temperature, settings.top_k, settings.top_p),
            seed=0,
            device=torch.device("cpu"),
            runtime=runtime,
        )

    # Dynamo decides recompiles whatever the backend; `eager` spares inductor's code generation.
    guarded = ModelRuntime(
        "kronos",
        compiled=True,
        compiler=lambda fn: torch.compile(fn, backend="eager", dynamic=True),
        max_recompiles=1,
    )
    compiled = forecaster(guarded)
    eager = forecaster(ModelRuntime("kronos", compiled=False))
    for i, shape in enumerate(TICKS):
        requests = tick(i, *shape)
        assert quantiles(compiled.forecast(requests)) == pytest.approx(
            quantiles(eager.forecast(requests)), rel=1e-5
        )
    assert compiled.mode == "eager"
    stats = compiled.compile_stats
    assert stats.recompiles > 1
    assert str(stats.forced_eager).startswith(f"{stats.recompiles} recompiles after warm-up")
