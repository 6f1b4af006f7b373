"""Risk checks, the orders stage's gate: each new order is put to the risk engine before it may
leave. Until a reconciliation with an external broker has completed nothing new leaves at all.
A refusal is kept in the tick's report with its rule and logged."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal

from structlog.typing import FilteringBoundLogger

from trader.domain import Quote
from trader.engine.planning import Book, Intent
from trader.engine.report import TickReport
from trader.market.step import SymbolData
from trader.risk.engine import OrderCheck, RiskEngine, Verdict
from trader.risk.liquidation import BUFFER_RULE, PerpExposure
from trader.risk.state import TradingState

UNRECONCILED = Verdict(False, "unreconciled", "no complete reconciliation with the broker")


class Admission:
    def __init__(self, risk: RiskEngine, log: FilteringBoundLogger, *, perp: bool = False) -> None:
        """`perp`: the account trades perpetuals, and each order is put to the leverage check
        (its equity is the margin balance: wallet + unrealised P&L on the marks)."""
        self._risk = risk
        self._log = log
        self._perp = perp

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
        verdict = self.judge(intent, symbol_data, at, marks, book, reconciled=reconciled)
        if verdict.accepted:
            self._risk.sent(at)
        else:
            self.refuse(intent, verdict, report)
        return verdict.accepted

    def judge(
        self,
        intent: Intent,
        symbol_data: SymbolData,
        at: datetime,
        marks: Mapping[str, Decimal],
        book: Book,
        *,
        reconciled: bool,
    ) -> Verdict:
        """The verdict on the intent's order, with nothing recorded (`admit` records it)."""
        return self.judge_at(
            intent, symbol_data.quote, at, marks[intent.symbol], book, reconciled=reconciled
        )

    def judge_at(
        self,
        intent: Intent,
        quote: Quote,
        at: datetime,
        mark: Decimal,
        book: Book,
        *,
        reconciled: bool,
    ) -> Verdict:
        """`judge`, given the symbol's quote and mark."""
        if not reconciled and self._risk.state is not TradingState.HALTED:
            return UNRECONCILED
        check = OrderCheck(
            order=intent,  # judged before its `Order` is made
            price=intent.price,
            quote=quote,
            position=book.position,
            mark=mark,
            others_exposure=book.others_exposure,
            edge_bps=intent.edge_bps,
            perp=PerpExposure(book.others_exposure, book.equity) if self._perp else None,
            averts_liquidation=intent.leg == BUFFER_RULE,
        )
        return self._risk.judge(check, at)

    def refuse(self, intent: Intent, verdict: Verdict, report: TickReport) -> None:
        """A refusal: into the tick's report, and the log."""
        report.refusals.append((intent.symbol, verdict))
        if not self._log.is_enabled_for(logging.INFO):
            return  # a backtest's log keeps to warnings: a refusal a tick
        if verdict is UNRECONCILED:
            self._log.info("order refused", symbol=intent.symbol, rule=verdict.rule)
            return
        self._log.info(
            "order refused", symbol=intent.symbol, rule=verdict.rule, reason=verdict.reason,
            side=str(intent.side), amount=str(intent.amount), type=str(intent.type),
        )  # fmt: skip
