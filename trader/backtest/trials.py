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
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from trader.backtest.cache import ForecastCache
from trader.backtest.deflated import ReturnMoments, moments
from trader.backtest.document import Image
from trader.backtest.findings import findings
from trader.backtest.forecasts import CachedForecaster
from trader.backtest.grid import Trial, TrialJob
from trader.backtest.prepare import Period, Prepared, forecast_all, prepare
from trader.backtest.report import forecast_plots, write_report
from trader.backtest.run import BUY_AND_HOLD, Backtest, ForecastReview, Line, run_backtest
from trader.backtest.stats import Performance, returns
from trader.config.schema import Settings
from trader.cycle_collector import collector_paused
from trader.logging import configure_logging
from trader.market.files.options import ReadOptions
from trader.market.replay import Recording, read_recordings
from trader.private_files import write_file
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
    data = _SHARED.get(_Source.of(job))
    ledgers = job.out / "ledgers" if job.out else None
    result = asyncio.run(
        run_backtest(
            job.settings, {trial.symbol: data.recording}, strategies=[trial.strategy],
            period=trial.period, ledgers=ledgers, progress=False,
            shared=(data.ready, data.cached), review=data.review,
        )
    )  # fmt: skip
    data.review = data.review or result.review()
    report = None
    if job.out is not None:
        write_report(result, job.out, data.forecast_plots(result, job.out))
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


@dataclass
class _Data:
    """What runs of one file over one period with the same market and forecast settings
    share: the recording, prepared (windows, the data step's plan), and every forecast they
    read, read back into memory from the cache (kept open for a forecast it lacks); once one
    of them has run here, the forecasts' quality and their plots, which no strategy changes."""

    recording: Recording
    ready: Prepared
    cached: list[CachedForecaster]
    cache: ForecastCache
    review: ForecastReview | None = None
    plots: tuple[Path, list[Image]] | None = None  # where they were drawn, and what

    def forecast_plots(self, result: Backtest, folder: Path) -> list[Image]:
        """The forecasts' plots in `folder`: drawn there for the first run, copied from where
        they were drawn for the next ones."""
        if self.plots is not None:
            drawn, images = self.plots
            try:
                if drawn.resolve() != folder.resolve():
                    for image in images:
                        data = (drawn / image.file).read_bytes()
                        write_file(folder / image.file, data, what="the report folder")
                return images
            except OSError:  # gone meanwhile: drawn again
                pass
        images = forecast_plots(result, folder)
        self.plots = (folder, images)
        return images


@dataclass(frozen=True)
class _Source:
    """What a run reads: `symbol` from `file`, read with `reading`, over `period`, with the
    market and forecast settings of `settings`."""

    settings: Settings
    file: Path
    symbol: str
    reading: ReadOptions
    period: Period

    @classmethod
    def of(cls, job: TrialJob) -> _Source:
        return cls(job.settings, job.file, job.trial.symbol, job.reading, job.trial.period)

    def key(self) -> str:
        """Equal for the runs that read the same."""
        return json.dumps(
            [str(self.file), self.symbol, repr(self.reading), repr(self.period),
             reading_key(self.settings)],
        )  # fmt: skip


def reading_key(settings: Settings) -> str:
    """Equal for settings under which runs read the same windows and forecasts of a file: its
    market and forecast settings, the models, the forecast cache (what a grid mostly varies,
    the strategy's and the risk's settings, is not in it)."""
    return json.dumps(
        [settings.market.model_dump(mode="json"), settings.forecast.model_dump(mode="json"),
         settings.backtest.batch_windows, str(settings.backtest.cache_dir),
         model_names(settings)],
        sort_keys=True, default=str,
    )  # fmt: skip


class _Shared:
    """What this process prepared and forecast for its last runs, for its next ones on the
    same file, period, market and forecast settings (most grids vary only the strategy's and
    the risk's settings)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.entries: OrderedDict[str, _Data] = OrderedDict()

    def get(self, source: _Source, recording: Recording | None = None) -> _Data:
        """`recording`: the file as read, if at hand (else it is read)."""
        key = source.key()
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key]
        settings = source.settings
        if recording is None:
            recording = _recording(source.file, source.symbol, source.reading)
        with collector_paused():  # hundreds of thousands of objects made, no cycles
            ready = prepare(settings, {source.symbol: recording}, source.period)
            cache = ForecastCache(settings.backtest.cache_dir)
            cached, wanted = forecast_all(ready, forecasters_for(ready.settings), cache, False)
            # Every run reads all of these (its simulation does): read here once for all.
            for forecaster in cached:
                forecaster.read_all(wanted)
            _ = ready.plan
        data = self.entries[key] = _Data(recording, ready, cached, cache)
        while len(self.entries) > self.keep:
            _, old = self.entries.popitem(last=False)
            old.cache.close()
        return data


# One per process: its runs follow one another, each preparing nothing the last made. The
# grid's process fills it first (`share`), for its own runs (one job) or its forked workers.
SHARED_KEPT = 2  # files, periods or market and forecast settings: what grids vary least
_SHARED = _Shared(keep=SHARED_KEPT)


@lru_cache(maxsize=8)  # a spawned worker's runs read the same files (a walk-forward's folds)
def _recording(path: Path, symbol: str, reading: ReadOptions) -> Recording:
    (recording,) = read_recordings([path], [symbol], reading)
    return recording


def is_shared(job: TrialJob) -> bool:
    """Whether this process holds what `job`'s run reads."""
    return _Source.of(job).key() in _SHARED.entries


def reading_of(recording: Recording, reading: ReadOptions) -> ReadOptions:
    """How a worker reads `recording` again: the run's options, with its own instrument alone
    when the run picked several from one file (`--ticker IBM --ticker FB`)."""
    picked = recording.report.instrument if recording.report is not None else None
    if picked is None or not reading.tickers:
        return reading
    return replace(reading, tickers=(picked.value,))


def share(settings: Settings, recording: Recording, reading: ReadOptions, period: Period) -> None:
    """Prepare and forecast here what the runs of `recording` (read with `reading`) over
    `period` with `settings` will share: this process's own runs, and the workers it forks,
    find it ready."""
    source = _Source(settings, recording.path.resolve(), recording.symbol, reading, period)
    _SHARED.get(source, recording)
