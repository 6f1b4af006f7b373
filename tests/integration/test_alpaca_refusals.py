"""Orders Alpaca would refuse are refused before they leave, end to end: the live broker on
Alpaca's SDK against the Alpaca emulator, over a week of New York sessions. A fraction of a
whole-share stock, a short of a stock Alpaca does not lend, a short of crypto, a stock order
while the market is closed, and the fourth day trade in five sessions of an account under
$25,000 each come back rejected with the reason in words, are logged with it, and are
counted as the daemon counts them (`trader_orders_total{status="rejected"}`); none reaches
the venue. A symbol Alpaca lists but does not trade stops the daemon at start-up (exit 78)
and says so."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo

import ccxt.async_support as ccxt
import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from tests.integration.alpaca_setup import KEY, SECRET, alpaca_settings
from tests.integration.conftest import clean_env
from tests.recorded import SOLUSDT_1H, XSHG_600977_5MIN
from trader.broker.live.broker import LiveBroker
from trader.clock import SimulatedClock
from trader.config.trading_settings import BrokerSettings
from trader.domain import Bar, Order, OrderStatus, OrderType, Quote, QuoteSource, Side, Timeframe
from trader.domain.execution import Execution
from trader.emulator import EmulatedMarket, EmulatorServer, Instrument
from trader.emulator.alpaca_sandbox import STOCK_FEES, _instrument
from trader.emulator.sandbox_replay import recorded_bars, restamped
from trader.emulator.sessions import Sessions
from trader.emulator.venue import Venue
from trader.engine.report import TickReport
from trader.exit_codes import EX_CONFIG
from trader.market.alpaca.feed import AlpacaMarketData, alpaca_exchange
from trader.market.replay import read_recording
from trader.market.retry import RetryPolicy
from trader.telemetry.metrics import Metrics

pytestmark = pytest.mark.integration
NEW_YORK = ZoneInfo("America/New_York")
MONDAY = datetime(2025, 3, 3, 10, 5, tzinfo=NEW_YORK)  # in the session
HOUR = Timeframe("1h")
STOCKS = ("AAPL/USD", "BRKA/USD", "GME/USD")  # fractionable; whole shares only; untradable
SYMBOLS = ("AAPL/USD", "BRKA/USD", "BTC/USD")


@dataclass
class Alpaca:
    clock: SimulatedClock
    venue: Venue
    server: EmulatorServer
    broker: LiveBroker
    feed: AlpacaMarketData
    errors: list[str]  # the market data's failed calls, by kind (as the metric counts them)
    legs: int = 0

    def order(self, symbol: str, side: Side, amount: str, limit: Decimal | None = None) -> Order:
        self.legs += 1
        return Order.create(
            strategy="refusals", symbol=symbol, side=side,
            type=OrderType.MARKET if limit is None else OrderType.LIMIT,
            amount=Decimal(amount), limit_price=limit, tick_time=self.clock.now(),
            leg=f"leg{self.legs}",
        )  # fmt: skip

    def quote(self, symbol: str) -> Quote:
        book = self.venue.market.top_of_book(symbol.replace("/", ""))
        assert book is not None
        return Quote(symbol, book[0], book[1], self.clock.now(), QuoteSource.REAL)

    async def submit(
        self, symbol: str, side: Side, amount: str, limit: Decimal | None = None
    ) -> Execution:
        order = self.order(symbol, side, amount, limit)
        return await self.broker.submit(order, self.quote(symbol), self.clock.now())

    def sent(self) -> int:
        """Orders that reached the venue (every POST /v2/orders)."""
        return sum(1 for r in self.server.requests if r == "/v2/orders")


def bars(path: Path, symbol: str, now: datetime, calendar: str = "continuous") -> list[Bar]:
    """The recording's bars as `symbol`'s hours, 100 of them closed by `now`."""
    return restamped(recorded_bars(read_recording(path, symbol)), HOUR, 100, now, calendar)


def listings(now: datetime, lendable: bool = False) -> list[tuple[Instrument, list[Bar]]]:
    """Three stocks on XNYS sessions (the recorded A-share's path) and a crypto pair;
    `lendable`: Alpaca lends AAPL (shortable, easy to borrow)."""
    whole = {"step_size": Decimal(1), "min_qty": Decimal(1), "min_notional": Decimal(1)}
    aapl = _instrument("AAPL/USD", stock=True)
    aapl = replace(aapl, shortable=lendable, easy_to_borrow=lendable)
    return [
        (aapl, bars(XSHG_600977_5MIN, "AAPL/USD", now, "XNYS")),
        (Instrument("BRKA/USD", **whole, asset_class="us_equity", fractionable=False),
         bars(XSHG_600977_5MIN, "BRKA/USD", now, "XNYS")),
        (Instrument("GME/USD", asset_class="us_equity", tradable=False),
         bars(XSHG_600977_5MIN, "GME/USD", now, "XNYS")),
        (_instrument("BTC/USD", stock=False), bars(SOLUSDT_1H, "BTC/USD", now)),
    ]  # fmt: skip


@asynccontextmanager
async def alpaca(
    *,
    account_type: Literal["margin", "cash"] = "margin",
    extended_hours: Sequence[str] = (),
    lendable: bool = False,
    monotonic: Callable[[], float] = time.monotonic,
) -> AsyncIterator[Alpaca]:
    """Alpaca's paper margin account by default; `extended_hours`: the setting's stocks;
    `lendable`: AAPL may be shorted; `monotonic`: the live broker's clock of lost-order
    windows."""
    clock = SimulatedClock(MONDAY)
    market = EmulatedMarket(clock.now)
    venue = Venue(market, unique_client_ids=True)
    for instrument, bars in listings(clock.now(), lendable):
        market.add_listing(instrument, bars)
        if instrument.asset_class == "us_equity":
            venue.fees_by_symbol[instrument.venue_id] = STOCK_FEES
    venue.open_account(KEY, {"USD": Decimal(10_000)})
    sessions = Sessions.of("XNYS", MONDAY - timedelta(days=60), MONDAY + timedelta(days=60))
    server = EmulatorServer(market, venue=venue, secrets={KEY: SECRET}, dialect="alpaca",
                            sessions=sessions, account_type=account_type)  # fmt: skip
    await server.start()
    settings = alpaca_settings(server.base_url, timeout_s=5)
    listed = settings.alpaca.model_copy(update={"extended_hours": list(extended_hours)})
    settings = settings.model_copy(update={"alpaca": listed})
    exchange = alpaca_exchange(settings, clock)
    calendars = {s: "XNYS" for s in SYMBOLS if s != "BTC/USD"}
    errors: list[str] = []
    feed = AlpacaMarketData(
        exchange, clock, calendars, retry=RetryPolicy(attempts=2), on_error=errors.append
    )
    try:
        await feed.start(list(SYMBOLS))
        instruments = {s: feed.instrument(s) for s in SYMBOLS}
        retry = RetryPolicy(attempts=2, base_delay_s=0.01)
        broker = LiveBroker(exchange, BrokerSettings(), instruments, retry=retry,
                            monotonic=monotonic)  # fmt: skip
        yield Alpaca(clock, venue, server, broker, feed, errors)
    finally:
        await feed.close()
        await server.stop()


def said(logs: list[dict], phrase: str) -> bool:
    return any(phrase in str(value) for event in logs for value in event.values())


async def test_orders_alpaca_would_refuse_never_leave_and_say_why():
    metrics = Metrics(CollectorRegistry(), list(SYMBOLS))
    with capture_logs() as logs:
        async with alpaca() as a:
            # Monday to Wednesday: the stock bought and sold in each session, three day trades.
            for day in range(3):
                a.clock.advance_to(MONDAY + timedelta(days=day))
                for side in (Side.BUY, Side.SELL):
                    done = await a.submit("AAPL/USD", side, "1")
                    assert done.order.status is OrderStatus.FILLED, done.reason
            a.clock.advance_to(MONDAY + timedelta(days=3))  # Thursday
            bought = await a.submit("AAPL/USD", Side.BUY, "1")
            assert bought.order.status is OrderStatus.FILLED, bought.reason
            sent = a.sent()
            cases = [
                (("AAPL/USD", Side.SELL, "1"), "fourth day trade in five sessions"),
                (("BRKA/USD", Side.BUY, "1.5"), "not on the market's grid of 1 (would send 1)"),
                (("AAPL/USD", Side.SELL, "5"), "AAPL/USD is not shortable at Alpaca"),
                (("BTC/USD", Side.SELL, "5"), "Alpaca does not short crypto"),
            ]
            refused = [(await a.submit(*order), why) for order, why in cases]
            # The adapter itself never rounds a fraction of a whole share away: it refuses it.
            with pytest.raises(ccxt.InvalidOrder, match="trades in whole shares only"):
                await a.broker.exchange.create_order("BRKA/USD", "market", "buy", 1.5)
            a.clock.advance_to(MONDAY + timedelta(days=3, hours=10))  # Thursday night
            refused.append(
                (await a.submit("AAPL/USD", Side.BUY, "1"), "market for AAPL/USD is closed")
            )
            assert a.sent() == sent, "a refused order reached the venue"
    for done, why in refused:
        assert done.order.status is OrderStatus.REJECTED
        assert why in str(done.reason), done.reason
        assert said(logs, why), f"not logged: {why}"
    metrics.observe_tick(TickReport(MONDAY, orders=[done.order for done, _ in refused]))
    rejected = {
        (symbol, side.value): metrics.registry.get_sample_value(
            "trader_orders_total", {"symbol": symbol, "side": side.value, "status": "rejected"}
        )
        for symbol in SYMBOLS for side in Side
    }  # fmt: skip
    assert rejected[("AAPL/USD", "sell")] == 2
    assert rejected[("AAPL/USD", "buy")] == rejected[("BRKA/USD", "buy")] == 1
    assert rejected[("BTC/USD", "sell")] == 1


async def test_a_symbol_alpaca_does_not_trade_stops_the_daemon_at_start_up(cli, tmp_path):
    async with alpaca() as a:
        env = clean_env(
            TRADER_EXCHANGE__VENUE="alpaca", ALP_KEY_ID=KEY, ALP_SECRET_KEY=SECRET,
            TRADER_EXCHANGE__API_BASE_URL=a.server.base_url, TRADER_BROKER__CURRENCY="USD",
            TRADER_MARKET__SYMBOLS="GME/USD,AAPL/USD", TRADER_MARKET__TIMEFRAME="1h",
            TRADER_MARKET__CALENDAR="XNYS", TRADER_FORECAST__MODEL="baseline",
            TRADER_METRICS__ENABLED="false", TRADER_LEDGER__PATH=str(tmp_path / "l.sqlite3"),
        )  # fmt: skip
        done = await asyncio.to_thread(cli.run, "run", "--log-format", "json", env=env)
    assert done.returncode == EX_CONFIG, done.stderr[-2000:]
    assert "alpaca lists but does not trade: GME/USD" in done.stderr
    assert "AAPL/USD" not in done.stderr.split("does not trade")[-1]
