"""The kill run: the daemon in live mode (`trader run`, broker.mode = live) against
`trader sandbox`, killed with SIGKILL at random points, 30 times: during start-up and
reconciliation, and mid-tick with orders recorded, sent, resting and filling. The venue keeps
trading while the daemon is down (resting orders fill); every restart reconciles first.

After each kill the ledger is consistent (positions and cash equal its fills). At the end the
daemon stops cleanly, the market is paused, `trader reconcile` books what happened since, and
the ledger equals the venue's account: its cash and positions are the balances, its fills are
exactly the venue's trades, no client order id reached the venue twice, and no
reconciliation on the way found anything it could not explain.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sqlite3
import subprocess
import time
import urllib.request
from decimal import Decimal
from pathlib import Path

import pytest

from tests.integration.conftest import TRADER, clean_env
from tests.integration.test_engine_crash import ticks_booked, wait_for_ticks
from tests.recorded import SOLUSDT_1H
from trader.ledger import Database
from trader.ledger.trading import TradingLedger

pytestmark = pytest.mark.integration
KILLS = 30
KEY, SECRET = "kill-run-key", "kill-run-secret-0123456789abcdef"


def start_sandbox(tmp: Path) -> tuple[subprocess.Popen[bytes], dict]:
    ready = tmp / "sandbox.json"
    data = SOLUSDT_1H
    process = subprocess.Popen(
        [TRADER, "sandbox", "--data", str(data), str(data), "--symbol", "SOL/USDT",
         "--symbol", "BTC/USDT", "--port", "0", "--warmup", "200", "--api-key", KEY,
         "--api-secret", SECRET, "--ready-file", str(ready), "--log-level", "ERROR"],
        cwd=tmp, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "the sandbox did not start"
        time.sleep(0.05)
    return process, json.loads(ready.read_text())


def daemon_env(tmp: Path, sandbox: dict) -> dict[str, str]:
    secrets = tmp / "secrets"
    secrets.mkdir(exist_ok=True)
    (secrets / "TRADER_EXCHANGE__API_KEY").write_text(KEY)
    (secrets / "TRADER_EXCHANGE__API_SECRET").write_text(SECRET)
    return clean_env(
        TRADER_SECRETS_DIR=str(secrets),
        TRADER_EXCHANGE__API_BASE_URL=sandbox["base_url"],
        TRADER_EXCHANGE__TIMEOUT_S="2",
        TRADER_MARKET__SYMBOLS="SOL/USDT,BTC/USDT",
        TRADER_MARKET__TIMEFRAME="1s",
        TRADER_MARKET__CONTEXT_BARS="32",
        TRADER_BROKER__MODE="live",
        TRADER_BROKER__LIVE_CONFIRMATION="true",
        TRADER_BROKER__RECV_WINDOW_MS="1000",
        TRADER_BROKER__LOCK_DIR=str(tmp / "locks"),
        TRADER_LEDGER__PATH=str(tmp / "ledger.sqlite3"),
        TRADER_FORECAST__MODEL="baseline",
        TRADER_FORECAST__BASELINE_LOOKBACK="32",
        TRADER_FORECAST__HORIZON="4",
        TRADER_STRATEGY__NAME="maxdiff",
        TRADER_STRATEGY__PER_SYMBOL='{"BTC/USDT": "simple"}',
        TRADER_STRATEGY__POSITION_FRACTION="0.05",
        TRADER_RISK__MAX_ORDERS_PER_MINUTE="10000",
        TRADER_RISK__MIN_EDGE_BPS="0",
        TRADER_RISK__MAX_DAILY_LOSS="0.9",
        TRADER_RISK__MAX_DRAWDOWN="0.9",
        TRADER_METRICS__PORT="0",
        TRADER_SCHEDULE__SETTLE_DELAY_S="0.3",
        TRADER_SCHEDULE__RECONCILE_INTERVAL_S="3",
    )


def emulator(sandbox: dict, path: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(  # noqa: S310 - loopback, the test's own sandbox
        sandbox["base_url"] + path, data=data, method="POST" if data else "GET"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback, the test's own sandbox
        return json.loads(answer.read())


async def ledger_state(ledger: Path):
    database = await Database.open(ledger)
    try:
        return await TradingLedger(database).load()  # raises on an inconsistent ledger
    finally:
        await database.close()


@pytest.mark.timeout(900)  # 30 daemon start-ups: slow on a busy machine
def test_sigkill_in_live_mode_and_reconciliation_books_what_happened(tmp_path):
    rng = random.Random(20261124)  # noqa: S311 - a reproducible kill schedule
    sandbox, ready = start_sandbox(tmp_path)
    env = daemon_env(tmp_path, ready)
    ledger = tmp_path / "ledger.sqlite3"
    command = [TRADER, "run", "--log-level", "WARNING", "--log-format", "json"]
    seen = [0]
    try:
        for _ in range(KILLS):
            with (tmp_path / f"daemon{len(seen)}.log").open("w") as log:  # kept for a post-mortem
                daemon = subprocess.Popen(
                    command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=log
                )
            if rng.random() < 0.3:
                time.sleep(rng.uniform(0.3, 3.0))  # start-up: imports, locks, reconciliation
            else:
                wait_for_ticks(ledger, seen[-1] + rng.randint(1, 2), daemon)
                time.sleep(rng.uniform(0, 0.9))  # somewhere inside the next tick
            assert daemon.poll() is None, "the daemon stopped by itself before the kill"
            daemon.send_signal(signal.SIGKILL)
            daemon.wait()
            asyncio.run(ledger_state(ledger)) if ledger.exists() else None
            seen.append(ticks_booked(ledger))
        # A last, clean run; then the market stands still while the ledger catches up.
        daemon = subprocess.Popen(
            command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        wait_for_ticks(ledger, seen[-1] + 2, daemon)
        daemon.send_signal(signal.SIGTERM)
        _, errors = daemon.communicate(timeout=60)
        assert daemon.returncode == 0, errors.decode()[-3000:]
        emulator(ready, "/__emulator__/clock", {"paused": True})
        reconcile = subprocess.run(
            [TRADER, "reconcile", "--json", "--log-level", "ERROR"], cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        account = emulator(ready, "/__emulator__/account")[KEY]
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)

    assert reconcile.returncode == 0, reconcile.stdout + reconcile.stderr
    assert json.loads(reconcile.stdout)["ok"]
    state = asyncio.run(ledger_state(ledger))
    assert seen[-1] > 10, "the daemon ticked between the kills"
    assert len(set(seen)) > KILLS // 3, "most kills came after some progress"
    balances = {asset: Decimal(b["total"]) for asset, b in account["balances"].items()}
    trades = {f"{t['symbol']}-{t['id']}": t for t in account["trades"]}
    assert len(trades) > 20, "the run traded: there was something to lose"
    # The ledger equals the venue's account.
    assert state.portfolio.cash == balances["USDT"]
    assert state.portfolio.amount("SOL/USDT") == balances["SOL"]
    assert state.portfolio.amount("BTC/USDT") == balances["BTC"]
    with sqlite3.connect(ledger) as c:
        fills = {row[0]: row for row in c.execute("SELECT fill_id, amount, price FROM fills")}
        cids = {row[0] for row in c.execute("SELECT client_order_id FROM orders")}
        verdicts = c.execute("SELECT ok, summary FROM reconciliations").fetchall()
        halted = c.execute("SELECT state, reason FROM trading_state").fetchone()
    # Every venue trade is a fill in the ledger, and nothing else is.
    assert set(fills) == set(trades)
    for fill_id, trade in trades.items():
        assert Decimal(fills[fill_id][1]) == Decimal(trade["qty"])
        assert Decimal(fills[fill_id][2]) == Decimal(trade["price"])
    # No client order id reached the venue twice, and every one is the ledger's.
    per_id: dict[str, int] = {}
    for order in account["orders"]:
        per_id[order["clientOrderId"]] = per_id.get(order["clientOrderId"], 0) + 1
    assert max(per_id.values()) == 1
    assert set(per_id) <= cids
    # Every restart reconciled, and nothing was ever unexplained.
    assert len(verdicts) >= KILLS // 2
    assert all(ok == 1 for ok, _summary in verdicts), [s for ok, s in verdicts if not ok]
    assert halted[0] != "halted", halted
