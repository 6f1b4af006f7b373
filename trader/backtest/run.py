"""A backtest: forecasts computed ahead (cached), then each strategy through the engine over
the same ticks, then the statistics of what each ledger recorded, beside buy-and-hold and the
forecaster's own accuracy.

Parameters are not chosen here: every one comes from the settings, fixed before the period
(no selection, so nothing is tuned on the days reported).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from trader.backtest.activity import (
    Costs,
    ExitCosts,
    Exposure,
    TradeStats,
    exposure,
    round_trips,
    symbol_curve,
    trade_stats,
    trading_costs,
)
from trader.backtest.cache import ForecastCache
from trader.backtest.forecasts import CachedForecaster, CacheUse
from trader.backtest.funding import PerpData
from trader.backtest.hold import buy_and_hold
from trader.backtest.measured_costs import CostCalibration
from trader.backtest.perp_book import FundingBook
from trader.backtest.prepare import WHOLE, Period, Prepared, forecast_all, prepare
from trader.backtest.quality import Quality, forecast_quality
from trader.backtest.session import Replay, simulate
from trader.backtest.side_by_side import fork_refusal, run_side_by_side
from trader.backtest.simulate import StrategyRun, replay_strategy
from trader.backtest.stats import Annualisation, Performance, performance
from trader.backtest.stretch import takes_stretches
from trader.backtest.symbol_marks import SymbolMarks
from trader.backtest.windows import SymbolWindows, epoch_ms
from trader.config.schema import Settings
from trader.config.trading_settings import StrategySettings
from trader.cycle_collector import collector_paused
from trader.domain import Forecast
from trader.forecast.protocol import Forecaster
from trader.logging import get_logger
from trader.market.files.splits import SplitMove
from trader.market.quotes import SpreadModel
from trader.market.replay import Recording
from trader.private_files import owned_folder
from trader.runner import forecasters_for, replay_settings, spread_model
from trader.strategy.select import build_strategy

BUY_AND_HOLD = "buy_and_hold"
PORTFOLIO = "portfolio"
BAND_BARS = 240  # forecasts shown in the band plot: the period's last ones
COST_FIELDS = ("traded_notional", "fees", "spread", "slippage")


@dataclass(frozen=True)
class Line:
    """One row of the comparison: a strategy (or buy-and-hold) on a symbol (or all)."""

    strategy: str
    symbol: str
    performance: Performance
    trades: TradeStats | None  # None for the portfolio line (see the symbols' lines)
    costs: Costs
    exposure: Exposure
    equity: np.ndarray  # E_0 .. E_N


@dataclass(frozen=True)
class ForecastReview:
    """The forecasts' quality and their bands for the report: they depend on the data, the
    period and the models alone, so every run of a grid on the same ones has the same."""

    quality: tuple[Quality, ...]
    bands: Mapping[tuple[str, str], list[Forecast]]


@dataclass
class Backtest:
    settings: Settings
    files: list[Path]
    ticks_ms: np.ndarray
    annualisation: Annualisation
    lines: list[Line] = field(default_factory=list)
    runs: dict[str, StrategyRun] = field(default_factory=dict)
    quality: list[Quality] = field(default_factory=list)
    cache: list[CacheUse] = field(default_factory=list)
    bands: dict[tuple[str, str], list[Forecast]] = field(default_factory=dict)
    closes: dict[str, dict[int, float]] = field(default_factory=dict)  # by bar close, epoch ms
    forecast_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # what reading the data did and decided
    warnings: list[str] = field(default_factory=list)  # ... where that changes the figures
    held_from: dict[str, int] = field(default_factory=dict)  # buy-and-hold's first tick, ms
    splits: dict[str, tuple[SplitMove, ...]] = field(default_factory=dict)  # in traded prices
    costs: CostCalibration | None = None  # --costs-from: which costs are measured, set after
    funding: FundingBook | None = None  # a perpetual's: what each strategy paid (`perp_book`)

    @property
    def symbols(self) -> list[str]:
        return list(self.settings.market.symbols)

    def review(self) -> ForecastReview:
        return ForecastReview(tuple(self.quality), dict(self.bands))

    @property
    def strategies(self) -> list[str]:
        return list(self.runs)


async def run_backtest(
    settings: Settings,
    recordings: Mapping[str, Recording],
    *,
    strategies: Sequence[str],
    period: Period = WHOLE,
    forecasters: Sequence[Forecaster] | None = None,
    ledgers: Path | None = None,
    progress: bool | None = None,
    reference: bool = False,
    shared: tuple[Prepared, Sequence[CachedForecaster]] | None = None,
    jobs: int = 1,
    meanwhile: Callable[[Backtest], object] | None = None,
    review: ForecastReview | None = None,
    perp: PerpData | None = None,
) -> Backtest:
    """Run every strategy over `recordings`. Ledgers go to `ledgers` (one per strategy),
    else to a temporary folder removed afterwards. No strategies: buy-and-hold alone.
    `reference`: run each strategy as the daemon replays history (`runner.run_replay`, the
    data step fetching rows and a ledger transaction every tick), which the backtest's own
    run (`session.simulate`) must equal; slower. `shared`: what an earlier run on the same
    files, period and market and forecast settings prepared and forecast (a grid's worker
    keeps it for its next runs). `jobs`: strategies run side by side in that many worker
    processes (`side_by_side`), with the same figures. `meanwhile`: work for this process
    once the forecasts' quality is known, while the strategies run (a report's forecast
    plots; with one job, after them). `review`: the forecasts' quality and bands, as an
    earlier run with the same `shared` found them (else they are worked out). `perp`: a
    perpetual's funding and mark prices, booked on every curve (`perp_book`)."""
    with collector_paused():  # many objects, no cycles: see trader.cycle_collector
        log = get_logger("trader.backtest")
        if shared is None:
            ready = prepare(settings, recordings, period)
            settings = ready.settings
        else:
            ready = shared[0]
            settings = replay_settings(settings, recordings)
        replay, times, windows = ready.replay, ready.times, ready.windows
        result = Backtest(
            settings, [r.path for r in replay.recordings.values()], ready.ticks_ms,
            ready.annualisation, notes=ready.notes, warnings=ready.warnings, splits=ready.splits,
        )  # fmt: skip
        result.closes = _closes(windows)  # the quality section's too, made while strategies run
        if perp is not None:  # a perpetual's funding and mark prices (`perp_book`)
            result.funding = FundingBook.of(perp, ready.ticks_ms, result.closes)
            result.notes, result.warnings = result.funding.said(result.notes, result.warnings)
        if not strategies:  # buy-and-hold only: no model, no engine
            _score(result, windows, spread_model(settings))
            return result
        cache = ForecastCache(settings.backtest.cache_dir)
        try:
            began = time.perf_counter()
            if shared is None:
                models = list(forecasters) if forecasters is not None else forecasters_for(settings)
                cached, wanted = forecast_all(ready, models, cache, progress)
            else:
                cached, wanted = list(shared[1]), ready.wanted()
            result.forecast_seconds = time.perf_counter() - began
            plan = None if reference else ready.plan
            with tempfile.TemporaryDirectory(prefix="trader-backtest-") as scratch:
                folder = owned_folder(ledgers or Path(scratch), "the ledgers' folder")
                if plan is not None:
                    simulations = _Simulations(
                        settings, Replay(replay, times, plan), cached, folder
                    )
                    runs = await _simulate_all(
                        simulations, strategies, jobs, progress,
                        lambda: _forecasts(result, cached, wanted, meanwhile, review),
                    )  # fmt: skip
                else:  # or a calendar that does not cover its data: as the daemon replays
                    runs = {}
                    for strategy in strategies:
                        runs[strategy] = await replay_strategy(
                            settings, replay, cached, strategy, folder / _ledger_name(strategy),
                            begin=times[0], end=times[-1], ticks=len(times), progress=progress,
                        )  # fmt: skip
                    _forecasts(result, cached, wanted, meanwhile, review)
                for strategy in strategies:
                    run = result.runs[strategy] = runs[strategy]
                    log.info(
                        "strategy done", strategy=strategy, seconds=round(run.seconds, 1),
                        fills=len(run.fills),
                    )  # fmt: skip
            result.cache = [c.use for c in cached]
            _score(result, windows, spread_model(settings))
        finally:
            cache.close()
        return result


