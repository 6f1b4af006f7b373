"""Alpaca's trading API (`/v2/...`) as the emulator answers it, on the shared venue core
(`trader.emulator.venue`: accounts, matching, fees) with the shared faults and control
endpoints (`trader.emulator.plumbing`); the market data routes are `alpaca_data`'s.

- Keys in the `APCA-API-KEY-ID` / `APCA-API-SECRET-KEY` headers; anything else is 401.
- Accounts hold USD cash and positions (one balance per asset); crypto pays its fee in the
  asset it receives (`CFEE` activities), stocks trade free. A cash account: selling more than
  is held is refused (no shorting), and so is a stock order outside the session (Alpaca would
  queue it for the open: here it shows).
- The pattern-day-trader rule: an account under $25,000 is refused its fourth day trade (a
  stock bought and sold on one session's date) within five sessions.
- A client order id is never reused, even after its order ended.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from aiohttp import web

from trader.emulator.alpaca_data import AlpacaData, when
from trader.emulator.alpaca_history import AlpacaHistory, Refused
from trader.emulator.alpaca_wire import (
    alpaca_symbol,
    asset_json,
    error,
    order_json,
    order_number,
    text,
)
from trader.emulator.faults import FaultPlan
from trader.emulator.market import Instrument
from trader.emulator.plumbing import Control, Handler
from trader.emulator.sessions import NEW_YORK, Sessions
from trader.emulator.venue import DUPLICATE, INSUFFICIENT, Account, Venue, VenueError, VenueOrder

PDT_EQUITY = Decimal(25_000)
_INTERNAL = json.dumps(error(50010000, "internal server error occurred"))


def _refusal(failed: Exception) -> web.Response | None:
    """Alpaca's answer to a refusal."""
    if not isinstance(failed, Refused):
        return None
    return web.json_response(error(failed.code, failed.message), status=failed.status)


def _venue_refusal(failed: VenueError, side: str) -> Refused:
    if failed.msg == INSUFFICIENT:
        what = "insufficient buying power" if side == "BUY" else "insufficient qty available"
        return Refused(403, 40310000, what)
    if failed.msg == DUPLICATE:
        return Refused(422, 40010001, "client_order_id must be unique")
    return Refused(422, 40010001, failed.msg)


