"""`trader run` live (paper broker) on the wall clock against the exchange emulator through the
real ccxt client: one-second bars, so ticks fall at each second's close plus the settle delay
within the test, the quote poll reads real (emulated) books, and /readyz says ready to trade."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.integration.daemon import metric, metrics_port, running, stop, ticks
from tests.integration.emulated import SECOND, live_env, walk
from tests.integration.loopback import http_get
from trader.emulator import EmulatedMarket, EmulatorServer, Instrument

pytestmark = pytest.mark.integration


async def test_live_ticks_fall_at_each_bar_close_plus_settle_and_it_is_ready_to_trade(
    cli, tmp_path
):
    start = SECOND.floor(datetime.now(UTC)) - timedelta(seconds=120)
    market = EmulatedMarket(lambda: datetime.now(UTC))
    for n, (symbol, price) in enumerate((("SOL/USDT", 150.0), ("BTC/USDT", 60_000.0))):
        market.add_listing(Instrument(symbol), walk(symbol, start, 600, price, n))
    async with EmulatorServer(market) as server:
        env = live_env(
            server.base_url,
            tmp_path / "ledger.sqlite3",
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


def symbol_skips(ledger: Path, symbol: str) -> list[str | None]:
    """Per booked tick, why `symbol` skipped it (None: it was ready)."""
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True, timeout=5) as c:
        rows = c.execute("SELECT skipped FROM ticks ORDER BY at").fetchall()
    return [json.loads(skips).get(symbol) for (skips,) in rows]


async def test_a_candle_the_exchange_never_publishes_is_counted_and_the_symbol_trades_on(
    cli, tmp_path
):
    # gap_policy skip; bridge (trading at once) is the data step's tests' (test_step_gaps).
    policy = "skip"
    now = SECOND.floor(datetime.now(UTC))
    start = now - timedelta(seconds=120)
    dropped = now + timedelta(seconds=6)  # a bar a few ticks into the run
    market = EmulatedMarket(lambda: datetime.now(UTC))
    sol = [b for b in walk("SOL/USDT", start, 600, 150.0, 1) if b.start != dropped]
    market.add_listing(Instrument("SOL/USDT"), sol)
    market.add_listing(Instrument("BTC/USDT"), walk("BTC/USDT", start, 600, 60_000.0, 2))
    ledger = tmp_path / "ledger.sqlite3"
    async with EmulatorServer(market) as server:
        env = live_env(
            server.base_url,
            ledger,
            TRADER_MARKET__GAP_POLICY=policy,
            TRADER_MARKET__MIN_CONTIGUOUS_BARS="4",
        )
        details: list[str] = []
        with running(cli.start("run", env=env)) as daemon:
            port = await asyncio.to_thread(metrics_port, daemon)
            for _ in range(400):  # what /readyz says while it happens
                _, body = await asyncio.to_thread(http_get, f"http://127.0.0.1:{port}/readyz")
                details.append(json.loads(body)["checks"].get("data", {}).get("detail", ""))
                booked = [datetime.fromisoformat(t) for t in ticks(ledger)]
                if booked and booked[-1] > dropped + timedelta(seconds=8):
                    break
                await asyncio.sleep(0.1)
            missing = await asyncio.to_thread(
                metric, port, "trader_bars_missing_total", symbol="SOL/USDT"
            )
            contiguous = await asyncio.to_thread(
                metric, port, "trader_window_contiguous_bars", symbol="SOL/USDT"
            )
            assert await asyncio.to_thread(stop, daemon) == 0
    assert missing == 1
    assert contiguous >= 4
    skips = [s for s in symbol_skips(ledger, "SOL/USDT") if s is not None]
    assert set(symbol_skips(ledger, "BTC/USDT")) == {None}  # the other symbol never noticed
    # The tick the candle should have closed at (stale bars), then up to 3 more until 4 bars
    # are in a row. On a busy machine ticks run late and coalesce, so some of these booked
    # ticks may be one: the order and the reasons are fixed, not their count.
    assert skips[-1] == "gap"
    assert skips == sorted(skips, key=["stale_bars", "gap"].index)
    assert 1 <= skips.count("gap") <= 3
    assert any(re.match(r"SOL/USDT: gap: [1-3] of 4 bars in a row", d) for d in details)
    assert symbol_skips(ledger, "SOL/USDT")[-1] is None  # trading again
    assert "bars missing" in [x["event"] for x in daemon.lines]
