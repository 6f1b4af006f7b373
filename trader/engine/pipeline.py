"""The tick: data -> fills -> forecast -> strategy -> orders -> ledger -> telemetry.

Backtest, paper and live run this same pipeline; only the parts differ (a replay feed or an
exchange, the paper broker or a live one). No stage can take the daemon down: a failure is
logged, counted in the report, and the symbols it concerns skip the tick.

Re-running an interrupted tick is safe. Orders have ids derived from (strategy, symbol, tick,
leg): one the ledger already has is never sent again; one it holds as PENDING (recorded, then
the process died before sending) is sent now. Fills are booked with the bars they came from,
so no bar fills an order twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from typing import Protocol, TypeVar

from trader.broker.protocol import Broker, BrokerHalt
from trader.config.schema import Settings
from trader.domain import (
    ZERO,
    Bar,
    Fill,
    Forecast,
    Instrument,
    Order,
    OrderStatus,
    Portfolio,
    Quote,
    Signal,
    from_epoch_ms,
    to_epoch_ms,
)
from trader.domain.execution import Execution
from trader.domain.reconciliation import ReconcileReport
from trader.engine.planning import Book, Intent, Planner
from trader.engine.reconciling import reconcile_ledger
from trader.forecast.protocol import Forecaster, ForecastRequest
from trader.ledger.trading import LedgerState, TickRecord, TradingLedger
from trader.logging import get_logger, log_context
from trader.market.calendar import CalendarRangeError
from trader.market.step import MarketDataStep, SymbolData, TickData
from trader.risk.engine import OrderCheck, RiskEngine, Verdict
from trader.risk.state import TradingState, TradingStatus
from trader.strategy.base import Costs, Decision, DecisionContext, Strategy

T = TypeVar("T")
STAGES = ("data", "fills", "forecast", "strategy", "orders", "ledger")  # "rollback" when needed


@dataclass
class TickReport:
    at: datetime
    timings: dict[str, float] = field(default_factory=dict)
    failed_stages: list[str] = field(default_factory=list)
    ready: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    forecasts: list[Forecast] = field(default_factory=list)
    decisions: list[Signal] = field(default_factory=list)
    orders: list[Order] = field(default_factory=list)  # every order state change this tick
    fills: list[Fill] = field(default_factory=list)
    refusals: list[tuple[str, Verdict]] = field(default_factory=list)
    equity: Decimal = ZERO
    status: TradingStatus | None = None
    # For telemetry: the quotes the tick priced with, the marks its equity used, the
    # drawdown it saw, and the portfolio once booked (None when the tick could not book).
    quotes: dict[str, Quote] = field(default_factory=dict)
    marks: dict[str, Decimal] = field(default_factory=dict)
    drawdown: float = 0.0
    portfolio: Portfolio | None = None

    @property
    def outcome(self) -> str:
        """ok; degraded (a stage failed, the tick still booked); failed (nothing booked)."""
        if {"data", "ledger", "rollback"} & set(self.failed_stages):
            return "failed"
        return "degraded" if self.failed_stages else "ok"


class EngineHooks(Protocol):
    """Where telemetry attaches (Prometheus, MQTT): told after each tick and state change."""

    def on_tick(self, report: TickReport) -> None: ...

    def on_state(self, status: TradingStatus) -> None: ...


class NoHooks:
    def on_tick(self, report: TickReport) -> None:
        return None

    def on_state(self, status: TradingStatus) -> None:
        return None


class Engine:
    def __init__(
        self,
        *,
        settings: Settings,
        market: MarketDataStep,
        forecasters: Sequence[Forecaster],
        strategies: Mapping[str, Strategy],
        risk: RiskEngine,
        broker: Broker,
        ledger: TradingLedger,
        instruments: Mapping[str, Instrument],
        state: LedgerState,
        hooks: EngineHooks | None = None,
        inference: Executor | None = None,
    ) -> None:
        if not forecasters:
            raise ValueError("the engine needs a forecaster")
        self.settings = settings
        self.market = market
        self.forecasters = list(forecasters)
        self.strategies = strategies
        self.risk = risk
        self.broker = broker
        self.ledger = ledger
        self.instruments = instruments
        self.hooks = hooks or NoHooks()
        self.planner = Planner(settings.strategy, settings.risk)
        self.costs = Costs(
            float(settings.broker.taker_fee_bps), float(settings.broker.maker_fee_bps)
        )
        # One worker per device: inference never runs on the event loop.
        self._inference = inference or ThreadPoolExecutor(1, thread_name_prefix="inference")
        self._log = get_logger("trader.engine")
        # An external broker trades only once a reconciliation has completed: at start-up
        # its account may have moved while the daemon was down.
        self.reconciled = not broker.external
        self._halted_by: TradingStatus | None = None  # a halt a stage caused this tick
        self._recover(state)

    def _recover(self, state: LedgerState) -> None:
        """Take up the ledger's state: at start, and after a tick that could not be booked."""
        self.portfolio = state.portfolio
        self.cursor = dict(state.cursor)
        self.broker.restore(state.open_orders, state.fill_counts)
        # Orders an interrupted tick already made: never made again when it re-runs.
        self._recent = dict(state.recent_orders)
        # Recorded but perhaps never sent before a restart: sent when their tick re-runs.
        self._unsent = {
            o.client_order_id: o for o in state.open_orders if o.status is OrderStatus.PENDING
        }
        self._executions: list[Execution] = []  # this tick's, booked when it ends
        self._cursor_moves: dict[str, datetime] = {}

    # --- reconciliation ---------------------------------------------------------------------

    async def reconcile(self, at: datetime) -> ReconcileReport:
        """Compare the broker's account with the ledger and book what the ledger missed (fills
        while the daemon was down, orders that ended). Anything unexplained halts trading until
        a person has looked; a reconciliation that could not finish (the venue unreachable)
        keeps new orders back until one does. Run it between ticks, never during one."""
        with log_context(reconcile=at.isoformat()):
            report = await reconcile_ledger(self.broker, self.ledger, at, in_memory=self.portfolio)
            try:
                self._recover(await self.ledger.load())
            except Exception:
                self._log.exception("the ledger could not be reloaded after reconciling")
                report = replace(
                    report, problems=(*report.problems, "the ledger could not be reloaded")
                )
            self.reconciled = report.incomplete is None and not report.problems
            if report.problems:
                self._log.error("reconciliation mismatch", summary=report.summary)
                await self._halt(f"reconciliation: {report.problems[0]}", at)
            elif report.incomplete is not None:
                self._log.warning("reconciliation incomplete", summary=report.summary)
            else:
                self._log.info("reconciled", summary=report.summary)
        return report

    async def _halt(self, reason: str, at: datetime) -> None:
        change = self.risk.halt(reason, at)
        if change is None:
            return
        try:
            await self.ledger.record_status(change, self.risk.day)
        except Exception:
            self._log.exception("the trading state could not be recorded")
        self._log.warning("trading state", state=str(change.state), reason=change.reason)
        self.hooks.on_state(change)

    # --- the tick ---------------------------------------------------------------------------

    async def tick(self, at: datetime) -> TickReport:
        report = TickReport(at)
        self._executions, self._cursor_moves = [], {}
        with log_context(tick=at.isoformat()):
            data = await self._stage(report, "data", lambda: self.market.run(at))
            if data is not None:
                report.ready = list(data.ready)
                report.quotes = {s: d.quote for s, d in data.ready.items()}
                report.skipped = {s: str(r) for s, r in data.skipped.items()}
                await self._stage(report, "fills", lambda: self._fill_resting(data, at, report))
                forecasts = await self._stage(
                    report, "forecast", lambda: self._forecast(data, report)
                )
                decisions = await self._stage(
                    report, "strategy", lambda: self._decide(data, forecasts or {}, at, report)
                )
                await self._stage(
                    report, "orders", lambda: self._act(decisions or {}, data, at, report)
                )
            if {"fills", "orders"} & set(report.failed_stages):
                # Half of a tick's money must not be booked: back to what the ledger holds.
                await self._stage(report, "rollback", lambda: self._roll_back(at))
            await self._stage(report, "ledger", lambda: self._record(data, at, report))
        self.hooks.on_tick(report)
        return report

    async def _roll_back(self, at: datetime) -> None:
        try:
            self._recover(await self.ledger.load())
        except Exception:
            # Memory and ledger may now disagree: nothing trades until a person looks.
            self.risk.halt("a failed tick could not be rolled back", at)
            raise

    async def _stage(
        self, report: TickReport, name: str, work: Callable[[], Awaitable[T]]
    ) -> T | None:
        began = time.perf_counter()
        try:
            return await work()
        except BrokerHalt as error:
            # The venue refuses our credentials: nothing more may be sent until a person
            # has fixed them. The change is booked with the tick.
            self._log.error("stage failed", stage=name, reason=str(error))
            report.failed_stages.append(name)
            self._halted_by = self.risk.halt(str(error), report.at) or self._halted_by
            return None
        except Exception:
            self._log.exception("stage failed", stage=name)
            report.failed_stages.append(name)
            return None
        finally:
            report.timings[name] = time.perf_counter() - began

    # --- fills ------------------------------------------------------------------------------

    async def _fill_resting(self, data: TickData, at: datetime, report: TickReport) -> None:
        """Resting orders meet the bars that closed since the last tick (and real quotes)."""
        fresh: list[Bar] = []
        cursor: dict[str, datetime] = {}
        for symbol, window in self.market.windows.items():
            last = self.cursor.get(symbol)
            # With no cursor yet nothing rests on this symbol: only the newest bar matters.
            new = window.since(last) if last is not None else window.since(None)[-1:]
            if new:
                fresh += new
                cursor[symbol] = new[-1].start
        quotes = {s: d.quote for s, d in data.ready.items()}
        self._book(await self.broker.on_market(fresh, quotes, at), report)
        self._cursor_moves.update(cursor)

    def _book(self, executions: Sequence[Execution], report: TickReport) -> None:
        """Apply fills to the portfolio now; the ledger gets them when the tick commits."""
        for execution in executions:
            for fill in execution.fills:
                self.portfolio = self.portfolio.apply(fill)
        self._executions += executions
        for execution in executions:
            report.orders.append(execution.order)
            report.fills += execution.fills
            for fill in execution.fills:
                self._log.info(
                    "fill", symbol=fill.symbol, side=str(fill.side), amount=str(fill.amount),
                    price=str(fill.price), fee=str(fill.fee), order=fill.client_order_id,
                )  # fmt: skip

    # --- forecast ---------------------------------------------------------------------------

    async def _forecast(self, data: TickData, report: TickReport) -> dict[str, dict[str, Forecast]]:
        forecast = self.settings.forecast
        requests = [
            ForecastRequest(d.symbol, d.bars, forecast.horizon, forecast.quantiles)
            for d in data.ready.values()
        ]
        by_model: dict[str, dict[str, Forecast]] = {}
        if not requests:
            return by_model
        loop = asyncio.get_running_loop()
        for forecaster in self.forecasters:
            try:
                results = await loop.run_in_executor(self._inference, forecaster.forecast, requests)
            except Exception:
                self._log.exception("forecast failed", model=forecaster.name)
                report.failed_stages.append(f"forecast:{forecaster.name}")
                continue
            usable = {
                f.symbol: f
                for request, f in zip(requests, results, strict=False)
                if f.symbol == request.symbol and f.steps == request.horizon
            }
            by_model[forecaster.name] = usable
            report.forecasts += usable.values()
        return by_model

    # --- strategy ---------------------------------------------------------------------------

    async def _decide(
        self,
        data: TickData,
        forecasts: Mapping[str, Mapping[str, Forecast]],
        at: datetime,
        report: TickReport,
    ) -> dict[str, Decision]:
        primary = forecasts.get(self.forecasters[0].name, {})
        decisions = {}
        for symbol, symbol_data in data.ready.items():
            if symbol not in primary:
                report.skipped[symbol] = "no_forecast"
                continue
            context = DecisionContext(
                symbol, at, symbol_data.bars, symbol_data.quote, primary[symbol],
                {m: f[symbol] for m, f in forecasts.items() if symbol in f},
                self.portfolio.amount(symbol), self.costs,
                self.settings.strategy.allow_short,
                self._horizon_end(symbol_data, primary[symbol].steps),
            )  # fmt: skip
            strategy = self.strategies[symbol]
            try:
                decision = strategy.decide(context)
            except Exception:
                self._log.exception("strategy failed", symbol=symbol, strategy=strategy.name)
                report.skipped[symbol] = "strategy_error"
                continue
            signal = decision.signal
            self._log.info(
                "decision", symbol=symbol, strategy=signal.strategy,
                direction=str(signal.direction), reason=signal.reason, **dict(signal.inputs),
            )  # fmt: skip
            report.decisions.append(signal)
            decisions[symbol] = decision
        return decisions

    # --- orders -----------------------------------------------------------------------------

    def _marks(self, data: TickData | None) -> dict[str, Decimal]:
        """Prices to value positions at: the quote's mid, else the last close seen."""
        marks = {}
        for symbol, window in self.market.windows.items():
            if window.last is not None:
                marks[symbol] = Decimal(repr(window.last.close))
        if data is not None:
            marks.update({s: d.quote.mid for s, d in data.ready.items()})
        return marks

    def _exposures(self, marks: Mapping[str, Decimal]) -> dict[str, Decimal]:
        return {
            s: abs(p.amount * marks[s]) for s, p in self.portfolio.positions.items() if s in marks
        }

    def _books(
        self, symbols: Iterable[str], at: datetime, equity: Decimal, marks: Mapping[str, Decimal]
    ) -> dict[str, Book]:
        exposures = self._exposures(marks)
        total = sum(exposures.values(), ZERO)
        resting: dict[str, list[Order]] = {}
        for order in self.broker.open_orders():
            # Orders of this very tick are its own plan (a re-run must not cancel them).
            if order.created_at < at:
                resting.setdefault(order.symbol, []).append(order)
        return {
            symbol: Book(
                position=self.portfolio.amount(symbol),
                equity=equity,
                others_exposure=total - exposures.get(symbol, ZERO),
                resting=resting.get(symbol, []),
            )
            for symbol in symbols
        }

    def _horizon_end(self, data: SymbolData, steps: int) -> datetime | None:
        """The close of the `steps`-th bar the symbol's market expects after its newest; None
        past the calendar's known sessions (the strategy then counts hours)."""
        calendar = self.market.calendars[data.symbol]
        after = to_epoch_ms(data.bars[-1].end)
        try:
            return from_epoch_ms(calendar.bar_end_after(self.market.timeframe, after, steps))
        except CalendarRangeError:
            return None

    async def _act(
        self, decisions: Mapping[str, Decision], data: TickData, at: datetime, report: TickReport
    ) -> None:
        marks = self._marks(data)
        equity = self.portfolio.equity(marks)
        books = self._books(decisions, at, equity, marks)
        plans = {
            symbol: self.planner.plan(
                decision,
                at=at,
                quote=data.ready[symbol].quote,
                instrument=self.instruments[symbol],
                book=books[symbol],
            )
            for symbol, decision in decisions.items()
        }
        executions: list[Execution] = []
        new: list[Order] = []
        resend: list[Order] = []
        for symbol, plan in plans.items():
            moved = False
            for order in plan.cancels:
                cancelled = await self.broker.cancel(order, at)
                if cancelled is not None:
                    executions.append(cancelled)
                    moved = moved or bool(cancelled.fills)
            if moved:
                # A live order filled while being cancelled: the plan was made from a position
                # that is gone. Nothing new for this symbol until the next tick plans afresh.
                self._log.info("plan dropped: filled while cancelling", symbol=symbol)
                continue
            for intent in plan.intents:
                cid = intent.order.client_order_id
                status = self._recent.get(cid)
                if status is OrderStatus.PENDING:
                    resend.append(self._unsent.get(cid, intent.order))
                elif status is None and self._admit(
                    intent, data.ready[symbol], at, marks, books[symbol], report
                ):
                    new.append(intent.order)
        if self.broker.external:
            # Recorded before it leaves: a crash in between leaves it PENDING, never lost.
            await self.ledger.record_orders(new, at, "created")
        for order in resend + new:
            self._unsent.pop(order.client_order_id, None)
            executions.append(await self.broker.submit(order, data.ready[order.symbol].quote, at))
        executions += await self._forget_unsent(at)
        self._recent = {}  # only the first tick after a restart can meet its own orders
        self._book(executions, report)

    async def _forget_unsent(self, at: datetime) -> list[Execution]:
        """Orders recorded before a restart whose tick is gone: they will never be sent."""
        executions = []
        for order in list(self._unsent.values()):
            if order.created_at < at:
                del self._unsent[order.client_order_id]
                if self.broker.external:
                    # It may have left before the crash: the broker looks before it cancels.
                    ended = await self.broker.cancel(order, at)
                    executions += [ended] if ended is not None else []
                else:
                    executions.append(Execution(order.transition(OrderStatus.CANCELED)))
        return executions

    def _admit(
        self,
        intent: Intent,
        symbol_data: SymbolData,
        at: datetime,
        marks: Mapping[str, Decimal],
        book: Book,
        report: TickReport,
    ) -> bool:
        order = intent.order
        if not self.reconciled and self.risk.state is not TradingState.HALTED:
            verdict = Verdict(False, "unreconciled", "no complete reconciliation with the broker")
            report.refusals.append((order.symbol, verdict))
            self._log.info("order refused", symbol=order.symbol, rule=verdict.rule)
            return False
        check = OrderCheck(
            order=order,
            price=intent.price,
            quote=symbol_data.quote,
            position=book.position,
            mark=marks[order.symbol],
            others_exposure=book.others_exposure,
            edge_bps=intent.edge_bps,
        )
        verdict = self.risk.check(check, at)
        if not verdict.accepted:
            report.refusals.append((order.symbol, verdict))
            self._log.info(
                "order refused", symbol=order.symbol, rule=verdict.rule, reason=verdict.reason,
                side=str(order.side), amount=str(order.amount), type=str(order.type),
            )  # fmt: skip
        return verdict.accepted

    # --- record -----------------------------------------------------------------------------

    async def _record(self, data: TickData | None, at: datetime, report: TickReport) -> None:
        marks = self._marks(data)
        equity = self.portfolio.equity(marks)
        exposure = sum(self._exposures(marks).values(), ZERO)
        change = self.risk.observe_equity(at, equity) or self._halted_by
        self._halted_by = None
        report.equity, report.status = equity, self.risk.status
        report.marks, report.drawdown = marks, self.risk.drawdown(equity)
        record = TickRecord(
            at=at,
            outcome=report.outcome,
            ready=len(report.ready),
            skipped=report.skipped,
            timings=report.timings,
            forecasts=report.forecasts,
            decisions=report.decisions,
            equity=equity,
            cash=self.portfolio.cash,
            exposure=exposure,
            drawdown=self.risk.drawdown(equity),
            status=self.risk.status,
            day=self.risk.day,
        )
        try:
            await self.ledger.commit_tick(
                self._executions, self.portfolio, self._cursor_moves, record, change
            )
        except Exception:
            # Nothing of this tick is booked: forget it here too, and stop trading until a
            # person has looked (the disk may be full, the file unwritable).
            self._recover(await self.ledger.load())
            self.risk.halt("the ledger could not book a tick", at)
            raise
        self.cursor.update(self._cursor_moves)
        report.portfolio = self.portfolio
        if change is not None:
            self._log.warning("trading state", state=str(change.state), reason=change.reason)
            self.hooks.on_state(change)

    def close(self) -> None:
        self._inference.shutdown(wait=True)
        self.broker.close()
