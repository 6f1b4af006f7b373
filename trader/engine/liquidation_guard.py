"""The liquidation buffer rule in the orders stage (`market.kind = "perp"`).

Before a strategy's orders go out, the account is read as the exchange counts it (a
`PerpAccount`: `trader.domain.perp.from_portfolio`, with the perp stage's terms and the mark
prices) and the risk engine's buffer rule (`RiskEngine.buffer_reductions`,
`trader.risk.liquidation`) says which positions are too near their liquidation price. Each such
symbol's plan becomes: cancel its resting orders, send one market order that only reduces
(leg "liquidation_buffer"), and nothing the strategy wanted that tick; a strategy that wants to
add is overridden. The order goes through the same risk checks as any other: a reducing order
skips the size, leverage and edge rules, and the broker sends it reduce-only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from structlog.typing import FilteringBoundLogger

from trader.domain import DomainError, Instrument, Order, OrderType, Portfolio, Quote, Side
from trader.domain.perp import LeverageBrackets, MarginMode, PerpAccount
from trader.domain.perp.from_portfolio import perp_account
from trader.engine.account import Account
from trader.engine.planning import Book, Intent, OrderPlan
from trader.engine.sizing import books_for
from trader.engine.valuation import current_marks
from trader.market.step import MarketDataStep, TickData
from trader.risk.engine import RiskEngine
from trader.risk.liquidation import BUFFER_RULE, BufferReduction, buffer_reductions


@dataclass(frozen=True)
class LiquidationGuard:
    risk: RiskEngine
    brackets: Mapping[str, LeverageBrackets]
    leverage: int
    margin_mode: MarginMode
    strategies: Mapping[str, str]  # symbol -> the strategy name its orders are made under
    log: FilteringBoundLogger
    slippage_bps: Decimal = Decimal(0)  # broker.slippage_bps: what a market order may slip
    # The funding each isolated position paid since it opened (the perp stage's
    # `PerpBook.isolated_funding`): out of its margin, so its liquidation price moves with it.
    isolated_funding: Callable[[], Mapping[str, Decimal]] = field(default=dict)

    def _account(
        self, portfolio: Portfolio, instruments: Mapping[str, Instrument]
    ) -> tuple[PerpAccount, dict[str, Decimal]]:
        """The book as the exchange counts it, and each held symbol's amount step."""
        account = perp_account(
            portfolio, self.brackets, leverage=self.leverage, margin_mode=self.margin_mode,
            isolated_funding=self.isolated_funding(),
        )  # fmt: skip
        return account, {s: instruments[s].amount_step for s in account.positions}

    def pending(
        self,
        portfolio: Portfolio,
        marks: Mapping[str, Decimal],
        instruments: Mapping[str, Instrument],
    ) -> bool:
        """Whether the rule would reduce now (nothing logged or counted): a backtest's quiet
        tick, which skips the orders stage, must not skip a reduction."""
        buffer = Decimal(repr(self.risk.settings.liquidation_buffer))
        try:
            account, steps = self._account(portfolio, instruments)
            return bool(buffer_reductions(account, marks, buffer=buffer, steps=steps))
        except (DomainError, KeyError):
            return True  # the orders stage runs the rule, and says why it cannot

    def wanted(
        self,
        portfolio: Portfolio,
        marks: Mapping[str, Decimal],
        instruments: Mapping[str, Instrument],
        quotes: Mapping[str, Quote] | None = None,
    ) -> list[BufferReduction]:
        """The rule's reductions now (each logged and counted), large enough that the buffer
        holds after the fill at the touch (`quotes`) with slippage and the taker fee; none when
        the account cannot be read (a held symbol without brackets or a mark is logged, never
        guessed)."""
        try:
            account, steps = self._account(portfolio, instruments)
            costs = {s: self._cost(s, marks, quotes or {}) for s in account.positions}
            return self.risk.buffer_reductions(account, marks, steps, costs)
        except (DomainError, KeyError) as error:
            self.log.error("liquidation buffer rule could not run", error=str(error))
            return []

    def _cost(
        self, symbol: str, marks: Mapping[str, Decimal], quotes: Mapping[str, Quote]
    ) -> Decimal:
        """Half the spread (the touch against the mark) and the slippage, a share of the mark."""
        slippage = self.slippage_bps / 10_000
        quote, mark = quotes.get(symbol), marks.get(symbol)
        if quote is None or mark is None or mark <= 0:
            return slippage
        return slippage + max(quote.ask - mark, mark - quote.bid, Decimal(0)) / mark

    def apply(
        self,
        plans: Mapping[str, OrderPlan],
        books: Mapping[str, Book],
        *,
        portfolio: Portfolio,
        marks: Mapping[str, Decimal],
        instruments: Mapping[str, Instrument],
        data: TickData,
        at: datetime,
        open_orders: Sequence[Order],
    ) -> tuple[dict[str, OrderPlan], dict[str, Book]]:
        """The plans and books with each reduced symbol's plan replaced by its reduction."""
        planned, booked = dict(plans), dict(books)
        quotes = {symbol: ready.quote for symbol, ready in data.ready.items()}
        for reduction in self.wanted(portfolio, marks, instruments, quotes):
            symbol = reduction.symbol
            ready = data.ready.get(symbol)
            if ready is None:
                self.log.error("liquidation buffer: no quote to reduce on", symbol=symbol)
                continue
            if symbol not in booked:
                booked.update(books_for([symbol], at, portfolio, marks, open_orders))
            quote = ready.quote
            touch = quote.ask if reduction.side is Side.BUY else quote.bid
            intent = Intent(
                self.strategies.get(symbol, BUFFER_RULE), symbol, reduction.side,
                OrderType.MARKET, reduction.amount, None, at, BUFFER_RULE, touch, None,
            )  # fmt: skip
            planned[symbol] = OrderPlan(tuple(booked[symbol].resting), (intent,))
        return planned, booked


def guard_pending(
    guard: LiquidationGuard | None,
    market: MarketDataStep,
    instruments: Mapping[str, Instrument],
    data: TickData,
    account: Account,
) -> bool:
    """Whether the orders stage's buffer rule would reduce at this tick, on the marks that
    stage values with."""
    if guard is None:
        return False
    marks = {**current_marks(market.windows, data), **account.perp_marks}
    return guard.pending(account.portfolio, marks, instruments)
