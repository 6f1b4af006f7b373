"""One strategy over history at research speed: the daemon's own engine, tick by tick, with
the parts a backtest needs instead of the ones a daemon needs.

The engine is `trader.runner.build_engine`'s, whole: the data stage (hygiene and all), the
paper broker's fills, the forecasts, the strategy, sizing, every risk check, the ledger stage,
exact Decimal money. What the backtest does not pay for:
- the data step fetching and judging rows at every tick: a recording cannot change while it
  is replayed, so the data step's work is done once for every run (`ReplayPlan`) and replayed
  (`PlannedDataStep`), windows, skips and quotes alike;
- a SQLite transaction per tick: the ledger's statements wait in memory and are written in
  one transaction at the end (`BufferedDatabase`), same schema, same rows, no fsync;
- reading the ledger back tick by tick: the ticks' equity and outcomes are kept as they are
  booked (the rest, a few rows, is read from the ledger);
- the scheduler and the event loop: the ticks run one after the other in one coroutine (a
  tick never waits on anything in a backtest), the forecasts are cache lookups in memory.
`tests/integration/test_backtest_equivalence.py` runs this and the daemon's replay
(`simulate.replay_strategy`) side by side: the ledgers must agree row for row.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import numpy as np
from tqdm import tqdm

from trader.backtest.simulate import (
    StrategyRun,
    TickSeries,
    progress_bar,
    read_run,
    remove_ledger,
    strategy_settings,
)
from trader.backtest.stretch import QuietStretch
from trader.config.schema import Settings
from trader.cycle_collector import collector_paused
from trader.domain import to_epoch_ms
from trader.engine.forecasting import InlineExecutor
from trader.engine.report import TickReport
from trader.forecast.protocol import Forecaster
from trader.ledger.bars import BarStore
from trader.ledger.buffered import BufferedDatabase
from trader.market.planned_step import PlannedDataStep
from trader.market.replay_calendars import ReplayCalendars
from trader.market.replay_perp import PerpRecordings, perp_recordings
from trader.market.replay_plan import ReplayPlan
from trader.risk.state import TradingStatus
from trader.runner import build_engine, replay_venue


class _Record:
    """Engine hooks: the figures of each booked tick as the ledger gets them, the orders the
    risk checks refused (which the ledger does not keep), and the progress bar."""

    def __init__(self, bar: tqdm, symbols: Sequence[str]) -> None:
        self.bar = bar
        self.symbols = list(symbols)
        self.ticks: list[int] = []
        self.equity: list[float] = []
        self.outcomes: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.by_symbol: dict[str, Counter[str]] = {s: Counter() for s in symbols}
        self.first_ready: dict[str, int] = {}
        self.refusals: Counter[str] = Counter()

    def on_tick(self, report: TickReport) -> None:
        self.bar.update(1)
        if report.refusals:
            self.refusals.update(verdict.rule for _, verdict in report.refusals)
        if report.portfolio is None:
            return  # not booked: the ledger has nothing of this tick
        at = to_epoch_ms(report.at)
        self.ticks.append(at)
        self.equity.append(float(report.equity))
        self.outcomes[report.outcome] += 1
        skipped = report.skipped
        if skipped:
            self.skipped.update(skipped.values())
        for symbol in self.symbols:
            if symbol in skipped:
                self.by_symbol[symbol][skipped[symbol]] += 1
            elif symbol not in self.first_ready:
                self.first_ready[symbol] = at

    def on_state(self, status: TradingStatus) -> None:
        self.bar.set_postfix_str(f"{status.state}: {status.reason}"[:60])

    def series(self) -> TickSeries:
        return TickSeries(
            np.array(self.ticks, dtype=np.int64),
            np.array(self.equity, dtype=np.float64),
            self.outcomes,
            self.skipped,
            self.by_symbol,
            self.first_ready,
        )


@dataclass(frozen=True)
class Replay:
    """What every run of a backtest shares: the recordings as their calendars read them, the
    ticks, and the data step's plan for them."""

    calendars: ReplayCalendars
    times: list[datetime]
    plan: ReplayPlan


async def simulate(
    settings: Settings,
    replay: Replay,
    forecasters: Sequence[Forecaster],
    strategy: str,
    ledger: Path,
    *,
    progress: bool | None = None,
) -> StrategyRun:
    """Run `strategy` on every symbol over the replay's ticks, from a fresh ledger at `ledger`
    (replaced if there). `settings` are the replay's (`runner.replay_settings`)."""
    remove_ledger(ledger)
    run_settings = strategy_settings(settings, strategy, ledger)
    symbols = run_settings.market.symbols
    times = replay.times
    bar = progress_bar(strategy, len(times), progress)
    record = _Record(bar, symbols)
    began = time.perf_counter()
    database = await BufferedDatabase.open(ledger)
    try:
        venue = replay_venue(run_settings, replay.calendars, times, None, resume_after=None)
        market = PlannedDataStep(
            venue.feed, run_settings.market, replay.plan, venue.calendars,
            store=BarStore(database, keep=run_settings.market.context_bars * 2),
        )  # fmt: skip
        engine = await build_engine(
            run_settings, venue.feed, database, times[0], forecasters=forecasters,
            hooks=record, inference=InlineExecutor(), halt_policy=settings.backtest.on_halt,
            calendars=venue.calendars, market=market, quiet_ticks=True,
            perp_tapes=_perp_tapes(run_settings, replay),
        )  # fmt: skip
        # A perpetual's tick may pay funding or liquidate: no stretch is quiet.
        stretch = QuietStretch.of(engine) if engine.perps is None else None
        with bar, collector_paused():
            try:
                i = 0
                while i < len(times):
                    booked = await stretch.run(times, i) if stretch is not None else 0
                    if not booked:
                        await engine.tick(times[i])
                        booked = 1
                    i += booked
            finally:
                engine.close()
            # The ledger is written before the collector comes back: it would otherwise walk
            # every row waiting to be written (a full collection, a tenth of a short run).
            await market.save_bars()
    finally:
        await database.close()
    seconds = time.perf_counter() - began
    run = await read_run(strategy, ledger, seconds, symbols, series=record.series())
    return replace(run, refusals=record.refusals)


def _perp_tapes(settings: Settings, replay: Replay) -> PerpRecordings | None:
    """A perpetual's funding and marks beside its bars (the backtest's command refused bars
    without funding unless asked to assume none, which `assume_zero` then is)."""
    if settings.market.kind != "perp":
        return None
    return perp_recordings(replay.calendars.recordings.values(), assume_zero=True)
