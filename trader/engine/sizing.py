"""Sizing, the first step of the tick's orders stage: what the account looks like to each
decided symbol (its position, the equity, the other symbols' exposure, its resting orders), and
the planner's orders for it: what to cancel, and what to send at which size."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal

from trader.domain import ZERO, Instrument, Order, Portfolio
from trader.engine.planning import Book, OrderPlan, Planner
from trader.engine.valuation import Valuation, valuation
from trader.market.step import TickData
from trader.strategy.base import Decision


def books_for(
    symbols: Iterable[str],
    at: datetime,
    portfolio: Portfolio,
    marks: Mapping[str, Decimal],
    open_orders: Sequence[Order],
) -> dict[str, Book]:
    """Each symbol's view of the account, valued at `marks`."""
    return books_valued(symbols, at, portfolio, valuation(portfolio, marks), open_orders)


def books_valued(
    symbols: Iterable[str],
    at: datetime,
    portfolio: Portfolio,
    valued: Valuation,
    open_orders: Sequence[Order],
) -> dict[str, Book]:
    """`books_for`, the account already valued."""
    equity, held, total = valued
    resting: dict[str, list[Order]] = {}
    for order in open_orders:
        # Orders of this very tick are its own plan (a re-run must not cancel them).
        if order.created_at < at:
            resting.setdefault(order.symbol, []).append(order)
    return {
        symbol: Book(
            position=portfolio.amount(symbol),
            equity=equity,
            others_exposure=total - held.get(symbol, ZERO),
            resting=resting.get(symbol, []),
        )
        for symbol in symbols
    }


def plan_orders(
    planner: Planner,
    decisions: Mapping[str, Decision],
    data: TickData,
    at: datetime,
    instruments: Mapping[str, Instrument],
    books: Mapping[str, Book],
) -> dict[str, OrderPlan]:
    """Each decided symbol's plan."""
    return {
        symbol: planner.plan(
            decision,
            at=at,
            quote=data.ready[symbol].quote,
            instrument=instruments[symbol],
            book=books[symbol],
        )
        for symbol, decision in decisions.items()
    }
