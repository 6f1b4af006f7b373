"""The live broker on Alpaca's official SDK (alpaca-py), pointed at the Alpaca emulator
through the SDK's `url_override`: an account funded with test money, on the recorded
SOL/USDT path (and a scaled BTC/USDT), listed as Alpaca crypto pairs."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from decimal import Decimal

from pydantic import SecretStr

from tests.integration.emulated import FAST_RETRY, venue
from tests.integration.live_setup import KEY, SECRET, SYMBOLS, Live, Prices
from trader.broker.live.broker import LiveBroker
from trader.config.alpaca_settings import AlpacaSettings
from trader.config.market_settings import ExchangeSettings
from trader.config.trading_settings import BrokerSettings
from trader.emulator import EmulatorServer
from trader.emulator.alpaca_fees import crypto_fees
from trader.emulator.venue import Venue as TradingVenue
from trader.market.alpaca.feed import AlpacaMarketData, alpaca_exchange
from trader.market.retry import RetryPolicy

__all__ = ["KEY", "SECRET", "alpaca_live", "alpaca_settings"]


def alpaca_settings(base_url: str, timeout_s: float = 0.5) -> ExchangeSettings:
    keys = AlpacaSettings(key_id=SecretStr(KEY), secret_key=SecretStr(SECRET))
    return ExchangeSettings(venue="alpaca", api_base_url=base_url, timeout_s=timeout_s, alpaca=keys)


@asynccontextmanager
async def alpaca_live(
    *,
    cash: Decimal = Decimal(10_000),
    liquidity_share: Decimal = Decimal("0.1"),
    timeout_s: float = 0.5,
    start_index: int = 600,
    pause_s: float = 0.5,
    monotonic: Callable[[], float] = time.monotonic,
    **broker: object,
) -> AsyncIterator[Live]:
    """`monotonic`: the live broker's clock of pauses and lost-order windows."""
    market = venue(start_index=start_index)
    # Alpaca's first crypto fee tier (alpaca_fees): the adapter's estimate of each fill's fee.
    trading = TradingVenue(market.market, crypto_fees(tier=1), liquidity_share,
                           unique_client_ids=True)  # fmt: skip
    # USDT-quoted pairs spend a USDT position; USD is the account's cash.
    trading.open_account(KEY, {"USD": Decimal(0), "USDT": cash, "SOL": Decimal(0),
                               "BTC": Decimal(0)})  # fmt: skip
    server = EmulatorServer(market.market, venue=trading, secrets={KEY: SECRET}, dialect="alpaca")
    await server.start()
    exchange = alpaca_exchange(alpaca_settings(server.base_url, timeout_s), market.clock)
    feed = AlpacaMarketData(exchange, market.clock, {}, retry=FAST_RETRY)
    settings = BrokerSettings(**({"recv_window_ms": 1000} | broker))  # type: ignore[arg-type]
    fast = RetryPolicy(attempts=4, base_delay_s=0.01, max_delay_s=pause_s)
    live_broker = LiveBroker(exchange, settings, {}, retry=fast, monotonic=monotonic)
    try:
        await feed.start(list(SYMBOLS))
        instruments = {s: feed.instrument(s) for s in SYMBOLS}
        live_broker.instruments = instruments
        yield Live(Prices(market), trading, server, feed, live_broker, instruments)
    finally:
        await feed.close()
        await server.stop()
