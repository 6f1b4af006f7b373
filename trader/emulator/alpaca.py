"""Alpaca's trading API (`/v2/...`) as the emulator answers it, on the shared venue core
(`trader.emulator.venue`: accounts, matching, fees) with the shared faults and control
endpoints (`trader.emulator.plumbing`); the market data routes are `alpaca_data`'s.

- Keys in the `APCA-API-KEY-ID` / `APCA-API-SECRET-KEY` headers; anything else is 401.
- Accounts hold USD cash and positions (one balance per asset); crypto pays its fee in the
  asset it receives (`CFEE` activities), stocks trade free. The account is a paper margin
  account (shorts of stocks Alpaca lends, buying power 2x or 4x) unless `account_type` is
  "cash" (`alpaca_account`); what Alpaca refuses and when it works an order (extended
  hours; a stock order sent while the market is closed waits, "accepted", for its session)
  is `alpaca_orders`'s and `alpaca_hours`'s.
- The pattern-day-trader rule: an account whose last equity is under $25,000 is refused its
  fourth day trade (a stock bought and sold on one session's date) within five sessions.
- A client order id is never reused, even after its order ended.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from aiohttp import web

from trader.emulator.alpaca_account import AccountType, AlpacaAccounts
from trader.emulator.alpaca_data import AlpacaData, when
from trader.emulator.alpaca_feeds import DataPlan
from trader.emulator.alpaca_history import AlpacaHistory, Refused
from trader.emulator.alpaca_orders import Ask, OrderRules, RefusedWith, sale_refusal
from trader.emulator.alpaca_stream import PATH as STREAM_PATH
from trader.emulator.alpaca_stream import TradeStream
from trader.emulator.alpaca_wire import (
    alpaca_symbol,
    asset_json,
    error,
    order_json,
    order_number,
)
from trader.emulator.faults import FaultPlan
from trader.emulator.market import Instrument
from trader.emulator.plumbing import Control, Handler
from trader.emulator.sessions import Sessions
from trader.emulator.venue import DUPLICATE, INSUFFICIENT, Account, Venue, VenueError, VenueOrder

_INTERNAL = json.dumps(error(50010000, "internal server error occurred"))


def _refusal(failed: Exception) -> web.Response | None:
    """Alpaca's answer to a refusal."""
    if not isinstance(failed, Refused):
        return None
    body = error(failed.code, failed.message)
    if isinstance(failed, RefusedWith):
        body |= failed.extra
    return web.json_response(body, status=failed.status)


def _venue_refusal(failed: VenueError, account: Account, ask: Ask) -> Refused:
    if failed.msg == INSUFFICIENT:
        if ask.side == "SELL":
            return sale_refusal(ask.instrument, account, ask.qty)
        return Refused(403, 40310000, "insufficient buying power")
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
    data_plan: DataPlan = field(default_factory=DataPlan)  # the market data subscription
    account_type: AccountType = "margin"  # Alpaca's paper accounts are margin accounts
    control: Control = field(init=False)
    accounts: AlpacaAccounts = field(init=False)
    rules: OrderRules = field(init=False)
    stream: TradeStream = field(init=False)  # the trade-updates websocket

    def __post_init__(self) -> None:
        self.control = Control(self.faults, self.venue.clock, on_clock=self.on_clock)
        self.accounts = AlpacaAccounts(self.venue, self.sessions, self.account_type)
        self.rules = OrderRules(self.accounts)
        self.venue.may_borrow = self.accounts.may_borrow
        self.stream = TradeStream(self.venue, self.secrets, self._order_json)

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
        AlpacaData(self.venue.market, self.sessions, self.data_plan).routes(app)
        AlpacaHistory(self.venue, self.sessions, self._account).routes(app)
        self.stream.routes(app)
        self.control.routes(app)
        return app

    # --- plumbing ---------------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == STREAM_PATH:  # its keys come in its first message
            return await handler(request)
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

    async def account(self, request: web.Request) -> web.Response:
        account, now = self._account(request), self.venue.clock()
        trades = self.accounts.day_trades(account, now)
        return web.json_response(self.accounts.account_json(account, now, trades))

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
        return web.json_response(self.accounts.positions_json(account, self.venue.clock()))

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
        if side not in {"BUY", "SELL"} or type_ not in {"MARKET", "LIMIT"}:
            raise Refused(422, 40010001, "invalid side or order type")
        ask = Ask(
            instrument, side, type_, str(body.get("time_in_force", "")).upper(),
            _decimal(body, "qty"), _decimal(body, "limit_price") if type_ == "LIMIT" else None,
            body.get("extended_hours") is True and instrument.asset_class == "us_equity",
        )  # fmt: skip
        timing = self.rules.admit(account, ask, self.venue.clock())
        client_id = str(body.get("client_order_id") or f"emu{self.venue._next_order}")
        if len(client_id) > 128:
            raise Refused(422, 40010001, "client_order_id must be at most 128 characters")
        intent = self.rules.intent(account, ask)
        try:
            order = self.venue.place(
                account, symbol=instrument.venue_id, side=side, type_=type_, quantity=ask.qty,
                price=ask.price, time_in_force=ask.tif, client_order_id=client_id,
                release_at=timing.release_at, expires_at=timing.expires_at,
            )  # fmt: skip
        except VenueError as failed:
            raise _venue_refusal(failed, account, ask) from None
        order.extended_hours, order.position_intent = ask.extended, intent
        return web.json_response(self._order_json(order))

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
