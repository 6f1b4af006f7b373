"""A USDⓈ-M futures account in one margin asset: wallet, positions, and the balances Binance
reports from them.

Definitions (Binance, "What Is the Available Balance, Margin Balance, and Total Balance on
Binance Futures?" and the USDⓈ-M FAQs on margin ratio and liquidation):
- wallet balance = transfers + realised P&L + net funding - commission (unrealised P&L apart);
- margin balance = wallet balance + unrealised P&L (`totalMarginBalance`);
- available balance = cross wallet + cross unrealised P&L - cross initial margin - open-order
  initial margin, not below zero (the FAQ "How to Adjust Margin Balance in Isolated Margin Mode"
  gives this as the cross maximum withdrawal, https://www.binance.com/en/support/faq/360038447311);
- margin ratio = maintenance margin / margin balance (cross: over the cross positions; isolated:
  one position over its isolated margin); liquidation at 100%.
The cross wallet is the wallet less the isolated positions' wallets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType

from trader.domain.errors import DomainError
from trader.domain.money import ZERO, exact, positive_decimal, to_decimal
from trader.domain.perp.brackets import LeverageBrackets
from trader.domain.perp.funding import funding_payment
from trader.domain.perp.liquidation import MarginState, bankruptcy_price, liquidation_price
from trader.domain.perp.position import MarginMode, PerpPosition, apply_trade, open_position
from trader.domain.perp.rounding import quotient, rounded

Marks = Mapping[str, Decimal]


def _frozen_positions(positions: Iterable[PerpPosition]) -> Mapping[str, PerpPosition]:
    by_symbol: dict[str, PerpPosition] = {}
    for position in positions:
        if position.symbol in by_symbol:
            raise DomainError(f"{position.symbol}: one-way mode holds one position per symbol")
        by_symbol[position.symbol] = position
    return MappingProxyType(by_symbol)


@dataclass(frozen=True, slots=True)
class PerpAccount:
    wallet_balance: Decimal
    brackets: Mapping[str, LeverageBrackets]
    positions: Mapping[str, PerpPosition] = field(default_factory=lambda: MappingProxyType({}))
    realised_pnl: Decimal = ZERO
    fees_paid: Decimal = ZERO
    funding_paid: Decimal = ZERO  # net: positive paid, negative received

    def __post_init__(self) -> None:
        for name in ("wallet_balance", "realised_pnl", "fees_paid", "funding_paid"):
            object.__setattr__(self, name, to_decimal(getattr(self, name), name))
        if not isinstance(self.positions, Mapping):
            raise DomainError("positions must map each symbol to its position")
        for symbol, position in self.positions.items():
            if not isinstance(position, PerpPosition) or position.symbol != symbol:
                raise DomainError(f"{symbol}: positions must map a symbol to its own position")
        object.__setattr__(self, "positions", _frozen_positions(self.positions.values()))
        object.__setattr__(self, "brackets", MappingProxyType(dict(self.brackets)))
        for symbol in self.positions:
            self._brackets(symbol)

    @classmethod
    def with_positions(
        cls,
        wallet_balance: Decimal,
        brackets: Mapping[str, LeverageBrackets],
        positions: Iterable[PerpPosition],
    ) -> PerpAccount:
        return cls(wallet_balance, brackets, _frozen_positions(positions))

    def _brackets(self, symbol: str) -> LeverageBrackets:
        try:
            return self.brackets[symbol]
        except KeyError:
            raise DomainError(f"{symbol}: no leverage brackets for this symbol") from None

    def _position(self, symbol: str) -> PerpPosition:
        try:
            return self.positions[symbol]
        except KeyError:
            raise DomainError(f"{symbol}: no open position") from None

    @staticmethod
    def _mark(marks: Marks, symbol: str) -> Decimal:
        try:
            return positive_decimal(marks[symbol], f"{symbol} mark price")
        except KeyError:
            raise DomainError(f"{symbol}: no mark price") from None

    def _cross(self) -> list[PerpPosition]:
        return [p for p in self.positions.values() if p.margin_mode is MarginMode.CROSS]

    # Balances ---------------------------------------------------------------------------------

    @property
    def cross_wallet_balance(self) -> Decimal:
        with exact():
            isolated = sum((p.isolated_wallet for p in self.positions.values()), ZERO)
            return self.wallet_balance - isolated

    def unrealised_pnl(self, marks: Marks) -> Decimal:
        with exact():
            return sum(
                (p.unrealised_pnl(self._mark(marks, s)) for s, p in self.positions.items()), ZERO
            )

    def cross_unrealised_pnl(self, marks: Marks) -> Decimal:
        with exact():
            return sum((p.unrealised_pnl(self._mark(marks, p.symbol)) for p in self._cross()), ZERO)

    def margin_balance(self, marks: Marks) -> Decimal:
        with exact():
            return self.wallet_balance + self.unrealised_pnl(marks)

    def cross_margin_balance(self, marks: Marks) -> Decimal:
        with exact():
            return self.cross_wallet_balance + self.cross_unrealised_pnl(marks)

    def maintenance_margin(self, symbol: str, marks: Marks) -> Decimal:
        position = self._position(symbol)
        return position.maintenance_margin(self._mark(marks, symbol), self._brackets(symbol))

    def cross_maintenance_margin(self, marks: Marks, *, excluding: str | None = None) -> Decimal:
        with exact():
            return sum(
                (
                    self.maintenance_margin(p.symbol, marks)
                    for p in self._cross()
                    if p.symbol != excluding
                ),
                ZERO,
            )

    def cross_initial_margin(self, marks: Marks) -> Decimal:
        margins = [p.initial_margin(self._mark(marks, p.symbol)) for p in self._cross()]
        with rounded():
            return sum(margins, ZERO)

    def available_balance(self, marks: Marks, open_order_margin: Decimal = ZERO) -> Decimal:
        open_order_margin = to_decimal(open_order_margin, "open-order margin")
        balance, initial = self.cross_margin_balance(marks), self.cross_initial_margin(marks)
        with rounded():
            available = balance - initial - open_order_margin
        return max(available, ZERO)

    def margin_ratio(self, marks: Marks) -> Decimal | None:
        """Cross maintenance margin over cross margin balance; 1 or more: liquidation. None when
        the cross margin balance is not positive (nothing left to divide by)."""
        balance = self.cross_margin_balance(marks)
        maintenance = self.cross_maintenance_margin(marks)
        if balance <= 0:
            return None
        return quotient(maintenance, balance)

    def position_margin_ratio(self, symbol: str, marks: Marks) -> Decimal | None:
        """An isolated position's maintenance margin over its isolated margin (wallet + P&L)."""
        position = self._position(symbol)
        if not position.isolated:
            raise DomainError(f"{symbol}: a cross position shares the account's margin ratio")
        balance = position.isolated_margin(self._mark(marks, symbol))
        if balance <= 0:
            return None
        return quotient(self.maintenance_margin(symbol, marks), balance)

    # Liquidation ------------------------------------------------------------------------------

    def margin_state(self, symbol: str, marks: Marks) -> MarginState:
        """The formula's inputs for `symbol`: its isolated wallet alone, or the cross wallet with
        the other cross positions' maintenance margin and unrealised P&L at their marks."""
        position = self._position(symbol)
        if position.isolated:
            return MarginState(position.size, position.entry_price, position.isolated_wallet)
        with exact():
            others_pnl = sum(
                (
                    p.unrealised_pnl(self._mark(marks, p.symbol))
                    for p in self._cross()
                    if p.symbol != symbol
                ),
                ZERO,
            )
        return MarginState(
            position.size,
            position.entry_price,
            self.cross_wallet_balance,
            self.cross_maintenance_margin(marks, excluding=symbol),
            others_pnl,
        )

    def liquidation_price(self, symbol: str, marks: Marks) -> Decimal | None:
        return liquidation_price(self.margin_state(symbol, marks), self._brackets(symbol))

    def bankruptcy_price(self, symbol: str, marks: Marks) -> Decimal | None:
        return bankruptcy_price(self.margin_state(symbol, marks))

    # Bookings ---------------------------------------------------------------------------------

    def _replace(
        self,
        symbol: str,
        position: PerpPosition | None,
        *,
        wallet: Decimal,
        realised: Decimal = ZERO,
        fee: Decimal = ZERO,
        funding: Decimal = ZERO,
    ) -> PerpAccount:
        positions = dict(self.positions)
        positions.pop(symbol, None)
        if position is not None:
            positions[symbol] = position
        with exact():
            return PerpAccount(
                wallet,
                self.brackets,
                MappingProxyType(positions),
                self.realised_pnl + realised,
                self.fees_paid + fee,
                self.funding_paid + funding,
            )

    def fill(
        self,
        symbol: str,
        quantity: Decimal,
        price: Decimal,
        *,
        fee: Decimal = ZERO,
        leverage: int | None = None,
        margin_mode: MarginMode | None = None,
    ) -> PerpAccount:
        """The account after a fill of signed `quantity` at `price` paying `fee` (from the cross
        wallet). Opening needs `leverage` and `margin_mode`; later fills keep the position's."""
        fee = to_decimal(fee, "fee")
        self._brackets(symbol)
        current = self.positions.get(symbol)
        if current is None:
            if leverage is None or margin_mode is None:
                raise DomainError(
                    f"{symbol}: opening a position needs its leverage and margin mode"
                )
            position: PerpPosition | None = open_position(
                symbol, to_decimal(quantity, "trade quantity"), price, leverage, margin_mode
            )
            realised = ZERO
        else:
            result = apply_trade(current, quantity, price)
            position, realised = result.position, result.realised_pnl
        with exact():
            wallet = self.wallet_balance + realised - fee
        return self._replace(symbol, position, wallet=wallet, realised=realised, fee=fee)

    def book_funding(self, symbol: str, rate: Decimal, mark: Decimal) -> PerpAccount:
        """Funding at a funding time: the holder pays mark x size x rate (receives when negative);
        an isolated position's payment comes out of its isolated wallet."""
        position = self._position(symbol)
        payment = funding_payment(mark, position.size, rate)
        with exact():
            wallet = self.wallet_balance - payment
            isolated_wallet = position.isolated_wallet - payment
        if position.isolated:
            position = PerpPosition(
                position.symbol,
                position.size,
                position.entry_price,
                position.leverage,
                position.margin_mode,
                isolated_wallet,
            )
        return self._replace(symbol, position, wallet=wallet, funding=payment)