def _ledger_name(strategy: str) -> str:
    return f"ledger-{strategy}.sqlite3"


def _closes(windows: Mapping[str, SymbolWindows]) -> dict[str, dict[int, float]]:
    """Each symbol's closes by bar close (epoch ms)."""
    return {s: {epoch_ms(b): b.close for b in w.bars if b is not None} for s, w in windows.items()}


Meanwhile = Callable[[], object]  # work for this process while strategies run
SHORT_RUN_NICENESS = 10  # side by side, how much lower a short run's worker runs


@dataclass(frozen=True)
class _Simulations:
    """What every strategy's run of a backtest shares: each is `session.simulate` of it."""

    settings: Settings
    replay: Replay
    cached: Sequence[CachedForecaster]
    folder: Path  # where each writes its ledger

    async def run(self, strategy: str, progress: bool | None) -> StrategyRun:
        ledger = self.folder / _ledger_name(strategy)
        return await simulate(
            self.settings, self.replay, self.cached, strategy, ledger, progress=progress
        )

    def side_by_side(
        self, strategies: Sequence[str], jobs: int, progress: bool | None, meanwhile: Meanwhile
    ) -> dict[str, StrategyRun]:
        """Each strategy's run in a forked worker, `jobs` at a time (`side_by_side`). One
        progress bar counts the runs done; a single run's worker shows its ticks instead."""
        cached = self.cached
        ticks, runs = (progress, False) if len(strategies) == 1 else (False, progress)

        def task(strategy: str) -> Callable[[], tuple[StrategyRun, list[int]]]:
            def run() -> tuple[StrategyRun, list[int]]:
                before = [c.use.live for c in cached]
                done = asyncio.run(self.run(strategy, progress=ticks))
                return done, [c.use.live - b for c, b in zip(cached, before, strict=True)]

            return run

        bar = tqdm(
            total=len(strategies), unit="strategy", desc=f"backtest ({jobs} workers)",
            leave=False, disable=None if runs is None else not runs,
        )  # fmt: skip
        niceness = run_niceness(self.settings.strategy, strategies)
        with bar:
            done = run_side_by_side(
                [task(s) for s in strategies], jobs, while_waiting=meanwhile,
                on_done=lambda _: bar.update(1), niceness=niceness,
            )  # fmt: skip
        for _, live in done:  # forecasts the workers' runs had to make (none when all cached)
            for forecaster, count in zip(cached, live, strict=True):
                forecaster.use.live += count
        return {s: run for s, (run, _) in zip(strategies, done, strict=True)}


