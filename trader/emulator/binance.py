"""Binance spot REST (api/v3) as the emulator answers it: the public market-data endpoints,
Binance's JSON shapes and error codes, request weights and their 429/418 answers."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from aiohttp import web

from trader.domain import Bar, Timeframe, decimal_from_float
from trader.emulator.faults import FaultPlan
from trader.emulator.market import EmulatedMarket, Instrument
from trader.emulator.plumbing import Control, Handler
from trader.emulator.signed import SignedApi
from trader.emulator.venue import VenueError
from trader.emulator.wire import ms as _ms
from trader.emulator.wire import num as _num

INTERVALS = (
    "1s",
    "1m",
    "3m",
    "5m",
    "15m",
    "30m",
    "1h",
    "2h",
    "4h",
    "6h",
    "8h",
    "12h",
    "1d",
    "3d",
    "1w",
)
# Request weights as Binance documents them (approximately; enough to exercise rate limiting).
WEIGHTS = {
    "/api/v3/exchangeInfo": 20,
    "/api/v3/klines": 2,
    "/api/v3/depth": 5,
    "/api/v3/ticker/bookTicker": 2,
    "/api/v3/ticker/24hr": 2,
}


INTERNAL_ERROR = "Internal error; unable to process your request. Please try again."
_INTERNAL_ERROR_BODY = json.dumps({"code": -1001, "msg": INTERNAL_ERROR})
MISSING_SYMBOL = "Mandatory parameter 'symbol' was not sent, was empty/null, or malformed."


@dataclass
class RateLimit:
    """Request weight per minute; past it 429 with Retry-After, and 418 for a client that keeps
    going after it was told to stop."""

    per_minute: int | None = None
    used: int = 0
    window_start: float = field(default_factory=time.monotonic)
    refused: int = 0

    def charge(self, weight: int) -> tuple[int, int] | None:
        """(status, retry_after_s) when the request must be refused, else None."""
        if self.per_minute is None:
            return None
        now = time.monotonic()
        if now - self.window_start >= 60:
            self.window_start, self.used, self.refused = now, 0, 0
        retry_after = max(1, int(60 - (now - self.window_start)))
        if self.used + weight > self.per_minute:
            self.refused += 1
            return (418, retry_after * 2) if self.refused > 3 else (429, retry_after)
        self.used += weight
        return None


@dataclass
class BinanceSpotApi:
    market: EmulatedMarket
    faults: FaultPlan = field(default_factory=FaultPlan)
    rate_limit: RateLimit = field(default_factory=RateLimit)
    klines_cap: int = 1000  # some venues return fewer bars than asked; this one can too
    update_id: int = 1
    signed: SignedApi | None = None  # the private endpoints, when the venue has accounts
    on_clock: Callable[[bool], None] | None = None  # pauses the market's clock (the sandbox)
    control: Control = field(init=False)

    def __post_init__(self) -> None:
        self.control = Control(self.faults, self.market.clock, on_clock=self.on_clock)

    @property
    def requests(self) -> list[str]:
        """path?query of every request, in order."""
        return self.control.requests

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        get = app.router.add_get
        get("/api/v3/ping", self.ping)
        get("/api/v3/time", self.time)
        get("/api/v3/exchangeInfo", self.exchange_info)
        get("/api/v3/klines", self.klines)
        get("/api/v3/depth", self.depth)
        get("/api/v3/ticker/bookTicker", self.book_ticker)
        get("/api/v3/ticker/24hr", self.ticker_24hr)
        if self.signed is not None:
            self.signed.routes(app)
        self.control.routes(app)
        return app

    # --- plumbing ---------------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not await self.control.admit(request):
            return await handler(request)
        refused = self.rate_limit.charge(WEIGHTS.get(request.path, 1))
        if refused is not None:
            status, retry_after = refused
            return web.json_response(
                {"code": -1003, "msg": "Too much request weight used; please use WebSocket."},
                status=status,
                headers={"Retry-After": str(retry_after)},
            )
        response = await self.control.answer(request, handler, _INTERNAL_ERROR_BODY, _refusal)
        used = {"X-MBX-USED-WEIGHT-1M": str(self.rate_limit.used)}
        response.headers.update(used)
        return response

    def _instrument(self, request: web.Request) -> Instrument:
        symbol = request.query.get("symbol")
        if not symbol:
            raise VenueError(-1102, MISSING_SYMBOL)
        instrument = self.market.instrument(symbol)
        if instrument is None:
            raise VenueError(-1121, "Invalid symbol.")
        return instrument

    def _limit(self, request: web.Request, default: int, most: int) -> int:
        try:
            limit = int(request.query.get("limit", default))
        except ValueError:
            raise VenueError(-1100, "Illegal characters found in parameter 'limit'.") from None
        if not 1 <= limit <= most:
            raise VenueError(-1130, "Data sent for parameter 'limit' is not valid.")
        return limit

    # --- endpoints --------------------------------------------------------------------------

    async def ping(self, request: web.Request) -> web.Response:
        return web.json_response({})

    async def time(self, request: web.Request) -> web.Response:
        return web.json_response({"serverTime": _ms(self.market.clock())})

    async def exchange_info(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "timezone": "UTC",
                "serverTime": _ms(self.market.clock()),
                "rateLimits": [
                    {
                        "rateLimitType": "REQUEST_WEIGHT",
                        "interval": "MINUTE",
                        "intervalNum": 1,
                        "limit": self.rate_limit.per_minute or 6000,
                    },
                    {
                        "rateLimitType": "ORDERS",
                        "interval": "SECOND",
                        "intervalNum": 10,
                        "limit": 100,
                    },
                ],
                "exchangeFilters": [],
                "symbols": [_symbol_info(i) for i in self.market.instruments],
            }
        )

    async def klines(self, request: web.Request) -> web.Response:
        instrument = self._instrument(request)
        interval = request.query.get("interval", "")
        if interval not in INTERVALS:
            raise VenueError(-1120, "Invalid interval.")
        limit = min(self._limit(request, 500, 1000), self.klines_cap)
        try:
            bars = self.market.bars(instrument.venue_id, Timeframe(interval))
        except ValueError:
            raise VenueError(-1120, "Invalid interval.") from None
        start = request.query.get("startTime")
        end = request.query.get("endTime")
        if start is not None:
            bars = [b for b in bars if _ms(b.start) >= int(start)]
        if end is not None:
            bars = [b for b in bars if _ms(b.start) <= int(end)]
        bars = bars[:limit] if start is not None else bars[-limit:]
        return web.json_response([_kline(bar) for bar in bars])

    async def depth(self, request: web.Request) -> web.Response:
        instrument = self._instrument(request)
        limit = self._limit(request, 100, 5000)
        book = self.market.top_of_book(instrument.venue_id)
        self.update_id += 1
        if book is None:
            return web.json_response({"lastUpdateId": self.update_id, "bids": [], "asks": []})
        bid, ask = book
        tick = instrument.tick_size
        levels = range(min(limit, 20))
        return web.json_response(
            {
                "lastUpdateId": self.update_id,
                "bids": [
                    [_num(bid - n * tick), _num(Decimal(10 + n))]
                    for n in levels
                    if bid - n * tick > 0
                ],
                "asks": [[_num(ask + n * tick), _num(Decimal(10 + n))] for n in levels],
            }
        )

    async def book_ticker(self, request: web.Request) -> web.Response:
        if "symbol" in request.query:
            return web.json_response(self._book_ticker(self._instrument(request)))
        return web.json_response([self._book_ticker(i) for i in self._instruments(request)])

    def _instruments(self, request: web.Request) -> list[Instrument]:
        """The instruments named by `symbols=["A","B"]`, or all of them."""
        wanted = request.query.get("symbols")
        if wanted is None:
            return self.market.instruments
        try:
            names = json.loads(wanted)
        except json.JSONDecodeError:
            raise VenueError(-1100, "Illegal characters found in parameter 'symbols'.") from None
        instruments = []
        for name in names:
            instrument = self.market.instrument(name)
            if instrument is None:
                raise VenueError(-1121, "Invalid symbol.")
            instruments.append(instrument)
        return instruments

    def _book_ticker(self, instrument: Instrument) -> dict[str, Any]:
        book = self.market.top_of_book(instrument.venue_id)
        bid, ask = book if book is not None else (Decimal(0), Decimal(0))
        return {
            "symbol": instrument.venue_id,
            "bidPrice": _num(bid),
            "bidQty": _num(Decimal(10)),
            "askPrice": _num(ask),
            "askQty": _num(Decimal(10)),
        }

    async def ticker_24hr(self, request: web.Request) -> web.Response:
        if "symbol" in request.query:
            ticker = self._ticker_24hr(self._instrument(request))
            if ticker is None:
                raise VenueError(-1121, "Invalid symbol.")
            return web.json_response(ticker)
        tickers = [self._ticker_24hr(i) for i in self._instruments(request)]
        return web.json_response([t for t in tickers if t is not None])

    def _ticker_24hr(self, instrument: Instrument) -> dict[str, Any] | None:
        now = self.market.clock()
        bars = self.market.bars(instrument.venue_id, self.market.timeframe(instrument.venue_id))
        day = [b for b in bars if b.end <= now][-24:]
        book = self.market.top_of_book(instrument.venue_id)
        if not day or book is None:
            return None
        bid, ask = book
        first, last = day[0], day[-1]
        change = decimal_from_float(last.close) - decimal_from_float(first.open)
        return {
            "symbol": instrument.venue_id,
            "priceChange": _num(change),
            "priceChangePercent": "0.000",
            "weightedAvgPrice": _num(last.close),
            "prevClosePrice": _num(first.open),
            "lastPrice": _num(last.close),
            "lastQty": _num(Decimal(1)),
            "bidPrice": _num(bid),
            "bidQty": _num(Decimal(10)),
            "askPrice": _num(ask),
            "askQty": _num(Decimal(10)),
            "openPrice": _num(first.open),
            "highPrice": _num(max(b.high for b in day)),
            "lowPrice": _num(min(b.low for b in day)),
            "volume": _num(sum(b.volume for b in day)),
            "quoteVolume": _num(sum(b.quote_volume or 0.0 for b in day)),
            "openTime": _ms(first.start),
            "closeTime": _ms(now),
            "firstId": 1,
            "lastId": 2,
            "count": 2,
        }


def _refusal(failed: Exception) -> web.Response | None:
    """Binance's answer to a refusal."""
    if not isinstance(failed, VenueError):
        return None
    return web.json_response({"code": failed.code, "msg": failed.msg}, status=failed.status)


