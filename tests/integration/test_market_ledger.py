"""The rolling window survives a restart in the ledger (real SQLite): no history refetch."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.integration.emulated import ccxt_feed, recorded_bars, venue
from trader.config.market_settings import MarketSettings
from trader.domain import Timeframe
from trader.emulator import EmulatorServer
from trader.ledger import BarStore, Database
from trader.ledger.database import LedgerError
from trader.ledger.migrations import MIGRATIONS
from trader.market.step import MarketDataStep

pytestmark = pytest.mark.integration
TF = Timeframe("1h")


async def test_the_ledger_opens_in_wal_mode_at_the_latest_schema(tmp_path):
    path = tmp_path / "state" / "ledger.sqlite3"
    database = await Database.open(path)
    mode = await database.run(lambda c: c.execute("PRAGMA journal_mode").fetchone()[0])
    version = await database.run(lambda c: c.execute("PRAGMA user_version").fetchone()[0])
    await database.close()
    assert (mode, version) == ("wal", len(MIGRATIONS))
    reopened = await Database.open(path)  # migrating again is a no-op
    await reopened.close()


async def test_a_ledger_of_schema_5_keeps_its_orders_and_loses_the_open_orders_index(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    with sqlite3.connect(path) as connection:
        connection.executescript("".join(MIGRATIONS[:5]))
        connection.execute(
            "INSERT INTO orders VALUES ('c1', 'simple', 'SOL/USDT', 'buy', 'limit', '1', '20', "
            "'2024-01-01T00:00:00+00:00', NULL, 'open', '0', NULL, '2024-01-01T00:00:00+00:00')"
        )
        connection.execute("PRAGMA user_version = 5")
    database = await Database.open(path)
    indexes = await database.run(
        lambda c: c.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'orders'").fetchall()
    )
    orders = await database.run(lambda c: c.execute("SELECT * FROM orders").fetchall())
    await database.close()
    assert ("orders_open",) not in indexes
    assert [order[0] for order in orders] == ["c1"]


async def test_a_ledger_from_a_newer_trader_is_refused(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    with sqlite3.connect(path) as connection:
        connection.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    with pytest.raises(LedgerError, match="newer than this trader"):
        await Database.open(path)


async def test_bars_round_trip_exactly_and_only_the_newest_are_kept(tmp_path):
    bars = recorded_bars(300)
    database = await Database.open(tmp_path / "ledger.sqlite3")
    store = BarStore(database, keep=100)
    await store.save(bars[:150])
    await store.save(bars[150:300])
    loaded = await store.load("SOL/USDT", TF, 1000)
    count = await database.run(lambda c: c.execute("SELECT count(*) FROM bars").fetchone()[0])
    await database.close()
    assert count == 100
    assert loaded == bars[200:300]  # every float exactly as it was


async def test_a_corrupted_stored_row_ends_the_window_there(tmp_path):
    bars = recorded_bars(50)
    database = await Database.open(tmp_path / "ledger.sqlite3")
    store = BarStore(database, keep=100)
    await store.save(bars)
    bad_ms = int(bars[39].start.timestamp() * 1000)
    await database.run(
        lambda c: c.execute("UPDATE bars SET low = -1 WHERE start_ms = ?", (bad_ms,))
    )
    loaded = await store.load("SOL/USDT", TF, 100)
    await database.close()
    assert loaded == bars[40:]


def klines_since(requests: list[str]) -> list[int]:
    starts = []
    for request in requests:
        parts = urlsplit(request)
        if parts.path == "/api/v3/klines":
            starts.append(int(parse_qs(parts.query)["startTime"][0]))
    return starts


async def test_after_a_restart_the_window_comes_from_the_ledger_not_the_exchange(tmp_path):
    v = venue()
    settings = MarketSettings(symbols=["SOL/USDT"], context_bars=128)
    path = tmp_path / "ledger.sqlite3"
    before: tuple = ()
    async with EmulatorServer(v.market) as server:
        for run in range(2):
            database = await Database.open(path)
            feed = ccxt_feed(server.base_url, v.clock)
            step = MarketDataStep(feed, settings, store=BarStore(database, keep=256))
            try:
                await step.start(v.clock.now())
                if run == 1:
                    assert step.windows["SOL/USDT"].snapshot() == before
                    server.requests.clear()
                for tick in range(3):
                    v.at_bar(600 + 3 * run + tick)
                    data = await step.run(v.clock.now())
                    assert set(data.ready) == {"SOL/USDT"}
                before = step.windows["SOL/USDT"].snapshot()
            finally:
                await feed.close()
                await database.close()
    # After the restart each fetch asks only for what started after the newest bar judged:
    # the one bar that closed since.
    expected = [int(b.start.timestamp() * 1000) + 1 for b in v.bars["SOL/USDT"][601:604]]
    assert klines_since(server.requests) == expected
    assert [b.start for b in before] == [b.start for b in v.bars["SOL/USDT"][605 - 128 : 605]]


async def test_a_window_too_old_to_continue_is_fetched_afresh(tmp_path):
    v = venue()
    settings = MarketSettings(symbols=["SOL/USDT"], context_bars=64)
    database = await Database.open(tmp_path / "ledger.sqlite3")
    store = BarStore(database, keep=128)
    await store.save(v.bars["SOL/USDT"][100:200])
    async with EmulatorServer(v.market) as server:
        feed = ccxt_feed(server.base_url, v.clock)
        step = MarketDataStep(feed, settings, store=store)
        try:
            await step.start(v.clock.now())
            assert len(step.windows["SOL/USDT"]) == 0
            data = await step.run(v.clock.now())
        finally:
            await feed.close()
            await database.close()
    bars = data.ready["SOL/USDT"].bars
    assert bars[-1].end == v.bars["SOL/USDT"][600].start
    assert bars[-1].end > v.clock.now() - timedelta(hours=1)
