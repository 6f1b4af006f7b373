"""Alpaca as a ccxt exchange's read side, through its official SDK (alpaca-py): its asset list
as markets, bars and quotes, the account, clock and calendar, each call in a worker thread
with a failure raised as ccxt's error of the same meaning (`errors`). The trading side, on
top of it, is `trader.market.alpaca.exchange`.

- The SDK is synchronous: each call runs in a worker thread, under `exchange.timeout_s`
  (the SDK sets none), and the SDK's own retries are off: the retrier decides, waiting as
  long as Alpaca's X-RateLimit-Reset says (`trader.market.retry.asked_wait`; the error's
  answer headers are kept in `last_response_headers`).
- The asset list (many MB at Alpaca) is read once a day, and again when a symbol is missing
  from it; what else does not change within a tick is kept: the calendar day, the quotes the
  data step read (an order's checks use them while fresh).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import ROUND_DOWN, Decimal
from typing import Any, TypeVar

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
from alpaca.trading.enums import AssetStatus
from alpaca.trading.requests import GetAssetsRequest
from trader.clock import Clock, WallClock
from trader.domain import Timeframe, from_epoch_ms
from trader.market.alpaca import wire
from trader.market.alpaca.errors import as_ccxt, response_headers

T = TypeVar("T")
NEW_YORK = wire.NEW_YORK
ASSETS_KEPT = timedelta(days=1)  # the whole asset list is read again after this
QUOTE_FRESH = timedelta(seconds=15)  # a quote the data step read this tick serves an order


class AlpacaMarkets:
    id = "alpaca"
    fee_day_zone = NEW_YORK  # the days Alpaca posts fees by (reconciliation matches by day)
    precisionMode = TICK_SIZE  # ccxt's name
    # fetch_my_trades answers every trade since `since` at once (it pages Alpaca's activities).
    # recvWindow: Alpaca has none, so a lost order may appear late (`trader.broker.live.book`).
    has: Mapping[str, bool] = {
        "fetchBidsAsks": True, "fetchMyTradesWhole": True, "recvWindow": False,
    }  # fmt: skip
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
        crypto_fee_tier: int = 1,
        credential_settings: Sequence[str] = (),
    ) -> None:
        """`clock`: the venue's time (the daemon's), for the spans it asks about; `sessions`:
        the HTTP sessions the clients use, closed with the exchange; `credential_settings`:
        the settings that hold the keys, named when Alpaca refuses them."""
        self._trading, self._stocks, self._crypto = trading, stocks, crypto
        self._sessions = tuple(sessions)
        self._clock = clock or WallClock()
        self._feed = DataFeed.SIP if feed == "sip" else DataFeed.IEX
        self._extended = frozenset(extended_hours)
        self._fee_tier = crypto_fee_tier  # the estimate of a crypto fill's fee (`fees`)
        self.markets: dict[str, dict[str, Any]] | None = None
        self.options: dict[str, Any] = {}
        self.last_response_headers: dict[str, str] = {}
        self.credential_settings = tuple(credential_settings)
        self._assets_read: datetime | None = None  # when the whole list was last read
        self._days: dict[str, Mapping[str, Any] | None] = {}  # calendar day by NY date
        self._quotes: dict[str, tuple[datetime, dict[str, Any]]] = {}  # symbol -> read, quote
        self._placed: dict[str, dict[str, Any]] = {}  # order id -> as placed (never changes)
        # client order id -> whether it crossed the quote when sent (known before the answer,
        # so an order whose answer was lost keeps it too)
        self._crossed: dict[str, bool] = {}

    @property
    def feed(self) -> str:
        """The stock data feed the bars and quotes come from: "iex" or "sip"."""
        return str(self._feed.value)

    async def _call(self, call: Callable[..., T], *args: Any, cancelling: bool = False) -> T:
        """`call` in a worker thread; a failure as the ccxt error that means the same, its
        answer's headers kept (the rate limit's wait is read from them)."""
        try:
            result = await asyncio.to_thread(call, *args)
        except Exception as error:
            mapped = as_ccxt(error, cancelling=cancelling)
            if mapped is None:
                raise
            self.last_response_headers = response_headers(error)
            raise mapped from error
        self.last_response_headers = {}
        return result

    async def close(self) -> None:
        for session in self._sessions:
            session.close()

    async def load_markets(self, reload: bool = False) -> dict[str, dict[str, Any]]:
        """Alpaca's asset list as markets: read at the first call, and on `reload` only once
        it is a day old (assets change overnight; the list is many MB)."""
        now = self._clock.now()
        stale = self._assets_read is None or now - self._assets_read >= ASSETS_KEPT
        if self.markets is None or (reload and stale):
            await self.reload_assets()
        assert self.markets is not None
        return self.markets

    async def reload_assets(self) -> None:
        """Read the whole asset list now (a symbol missing from it may have been listed)."""
        request = GetAssetsRequest(status=AssetStatus.ACTIVE)
        assets = await self._call(self._trading.get_all_assets, request)
        self.markets = {wire.unified(a): wire.market(a) for a in as_list(assets)}
        self._assets_read = self._clock.now()

    def market(self, symbol: str) -> dict[str, Any]:
        markets = self.markets or {}
        if symbol not in markets:
            raise ccxt.BadSymbol(f"alpaca does not list {symbol}")
        return markets[symbol]

    def is_stock(self, symbol: str) -> bool:
        return bool(self.market(symbol)["info"].get("class") != "crypto")

    def safe_currency_code(self, code: Any) -> str:
        return str(code)

    def amount_to_precision(self, symbol: str, amount: float) -> str:
        return _to_step(amount, self.market(symbol)["precision"]["amount"])

    def price_to_precision(self, symbol: str, price: float) -> str:
        return _to_step(price, self.market(symbol)["precision"]["price"])

    async def fetch_ohlcv(
        self, symbol: str, timeframe: str, since: int | None, limit: int | None
    ) -> list[list[Any]]:
        frame = Timeframe(timeframe)
        size = min(limit or 1000, 10_000)
        start = from_epoch_ms(since) if since is not None else None
        newest = start is None  # the latest bars: ask newest first from far enough back
        if start is None:
            back = frame.duration * size * (5 if self.is_stock(symbol) else 1)
            start = self._clock.now() - back
        fields: dict[str, Any] = {
            "symbol_or_symbols": [self.market(symbol)["id"]], "start": start, "limit": size,
            "timeframe": wire.alpaca_timeframe(frame), "sort": Sort.DESC if newest else Sort.ASC,
        }  # fmt: skip
        if self.is_stock(symbol):
            request = StockBarsRequest(**fields, feed=self._feed)
            raw = await self._call(self._stocks.get_stock_bars, request)
        else:
            raw = await self._call(self._crypto.get_crypto_bars, CryptoBarsRequest(**fields))
        bars = as_object(raw).get(self.market(symbol)["id"]) or []
        rows = [wire.bar_row(b) for b in bars]
        return rows[::-1] if newest else rows

    async def fetch_bids_asks(self, symbols: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The latest quote of each symbol: one call for the stocks, one for the crypto."""
        stocks = [s for s in symbols if self.is_stock(s)]
        coins = [s for s in symbols if not self.is_stock(s)]
        quotes: dict[str, Any] = {}
        if stocks:
            ids = [self.market(s)["id"] for s in stocks]
            request = StockLatestQuoteRequest(symbol_or_symbols=ids, feed=self._feed)
            quotes |= as_object(await self._call(self._stocks.get_stock_latest_quote, request))
        if coins:
            request_ = CryptoLatestQuoteRequest(
                symbol_or_symbols=[self.market(s)["id"] for s in coins]
            )
            quotes |= as_object(await self._call(self._crypto.get_crypto_latest_quote, request_))
        out = {}
        for symbol in symbols:
            quote = quotes.get(self.market(symbol)["id"])
            if isinstance(quote, Mapping) and quote.get("bp") is not None:
                out[symbol] = {
                    "bid": quote.get("bp"), "ask": quote.get("ap"),
                    "bidVolume": quote.get("bs"), "askVolume": quote.get("as"),
                    "timestamp": wire.stamp(quote.get("t")),
                }  # fmt: skip
                self._quotes[symbol] = (self._clock.now(), out[symbol])
        return out

    async def latest_quote(self, symbol: str) -> dict[str, Any]:
        """The quote the data step read this tick when it is fresh, else one read now."""
        kept = self._quotes.get(symbol)
        if kept is not None and self._clock.now() - kept[0] <= QUOTE_FRESH:
            return kept[1]
        return (await self.fetch_bids_asks([symbol])).get(symbol, {})

    async def latest_ask(self, symbol: str) -> Decimal | None:
        ask = (await self.latest_quote(symbol)).get("ask")
        return Decimal(str(ask)) if ask is not None else None

    async def calendar_day(self, local: datetime) -> Mapping[str, Any] | None:
        """Alpaca's calendar entry of `local`'s date (New York), None when the market does
        not open that day; read once per date."""
        date = local.date().isoformat()
        if date not in self._days:
            days = await self.calendar(date, date)
            self._days = {date: next((d for d in days if str(d.get("date")) == date), None)}
        return self._days[date]

    async def account(self) -> dict[str, Any]:
        """The account as Alpaca describes it (`/v2/account`); `trader doctor` reads it."""
        return as_object(await self._call(self._trading.get_account))

    async def clock(self) -> dict[str, Any]:
        """Alpaca's market clock: now, whether the stock market is open, next open and close."""
        return as_object(await self._call(self._trading.get_clock))

    async def calendar(self, start: str, end: str) -> list[dict[str, Any]]:
        from alpaca.trading.requests import GetCalendarRequest  # noqa: PLC0415

        request = GetCalendarRequest(start=start, end=end)
        return as_list(await self._call(self._trading.get_calendar, request))


def _to_step(value: float, step: float) -> str:
    exact, grid = Decimal(repr(value)), Decimal(repr(step))
    return str((exact / grid).to_integral_value(ROUND_DOWN) * grid)


def as_object(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ccxt.BadResponse(f"alpaca: expected an object, got {type(raw).__name__}")
    return raw


def as_list(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        raise ccxt.BadResponse(f"alpaca: expected a list of objects, got {type(raw).__name__}")
    return raw