def _kline(bar: Bar) -> list[Any]:
    return [
        _ms(bar.start),
        _num(bar.open),
        _num(bar.high),
        _num(bar.low),
        _num(bar.close),
        _num(bar.volume),
        _ms(bar.end) - 1,
        _num(bar.quote_volume or 0.0),
        100,
        _num(bar.volume / 2),
        _num((bar.quote_volume or 0.0) / 2),
        "0",
    ]


def _symbol_info(instrument: Instrument) -> dict[str, Any]:
    return {
        "symbol": instrument.venue_id,
        "status": "TRADING",
        "baseAsset": instrument.base,
        "baseAssetPrecision": 8,
        "quoteAsset": instrument.quote,
        "quotePrecision": 8,
        "quoteAssetPrecision": 8,
        "baseCommissionPrecision": 8,
        "quoteCommissionPrecision": 8,
        "orderTypes": ["LIMIT", "LIMIT_MAKER", "MARKET", "STOP_LOSS_LIMIT", "TAKE_PROFIT_LIMIT"],
        "icebergAllowed": True,
        "ocoAllowed": True,
        "otoAllowed": True,
        "quoteOrderQtyMarketAllowed": True,
        "allowTrailingStop": True,
        "cancelReplaceAllowed": True,
        "isSpotTradingAllowed": True,
        "isMarginTradingAllowed": False,
        "filters": [
            {
                "filterType": "PRICE_FILTER",
                "minPrice": _num(instrument.tick_size),
                "maxPrice": "1000000.00000000",
                "tickSize": _num(instrument.tick_size),
            },
            {
                "filterType": "LOT_SIZE",
                "minQty": _num(instrument.min_qty),
                "maxQty": "9000000.00000000",
                "stepSize": _num(instrument.step_size),
            },
            {
                "filterType": "NOTIONAL",
                "minNotional": _num(instrument.min_notional),
                "applyMinToMarket": True,
                "maxNotional": "9000000.00000000",
                "applyMaxToMarket": False,
                "avgPriceMins": 5,
            },
            {"filterType": "MAX_NUM_ORDERS", "maxNumOrders": 200},
        ],
        "permissions": [],
        "permissionSets": [["SPOT"]],
        "defaultSelfTradePreventionMode": "EXPIRE_MAKER",
        "allowedSelfTradePreventionModes": ["EXPIRE_TAKER", "EXPIRE_MAKER", "EXPIRE_BOTH"],
    }
