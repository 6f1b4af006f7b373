"""What a backtest works out before any strategy runs, and every strategy (and every run of a
grid on the same data and settings) shares: the recordings as their calendars read them, the
period's ticks, each symbol's forecast windows, the forecasts (computed ahead, cached), and the
data step's plan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

import numpy as np

from trader.backtest.cache import ForecastCache
from trader.backtest.caveats import venue_notes, volume_caveats
from trader.backtest.forecasts import CachedForecaster, forecast_ahead
from trader.backtest.stats import Annualisation
from trader.backtest.windows import SymbolWindows
from trader.config.schema import Settings
from trader.domain import Timeframe
from trader.forecast.protocol import Forecaster
from trader.market.calendars.calendar import TradingCalendar
from trader.market.files.splits import SplitMove, restamped
from trader.market.replay import Recording
from trader.market.replay_calendars import ReplayCalendars, replay_calendars
from trader.market.replay_plan import ReplayPlan, plan_replay
from trader.runner import replay_settings, spread_model, tick_times
from trader.strategy.shorts import modelled_short_caveat


@dataclass(frozen=True)
class Period:
    begin: datetime | None = None  # first tick kept (bars before it fill the first windows)
    end: datetime | None = None  # last tick kept


WHOLE = Period()


@dataclass(frozen=True)
class Prepared:
    settings: Settings  # the replay's: the files' symbols, timeframe and currency
    replay: ReplayCalendars
    times: list[datetime]
    ticks_ms: np.ndarray
    windows: dict[str, SymbolWindows]
    annualisation: Annualisation
    notes: list[str] = field(default_factory=list)  # what reading the data did and decided
    warnings: list[str] = field(default_factory=list)  # ... where that changes the figures
    splits: dict[str, tuple[SplitMove, ...]] = field(default_factory=dict)  # in traded prices

    def wanted(self) -> dict[str, list[int]]:
        """The windows a forecast is wanted for: per symbol, those closing at a tick."""
        ticks = self.ticks_ms.tolist()
        return {s: [t for t in ticks if t in w.by_end] for s, w in self.windows.items()}

    @cached_property
    def plan(self) -> ReplayPlan | None:
        """The data step's plan for the ticks (None: see `plan_replay`), made once."""
        parsed = {s: w.parsed for s, w in self.windows.items()}
        settings = self.settings
        return plan_replay(
            self.replay.recordings, self.replay.calendars, settings.market,
            spread_model(settings), self.times, parsed,
        )  # fmt: skip


def prepare(
    settings: Settings, recordings: Mapping[str, Recording], period: Period = WHOLE
) -> Prepared:
    """ValueError for files that cannot share a run, or a period of fewer than two ticks."""
    settings = replay_settings(settings, recordings)
    replay = replay_calendars(settings.market, recordings)
    recordings = replay.recordings
    market = settings.market
    context = market.context_bars
    times = [
        t
        for t in tick_times(recordings, context, replay.calendars)
        if (period.begin is None or t >= period.begin) and (period.end is None or t <= period.end)
    ]
    if len(times) < 2:
        raise ValueError(
            "the period holds fewer than two ticks after the first full window of "
            f"{context} bars: give more data or a longer period"
        )
    ticks_ms = np.array([int(t.timestamp() * 1000) for t in times], dtype=np.int64)
    contiguous = market.min_contiguous_bars if market.gap_policy == "skip" else None
    windows = {
        s: SymbolWindows(r, context, calendar=replay.calendars[s], min_contiguous=contiguous)
        for s, r in recordings.items()
    }
    notes = replay.explanations() + [n for r in recordings.values() for n in _file_notes(r, True)]
    notes += venue_notes(settings.exchange)
    repaired = [r for r in recordings.values() if r.report and r.report.repaired]
    warnings = replay.warnings() + [n for r in repaired for n in _file_notes(r)]
    warnings += volume_caveats(recordings)
    warnings += [c for c in [modelled_short_caveat(settings)] if c is not None]
    splits = {s: restamped(r.report.splits, r.starts) for s, r in recordings.items()
              if r.report and r.report.splits}  # fmt: skip
    return Prepared(
        settings, replay, times, ticks_ms, windows,
        annualisation(replay.calendars, Timeframe(market.timeframe)), notes, warnings, splits,
    )  # fmt: skip


def forecast_all(
    ready: Prepared,
    models: Sequence[Forecaster],
    cache: ForecastCache,
    progress: bool | None = None,
) -> tuple[list[CachedForecaster], dict[str, list[int]]]:
    """Every model's forecasts of the wanted windows, computed where the cache lacks them;
    and which windows those are."""
    forecast, context = ready.settings.forecast, ready.settings.market.context_bars
    wanted = ready.wanted()
    cached = [
        forecast_ahead(
            model,
            ready.windows,
            wanted,
            cache,
            horizon=forecast.horizon,
            quantiles=forecast.quantiles,
            context=context,
            batch=ready.settings.backtest.batch_windows,
            progress=progress,
        )
        for model in models
    ]
    return cached, wanted


def annualisation(calendars: Mapping[str, TradingCalendar], timeframe: Timeframe) -> Annualisation:
    """Bars a year by the symbols' calendars; with several, the densest (ticks follow all)."""
    per_symbol = {c.name: c.bars_per_year(timeframe) for c in calendars.values()}
    name, densest = max(per_symbol.items(), key=lambda item: item[1].periods)
    explanation = densest.explanation
    if len(per_symbol) > 1:
        explanation += (
            f" ({name}: the densest of the symbols' calendars {', '.join(sorted(per_symbol))}, "
            "whose bar closes the ticks follow)"
        )
    return Annualisation(densest.periods, ", ".join(sorted(per_symbol)), explanation)


def _file_notes(recording: Recording, naming: bool = False) -> list[str]:
    """What reading the file did; `naming`: how its symbol was told and files left out too."""
    report = recording.report
    notes = [*(recording.notes if naming else ()), *(report.notes() if report else [])]
    return [f"{recording.path.name}: {note}" for note in notes]
