"""A backtest's forecasts: computed ahead in batches of windows, cached on disk, and served to
the engine by `CachedForecaster`, a forecaster like any other.

Each window is forecast from its own bars only (see `windows`): computing them ahead changes
what the engine is told at no tick. The engine's requests are looked up by symbol, close time
and extent; one that is not there (the engine saw other bars than the recording holds) is
forecast by the model itself at that tick, and counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from trader.backtest.cache import ForecastCache, describe_model, entry_key, model_key
from trader.backtest.windows import SymbolWindows, Window, epoch_ms
from trader.domain import Bar, Forecast, to_epoch_ms
from trader.forecast.baseline import BaselineForecaster
from trader.forecast.protocol import CompileStats, Forecaster, ForecastRequest
from trader.ledger.forecast_rows import read_forecast
from trader.logging import get_logger


@dataclass
class CacheUse:
    """How a model's forecasts for a backtest were had."""

    model: str
    windows: int = 0  # the backtest's
    computed: int = 0  # forecast now, in batches
    reused: int = 0  # found in the cache
    placeholders: int = 0  # flat windows holding empty batch slots
    batches: int = 0
    live: int = 0  # forecast by the model during the run (cache misses)
    description: dict[str, Any] = field(default_factory=dict)


class CachedForecaster:
    """Serves the forecasts computed ahead; asks `model` for any it does not have."""

    def __init__(
        self,
        model: Forecaster,
        windows: Mapping[str, SymbolWindows],
        cache: ForecastCache,
        key: bytes,
        use: CacheUse,
    ) -> None:
        self.name = model.name
        self.model = model
        self.windows = windows
        self.cache = cache
        self.key = key
        self.use = use
        self._log = get_logger("trader.backtest")
        self._rows: dict[tuple[str, int], tuple[object, ...]] = {}  # by symbol and close
        # Each row read back once: every strategy's run, and the report's quality section,
        # are served the same (immutable) forecast.
        self._read_back: dict[tuple[str, int], Forecast] = {}

    def load(
        self, ends: Mapping[str, Sequence[int]], read: Mapping[bytes, tuple[object, ...]]
    ) -> None:
        """Read the cached forecasts of the windows closing at `ends` (per symbol, epoch ms)
        into memory at once: the run then never waits on the cache's file. `read`: rows
        already read from the cache, by entry key (not read again)."""
        for symbol, closes in ends.items():
            by_end = self.windows[symbol].by_end
            keys = {
                entry_key(self.key, window.key): (symbol, end)
                for end in closes
                if (window := by_end.get(end)) is not None
            }
            rows = {key: read[key] for key in keys if key in read}
            rows.update(self.cache.rows(key for key in keys if key not in rows))
            for key, row in rows.items():
                self._rows[keys[key]] = row

    def read_all(self, ends: Mapping[str, Sequence[int]]) -> None:
        """Read back now the forecasts of the windows closing at `ends` (per symbol, epoch
        ms), each once: every run served by this forecaster, in this process or in one forked
        from it, then finds them in memory."""
        for symbol, closes in ends.items():
            for end in closes:
                self.cached(symbol, end)

    def naive_references(self, forecasts: Sequence[Forecast], window: int) -> list[Forecast]:
        """The naive reference from each forecast's origin: the baseline forecaster's code with
        lookback `window`, on the window the forecast was made from (a baseline at that
        lookback is its own reference), computed ahead and cached like any model's forecasts:
        a rerun, or a baseline run at that lookback, finds them there."""
        if isinstance(self.model, BaselineForecaster) and self.model.lookback == window:
            return list(forecasts)
        origins: dict[str, list[int]] = {}
        for f in forecasts:
            origins.setdefault(f.symbol, []).append(to_epoch_ms(f.as_of))
        made = self.use.description
        naive = forecast_ahead(
            BaselineForecaster(window), self.windows, origins, self.cache,
            horizon=made["horizon"], quantiles=made["quantiles"], context=made["context"],
            batch=made["batch"], progress=False,
        )  # fmt: skip
        found = [naive.cached(f.symbol, to_epoch_ms(f.as_of)) for f in forecasts]
        return [f for f in found if f is not None]

    @property
    def mode(self) -> str:
        return self.model.mode

    @property
    def compile_stats(self) -> CompileStats:
        return self.model.compile_stats

    def _window(self, symbol: str, first: Bar, last: Bar, length: int) -> Window | None:
        """The cached window of `symbol` whose bars are the engine's (`length` bars, from
        `first` to `last`), if there is one."""
        windows = self.windows.get(symbol)
        if windows is None or length != windows.context:
            return None
        window = windows.by_end.get(epoch_ms(last))
        if window is None or not _same(windows.bars[window.first], first):
            return None
        return window if _same(windows.bars[window.last], last) else None

    def served(
        self, symbol: str, first: Bar, last: Bar, length: int, horizon: int
    ) -> Forecast | None:
        """The cached forecast of the engine's window of `length` bars from `first` to `last`,
        for `horizon` steps (None: `forecast` asks the model)."""
        window = self._window(symbol, first, last, length)
        found = self._read(window) if window is not None else None
        return found if found is not None and found.steps == horizon else None

    def cached(self, symbol: str, end_ms: int) -> Forecast | None:
        """The cached forecast for the window closing at `end_ms`, if there is one."""
        windows = self.windows.get(symbol)
        window = windows.by_end.get(end_ms) if windows is not None else None
        return self._read(window) if window is not None else None

    def _read(self, window: Window) -> Forecast | None:
        """The cached forecast: checked when it was made, and stored exactly."""
        where = (window.symbol, window.end_ms)
        forecast = self._read_back.get(where)
        if forecast is not None:
            return forecast
        timeframe = self.windows[window.symbol].timeframe
        row = self._rows.pop(where, None)
        if row is None:
            return self.cache.get(entry_key(self.key, window.key), timeframe)
        forecast = self._read_back[where] = read_forecast(row, timeframe, check=False)
        return forecast

    def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        out: list[Forecast | None] = []
        missed: list[int] = []
        for i, request in enumerate(requests):
            bars, horizon = request.bars, request.horizon
            found = (
                self.served(request.symbol, bars[0], bars[-1], len(bars), horizon) if bars else None
            )
            if found is None:
                missed.append(i)
            out.append(found)
        if missed:
            self.use.live += len(missed)
            self._log.warning(
                "forecast not cached: the model runs now",
                model=self.name,
                symbols=[requests[i].symbol for i in missed],
            )
            for i, forecast in zip(
                missed, self.model.forecast([requests[i] for i in missed]), strict=True
            ):
                out[i] = forecast
        return [f for f in out if f is not None]


