"""Market data from an exchange through ccxt (async): closed bars and the real top of book."""

from __future__ import annotations

import asyncio
import difflib
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar
from urllib.parse import urlsplit

import ccxt.async_support as ccxt
from ccxt.base.decimal_to_precision import TICK_SIZE

from trader.clock import Clock
from trader.config.market_settings import ExchangeSettings
from trader.domain import DomainError, Instrument, Timeframe, from_epoch_ms
from trader.market.feed import ExchangeCallFailed, UnknownSymbols
from trader.market.hygiene import RawQuote, Row
from trader.market.retry import Retrier, RetryPolicy, asked_wait

T = TypeVar("T")

# Per-exchange options for spot trading: load only the markets we can trade.
_SPOT_OPTIONS: dict[str, dict[str, Any]] = {
    "binance": {"fetchMarkets": {"types": ["spot"]}, "defaultType": "spot"},
}
# Linear perpetuals (`market.kind = "perp"`): the exchange's own futures default, and for Aster
# no builder fee: ccxt's `aster` otherwise approves, then adds to every order, a fee of 0.1% to
# ccxt's builder address (ccxt/aster.py `initialize_client`, `create_order_request`).
_PERP_OPTIONS: dict[str, dict[str, Any]] = {
    "binanceusdm": {},
    "aster": {"defaultType": "swap", "builderFee": False},
}
_PARSE_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError)


