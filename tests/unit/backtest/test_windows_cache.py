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
from trader.market.calendars.calendar import TradingCalendar
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


CONTINUOUS = TradingCalendar.always_open()


def windows_of(rec: Recording, context: int = 8, min_contiguous: int | None = 8) -> SymbolWindows:
    return SymbolWindows(rec, context, calendar=CONTINUOUS, min_contiguous=min_contiguous)


def test_a_window_is_the_context_of_valid_bars_ending_at_a_tick_the_engine_trades():
    windows = windows_of(recording(40, bad={20}, missing={30}), min_contiguous=4)
    ends = sorted(windows.by_end)
    assert ends[0] == end_of(7)  # the first full window
    # A bad bar and a missing one are holes; the engine trades again 4 bars after each.
    assert end_of(20) not in windows.by_end
    assert [end_of(r) in windows.by_end for r in range(21, 26)] == [False] * 3 + [True] * 2
    assert [end_of(r) in windows.by_end for r in range(31, 36)] == [False] * 3 + [True] * 2
    window = windows.by_end[end_of(24)]
    bars = windows.bars_of(window)
    assert len(bars) == 8
    # The hole is closed up: rows 16..24 without row 20.
    assert [int(b.start.timestamp() * 1000) for b in bars] == [
        T0 + r * HOUR_MS for r in (16, 17, 18, 19, 21, 22, 23, 24)
    ]
    # Bridging holes, the engine trades at once after them.
    bridged = windows_of(recording(40, missing={30}), min_contiguous=None)
    assert end_of(31) in bridged.by_end


def test_a_windows_key_changes_with_its_bars_and_only_with_them():
    base = windows_of(recording(40))
    rows = list(recording(40).rows)
    start, _open, high, low, close, volume, quote = rows[30]
    rows[30] = (start, _open, high, low, close, volume + 1, quote)
    changed = windows_of(Recording("SOL/USDT", Timeframe("1h"), rows, Path("x.csv")))
    for end, window in base.by_end.items():
        touches = window.first <= 30 <= window.last
        assert (changed.by_end[end].key != window.key) is touches


def test_a_windows_key_is_the_same_in_any_recording_that_holds_its_bars():
    rows = recording(3000).rows  # thousands of windows: their keys are hashed by threads
    long = windows_of(Recording("SOL/USDT", Timeframe("1h"), rows, Path("a.csv")))
    short = windows_of(Recording("SOL/USDT", Timeframe("1h"), rows[2900:], Path("b.csv")))
    assert len(long.by_end) > 1000 > len(short.by_end) > 0
    for end, window in short.by_end.items():
        assert long.by_end[end].key == window.key
    assert len({window.key for window in long.by_end.values()}) == len(long.by_end)


def test_batches_are_slots_of_the_clock_whatever_the_data_holds():
    windows = windows_of(recording(100), 8)
    sparse = windows_of(recording(100, bad={50}, missing={70}), 8)
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
    windows = windows_of(recording(20), 8)
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
    windows = {"SOL/USDT": windows_of(recording(80), 16)}
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
    windows = {"SOL/USDT": windows_of(recording(60), 16)}
    model = BaselineForecaster(8)
    served = forecast_ahead(
        model, windows, {"SOL/USDT": []}, ForecastCache(tmp_path), horizon=1, quantiles=LEVELS,
        context=16, batch=8, progress=False,
    )  # fmt: skip
    symbol_windows = windows["SOL/USDT"]
    request = symbol_windows.request(symbol_windows.by_end[end_of(40)], 1, LEVELS)
    assert served.forecast([request]) == model.forecast([request])
    assert served.use.live == 1


def test_served_is_what_forecast_answers_from_the_cache_and_none_where_the_model_would_run(
    tmp_path,
):
    windows = {"SOL/USDT": windows_of(recording(60, missing={40}), 16)}
    symbol_windows = windows["SOL/USDT"]
    ends = sorted(symbol_windows.by_end)
    model = BaselineForecaster(8)
    cached = forecast_ahead(
        model, windows, {"SOL/USDT": ends[:8]}, ForecastCache(tmp_path), horizon=2,
        quantiles=LEVELS, context=16, batch=8, progress=False,
    )  # fmt: skip
    for end in ends[:8]:
        bars = symbol_windows.bars_of(symbol_windows.by_end[end])
        request = symbol_windows.request(symbol_windows.by_end[end], 2, LEVELS)
        (want,) = cached.forecast([request])
        assert cached.served("SOL/USDT", bars[0], bars[-1], len(bars), 2) is want
        # Another horizon, length or first bar (the engine's window is not the cached one).
        assert cached.served("SOL/USDT", bars[0], bars[-1], len(bars), 3) is None
        assert cached.served("SOL/USDT", bars[0], bars[-1], len(bars) - 1, 2) is None
        assert cached.served("SOL/USDT", bars[1], bars[-1], len(bars), 2) is None
        assert cached.served("ETH/USDT", bars[0], bars[-1], len(bars), 2) is None
    assert cached.use.live == 0
    # A window the cache lacks (not in the batches forecast ahead): the model would run.
    last = symbol_windows.bars_of(symbol_windows.by_end[ends[-1]])
    assert cached.served("SOL/USDT", last[0], last[-1], len(last), 2) is None


def test_entries_differ_by_model_and_window():
    assert entry_key(b"a" * 16, b"w" * 16) != entry_key(b"b" * 16, b"w" * 16)
    assert entry_key(b"a" * 16, b"w" * 16) != entry_key(b"a" * 16, b"v" * 16)


@pytest.mark.parametrize("levels", [[0.1, 0.5, 0.9], [0.2, 0.5, 0.8]])
def test_the_cache_stores_forecasts_as_exact_floats(tmp_path, levels):
    windows = windows_of(recording(40), 16)
    window = windows.by_end[end_of(30)]
    (forecast,) = BaselineForecaster(8).forecast([windows.request(window, 3, levels)])
    cache = ForecastCache(tmp_path)
    cache.put([(b"k" * 16, forecast)])
    assert cache.get(b"k" * 16, Timeframe("1h")) == forecast
    assert cache.get(b"x" * 16, Timeframe("1h")) is None
