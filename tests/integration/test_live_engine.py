"""The engine in live mode, in process: the broker chosen by broker.mode, the capital cap,
start-up reconciliation before any order, booking the venue's fills, and trading halted by
what reconciliation cannot explain or by keys the venue refuses."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from decimal import Decimal

import pytest

from tests.integration.emulated import FAST_RETRY, venue
from tests.integration.live_setup import KEY, SECRET
from trader.broker.live.broker import LiveBroker
from trader.config.schema import Settings
from trader.emulator import EmulatorServer
from trader.emulator.venue import Venue as TradingVenue
from trader.forecast import BaselineForecaster
from trader.ledger import Database
from trader.market.ccxt_feed import CcxtMarketData, create_exchange
from trader.risk import TradingState
from trader.runner import build_engine

pytestmark = pytest.mark.integration


def settings(tmp_path, base_url: str) -> Settings:
    return Settings(
        exchange={"api_key": KEY, "api_secret": SECRET, "api_base_url": base_url,
                  "timeout_s": 2},
        market={"symbols": ["SOL/USDT"], "context_bars": 32},
        forecast={"model": "baseline", "baseline_lookback": 32},
        strategy={"name": "simple", "position_fraction": 0.5},
        risk={"min_edge_bps": 0, "max_orders_per_minute": 1000},
        broker={"mode": "live", "live_confirmation": True, "capital_share": 0.5,
                "lock_dir": tmp_path / "locks", "recv_window_ms": 1000},
        ledger={"path": tmp_path / "ledger.sqlite3"},
    )  # fmt: skip


async def started(tmp_path):
    market = venue(start_index=700)
    trading = TradingVenue(market.market)
    trading.open_account(KEY, {"USDT": Decimal(10_000), "SOL": Decimal(0)})
    server = EmulatorServer(market.market, venue=trading, secrets={KEY: SECRET})
    await server.start()
    config = settings(tmp_path, server.base_url)
    exchange = create_exchange(config.exchange)
    exchange.enableRateLimit = False
    feed = CcxtMarketData(exchange, market.clock, retry=FAST_RETRY)
    database = await Database.open(config.ledger.path)
    engine = await build_engine(
        config, feed, database, market.clock.now(), forecasters=[BaselineForecaster(32)]
    )
    return market, trading, server, feed, database, engine


async def test_live_trading_books_the_venues_fills_within_its_capital(tmp_path):
    market, trading, server, feed, database, engine = await started(tmp_path)
    try:
        assert isinstance(engine.broker, LiveBroker)
        assert engine.portfolio.cash == Decimal(5000)  # half the account, as configured
        # Nothing is sent before a reconciliation has completed.
        first = await engine.tick(market.clock.now())
        assert first.orders == []
        assert {v.rule for _s, v in first.refusals} <= {"unreconciled"}
        report = await engine.reconcile(market.clock.now())
        assert report.ok, report.text
        fills = []
        for _ in range(11):
            market.clock.advance_to(market.clock.now() + timedelta(hours=1))
            fills += (await engine.tick(market.clock.now())).fills
        assert fills, "the strategy traded"
        assert all(f.fee_currency in {"SOL", "USDT"} for f in fills)
        later = await engine.reconcile(market.clock.now())
        account = trading.accounts[KEY]
        balances = {a: b.total for a, b in account.balances.items()}
    finally:
        engine.close()
        await feed.close()
        await database.close()
        await server.stop()
    assert later.ok, later.text
    assert later.executions == ()
    # The venue's account moved exactly as the ledger's did.
    assert balances["USDT"] - 10_000 == engine.portfolio.cash - 5000
    assert balances["SOL"] == engine.portfolio.amount("SOL/USDT")
    assert {f"SOLUSDT-{t.trade_id}" for t in account.trades} == {f.fill_id for f in fills}


async def test_what_reconciliation_cannot_explain_halts_trading(tmp_path):
    market, _, server, feed, database, engine = await started(tmp_path)
    try:
        assert (await engine.reconcile(market.clock.now())).ok
        # Someone else buys on the same account.
        await feed.exchange.create_order("SOL/USDT", "market", "buy", 5, None)
        report = await engine.reconcile(market.clock.now())
        market.clock.advance_to(market.clock.now() + timedelta(hours=1))
        tick = await engine.tick(market.clock.now())
    finally:
        engine.close()
        await feed.close()
        await database.close()
        await server.stop()
    assert not report.ok
    assert engine.risk.state is TradingState.HALTED
    assert engine.risk.status.reason.startswith("reconciliation: ")
    assert tick.orders == []
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as c:
        assert c.execute("SELECT state FROM trading_state").fetchone() == ("halted",)
        assert c.execute("SELECT ok FROM reconciliations ORDER BY id").fetchall() == [(1,), (0,)]


async def test_keys_refused_in_a_tick_halt_trading_and_the_tick_books_it(tmp_path):
    market, _, server, feed, database, engine = await started(tmp_path)
    try:
        assert (await engine.reconcile(market.clock.now())).ok
        server.api.signed.secrets[KEY] = "rotated"  # the key was revoked at the venue
        halts = []
        for _ in range(6):
            market.clock.advance_to(market.clock.now() + timedelta(hours=1))
            report = await engine.tick(market.clock.now())
            halts.append(engine.risk.state)
            if engine.risk.state is TradingState.HALTED:
                break
    finally:
        engine.close()
        await feed.close()
        await database.close()
        await server.stop()
    assert halts[-1] is TradingState.HALTED
    assert "refused our credentials" in engine.risk.status.reason
    assert report.status is not None
    assert report.status.state is TradingState.HALTED
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as c:
        state = c.execute("SELECT state, reason FROM trading_state").fetchone()
        events = c.execute("SELECT state FROM trading_state_events").fetchall()
    assert state[0] == "halted"
    assert SECRET not in state[1]
    assert ("halted",) in events