def run_niceness(settings: StrategySettings, strategies: Sequence[str]) -> list[int]:
    """How much lower each strategy's worker runs side by side. A run that takes quiet
    stretches is several times shorter than one whose every tick goes through the engine:
    beside such a long run, the short ones give way (a lower priority, never a wait), so that
    the longest run, which the wall time is, keeps a core of its own. Alone, or beside runs
    as short, they take every core as before."""
    short = [takes_stretches(build_strategy(s, settings)) for s in strategies]
    return [SHORT_RUN_NICENESS if it and not all(short) else 0 for it in short]


async def _simulate_all(
    runs: _Simulations,
    strategies: Sequence[str],
    jobs: int,
    progress: bool | None,
    meanwhile: Meanwhile,
) -> dict[str, StrategyRun]:
    """Every strategy's run: side by side in `jobs` forked workers where it can (a single
    strategy too: its worker runs while this process does `meanwhile`), else one after the
    other here, then `meanwhile`."""
    wanted = jobs > 1
    refusal = fork_refusal() if wanted else None
    if wanted and refusal is None:
        return runs.side_by_side(strategies, jobs, progress, meanwhile)
    if refusal is not None and len(strategies) > 1:
        get_logger("trader.backtest").warning(
            "strategies run one after the other", asked_jobs=jobs, because=refusal
        )
    done = {strategy: await runs.run(strategy, progress) for strategy in strategies}
    meanwhile()
    return done


def _score(result: Backtest, windows: Mapping[str, SymbolWindows], spread: SpreadModel) -> None:
    """Every strategy's and buy-and-hold's lines."""
    settings = result.settings
    broker = settings.broker
    slippage = float(broker.slippage_bps) / 10_000
    fee = float(broker.taker_fee_bps) / 10_000
    per_year = result.annualisation.periods_per_year
    rf = settings.backtest.risk_free_rate
    ticks = result.ticks_ms
    marks = {s: SymbolMarks(w, spread) for s, w in windows.items()}
    closes = {s: m.at(ticks) for s, m in marks.items()}
    exits = {s: ExitCosts(m.half_spread(int(ticks[-1])), slippage, fee) for s, m in marks.items()}
    cash, book = float(broker.starting_cash), result.funding
    for strategy, run in result.runs.items():
        if not np.array_equal(run.ticks_ms, ticks):
            raise ValueError(
                f"{strategy}: its ledger holds {len(run.ticks_ms)} ticks of the period's "
                f"{len(ticks)}: a tick could not be booked (the log says why)"
            )
        closing_cost = 0.0
        closings: list[Costs] = []
        gross = np.zeros(len(ticks))
        for symbol in result.symbols:
            fills = [f for f in run.fills if f.symbol == symbol]
            curve = symbol_curve(fills, ticks, closes[symbol], cash, exits[symbol])
            closing_cost += curve.closing_cost
            gross += np.abs(curve.values)
            equity = curve.equity if book is None else book.strategy_curve(
                strategy, symbol, run.funding, curve, closes[symbol])  # fmt: skip
            perf = _performance(equity, per_year, rf, f"{strategy} on {symbol}")
            held = float(curve.position[-1]) if len(curve.position) else 0.0
            closing = exits[symbol].costs(held, float(closes[symbol][-1]))
            costs = trading_costs(fills, result.closes, slippage) + closing
            closings.append(closing)
            trades = round_trips(fills, float(closes[symbol][-1]), exits[symbol])
            result.lines.append(Line(
                strategy, symbol, perf, trade_stats(trades), costs,
                exposure(curve.values, equity, costs.traded_notional, perf.years), equity,
            ))  # fmt: skip
        if len(result.symbols) > 1:
            # The ledger's own equity, closed out at the end as each symbol's is.
            equity = np.concatenate([[run.starting_cash], run.equity])
            equity = equity if book is None else book.portfolio_curve(strategy, equity)
            equity[-1] -= closing_cost
            perf = _performance(equity, per_year, rf, strategy)
            costs = sum(closings, trading_costs(run.fills, result.closes, slippage))
            result.lines.append(Line(
                strategy, PORTFOLIO, perf, None, costs,
                exposure(gross, equity, costs.traded_notional, perf.years), equity,
            ))  # fmt: skip
    _hold(result, marks, closes, exits, cash)


