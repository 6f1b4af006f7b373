"""A linear perpetual position in one-way mode: signed size, average entry price, leverage.

Binance USDⓈ-M keeps one average entry price per position (positionRisk `entryPrice`): adding
weights it by size, reducing leaves it and realises (exit - entry) x size closed. That is what
this models, not the spot portfolio's FIFO lots. Amounts are in the base asset (a USDⓈ-M
contract is one unit of it); money is in the margin asset (USDT/USDC).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from trader.domain.errors import DomainError
from trader.domain.money import ZERO, exact, positive_decimal, to_decimal
from trader.domain.perp.brackets import LeverageBrackets
from trader.domain.perp.rounding import quotient, rounded
from trader.domain.symbols import check_symbol


class MarginMode(StrEnum):
    ISOLATED = "isolated"
    CROSS = "cross"


def parse_margin_mode(value: object) -> MarginMode:
    """A margin mode from its name ("isolated" or "cross", as Binance's marginType lowercased)."""
    try:
        return MarginMode(str(value).lower())
    except ValueError:
        raise DomainError(f"margin mode must be 'isolated' or 'cross', got {value!r}") from None


def _sign(value: Decimal) -> int:
    return (value > 0) - (value < 0)


@dataclass(frozen=True, slots=True)
class PerpPosition:
    """`size` is signed (long positive, short negative). `isolated_wallet` is the margin the
    exchange holds for an isolated position (positionRisk `isolatedWallet`); zero for cross."""

    symbol: str
    size: Decimal
    entry_price: Decimal
    leverage: int
    margin_mode: MarginMode
    isolated_wallet: Decimal = ZERO

    def __post_init__(self) -> None:
        check_symbol(self.symbol)
        size = to_decimal(self.size, f"{self.symbol} position size")
        if size == 0:
            raise DomainError(f"{self.symbol}: a position has a non-zero size")
        object.__setattr__(self, "size", size)
        object.__setattr__(
            self, "entry_price", positive_decimal(self.entry_price, f"{self.symbol} entry price")
        )
        if isinstance(self.leverage, bool) or not isinstance(self.leverage, int):
            raise DomainError(f"{self.symbol}: leverage must be a whole number")
        if self.leverage < 1:
            raise DomainError(f"{self.symbol}: leverage must be at least 1, got {self.leverage}")
        mode = parse_margin_mode(self.margin_mode)
        object.__setattr__(self, "margin_mode", mode)
        wallet = to_decimal(self.isolated_wallet, f"{self.symbol} isolated wallet")
        if mode is MarginMode.CROSS and wallet != 0:
            raise DomainError(f"{self.symbol}: a cross position has no isolated wallet")
        object.__setattr__(self, "isolated_wallet", wallet)

    @property
    def side(self) -> int:
        """+1 long, -1 short: Binance's `Side` in the liquidation formula."""
        return _sign(self.size)

    @property
    def isolated(self) -> bool:
        return self.margin_mode is MarginMode.ISOLATED

    def notional(self, mark: Decimal) -> Decimal:
        """Signed notional at the mark price (positionRisk `notional`)."""
        with exact():
            return self.size * mark

    def unrealised_pnl(self, mark: Decimal) -> Decimal:
        """size x (mark - entry): on the mark price, never the last trade."""
        with exact():
            return self.size * (mark - self.entry_price)

    def initial_margin(self, mark: Decimal) -> Decimal:
        """|notional at mark| / leverage, as positionRisk's `initialMargin` reports it."""
        return quotient(abs(self.notional(mark)), Decimal(self.leverage))

    def maintenance_margin(self, mark: Decimal, brackets: LeverageBrackets) -> Decimal:
        return brackets.maintenance_margin(self.notional(mark))

    def isolated_margin(self, mark: Decimal) -> Decimal:
        """An isolated position's margin balance: its wallet plus its unrealised P&L."""
        with exact():
            return self.isolated_wallet + self.unrealised_pnl(mark)

    def removable_margin(self, mark: Decimal) -> Decimal:
        """The most margin that may leave an isolated position (Binance FAQ "How to Adjust
        Margin Balance in Isolated Margin Mode"): max(0, min(isolatedWallet, isolatedWallet +
        size x (mark - entry) - mark x |size| x IMR)), IMR = 1 / leverage."""
        if not self.isolated:
            raise DomainError(f"{self.symbol}: only an isolated position has margin to remove")
        with rounded():
            room = self.isolated_margin(mark) - self.initial_margin(mark)
        return max(ZERO, min(self.isolated_wallet, room))

    def trade(self, quantity: Decimal, price: Decimal) -> TradeResult:
        """The position after a fill of signed `quantity` at `price` (see `apply_trade`)."""
        return apply_trade(self, quantity, price)


@dataclass(frozen=True, slots=True)
class TradeResult:
    """What a fill did: the position after it (None when flat) and the P&L it realised."""

    position: PerpPosition | None
    realised_pnl: Decimal


def open_position(
    symbol: str,
    quantity: Decimal,
    price: Decimal,
    leverage: int,
    margin_mode: MarginMode,
) -> PerpPosition:
    """A new position from a fill; an isolated one gets its initial margin at the fill price
    (notional / leverage) moved into its wallet."""
    if isinstance(leverage, bool) or not isinstance(leverage, int) or leverage < 1:
        raise DomainError(f"{symbol}: leverage must be a whole number of at least 1")
    quantity = to_decimal(quantity, "trade quantity")
    price = positive_decimal(price, "trade price")
    wallet = ZERO
    if parse_margin_mode(margin_mode) is MarginMode.ISOLATED:
        with exact():
            notional = abs(quantity) * price
        wallet = quotient(notional, Decimal(leverage))
    return PerpPosition(symbol, quantity, price, leverage, margin_mode, wallet)


def apply_trade(position: PerpPosition, quantity: Decimal, price: Decimal) -> TradeResult:
    """Add, reduce, close or reverse `position` with a fill of signed `quantity` at `price`.

    Adding weights the entry price by size and (isolated) moves the added initial margin into
    the wallet. Reducing realises (price - entry) x size closed and (isolated) releases the wallet
    in proportion to the size closed. A reversal closes, then opens the rest at `price`.
    """
    quantity = to_decimal(quantity, "trade quantity")
    price = positive_decimal(price, "trade price")
    if quantity == 0:
        raise DomainError("a trade has a non-zero quantity")
    size = position.size
    if _sign(quantity) == position.side:
        with exact():
            new_size = size + quantity
            cost = size * position.entry_price + quantity * price
            added_margin = abs(quantity) * price
        entry = quotient(cost, new_size)
        wallet = position.isolated_wallet
        if position.isolated:
            with exact():
                wallet = wallet + quotient(added_margin, Decimal(position.leverage))
        added = PerpPosition(
            position.symbol, new_size, entry, position.leverage, position.margin_mode, wallet
        )
        return TradeResult(added, ZERO)
    closed = min(abs(quantity), abs(size))
    with exact():
        realised = position.side * closed * (price - position.entry_price)
        remaining = size + quantity
    if _sign(remaining) == position.side:  # reduced, same side
        wallet = position.isolated_wallet
        if position.isolated:
            wallet = quotient(wallet * abs(remaining), abs(size))
        reduced = PerpPosition(
            position.symbol,
            remaining,
            position.entry_price,
            position.leverage,
            position.margin_mode,
            wallet,
        )
        return TradeResult(reduced, realised)
    if remaining == 0:
        return TradeResult(None, realised)
    reversed_ = open_position(
        position.symbol, remaining, price, position.leverage, position.margin_mode
    )
    return TradeResult(reversed_, realised)
