"""Quiet ticks: the short way through the fills and orders stages when nothing rests with a
broker whose account is the ledger's own (the paper broker), and no order is left unsent.

Then no bar or quote can fill or expire anything, so the fills stage has only the market
cursor to move; and when the risk checks refuse every order the decisions want, the orders
stage has nothing to send, cancel or book: the refusals are all it leaves in the report. An
order the checks would admit sends the tick the usual way through the orders stage, which
judges it again and sends it. A backtest is mostly such ticks; the engine takes this way
through them when it is built with `quiet_ticks` (a backtest's). The daemon is not: it keeps
one way for every tick.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from trader.broker.protocol import Broker
from trader.domain import Instrument
from trader.engine.account import Account
from trader.engine.admission import Admission
from trader.engine.planning import Intent, Planner
from trader.engine.report import TickReport
from trader.engine.sizing import books_for
from trader.engine.valuation import current_marks
from trader.market.step import MarketDataStep, TickData
from trader.risk.engine import Verdict
from trader.strategy.base import Decision


@dataclass(frozen=True, kw_only=True)
class QuietTicks:
    market: MarketDataStep
    broker: Broker
    account: Account
    admission: Admission
    instruments: Mapping[str, Instrument]

    def applies(self, reconciled: bool) -> bool:
        """Whether the tick about to run starts quiet: nothing rests, nothing is unsent."""
        account = self.account
        return (
            reconciled
            and not self.broker.external
            and not account.unsent
            and not account.recent
            and not self.broker.open_orders()
        )

    def move_cursor(self) -> None:
        """The fills stage when nothing rests: each symbol's cursor moves to its newest bar
        (what `RestingFills` books after handing the new bars to the broker)."""
        cursor, moves = self.account.cursor, self.account.cursor_moves
        for symbol, window in self.market.windows.items():
            last = window.last
            if last is None:
                continue
            booked = cursor.get(symbol)
            if booked is None or last.start > booked:
                moves[symbol] = last.start

    def refuse_all(
        self,
        decisions: Mapping[str, Decision],
        data: TickData,
        at: datetime,
        report: TickReport,
        planner: Planner,
    ) -> bool:
        """True when the risk checks refuse every order `decisions` want (the refusals are
        then in `report`); False, with nothing recorded, when one would be admitted."""
        if not decisions:
            return True
        portfolio = self.account.portfolio
        marks = report.marks = current_marks(self.market.windows, data)
        books = books_for(decisions, at, portfolio, marks, ())
        refused: list[tuple[Intent, Verdict]] = []
        for symbol, decision in decisions.items():
            symbol_data = data.ready[symbol]
            plan = planner.plan(
                decision, at=at, quote=symbol_data.quote, instrument=self.instruments[symbol],
                book=books[symbol],
            )  # fmt: skip
            for intent in plan.intents:
                verdict = self.admission.judge(
                    intent, symbol_data, at, marks, books[symbol], reconciled=True
                )
                if verdict.accepted:
                    return False
                refused.append((intent, verdict))
        for intent, verdict in refused:
            self.admission.refuse(intent, verdict, report)
        return True
