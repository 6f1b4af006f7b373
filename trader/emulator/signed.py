"""Binance spot's signed (private) REST endpoints, as the emulator answers them.

Every signed request carries `X-MBX-APIKEY`, a `timestamp` and a `signature`: the hex
HMAC-SHA256, keyed by the API secret, of the query string followed by the form body (without
the signature itself). The timestamp must lie within `recvWindow` (default 5000 ms, at most
60000) of the server's clock and at most 1000 ms ahead of it. The server's clock for these
checks is the wall clock, whatever the replayed market's clock says: the client signs with
its own wall clock. A request that waited (an injected delay) is judged when it is processed,
so one held longer than its recvWindow is refused, as on Binance.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

from trader.emulator.params import decimal_param, required
from trader.emulator.plumbing import accounts_state
from trader.emulator.venue import (
    NO_SUCH_ORDER,
    UNKNOWN_ORDER,
    Account,
    Venue,
    VenueError,
    VenueOrder,
    VenueTrade,
)
from trader.emulator.wire import ms as _ms
from trader.emulator.wire import num as _num

MAX_RECV_WINDOW_MS = 60_000
DEFAULT_RECV_WINDOW_MS = 5_000


def sign(query: str, secret: str) -> str:
    """The signature Binance expects for `query` (what a client appends as `signature=`)."""
    return hmac.new(secret.encode(), query.encode(), hashlib.sha256).hexdigest()


def check_time(params: Mapping[str, str], now: int) -> None:
    """Refuse a signed request whose `timestamp` lies outside its `recvWindow` of `now` (ms),
    or 1000 ms or more ahead of it, as Binance does (-1021); the futures API shares it."""
    try:
        timestamp = int(params["timestamp"])
        window = int(params.get("recvWindow", DEFAULT_RECV_WINDOW_MS))
    except KeyError:
        raise VenueError(
            -1102, "Mandatory parameter 'timestamp' was not sent, was empty/null, or malformed."
        ) from None
    except ValueError:
        raise VenueError(-1100, "Illegal characters found in a parameter.") from None
    if not 0 < window <= MAX_RECV_WINDOW_MS:
        raise VenueError(-1131, "recvWindow must be less than 60000")
    if timestamp >= now + 1000:
        raise VenueError(-1021, "Timestamp for this request was 1000ms ahead of the server's time.")
    if now - timestamp > window:
        raise VenueError(-1021, "Timestamp for this request is outside of the recvWindow.")


@dataclass
class SignedApi:
    venue: Venue
    secrets: dict[str, str] = field(default_factory=dict)  # API key -> secret
    wall_ms: Callable[[], int] = field(default_factory=lambda: lambda: int(time.time() * 1000))

    def routes(self, app: web.Application) -> None:
        router = app.router
        router.add_get("/api/v3/account", self.account)
        router.add_post("/api/v3/order", self.new_order)
        router.add_get("/api/v3/order", self.query_order)
        router.add_delete("/api/v3/order", self.cancel_order)
        router.add_get("/api/v3/openOrders", self.open_orders)
        router.add_get("/api/v3/allOrders", self.all_orders)
        router.add_get("/api/v3/myTrades", self.my_trades)
        router.add_get("/sapi/v1/capital/config/getall", self.coins)
        router.add_get("/sapi/v1/margin/allPairs", self.margin_pairs)
        router.add_get("/sapi/v1/margin/isolated/allPairs", self.margin_pairs)
        router.add_get("/__emulator__/account", self.accounts_state)

    # --- authentication ---------------------------------------------------------------------

    async def _authenticate(self, request: web.Request) -> tuple[Account, dict[str, str]]:
        """The caller's account and its parameters, once key, signature and time check out."""
        key = request.headers.get("X-MBX-APIKEY", "")
        secret = self.secrets.get(key)
        account = self.venue.accounts.get(key)
        if secret is None or account is None:
            raise VenueError(-2015, "Invalid API-key, IP, or permissions for action.", 401)
        body = await request.text()  # read (and kept) as the request arrived
        total = "&".join(part for part in (request.query_string, body) if part)
        payload, _, signature = total.rpartition("&signature=")
        if not signature or not hmac.compare_digest(sign(payload, secret), signature):
            raise VenueError(-1022, "Signature for this request is not valid.")
        params = dict(parse_qsl(payload, keep_blank_values=True))
        self._check_time(params)
        return account, params

    def _check_time(self, params: Mapping[str, str]) -> None:
        check_time(params, self.wall_ms())

    # --- endpoints --------------------------------------------------------------------------

    async def account(self, request: web.Request) -> web.Response:
        account, params = await self._authenticate(request)
        self.venue.sync(account)
        omit_zero = params.get("omitZeroBalances") == "true"
        balances = [
            {"asset": asset, "free": _num(b.free), "locked": _num(b.locked)}
            for asset, b in sorted(account.balances.items())
            if not (omit_zero and b.total == 0)
        ]
        fees = self.venue.fees
        return web.json_response(
            {
                "makerCommission": int(fees.maker * 10_000),
                "takerCommission": int(fees.taker * 10_000),
                "buyerCommission": 0,
                "sellerCommission": 0,
                "commissionRates": {
                    "maker": _num(fees.maker),
                    "taker": _num(fees.taker),
                    "buyer": _num(Decimal(0)),
                    "seller": _num(Decimal(0)),
                },
                "canTrade": True,
                "canWithdraw": True,
                "canDeposit": True,
                "brokered": False,
                "requireSelfTradePrevention": False,
                "preventSor": False,
                "updateTime": _ms(self.venue.clock()),
                "accountType": "SPOT",
                "balances": balances,
                "permissions": ["SPOT"],
                "uid": 1,
            }
        )

    async def new_order(self, request: web.Request) -> web.Response:
        account, params = await self._authenticate(request)
        symbol = required(params, "symbol")
        side = _choice(params, "side", {"BUY", "SELL"})
        type_ = _choice(params, "type", {"LIMIT", "MARKET"})
        quantity = decimal_param(params, "quantity")
        price = decimal_param(params, "price") if type_ == "LIMIT" else None
        tif = _choice(params, "timeInForce", {"GTC", "IOC"}) if type_ == "LIMIT" else None
        client_id = params.get("newClientOrderId") or f"emu{self.venue._next_order}"
        order = self.venue.place(
            account, symbol=symbol, side=side, type_=type_, quantity=quantity, price=price,
            time_in_force=tif, client_order_id=client_id,
        )  # fmt: skip
        shape = params.get("newOrderRespType", "FULL")
        body: dict[str, Any] = {
            "symbol": order.symbol,
            "orderId": order.order_id,
            "orderListId": -1,
            "clientOrderId": order.client_order_id,
            "transactTime": _ms(order.time),
        }
        if shape in {"RESULT", "FULL"}:
            body |= _order_fields(order) | {"workingTime": _ms(order.time)}
        if shape == "FULL":
            body["fills"] = [
                {
                    "price": _num(t.price),
                    "qty": _num(t.qty),
                    "commission": _num(t.commission),
                    "commissionAsset": t.commission_asset,
                    "tradeId": t.trade_id,
                }
                for t in order.trades
            ]
        return web.json_response(body)

    def _order(self, account: Account, params: Mapping[str, str], missing: str) -> VenueOrder:
        symbol = required(params, "symbol")
        order_id = params.get("orderId")
        client_id = params.get("origClientOrderId")
        if order_id is None and client_id is None:
            raise VenueError(
                -1102,
                "Param 'origClientOrderId' or 'orderId' must be sent, but both were empty/null!",
            )
        try:
            number = int(order_id) if order_id is not None else None
        except ValueError:
            raise VenueError(-1100, "Illegal characters found in parameter 'orderId'.") from None
        order = self.venue.find(account, symbol, number, client_id)
        if order is None:
            raise VenueError(-2013 if missing == NO_SUCH_ORDER else -2011, missing)
        return order

    async def query_order(self, request: web.Request) -> web.Response:
        account, params = await self._authenticate(request)
        return web.json_response(_order_json(self._order(account, params, NO_SUCH_ORDER)))

    async def cancel_order(self, request: web.Request) -> web.Response:
        account, params = await self._authenticate(request)
        order = self._order(account, params, UNKNOWN_ORDER)
        self.venue.cancel(account, order.symbol, order)
        body = {
            "symbol": order.symbol,
            "origClientOrderId": order.client_order_id,
            "orderId": order.order_id,
            "orderListId": -1,
            "clientOrderId": params.get("newClientOrderId") or f"cancel{order.order_id}",
            "transactTime": _ms(self.venue.clock()),
        } | _order_fields(order)
        return web.json_response(body)

    async def open_orders(self, request: web.Request) -> web.Response:
        account, params = await self._authenticate(request)
        symbol = params.get("symbol")
        if symbol is not None:
            self.venue.instrument(symbol)
        self.venue.sync(account)
        orders = [
            _order_json(o)
            for o in account.orders.values()
            if o.is_open and (symbol is None or o.symbol == symbol)
        ]
        return web.json_response(orders)

    async def _history(
        self, request: web.Request
    ) -> tuple[Account, Mapping[str, str], str, int, int | None, int | None]:
        """A history request's account, parameters, symbol, limit and time span."""
        account, params = await self._authenticate(request)
        symbol = required(params, "symbol")
        self.venue.instrument(symbol)
        self.venue.sync(account)
        limit = _limit(params, 500, 1000)
        return account, params, symbol, limit, _int(params, "startTime"), _int(params, "endTime")

    async def all_orders(self, request: web.Request) -> web.Response:
        account, params, symbol, limit, start, end = await self._history(request)
        orders = [
            o
            for o in account.orders.values()
            if o.symbol == symbol
            and (start is None or _ms(o.time) >= start)
            and (end is None or _ms(o.time) <= end)
        ]
        from_id = _int(params, "orderId")
        if from_id is not None:
            orders = [o for o in orders if o.order_id >= from_id][:limit]
        else:
            orders = orders[-limit:]
        return web.json_response([_order_json(o) for o in orders])

    async def my_trades(self, request: web.Request) -> web.Response:
        account, params, symbol, limit, start, end = await self._history(request)
        order_id, from_id = _int(params, "orderId"), _int(params, "fromId")
        trades = [
            t
            for t in account.trades
            if t.symbol == symbol
            and (order_id is None or t.order_id == order_id)
            and (from_id is None or t.trade_id >= from_id)
            and (start is None or _ms(t.time) >= start)
            and (end is None or _ms(t.time) <= end)
        ]
        # With a start (or an order, or an id to start from) the first ones, else the latest.
        chosen = trades[:limit] if (start or from_id or order_id) is not None else trades[-limit:]
        return web.json_response([_trade_json(t) for t in chosen])

    async def coins(self, request: web.Request) -> web.Response:
        """What ccxt's fetchCurrencies reads when it has keys: one entry per listed asset."""
        await self._authenticate(request)
        assets = sorted(
            {i.base for i in self.venue.market.instruments}
            | {i.quote for i in self.venue.market.instruments}
        )
        network = {
            "network": "EMU", "coin": "", "withdrawIntegerMultiple": "0.00000001",
            "isDefault": True, "depositEnable": True, "withdrawEnable": True,
            "depositDesc": "", "withdrawDesc": "", "name": "Emulated", "resetAddressStatus": False,
            "withdrawFee": "0", "withdrawMin": "0", "withdrawMax": "9999999999",
            "minConfirm": 1, "unLockConfirm": 0, "sameAddress": False,
        }  # fmt: skip
        coin = {
            "depositAllEnable": True, "withdrawAllEnable": True, "free": "0", "locked": "0",
            "freeze": "0", "withdrawing": "0", "ipoing": "0", "ipoable": "0", "storage": "0",
            "isLegalMoney": False, "trading": True,
        }  # fmt: skip
        return web.json_response(
            [coin | {"coin": a, "name": a, "networkList": [network | {"coin": a}]} for a in assets]
        )

    async def accounts_state(self, request: web.Request) -> web.Response:
        """Every account's balances, orders and trades (the emulator's control side)."""
        return web.json_response(
            accounts_state(
                self.venue, _num, lambda _, o: _order_json(o), lambda _, t: _trade_json(t)
            )
        )

    async def margin_pairs(self, request: web.Request) -> web.Response:
        """ccxt's fetchCurrencies asks which pairs trade on margin: none here (spot only)."""
        await self._authenticate(request)
        return web.json_response([])


