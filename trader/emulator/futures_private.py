"""Binance USDⓈ-M futures' signed routes, as the emulator answers them.

Authentication: Binance's HMAC scheme exactly as the spot emulator checks it (`signed.sign`,
`signed.check_time`: X-MBX-APIKEY, the HMAC-SHA256 of query + body, -1022, -1021 outside
recvWindow). Aster's v3 scheme (ccxt's `aster.sign`: parameters `user`, `signer`, a
microsecond `nonce` and an EIP-712 `signature`, no API-key header): the signer recovered from
the signature (`futures_aster`) must be the request's `signer`, itself the `user` or one of
its registered API wallets; the nonce within 60 s of the wall clock, never used twice.

Routes as ccxt 4.5.90's binanceusdm calls them (ccxt/binance.py): create_order ->
POST /fapi/v1/order, and POST /fapi/v1/algoOrder for stops and take-profits; cancel_order ->
DELETE /fapi/v1/order (algoOrder); fetch_order, fetch_open_orders (openAlgoOrders);
fetch_my_trades -> /fapi/v1/userTrades; fetch_funding_history -> /fapi/v1/income
(incomeType FUNDING_FEE); set_leverage -> POST /fapi/v1/leverage; set_margin_mode -> POST
/fapi/v1/marginType; set_position_mode -> POST /fapi/v1/positionSide/dual; fetch_positions ->
GET /fapi/v3/positionRisk after load_leverage_brackets -> GET /fapi/v1/leverageBracket;
fetch_balance -> GET /fapi/v3/account; load_markets with keys -> /sapi/v1/capital/config/getall.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from aiohttp import web

from trader.emulator.futures_account import (
    CROSSED,
    ISOLATED,
    FuturesAccount,
    FuturesOrder,
)
from trader.emulator.futures_account_answers import account_json, coins_json, positions_json
from trader.emulator.futures_account_answers import totals as account_totals
from trader.emulator.futures_aster import recover_signer
from trader.emulator.futures_orders import FuturesVenue, OrderRequest
from trader.emulator.futures_wire import (
    algo_json,
    brackets_json,
    income_json,
    order_json,
    trade_json,
)
from trader.emulator.params import decimal_param, limit_param, required, span
from trader.emulator.signed import check_time, sign
from trader.emulator.venue import VenueError
from trader.emulator.wire import ms, num

Route = tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]
SUCCESS = {"code": 200, "msg": "success"}
ASTER_NONCE_WINDOW_US = 60_000_000


@dataclass
class FuturesPrivate:
    venue: FuturesVenue
    secrets: dict[str, str]
    aster_users: dict[str, str]
    wall_ms: Callable[[], int]
    aster_signers: set[str] = field(default_factory=set)  # API wallets allowed to sign
    _nonces: set[str] = field(default_factory=set)

    def routes(self) -> list[Route]:
        return [
            ("POST", "order", self.new_order),
            ("GET", "order", self.query_order),
            ("DELETE", "order", self.cancel_order),
            ("POST", "algoOrder", self.new_order),
            ("GET", "algoOrder", self.query_order),
            ("DELETE", "algoOrder", self.cancel_order),
            ("GET", "openOrders", self.open_orders),
            ("GET", "openAlgoOrders", self.open_orders),
            ("GET", "allOrders", self.all_orders),
            ("GET", "userTrades", self.user_trades),
            ("GET", "income", self.income),
            ("POST", "leverage", self.leverage),
            ("POST", "marginType", self.margin_type),
            ("POST", "positionSide/dual", self.set_dual),
            ("GET", "positionSide/dual", self.get_dual),
            ("GET", "leverageBracket", self.leverage_bracket),
            ("GET", "/fapi/v3/positionRisk", self.position_risk),
            ("GET", "/fapi/v2/positionRisk", self.position_risk),
            ("GET", "/fapi/v3/account", self.account),
            ("GET", "/fapi/v2/account", self.account),
            ("GET", "/fapi/v3/balance", self.balance),
            ("GET", "/fapi/v2/balance", self.balance),
            ("GET", "/sapi/v1/capital/config/getall", self.coins),
            ("GET", "/sapi/v1/margin/allPairs", self.margin_pairs),
            ("GET", "/sapi/v1/margin/isolated/allPairs", self.margin_pairs),
        ]

    # --- authentication ---------------------------------------------------------------------

    async def _authenticate(self, request: web.Request) -> tuple[FuturesAccount, dict[str, str]]:
        body = await request.text()
        total = "&".join(part for part in (request.query_string, body) if part)
        payload, _, signature = total.rpartition("&signature=")
        params = dict(parse_qsl(payload, keep_blank_values=True))
        key = request.headers.get("X-MBX-APIKEY")
        if key is None and "user" in params and request.path.startswith("/fapi/v3/"):
            key = self._aster(params, payload, signature)
        else:
            secret = self.secrets.get(key or "")
            if secret is None or key not in self.venue.accounts:
                raise VenueError(-2015, "Invalid API-key, IP, or permissions for action.", 401)
            if not signature or not hmac.compare_digest(sign(payload, secret), signature):
                raise VenueError(-1022, "Signature for this request is not valid.")
            check_time(params, self.wall_ms())
        account = self.venue.accounts[key]
        self.venue.sync(account)
        return account, params

    def _aster(self, params: Mapping[str, str], payload: str, signature: str) -> str:
        """The account of an Aster v3 request, once its EIP-712 signature checks out."""
        user, signer = params.get("user", "").lower(), params.get("signer", "").lower()
        key = self.aster_users.get(user)
        if key is None or key not in self.venue.accounts:
            raise VenueError(-2015, "Invalid API-key, IP, or permissions for action.", 401)
        recovered = recover_signer(payload, signature)
        if recovered is None or recovered != signer or signer not in {user, *self.aster_signers}:
            raise VenueError(-1022, "Signature for this request is not valid.")
        nonce = params.get("nonce", "")
        if not nonce.isdigit():
            raise VenueError(-1102, "Mandatory parameter 'nonce' was not sent.")
        if abs(int(nonce) - self.wall_ms() * 1000) > ASTER_NONCE_WINDOW_US or nonce in self._nonces:
            raise VenueError(-1021, "Timestamp for this request is outside of the recvWindow.")
        self._nonces.add(nonce)
        return key

    # --- settings ---------------------------------------------------------------------------

    async def leverage(self, request: web.Request) -> web.Response:
        account, params = await self._authenticate(request)
        symbol = required(params, "symbol")
        listing = self.venue.perps.listing(symbol)
        if listing is None:
            raise VenueError(-1121, "Invalid symbol.")
        try:
            leverage = int(required(params, "leverage"))
        except ValueError:
            raise VenueError(-1100, "Illegal characters found in parameter 'leverage'.") from None
        top = listing.brackets[0].initial_leverage
        if not 1 <= leverage <= top:
            raise VenueError(-4028, f"Leverage {leverage} is not valid")
        position = account.positions.get(symbol)
        # The highest notional a leverage allows: the cap of the last bracket it is open in.
        allowed = [b for b in listing.brackets if b.initial_leverage >= leverage]
        cap = allowed[-1].notional_cap
        if position is not None and abs(position.size * self.venue.perps.mark_price(symbol)) > cap:
            raise VenueError(-2027, "Exceeded the maximum allowable position at current leverage.")
        account.setting(symbol).leverage = leverage
        return web.json_response(
            {"leverage": leverage, "maxNotionalValue": num(cap), "symbol": symbol}
        )

    async def margin_type(self, request: web.Request) -> web.Response:
        account, params = await self._authenticate(request)
        symbol = required(params, "symbol")
        self.venue.instrument(symbol)
        wanted = required(params, "marginType").upper()
        if wanted not in {ISOLATED, CROSSED}:
            raise VenueError(-4044, "Margin type is invalid.")
        setting = account.setting(symbol)
        if setting.margin_type == wanted:
            raise VenueError(-4046, "No need to change margin type.")
        if account.open_orders(symbol):
            raise VenueError(-4047, "Margin type cannot be changed if there exists open orders.")
        position = account.positions.get(symbol)
        if position is not None and position.size != 0:
            raise VenueError(-4048, "Margin type cannot be changed if there exists position.")
        setting.margin_type = wanted
        return web.json_response(SUCCESS)

    async def set_dual(self, request: web.Request) -> web.Response:
        account, params = await self._authenticate(request)
        wanted = required(params, "dualSidePosition").lower()
        if wanted not in {"true", "false"}:
            raise VenueError(-1100, "Illegal characters found in parameter 'dualSidePosition'.")
        if account.dual_side == (wanted == "true"):
            raise VenueError(-4059, "No need to change position side.")
        if account.open_orders():
            raise VenueError(-4067, "Position side cannot be changed if there exists open orders.")
        if account.open_positions():
            raise VenueError(-4068, "Position side cannot be changed if there exists position.")
        account.dual_side = wanted == "true"
        return web.json_response(SUCCESS)

    async def get_dual(self, request: web.Request) -> web.Response:
        account, _ = await self._authenticate(request)
        return web.json_response({"dualSidePosition": account.dual_side})

    async def leverage_bracket(self, request: web.Request) -> web.Response:
        await self._authenticate(request)
        wanted = request.query.get("symbol")
        rows = [
            brackets_json(listing.instrument.venue_id, listing.brackets)
            for listing in self.venue.perps.listings
            if wanted is None or listing.instrument.venue_id == wanted
        ]
        if wanted is not None and not rows:
            raise VenueError(-1121, "Invalid symbol.")
        return web.json_response(rows)

    # --- orders -----------------------------------------------------------------------------

    async def new_order(self, request: web.Request) -> web.Response:
        account, params = await self._authenticate(request)
        algo = request.path.endswith("/algoOrder")
        type_ = required(params, "orderType" if algo and "orderType" in params else "type")
        if algo and params.get("algoType", "CONDITIONAL") != "CONDITIONAL":
            raise VenueError(-1116, "Invalid algoType.")
        allowed = {"STOP", "STOP_MARKET", "TAKE_PROFIT", "TAKE_PROFIT_MARKET"} if algo else {
            "LIMIT", "MARKET"}  # fmt: skip
        if type_ not in allowed:
            raise VenueError(-1116 if not algo else -4120, "Invalid orderType.")
        side = required(params, "side")
        if side not in {"BUY", "SELL"}:
            raise VenueError(-1117, "Invalid side.")
        order = self.venue.place(
            account,
            OrderRequest(
                symbol=required(params, "symbol"), side=side, type=type_,
                quantity=decimal_param(params, "quantity"),
                price=decimal_param(params, "price") if "price" in params else None,
                time_in_force=params.get("timeInForce", "GTC"),
                reduce_only=params.get("reduceOnly", "false").lower() == "true",
                position_side=params.get("positionSide", "BOTH"),
                client_order_id=params.get("clientAlgoId" if algo else "newClientOrderId"),
                trigger_price=decimal_param(params, "triggerPrice") if algo else None,
                working_type=params.get("workingType", "CONTRACT_PRICE"),
                close_position=params.get("closePosition", "false").lower() == "true",
            ),
        )  # fmt: skip
        return web.json_response(algo_json(order) if algo else order_json(order))

    def _find(self, account: FuturesAccount, params: Mapping[str, str], algo: bool) -> FuturesOrder:
        symbol = params.get("symbol")
        id_name, client_name = ("algoId", "clientAlgoId") if algo else (
            "orderId", "origClientOrderId")  # fmt: skip
        order_id, client_id = params.get(id_name), params.get(client_name)
        if order_id is None and client_id is None:
            raise VenueError(
                -1102, f"Param '{client_name}' or '{id_name}' must be sent, but both were empty!"
            )
        try:
            number = int(order_id) if order_id is not None else None
        except ValueError:
            raise VenueError(-1100, f"Illegal characters found in parameter '{id_name}'.") from None
        candidates = [symbol] if symbol else sorted({o.symbol for o in account.orders.values()})
        for candidate in candidates:
            order = self.venue.find(account, candidate, number, client_id, algo=algo)
            if order is not None:
                return order
        raise VenueError(-2013, "Order does not exist.")

    async def query_order(self, request: web.Request) -> web.Response:
        account, params = await self._authenticate(request)
        algo = request.path.endswith("/algoOrder")
        order = self._find(account, params, algo)
        return web.json_response(algo_json(order) if algo else order_json(order))

    async def cancel_order(self, request: web.Request) -> web.Response:
        account, params = await self._authenticate(request)
        algo = request.path.endswith("/algoOrder")
        order = self._find(account, params, algo)
        self.venue.cancel(account, order)
        if algo:
            body = {"algoId": order.order_id, "clientAlgoId": order.client_order_id}
            return web.json_response(body | {"code": "200", "msg": "success"})
        return web.json_response(order_json(order))

    async def open_orders(self, request: web.Request) -> web.Response:
        account, params = await self._authenticate(request)
        algo = request.path.endswith("/openAlgoOrders")
        symbol = params.get("symbol")
        if symbol:
            self.venue.instrument(symbol)
        orders = [o for o in account.open_orders(symbol or None) if o.algo == algo]
        return web.json_response([algo_json(o) if algo else order_json(o) for o in orders])

    async def all_orders(self, request: web.Request) -> web.Response:
        account, params = await self._authenticate(request)
        symbol = required(params, "symbol")
        limit = limit_param(params, 500, 1000)
        orders = [o for o in account.orders.values() if o.symbol == symbol and not o.algo]
        orders = span(orders, params, lambda o: ms(o.time))
        return web.json_response([order_json(o) for o in orders[-limit:]])

    async def user_trades(self, request: web.Request) -> web.Response:
        account, params = await self._authenticate(request)
        symbol = params.get("symbol")
        limit = limit_param(params, 500, 1000)
        trades = [t for t in account.trades if symbol is None or t.symbol == symbol]
        if "orderId" in params:
            trades = [t for t in trades if str(t.order_id) == params["orderId"]]
        if "fromId" in params:
            trades = [t for t in trades if t.trade_id >= int(params["fromId"])]
        trades = span(trades, params, lambda t: ms(t.time))
        first = "startTime" in params or "fromId" in params
        chosen = trades[:limit] if first else trades[-limit:]
        return web.json_response([trade_json(t) for t in chosen])

    async def income(self, request: web.Request) -> web.Response:
        """Income history: the latest `limit` rows (default 100), or from startTime on."""
        account, params = await self._authenticate(request)
        symbol, kind = params.get("symbol"), params.get("incomeType")
        limit = limit_param(params, 100, 1000)
        rows = [
            r
            for r in account.incomes
            if (symbol is None or r.symbol == symbol) and (kind is None or r.income_type == kind)
        ]
        rows = span(rows, params, lambda r: ms(r.time))
        chosen = rows[:limit] if "startTime" in params else rows[-limit:]
        return web.json_response([income_json(r) for r in chosen])

    # --- account ----------------------------------------------------------------------------

    async def position_risk(self, request: web.Request) -> web.Response:
        """Position Information V3: the symbols with a position."""
        account, params = await self._authenticate(request)
        symbol = params.get("symbol")
        return web.json_response(positions_json(self.venue, account, {symbol} if symbol else None))

    async def account(self, request: web.Request) -> web.Response:
        """Account Information V3: totals, the USDT asset, the symbols with a position."""
        account, _ = await self._authenticate(request)
        return web.json_response(account_json(self.venue, account))

    async def balance(self, request: web.Request) -> web.Response:
        """Futures Account Balance (v2/v3): one row, USDT."""
        account, _ = await self._authenticate(request)
        totals = account_totals(self.venue, account)
        return web.json_response(
            [{"accountAlias": "emulated", "asset": "USDT",
              "balance": num(totals["walletBalance"]),
              "crossWalletBalance": num(totals["crossWalletBalance"]),
              "crossUnPnl": num(totals["crossUnPnl"]),
              "availableBalance": num(totals["availableBalance"]),
              "maxWithdrawAmount": num(totals["maxWithdrawAmount"]),
              "marginAvailable": True, "updateTime": ms(self.venue.clock())}]
        )  # fmt: skip

    async def margin_pairs(self, request: web.Request) -> web.Response:
        """ccxt's fetchCurrencies asks which spot pairs trade on margin: none here."""
        await self._authenticate(request)
        return web.json_response([])

    async def coins(self, request: web.Request) -> web.Response:
        """What ccxt's fetchCurrencies reads when it has keys: one entry per asset."""
        await self._authenticate(request)
        return web.json_response(coins_json(self.venue))
