"""The emulated venue's trading side: accounts, orders, and matching against the replayed
price path, by Binance spot's rules.

- A market order (or the marketable part of a limit order) takes the book: the best level is
  the emulated top of book, and each level further out is one tick worse and a little deeper
  (the same levels `/api/v3/depth` shows). An order larger than the 20 levels shown fills
  what they hold and EXPIRES, as on Binance. Taker fee.
- A resting limit order fills when a bar that opened after it was placed trades through its
  price (a buy when the bar's low is below it, a sell when the high is above it), at its
  price, for at most `liquidity_share` of the bar's volume per bar: larger orders fill in
  parts, bar by bar. Maker fee.
- `slippage_bps` and `market_fill_share`: costs a test injects (`trader.emulator.injected`).
- Commission is charged in the asset received (base for a buy, quote for a sell), rounded to
  eight decimals, as Binance does without BNB fee payment.
- Balances are checked and locked when an order is placed: a buy limit locks its quote, a sell
  its base; a market order that needs more than is free is rejected.
- A new client order id equal to that of an OPEN order is rejected ("Duplicate order sent.");
  like Binance, one that belonged to an order that has ended is accepted again, so only the
  client can prevent a duplicate of a filled order: by looking before it resends.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal

from trader.domain import Bar, decimal_from_float
from trader.emulator.injected import left_unfilled, slipped
from trader.emulator.market import EmulatedMarket, Instrument

EIGHT = Decimal("0.00000001")
BOOK_LEVELS = 20
LEVEL_SIZE = Decimal(10)  # the best level holds 10, each further level one more


class VenueError(Exception):
    """A Binance error answer: its code, message and HTTP status."""

    def __init__(self, code: int, msg: str, status: int = 400) -> None:
        super().__init__(msg)
        self.code, self.msg, self.status = code, msg, status


INSUFFICIENT = "Account has insufficient balance for requested action."
DUPLICATE = "Duplicate order sent."
NO_SUCH_ORDER = "Order does not exist."
UNKNOWN_ORDER = "Unknown order sent."


@dataclass
class Balance:
    free: Decimal = Decimal(0)
    locked: Decimal = Decimal(0)

    @property
    def total(self) -> Decimal:
        return self.free + self.locked


@dataclass(frozen=True)
class VenueTrade:
    trade_id: int
    order_id: int
    symbol: str  # venue id
    price: Decimal
    qty: Decimal
    commission: Decimal
    commission_asset: str
    time: datetime
    is_buyer: bool
    is_maker: bool

    @property
    def quote_qty(self) -> Decimal:
        return self.price * self.qty


@dataclass
class VenueOrder:
    order_id: int
    client_order_id: str
    symbol: str  # venue id
    side: str  # BUY | SELL
    type: str  # LIMIT | MARKET
    time_in_force: str | None
    price: Decimal | None
    quantity: Decimal
    time: datetime
    status: str = "NEW"
    executed: Decimal = Decimal(0)
    quote_executed: Decimal = Decimal(0)
    locked: Decimal = Decimal(0)  # still locked for it, in the asset it spends
    update_time: datetime | None = None
    trades: list[VenueTrade] = field(default_factory=list)
    # Alpaca: an order taken while its market is closed waits, unmatched, until
    # `release_at`; a day order ends EXPIRED at `expires_at` (the venue says when).
    release_at: datetime | None = None
    expires_at: datetime | None = None
    extended_hours: bool = False
    position_intent: str | None = None  # Alpaca's buy_to_open, sell_to_close, ...

    @property
    def remaining(self) -> Decimal:
        return self.quantity - self.executed

    @property
    def is_open(self) -> bool:
        return self.status in {"NEW", "PARTIALLY_FILLED"}


@dataclass
class Fees:
    maker: Decimal = Decimal("0.001")
    taker: Decimal = Decimal("0.001")
    # A sale's fee by price, quantity and time, where it is no rate of the notional (a US
    # stock's regulatory fees at Alpaca: `trader.emulator.alpaca_fees`).
    on_sale: Callable[[Decimal, Decimal, datetime], Decimal] | None = None


@dataclass
class Account:
    balances: dict[str, Balance] = field(default_factory=dict)
    orders: dict[int, VenueOrder] = field(default_factory=dict)
    trades: list[VenueTrade] = field(default_factory=list)

    def balance(self, asset: str) -> Balance:
        return self.balances.setdefault(asset, Balance())

    def by_client_id(self, symbol: str, client_order_id: str) -> VenueOrder | None:
        """The latest order of `symbol` with that client id."""
        found = [
            o
            for o in self.orders.values()
            if o.symbol == symbol and o.client_order_id == client_order_id
        ]
        return max(found, key=lambda o: o.order_id) if found else None


@dataclass
class Venue:
    market: EmulatedMarket
    fees: Fees = field(default_factory=Fees)
    liquidity_share: Decimal = Decimal("0.1")
    accounts: dict[str, Account] = field(default_factory=dict)  # by API key
    # Alpaca: a client order id is never reused, even after its order ended (Binance: only
    # while it is open). Per-symbol fees where they differ (Alpaca: stocks are free).
    unique_client_ids: bool = False
    fees_by_symbol: dict[str, Fees] = field(default_factory=dict)
    # A margin account may go below zero in the asset an order spends (cash for a buy on
    # margin, shares for a short) where this says so (Alpaca's; Binance spot never does).
    may_borrow: Callable[[Account, Instrument, str], bool] | None = None
    # Told of every order change (placed, each trade, cancelled or expired), with the trade
    # when there is one: Alpaca's trade-updates stream listens here.
    on_change: list[Callable[[Account, VenueOrder, VenueTrade | None], None]] = field(
        default_factory=list
    )
    slippage_bps: Decimal = Decimal(0)  # takers fill this much beyond the quoted touch
    market_fill_share: Decimal = Decimal(1)  # the share of a market order the book holds
    _next_order: int = 1
    _next_trade: dict[str, int] = field(default_factory=dict)
    _synced: dict[int, datetime] = field(default_factory=dict)  # order id -> last bar end met

    @property
    def clock(self) -> Callable[[], datetime]:
        return self.market.clock

    def open_account(self, api_key: str, balances: dict[str, Decimal]) -> Account:
        account = Account({asset: Balance(Decimal(v)) for asset, v in balances.items()})
        self.accounts[api_key] = account
        return account

    def instrument(self, symbol: str) -> Instrument:
        instrument = self.market.instrument(symbol)
        if instrument is None:
            raise VenueError(-1121, "Invalid symbol.")
        return instrument

    # --- orders -----------------------------------------------------------------------------

    def place(
        self,
        account: Account,
        *,
        symbol: str,
        side: str,
        type_: str,
        quantity: Decimal,
        price: Decimal | None,
        time_in_force: str | None,
        client_order_id: str,
        release_at: datetime | None = None,
        expires_at: datetime | None = None,
    ) -> VenueOrder:
        self.sync(account)
        instrument = self.instrument(symbol)
        _check_filters(instrument, type_, quantity, price, self._touch(instrument, side))
        duplicate = account.by_client_id(symbol, client_order_id)
        if duplicate is not None and (duplicate.is_open or self.unique_client_ids):
            raise VenueError(-2010, DUPLICATE)
        now = self.clock()
        order = VenueOrder(
            self._next_order, client_order_id, symbol, side, type_, time_in_force, price,
            quantity, now, update_time=now, release_at=release_at, expires_at=expires_at,
        )  # fmt: skip
        self._lock(account, instrument, order)
        self._next_order += 1
        account.orders[order.order_id] = order
        self._tell(account, order, None)
        if release_at is not None and release_at > now:
            return order  # waits for its session: `sync` releases it
        self._take(account, instrument, order)
        if order.is_open and (type_ == "MARKET" or time_in_force in {"IOC", "FOK"}):
            self._end(account, instrument, order, "EXPIRED")
        return order

    def cancel(self, account: Account, symbol: str, order: VenueOrder) -> VenueOrder:
        self.sync(account)
        if not order.is_open:
            raise VenueError(-2011, UNKNOWN_ORDER)
        self._end(account, self.instrument(symbol), order, "CANCELED")
        return order

    def find(
        self, account: Account, symbol: str, order_id: int | None, client_order_id: str | None
    ) -> VenueOrder | None:
        self.sync(account)
        if order_id is not None:
            order = account.orders.get(order_id)
            return order if order is not None and order.symbol == symbol else None
        if client_order_id is not None:
            return account.by_client_id(symbol, client_order_id)
        return None

    # --- matching ---------------------------------------------------------------------------

    def _touch(self, instrument: Instrument, side: str) -> Decimal:
        book = self.market.top_of_book(instrument.venue_id)
        if book is None:
            raise VenueError(-1013, "Market is closed.")
        return book[1] if side == "BUY" else book[0]

    def levels(self, instrument: Instrument, side: str) -> list[tuple[Decimal, Decimal]]:
        """(price, quantity) of the book a taker on `side` meets, best first."""
        touch = self._touch(instrument, side)
        step = instrument.tick_size if side == "BUY" else -instrument.tick_size
        return [
            (touch + n * step, LEVEL_SIZE + n) for n in range(BOOK_LEVELS) if touch + n * step > 0
        ]

    def taker_levels(self, instrument: Instrument, side: str) -> list[tuple[Decimal, Decimal]]:
        """The levels a taker fills at: the book's, moved by any slippage injected."""
        return slipped(self.levels(instrument, side), self.slippage_bps, instrument.tick_size, side)

    def _lock(self, account: Account, instrument: Instrument, order: VenueOrder) -> None:
        """Reserve what the order may spend; market orders are checked against what they
        would cost on the book now."""
        if order.side == "BUY":
            asset = instrument.quote
            need = (
                order.quantity * order.price
                if order.price is not None
                else self._cost(instrument, order.side, order.quantity)
            )
        else:
            asset, need = instrument.base, order.quantity
        balance = account.balance(asset)
        borrow = self.may_borrow is not None and self.may_borrow(account, instrument, order.side)
        if need > balance.free and not borrow:
            raise VenueError(-2010, INSUFFICIENT)
        balance.free -= need
        balance.locked += need
        order.locked = need

    def _cost(self, instrument: Instrument, side: str, quantity: Decimal) -> Decimal:
        cost, left = Decimal(0), quantity
        for price, size in self.taker_levels(instrument, side):
            take = min(left, size)
            cost += take * price
            left -= take
            if left <= 0:
                break
        return cost

    def _take(self, account: Account, instrument: Instrument, order: VenueOrder) -> None:
        """The order meets the book for whatever part of it is marketable now."""
        share = self.market_fill_share if order.type == "MARKET" else Decimal(1)
        unfilled = left_unfilled(order.quantity, share, instrument.step_size)
        for price, size in self.taker_levels(instrument, order.side):
            if order.remaining <= unfilled:
                break
            if order.price is not None and (
                price > order.price if order.side == "BUY" else price < order.price
            ):
                break
            qty = min(order.remaining - unfilled, size)
            self._trade(account, instrument, order, price, qty, maker=False, at=self.clock())

    def sync(self, account: Account) -> None:
        """Resting orders meet the bars that closed since they were last looked at."""
        now = self.clock()
        for order in list(account.orders.values()):
            instrument = self.instrument(order.symbol)
            if order.is_open and order.release_at is not None:
                self._release(account, instrument, order)
            if not order.is_open or order.price is None or order.release_at is not None:
                continue
            ends = order.expires_at
            for bar in self._closed_since(order, now):
                if ends is not None and bar.start >= ends:
                    break
                self._fill_from_bar(account, instrument, order, bar)
                self._synced[order.order_id] = bar.end
            if order.is_open and ends is not None and now >= ends:
                self._end(account, instrument, order, "EXPIRED")
                order.update_time = ends

    def _release(self, account: Account, instrument: Instrument, order: VenueOrder) -> None:
        """A waiting order meets the first bar of its session at that bar's open (a market
        order, or a limit that is marketable then); the rest of a limit rests from there."""
        bars = self.market.bars(order.symbol, self.market.timeframe(order.symbol))
        release = order.release_at
        first = bisect.bisect_right(bars, release, key=lambda bar: bar.end) if release else 0
        if release is None or self.clock() < release or first == len(bars):
            return  # its session has not begun
        bar, order.release_at = bars[first], None
        price, limit, at = decimal_from_float(bar.open), order.price, max(bar.start, release)
        if limit is None or (price <= limit if order.side == "BUY" else price >= limit):
            self._trade(account, instrument, order, price, order.remaining, maker=False, at=at)
        if order.is_open and order.price is None:
            self._end(account, instrument, order, "EXPIRED")

    def _closed_since(self, order: VenueOrder, now: datetime) -> Iterable[Bar]:
        """Bars that opened after the order was placed, closed by now, not yet met."""
        bars = self.market.bars(order.symbol, self.market.timeframe(order.symbol))
        first = bisect.bisect_left(bars, order.time, key=lambda bar: bar.start)
        done = self._synced.get(order.order_id)
        for bar in bars[first:]:
            if bar.end > now:
                break
            if done is None or bar.end > done:
                yield bar

    def _fill_from_bar(
        self, account: Account, instrument: Instrument, order: VenueOrder, bar: Bar
    ) -> None:
        if order.price is None or not order.is_open:
            return
        low, high = decimal_from_float(bar.low), decimal_from_float(bar.high)
        through = low < order.price if order.side == "BUY" else high > order.price
        if not through:
            return
        available = decimal_from_float(bar.volume) * self.liquidity_share
        qty = min(order.remaining, _down(available, instrument.step_size))
        if qty > 0:
            self._trade(account, instrument, order, order.price, qty, maker=True, at=bar.end)

    def _trade(
        self,
        account: Account,
        instrument: Instrument,
        order: VenueOrder,
        price: Decimal,
        qty: Decimal,
        *,
        maker: bool,
        at: datetime,
    ) -> None:
        fees = self.fees_by_symbol.get(order.symbol, self.fees)
        rate = fees.maker if maker else fees.taker
        notional = price * qty
        base, quote = account.balance(instrument.base), account.balance(instrument.quote)
        if order.side == "BUY":
            spend = notional
            commission, asset = (qty * rate).quantize(EIGHT, ROUND_HALF_UP), instrument.base
            _spend(quote, order, spend)
            base.free += qty - commission
        else:
            commission = (
                fees.on_sale(price, qty, at)
                if fees.on_sale is not None
                else (notional * rate).quantize(EIGHT, ROUND_HALF_UP)
            )
            asset = instrument.quote
            _spend(base, order, qty)
            quote.free += notional - commission
        trade_id = self._next_trade.get(order.symbol, 1)
        self._next_trade[order.symbol] = trade_id + 1
        trade = VenueTrade(
            trade_id, order.order_id, order.symbol, price, qty, commission, asset, at,
            order.side == "BUY", maker,
        )  # fmt: skip
        order.trades.append(trade)
        account.trades.append(trade)
        order.executed += qty
        order.quote_executed += notional
        order.update_time = at
        if order.remaining == 0:
            self._end(account, instrument, order, "FILLED")
            order.update_time = at  # filled when its last trade was, not when looked at
        else:
            order.status = "PARTIALLY_FILLED"
        self._tell(account, order, trade)

    def _end(
        self, account: Account, instrument: Instrument, order: VenueOrder, status: str
    ) -> None:
        """The order ends: whatever it still has locked is free again."""
        asset = instrument.quote if order.side == "BUY" else instrument.base
        balance = account.balance(asset)
        balance.locked -= order.locked
        balance.free += order.locked
        order.locked = Decimal(0)
        order.status = status
        order.update_time = self.clock()
        if status != "FILLED":  # a fill is told with its trade
            self._tell(account, order, None)

    def _tell(self, account: Account, order: VenueOrder, trade: VenueTrade | None) -> None:
        for listener in self.on_change:
            listener(account, order, trade)


def _spend(balance: Balance, order: VenueOrder, amount: Decimal) -> None:
    """Pay `amount` from what the order locked (a market buy may cost less than locked)."""
    balance.locked -= amount
    order.locked -= amount


def _down(value: Decimal, step: Decimal) -> Decimal:
    return (value / step).to_integral_value(ROUND_DOWN) * step


def _check_filters(
    instrument: Instrument,
    type_: str,
    quantity: Decimal,
    price: Decimal | None,
    touch: Decimal,
) -> None:
    """Binance's LOT_SIZE, PRICE_FILTER and NOTIONAL filters."""
    if quantity <= 0 or quantity % instrument.step_size or quantity < instrument.min_qty:
        raise VenueError(-1013, "Filter failure: LOT_SIZE")
    if type_ == "LIMIT" and (price is None or price <= 0 or price % instrument.tick_size):
        raise VenueError(-1013, "Filter failure: PRICE_FILTER")
    notional = quantity * (price if price is not None else touch)
    if notional < instrument.min_notional:
        raise VenueError(-1013, "Filter failure: NOTIONAL")
