"""Alpaca's market data behind the `MarketData` protocol, and the SDK clients it and the live
broker share: one `AlpacaExchange` per daemon, pointed at `exchange.api_base_url` (the local
emulator) through the SDK's documented `url_override` when it is set.

At start-up every symbol is checked against Alpaca's asset list, and every stock's trading
calendar against Alpaca's calendar: a stock must be given its exchange's calendar
(`market.calendars`, e.g. XNYS), whose sessions must be Alpaca's, so that its ticks follow the
session while crypto trades around the clock.

alpaca-py 0.44 has no public way to set a request timeout or to turn its retries off: its
RESTClient builds its own `requests.Session()` and takes no session, adapter or timeout;
it takes `retry_attempts`/`retry_exception_codes`, but TradingClient and the data clients do
not pass them on (and `retry_attempts=0` is read as "the default, 3"). Left alone, a request
could hang forever, and a 429 would be slept on for a fixed 3 s, three times, before we heard
of it. So `_take_over` sets the two attributes behind them, once, after checking they are
what this code was written against, and pyproject.toml pins alpaca-py to 0.44.x;
tests/unit/market/test_alpaca_sdk.py fails when the installed SDK changes any of this (or
gains a public way, which should then be used instead)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from importlib.metadata import version
from typing import Any

import ccxt.async_support as ccxt
import requests

from alpaca.common.rest import RESTClient
from alpaca.data.historical import CryptoHistoricalDataClient, StockHistoricalDataClient
from alpaca.trading.client import TradingClient
from trader.clock import Clock
from trader.config.market_settings import ExchangeSettings
from trader.domain import from_epoch_ms, to_epoch_ms
from trader.logging import get_logger
from trader.market.alpaca.exchange import NEW_YORK, AlpacaExchange
from trader.market.alpaca.wire import RECENT_SIP_REFUSED
from trader.market.calendars.registry import CONTINUOUS, build_calendar, canonical_name
from trader.market.ccxt_feed import CcxtMarketData
from trader.market.feed import SymbolsRefused
from trader.market.retry import RetryPolicy

SESSIONS_CHECKED = timedelta(days=14)  # how far ahead a stock's sessions are compared
FEED_WORDS = {
    "iex": "IEX's trades alone (free): a minute with no IEX trade is a bar with no trade",
    "sip": "every US exchange's trades (needs real-time SIP: Algo Trader Plus)",
}


class _TimedSession(requests.Session):
    """The SDK's HTTP session, with a timeout on every request (the SDK sets none)."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__()
        self.timeout_s = timeout_s

    def request(self, method: str, url: str | bytes, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("timeout", self.timeout_s)
        return super().request(method, url, *args, **kwargs)


def alpaca_exchange(settings: ExchangeSettings, clock: Clock) -> AlpacaExchange:
    """The SDK's clients for the environment `exchange.alpaca.paper` picks, with its keys,
    on the venue's `clock`. Raises ValueError when those keys are not set."""
    alpaca = settings.alpaca
    key, secret = alpaca.credentials()
    if key is None or secret is None:
        names = " and ".join(alpaca.key_names())
        raise ValueError(
            f"Alpaca needs {names} (ALP_KEY_ID / ALP_SECRET_KEY for the paper account, "
            "ALP_KEY_ID_PROD / ALP_SECRET_KEY_PROD for the live one)"
        )
    ids = (key.get_secret_value(), secret.get_secret_value())
    base = settings.api_base_url
    trading = TradingClient(*ids, paper=alpaca.paper, raw_data=True, url_override=base)
    stocks = StockHistoricalDataClient(*ids, raw_data=True, url_override=base)
    crypto = CryptoHistoricalDataClient(*ids, raw_data=True, url_override=base)
    sessions = [_take_over(c, settings.timeout_s) for c in (trading, stocks, crypto)]
    return AlpacaExchange(
        trading, stocks, crypto, feed=alpaca.feed, extended_hours=alpaca.extended_hours,
        clock=clock, sessions=sessions, crypto_fee_tier=alpaca.crypto_fee_tier,
        credential_settings=alpaca.key_names(),
    )  # fmt: skip


def _take_over(client: RESTClient, timeout_s: float) -> requests.Session:
    """Our HTTP session (a timeout on every request) and our retries (none of the SDK's: our
    retrier decides, and honours Retry-After, where the SDK would sleep a fixed 3 s on a 429
    before we even heard of it). alpaca-py 0.44 has no documented hook for either: its
    RESTClient takes retry settings but TradingClient and the data clients do not pass them
    on, and none takes a session or a timeout. So the two attributes behind them are set
    here, once, after checking they are what this code was written against: a release that
    changed them stops the daemon at start-up, never runs it without timeouts."""
    if not (isinstance(getattr(client, "_session", None), requests.Session)
            and isinstance(getattr(client, "_retry", None), int)):  # fmt: skip
        raise RuntimeError(
            f"alpaca-py {version('alpaca-py')}: {type(client).__name__} no longer keeps its "
            "HTTP session in _session and its retries in _retry; trader was written against "
            "alpaca-py 0.44: install that version"
        )
    session = _TimedSession(timeout_s)
    client._session.close()
    client._session = session
    client._retry = 0
    return session


class AlpacaMarketData(CcxtMarketData):
    """Bars and latest quotes from Alpaca (stocks: the IEX or SIP feed; crypto: Alpaca's)."""

    def __init__(
        self,
        exchange: AlpacaExchange,
        clock: Clock,
        calendars: Mapping[str, str],
        *,
        retry: RetryPolicy | None = None,
        on_error: Callable[[str], None] = lambda kind: None,
    ) -> None:
        super().__init__(exchange, clock, retry=retry, on_error=on_error)
        self.name = "alpaca"
        self.alpaca = exchange
        self._calendars = dict(calendars)  # symbol -> calendar name
        self.check_sessions = True  # False: a download, which needs no trading calendar

    async def start(self, symbols: Sequence[str]) -> None:
        await super().start(symbols)
        stocks = [s for s in symbols if self.alpaca.is_stock(s)]
        if stocks:  # which feed, said once: IEX's bars have gaps that are not holes
            get_logger("trader.market").info(
                "alpaca stock data feed", feed=self.alpaca.feed, stocks=stocks,
                setting="exchange.alpaca.feed", what=FEED_WORDS[self.alpaca.feed],
            )  # fmt: skip
            if self.alpaca.feed == "sip":
                await self._check_sip(stocks[0])
        if self.check_sessions:
            await self._check_sessions(symbols)

    def no_trade_feed(self, symbol: str) -> str | None:
        """For a stock on IEX, "iex": a minute with no IEX trade has no bar (`MarketData`)."""
        return "iex" if self.alpaca.feed == "iex" and self.alpaca.is_stock(symbol) else None

    async def _check_sip(self, stock: str) -> None:
        """Whether the account's data plan serves recent SIP data: the Free plan does not,
        and every tick would fail; said now, once, with the setting to change. Any other
        failure is the ticks' to meet and report."""
        try:
            await self.alpaca.fetch_ohlcv(stock, "1m", None, 1)
        except ccxt.BaseError as error:
            if RECENT_SIP_REFUSED in str(error):
                raise SymbolsRefused(
                    'exchange.alpaca.feed = "sip", but Alpaca refuses this account recent SIP '
                    f'data (HTTP 403 "{RECENT_SIP_REFUSED}": the Free plan has SIP only 15 '
                    'minutes late): set exchange.alpaca.feed = "iex", or subscribe to a plan '
                    "with real-time SIP (Algo Trader Plus)"
                ) from error

    async def refresh_markets(self, symbols: Sequence[str]) -> None:
        """The asset list is read again once a day (`AlpacaExchange.load_markets`), and at
        once when a symbol is missing from it (it may have been listed since)."""
        if any(s not in (self.alpaca.markets or {}) for s in symbols):
            await self._call("reload assets", self.alpaca.reload_assets)
        await super().refresh_markets(symbols)

    async def _check_sessions(self, symbols: Sequence[str]) -> None:
        """Stocks need their exchange's calendar, and its sessions must be Alpaca's."""
        stocks = [s for s in symbols if self.alpaca.is_stock(s)]
        continuous = [s for s in stocks if canonical_name(self._calendars.get(s, "")
                                                          or CONTINUOUS) == CONTINUOUS]  # fmt: skip
        if continuous:
            raise SymbolsRefused(
                f"{', '.join(continuous)}: US stock(s) at Alpaca need their exchange's trading "
                f'calendar, e.g. market.calendars = {{"{continuous[0]}" = "XNYS"}}'
            )
        if not stocks:
            return
        first = self._clock.now().astimezone(NEW_YORK).date()
        last = first + SESSIONS_CHECKED
        theirs = await self._call(
            "calendar", lambda: self.alpaca.calendar(first.isoformat(), last.isoformat())
        )
        alpaca_days = {(str(d["date"]), str(d["open"]), str(d["close"])) for d in theirs}
        for name in sorted({self._calendars[s] for s in stocks}):
            span = (to_epoch_ms(self._clock.now() - timedelta(days=1)),
                    to_epoch_ms(self._clock.now() + SESSIONS_CHECKED * 2))  # fmt: skip
            ours = set()
            for opened, closed in build_calendar(name, *span).intervals_ms.tolist():
                day, open_at = _local(opened)
                if first.isoformat() <= day <= last.isoformat():
                    ours.add((day, open_at, _local(closed)[1]))
            if ours != alpaca_days:
                differ = sorted(ours ^ alpaca_days)[0]
                raise SymbolsRefused(
                    f"calendar {name} and Alpaca's calendar disagree about {differ[0]} "
                    f"(ours and Alpaca's sessions: {sorted(ours)[:1]} / "
                    f"{sorted(alpaca_days)[:1]}): update exchange_calendars, or name the "
                    "calendar of the exchange Alpaca trades the stock on"
                )


def _local(ms: int) -> tuple[str, str]:
    local = from_epoch_ms(ms).astimezone(NEW_YORK)
    return local.date().isoformat(), local.strftime("%H:%M")
