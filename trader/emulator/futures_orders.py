"""The emulated USDⓈ-M venue's orders: checks, refusals and fills, by Binance's futures rules.

- One-way mode only for trading: an order whose positionSide is not BOTH is refused with
  -4061 "Order's position side does not match user's setting."; with hedge mode switched on,
  an order with positionSide BOTH is refused the same way, and LONG/SHORT orders are not
  emulated (-1020).
- reduceOnly: refused with -2022 when there is no position or the order would increase it;
  at fill time it closes at most the position (it never flips it).
- Minimum notional: -4164 below the symbol's MIN_NOTIONAL, except for reduce-only orders.
- Position limit: -2027 when the position after the order exceeds the notional cap of the
  last bracket open at the symbol's leverage.
- Margin: -2019 when the initial margin of the part that opens or increases the position
  (quantity x price / leverage) plus its open loss (quantity x how much worse than the mark
  its price is) exceeds the available balance. A reversal closes first: the
  closed position's margin counts as available (Binance FAQ "How to Calculate the Margin
  Requirement on Binance Futures Trading", one-way mode: max(|position notional + bids|,
  |position notional - asks|) / leverage, so an order past the position asks only what its
  new side needs beyond the old side's margin), as the paper broker (`paper_perp.py`) reads it.
- Fills as the spot venue's (`venue.py`): a market order takes the emulated book (the spot
  venue's levels around the last price), a resting limit fills at its price when a later bar
  trades through it, for at most `liquidity_share` of the bar's volume. Commission in USDT:
  maker or taker rate x notional, booked as a COMMISSION income row; realised P&L as a
  REALIZED_PNL row.
- Conditional orders (`POST /fapi/v1/algoOrder`, where ccxt sends every stop and take-profit):
  STOP_MARKET / TAKE_PROFIT_MARKET trigger when a later bar (last price, or the mark with
  workingType MARK_PRICE) reaches the trigger price, and then fill at the trigger price as a
  taker; STOP / TAKE_PROFIT place their limit order then.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal

from trader.domain import Bar, decimal_from_float
from trader.emulator.futures_account import FuturesAccount, FuturesOrder, FuturesTrade
from trader.emulator.futures_market import PerpMarket
from trader.emulator.market import Instrument
from trader.emulator.venue import Fees, Venue, VenueError

EIGHT = Decimal("0.00000001")
CONDITIONAL = {"STOP", "STOP_MARKET", "TAKE_PROFIT", "TAKE_PROFIT_MARKET"}

MARGIN_INSUFFICIENT = "Margin is insufficient."
REDUCE_ONLY_REJECTED = "ReduceOnly Order is rejected."
SIDE_MISMATCH = "Order's position side does not match user's setting."


@dataclass
class OrderRequest:
    symbol: str
    side: str
    type: str
    quantity: Decimal
    price: Decimal | None = None
    time_in_force: str = "GTC"
    reduce_only: bool = False
    position_side: str = "BOTH"
    client_order_id: str | None = None
    trigger_price: Decimal | None = None
    working_type: str = "CONTRACT_PRICE"
    close_position: bool = False


@dataclass
class FuturesVenue:
    perps: PerpMarket
    # Binance USDⓈ-M regular tier: maker 0.0200%, taker 0.0500% (binance.com/en/fee/futureFee).
    fees: Fees = field(default_factory=lambda: Fees(Decimal("0.0002"), Decimal("0.0005")))
    liquidation_fee: Decimal = Decimal("0.005")  # of the notional liquidated: configurable
    liquidity_share: Decimal = Decimal("0.1")
    accounts: dict[str, FuturesAccount] = field(default_factory=dict)  # by API key
    # Told to bring an account up to now before anything reads or changes it (`Settlement`).
    on_sync: list[Callable[[FuturesAccount], None]] = field(default_factory=list)
    fills_done: dict[int, datetime] = field(default_factory=dict)  # order id -> last bar met
    _next_order: int = 1
    _next_trade: int = 1
    _book: Venue = field(init=False)

    def __post_init__(self) -> None:
        self._book = Venue(self.perps.market)  # the spot venue's book, for takers' levels

    @property
    def clock(self) -> Callable[[], datetime]:
        return self.perps.market.clock

    def open_account(self, api_key: str, wallet: Decimal) -> FuturesAccount:
        account = FuturesAccount(Decimal(wallet))
        self.accounts[api_key] = account
        self.sync(account)  # what settled before it opened is not its business
        return account

    def instrument(self, symbol: str) -> Instrument:
        instrument = self.perps.market.instrument(symbol)
        if instrument is None or self.perps.listing(symbol) is None:
            raise VenueError(-1121, "Invalid symbol.")
        return instrument

    def marks(self) -> dict[str, Decimal]:
        return {
            listing.instrument.venue_id: self.perps.mark_price(listing.instrument.venue_id)
            for listing in self.perps.listings
        }

    def order_id(self) -> int:
        """A new order id (orders and conditional orders share the sequence)."""
        number, self._next_order = self._next_order, self._next_order + 1
        return number

    def sync(self, account: FuturesAccount) -> None:
        """Bring the account up to now (fills, triggers, funding, liquidations): the settle
        module hooks in here."""
        for hook in self.on_sync:
            hook(account)

    # --- placing ----------------------------------------------------------------------------

    def place(self, account: FuturesAccount, request: OrderRequest) -> FuturesOrder:
        self.sync(account)
        instrument = self.instrument(request.symbol)
        self._check_side(account, request)
        self._check_filters(instrument, request)
        conditional = request.type in CONDITIONAL
        if conditional and request.trigger_price is None:
            raise VenueError(-1102, "Mandatory parameter 'triggerPrice' was not sent.")
        reference = request.price or self._touch(instrument, request.side)
        position = account.position(request.symbol)
        sign = 1 if request.side == "BUY" else -1
        if request.reduce_only and (position.size == 0 or (position.size > 0) == (sign > 0)):
            raise VenueError(-2022, REDUCE_ONLY_REJECTED)
        notional = request.quantity * reference
        if not request.reduce_only and notional < instrument.min_notional:
            raise VenueError(
                -4164,
                f"Order's notional must be no smaller than {instrument.min_notional.normalize()}"
                " (unless you choose reduce only).",
            )
        if not request.reduce_only and not conditional:
            self._check_margin(account, request, reference)
        now, number = self.clock(), self.order_id()
        order = FuturesOrder(
            number, request.client_order_id or f"emu{number}",
            request.symbol, request.side, request.type, request.time_in_force, request.price,
            request.quantity, request.reduce_only, now, update_time=now,
            trigger_price=request.trigger_price, working_type=request.working_type,
            close_position=request.close_position, algo=conditional,
        )  # fmt: skip
        account.orders[order.order_id] = order
        if request.type == "MARKET":
            self._take(account, instrument, order)
            if order.is_open:
                self._end(order, "EXPIRED")
        elif request.type == "LIMIT":
            self._take(account, instrument, order)
            if order.is_open and request.time_in_force in {"IOC", "FOK"}:
                self._end(order, "EXPIRED")
        return order

    def _check_side(self, account: FuturesAccount, request: OrderRequest) -> None:
        if request.position_side not in {"BOTH", "LONG", "SHORT"}:
            raise VenueError(-4060, "Invalid position side.")
        if account.dual_side != (request.position_side != "BOTH"):
            raise VenueError(-4061, SIDE_MISMATCH)
        if account.dual_side:
            raise VenueError(-1020, "This operation is not supported.")  # hedge mode: not emulated

    def _check_filters(self, instrument: Instrument, request: OrderRequest) -> None:
        if request.quantity <= 0:
            raise VenueError(-4003, "Quantity less than or equal to zero.")
        if request.quantity % instrument.step_size:
            raise VenueError(-1111, "Precision is over the maximum defined for this asset.")
        if request.quantity < instrument.min_qty:
            raise VenueError(-4004, "Quantity less than min quantity.")
        for price in (request.price, request.trigger_price):
            if price is not None and (price <= 0 or price % instrument.tick_size):
                raise VenueError(-4014, "Price not increased by tick size.")
        if request.type in {"LIMIT", "STOP", "TAKE_PROFIT"} and request.price is None:
            raise VenueError(-1102, "Mandatory parameter 'price' was not sent.")

    def _check_margin(
        self, account: FuturesAccount, request: OrderRequest, reference: Decimal
    ) -> None:
        position = account.position(request.symbol)
        sign = 1 if request.side == "BUY" else -1
        marks = self.marks()
        available = account.available(marks)
        if position.size == 0 or (position.size > 0) == (sign > 0):
            increase = request.quantity
        else:
            increase = max(request.quantity - abs(position.size), Decimal(0))
            if increase:  # a reversal: the position closes first, freeing its margin
                available += account.freed_by_closing(position, marks[request.symbol])
        leverage = account.setting(request.symbol).leverage
        listing = self.perps.listing(request.symbol)
        assert listing is not None  # the instrument was checked
        allowed = [b for b in listing.brackets if b.initial_leverage >= leverage]
        after = abs(position.size + sign * request.quantity) * reference
        if allowed and after > allowed[-1].notional_cap:
            raise VenueError(-2027, "Exceeded the maximum allowable position at current leverage.")
        # Cost = initial margin + open loss, the open loss being how much worse than the mark the
        # order's price is (Binance FAQ "How to Calculate Cost Required to Open a Position").
        open_loss = increase * max(Decimal(0), sign * (reference - marks[request.symbol]))
        needed = increase * reference / leverage + open_loss
        if needed > available:
            raise VenueError(-2019, MARGIN_INSUFFICIENT)

    def cancel(self, account: FuturesAccount, order: FuturesOrder) -> FuturesOrder:
        self.sync(account)
        if not order.is_open:
            raise VenueError(-2011, "Unknown order sent.")
        self._end(order, "CANCELED")
        return order

    def find(
        self,
        account: FuturesAccount,
        symbol: str,
        order_id: int | None,
        client_id: str | None,
        *,
        algo: bool = False,
    ) -> FuturesOrder | None:
        self.sync(account)
        found = [
            o
            for o in account.orders.values()
            if o.symbol == symbol
            and o.algo == algo
            and (order_id is None or o.order_id == order_id)
            and (client_id is None or o.client_order_id == client_id)
        ]
        return max(found, key=lambda o: o.order_id) if found else None

    # --- filling ----------------------------------------------------------------------------

    def _touch(self, instrument: Instrument, side: str) -> Decimal:
        book = self.perps.market.top_of_book(instrument.venue_id)
        if book is None:
            raise VenueError(-1013, "Market is closed.")
        return book[1] if side == "BUY" else book[0]

    def _take(self, account: FuturesAccount, instrument: Instrument, order: FuturesOrder) -> None:
        """The order meets the book for whatever part of it is marketable now."""
        for price, size in self._book.taker_levels(instrument, order.side):
            if order.remaining <= 0 or not order.is_open:
                break
            if order.price is not None and (
                price > order.price if order.side == "BUY" else price < order.price
            ):
                break
            self.fill(account, order, price, min(order.remaining, size), False, self.clock())

    def fill_from_bar(self, account: FuturesAccount, order: FuturesOrder, bar: Bar) -> None:
        """A resting limit order meets a bar that closed after it was placed."""
        if order.price is None or not order.is_open:
            return
        low, high = decimal_from_float(bar.low), decimal_from_float(bar.high)
        if not (low < order.price if order.side == "BUY" else high > order.price):
            return
        step = self.instrument(order.symbol).step_size
        available = decimal_from_float(bar.volume) * self.liquidity_share
        qty = min(order.remaining, (available / step).to_integral_value(ROUND_DOWN) * step)
        if qty > 0:
            self.fill(account, order, order.price, qty, True, bar.end)

    def trigger(self, account: FuturesAccount, order: FuturesOrder, bar: Bar) -> None:
        """A conditional order meets a bar: it triggers when the bar reaches its price."""
        if not order.is_open or order.trigger_price is None:
            return
        low, high = decimal_from_float(bar.low), decimal_from_float(bar.high)
        trigger = order.trigger_price
        stop = order.type in {"STOP", "STOP_MARKET"}
        rising = order.side == "BUY" if stop else order.side == "SELL"
        if not (high >= trigger if rising else low <= trigger):
            return
        order.status, order.update_time = "FINISHED", bar.end
        child = FuturesOrder(
            self.order_id(), f"{order.client_order_id}-t", order.symbol, order.side,
            "LIMIT" if order.price is not None else "MARKET", order.time_in_force, order.price,
            order.quantity, order.reduce_only, bar.end, update_time=bar.end,
        )  # fmt: skip
        order.triggered_order = child.order_id
        account.orders[child.order_id] = child
        if child.price is None:
            self.fill(account, child, trigger, child.quantity, False, bar.end)
            if child.is_open:
                self._end(child, "EXPIRED")

    def fill(
        self,
        account: FuturesAccount,
        order: FuturesOrder,
        price: Decimal,
        qty: Decimal,
        maker: bool,
        at: datetime,
        *,
        commission_rate: Decimal | None = None,
    ) -> FuturesTrade | None:
        """One trade of `order`: the position, the isolated wallet, realised P&L and the
        commission booked."""
        position = account.position(order.symbol)
        if order.reduce_only:
            closing = position.size != 0 and (position.size > 0) != (order.side_sign > 0)
            qty = min(qty, abs(position.size)) if closing else Decimal(0)
            if qty == 0:
                self._end(order, "EXPIRED")
                return None
        before, previous_wallet = abs(position.size), position.isolated_wallet
        realized, closed = position.apply(order.side_sign, qty, price)
        position.update_time = at
        if account.is_isolated(order.symbol):
            if closed:
                position.isolated_wallet -= previous_wallet * closed / before
            opened = qty - closed
            if opened:
                leverage = account.setting(order.symbol).leverage
                position.isolated_wallet += opened * price / leverage
        if commission_rate is None:
            commission_rate = self.fees.maker if maker else self.fees.taker
        commission = (price * qty * commission_rate).quantize(EIGHT, ROUND_HALF_UP)
        trade = FuturesTrade(
            self._next_trade, order.order_id, order.symbol, price, qty, commission, "USDT", at,
            order.side == "BUY", maker, realized,
        )  # fmt: skip
        self._next_trade += 1
        account.trades.append(trade)
        order.trades.append(trade)
        account.book(order.symbol, "REALIZED_PNL", realized, at, str(trade.trade_id))
        account.book(order.symbol, "COMMISSION", -commission, at, str(trade.trade_id))
        order.executed += qty
        order.cum_quote += price * qty
        order.update_time = at
        order.status = "FILLED" if order.remaining <= 0 else "PARTIALLY_FILLED"
        if order.reduce_only and order.is_open and position.size == 0:
            self._end(order, "EXPIRED")
        return trade

    def _end(self, order: FuturesOrder, status: str) -> None:
        order.status = status
        order.update_time = self.clock()
