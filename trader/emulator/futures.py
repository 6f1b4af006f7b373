"""Binance USDⓈ-M futures REST (fapi) as the emulator answers it, for ccxt's `binanceusdm`
(4.5.90): the public market data here, the signed account and trading routes in
`futures_private`. The same routes answer under `/fapi/v3/...` as Aster's futures API, which
is Binance's under that prefix (ccxt's `aster`: fapiPublicGetV3ExchangeInfo, ...V3PremiumIndex,
...).

The routes each ccxt method calls (ccxt/binance.py): fetch_markets -> GET /fapi/v1/exchangeInfo;
fetch_time -> /fapi/v1/time; fetch_funding_rate(s), fetch_mark_price -> /fapi/v1/premiumIndex;
fetch_funding_rate_history -> /fapi/v1/fundingRate; fetch_funding_interval(s) ->
/fapi/v1/fundingInfo; fetch_ohlcv -> /fapi/v1/klines, with price="mark"/"index"/"premiumIndex"
-> markPriceKlines / indexPriceKlines / premiumIndexKlines.

Faults and the control endpoints are the spot emulator's (`plumbing.Control`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

from aiohttp import web

from trader.domain import Bar, Timeframe
from trader.emulator.binance import INTERVALS, _kline, _refusal
from trader.emulator.faults import FaultPlan
from trader.emulator.futures_market import PerpListing, PerpMarket
from trader.emulator.futures_orders import FuturesVenue
from trader.emulator.futures_private import FuturesPrivate
from trader.emulator.futures_settle import Settlement
from trader.emulator.futures_wire import symbol_info
from trader.emulator.market import _resample
from trader.emulator.plumbing import Control, Handler
from trader.emulator.venue import VenueError
from trader.emulator.wire import ms, num

INTERNAL_ERROR_BODY = json.dumps(
    {"code": -1001, "msg": "Internal error; unable to process your request. Please try again."}
)
INTEREST_RATE = Decimal("0.0001")  # premiumIndex's interestRate: Binance's 0.01% per interval
DEFAULT_INTERVAL = timedelta(hours=8)  # fundingInfo lists only symbols that differ from it


@dataclass
class FuturesApi:
    venue: FuturesVenue
    secrets: dict[str, str] = field(default_factory=dict)  # API key -> secret
    faults: FaultPlan = field(default_factory=FaultPlan)
    aster_users: dict[str, str] = field(default_factory=dict)  # Aster wallet address -> key
    wall_ms: Callable[[], int] = field(default_factory=lambda: lambda: int(time.time() * 1000))
    on_clock: Callable[[bool], None] | None = None
    control: Control = field(init=False)
    settlement: Settlement = field(init=False)
    private: FuturesPrivate = field(init=False)

    def __post_init__(self) -> None:
        self.control = Control(self.faults, self.venue.clock, on_clock=self.on_clock)
        self.settlement = Settlement(self.venue)
        self.private = FuturesPrivate(self.venue, self.secrets, self.aster_users, self.wall_ms)

    @property
    def perps(self) -> PerpMarket:
        return self.venue.perps

    @property
    def requests(self) -> list[str]:
        return self.control.requests

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        routes: list[tuple[str, str, Handler]] = [
            ("GET", "ping", self.ping),
            ("GET", "time", self.time),
            ("GET", "exchangeInfo", self.exchange_info),
            ("GET", "klines", self.klines),
            ("GET", "markPriceKlines", self.mark_klines),
            ("GET", "indexPriceKlines", self.index_klines),
            ("GET", "premiumIndexKlines", self.premium_klines),
            ("GET", "premiumIndex", self.premium_index),
            ("GET", "fundingRate", self.funding_rate),
            ("GET", "fundingInfo", self.funding_info),
            *self.private.routes(),
        ]
        seen: set[tuple[str, str]] = set()
        for method, name, handler in routes:
            # v1 names (v2/v3 given in full), each also under /fapi/v3 for Aster.
            path = name if name.startswith("/") else f"/fapi/v1/{name}"
            v3 = "/fapi/v3/" + path.split("/", 3)[-1] if path.startswith("/fapi/") else None
            for route in (path, v3):
                if route is not None and (method, route) not in seen:
                    seen.add((method, route))
                    app.router.add_route(method, route, handler)
        # Aster's ccxt client also lists its spot markets (sapi v3): none here.
        app.router.add_get("/api/v3/exchangeInfo", self.no_spot_markets)
        self.control.routes(app)
        return app

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not await self.control.admit(request):
            return await handler(request)
        return await self.control.answer(request, handler, INTERNAL_ERROR_BODY, _refusal)

    # --- helpers ----------------------------------------------------------------------------

    def _listing(self, request: web.Request, name: str = "symbol") -> PerpListing:
        symbol = request.query.get(name)
        if not symbol:
            raise VenueError(
                -1102, f"Mandatory parameter '{name}' was not sent, was empty/null, or malformed."
            )
        listing = self.perps.listing(symbol)
        if listing is None:
            raise VenueError(-1121, "Invalid symbol.")
        return listing

    def _window(self, request: web.Request, bars: list[Bar], default: int, most: int) -> list[Any]:
        """Bars of the asked interval and span, as klines."""
        interval = request.query.get("interval", "")
        if interval not in INTERVALS or not bars:
            if interval not in INTERVALS:
                raise VenueError(-1120, "Invalid interval.")
            return []
        timeframe, recorded = Timeframe(interval), bars[0].timeframe
        if timeframe != recorded:
            if timeframe.seconds % recorded.seconds:
                raise VenueError(-1120, "Invalid interval.")
            bars = _resample(bars, timeframe)
        limit = _int(request, "limit", default)
        if not 1 <= limit <= most:
            raise VenueError(-1130, "Data sent for parameter 'limit' is not valid.")
        start, end = _int(request, "startTime", None), _int(request, "endTime", None)
        if start is not None:
            bars = [b for b in bars if ms(b.start) >= start]
        if end is not None:
            bars = [b for b in bars if ms(b.start) <= end]
        chosen = bars[:limit] if start is not None else bars[-limit:]
        return [_kline(bar) for bar in chosen]

    # --- endpoints --------------------------------------------------------------------------

    async def ping(self, request: web.Request) -> web.Response:
        return web.json_response({})

    async def time(self, request: web.Request) -> web.Response:
        return web.json_response({"serverTime": ms(self.venue.clock())})

    async def no_spot_markets(self, request: web.Request) -> web.Response:
        return web.json_response({"timezone": "UTC", "serverTime": ms(self.venue.clock()),
                                  "rateLimits": [], "symbols": []})  # fmt: skip

    async def exchange_info(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "timezone": "UTC",
                "serverTime": ms(self.venue.clock()),
                "futuresType": "U_MARGINED",
                "rateLimits": [
                    _rate_limit("REQUEST_WEIGHT", 2400),
                    _rate_limit("ORDERS", 1200),
                ],
                "exchangeFilters": [],
                "assets": [{"asset": "USDT", "marginAvailable": True, "autoAssetExchange": "0"}],
                "symbols": [symbol_info(listing) for listing in self.perps.listings],
            }
        )

    async def klines(self, request: web.Request) -> web.Response:
        listing = self._listing(request)
        market = self.perps.market
        symbol = listing.instrument.venue_id
        bars = market.bars(symbol, market.timeframe(symbol))
        return web.json_response(self._window(request, bars, 500, 1500))

    async def mark_klines(self, request: web.Request) -> web.Response:
        listing = self._listing(request)
        bars = self.perps.visible_mark_bars(listing.instrument.venue_id)
        return web.json_response(self._window(request, bars, 500, 1500))

    async def index_klines(self, request: web.Request) -> web.Response:
        listing = self._listing(request, "pair")
        bars = self.perps.index_bars(listing.instrument.venue_id)
        return web.json_response(self._window(request, bars, 500, 1500))

    async def premium_klines(self, request: web.Request) -> web.Response:
        """The premium index per bar: (mark - index) / index, from the recorded series."""
        listing = self._listing(request)
        symbol = listing.instrument.venue_id
        index = {b.start: b for b in self.perps.index_bars(symbol)}
        premium = []
        for mark in self.perps.visible_mark_bars(symbol):
            base = index.get(mark.start)
            if base is None:
                continue
            values = [(getattr(mark, n) - getattr(base, n)) / getattr(base, n)
                      for n in ("open", "high", "low", "close")]  # fmt: skip
            low, high = min(values), max(values)
            premium.append(
                Bar(mark.symbol, mark.timeframe, mark.start, values[0], high, low, values[3], 0)
            )
        return web.json_response(self._window(request, premium, 500, 1500))

    def _premium(self, listing: PerpListing) -> dict[str, Any]:
        symbol = listing.instrument.venue_id
        upcoming = self.perps.next_funding(symbol)
        settled = self.perps.settled(symbol)
        rate = upcoming.rate if upcoming is not None else (settled[-1].rate if settled else 0)
        interval = self.perps.funding_interval(symbol) or DEFAULT_INTERVAL
        if upcoming is not None:
            next_time = upcoming.time
        elif settled:
            next_time = settled[-1].time + interval
        else:
            next_time = self.venue.clock()
        return {
            "symbol": symbol,
            "markPrice": num(self.perps.mark_price(symbol)),
            "indexPrice": num(self.perps.index_price(symbol)),
            "estimatedSettlePrice": num(self.perps.index_price(symbol)),
            "lastFundingRate": num(Decimal(rate)),
            "interestRate": num(INTEREST_RATE),
            "nextFundingTime": ms(next_time),
            "time": ms(self.venue.clock()),
        }

    async def premium_index(self, request: web.Request) -> web.Response:
        """The mark, index and funding now: the rate of the coming settlement as recorded."""
        if "symbol" in request.query:
            return web.json_response(self._premium(self._listing(request)))
        return web.json_response([self._premium(listing) for listing in self.perps.listings])

    async def funding_rate(self, request: web.Request) -> web.Response:
        """Settled funding: the recorded rates and marks, by startTime/endTime/limit (the
        latest `limit` without a start)."""
        listings = [self._listing(request)] if "symbol" in request.query else self.perps.listings
        limit = _int(request, "limit", 100)
        if not 1 <= limit <= 1000:
            raise VenueError(-1130, "Data sent for parameter 'limit' is not valid.")
        start, end = _int(request, "startTime", None), _int(request, "endTime", None)
        rows: list[dict[str, Any]] = []
        for listing in listings:
            symbol = listing.instrument.venue_id
            for event in self.perps.settled(symbol):
                stamp = ms(event.time)
                if (start is None or stamp >= start) and (end is None or stamp <= end):
                    rows.append(
                        {"symbol": symbol, "fundingRate": num(event.rate),
                         "fundingTime": stamp,
                         "markPrice": num(self.perps.funding_mark(symbol, event))}
                    )  # fmt: skip
        rows.sort(key=lambda row: int(row["fundingTime"]))
        return web.json_response(rows[:limit] if start is not None else rows[-limit:])

    async def funding_info(self, request: web.Request) -> web.Response:
        """Symbols whose funding interval (or cap/floor) differs from the default."""
        rows = []
        for listing in self.perps.listings:
            interval = self.perps.funding_interval(listing.instrument.venue_id)
            if interval is None or interval == DEFAULT_INTERVAL:
                continue
            rows.append(
                {
                    "symbol": listing.instrument.venue_id,
                    "adjustedFundingRateCap": num(listing.funding_cap),
                    "adjustedFundingRateFloor": num(-listing.funding_cap),
                    "fundingIntervalHours": int(interval.total_seconds() // 3600),
                    "disclaimer": False,
                }
            )
        return web.json_response(rows)


def _rate_limit(kind: str, limit: int) -> dict[str, Any]:
    return {"rateLimitType": kind, "interval": "MINUTE", "intervalNum": 1, "limit": limit}


def _int(request: web.Request, name: str, default: int | None) -> Any:
    text = request.query.get(name)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise VenueError(-1100, f"Illegal characters found in parameter '{name}'.") from None


class FuturesServer:
    """Serve a `FuturesApi` on loopback: `async with FuturesServer(api) as server: ...`."""

    def __init__(self, api: FuturesApi, host: str = "127.0.0.1", port: int = 0) -> None:
        self.api, self._host, self.port = api, host, port
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}"

    async def __aenter__(self) -> FuturesServer:
        self._runner = web.AppRunner(self.api.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self.port)
        await site.start()
        server = site._server  # aiohttp exposes the bound port only here
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
