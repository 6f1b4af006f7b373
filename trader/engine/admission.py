"""Risk checks, the orders stage's gate: each new order is put to the risk engine before it may
leave. Until a reconciliation with an external broker has completed nothing new leaves at all.
A refusal is kept in the tick's report with its rule and logged."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal

from structlog.typing import FilteringBoundLogger

from trader.engine.planning import Book, Intent
from trader.engine.report import TickReport
from trader.market.step import SymbolData
from trader.risk.engine import OrderCheck, RiskEngine, Verdict
from trader.risk.state import TradingState


class Admission:
    def __init__(self, risk: RiskEngine, log: FilteringBoundLogger) -> None:
        self._risk = risk
        self._log = log

    def admit(
        self,
        intent: Intent,
        symbol_data: SymbolData,
        at: datetime,
        marks: Mapping[str, Decimal],
        book: Book,
        report: TickReport,
        *,
        reconciled: bool,
    ) -> bool:
        """Whether the intent's order may be sent; a refusal goes into the report."""
        order = intent  # judged before its `Order` is made
        if not reconciled and self._risk.state is not TradingState.HALTED:
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
        verdict = self._risk.check(check, at)
        if not verdict.accepted:
            report.refusals.append((order.symbol, verdict))
            if not self._log.is_enabled_for(logging.INFO):
                return False  # a backtest's log keeps to warnings: a refusal a tick
            self._log.info(
                "order refused", symbol=order.symbol, rule=verdict.rule, reason=verdict.reason,
                side=str(order.side), amount=str(order.amount), type=str(order.type),
            )  # fmt: skip
        return verdict.accepted