def _performance(equity: np.ndarray, per_year: float, rf: float, what: str) -> Performance:
    try:
        return performance(equity, per_year, rf)
    except ValueError as error:
        raise ValueError(f"{what}: {error} (lowest equity {float(np.min(equity)):.2f})") from None


def _hold(
    result: Backtest,
    marks: Mapping[str, SymbolMarks],
    closes: Mapping[str, np.ndarray],
    exits: Mapping[str, ExitCosts],
    cash: float,
) -> None:
    per_year = result.annualisation.periods_per_year
    rf = result.settings.backtest.risk_free_rate
    curves = []
    ticks = result.ticks_ms
    for symbol in result.symbols:
        start = _first_tradable(result, symbol)
        result.held_from[symbol] = int(ticks[start])
        entry = marks[symbol].half_spread(int(ticks[start]))
        held = buy_and_hold(closes[symbol], cash, entry, exits[symbol], start)
        if result.funding is not None:  # a perpetual: funding paid, on the mark price
            held = result.funding.hold(symbol, held, closes[symbol])
        curves.append(held.equity)
        perf = performance(held.equity, per_year, rf)
        result.lines.append(Line(
            BUY_AND_HOLD, symbol, perf, None, held.costs,
            exposure(held.position * closes[symbol], held.equity, held.costs.traded_notional,
                     perf.years),
            held.equity,
        ))  # fmt: skip
    if len(curves) > 1:
        equity = np.mean(curves, axis=0)  # equal weights, each symbol bought with 1/n
        perf = performance(equity, per_year, rf)
        parts = [line.costs for line in result.lines[-len(curves) :]]
        costs = Costs(*(sum(getattr(c, f) for c in parts) / len(parts) for f in COST_FIELDS))
        result.lines.append(Line(
            BUY_AND_HOLD, PORTFOLIO, perf, None, costs,
            Exposure(1.0, 1.0, costs.traded_notional / float(np.mean(equity)) / perf.years),
            equity,
        ))  # fmt: skip


def _first_tradable(result: Backtest, symbol: str) -> int:
    """The tick buy-and-hold buys at: the first the strategies could trade the symbol at (the
    last tick if they never could: buy-and-hold then holds for one bar)."""
    firsts = [run.first_ready[symbol] for run in result.runs.values() if symbol in run.first_ready]
    if not result.runs:
        return 0
    if not firsts:
        return len(result.ticks_ms) - 1
    return int(np.searchsorted(result.ticks_ms, min(firsts)))


def _forecasts(
    result: Backtest,
    cached: Sequence[CachedForecaster],
    wanted: Mapping[str, Sequence[int]],
    then: Callable[[Backtest], object] | None,
    review: ForecastReview | None,
) -> None:
    """The forecasts' quality and bands (`review`'s, when known); then `then` (the caller's
    work meanwhile)."""
    if review is not None:
        result.quality, result.bands = list(review.quality), dict(review.bands)
    else:
        for forecaster in cached:
            for symbol, ends in wanted.items():
                forecasts = [f for e in ends if (f := forecaster.cached(symbol, e)) is not None]
                closes = result.closes[symbol]
                window = result.settings.forecast.naive_window
                naive = forecaster.naive_references(forecasts, window)
                quality = forecast_quality(
                    forecaster.name, symbol, forecasts, closes, naive, window
                )
                if quality is not None:
                    result.quality.append(quality)
                result.bands[forecaster.name, symbol] = forecasts[-BAND_BARS:]
    if then is not None:
        then(result)
