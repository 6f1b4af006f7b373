"""Alpaca through its official SDK (alpaca-py), answering the unified calls the market data
step and the live broker make of a ccxt exchange (`load_markets`, `fetch_ohlcv`,
`fetch_bids_asks`, `create_order`, `fetch_order`, `cancel_order`, `fetch_open_orders`,
`fetch_my_trades`, `fetch_balance`), with failures raised as ccxt's error classes
(`errors`). So one live broker, with its guarantees (an order sent once under our client id,
lost answers looked up by that id, fills booked once, reconciliation), serves both venues.

- The SDK is synchronous: each call runs in a worker thread, under `exchange.timeout_s`
  (the SDK sets none), and the SDK's own retries are off: the retrier decides (Retry-After
  honoured).
- Fills are polled, as with ccxt: an order's fills are its FILL activities, crypto fees its
  CFEE ones. The trade-updates stream is not used.
- Account rules are checked before an order leaves (`rules`): refused with the reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import ROUND_DOWN, Decimal
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import ccxt.async_support as ccxt
import requests
from ccxt.base.decimal_to_precision import TICK_SIZE

from alpaca.common.enums import Sort
from alpaca.data.enums import DataFeed
from alpaca.data.historical import CryptoHistoricalDataClient, StockHistoricalDataClient
from alpaca.data.requests import (
    CryptoBarsRequest,
    CryptoLatestQuoteRequest,
    StockBarsRequest,
    StockLatestQuoteRequest,
)
from alpaca.trading.client import TradingClient
from alpaca.trading.enums import AssetStatus, OrderSide, QueryOrderStatus, TimeInForce
from alpaca.trading.requests import (
    GetAssetsRequest,
    GetOrdersRequest,
    LimitOrderRequest,
    MarketOrderRequest,
)
from trader.clock import Clock, WallClock
from trader.domain import Timeframe, from_epoch_ms
from trader.market.alpaca import rules, wire
from trader.market.alpaca.errors import as_ccxt, retry_after

T = TypeVar("T")
NEW_YORK = ZoneInfo("America/New_York")
ACTIVITY_PAGE = 100


class AlpacaExchange:
    id = "alpaca"
    precisionMode = TICK_SIZE  # ccxt's name
    # fetch_my_trades answers every trade since `since` at once (it pages Alpaca's activities).
    has: Mapping[str, bool] = {"fetchBidsAsks": True, "fetchMyTradesWhole": True}
    features: Mapping[str, Any] = {"spot": {"fetchOHLCV": {"limit": 10_000}}}

    def __init__(
        self,
        trading: TradingClient,
        stocks: StockHistoricalDataClient,
        crypto: CryptoHistoricalDataClient,
        *,
        feed: str = "iex",
        extended_hours: Sequence[str] = (),
        clock: Clock | None = None,
        sessions: Sequence[requests.Session] = (),
    ) -> None:
        """`clock`: the venue's time (the daemon's), for the spans it asks about; `sessions`:
        the HTTP sessions the clients use, closed with the exchange."""
        self._trading, self._stocks, self._crypto = trading, stocks, crypto
        self._sessions = tuple(sessions)
        self._clock = clock or WallClock()
        self._feed = DataFeed.SIP if feed == "sip" else DataFeed.IEX
        self._extended = frozenset(extended_hours)
        self.markets: dict[str, dict[str, Any]] | None = None
        self.options: dict[str, Any] = {}
        self.last_response_headers: dict[str, str] = {}

    # --- calling the SDK --------------------------------------------------------------------

    async def _call(self, call: Callable[..., T], *args: Any) -> T:
        """`call` in a worker thread; a failure as the ccxt error that means the same."""
        try:
            result = await asyncio.to_thread(call, *args)
        except Exception as error:
            mapped = as_ccxt(error)
            if mapped is None:
                raise
            asked = retry_after(error)
            self.last_response_headers = {"Retry-After": str(asked)} if asked is not None else {}
            raise mapped from error
        self.last_response_headers = {}
        return result

    async def close(self) -> None:
        for session in self._sessions:
            session.close()

    # --- markets ----------------------------------------------------------------------------

    async def load_markets(self, reload: bool = False) -> dict[str, dict[str, Any]]:
        if self.markets is None or reload:
            request = GetAssetsRequest(status=AssetStatus.ACTIVE)
            assets = await self._call(self._trading.get_all_assets, request)
            self.markets = {wire.unified(a): wire.market(a) for a in _list(assets)}
        return self.markets

    def market(self, symbol: str) -> dict[str, Any]:
        markets = self.markets or {}
        if symbol not in markets:
            raise ccxt.BadSymbol(f"alpaca does not list {symbol}")
        return markets[symbol]

    def _is_stock(self, symbol: str) -> bool:
        return bool(self.market(symbol)["info"].get("class") != "crypto")

    def safe_currency_code(self, code: Any) -> str:
        return str(code)

    def amount_to_precision(self, symbol: str, amount: float) -> str:
        return _to_step(amount, self.market(symbol)["precision"]["amount"])

    def price_to_precision(self, symbol: str, price: float) -> str:
        return _to_step(price, self.market(symbol)["precision"]["price"])

    # --- market data ------------------------------------------------------------------------

    async def fetch_ohlcv(
        self, symbol: str, timeframe: str, since: int | None, limit: int | None
    ) -> list[list[Any]]:
        frame = Timeframe(timeframe)
        size = min(limit or 1000, 10_000)
        start = from_epoch_ms(since) if since is not None else None
        newest = start is None  # the latest bars: ask newest first from far enough back
        if start is None:
            back = frame.duration * size * (5 if self._is_stock(symbol) else 1)
            start = self._clock.now() - back
        fields: dict[str, Any] = {
            "symbol_or_symbols": [self.market(symbol)["id"]], "start": start, "limit": size,
            "timeframe": wire.alpaca_timeframe(frame), "sort": Sort.DESC if newest else Sort.ASC,
        }  # fmt: skip
        if self._is_stock(symbol):
            request = StockBarsRequest(**fields, feed=self._feed)
            raw = await self._call(self._stocks.get_stock_bars, request)
        else:
            raw = await self._call(self._crypto.get_crypto_bars, CryptoBarsRequest(**fields))
        bars = _dict(raw).get(self.market(symbol)["id"]) or []
        rows = [wire.bar_row(b) for b in bars]
        return rows[::-1] if newest else rows

    async def fetch_bids_asks(self, symbols: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The latest quote of each symbol: one call for the stocks, one for the crypto."""
        stocks = [s for s in symbols if self._is_stock(s)]
        coins = [s for s in symbols if not self._is_stock(s)]
        quotes: dict[str, Any] = {}
        if stocks:
            ids = [self.market(s)["id"] for s in stocks]
            request = StockLatestQuoteRequest(symbol_or_symbols=ids, feed=self._feed)
            quotes |= _dict(await self._call(self._stocks.get_stock_latest_quote, request))
        if coins:
            request_ = CryptoLatestQuoteRequest(
                symbol_or_symbols=[self.market(s)["id"] for s in coins]
            )
            quotes |= _dict(await self._call(self._crypto.get_crypto_latest_quote, request_))
        out = {}
        for symbol in symbols:
            quote = quotes.get(self.market(symbol)["id"])
            if isinstance(quote, Mapping) and quote.get("bp") is not None:
                out[symbol] = {
                    "bid": quote.get("bp"), "ask": quote.get("ap"),
                    "bidVolume": quote.get("bs"), "askVolume": quote.get("as"),
                    "timestamp": wire.stamp(quote.get("t")),
                }  # fmt: skip
        return out

    # --- orders -----------------------------------------------------------------------------

    async def create_order(
        self,
        symbol: str,
        type: str,  # ccxt's name
        side: str,
        amount: float,
        price: float | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        cid = str((params or {}).get("newClientOrderId") or "")
        qty = Decimal(repr(amount))  # as asked: never quietly less (the rules judge it)
        limit = Decimal(self.price_to_precision(symbol, price)) if price is not None else None
        stock = self._is_stock(symbol)
        facts = await self._facts(symbol, side, qty, limit, stock)
        why = rules.refusal(facts)
        if why is None and qty != Decimal(self.amount_to_precision(symbol, amount)):
            step = self.market(symbol)["precision"]["amount"]
            why = f"{symbol}: {qty} is not a multiple of Alpaca's smallest amount {step}"
        if why is not None:
            raise ccxt.InvalidOrder(f"alpaca: not sent: {why}")
        extended = stock and not facts.market_open
        tif = TimeInForce(rules.time_in_force(stock, limit is not None, qty % 1 != 0, extended))
        common: dict[str, Any] = {
            "symbol": self.market(symbol)["id"], "qty": float(qty), "client_order_id": cid,
            "side": OrderSide(side), "time_in_force": tif,
        }  # fmt: skip
        request = (
            LimitOrderRequest(**common, limit_price=float(limit), extended_hours=extended)
            if limit is not None
            else MarketOrderRequest(**common)
        )
        raw = await self._call(self._trading.submit_order, request)
        return wire.order(_dict(raw), symbol)

    async def _facts(
        self, symbol: str, side: str, qty: Decimal, limit: Decimal | None, stock: bool
    ) -> rules.OrderFacts:
        """What the rules need, read from the account now; a read that fails refuses the
        order (it is not sent; the next tick decides afresh)."""
        try:
            account = _dict(await self._call(self._trading.get_account))
            held = await self._held()
            clock = _dict(await self._call(self._trading.get_clock)) if stock else {}
            price = limit
            if price is None and side == "buy":
                quote = (await self.fetch_bids_asks([symbol])).get(symbol, {})
                price = Decimal(str(quote["ask"])) if quote.get("ask") is not None else None
            today = await self._sides_today(symbol) if stock else set()
        except ccxt.BaseError as error:
            why = f"alpaca: not sent: the account could not be read ({error})"
            raise ccxt.InvalidOrder(why) from error
        base, quote_asset = symbol.split("/")
        cash = Decimal(str(account.get("non_marginable_buying_power") or account.get("cash")))
        return rules.OrderFacts(
            symbol=symbol, side=side, amount=qty, price=price, limit=limit is not None,
            stock=stock, asset=self.market(symbol)["info"], held=held.get(base, Decimal(0)),
            cash_available=cash if quote_asset == "USD" else held.get(quote_asset, Decimal(0)),
            market_open=bool(clock.get("is_open")), extended=symbol in self._extended,
            equity=Decimal(str(account.get("equity") or 0)),
            day_trades=int(account.get("daytrade_count") or 0),
            other_side_today=("sell" if side == "buy" else "buy") in today,
        )  # fmt: skip

    async def _held(self, available: bool = True) -> dict[str, Decimal]:
        """Each position's quantity by asset (available to sell, or all of it)."""
        positions = _list(await self._call(self._trading.get_all_positions))
        field = "qty_available" if available else "qty"
        out = {}
        for p in positions:
            crypto = p.get("asset_class") == "crypto"
            asset = str(p["symbol"]).removesuffix("USD") if crypto else str(p["symbol"])
            out[asset] = Decimal(str(p.get(field) or p.get("qty") or 0))
        return out

    async def _sides_today(self, symbol: str) -> set[str]:
        today = self._clock.now().astimezone(NEW_YORK)
        opened = today.replace(hour=0, minute=0, second=0, microsecond=0)
        return {str(f.get("side")) for f in await self._activities("FILL", opened, symbol)}

    async def fetch_order(
        self,
        id: str | None,
        symbol: str,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        cid = (params or {}).get("origClientOrderId")
        if cid is not None:
            raw = await self._call(self._trading.get_order_by_client_id, str(cid))
        else:
            raw = await self._call(self._trading.get_order_by_id, str(id))
        return wire.order(_dict(raw), symbol)

    async def cancel_order(
        self,
        id: str | None,
        symbol: str,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Cancel by venue id or client id; the order as it stands after the cancel."""
        order_id = id
        if order_id is None:
            order_id = (await self.fetch_order(None, symbol, params))["id"]
        await self._call(self._trading.cancel_order_by_id, str(order_id))
        return await self.fetch_order(order_id, symbol)

    async def fetch_open_orders(self, symbol: str) -> list[dict[str, Any]]:
        request = GetOrdersRequest(
            status=QueryOrderStatus.OPEN, symbols=[self.market(symbol)["id"]], limit=500
        )
        raw = await self._call(self._trading.get_orders, request)
        return [wire.order(o, symbol) for o in _list(raw)]

    async def fetch_my_trades(
        self,
        symbol: str,
        since: int | None = None,
        limit: int | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Our fills of `symbol` since `since` (ms), or those of one order (`orderId`)."""
        order_id = (params or {}).get("orderId")
        placed: dict[str, Any] | None = None
        if order_id is not None:
            placed = _dict(await self._call(self._trading.get_order_by_id, str(order_id)))
            after = datetime.fromtimestamp((wire.stamp(placed.get("created_at")) or 0) / 1000, UTC)
            after -= timedelta(seconds=1)
        else:
            after = from_epoch_ms(since) if since is not None else self._clock.now() - timedelta(
                days=1)  # fmt: skip
        fills = await self._activities("FILL", after, symbol)
        fees = await self._activities("CFEE", after, symbol) if not self._is_stock(symbol) else []
        if order_id is not None:
            fills = [f for f in fills if f.get("order_id") == order_id]
        return wire.trades(fills, fees, symbol, placed)

    async def _activities(self, kind: str, after: datetime, symbol: str) -> list[dict[str, Any]]:
        """Every `kind` activity of `symbol` after `after`, oldest first, page by page."""
        wanted = self.market(symbol)["id"]
        names = {wanted, wanted.replace("/", "")}
        out: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            query: dict[str, Any] = {"after": after.isoformat(), "direction": "asc",
                                     "page_size": ACTIVITY_PAGE}  # fmt: skip
            if token is not None:
                query["page_token"] = token
            page = _list(await self._call(self._trading.get, f"/account/activities/{kind}", query))
            out += [a for a in page if a.get("symbol") in names]
            if len(page) < ACTIVITY_PAGE:
                return out
            token = str(page[-1]["id"])

    async def fetch_balance(self) -> dict[str, Any]:
        """Cash (USD) and every position's quantity, in ccxt's `total` shape."""
        account = _dict(await self._call(self._trading.get_account))
        total: dict[str, float | str] = {"USD": str(account.get("cash"))}
        total |= {asset: str(qty) for asset, qty in (await self._held(available=False)).items()}
        return {"total": {k: float(v) for k, v in total.items()}}

    async def clock(self) -> dict[str, Any]:
        """Alpaca's market clock: now, whether the stock market is open, next open and close."""
        return _dict(await self._call(self._trading.get_clock))

    async def calendar(self, start: str, end: str) -> list[dict[str, Any]]:
        from alpaca.trading.requests import GetCalendarRequest  # noqa: PLC0415

        request = GetCalendarRequest(start=start, end=end)
        return _list(await self._call(self._trading.get_calendar, request))


def _to_step(value: float, step: float) -> str:
    exact, grid = Decimal(repr(value)), Decimal(repr(step))
    return str((exact / grid).to_integral_value(ROUND_DOWN) * grid)


def _dict(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ccxt.BadResponse(f"alpaca: expected an object, got {type(raw).__name__}")
    return raw


def _list(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        raise ccxt.BadResponse(f"alpaca: expected a list of objects, got {type(raw).__name__}")
    return raw
