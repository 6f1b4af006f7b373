"""The tick: data -> fills -> forecast -> strategy -> orders -> ledger -> telemetry.

Backtest, paper and live run this same pipeline; only the parts differ (a replay feed or an
exchange, the paper broker or a live one). No stage can take the daemon down: a failure is
logged, counted in the report, and the symbols it concerns skip the tick.

Re-running an interrupted tick is safe. Orders have ids derived from (strategy, symbol, tick,
leg): one the ledger already has is never sent again; one it holds as PENDING (recorded, then
the process died before sending) is sent now. Fills are booked with the bars they came from,
so no bar fills an order twice.

Each stage is a part of its own: `RestingFills` (fills.py), `Forecasting` (forecasting.py),
`Deciding` (deciding.py), `OrderRouting` (routing.py: sizing.py, then admission.py's risk
checks, then the broker), `TickBooking` (booking.py); `Account` (account.py) holds what they
share between ticks, and `StageRunner` (stages.py) runs each one timed and without raising.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import replace
from datetime import datetime

from trader.broker.protocol import Broker
from trader.config.schema import Settings
from trader.domain import Forecast, Instrument, Portfolio
from trader.domain.reconciliation import ReconcileReport
from trader.engine.account import Account
from trader.engine.admission import Admission
from trader.engine.booking import TickBooking
from trader.engine.deciding import Deciding
from trader.engine.fills import RestingFills
from trader.engine.forecasting import Forecasting
from trader.engine.liquidation_guard import LiquidationGuard, guard_pending
from trader.engine.perps import PerpBook
from trader.engine.planning import Planner
from trader.engine.quiet import QuietTicks
from trader.engine.reconciling import reconcile_ledger
from trader.engine.report import EngineHooks, NoHooks, TickReport, announce
from trader.engine.routing import OrderRouting
from trader.engine.stages import StageRunner
from trader.engine.valuation import current_marks
from trader.engine.write_outage import WriteOutage
from trader.forecast.protocol import Forecaster
from trader.ledger.funding import FundingRow
from trader.ledger.trading import LedgerState, TradingLedger
from trader.logging import get_logger, log_context
from trader.market.step import MarketDataStep, TickData
from trader.risk.engine import RiskEngine
from trader.strategy.base import Costs, Decision, Strategy


class Engine:
    """The parts a tick runs through. `settings`, `planner` and `strategies` may be replaced
    between ticks (a reload, a flatten): each tick hands the current ones to its stages."""

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
        quiet_ticks: bool = False,
        perps: PerpBook | None = None,
    ) -> None:
        """`quiet_ticks`: take the short way through ticks where nothing rests and every order
        is refused (`quiet.QuietTicks`); a backtest's engine does. `perps`: the perp stage
        (funding, liquidation, mark prices: `perps.PerpBook`), for `market.kind = "perp"`."""
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
        self.perps = perps
        # The venue's funding rows a reconciliation booked, for the metrics (set at start-up).
        self.on_funding_booked: Callable[[Sequence[FundingRow]], None] | None = None
        self.planner = Planner.of(settings)
        self.costs = Costs(
            float(settings.broker.taker_fee_bps), float(settings.broker.maker_fee_bps)
        )
        log = self._log = get_logger("trader.engine")
        self._forecasting = Forecasting(self.forecasters, inference, log)
        # An external broker trades only once a reconciliation has completed: at start-up
        # its account may have moved while the daemon was down.
        self.reconciled = not broker.external
        self.account = Account(state, broker, log)
        # A disk that refuses the ledger's writes halts trading until it takes them again.
        self.write_outage = outage = WriteOutage(risk, ledger.database.path, log)
        self._stage = StageRunner(risk, self.account, outage, log)
        self._fills = RestingFills(market, broker, self.account)
        self._deciding = Deciding(market, self.account, self.forecasters, self.costs, log)
        admission = self.admission = Admission(risk, log, perp=perps is not None)
        guard = None
        if perps is not None:  # the liquidation buffer rule, on the perp stage's terms
            terms = perps.terms
            guard = LiquidationGuard(
                risk, terms.brackets, terms.leverage, terms.margin_mode,
                {symbol: strategy.name for symbol, strategy in strategies.items()}, log,
                settings.broker.slippage_bps, isolated_funding=perps.isolated_funding,
            )  # fmt: skip
        self._orders = OrderRouting(
            market=market, broker=broker, ledger=ledger, instruments=instruments,
            account=self.account, admission=admission, log=log, guard=guard,
        )  # fmt: skip
        self._booking = TickBooking(
            market=market, risk=risk, ledger=ledger, account=self.account, outage=outage, log=log
        )
        self.quiet = QuietTicks(
            market=market, broker=broker, account=self.account, admission=admission,
            instruments=instruments,
        ) if quiet_ticks else None  # fmt: skip

    @property
    def portfolio(self) -> Portfolio:
        return self.account.portfolio

    @portfolio.setter
    def portfolio(self, portfolio: Portfolio) -> None:
        self.account.portfolio = portfolio

    @property
    def cursor(self) -> dict[str, datetime]:
        """Per symbol: the last bar whose fills are booked."""
        return self.account.cursor

    # --- the tick ---------------------------------------------------------------------------

    async def tick(self, at: datetime) -> TickReport:
        """One tick, stage by stage: each stage's module says what it does."""
        report, stage = TickReport(at), self._stage
        data: TickData | None = None  # a stage that fails leaves its result None
        forecasts: dict[str, dict[str, Forecast]] | None = None
        decisions: dict[str, Decision] | None = None
        self.account.begin_tick()
        quiet = self.quiet if self.quiet and self.quiet.applies(self.reconciled) else None
        with log_context(tick=at.isoformat()):
            with stage(report, "data"):
                data = await self.market.run(at)
            if data is not None:
                report.saw(data)
                with stage(report, "fills"):
                    if quiet is not None:
                        quiet.move_cursor()  # nothing rests: nothing can fill
                    else:
                        await self._fills.run(data, at, report)
            if self.perps is not None:
                with stage(report, "perp"):  # after the bars' fills, before our orders
                    closes = current_marks(self.market.windows, data)
                    await self.perps.run(at, self.account, report, closes)
            if data is not None:
                with stage(report, "forecast"):
                    forecasts = await self._forecasting.run(data, self.settings.forecast, report)
                with stage(report, "strategy"):
                    decisions = await self._deciding.run(
                        data, forecasts or {}, at, report, self.strategies, self.settings.strategy
                    )
                with stage(report, "orders"):
                    if quiet is not None and guard_pending(
                        self._orders.guard, self.market, self.instruments, data, self.account
                    ):
                        quiet = None  # a reduction of the buffer rule goes out
                    if quiet is None or not quiet.refuse_all(
                        decisions or {}, data, at, report, self.planner
                    ):
                        await self._orders.run(
                            decisions or {}, data, at, report, self.planner, self.reconciled
                        )
            if {"fills", "perp", "orders"} & set(report.failed_stages):
                with stage(report, "rollback"):  # half of a tick's money is never booked
                    await self._booking.roll_back(at)
            with stage(report, "ledger"):
                await self._booking.commit(data, at, report, self.hooks)
            report.write_failures = self.write_outage.end_tick(self.hooks)
        self.hooks.on_tick(report)
        return report

    # --- reconciliation ---------------------------------------------------------------------

    async def reconcile(self, at: datetime) -> ReconcileReport:
        """Compare the broker's account with the ledger and book what the ledger missed (fills
        while the daemon was down, orders that ended). Anything unexplained halts trading until
        a person has looked; a reconciliation that could not finish (the venue unreachable)
        keeps new orders back until one does. Run it between ticks, never during one."""
        with log_context(reconcile=at.isoformat()):
            report = await reconcile_ledger(
                self.broker, self.ledger, at, in_memory=self.portfolio,
                on_funding=self.on_funding_booked,
            )  # fmt: skip
            try:
                self.account.recover(await self.ledger.load())
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
        announce(change, self.hooks, self._log)

    def close(self) -> None:
        self._forecasting.close()
        self.broker.close()
