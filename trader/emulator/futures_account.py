"""A USDⓈ-M futures account as the emulator keeps it: one USDT wallet, per-symbol leverage and
margin type, one-way positions (signed size, entry price, isolated wallet), orders, trades and
the income rows Binance's `GET /fapi/v1/income` lists.

Money as Binance's USDⓈ-M docs and FAQ define it (Account Information V3, Position
Information V3, "Leverage and Margin of USDⓈ-M Futures"):
- unrealised P&L = size x (mark - entry), on the mark price, never the last price;
- position initial margin = |size| x mark / leverage;
- maintenance margin = notional x mmr - cum of the notional's bracket;
- the wallet holds every isolated position's wallet; the cross wallet is the rest;
- available balance = cross wallet + cross unrealised P&L - cross initial margin - the
  initial margin of open orders (a simplification of Binance's: orders that reduce a
  position still count here when they are not reduce-only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from trader.emulator.futures_market import Bracket, maintenance_margin
from trader.emulator.venue import VenueTrade

CROSSED, ISOLATED = "CROSSED", "ISOLATED"
ZERO = Decimal(0)


@dataclass
class SymbolSettings:
    leverage: int = 20  # Binance's default for a new symbol
    margin_type: str = CROSSED


@dataclass
class Position:
    symbol: str
    size: Decimal = ZERO  # signed: long > 0, short < 0
    entry: Decimal = ZERO
    isolated_wallet: Decimal = ZERO  # margin set aside for an isolated position
    update_time: datetime | None = None

    def unrealized(self, mark: Decimal) -> Decimal:
        return self.size * (mark - self.entry)

    def notional(self, mark: Decimal) -> Decimal:
        return self.size * mark

    def apply(self, side_sign: int, qty: Decimal, price: Decimal) -> tuple[Decimal, Decimal]:
        """A fill of `qty` at `price` (side_sign +1 buy, -1 sell): (realised P&L, the part of
        the fill that closed the position)."""
        delta = side_sign * qty
        if self.size == 0 or (self.size > 0) == (delta > 0):
            total = abs(self.size) + qty
            self.entry = (abs(self.size) * self.entry + qty * price) / total
            self.size += delta
            return ZERO, ZERO
        closed = min(qty, abs(self.size))
        direction = 1 if self.size > 0 else -1
        realized = closed * (price - self.entry) * direction
        self.size += delta
        if self.size == 0:
            self.entry = ZERO
        elif (self.size > 0) != (direction > 0):  # flipped: the rest opened at this price
            self.entry = price
        return realized, closed


@dataclass(frozen=True)
class FuturesTrade(VenueTrade):
    """The spot venue's trade record (commission in USDT here) and the P&L it realised."""

    realized_pnl: Decimal

    @property
    def side(self) -> str:
        return "BUY" if self.is_buyer else "SELL"


@dataclass
class FuturesOrder:
    order_id: int
    client_order_id: str
    symbol: str
    side: str  # BUY | SELL
    type: str  # LIMIT | MARKET | STOP_MARKET | TAKE_PROFIT_MARKET | STOP | TAKE_PROFIT
    time_in_force: str
    price: Decimal | None
    quantity: Decimal
    reduce_only: bool
    time: datetime
    position_side: str = "BOTH"
    status: str = "NEW"
    executed: Decimal = ZERO
    cum_quote: Decimal = ZERO
    update_time: datetime | None = None
    trigger_price: Decimal | None = None  # algo (conditional) orders
    working_type: str = "CONTRACT_PRICE"
    close_position: bool = False
    algo: bool = False
    triggered_order: int | None = None  # the order an algo order became when it triggered
    trades: list[FuturesTrade] = field(default_factory=list)

    @property
    def remaining(self) -> Decimal:
        return self.quantity - self.executed

    @property
    def is_open(self) -> bool:
        return self.status in {"NEW", "PARTIALLY_FILLED"}

    @property
    def side_sign(self) -> int:
        return 1 if self.side == "BUY" else -1

    @property
    def avg_price(self) -> Decimal:
        return self.cum_quote / self.executed if self.executed else ZERO


@dataclass(frozen=True)
class Income:
    tran_id: int
    symbol: str
    income_type: str  # FUNDING_FEE | REALIZED_PNL | COMMISSION | INSURANCE_CLEAR | TRANSFER
    income: Decimal
    time: datetime
    trade_id: str = ""
    info: str = ""


