"""A daemon on the Alpaca emulator trades a US stock and a crypto pair together, from a Friday
morning to a Monday noon (2025-03-07 to 03-10: the US clocks went forward that Sunday), with
the settings `trader sandbox --venue alpaca` prints for it (the test adds its own ledger,
window and strategy), on the sandbox's accelerated clock: an hour bar every half second.

The stock, GOOG/USD on XNYS, is Google's recorded daily bars (the `backtesting` package's
GOOG.csv) laid one an hour on New York's sessions; the crypto pair, BTC/USD, is the recorded
SOL/USDT hours (tests/data/README.md says so). The sandbox lays 605 bars of each before the
Friday's start, so that the next ones are a stretch where the baseline model's forecast
changes sign for the stock between Friday and Monday and for the pair on Saturday and on
Sunday: `simple` trades them (market orders). At the end:

- no stock order reached the venue while its market was closed (one the daemon decided then
  was refused before it left), and it traded in both sessions (Friday's, and Monday's in
  summer time);
- the pair traded on Saturday and on Sunday;
- every venue trade is a fill in the ledger, and nothing else is;
- /metrics shows the positions the account holds and counts its fills;
- `trader reconcile` agrees with the account.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import time
from collections import Counter
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import backtesting
import pytest

from tests.integration.daemon import scrape
from tests.integration.sandboxed import (
    KEY,
    daemon_env,
    emulator,
    start_sandbox,
    stop_at,
    wall_instant,
)
from tests.integration.test_live_kill_run import ledger_state, venue_view
from tests.recorded import SOLUSDT_1H
from trader.emulator.sessions import Sessions

pytestmark = pytest.mark.integration
NEW_YORK = ZoneInfo("America/New_York")
START = datetime(2025, 3, 7, 9, 0, tzinfo=NEW_YORK)  # a Friday, before the open
END = datetime(2025, 3, 10, 12, 30, tzinfo=NEW_YORK)  # Monday, after the noon tick
HOLD_S = 60  # the venue's clock stands at START this long: the daemon starts meanwhile
STOCK, PAIR = "GOOG/USD", "BTC/USD"
GOOG = Path(backtesting.__file__).parent / "test" / "GOOG.csv"


def at_alpaca(symbol: str) -> str:
    """The symbol as Alpaca writes it: a stock bare, a crypto pair as ours."""
    return symbol.removesuffix("/USD") if symbol == STOCK else symbol


def new_york_dates(records: list[dict], symbol: str, field: str) -> Counter[str]:
    """How many of the account's records of `symbol` fall on each New York date."""
    return Counter(
        datetime.fromisoformat(r[field]).astimezone(NEW_YORK).date().isoformat()
        for r in records
        if r["symbol"] == at_alpaca(symbol)
    )


@pytest.mark.timeout(400)
def test_a_stock_and_a_crypto_pair_trade_together_over_a_weekend(cli, tmp_path):
    sandbox, ready = start_sandbox(
        tmp_path, "alpaca", (STOCK, PAIR), (GOOG, SOLUSDT_1H),
        "--timeframe", "1h", "--bar-seconds", "0.5", "--start", START.isoformat(),
        "--hold", str(HOLD_S), "--calendar", f"{STOCK}=XNYS", "--warmup", "605",
    )  # fmt: skip
    env = daemon_env(tmp_path, ready) | {"TRADER_STRATEGY__NAME": "simple"}
    try:
        daemon = cli.start("run", "--log-format", "json", env=env)
        clock_runs = wall_instant(ready, START)
        port = int(daemon.wait_for("serving metrics", timeout=clock_runs - time.time())["port"])
        try:
            daemon.wait_for("ready", timeout=clock_runs - time.time())
        except AssertionError as late:
            raise AssertionError(
                f"not ready within the sandbox's {HOLD_S} s hold: {late}"
            ) from None
        stopped, metrics = stop_at(daemon, ready, END, tmp_path, lambda: scrape(port))
        assert stopped == 0
        reconcile = cli.run("reconcile", "--json", "--log-level", "ERROR", env=env)
        account = emulator(ready, "/__emulator__/account")[KEY]
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)

    assert reconcile.returncode == 0, reconcile.stdout + reconcile.stderr
    report = json.loads(reconcile.stdout)
    assert report["ok"], report["lines"]
    assert all(b["ok"] for b in report["balances"].values()), report["lines"]
    balances, trades, _ = venue_view(account, "alpaca")
    sessions = Sessions.of("XNYS", START - timedelta(days=7), END + timedelta(days=7))
    stock_orders = [o for o in account["orders"] if o["symbol"] == at_alpaca(STOCK)]
    # No stock order reached the venue while its market was closed; it traded in both sessions.
    assert all(sessions.is_open(datetime.fromisoformat(o["created_at"])) for o in stock_orders)
    traded = new_york_dates(account["trades"], STOCK, "transaction_time")
    assert traded["2025-03-07"] > 0, traded
    assert traded["2025-03-10"] > 0, traded
    assert set(traded) <= {"2025-03-07", "2025-03-10"}
    # The crypto pair traded through the weekend.
    traded = new_york_dates(account["trades"], PAIR, "transaction_time")
    assert traded["2025-03-08"] > 0, traded
    assert traded["2025-03-09"] > 0, traded
    # Every venue trade is a fill in the ledger, and nothing else is; the ledger is the account.
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as c:
        fills = {row[0] for row in c.execute("SELECT fill_id FROM fills")}
        closed_hours = [
            row for row in c.execute(
                "SELECT client_order_id, created_at, status FROM orders WHERE symbol = ?", (STOCK,)
            )
            if not sessions.is_open(datetime.fromisoformat(row[1]))
        ]  # fmt: skip
    assert fills == set(trades)
    assert all(status == "rejected" for _cid, _at, status in closed_hours), closed_hours
    state = asyncio.run(ledger_state(tmp_path / "ledger.sqlite3"))
    assert state.portfolio.cash == balances["USD"]
    for symbol in (STOCK, PAIR):
        held = balances[symbol.split("/")[0]]
        assert state.portfolio.amount(symbol) == held
        # /metrics: the position the account holds, and every one of its fills counted.
        assert metrics[("trader_position", (("symbol", symbol),))] == pytest.approx(float(held))
        counted = sum(
            v for (name, labels), v in metrics.items()
            if name == "trader_fills_total" and ("symbol", symbol) in labels
        )  # fmt: skip
        assert counted == sum(1 for t in trades.values() if t["symbol"] == at_alpaca(symbol))
    assert Decimal(report["balances"]["USD"]["venue"]) == balances["USD"]
