"""The engine's books in memory: what it holds between ticks (the portfolio, how far the market's
bars have been filled against, the orders a re-run of a tick may meet again) and what the
running tick has done but not yet booked (its executions, cursor moves, and a halt one of its
stages caused). The ledger gets the tick's part when the tick commits; until then only this
changes, so a tick that cannot be booked is forgotten by taking the ledger's state up again."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from structlog.typing import FilteringBoundLogger

from trader.broker.paper_perp import PaperPerps
from trader.broker.protocol import Broker
from trader.domain import Order, OrderStatus, Portfolio
from trader.domain.execution import Execution
from trader.engine.report import TickReport
from trader.ledger.funding import PerpRows
from trader.ledger.trading import LedgerState
from trader.risk.state import TradingStatus


class Account:
    portfolio: Portfolio
    cursor: dict[str, datetime]  # per symbol: the last bar whose fills are booked
    recent: dict[str, OrderStatus]  # orders an interrupted tick already made
    unsent: dict[str, Order]  # recorded before a restart, perhaps never sent
    executions: list[Execution]  # this tick's, booked when it ends
    cursor_moves: dict[str, datetime]  # this tick's, booked when it ends
    # Perpetuals (`perps`): the last tick booked (funding falls due after it), this tick's
    # funding and liquidation rows, and the mark prices positions are valued on.
    last_tick: datetime | None
    perp: PerpRows
    perp_marks: dict[str, Decimal]

    def __init__(self, state: LedgerState, broker: Broker, log: FilteringBoundLogger) -> None:
        self._broker = broker
        self._log = log
        self.halted_by: TradingStatus | None = None  # a halt a stage caused this tick
        self.recover(state)

    def recover(self, state: LedgerState) -> None:
        """Take up the ledger's state: at start, and after a tick that could not be booked."""
        self.portfolio = state.portfolio
        self.cursor = dict(state.cursor)
        self._broker.restore(state.open_orders, state.fill_counts)
        perps = getattr(self._broker, "perps", None)  # the paper broker's perpetuals
        if isinstance(perps, PaperPerps):
            perps.restored(state.portfolio, state.open_orders)
        # Orders an interrupted tick already made: never made again when it re-runs.
        self.recent = dict(state.recent_orders)
        # Recorded but perhaps never sent before a restart: sent when their tick re-runs.
        self.unsent = {
            o.client_order_id: o for o in state.open_orders if o.status is OrderStatus.PENDING
        }
        self.executions = []
        self.cursor_moves = {}
        self.last_tick = state.last_tick
        self.perp, self.perp_marks = PerpRows(), {}

    def begin_tick(self) -> None:
        self.executions, self.cursor_moves = [], {}
        self.perp = PerpRows()

    def book(self, executions: Sequence[Execution], report: TickReport) -> None:
        """Apply fills to the portfolio now; the ledger gets them when the tick commits."""
        for execution in executions:
            for fill in execution.fills:
                self.portfolio = self.portfolio.apply(fill)
        self.executions += executions
        for execution in executions:
            report.orders.append(execution.order)
            report.fills += execution.fills
            for fill in execution.fills:
                self._log.info(
                    "fill", symbol=fill.symbol, side=str(fill.side), amount=str(fill.amount),
                    price=str(fill.price), fee=str(fill.fee), order=fill.client_order_id,
                )  # fmt: skip
