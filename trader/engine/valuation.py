"""What the positions are worth at a tick: the prices to value them at, and each one's exposure.
Sizing orders and booking the tick both value the portfolio this way."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import NamedTuple

from trader.domain import ZERO, Portfolio
from trader.market.step import TickData
from trader.market.window import BarWindow


def current_marks(windows: Mapping[str, BarWindow], data: TickData | None) -> dict[str, Decimal]:
    """Prices to value positions at: the quote's mid, else the last close seen."""
    marks = {}
    for symbol, window in windows.items():
        if window.last is not None:
            marks[symbol] = Decimal(repr(window.last.close))
    if data is not None:
        marks.update({s: d.quote.mid for s, d in data.ready.items()})
    return marks


def exposures(portfolio: Portfolio, marks: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """Each priced position's absolute value."""
    return {s: abs(p.amount * marks[s]) for s, p in portfolio.positions.items() if s in marks}


class Valuation(NamedTuple):
    """The portfolio valued at a tick's marks: what sizing and booking both read."""

    equity: Decimal
    held: dict[str, Decimal]  # each priced position's absolute value (`exposures`)
    exposure: Decimal  # their sum


def valuation(portfolio: Portfolio, marks: Mapping[str, Decimal]) -> Valuation:
    held = exposures(portfolio, marks)
    return Valuation(portfolio.equity(marks), held, sum(held.values(), ZERO))