def create_exchange(settings: ExchangeSettings) -> ccxt.Exchange:
    """The one ccxt client of the daemon's exchange, shared by market data and the broker."""
    factory = getattr(ccxt, settings.id, None)
    if factory is None or not isinstance(factory, type):
        close = difflib.get_close_matches(settings.id, ccxt.exchanges, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ValueError(f"ccxt has no exchange {settings.id!r}{hint}")
    config: dict[str, Any] = {
        "enableRateLimit": True,
        "timeout": int(settings.timeout_s * 1000),
        "options": dict(
            _PERP_OPTIONS[settings.id]
            if settings.id in _PERP_OPTIONS
            else _SPOT_OPTIONS.get(settings.id, {"defaultType": "spot"})
        ),
    }
    for key, secret in (
        ("apiKey", settings.api_key),
        ("secret", settings.api_secret),
        ("password", settings.api_password),
    ):
        if secret is not None:
            config[key] = secret.get_secret_value()
    if settings.id == "aster" and "secret" in config:
        # Aster signs with an Ethereum key (EIP-712), which ccxt takes as `privateKey`.
        config["privateKey"] = config.pop("secret")
    exchange: ccxt.Exchange = factory(config)
    if settings.testnet:
        exchange.set_sandbox_mode(True)
    if settings.api_base_url:
        point_at(exchange, settings.api_base_url)
    return exchange


def point_at(exchange: ccxt.Exchange, base_url: str) -> None:
    """Send every REST call to `base_url` (the local emulator), keeping each path."""

    def rewrite(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: rewrite(v) for k, v in value.items()}
        if isinstance(value, str) and value.startswith("http"):
            parts = urlsplit(value)
            return base_url.rstrip("/") + parts.path
        return value

    exchange.urls["api"] = rewrite(exchange.urls["api"])


def retry_after(exchange: ccxt.Exchange) -> float | None:
    """The wait (seconds) the exchange's last answer asked for (`asked_wait`), if any."""
    return asked_wait(getattr(exchange, "last_response_headers", None) or {}, time.time())


class CcxtMarketData:
    def __init__(
        self,
        exchange: ccxt.Exchange,
        clock: Clock,
        *,
        retry: RetryPolicy | None = None,
        on_error: Callable[[str], None] = lambda kind: None,
    ) -> None:
        self.exchange = exchange
        self.name = f"ccxt:{exchange.id}"
        self._clock = clock
        self._retrier = Retrier(
            retry or RetryPolicy(), clock, on_error, retry_after=self._retry_after
        )

    @property
    def on_error(self) -> Callable[[str], None]:
        """What each failed call is reported to, by kind (the live broker reports its own)."""
        return self._retrier.on_error

    def _retry_after(self) -> float | None:
        return retry_after(self.exchange)

    async def _call(self, what: str, make: Callable[[], Awaitable[T]]) -> T:
        async def attempt() -> T:
            try:
                return await make()
            except _PARSE_ERRORS as error:
                # ccxt choked on what the exchange sent: a malformed payload, not our bug.
                raise ccxt.BadResponse(f"{what}: unparseable answer ({error!r})") from error

        return await self._retrier.call(what, attempt)

    async def start(self, symbols: Sequence[str]) -> None:
        await self._call("load markets", self.exchange.load_markets)
        self.check_symbols(symbols)

    async def refresh_markets(self, symbols: Sequence[str]) -> None:
        await self._call("reload markets", lambda: self.exchange.load_markets(reload=True))
        self.check_symbols(symbols)

    def check_symbols(self, symbols: Sequence[str]) -> None:
        markets = self.exchange.markets or {}
        unknown = [s for s in symbols if s not in markets]
        inactive = [s for s in symbols if s in markets and markets[s].get("active") is False]
        if unknown or inactive:
            raise UnknownSymbols(self.name, unknown, markets, inactive)

    def instrument(self, symbol: str) -> Instrument:
        market = self.exchange.market(symbol)
        precision, limits = market.get("precision") or {}, market.get("limits") or {}

        def step(value: Any) -> Decimal:
            if value is None:
                return Decimal("0.00000001")
            if self.exchange.precisionMode == TICK_SIZE:
                return Decimal(str(value))
            return Decimal(1).scaleb(-int(value))  # a number of decimal places

        def minimum(kind: str) -> Decimal:
            value = (limits.get(kind) or {}).get("min")
            return Decimal(str(value)) if value else Decimal(0)

        # `shortAmount` is not ccxt's: Alpaca's adapter sets it for stocks it shorts in whole
        # shares only (`trader.market.alpaca.wire.market`).
        short = precision.get("shortAmount")
        kind, size = perp_terms(symbol, market)
        return Instrument(
            symbol, step(precision.get("price")), step(precision.get("amount")),
            minimum("amount"), minimum("cost"), step(short) if short is not None else None,
            kind=kind, contract_size=size,
        )  # fmt: skip

    def no_trade_feed(self, symbol: str) -> str | None:
        """None: a ccxt exchange's bar missing in a session is a hole (`MarketData`)."""
        return None

    @property
    def page_limit(self) -> int:
        features = getattr(self.exchange, "features", None) or {}
        limit = (((features.get("spot") or {}).get("fetchOHLCV")) or {}).get("limit")
        return int(limit) if limit else 500

    async def ohlcv(
        self, symbol: str, timeframe: Timeframe, since: datetime | None, limit: int
    ) -> list[Row]:
        since_ms = int(since.timestamp() * 1000) if since is not None else None
        rows = await self._call(
            f"fetch_ohlcv {symbol}",
            lambda: self.exchange.fetch_ohlcv(symbol, timeframe.text, since_ms, limit),
        )
        if not isinstance(rows, list):
            raise ccxt.BadResponse(f"fetch_ohlcv {symbol}: expected a list")
        return [row if isinstance(row, list | tuple) else [row] for row in rows]

    async def top_of_book(self, symbols: Sequence[str]) -> dict[str, RawQuote]:
        """One batch call where the exchange has one (bids/asks or tickers), then the order
        book for any symbol the batch did not price."""
        has = self.exchange.has
        tickers: dict[str, Any] = {}
        if has.get("fetchBidsAsks"):
            tickers = await self._call(
                "fetch_bids_asks", lambda: self.exchange.fetch_bids_asks(list(symbols))
            )
        elif has.get("fetchTickers"):
            tickers = await self._call(
                "fetch_tickers", lambda: self.exchange.fetch_tickers(list(symbols))
            )
        received = self._clock.now()
        quotes: dict[str, RawQuote] = {}
        for symbol in symbols:
            ticker = tickers.get(symbol) if isinstance(tickers, dict) else None
            if isinstance(ticker, dict) and ticker.get("bid") is not None:
                quotes[symbol] = RawQuote(
                    ticker.get("bid"),
                    ticker.get("ask"),
                    received,
                    _exchange_time(ticker.get("timestamp")),
                    ticker.get("bidVolume"),
                    ticker.get("askVolume"),
                )
        missing = [s for s in symbols if s not in quotes]
        if missing and has.get("fetchOrderBook"):
            books = await asyncio.gather(
                *(self._book(symbol) for symbol in missing), return_exceptions=True
            )
            failures = []
            for symbol, book in zip(missing, books, strict=True):
                if isinstance(book, RawQuote):
                    quotes[symbol] = book
                elif isinstance(book, ExchangeCallFailed):
                    failures.append(book)
                elif isinstance(book, BaseException) and not isinstance(book, Exception):
                    raise book
            if failures and not quotes:
                raise failures[0]  # nothing answered: the exchange is away, not the books empty
        return quotes

    async def _book(self, symbol: str) -> RawQuote | None:
        book = await self._call(
            f"fetch_order_book {symbol}", lambda: self.exchange.fetch_order_book(symbol, 5)
        )
        bids, asks = book.get("bids") or [], book.get("asks") or []
        if not bids or not asks:
            return None
        return RawQuote(
            bids[0][0],
            asks[0][0],
            self._clock.now(),
            _exchange_time(book.get("timestamp")),
            bids[0][1] if len(bids[0]) > 1 else None,
            asks[0][1] if len(asks[0]) > 1 else None,
        )

    async def close(self) -> None:
        await self.exchange.close()


def perp_terms(symbol: str, market: dict[str, Any]) -> tuple[str, Decimal]:
    """("perp", contract size) for a linear perpetual, ("spot", 1) for a spot market; any
    other derivative is refused (ccxt's market structure: `swap`, `linear`, `contractSize`)."""
    if market.get("spot") or not market.get("contract"):
        return "spot", Decimal(1)
    if not (market.get("swap") and market.get("linear")):
        raise DomainError(f"{symbol} is not a linear perpetual (only USDⓈ-M perps are traded)")
    size = market.get("contractSize")
    return "perp", Decimal(str(size)) if size else Decimal(1)


def _exchange_time(ms: object) -> datetime | None:
    if isinstance(ms, int | float) and not isinstance(ms, bool) and ms > 0:
        return from_epoch_ms(int(ms))
    return None