def _same(a: Bar, b: Bar) -> bool:
    return a is b or a == b  # the same parse of the same row, most often


def forecast_ahead(
    model: Forecaster,
    windows: Mapping[str, SymbolWindows],
    ticks: Mapping[str, Sequence[int]],
    cache: ForecastCache,
    *,
    horizon: int,
    quantiles: Sequence[float],
    context: int,
    batch: int,
    progress: bool | None = None,
) -> CachedForecaster:
    """Forecast every window closing at `ticks` (per symbol, epoch ms) that the cache lacks,
    `batch` slots per model call; the forecaster that serves them to the engine."""
    description = describe_model(
        model, horizon=horizon, quantiles=quantiles, context=context, batch=batch
    )
    key = model_key(description)
    cache.remember_model(key, description)
    use = CacheUse(model.name, description=description)
    todo: list[tuple[SymbolWindows, list[int]]] = []
    read: dict[bytes, tuple[object, ...]] = {}  # what the cache holds: read once, here
    for symbol, ends in ticks.items():
        symbol_windows = windows[symbol]
        present = [symbol_windows.by_end[e] for e in ends if e in symbol_windows.by_end]
        use.windows += len(present)
        keys = [entry_key(key, w.key) for w in present]
        read.update(cache.rows(keys))
        missing = [w.end_ms for w, k in zip(present, keys, strict=True) if k not in read]
        use.reused += len(present) - len(missing)
        todo += [(symbol_windows, slots) for slots in symbol_windows.batches(missing, batch)]
    bar = tqdm(
        total=len(todo) * batch, unit="window", desc=f"forecasting ({model.name})",
        disable=None if progress is None else not progress, leave=False,
    )  # fmt: skip
    with bar:
        for symbol_windows, slots in todo:
            requests, real = _batch(symbol_windows, slots, horizon, quantiles)
            forecasts = model.forecast(requests)
            if len(forecasts) != len(requests):
                raise ValueError(f"{model.name} returned {len(forecasts)} of {len(requests)}")
            cache.put((entry_key(key, window.key), forecasts[i]) for i, window in real.items())
            use.batches += 1
            use.computed += len(real)
            use.placeholders += len(requests) - len(real)
            bar.update(len(requests))
    get_logger("trader.backtest").info(
        "forecasts ready", model=model.name, windows=use.windows, computed=use.computed,
        reused=use.reused, placeholders=use.placeholders, batches=use.batches,
    )  # fmt: skip
    served = CachedForecaster(model, windows, cache, key, use)
    served.load(ticks, read)
    return served


def _batch(
    windows: SymbolWindows, slots: Sequence[int], horizon: int, quantiles: Sequence[float]
) -> tuple[list[ForecastRequest], dict[int, Window]]:
    """The requests of one batch, in slot order, and which of them are real windows."""
    requests = []
    real: dict[int, Window] = {}
    for i, end in enumerate(slots):
        window = windows.by_end.get(end)
        if window is not None:
            real[i] = window
            requests.append(windows.request(window, horizon, quantiles))
        else:
            requests.append(windows.placeholder(end, horizon, quantiles))
    return requests, real
