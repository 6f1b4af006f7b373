"""An evaluation: every model forecasts from the same origins (through the backtest's forecast
cache, so a model's forecast of a window is computed once, ever), and `trader.skill` scores
each against what happened, beside the naive reference, with block-bootstrap intervals over
origins and Diebold-Mariano tests of each model against the naive reference and against each
other.

The naive reference is probabilistic: the random walk with the empirical quantiles of the
moves over the last `forecast.naive_window` bars, made by the baseline forecaster's own code
from the same windows (so the baseline at that lookback scores a skill of exactly 0). The
no-change point forecast stays beside it as `skill_no_change` and MASE."""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from trader.backtest.cache import ForecastCache
from trader.backtest.forecasts import CacheUse, forecast_ahead
from trader.backtest.windows import SymbolWindows
from trader.config.schema import Settings
from trader.evaluate.origins import Origins, select_origins
from trader.forecast.baseline import BaselineForecaster
from trader.forecast.protocol import Forecaster
from trader.logging import get_logger
from trader.market.replay import Recording
from trader.market.replay_calendars import replay_calendars
from trader.runner import replay_settings
from trader.skill import (
    DieboldMariano,
    Figures,
    Interval,
    Scores,
    as_returns,
    block_length,
    block_weights,
    bootstrap_intervals,
    diebold_mariano,
    forecast_table,
    overlap_lag,
    score,
)

NAIVE = "naive"
REPLICATES = 1000
CONFIDENCE = 0.9
STEP_FIGURES = ("crps", "skill", "skill_no_change", "mase", "coverage_80")  # per step, with CIs


class EvaluationError(ValueError):
    """The data and the request leave nothing to score; the message says why."""


@dataclass(frozen=True)
class Row:
    """One model on one symbol."""

    model: str
    symbol: str
    figures: Figures
    intervals: Mapping[str, Interval]
    by_step: tuple[Figures, ...]
    step_intervals: tuple[Mapping[str, Interval], ...]
    crps_by_origin: np.ndarray  # mean over the steps, per origin


@dataclass(frozen=True)
class Comparison:
    """Diebold-Mariano on the per-origin mean CRPS: `first` against `second`."""

    symbol: str
    first: str
    second: str
    test: DieboldMariano


@dataclass
class Evaluation:
    settings: Settings
    files: list[str]
    models: list[str]
    levels: tuple[float, ...]
    origins: dict[str, Origins] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    tests: list[Comparison] = field(default_factory=list)
    cache: list[CacheUse] = field(default_factory=list)
    forecast_seconds: dict[str, float] = field(default_factory=dict)
    scoring_seconds: float = 0.0
    block: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def horizon(self) -> int:
        return self.settings.forecast.horizon

    @property
    def context(self) -> int:
        return self.settings.market.context_bars

    @property
    def naive_window(self) -> int:
        return self.settings.forecast.naive_window


def evaluate(
    settings: Settings,
    recordings: Mapping[str, Recording],
    forecasters: Sequence[Forecaster],
    *,
    begin: datetime | None = None,
    end: datetime | None = None,
    count: int | None = None,
    progress: bool | None = None,
) -> Evaluation:
    """Score `forecasters` (and the naive reference) over the recordings' origins in the
    period: every origin (`count` None) or `count` evenly spaced ones."""
    settings = replay_settings(settings, recordings)
    replay = replay_calendars(settings.market, recordings)
    market, forecast = settings.market, settings.forecast
    horizon, context = forecast.horizon, market.context_bars
    contiguous = market.min_contiguous_bars if market.gap_policy == "skip" else None
    result = Evaluation(
        settings,
        [str(r.path) for r in replay.recordings.values()],
        [NAIVE, *(f.name for f in forecasters)],
        tuple(forecast.quantiles),
        notes=replay.explanations(),
    )
    windows: dict[str, SymbolWindows] = {}
    for symbol, recording in replay.recordings.items():
        calendar = replay.calendars[symbol]
        windows[symbol] = w = SymbolWindows(
            recording, context, calendar=calendar, min_contiguous=contiguous
        )
        origins = select_origins(w, calendar, horizon=horizon, begin=begin, end=end, count=count)
        _check(origins, len(w.bars), context, horizon)
        result.origins[symbol] = origins
    tables = _forecast(result, forecasters, windows, progress)
    began = time.perf_counter()
    _score(result, tables)
    result.scoring_seconds = time.perf_counter() - began
    return result


