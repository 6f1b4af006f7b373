"""The live broker on the real ccxt client, against the emulator's signed Binance endpoints:
an account funded with test money, on the recorded SOL/USDT path (and a scaled BTC/USDT)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from tests.integration.emulated import FAST_RETRY, Venue, venue
from trader.broker.live.broker import LiveBroker
from trader.config.market_settings import ExchangeSettings
from trader.config.trading_settings import BrokerSettings
from trader.domain import Bar, Instrument, Quote, QuoteSource, Side
from trader.emulator import EmulatorServer
from trader.emulator.venue import Fees
from trader.emulator.venue import Venue as TradingVenue
from trader.market.ccxt_feed import CcxtMarketData, create_exchange
from trader.market.retry import RetryPolicy

KEY, SECRET = "test-key-0123456789", "test-secret-abcdefghijklmnopqrstuvwxyz"
SYMBOLS = ("SOL/USDT", "BTC/USDT")


@dataclass
class Prices:
    """The replayed path: its clock, its real quotes, and prices it will trade through."""

    market: Venue

    @property
    def now(self) -> datetime:
        return self.market.clock.now()

    def quote(self, symbol: str = "SOL/USDT") -> Quote:
        book = self.market.market.top_of_book(symbol.replace("/", ""))
        assert book is not None
        return Quote(symbol, book[0], book[1], self.now, QuoteSource.REAL)

    def advance(self, bars: int = 1) -> list[Bar]:
        """Move the clock `bars` hours on; the bars that closed meanwhile."""
        before = self.now
        self.market.clock.advance_to(before + timedelta(hours=bars))
        return [
            b for series in self.market.bars.values() for b in series if before < b.end <= self.now
        ]

    def crossing_price(
        self, side: Side, step: Decimal, within: int = 6, symbol: str = "SOL/USDT"
    ) -> Decimal:
        """A limit that rests now and that the path trades through within `within` bars."""
        ahead = [b for b in self.market.bars[symbol] if b.start >= self.now][:within]
        quote = self.quote(symbol)
        if side is Side.BUY:
            low = Decimal(repr(min(b.low for b in ahead)))
            assert low < quote.bid - step, "the path does not fall here: pick another start"
            return (((low + quote.bid) / 2) / step).to_integral_value() * step
        high = Decimal(repr(max(b.high for b in ahead)))
        assert high > quote.ask + step, "the path does not rise here: pick another start"
        return (((high + quote.ask) / 2) / step).to_integral_value() * step


@dataclass
class Live:
    prices: Prices
    venue: TradingVenue  # accounts and matching
    server: EmulatorServer
    feed: CcxtMarketData
    broker: LiveBroker
    instruments: dict[str, Instrument]

    def balances(self) -> dict[str, Decimal]:
        account = self.venue.accounts[KEY]
        self.venue.sync(account)
        return {asset: b.total for asset, b in account.balances.items()}

    def orders_with(self, client_order_id: str) -> int:
        account = self.venue.accounts[KEY]
        return sum(1 for o in account.orders.values() if o.client_order_id == client_order_id)


def make_broker(
    exchange_settings: ExchangeSettings,
    base_url: str,
    market: Venue,
    pause_s: float = 0.5,
    **broker: object,
) -> tuple[CcxtMarketData, LiveBroker]:
    exchange = create_exchange(exchange_settings.model_copy(update={"api_base_url": base_url}))
    exchange.enableRateLimit = False  # the emulator needs no pacing; tests need speed
    feed = CcxtMarketData(exchange, market.clock, retry=FAST_RETRY)
    settings = BrokerSettings(**({"recv_window_ms": 1000} | broker))  # type: ignore[arg-type]
    fast = RetryPolicy(attempts=4, base_delay_s=0.01, max_delay_s=pause_s)
    return feed, LiveBroker(exchange, settings, {}, retry=fast)


@asynccontextmanager
async def live(
    *,
    cash: Decimal = Decimal(10_000),
    base: Decimal = Decimal(0),
    liquidity_share: Decimal = Decimal("0.1"),
    timeout_s: float = 0.5,
    start_index: int = 600,
    pause_s: float = 0.5,
    **broker: object,
) -> AsyncIterator[Live]:
    market = venue(start_index=start_index)
    trading = TradingVenue(market.market, Fees(), liquidity_share)
    trading.open_account(KEY, {"USDT": cash, "SOL": base, "BTC": base})
    server = EmulatorServer(market.market, venue=trading, secrets={KEY: SECRET})
    await server.start()
    settings = ExchangeSettings(api_key=KEY, api_secret=SECRET, timeout_s=timeout_s)
    feed, live_broker = make_broker(settings, server.base_url, market, pause_s, **broker)
    try:
        await feed.start(list(SYMBOLS))
        instruments = {s: feed.instrument(s) for s in SYMBOLS}
        live_broker.instruments = instruments
        yield Live(Prices(market), trading, server, feed, live_broker, instruments)
    finally:
        await feed.close()
        await server.stop()
