"""`trader backtest --grid KEY=V1,V2 [--walk-forward TRAIN/TEST] [--jobs N | --ray ADDRESS]`:
every combination of the grid's values, for every strategy and symbol, each a whole backtest,
in parallel; one table sorted by a stated metric, each run's report linked from it, and the
multiple-testing penalty stated (`grid_report`). Bad input is told before any run starts:
an unknown key, a value its setting refuses, an empty list, more runs than
`backtest.max_trials` without --yes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from trader.backtest.cache import ForecastCache
from trader.backtest.grid import (
    Axis,
    GridError,
    Trial,
    TrialJob,
    combinations,
    parse_axes,
    trial_settings,
)
from trader.backtest.grid_report import METRICS, Metric, ranked, terminal, write
from trader.backtest.grid_runner import RayUnavailable, ray_module, run_jobs
from trader.backtest.prepare import WHOLE, Period, forecast_all, prepare
from trader.backtest.side_by_side import ChildFailed
from trader.backtest.trials import SHARED_KEPT, TrialResult, reading_key, reading_of, share
from trader.backtest.walk_forward import Fold, WalkForwardError, folds, parse_spec
from trader.backtest.walk_forward_report import walk_forward_summary, write_walk_forward
from trader.config.schema import Settings
from trader.exit_codes import EX_ARGUMENTS, EX_CONFIG, EX_DATAERR, EX_FAILED
from trader.forecast.build import ModelUnavailable
from trader.forecast.protocol import Forecaster
from trader.market.files.options import ReadOptions
from trader.market.replay import Recording
from trader.runner import forecasters_for


@dataclass(frozen=True)
class GridRequest:
    grid: list[str]  # KEY=V1,V2 each
    strategies: list[str]
    period: Period
    rank_by: str = "sharpe"
    jobs: int | None = None  # None: every core
    ray: str | None = None
    walk_forward: str | None = None
    yes: bool = False
    out: Path | None = None
    allow_skips: bool = False


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def run_grid_command(
    request: GridRequest,
    settings: Settings,
    recordings: Sequence[Recording],
    reading: ReadOptions,
) -> int:
    try:
        results = _run(request, settings, recordings, reading)
    except _Refused as refused:
        sys.stderr.write(f"trader backtest: {refused}\n")
        return refused.code
    failing = [(r.trial, p) for r in results for p in r.problems]
    if failing and not request.allow_skips:
        sys.stderr.write("trader backtest: runs did not do what was asked (--allow-skips):\n")
        sys.stderr.writelines(f"  run {t.name}: {p}\n" for t, p in failing)
        return EX_FAILED
    return 0


def _run(
    request: GridRequest,
    settings: Settings,
    recordings: Sequence[Recording],
    reading: ReadOptions,
) -> list[TrialResult]:
    metric = METRICS[request.rank_by]
    try:
        axes = parse_axes(request.grid, settings)
        wf = parse_spec(request.walk_forward) if request.walk_forward else None
    except (GridError, WalkForwardError) as error:
        raise _Refused(EX_ARGUMENTS, str(error)) from None
    combos = combinations(axes) or [{}]
    files = {r.symbol: r for r in recordings}
    for combo in combos:  # every combination checked before any run
        try:
            trial_settings(settings, Trial(0, "", request.strategies[0], ()), combo)
        except GridError as error:
            raise _Refused(EX_ARGUMENTS, str(error)) from None
    cuts: dict[str, list[Fold]] = {}
    if wf is not None:
        for symbol, recording in files.items():
            try:
                times = prepare(settings, {symbol: recording}, request.period).times
                cuts[symbol] = folds(times, *wf)
            except (WalkForwardError, ValueError) as error:
                raise _Refused(EX_ARGUMENTS, f"{symbol}: {error}") from None
    per_fold = len(request.strategies) * sum(len(f) for f in cuts.values())
    count = (
        len(combos) * per_fold + per_fold
        if wf is not None
        else len(combos) * len(files) * len(request.strategies)
    )
    limit = settings.backtest.max_trials
    if count > limit and not request.yes:
        raise _Refused(
            EX_ARGUMENTS,
            f"the grid makes {count:,} runs, more than backtest.max_trials ({limit:,}): give "
            "--yes to run them all, or fewer values",
        )
    if request.ray is not None:
        try:
            ray_module()  # said before any forecast is computed
        except RayUnavailable as error:
            raise _Refused(EX_CONFIG, str(error)) from None
    try:
        # A plain grid's runs in this process or forked from it start with what they share.
        shared = request.period if wf is None and request.ray is None else None
        _warm(settings, files, combos, request, reading, period=shared)
    except ModelUnavailable as error:
        raise _Refused(EX_CONFIG, str(error)) from None
    if wf is None:
        trials = _trials(files, request.strategies, combos, request.period)
        results = _execute(trials, combos, settings, files, reading, request, reports=True)
        sys.stdout.write(terminal(results, axes, metric))
        if request.out:
            write(results, axes, metric, request.out)
            sys.stdout.write(f"grid: {request.out / 'grid.html'} (runs/NNN/report.html each)\n")
        return results
    return _walk(settings, files, reading, request, axes, combos, metric, cuts)


def _trials(
    files: Mapping[str, Recording],
    strategies: Sequence[str],
    combos: Sequence[Mapping[str, str]],
    period: Period,
) -> list[Trial]:
    out: list[Trial] = []
    for symbol in files:
        for strategy in strategies:
            for combo in combos:
                out.append(Trial(len(out) + 1, symbol, strategy, tuple(combo.items()), period))
    return out


def _execute(
    trials: Sequence[Trial],
    combos: Sequence[Mapping[str, str]],
    settings: Settings,
    files: Mapping[str, Recording],
    reading: ReadOptions,
    request: GridRequest,
    *,
    reports: bool,
) -> list[TrialResult]:
    folder = request.out / "runs" if request.out and reports else None
    jobs = [
        TrialJob(
            trial,
            trial_settings(settings, trial, dict(trial.params)),
            files[trial.symbol].path.resolve(),
            reading_of(files[trial.symbol], reading),
            folder / trial.name if folder else None,
            settings.log,
        )
        for trial in trials
    ]
    workers = request.jobs or os.cpu_count() or 1
    try:
        return run_jobs(jobs, workers=workers, ray_address=request.ray)
    except RayUnavailable as error:
        raise _Refused(EX_CONFIG, str(error)) from None
    except ChildFailed as error:
        raise _Refused(EX_FAILED, f"{error} (--jobs 1: one after the other, here)") from None
    except ValueError as error:  # the data cannot be backtested as it is (too short, ...)
        raise _Refused(EX_DATAERR, str(error)) from None


def _warm(
    settings: Settings,
    files: Mapping[str, Recording],
    combos: Sequence[Mapping[str, str]],
    request: GridRequest,
    reading: ReadOptions,
    *,
    period: Period | None,
) -> None:
    """Every forecast the runs will read, computed here once: the workers only read them.
    `period`: the runs' own (a plain grid's), for which what the first runs share is also
    prepared here (`trials.share`), found ready by this process's runs and by the workers it
    forks; None (a walk-forward's runs each have a fold's): the whole files' forecasts."""
    seen: set[str] = set()
    kept = 0
    for combo in combos:
        trial = trial_settings(settings, Trial(0, "", request.strategies[0], ()), combo)
        key = reading_key(trial)
        if key in seen:
            continue
        seen.add(key)
        models: list[Forecaster] | None = None
        for symbol, recording in files.items():
            if period is not None and kept < SHARED_KEPT:
                share(trial, recording, reading_of(recording, reading), period)
                kept += 1
                continue
            models = models or forecasters_for(trial)
            cache = ForecastCache(trial.backtest.cache_dir)
            try:
                forecast_all(prepare(trial, {symbol: recording}, WHOLE), models, cache)
            finally:
                cache.close()