@dataclass
class FuturesAccount:
    wallet: Decimal  # USDT wallet balance, isolated wallets included
    settings: dict[str, SymbolSettings] = field(default_factory=dict)
    positions: dict[str, Position] = field(default_factory=dict)
    dual_side: bool = False
    orders: dict[int, FuturesOrder] = field(default_factory=dict)
    trades: list[FuturesTrade] = field(default_factory=list)
    incomes: list[Income] = field(default_factory=list)

    def setting(self, symbol: str) -> SymbolSettings:
        return self.settings.setdefault(symbol, SymbolSettings())

    def position(self, symbol: str) -> Position:
        return self.positions.setdefault(symbol, Position(symbol))

    def open_positions(self) -> list[Position]:
        return [p for p in self.positions.values() if p.size != 0]

    def is_isolated(self, symbol: str) -> bool:
        return self.setting(symbol).margin_type == ISOLATED

    def open_orders(self, symbol: str | None = None) -> list[FuturesOrder]:
        return [
            o for o in self.orders.values() if o.is_open and (symbol is None or o.symbol == symbol)
        ]

    @property
    def cross_wallet(self) -> Decimal:
        return self.wallet - sum(
            (p.isolated_wallet for p in self.positions.values() if self.is_isolated(p.symbol)),
            ZERO,
        )

    def cross_unrealized(self, marks: dict[str, Decimal]) -> Decimal:
        return sum(
            (
                p.unrealized(marks[p.symbol])
                for p in self.open_positions()
                if not self.is_isolated(p.symbol)
            ),
            ZERO,
        )

    def position_initial_margin(self, position: Position, mark: Decimal) -> Decimal:
        return abs(position.notional(mark)) / self.setting(position.symbol).leverage

    def order_initial_margin(self, order: FuturesOrder, reference: Decimal) -> Decimal:
        if not order.is_open or order.reduce_only or order.algo:
            return ZERO
        price = order.price if order.price is not None else reference
        return order.remaining * price / self.setting(order.symbol).leverage

    def available(self, marks: dict[str, Decimal]) -> Decimal:
        """What a new order may use as initial margin (see the module's note)."""
        cross_im = sum(
            (
                self.position_initial_margin(p, marks[p.symbol])
                for p in self.open_positions()
                if not self.is_isolated(p.symbol)
            ),
            ZERO,
        )
        orders_im = sum(
            (self.order_initial_margin(o, marks[o.symbol]) for o in self.open_orders()), ZERO
        )
        return self.cross_wallet + self.cross_unrealized(marks) - cross_im - orders_im

    def freed_by_closing(self, position: Position, mark: Decimal) -> Decimal:
        """What closing `position` at the mark adds to the available balance: its initial
        margin (cross: its unrealised P&L is in the available balance already), or its
        isolated wallet and unrealised P&L returned to the cross wallet."""
        if self.is_isolated(position.symbol):
            return position.isolated_wallet + position.unrealized(mark)
        return self.position_initial_margin(position, mark)

    def book(
        self, symbol: str, income_type: str, amount: Decimal, at: datetime, trade_id: str = ""
    ) -> None:
        """An income row, and its effect on the wallet."""
        if amount == 0:
            return
        self.wallet += amount
        self.incomes.append(
            Income(len(self.incomes) + 1, symbol, income_type, amount, at, trade_id, income_type)
        )


def margin_balance_and_maintenance(
    account: FuturesAccount,
    brackets: dict[str, list[Bracket]],
    marks: dict[str, Decimal],
    isolated_symbol: str | None,
) -> tuple[Decimal, Decimal]:
    """(margin balance, maintenance margin) of one isolated position (its wallet and P&L), or
    with `isolated_symbol` None of the cross account (cross wallet, every cross position)."""
    if isolated_symbol is not None:
        position = account.positions[isolated_symbol]
        mark = marks[isolated_symbol]
        balance = position.isolated_wallet + position.unrealized(mark)
        return balance, maintenance_margin(brackets[isolated_symbol], position.notional(mark))
    cross = [p for p in account.open_positions() if not account.is_isolated(p.symbol)]
    balance = account.cross_wallet + sum((p.unrealized(marks[p.symbol]) for p in cross), ZERO)
    maintenance = sum(
        (maintenance_margin(brackets[p.symbol], p.notional(marks[p.symbol])) for p in cross),
        ZERO,
    )
    return balance, maintenance
