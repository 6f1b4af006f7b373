"""A perpetual's backtest figures (`market.kind = "perp"`). The engine pays funding at each
funding time, out of cash, at the tick it falls in, values positions on the mark price and
liquidates (`engine.perps`): the ledger's equity (a strategy's portfolio line) holds all of it.
Each symbol's own curve, worked out from its fills after the run, is moved here the same way:
less the funding rows the engine booked for that symbol, its open positions valued on the
recorded mark price instead of the bar close. The last point of a curve, where what is still
held is closed at the last bid or ask, stays the closing's: a position is closed at the traded
price, not the mark. Buy-and-hold, which no engine runs, pays funding computed here
(`funding.hold_funding`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import numpy as np

from trader.backtest.activity import SymbolCurve
from trader.backtest.funding import (
    FROM_CANDLE,
    FROM_CLOSE,
    FROM_RECORD,
    Closes,
    FundingPayment,
    FundingTotals,
    PerpData,
    PerpSymbol,
    hold_funding,
    marked,
    paid_by_tick,
    totals,
)
from trader.backtest.hold import Holding
from trader.domain.perp.default_brackets import DEFAULT_BRACKETS_SOURCE
from trader.ledger.funding import FundingRow

ENGINE_NOTE = (
    "perpetual: the engine paid funding at each recorded funding time out of cash, valued "
    "positions on the mark price and would liquidate at the mark (broker.margin_mode, "
    "risk.max_leverage; default leverage brackets: " + DEFAULT_BRACKETS_SOURCE + ")"
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def payment(row: FundingRow, perp: PerpSymbol) -> FundingPayment:
    """A funding row the engine booked, as the report lists it (with where its mark came
    from: the funding record's own, a mark candle's, or the bar close)."""
    at_ms = (row.at - _EPOCH) // timedelta(milliseconds=1)  # exact: no float seconds
    recorded = next((r for r in perp.rates if r.at_ms == at_ms), None)
    if recorded is not None and recorded.mark is not None:
        source = FROM_RECORD
    elif perp.marks is not None and perp.marks.last_at(at_ms) is not None:
        source = FROM_CANDLE
    else:
        source = FROM_CLOSE
    if row.rate is None or row.mark is None or row.position is None:
        raise ValueError(f"{row.symbol}: a funding row at {row.at} without its rate and mark")
    return FundingPayment(row.symbol, at_ms, row.rate, row.mark, source, row.position, row.paid)


@dataclass
class FundingBook:
    """The funding each strategy (and buy-and-hold) paid, by symbol, and the curves it moved."""

    perp: PerpData
    ticks_ms: np.ndarray
    closes: Mapping[str, Closes]
    payments: dict[str, dict[str, list[FundingPayment]]] = field(default_factory=dict)
    hold_paid: dict[str, float] = field(default_factory=dict)  # buy-and-hold, net by symbol

    @classmethod
    def of(
        cls, perp: PerpData, ticks_ms: np.ndarray, closes: Mapping[str, Mapping[int, float]]
    ) -> FundingBook:
        return cls(perp, ticks_ms, {s: Closes.of(c) for s, c in closes.items()})

    def _revalued(self, symbol: str, positions: np.ndarray, bar_closes: np.ndarray) -> np.ndarray:
        """What valuing `positions` (after each tick) on the mark adds at each point of a
        curve; nothing at the first (the start) and the last (closed at the traded price)."""
        marks = marked(self.perp.symbols[symbol], self.ticks_ms, bar_closes)
        moved = np.concatenate([[0.0], positions * (marks - bar_closes)])
        moved[-1] = 0.0
        return moved

    def strategy_curve(
        self,
        strategy: str,
        symbol: str,
        funding: Sequence[FundingRow],
        curve: SymbolCurve,
        bar_closes: np.ndarray,
    ) -> np.ndarray:
        """A strategy's curve on one symbol (`curve`, from its fills, valued at `bar_closes`),
        less the `funding` the engine booked for it, on the mark price."""
        ticks, perp = self.ticks_ms, self.perp.symbols[symbol]
        booked = [payment(row, perp) for row in funding if row.symbol == symbol]
        self.payments.setdefault(strategy, {})[symbol] = booked
        moved = self._revalued(symbol, curve.position, bar_closes) - paid_by_tick(booked, ticks)
        equity: np.ndarray = curve.equity + moved
        return equity

    def portfolio_curve(self, strategy: str, equity: np.ndarray) -> np.ndarray:
        """The ledger's equity of a strategy (E_0 .. E_N): the engine's, funding and marks
        already in it."""
        return equity

    def hold(self, symbol: str, held: Holding, bar_closes: np.ndarray) -> Holding:
        """Buy-and-hold on `symbol` (valued at `bar_closes`), paying funding as a strategy
        does, on the mark price."""
        perp = self.perp.symbols[symbol]
        paid = hold_funding(held.position, self.ticks_ms, perp, self.closes[symbol])
        self.hold_paid[symbol] = float(paid[-1])
        moved = self._revalued(symbol, held.position, bar_closes) - paid
        return replace(held, equity=held.equity + moved)

    def said(self, notes: Sequence[str], warnings: Sequence[str]) -> tuple[list[str], list[str]]:
        """A backtest's notes and warnings with what this book changes in its figures."""
        return [*notes, *self.perp.notes(), ENGINE_NOTE], [*warnings, *self.perp.warnings()]

    def totals(self, strategy: str, symbol: str | None = None) -> FundingTotals:
        """What `strategy` paid and received on `symbol` (None: every symbol)."""
        by_symbol = self.payments.get(strategy, {})
        wanted = by_symbol.values() if symbol is None else [by_symbol.get(symbol, [])]
        return totals(p for listed in wanted for p in listed)
