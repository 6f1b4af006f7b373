"""An emulated Binance USDⓈ-M account for tests that drive ccxt's real `binanceusdm` client:
hourly last-price bars and a separate hourly mark series per symbol (each set by the test), a
recorded funding series, and a funded USDT wallet."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import ccxt.async_support as ccxt

from trader.clock import SimulatedClock
from trader.domain import Bar, Timeframe
from trader.emulator.faults import FaultPlan
from trader.emulator.futures import FuturesApi, FuturesServer
from trader.emulator.futures_account import FuturesAccount
from trader.emulator.futures_market import FundingEvent, PerpListing, PerpMarket
from trader.emulator.futures_orders import FuturesVenue
from trader.emulator.market import EmulatedMarket, Instrument
from trader.emulator.venue import Fees
from trader.market.ccxt_feed import point_at

KEY, SECRET = "futures-key-0123456789", "futures-secret-abcdefghijklmnopqrstuvwxyz"
HOUR = Timeframe("1h")
START = datetime(2024, 3, 1, tzinfo=UTC)
BARS = 48
MAKER, TAKER = Decimal("0.0002"), Decimal("0.0005")
ETH, SOL = "ETH/USDT:USDT", "SOL/USDT:USDT"  # ccxt's unified perp symbols


def at(hours: float, seconds: float = 5) -> datetime:
    return START + timedelta(hours=hours, seconds=seconds)


def flat(symbol: str, price: float, spread: float) -> list[Bar]:
    return [
        Bar(symbol, HOUR, START + n * HOUR.duration, price, price + spread, price - spread,
            price, 1000.0)
        for n in range(BARS)
    ]  # fmt: skip


def with_bar(bars: list[Bar], hour: int, low: float, high: float, close: float) -> list[Bar]:
    """`bars` with the bar opening at `hour` replaced (open as before)."""
    out = list(bars)
    old = out[hour]
    out[hour] = Bar(old.symbol, HOUR, old.start, old.open, high, low, close, old.volume)
    return out


@dataclass
class PerpSpec:
    """One listed perp: its instrument, last-price bars, mark bars and funding series."""

    instrument: Instrument
    last: list[Bar]
    mark: list[Bar]
    funding: list[FundingEvent] = field(default_factory=list)


def spec(
    base: str, price: float = 100.0, min_notional: str = "20", funding: Sequence[FundingEvent] = ()
) -> PerpSpec:
    symbol = f"{base}/USDT"
    return PerpSpec(
        Instrument(symbol, min_notional=Decimal(min_notional)),
        flat(symbol, price, 0.5),
        flat(symbol, price, 0.2),
        list(funding),
    )


@dataclass
class Perps:
    clock: SimulatedClock
    venue: FuturesVenue
    api: FuturesApi
    account: FuturesAccount
    exchange: ccxt.binanceusdm
    base_url: str

    def advance(self, hours: float, seconds: float = 5) -> None:
        self.clock.advance_to(at(hours, seconds))


@asynccontextmanager
async def perps(
    *specs: PerpSpec,
    wallet: Decimal = Decimal(1000),
    liquidation_fee: Decimal = Decimal("0.005"),
    start_hour: float = 10,
    faults: FaultPlan | None = None,
    api_class: type[FuturesApi] = FuturesApi,  # QuotedFuturesApi: with the book's routes
) -> AsyncIterator[Perps]:
    clock = SimulatedClock(at(start_hour))
    market = EmulatedMarket(clock.now)
    perp_market = PerpMarket(market)
    for s in specs or (spec("ETH"),):
        perp_market.list_perp(PerpListing(s.instrument, s.mark, s.funding), s.last)
    venue = FuturesVenue(perp_market, Fees(MAKER, TAKER), liquidation_fee=liquidation_fee)
    account = venue.open_account(KEY, wallet)
    api = api_class(venue, {KEY: SECRET}, faults or FaultPlan())
    async with FuturesServer(api) as server:
        exchange = ccxt.binanceusdm({"apiKey": KEY, "secret": SECRET, "timeout": 3000})
        point_at(exchange, server.base_url)
        try:
            await exchange.load_markets()
            yield Perps(clock, venue, api, account, exchange, server.base_url)
        finally:
            await exchange.close()