@dataclass
class AlpacaApi:
    venue: Venue
    secrets: dict[str, str] = field(default_factory=dict)  # key id -> secret key
    faults: FaultPlan = field(default_factory=FaultPlan)
    sessions: Sessions | None = None  # the stock market's (None: no stocks listed)
    on_clock: Callable[[bool], None] | None = None
    control: Control = field(init=False)

    def __post_init__(self) -> None:
        self.control = Control(self.faults, self.venue.clock, on_clock=self.on_clock)

    @property
    def requests(self) -> list[str]:
        return self.control.requests

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        get = app.router.add_get
        get("/v2/account", self.account)
        get("/v2/assets", self.assets)
        get("/v2/assets/{symbol}", self.asset)
        app.router.add_post("/v2/orders", self.new_order)
        get("/v2/orders", self.orders)
        get("/v2/orders:by_client_order_id", self.order_by_client_id)
        get("/v2/orders/{order_id}", self.order)
        app.router.add_delete("/v2/orders/{order_id}", self.cancel)
        get("/v2/positions", self.positions)
        AlpacaData(self.venue.market, self.sessions).routes(app)
        AlpacaHistory(self.venue, self.sessions, self._account).routes(app)
        self.control.routes(app)
        return app

    # --- plumbing ---------------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not await self.control.admit(request):
            return await handler(request)
        key = request.headers.get("APCA-API-KEY-ID", "")
        if key not in self.secrets or self.secrets[key] != request.headers.get(
            "APCA-API-SECRET-KEY"
        ):
            return web.json_response(error(40110000, "request is not authorized"), status=401)
        return await self.control.answer(request, handler, _INTERNAL, _refusal)

    def _account(self, request: web.Request) -> Account:
        account = self.venue.accounts.get(request.headers.get("APCA-API-KEY-ID", ""))
        if account is None:
            raise Refused(403, 40310000, "account not found")
        self.venue.sync(account)
        return account

    def _instrument(self, name: str) -> Instrument:
        for instrument in self.venue.market.instruments:
            if name in {alpaca_symbol(instrument), instrument.venue_id, instrument.symbol}:
                return instrument
        raise Refused(422, 40010001, f'asset "{name}" not found')

    def _order(self, account: Account, order_id: str) -> VenueOrder:
        number = order_number(order_id)
        order = account.orders.get(number) if number is not None else None
        if order is None:
            raise Refused(404, 40410000, "order not found")
        return order

    def _order_json(self, order: VenueOrder) -> dict[str, Any]:
        return order_json(order, self.venue.instrument(order.symbol))

    # --- account ----------------------------------------------------------------------------

    def _equity(self, account: Account) -> Decimal:
        equity = account.balance("USD").total
        for instrument in self.venue.market.instruments:
            held = account.balances.get(instrument.base)
            price = self.venue.market.last_price(instrument.venue_id)
            if held is not None and price is not None and instrument.quote == "USD":
                equity += held.total * price
        return equity

    def day_trades(self, account: Account, now: datetime) -> int:
        """Stocks bought and sold on one session's date, over the last five sessions."""
        if self.sessions is None:
            return 0
        today = now.astimezone(NEW_YORK).date()
        dates = [d for d, _, _ in self.sessions.days(today - timedelta(days=30), today)]
        recent = set(dates[-5:])
        sides: dict[tuple[object, str], set[bool]] = {}
        for trade in account.trades:
            instrument = self.venue.instrument(trade.symbol)
            day = trade.time.astimezone(NEW_YORK).date()
            if instrument.asset_class == "us_equity" and day in recent:
                sides.setdefault((day, trade.symbol), set()).add(trade.is_buyer)
        return sum(1 for both in sides.values() if len(both) == 2)

    async def account(self, request: web.Request) -> web.Response:
        account = self._account(request)
        now = self.venue.clock()
        cash = account.balance("USD")
        equity = self._equity(account)
        return web.json_response({
            "id": "00000000-0000-4000-a000-000000000001", "account_number": "EMU000001",
            "status": "ACTIVE", "crypto_status": "ACTIVE", "currency": "USD",
            "cash": text(cash.total), "buying_power": text(cash.free),
            "regt_buying_power": text(cash.free), "daytrading_buying_power": "0",
            "non_marginable_buying_power": text(cash.free),
            "equity": text(equity), "last_equity": text(equity), "portfolio_value": text(equity),
            "long_market_value": text(equity - cash.total), "short_market_value": "0",
            "initial_margin": "0", "maintenance_margin": "0", "sma": "0", "multiplier": "1",
            "pattern_day_trader": False, "daytrade_count": self.day_trades(account, now),
            "trading_blocked": False, "transfers_blocked": False, "account_blocked": False,
            "trade_suspended_by_user": False, "shorting_enabled": False,
            "created_at": "2020-01-01T00:00:00Z",
        })  # fmt: skip

    async def assets(self, request: web.Request) -> web.Response:
        wanted = request.query.get("asset_class")
        return web.json_response([
            asset_json(i) for i in self.venue.market.instruments
            if wanted is None or i.asset_class == wanted
        ])  # fmt: skip

    async def asset(self, request: web.Request) -> web.Response:
        name = request.match_info["symbol"]
        try:
            return web.json_response(asset_json(self._instrument(name)))
        except Refused:
            raise Refused(404, 40410000, "asset not found") from None

    async def positions(self, request: web.Request) -> web.Response:
        account = self._account(request)
        out = []
        for asset, balance in sorted(account.balances.items()):
            if asset == "USD" or balance.total == 0:
                continue
            listed = [i for i in self.venue.market.instruments if i.base == asset]
            stock = bool(listed) and listed[0].asset_class == "us_equity"
            price = self.venue.market.last_price(listed[0].venue_id) if listed else None
            out.append({
                "asset_id": asset_json(listed[0])["id"] if listed else asset,
                "symbol": asset if stock else f"{asset}USD", "exchange": "NASDAQ" if stock
                else "CRYPTO", "asset_class": "us_equity" if stock else "crypto",
                "qty": text(balance.total), "qty_available": text(balance.free), "side": "long",
                "avg_entry_price": "0", "current_price": text(price),
                "market_value": text(balance.total * price) if price is not None else None,
            })  # fmt: skip
        return web.json_response(out)

    # --- orders -----------------------------------------------------------------------------

    async def new_order(self, request: web.Request) -> web.Response:
        account = self._account(request)
        try:
            body = await request.json()
        except ValueError:
            raise Refused(400, 40010000, "request body format is invalid") from None
        instrument = self._instrument(str(body.get("symbol", "")))
        side = str(body.get("side", "")).upper()
        type_ = str(body.get("type", "")).upper()
        tif = str(body.get("time_in_force", "")).upper()
        if side not in {"BUY", "SELL"} or type_ not in {"MARKET", "LIMIT"}:
            raise Refused(422, 40010001, "invalid side or order type")
        quantity = _decimal(body, "qty")
        price = _decimal(body, "limit_price") if type_ == "LIMIT" else None
        self._check(account, instrument, side, quantity, tif)
        client_id = str(body.get("client_order_id") or f"emu{self.venue._next_order}")
        if len(client_id) > 128:
            raise Refused(422, 40010001, "client_order_id must be at most 128 characters")
        try:
            order = self.venue.place(
                account, symbol=instrument.venue_id, side=side, type_=type_, quantity=quantity,
                price=price, time_in_force=tif, client_order_id=client_id,
            )  # fmt: skip
        except VenueError as failed:
            raise _venue_refusal(failed, side) from None
        return web.json_response(self._order_json(order))

    def _check(
        self, account: Account, instrument: Instrument, side: str, quantity: Decimal, tif: str
    ) -> None:
        """Alpaca's checks before an order is taken (the venue core checks balances)."""
        if not instrument.tradable:
            raise Refused(422, 40010001, f"asset {alpaca_symbol(instrument)} is not tradable")
        stock = instrument.asset_class == "us_equity"
        if tif not in ({"DAY", "GTC", "IOC", "FOK"} if stock else {"GTC", "IOC"}):
            raise Refused(422, 40010001, "invalid time_in_force")
        if quantity != quantity.to_integral_value():
            if not instrument.fractionable:
                raise Refused(422, 40310000, "fractional orders are not supported for this asset")
            if stock and tif != "DAY":
                raise Refused(422, 40010001, "fractional orders must be DAY orders")
        if not stock:
            return
        now = self.venue.clock()
        if self.sessions is None or not self.sessions.is_open(now):
            raise Refused(422, 40010001, "the market is closed: the emulator takes stock "
                          "orders only in the session (Alpaca would queue this one)")  # fmt: skip
        day = now.astimezone(NEW_YORK).date()
        bought_or_sold = {
            t.is_buyer for t in account.trades
            if t.symbol == instrument.venue_id and t.time.astimezone(NEW_YORK).date() == day
        }  # fmt: skip
        other_side_today = (side == "SELL") in bought_or_sold  # is_buyer of the other side
        if (
            other_side_today
            and self._equity(account) < PDT_EQUITY
            and self.day_trades(account, now) >= 3
        ):
            raise Refused(403, 40310100, "trade denied due to pattern day trading protection")

    async def orders(self, request: web.Request) -> web.Response:
        account = self._account(request)
        status = request.query.get("status", "open")
        names = [s for s in request.query.get("symbols", "").split(",") if s]
        ids = {self._instrument(n).venue_id for n in names}
        chosen = [
            o for o in account.orders.values()
            if (status == "all" or (status == "open") == o.is_open)
            and (not ids or o.symbol in ids)
        ]  # fmt: skip
        after = request.query.get("after")
        if after:
            chosen = [o for o in chosen if o.time > when(after)]
        limit = int(request.query.get("limit") or 50)
        newest_first = request.query.get("direction", "desc") == "desc"
        chosen.sort(key=lambda o: o.order_id, reverse=newest_first)
        return web.json_response([self._order_json(o) for o in chosen[:limit]])

    async def order(self, request: web.Request) -> web.Response:
        account = self._account(request)
        order = self._order(account, request.match_info["order_id"])
        return web.json_response(self._order_json(order))

    async def order_by_client_id(self, request: web.Request) -> web.Response:
        account = self._account(request)
        cid = request.query.get("client_order_id", "")
        found = [o for o in account.orders.values() if o.client_order_id == cid]
        if not found:
            raise Refused(404, 40410000, "order not found")
        return web.json_response(self._order_json(found[-1]))

    async def cancel(self, request: web.Request) -> web.Response:
        account = self._account(request)
        order = self._order(account, request.match_info["order_id"])
        if not order.is_open:
            raise Refused(422, 42210000, "order is not cancelable")
        self.venue.cancel(account, order.symbol, order)
        return web.Response(status=204)


def _decimal(body: dict[str, Any], name: str) -> Decimal:
    try:
        value = Decimal(str(body.get(name)))
    except InvalidOperation:
        raise Refused(422, 40010001, f"invalid {name}") from None
    if not value.is_finite() or value <= 0:
        raise Refused(422, 40010001, f"invalid {name}")
    return value
