"""`trader reconcile`: the report on demand, its exit status, a mismatch left HALTED in the
ledger for the next daemon, and a dry run while a daemon holds the ledger."""

from __future__ import annotations

import asyncio
import sqlite3
from decimal import Decimal

import pytest

from tests.integration.conftest import TRADER, clean_env
from tests.integration.emulated import venue
from tests.integration.live_setup import KEY, SECRET
from trader.broker.safety import InstanceLocks, ledger_lock_path
from trader.config.market_settings import ExchangeSettings
from trader.emulator import EmulatorServer
from trader.emulator.venue import Venue as TradingVenue
from trader.ledger import Database
from trader.ledger.reconciliation import ReconciliationLedger
from trader.ledger.trading import TradingLedger
from trader.market.ccxt_feed import create_exchange

pytestmark = pytest.mark.integration


async def trader(*args: str, env: dict[str, str], cwd) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        TRADER, *args, env=env, cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_paper_ledger_reconciles_ok_and_a_missing_one_is_named(tmp_path):
    ledger = tmp_path / "paper.sqlite3"
    env = clean_env(TRADER_LEDGER__PATH=str(ledger), TRADER_LOG__LEVEL="ERROR")
    code, _out, err = await trader("reconcile", env=env, cwd=tmp_path)
    assert code == 78
    assert f"no ledger at {ledger}" in err
    database = await Database.open(ledger)
    await TradingLedger(database).open("USDT", Decimal(1000))
    await database.close()
    code, out, _err = await trader("reconcile", env=env, cwd=tmp_path)
    assert code == 0
    assert out.startswith("reconciliation with paper at ")
    assert ": ok;" in out


async def test_a_live_mismatch_exits_1_and_leaves_trading_halted(tmp_path):
    market = venue()
    trading = TradingVenue(market.market)
    trading.open_account(KEY, {"USDT": Decimal(10_000), "SOL": Decimal(0), "BTC": Decimal(0)})
    ledger = tmp_path / "live.sqlite3"
    async with EmulatorServer(market.market, venue=trading, secrets={KEY: SECRET}) as server:
        database = await Database.open(ledger)
        await ReconciliationLedger(database).set_baseline(
            {"USDT": Decimal(10_000), "SOL": Decimal(0), "BTC": Decimal(0)}, market.clock.now()
        )
        await TradingLedger(database).open("USDT", Decimal(10_000))
        await database.close()
        exchange = create_exchange(
            ExchangeSettings(api_key=KEY, api_secret=SECRET, api_base_url=server.base_url)
        )
        try:  # someone else trades on the account
            await exchange.create_order("SOL/USDT", "market", "buy", 3, None)
        finally:
            await exchange.close()
        secrets = tmp_path / "secrets"
        secrets.mkdir()
        (secrets / "TRADER_EXCHANGE__API_KEY").write_text(KEY)
        (secrets / "TRADER_EXCHANGE__API_SECRET").write_text(SECRET)
        env = clean_env(
            TRADER_LEDGER__PATH=str(ledger), TRADER_LOG__LEVEL="ERROR",
            TRADER_SECRETS_DIR=str(secrets), TRADER_EXCHANGE__API_BASE_URL=server.base_url,
            TRADER_BROKER__MODE="live", TRADER_BROKER__LIVE_CONFIRMATION="true",
            TRADER_BROKER__LOCK_DIR=str(tmp_path / "locks"),
        )  # fmt: skip
        # A daemon holds the ledger: only a dry run, nothing written.
        held = InstanceLocks()
        held.take(ledger_lock_path(ledger), "ledger", {"instance": "daemon", "pid": 1})
        try:
            dry = await trader("reconcile", env=env, cwd=tmp_path)
        finally:
            held.release()
        code, out, err = await trader("reconcile", env=env, cwd=tmp_path)
    assert dry[0] == 1
    assert "a dry run only" in dry[2]
    assert "dry run" in dry[1]
    assert code == 1, err
    assert "MISMATCH" in out.splitlines()[0]
    # (The venue's trade is two years before the wall clock's "recent": the balances catch it.)
    assert "PROBLEM: SOL: the venue holds 2.997, the ledger implies 0" in out
    assert SECRET not in out + err
    with sqlite3.connect(ledger) as c:
        state = c.execute("SELECT state, reason FROM trading_state").fetchone()
        verdicts = c.execute("SELECT ok FROM reconciliations").fetchall()
    assert state[0] == "halted"
    assert state[1].startswith("reconciliation: ")
    assert verdicts == [(0,)]  # the dry run recorded nothing