def _walk(
    settings: Settings,
    files: Mapping[str, Recording],
    reading: ReadOptions,
    request: GridRequest,
    axes: Sequence[Axis],
    combos: Sequence[Mapping[str, str]],
    metric: Metric,
    cuts: Mapping[str, Sequence[Fold]],
) -> list[TrialResult]:
    """Train every combination on each fold's training window, test the best on its test."""
    train: list[Trial] = []
    for symbol, symbol_folds in cuts.items():
        for fold in symbol_folds:
            for strategy in request.strategies:
                for combo in combos:
                    train.append(Trial(
                        len(train) + 1, symbol, strategy, tuple(combo.items()), fold.train,
                        fold.number, "train",
                    ))  # fmt: skip
    trained = _execute(train, combos, settings, files, reading, request, reports=False)
    tests: list[Trial] = []
    for (symbol, strategy, fold_number), group in _by_fold(trained).items():
        best = ranked(group, metric)[0]
        tests.append(Trial(
            len(train) + len(tests) + 1, symbol, strategy, best.trial.params,
            next(f.test for f in cuts[symbol] if f.number == fold_number),
            fold_number, "test",
        ))  # fmt: skip
    tested = _execute(tests, combos, settings, files, reading, request, reports=True)
    sys.stdout.write(walk_forward_summary(trained, tested, axes, metric, settings))
    if request.out:
        write_walk_forward(trained, tested, axes, metric, settings, request.out)
        sys.stdout.write(f"walk-forward: {request.out / 'walk_forward.html'}\n")
    return [*trained, *tested]


def _by_fold(results: Sequence[TrialResult]) -> dict[tuple[str, str, int], list[TrialResult]]:
    groups: dict[tuple[str, str, int], list[TrialResult]] = {}
    for result in results:
        trial = result.trial
        assert trial.fold is not None
        groups.setdefault((trial.symbol, trial.strategy, trial.fold), []).append(result)
    return groups
