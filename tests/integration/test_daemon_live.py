"""`trader run` live (paper broker) on the wall clock against the exchange emulator through the
real ccxt client: one-second bars, so ticks fall at each second's close plus the settle delay
within the test, the quote poll reads real (emulated) books, and /readyz says ready to trade."""

from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC, datetime, timedelta

import pytest

from tests.integration.conftest import clean_env
from tests.integration.daemon import metric, metrics_port, running, stop, ticks
from tests.integration.loopback import http_get
from trader.domain import Bar, Timeframe
from trader.emulator import EmulatedMarket, EmulatorServer, Instrument

pytestmark = pytest.mark.integration

SECOND = Timeframe("1s")


def walk(symbol: str, start: datetime, n: int, price: float, seed: int) -> list[Bar]:
    rng = random.Random(seed)  # noqa: S311 - prices for a test
    bars = []
    for i in range(n):
        change = price * rng.uniform(-0.002, 0.002)
        close = price + change
        high, low = max(price, close) * 1.0005, min(price, close) * 0.9995
        bars.append(Bar(symbol, SECOND, start + timedelta(seconds=i), price, high, low, close, 5.0))
        price = close
    return bars


async def test_live_ticks_fall_at_each_bar_close_plus_settle_and_it_is_ready_to_trade(
    cli, tmp_path
):
    start = SECOND.floor(datetime.now(UTC)) - timedelta(seconds=120)
    market = EmulatedMarket(lambda: datetime.now(UTC))
    for n, (symbol, price) in enumerate((("SOL/USDT", 150.0), ("BTC/USDT", 60_000.0))):
        market.add_listing(Instrument(symbol), walk(symbol, start, 600, price, n))
    async with EmulatorServer(market) as server:
        env = clean_env(
            TRADER_EXCHANGE__API_BASE_URL=server.base_url,
            TRADER_LEDGER__PATH=str(tmp_path / "ledger.sqlite3"),
            TRADER_METRICS__PORT="0",
            TRADER_FORECAST__MODEL="baseline",
            TRADER_FORECAST__BASELINE_LOOKBACK="16",
            TRADER_MARKET__CONTEXT_BARS="32",
            TRADER_MARKET__TIMEFRAME="1s",
            TRADER_SCHEDULE__SETTLE_DELAY_S="0.3",
            TRADER_SCHEDULE__QUOTE_POLL_INTERVAL_S="0.5",
        )
        with running(cli.start("run", env=env)) as daemon:
            port = await asyncio.to_thread(metrics_port, daemon)
            await asyncio.to_thread(daemon.wait_for, "ready", 60)
            ledger = tmp_path / "ledger.sqlite3"
            for _ in range(300):
                if len(ticks(ledger)) >= 4:
                    break
                await asyncio.sleep(0.1)
            status, body = await asyncio.to_thread(http_get, f"http://127.0.0.1:{port}/readyz")
            assert status == 200, body
            assert json.loads(body)["ready"] is True
            real = await asyncio.to_thread(
                metric, port, "trader_quote_source", symbol="BTC/USDT", source="real"
            )
            assert real == 1
            assert await asyncio.to_thread(metric, port, "trader_exchange_reachable") == 1
            assert await asyncio.to_thread(stop, daemon) == 0
    booked = [datetime.fromisoformat(t) for t in ticks(tmp_path / "ledger.sqlite3")]
    assert len(booked) >= 4
    # Each tick at a bar close plus the settle delay, one per second, none twice.
    assert {t.microsecond for t in booked} == {300_000}
    assert len(set(booked)) == len(booked)
    done = [x for x in daemon.lines if x["event"] == "tick done"]
    assert all(x["outcome"] == "ok" for x in done)
    assert all(x["lateness_s"] < 1.0 for x in done[1:])  # the first may catch up a close
