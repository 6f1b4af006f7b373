"""One run of a grid, in a worker: what the run hands back for the summary.

A trial is a whole backtest of one strategy on one symbol, with the grid's values for its
settings: `run_backtest` over the file, exactly what `trader backtest --strategy S` with those
settings runs, so its figures equal that single run's. Workers read the data and the forecast
cache from the paths they are given (on a Ray cluster, paths every node shares).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from trader.backtest.cache import ForecastCache
from trader.backtest.deflated import ReturnMoments, moments
from trader.backtest.findings import findings
from trader.backtest.forecasts import CachedForecaster
from trader.backtest.grid import Trial, TrialJob
from trader.backtest.prepare import Prepared, forecast_all, prepare
from trader.backtest.report import write_report
from trader.backtest.run import BUY_AND_HOLD, Line, run_backtest
from trader.backtest.stats import Performance, returns
from trader.logging import configure_logging
from trader.market.files.options import ReadOptions
from trader.market.replay import Recording, read_recordings
from trader.runner import forecasters_for, model_names


@dataclass(frozen=True)
class TrialResult:
    trial: Trial
    performance: Performance  # the strategy on the symbol
    hold: Performance  # buy-and-hold over the same ticks
    trades: int  # round trips
    fills: int
    moments: ReturnMoments  # of its per-bar returns (for the deflated Sharpe ratio)
    periods_per_year: float
    report: Path | None
    seconds: float
    problems: tuple[str, ...] = ()  # what the run did not do as asked (findings that fail)
    equity: np.ndarray = field(default_factory=lambda: np.zeros(0))  # E_0 .. E_N


def run_trial(job: TrialJob) -> TrialResult:
    """Run the trial here (in a worker process, a Ray task or the caller's process)."""
    configure_logging(job.log)
    trial = job.trial
    began = time.perf_counter()
    recording = _recording(job.file, trial.symbol, job.reading)
    ledgers = job.out / "ledgers" if job.out else None
    result = asyncio.run(
        run_backtest(
            job.settings, {trial.symbol: recording}, strategies=[trial.strategy],
            period=trial.period, ledgers=ledgers, progress=False,
            shared=_SHARED.get(job, recording),
        )
    )  # fmt: skip
    report = None
    if job.out is not None:
        write_report(result, job.out)
        report = job.out / "report.html"
    line = _line(result.lines, trial.strategy, trial.symbol)
    hold = _line(result.lines, BUY_AND_HOLD, trial.symbol)
    run = result.runs[trial.strategy]
    per_year = result.annualisation.periods_per_year
    risk_free = (1.0 + job.settings.backtest.risk_free_rate) ** (1.0 / per_year) - 1.0
    return TrialResult(
        trial, line.performance, hold.performance,
        line.trades.trades if line.trades else 0, len(run.fills),
        moments(returns(line.equity), risk_free), per_year, report,
        time.perf_counter() - began, tuple(f.text for f in findings(result) if f.fails),
        line.equity,
    )  # fmt: skip


def _line(lines: Sequence[Line], strategy: str, symbol: str) -> Line:
    (found,) = [x for x in lines if x.strategy == strategy and x.symbol == symbol]
    return found


class _Shared:
    """What a worker prepared and forecast for its last runs, for its next ones on the same
    file, period, market and forecast settings (most grids vary only the strategy's and the
    risk's settings): the data step's plan, the windows, the forecasts read from the cache."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.entries: OrderedDict[str, tuple[Prepared, list[CachedForecaster], ForecastCache]]
        self.entries = OrderedDict()

    def get(self, job: TrialJob, recording: Recording) -> tuple[Prepared, list[CachedForecaster]]:
        settings, trial = job.settings, job.trial
        key = json.dumps(
            [str(job.file), trial.symbol, repr(job.reading), repr(trial.period),
             settings.market.model_dump(mode="json"), settings.forecast.model_dump(mode="json"),
             settings.backtest.batch_windows, str(settings.backtest.cache_dir),
             model_names(settings)],
            sort_keys=True, default=str,
        )  # fmt: skip
        if key in self.entries:
            self.entries.move_to_end(key)
        else:
            ready = prepare(settings, {trial.symbol: recording}, trial.period)
            cache = ForecastCache(settings.backtest.cache_dir)
            cached, _ = forecast_all(ready, forecasters_for(ready.settings), cache, False)
            self.entries[key] = (ready, cached, cache)
            while len(self.entries) > self.keep:
                _, (_, _, old) = self.entries.popitem(last=False)
                old.close()
        ready, cached, _ = self.entries[key]
        return ready, cached


# One per worker process: its runs follow one another, each preparing nothing the last made.
_SHARED = _Shared(keep=2)


@lru_cache(maxsize=8)  # a worker runs many trials of the same files
def _recording(path: Path, symbol: str, reading: ReadOptions) -> Recording:
    (recording,) = read_recordings([path], [symbol], reading)
    return recording
