"""Quiet stretches: a backtest's short way through the ticks where nothing moves.

Most of a backtest's ticks move no order and no money: nothing rests with the paper broker,
every symbol gets its new bar and a quote, the forecasts come from the cache, and each strategy
wants the position it holds (or none) or one the risk checks refuse (the forecast's edge does
not clear fees and spread; trading is halted). Each such tick still gets its whole record in
the ledger: its forecasts, its decisions, its equity, the trading state, its outcome.

`QuietStretch` books these ticks one after the other without the engine's stages. It reads the
data step's plan (`PlannedDataStep.plain`) and the cached forecasts (`CachedForecaster.served`),
asks each strategy for its outline (`Outlined.outline`, what its `decide` returns), puts the
order that implies to the engine's own planner and risk checks (`Planner.market_intent`,
`Admission.judge_at`), values the account as the ledger stage does, and writes the ticks'
records in one ledger transaction. It stops, before it has changed anything, at the first tick
it cannot book so: a symbol skips, a row is dropped or a bar missing, a forecast is not cached,
a strategy or a check fails, or an order would be admitted. The engine's `tick` runs that one.
A tick that changes the trading state (the risk engine seeing equity) ends the stretch after
it: its own orders were judged before the change, as the engine judges them.

`tests/integration/test_backtest_equivalence.py` holds the result to the daemon's replay.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import NamedTuple, TypeGuard

from trader.backtest.forecasts import CachedForecaster
from trader.domain import Bar, Forecast, Quote, Signal
from trader.engine.booking import settle
from trader.engine.deciding import log_decision
from trader.engine.pipeline import Engine
from trader.engine.planning import Book, Intent
from trader.engine.report import TickReport, announce
from trader.engine.sizing import books_valued
from trader.engine.valuation import Valuation, valuation
from trader.ledger.trading import TickRecord
from trader.logging import get_logger, log_context
from trader.market.planned_step import PlannedDataStep
from trader.market.replay_plan import SymbolTick
from trader.risk.engine import Verdict
from trader.risk.state import TradingStatus
from trader.strategy.base import Outlined, Outlook, Strategy

# Ticks booked per call at most: the progress bar and the hooks hear of them at that pace.
LONGEST = 256


class _Quiet(NamedTuple):
    """A tick found quiet, not booked yet (a named tuple: one is made every tick)."""

    plan_index: int  # where the tick is in the data step's plan
    at: datetime
    plain: list[tuple[str, SymbolTick]]
    quotes: dict[str, Quote]
    marks: dict[str, Decimal]
    valued: Valuation  # the account at `marks`
    forecasts: list[Forecast]
    signals: list[Signal]
    refusals: list[tuple[Intent, Verdict]]


def takes_stretches(strategy: Strategy) -> TypeGuard[Outlined]:
    """Whether a run of `strategy` can take quiet stretches: it decides from its outline (a
    strategy that rests orders, or gates on several models, has every tick in the engine)."""
    return isinstance(strategy, Outlined)


class QuietStretch:
    def __init__(
        self,
        engine: Engine,
        market: PlannedDataStep,
        forecasters: Sequence[CachedForecaster],
        strategies: Mapping[str, Outlined],
    ) -> None:
        self.engine = engine
        self.market = market
        self.forecasters = forecasters
        self.strategies = strategies
        self._log = get_logger("trader.engine")
        # A backtest logs warnings only; with info on, each tick logs what the engine's would.
        self._verbose = self._log.is_enabled_for(logging.INFO)

    @classmethod
    def of(cls, engine: Engine) -> QuietStretch | None:
        """The engine's quiet stretches, where it can take them: a backtest's engine (quiet
        ticks, a planned data step, cached forecasts) and strategies that outline."""
        market, strategies = engine.market, engine.strategies
        forecasters = [f for f in engine.forecasters if isinstance(f, CachedForecaster)]
        outlined = {s: each for s, each in strategies.items() if takes_stretches(each)}
        if (
            engine.quiet is None
            or not isinstance(market, PlannedDataStep)
            or len(forecasters) < len(engine.forecasters)
            or len(outlined) < len(strategies)
        ):
            return None
        return cls(engine, market, forecasters, outlined)

    async def run(self, times: Sequence[datetime], start: int) -> int:
        """Book `times[start:]` while they stay quiet (at most `LONGEST`); how many were
        booked. 0: the engine must run `times[start]` itself."""
        engine = self.engine
        account, risk, quiet = engine.account, engine.risk, engine.quiet
        if (
            quiet is None
            or risk.day is None  # the run's first tick: the engine sees equity first
            or account.halted_by is not None
            or not quiet.applies(engine.reconciled)
        ):
            return 0
        records: list[TickRecord] = []
        reports: list[TickReport] = []
        change: TradingStatus | None = None
        # Nothing fills in a stretch: a flat account is worth the same at every tick of it.
        flat = None if account.portfolio.positions else valuation(account.portfolio, {})
        for at in times[start : start + LONGEST]:
            began = time.perf_counter()
            found = self._plan(at, flat)
            if found is None:
                break
            report, record, change = self._book(found, began)
            records.append(record)
            reports.append(report)
            if change is not None:
                break
        if not records:
            return 0
        account.begin_tick()  # the fills stage of the stretch's ticks: nothing rests
        quiet.move_cursor()
        await engine.ledger.commit_quiet_ticks(records, account.cursor_moves, change)
        account.cursor.update(account.cursor_moves)
        for report in reports:
            report.portfolio = account.portfolio
        if change is not None:
            with log_context(tick=reports[-1].at.isoformat()):
                announce(change, engine.hooks, self._log)
        for report in reports:
            engine.hooks.on_tick(report)
        return len(records)

    def _plan(self, at: datetime, flat: Valuation | None) -> _Quiet | None:
        """The tick at `at`, if it is quiet; nothing is changed. `flat`: the account's value
        when it holds nothing (else it is valued at the tick's marks)."""
        market = self.market
        index = market.index_of(at)
        plain = market.plain(index) if index is not None else None
        if index is None or plain is None:
            return None
        served = self._forecasts(plain)
        if served is None:
            return None
        forecasts, lasts = served
        return self._decide(index, at, plain, forecasts, lasts, flat)

    def _forecasts(
        self, plain: list[tuple[str, SymbolTick]]
    ) -> tuple[list[Forecast], list[Bar]] | None:
        """Every model's forecast of every symbol, model by model (the primary first), as
        the forecast stage reports them, and each symbol's newest bar; None when one is not
        cached (the model would run now: the engine's forecast stage does)."""
        windows, horizon = self.market.windows, self.engine.settings.forecast.horizon
        bounds = []
        for symbol, tick in plain:
            found = windows[symbol].bounds_after([bar for bar, _ in tick.added])
            if found is None:
                return None
            bounds.append(found)
        forecasts: list[Forecast] = []
        for forecaster in self.forecasters:
            for (symbol, _), (first, last, length) in zip(plain, bounds, strict=True):
                forecast = forecaster.served(symbol, first, last, length, horizon)
                if forecast is None or forecast.symbol != symbol:
                    return None
                forecasts.append(forecast)
        return forecasts, [last for _, last, _ in bounds]

    def _decide(
        self,
        index: int,
        at: datetime,
        plain: list[tuple[str, SymbolTick]],
        forecasts: list[Forecast],
        lasts: list[Bar],
        flat: Valuation | None,
    ) -> _Quiet | None:
        """Each symbol's decision and the order it implies, judged; None when a strategy
        fails (the engine's strategy stage logs it) or an order would be admitted."""
        engine = self.engine
        allow_short = engine.settings.strategy.allow_short
        quotes = {symbol: tick.quote for symbol, tick in plain if isinstance(tick.quote, Quote)}
        # Every symbol is priced: the marks are the quotes' mids (`current_marks`).
        marks = {symbol: quote.mid for symbol, quote in quotes.items()}
        portfolio = engine.account.portfolio
        valued = flat or valuation(portfolio, marks)
        books = books_valued(self.strategies, at, portfolio, valued, ())
        signals: list[Signal] = []
        refusals: list[tuple[Intent, Verdict]] = []
        for (symbol, quote), forecast, last in zip(quotes.items(), forecasts, lasts, strict=False):
            outlook = Outlook(forecast, last.close, quote, engine.costs, allow_short)
            try:
                signal, judged = self._decide_one(symbol, at, outlook, books[symbol])
            except Exception:
                return None  # the engine's stage that fails logs it, and goes on without it
            if judged is not None:
                if judged[1].accepted:
                    return None  # an order leaves: the engine's orders stage sends it
                refusals.append(judged)
            signals.append(signal)
        return _Quiet(index, at, plain, quotes, marks, valued, forecasts, signals, refusals)

    def _decide_one(
        self, symbol: str, at: datetime, outlook: Outlook, book: Book
    ) -> tuple[Signal, tuple[Intent, Verdict] | None]:
        """The symbol's signal, and the order it implies with the checks' verdict (None: no
        order), as the strategy, orders and risk stages make them."""
        engine, strategy, quote = self.engine, self.strategies[symbol], outlook.quote
        outline = strategy.outline(outlook)
        signal = Signal(
            strategy.name, symbol, at, outline.direction, outline.reason, outline.inputs
        )
        intent = engine.planner.market_intent(
            strategy.name, symbol, outline.direction, outline.edge_bps, at=at, quote=quote,
            instrument=engine.instruments[symbol], book=book,
        )  # fmt: skip
        if intent is None:
            return signal, None
        verdict = engine.admission.judge_at(intent, quote, at, quote.mid, book, reconciled=True)
        return signal, (intent, verdict)

    def _refuse(self, tick: _Quiet, report: TickReport) -> None:
        for intent, verdict in tick.refusals:
            self.engine.admission.refuse(intent, verdict, report)

    def _book(
        self, tick: _Quiet, began: float
    ) -> tuple[TickReport, TickRecord, TradingStatus | None]:
        """What the engine's stages do with a quiet tick, but for writing the ledger: the
        market moves on, refusals are reported, the risk engine sees the equity."""
        engine, at = self.engine, tick.at
        self.market.advance(tick.plan_index, at)
        report = TickReport(at)
        report.ready = [symbol for symbol, _ in tick.plain]
        report.quotes = tick.quotes
        report.quote_times = {
            symbol: planned.quote_time
            for symbol, planned in tick.plain
            if planned.quote_time is not None
        }
        report.forecasts = tick.forecasts
        report.decisions = tick.signals
        if self._verbose:
            with log_context(tick=at.isoformat()):
                for signal in tick.signals:
                    log_decision(self._log, signal)
                self._refuse(tick, report)
        else:
            self._refuse(tick, report)
        report.timings["quiet"] = time.perf_counter() - began
        record, change = settle(
            report, tick.marks, engine.account.portfolio, engine.risk, tick.valued
        )
        return report, record, change