def _order_fields(order: VenueOrder) -> dict[str, Any]:
    return {
        "price": _num(order.price or Decimal(0)),
        "origQty": _num(order.quantity),
        "executedQty": _num(order.executed),
        "origQuoteOrderQty": _num(Decimal(0)),
        "cummulativeQuoteQty": _num(order.quote_executed),
        "status": order.status,
        "timeInForce": order.time_in_force or "GTC",
        "type": order.type,
        "side": order.side,
        "selfTradePreventionMode": "EXPIRE_MAKER",
    }


def _order_json(order: VenueOrder) -> dict[str, Any]:
    return (
        {
            "symbol": order.symbol,
            "orderId": order.order_id,
            "orderListId": -1,
            "clientOrderId": order.client_order_id,
        }
        | _order_fields(order)
        | {
            "stopPrice": _num(Decimal(0)),
            "icebergQty": _num(Decimal(0)),
            "time": _ms(order.time),
            "updateTime": _ms(order.update_time or order.time),
            "isWorking": True,
            "workingTime": _ms(order.time),
        }
    )


def _trade_json(trade: VenueTrade) -> dict[str, Any]:
    return {
        "symbol": trade.symbol,
        "id": trade.trade_id,
        "orderId": trade.order_id,
        "orderListId": -1,
        "price": _num(trade.price),
        "qty": _num(trade.qty),
        "quoteQty": _num(trade.quote_qty),
        "commission": _num(trade.commission),
        "commissionAsset": trade.commission_asset,
        "time": _ms(trade.time),
        "isBuyer": trade.is_buyer,
        "isMaker": trade.is_maker,
        "isBestMatch": True,
    }


def _choice(params: Mapping[str, str], name: str, allowed: set[str]) -> str:
    value = required(params, name)
    if value not in allowed:
        raise VenueError(-1116 if name == "type" else -1100, f"Invalid {name}.")
    return value


def _int(params: Mapping[str, str], name: str) -> int | None:
    text = params.get(name)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise VenueError(-1100, f"Illegal characters found in parameter '{name}'.") from None


def _limit(params: Mapping[str, str], default: int, most: int) -> int:
    limit = _int(params, "limit")
    if limit is None:
        return default
    if not 1 <= limit <= most:
        raise VenueError(-1130, "Data sent for parameter 'limit' is not valid.")
    return limit
