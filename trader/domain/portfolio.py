"""Positions as FIFO lots and a single-currency portfolio, both derived from fills exactly.

FIFO lots keep realised P&L a sum of products, `(exit - entry) * amount`, so it never needs a
division and stays exact; an average entry price is only a display value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType

from trader.domain.errors import DomainError
from trader.domain.fill import Fill
from trader.domain.money import ZERO, exact, positive_decimal, to_decimal
from trader.domain.side import Side
from trader.domain.symbols import base_currency, check_symbol, quote_currency


def _sign(value: Decimal) -> int:
    return 1 if value > 0 else -1


@dataclass(frozen=True, slots=True)
class Lot:
    """`amount` is signed: positive long, negative short."""

    amount: Decimal
    price: Decimal

    def __post_init__(self) -> None:
        if to_decimal(self.amount, "lot amount") == 0:
            raise DomainError("a lot has a non-zero amount")
        positive_decimal(self.price, "lot price")


@dataclass(frozen=True, slots=True)
class Position:
    symbol: str
    lots: tuple[Lot, ...] = ()
    amount: Decimal = field(init=False)
    cost: Decimal = field(init=False)  # what the open lots cost; negative for shorts

    def __post_init__(self) -> None:
        check_symbol(self.symbol)
        if len({_sign(lot.amount) for lot in self.lots}) > 1:
            raise DomainError(f"{self.symbol}: lots are all long or all short")
        with exact():
            object.__setattr__(self, "amount", sum((lot.amount for lot in self.lots), ZERO))
            cost = sum((lot.amount * lot.price for lot in self.lots), ZERO)
            object.__setattr__(self, "cost", cost)

    @classmethod
    def _derived(
        cls, symbol: str, lots: tuple[Lot, ...], amount: Decimal, cost: Decimal
    ) -> Position:
        """A position `apply` built: it keeps the invariants `__post_init__` checks, so the
        O(lots) re-check is skipped; a strategy that scales in bar by bar builds many lots."""
        position = object.__new__(cls)
        for name, value in (("symbol", symbol), ("lots", lots), ("amount", amount), ("cost", cost)):
            object.__setattr__(position, name, value)
        return position

    def unrealized_pnl(self, mark: Decimal) -> Decimal:
        with exact():
            return self.amount * mark - self.cost

    def apply(self, side: Side, amount: Decimal, price: Decimal) -> tuple[Position, Decimal]:
        """The position after trading `amount` at `price`, and the P&L that trade realised."""
        amount = positive_decimal(amount, "trade amount")
        price = positive_decimal(price, "trade price")
        lots = list(self.lots)
        with exact():
            remaining = side.sign * amount
            realized = ZERO
            cost = self.cost
            # Close the oldest opposite lots first.
            while remaining and lots and _sign(lots[0].amount) != _sign(remaining):
                lot = lots[0]
                direction = _sign(lot.amount)
                closed = min(abs(lot.amount), abs(remaining)) * direction
                realized += closed * (price - lot.price)
                cost -= closed * lot.price
                remaining += closed
                if closed == lot.amount:
                    lots.pop(0)
                else:
                    lots[0] = Lot(lot.amount - closed, lot.price)
            if remaining:
                lots.append(Lot(remaining, price))
                cost += remaining * price
            position = Position._derived(
                self.symbol, tuple(lots), self.amount + side.sign * amount, cost
            )
        return position, realized


@dataclass(frozen=True)
class Portfolio:
    """Cash in one currency and the positions of symbols quoted in it."""

    currency: str
    cash: Decimal
    positions: Mapping[str, Position] = field(default_factory=dict)
    realized_pnl: Mapping[str, Decimal] = field(default_factory=dict)
    fees_paid: Decimal = ZERO

    def __post_init__(self) -> None:
        if not self.currency:
            raise DomainError("portfolio currency is empty")
        object.__setattr__(self, "cash", to_decimal(self.cash, "cash"))
        object.__setattr__(self, "fees_paid", to_decimal(self.fees_paid, "fees paid"))
        object.__setattr__(self, "positions", MappingProxyType(dict(self.positions)))
        object.__setattr__(self, "realized_pnl", MappingProxyType(dict(self.realized_pnl)))

    @classmethod
    def from_fills(cls, currency: str, starting_cash: Decimal, fills: Iterable[Fill]) -> Portfolio:
        """Cash and positions are always derivable from the fills alone."""
        portfolio = cls(currency, starting_cash)
        for fill in fills:
            portfolio = portfolio.apply(fill)
        return portfolio

    def position(self, symbol: str) -> Position:
        return self.positions.get(symbol) or Position(symbol)

    def amount(self, symbol: str) -> Decimal:
        """The signed amount held of `symbol` (0 when flat)."""
        position = self.positions.get(symbol)
        return position.amount if position is not None else ZERO

    def apply(self, fill: Fill) -> Portfolio:
        """The portfolio after `fill`. A fee in the cash currency comes out of cash; a fee in
        the symbol's base asset (Binance charges a buy's fee in what it bought) comes out of
        the position, as if those units were sold at the fill price to pay it: cash is
        untouched, the position equals what the venue holds, and the fee counts at its value
        at the fill price."""
        if quote_currency(fill.symbol) != self.currency:
            raise DomainError(f"{fill.symbol} is not quoted in the portfolio's {self.currency}")
        in_base = fill.fee_currency == base_currency(fill.symbol)
        if fill.fee_currency != self.currency and not in_base:
            raise DomainError(
                f"fill {fill.fill_id} charges its fee in {fill.fee_currency}, neither "
                f"{self.currency} nor {base_currency(fill.symbol)}: convert it before booking"
            )
        position, realized = self.position(fill.symbol).apply(fill.side, fill.amount, fill.price)
        with exact():
            if in_base and fill.fee != 0:
                paid = Side.SELL if fill.fee > 0 else Side.BUY
                position, sold = position.apply(paid, abs(fill.fee), fill.price)
                realized += sold
            cash = self.cash - fill.side.sign * fill.notional - (ZERO if in_base else fill.fee)
            realized_pnl = dict(self.realized_pnl)
            realized_pnl[fill.symbol] = realized_pnl.get(fill.symbol, ZERO) + realized
            fees = self.fees_paid + fill.quote_fee
        positions = dict(self.positions)
        if position.lots:
            positions[fill.symbol] = position
        else:
            positions.pop(fill.symbol, None)
        return Portfolio(self.currency, cash, positions, realized_pnl, fees)

    def _marks_for_positions(self, marks: Mapping[str, Decimal]) -> dict[str, Decimal]:
        missing = sorted(set(self.positions) - set(marks))
        if missing:
            # Valuing a position without a price would mean making one up.
            raise DomainError(f"no mark price for open positions: {', '.join(missing)}")
        return {s: positive_decimal(marks[s], f"mark price of {s}") for s in self.positions}

    def market_value(self, marks: Mapping[str, Decimal]) -> Decimal:
        if not self.positions:
            return ZERO  # what the sum of no positions is, without the checks and context
        prices = self._marks_for_positions(marks)
        with exact():
            return sum((p.amount * prices[s] for s, p in self.positions.items()), ZERO)

    def equity(self, marks: Mapping[str, Decimal]) -> Decimal:
        with exact():
            return self.cash + self.market_value(marks)

    def gross_exposure(self, marks: Mapping[str, Decimal]) -> Decimal:
        prices = self._marks_for_positions(marks)
        with exact():
            return sum((abs(p.amount * prices[s]) for s, p in self.positions.items()), ZERO)

    def unrealized_pnl(self, marks: Mapping[str, Decimal]) -> dict[str, Decimal]:
        prices = self._marks_for_positions(marks)
        return {s: p.unrealized_pnl(prices[s]) for s, p in self.positions.items()}
