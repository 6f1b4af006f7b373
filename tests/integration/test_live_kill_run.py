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
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from tests.integration.conftest import TRADER
from tests.integration.sandboxed import KEY, daemon_env, emulator, start_sandbox
from tests.integration.test_engine_crash import ticks_booked, wait_for_ticks
from trader.ledger import Database
from trader.ledger.trading import TradingLedger

pytestmark = pytest.mark.integration
KILLS = 30
SYMBOLS = {"binance": ("SOL/USDT", "BTC/USDT"), "alpaca": ("SOL/USD", "BTC/USD")}


async def ledger_state(ledger: Path):
    database = await Database.open(ledger)
    try:
        return await TradingLedger(database).load()  # raises on an inconsistent ledger
    finally:
        await database.close()


def venue_view(account: dict, venue: str) -> tuple[dict, dict, list[str]]:
    """The account as the ledger should have it, in each venue's words: balances by asset,
    trades by the ledger's fill id (market id and trade id), and every order's client id."""
    balances = {asset: Decimal(b["total"]) for asset, b in account["balances"].items()}
    if venue == "alpaca":  # activity ids with their dashes taken out, as the adapter books them
        trades = {f"{t['symbol']}-{t['id'].replace('-', '')}": t for t in account["trades"]}
        return balances, trades, [o["client_order_id"] for o in account["orders"]]
    trades = {f"{t['symbol']}-{t['id']}": t for t in account["trades"]}
    return balances, trades, [o["clientOrderId"] for o in account["orders"]]


def last_run_and_reconcile(
    command: list[str],
    tmp_path: Path,
    env: dict[str, str],
    ready: dict,
    ticks: int,
    until: Callable[[], bool] = lambda: True,
    most: int = 2,
) -> subprocess.CompletedProcess[str]:
    """A last, clean run of the daemon past two more ticks (and on, up to `most` more, until
    `until()` holds) and a clean stop (exit 0); then the market stands still and
    `trader reconcile --json` books what happened since."""
    daemon = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    ledger = tmp_path / "ledger.sqlite3"
    wait_for_ticks(ledger, ticks + 2, daemon)
    for more in range(3, most + 1):
        if until():
            break
        wait_for_ticks(ledger, ticks + more, daemon)
    daemon.send_signal(signal.SIGTERM)
    _, errors = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, errors.decode()[-3000:]
    emulator(ready, "/__emulator__/clock", {"paused": True})
    return subprocess.run(
        [TRADER, "reconcile", "--json", "--log-level", "ERROR"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.timeout(900)  # 30 daemon start-ups: slow on a busy machine
@pytest.mark.parametrize("venue", ["binance", "alpaca"])
def test_sigkill_in_live_mode_and_reconciliation_books_what_happened(tmp_path, venue):
    rng = random.Random(20261124)  # noqa: S311 - a reproducible kill schedule
    sandbox, ready = start_sandbox(tmp_path, venue, SYMBOLS[venue])
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
        reconcile = last_run_and_reconcile(command, tmp_path, env, ready, seen[-1])
        account = emulator(ready, "/__emulator__/account")[KEY]
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)

    assert reconcile.returncode == 0, reconcile.stdout + reconcile.stderr
    assert json.loads(reconcile.stdout)["ok"]
    state = asyncio.run(ledger_state(ledger))
    assert seen[-1] > 10, "the daemon ticked between the kills"
    assert len(set(seen)) > KILLS // 3, "most kills came after some progress"
    balances, trades, client_ids = venue_view(account, venue)
    assert len(trades) > 20, "the run traded: there was something to lose"
    # The ledger equals the venue's account.
    first, second = SYMBOLS[venue]
    assert state.portfolio.cash == balances[first.split("/")[1]]
    assert state.portfolio.amount(first) == balances["SOL"]
    assert state.portfolio.amount(second) == balances["BTC"]
    with sqlite3.connect(ledger) as c:
        fills = {row[0]: row for row in c.execute("SELECT fill_id, amount, price FROM fills")}
        cids = {row[0] for row in c.execute("SELECT client_order_id FROM orders")}
        verdicts = c.execute("SELECT ok, summary FROM reconciliations").fetchall()
        halted = c.execute("SELECT state, reason FROM trading_state").fetchone()
    print(  # the run's figures, for whoever reads the log
        f"kill run ({venue}): {KILLS} kills, {seen[-1]} ticks, {len(client_ids)} venue orders, "
        f"{len(trades)} trades, {len(verdicts)} reconciliations ({sum(ok for ok, _ in verdicts)}"
        f" ok), most sends of one client id {max(Counter(client_ids).values())}"
    )
    # Every venue trade is a fill in the ledger, and nothing else is.
    assert set(fills) == set(trades)
    for fill_id, trade in trades.items():
        assert Decimal(fills[fill_id][1]) == Decimal(trade["qty"])
        assert Decimal(fills[fill_id][2]) == Decimal(trade["price"])
    # No client order id reached the venue twice, and every one is the ledger's.
    assert max(Counter(client_ids).values()) == 1
    assert set(client_ids) <= cids
    # Every restart reconciled, and nothing was ever unexplained.
    assert len(verdicts) >= KILLS // 2
    assert all(ok == 1 for ok, _summary in verdicts), [s for ok, s in verdicts if not ok]
    assert halted[0] != "halted", halted