def _check(origins: Origins, bars: int, context: int, horizon: int) -> None:
    if origins.candidates == 0:
        raise EvaluationError(
            f"{origins.symbol}: the period holds no origin: no bar in it closes a full window "
            f"of {context} bars ({bars:,} valid bars in the file); widen --from/--to or "
            "lower --context"
        )
    if not origins.ends_ms:
        raise EvaluationError(
            f"{origins.symbol}: no origin in the period has its {horizon} bars of outcome in "
            f"the data ({origins.candidates:,} origins with a full window of {context} bars, "
            f"none followed by {horizon} bars without a hole): the horizon is longer than the "
            "data after the context; lower --horizon or --context, or give more data"
        )


def _forecast(
    result: Evaluation,
    forecasters: Sequence[Forecaster],
    windows: Mapping[str, SymbolWindows],
    progress: bool | None,
) -> dict[tuple[str, str], np.ndarray]:
    """[origin, step, level] forecast prices per (model, symbol), the naive reference's too."""
    settings = result.settings
    wanted = {s: o.ends_ms for s, o in result.origins.items()}
    # Batches are slots of the clock (the sampler seeds depend on them): spaced origins would
    # each fill a batch of windows nobody asked for, so they are forecast one a call.
    spaced = any(o.spacing > 1 for o in result.origins.values())
    batch = 1 if spaced else settings.backtest.batch_windows
    cache = ForecastCache(settings.backtest.cache_dir)
    tables: dict[tuple[str, str], np.ndarray] = {}
    # The naive reference is the baseline's code: at the baseline's lookback, its forecasts
    # are the baseline's own cache entries.
    naive = BaselineForecaster(result.naive_window)
    try:
        for label, model in [(NAIVE, naive), *((f.name, f) for f in forecasters)]:
            began = time.perf_counter()
            served = forecast_ahead(
                model, windows, wanted, cache, horizon=result.horizon,
                quantiles=result.levels, context=result.context,
                batch=batch, progress=progress,
            )  # fmt: skip
            for symbol, ends in wanted.items():
                found = [served.cached(symbol, e) for e in ends]
                missing = sum(f is None for f in found)
                if missing:
                    raise EvaluationError(f"{label}: {missing} forecasts of {symbol} lost")
                tables[label, symbol] = forecast_table([f for f in found if f is not None])
            result.forecast_seconds[label] = time.perf_counter() - began
            served.use.model = label
            result.cache.append(served.use)
    finally:
        cache.close()
    return tables


def _score(result: Evaluation, tables: Mapping[tuple[str, str], np.ndarray]) -> None:
    levels = np.asarray(result.levels)
    for symbol, origins in result.origins.items():
        last = origins.last
        realised = as_returns(origins.realised, last)
        n = len(origins.ends_ms)
        lag = overlap_lag(result.horizon, origins.spacing)
        block = result.block[symbol] = block_length(n, lag)
        weights = block_weights(n, block, REPLICATES, seed=0)
        reference = as_returns(tables[NAIVE, symbol], last)
        scored: dict[str, Scores] = {}
        for model in result.models:
            values = as_returns(tables[model, symbol], last)
            scored[model] = score(levels, values, realised, reference=reference, scale=last)
        for model, scores in scored.items():
            steps = range(scores.steps)
            result.rows.append(Row(
                model, symbol, scores.figures(),
                bootstrap_intervals(scores, weights, confidence=CONFIDENCE),
                tuple(scores.figures(k) for k in steps),
                tuple(bootstrap_intervals(scores, weights, confidence=CONFIDENCE, step=k,
                                          names=STEP_FIGURES) for k in steps),
                scores.per_origin_crps(),
            ))  # fmt: skip
        losses = {model: s.per_origin_crps() for model, s in scored.items()}
        for first, second in itertools.combinations(result.models, 2):
            a, b = (second, first) if first == NAIVE else (first, second)
            result.tests.append(
                Comparison(symbol, a, b, diebold_mariano(losses[a], losses[b], lag))
            )
    get_logger("trader.evaluate").info(
        "scored", models=result.models, origins={s: len(o.ends_ms) for s, o in
                                                  result.origins.items()},
    )  # fmt: skip
