"""The tick's orders stage: size the decisions into plans, cancel what each plan replaces, put
its new orders to the risk checks, and send those admitted to the broker. What the broker did
(cancels, fills, orders now open) is booked in memory; the ledger gets it when the tick commits.

Orders have ids derived from (strategy, symbol, tick, leg), so re-running an interrupted tick
is safe: one the ledger already has is never sent again; one it holds as PENDING (recorded,
then the process died before sending) is sent now. With an external broker an order is
recorded before it leaves, so a crash in between leaves it PENDING, never lost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from structlog.typing import FilteringBoundLogger

from trader.broker.protocol import Broker
from trader.domain import Instrument, Order, OrderStatus
from trader.domain.execution import Execution
from trader.engine.account import Account
from trader.engine.admission import Admission
from trader.engine.liquidation_guard import LiquidationGuard
from trader.engine.planning import Planner
from trader.engine.report import TickReport
from trader.engine.sizing import books_for, plan_orders
from trader.engine.valuation import current_marks
from trader.ledger.trading import TradingLedger
from trader.market.step import MarketDataStep, TickData
from trader.strategy.base import Decision


@dataclass(frozen=True, kw_only=True)
class OrderRouting:
    market: MarketDataStep
    broker: Broker
    ledger: TradingLedger
    instruments: Mapping[str, Instrument]
    account: Account
    admission: Admission
    log: FilteringBoundLogger
    guard: LiquidationGuard | None = None  # a perpetual account's liquidation buffer rule

    async def run(
        self,
        decisions: Mapping[str, Decision],
        data: TickData,
        at: datetime,
        report: TickReport,
        planner: Planner,
        reconciled: bool,
    ) -> None:
        """Size, check and send the tick's orders; what the broker did is booked in memory."""
        account = self.account
        marks = report.marks = {**current_marks(self.market.windows, data), **account.perp_marks}
        books = books_for(decisions, at, account.portfolio, marks, self.broker.open_orders())
        plans = plan_orders(planner, decisions, data, at, self.instruments, books)
        if self.guard is not None:  # before, and instead of, a strategy's orders
            plans, books = self.guard.apply(
                plans, books, portfolio=account.portfolio, marks=marks,
                instruments=self.instruments, data=data, at=at,
                open_orders=self.broker.open_orders(),
            )  # fmt: skip
        # Each plan's cancels first, then its new orders through the risk checks.
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
                self.log.info("plan dropped: filled while cancelling", symbol=symbol)
                continue
            for intent in plan.intents:
                # Only the first tick after a restart can meet orders it already made.
                recent = account.recent
                status = recent.get(intent.order.client_order_id) if recent else None
                if status is OrderStatus.PENDING:
                    resend.append(account.unsent.get(intent.order.client_order_id, intent.order))
                elif status is None and self.admission.admit(
                    intent, data.ready[symbol], at, marks, books[symbol], report,
                    reconciled=reconciled,
                ):  # fmt: skip
                    new.append(intent.order)
        # To the broker: the orders a restart left unsent, then the new ones.
        if self.broker.external:
            # Recorded before it leaves: a crash in between leaves it PENDING, never lost.
            await self.ledger.record_orders(new, at, "created")
        for order in resend + new:
            account.unsent.pop(order.client_order_id, None)
            executions.append(await self.broker.submit(order, data.ready[order.symbol].quote, at))
        executions += await self._forget_unsent(at)
        account.recent = {}  # only the first tick after a restart can meet its own orders
        account.book(executions, report)

    async def _forget_unsent(self, at: datetime) -> list[Execution]:
        """Orders recorded before a restart whose tick is gone: they will never be sent."""
        account = self.account
        executions = []
        for order in list(account.unsent.values()):
            if order.created_at < at:
                del account.unsent[order.client_order_id]
                if self.broker.external:
                    # It may have left before the crash: the broker looks before it cancels.
                    ended = await self.broker.cancel(order, at)
                    executions += [ended] if ended is not None else []
                else:
                    executions.append(Execution(order.transition(OrderStatus.CANCELED)))
        return executions
