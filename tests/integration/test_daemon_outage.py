"""An exchange outage under a running daemon, as its metrics tell it: the emulator stops for a
few seconds of one-second bars, and the daemon must say so (quote age growing, the exchange
unreachable, ticks degraded while the last ok tick stays behind), then recover once it is back.
The reported problem: quote age stayed 0, ticks kept counting ok and nothing looked wrong."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.integration.daemon import metric, metrics_port, running, stop
from tests.integration.emulated import SECOND, live_env, walk
from trader.emulator import EmulatedMarket, EmulatorServer, Instrument

pytestmark = pytest.mark.integration

SYMBOL = "BTC/USDT"


async def read(port: int, name: str, **labels: str) -> float:
    return await asyncio.to_thread(metric, port, name, **labels)


async def until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(150):  # 30 s
        if await condition():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


async def test_an_outage_shows_in_the_metrics_and_they_recover(cli, tmp_path):
    start = SECOND.floor(datetime.now(UTC)) - timedelta(seconds=120)
    market = EmulatedMarket(lambda: datetime.now(UTC))
    market.add_listing(Instrument(SYMBOL), walk(SYMBOL, start, 900, 60_000.0, 0))
    server = EmulatorServer(market)
    await server.start()
    try:
        env = live_env(
            server.base_url,
            tmp_path / "ledger.sqlite3",
            TRADER_MARKET__SYMBOLS=SYMBOL,
            TRADER_SCHEDULE__QUOTE_POLL_INTERVAL_S="0.5",
            TRADER_EXCHANGE__RETRY_ATTEMPTS="1",
        )
        with running(cli.start("run", env=env)) as daemon:
            port = await asyncio.to_thread(metrics_port, daemon)
            await asyncio.to_thread(daemon.wait_for, "ready", 60)

            async def ok_ticks() -> float:
                return await read(port, "trader_ticks_total", outcome="ok")

            await until(lambda: _above(ok_ticks, 2), "ok ticks")
            assert await read(port, "trader_exchange_reachable") == 1
            assert await read(port, "trader_quote_age_seconds", symbol=SYMBOL) < 3

            await server.stop()  # the exchange goes away
            down_at = time.monotonic()
            ok_before = await ok_ticks()

            async def degraded() -> float:
                return await read(port, "trader_ticks_total", outcome="degraded")

            await until(lambda: _above(degraded, 2), "degraded ticks")
            await asyncio.sleep(max(0.0, 5 - (time.monotonic() - down_at)))
            assert await read(port, "trader_exchange_reachable") == 0
            age = await read(port, "trader_quote_age_seconds", symbol=SYMBOL)
            assert age > 4  # measured now, from the newest quote seen before the outage
            await asyncio.sleep(1)
            assert await read(port, "trader_quote_age_seconds", symbol=SYMBOL) > age
            assert await ok_ticks() <= ok_before + 1  # one may have been under way
            last = await read(port, "trader_last_tick_timestamp_seconds")
            last_ok = await read(port, "trader_last_ok_tick_timestamp_seconds")
            assert last - last_ok >= 3  # ticks run, but none trades every symbol

            back = EmulatorServer(market, port=server.port)  # the exchange comes back
            await back.start()
            try:

                async def fresh() -> bool:
                    reachable = await read(port, "trader_exchange_reachable")
                    age = await read(port, "trader_quote_age_seconds", symbol=SYMBOL)
                    return reachable == 1 and age < 3

                await until(fresh, "fresh quotes again")
                await until(lambda: _above(ok_ticks, ok_before + 1), "ok ticks again")
                assert await asyncio.to_thread(stop, daemon) == 0
            finally:
                await back.stop()
    finally:
        await server.stop()


async def _above(read_value, floor: float) -> bool:  # type: ignore[no-untyped-def]
    try:
        return await read_value() > floor
    except (OSError, AssertionError):
        return False
