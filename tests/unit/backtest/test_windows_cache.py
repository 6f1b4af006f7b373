"""Windows, batches fixed by the clock, and the forecast cache."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import torch

from trader.backtest.cache import ForecastCache, describe_model, entry_key, model_key
from trader.backtest.forecasts import forecast_ahead
from trader.backtest.windows import SymbolWindows
from trader.domain import Timeframe
from trader.forecast.baseline import BaselineForecaster
from trader.market.replay import Recording

HOUR_MS = 3_600_000
T0 = 1_700_000_000_000 - 1_700_000_000_000 % HOUR_MS
LEVELS = [0.1, 0.5, 0.9]


def recording(n: int, bad: set[int] = frozenset(), missing: set[int] = frozenset()) -> Recording:
    rows = []
    for i in range(n):
        if i in missing:
            continue
        close = 100 + 10 * math.sin(i / 5) + i * 0.1
        high = close * 1.01 if i not in bad else close * 0.5  # high below close: invalid
        rows.append((T0 + i * HOUR_MS, close, high, close * 0.99, close, 10.0, 1000.0))
    return Recording("SOL/USDT", Timeframe("1h"), rows, Path("SOLUSDT_1h.csv"))


def end_of(row: int) -> int:
    return T0 + (row + 1) * HOUR_MS


def test_a_window_is_the_context_of_valid_consecutive_bars_ending_at_the_tick():
    windows = SymbolWindows(recording(40, bad={20}, missing={30}), 8, allow_gaps=False)
    ends = sorted(windows.by_end)
    assert ends[0] == end_of(7)  # the first full window
    # A bad bar ends every window through it; so does a gap.
    assert end_of(20) not in windows.by_end
    assert end_of(27) not in windows.by_end
    assert end_of(28) in windows.by_end
    assert end_of(31) not in windows.by_end
    assert end_of(38) in windows.by_end
    window = windows.by_end[end_of(28)]
    bars = windows.bars_of(window)
    assert len(bars) == 8
    assert bars[0].start.timestamp() * 1000 == T0 + 21 * HOUR_MS
    # With gaps allowed, a missing bar does not end a window.
    gapped = SymbolWindows(recording(40, missing={30}), 8, allow_gaps=True)
    assert end_of(31) in gapped.by_end


def test_a_windows_key_changes_with_its_bars_and_only_with_them():
    base = SymbolWindows(recording(40), 8, allow_gaps=False)
    rows = list(recording(40).rows)
    start, _open, high, low, close, volume, quote = rows[30]
    rows[30] = (start, _open, high, low, close, volume + 1, quote)
    changed = SymbolWindows(
        Recording("SOL/USDT", Timeframe("1h"), rows, Path("x.csv")), 8, allow_gaps=False
    )
    for end, window in base.by_end.items():
        touches = window.first <= 30 <= window.last
        assert (changed.by_end[end].key != window.key) is touches


def test_batches_are_slots_of_the_clock_whatever_the_data_holds():
    windows = SymbolWindows(recording(100), 8, allow_gaps=False)
    sparse = SymbolWindows(recording(100, bad={50}, missing={70}), 8, allow_gaps=False)
    slots = windows.batch_slots(end_of(40), 16)
    assert len(slots) == 16
    assert end_of(40) in slots
    assert all(b - a == HOUR_MS for a, b in itertools.pairwise(slots))
    assert slots[0] // HOUR_MS % 16 == 0  # aligned to the clock, not to the data
    for end in slots:
        assert windows.batch_slots(end, 16) == slots == sparse.batch_slots(end, 16)
    batches = list(windows.batches([end_of(40), end_of(41), end_of(90)], 16))
    assert end_of(90) not in slots
    assert len(batches) == 2  # 40 and 41 share one


def test_a_placeholder_holds_a_slot_with_the_slots_symbol_and_time():
    windows = SymbolWindows(recording(20), 8, allow_gaps=False)
    request = windows.placeholder(end_of(30), 2, LEVELS)
    assert len(request.bars) == 8
    assert request.symbol == "SOL/USDT"
    assert request.bars[-1].end.timestamp() * 1000 == end_of(30)


def test_the_model_key_covers_weights_and_parameters():
    layer = torch.nn.Linear(2, 2)

    class Model:
        name = "toy"

        def __init__(self, net: torch.nn.Module, samples: int) -> None:
            self.net, self.samples = net, samples

    def key(model: Model, horizon: int = 1) -> bytes:
        return model_key(
            describe_model(model, horizon=horizon, quantiles=LEVELS, context=8, batch=4)  # type: ignore[arg-type]
        )

    same = Model(layer, 8)
    assert key(same) == key(Model(layer, 8))
    assert key(same) != key(Model(layer, 16))
    assert key(same) != key(same, horizon=2)
    other = torch.nn.Linear(2, 2)
    other.load_state_dict(layer.state_dict())
    assert key(Model(other, 8)) == key(same)
    with torch.no_grad():
        other.weight[0, 0] += 1e-6
    assert key(Model(other, 8)) != key(same)


def test_cached_forecasts_come_back_exactly_and_are_not_recomputed(tmp_path):
    windows = {"SOL/USDT": SymbolWindows(recording(80), 16, allow_gaps=False)}
    ends = {"SOL/USDT": sorted(windows["SOL/USDT"].by_end)[:30]}
    model = BaselineForecaster(8)

    def ahead(cache: ForecastCache):
        return forecast_ahead(
            model, windows, ends, cache, horizon=2, quantiles=LEVELS, context=16, batch=8,
            progress=False,
        )  # fmt: skip

    cache = ForecastCache(tmp_path)
    first = ahead(cache)
    assert (first.use.windows, first.use.reused) == (30, 0)
    # Whole batches: the 30 and their neighbours in the same slots, placeholders for the rest.
    assert first.use.computed >= 30
    assert first.use.computed + first.use.placeholders == first.use.batches * 8
    again = ahead(ForecastCache(tmp_path))
    assert (again.use.computed, again.use.reused, again.use.batches) == (0, 30, 0)
    for end in ends["SOL/USDT"]:
        request = windows["SOL/USDT"].request(windows["SOL/USDT"].by_end[end], 2, LEVELS)
        (served,) = again.forecast([request])
        assert served == model.forecast([request])[0]
    assert again.use.live == 0


def test_a_request_the_cache_lacks_is_forecast_now_and_counted(tmp_path):
    windows = {"SOL/USDT": SymbolWindows(recording(60), 16, allow_gaps=False)}
    model = BaselineForecaster(8)
    served = forecast_ahead(
        model, windows, {"SOL/USDT": []}, ForecastCache(tmp_path), horizon=1, quantiles=LEVELS,
        context=16, batch=8, progress=False,
    )  # fmt: skip
    symbol_windows = windows["SOL/USDT"]
    request = symbol_windows.request(symbol_windows.by_end[end_of(40)], 1, LEVELS)
    assert served.forecast([request]) == model.forecast([request])
    assert served.use.live == 1


def test_entries_differ_by_model_and_window():
    assert entry_key(b"a" * 16, b"w" * 16) != entry_key(b"b" * 16, b"w" * 16)
    assert entry_key(b"a" * 16, b"w" * 16) != entry_key(b"a" * 16, b"v" * 16)


@pytest.mark.parametrize("levels", [[0.1, 0.5, 0.9], [0.2, 0.5, 0.8]])
def test_the_cache_stores_forecasts_as_exact_floats(tmp_path, levels):
    windows = SymbolWindows(recording(40), 16, allow_gaps=False)
    window = windows.by_end[end_of(30)]
    (forecast,) = BaselineForecaster(8).forecast([windows.request(window, 3, levels)])
    cache = ForecastCache(tmp_path)
    cache.put([(b"k" * 16, forecast)])
    assert cache.get(b"k" * 16, Timeframe("1h")) == forecast
    assert cache.get(b"x" * 16, Timeframe("1h")) is None
