"""Crash-only: the paper pipeline on replay data, killed with SIGKILL at random points.

After every kill the ledger is consistent (positions and cash equal what its fills imply, no
order or fill twice), and the run, resumed each time, ends in exactly the state of a run that
was never interrupted.
"""

from __future__ import annotations

import asyncio
import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.conftest import TRADER, clean_env
from tests.recorded import SOLUSDT_1H, excerpt, lines
from trader.ledger import Database
from trader.ledger.trading import TradingLedger

pytestmark = pytest.mark.integration

KILLS = 30
# The kills land in the first ~450 ticks (the schedule's 30 draws of 0 to 30 ticks add up to
# 428, plus what a tick booked between poll and kill adds): 1,200 bars leave the resumed run
# some 700 ticks to end as the uninterrupted one did. More bars only lengthen both full runs.
BARS = 1200


def recordings(tmp: Path) -> list[Path]:
    """The first BARS hours of SOL/USDT, and a copy at ten times the price as BTC/USDT."""
    sol, btc = excerpt(tmp / "SOLUSDT_1h.csv", BARS), tmp / "BTCUSDT_1h.csv"
    header, *rows = lines(SOLUSDT_1H, BARS)
    scaled = []
    for row in rows:
        t, o, h, lo, c, v, a = row.split(",")
        scaled.append(",".join([t, *(repr(float(x) * 10) for x in (o, h, lo, c)), v, a]))
    btc.write_text("\n".join([header, *scaled]) + "\n")
    return [sol, btc]


def command(files: list[Path]) -> list[str]:
    return [TRADER, "run", "--log-level", "ERROR", "--replay", *map(str, files)]


def environment(ledger: Path) -> dict[str, str]:
    return clean_env(
        TRADER_LEDGER__PATH=str(ledger),
        TRADER_FORECAST__MODEL="baseline",
        TRADER_FORECAST__BASELINE_LOOKBACK="48",
        TRADER_MARKET__CONTEXT_BARS="48",
        TRADER_STRATEGY__NAME="maxdiff",
        TRADER_STRATEGY__ALLOW_SHORT="true",
        TRADER_MARKET__REPLAY_AMOUNT_STEP="0.001",
        TRADER_MARKET__REPLAY_PRICE_STEP="0.0001",
        TRADER_METRICS__PORT="0",  # the daemon serves metrics: any free port, never a fixed one
    )


def ticks_booked(ledger: Path) -> int:
    """Ticks in the ledger, read without disturbing the process writing it."""
    if not ledger.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True, timeout=1) as c:
            return int(c.execute("SELECT count(*) FROM ticks").fetchone()[0])
    except sqlite3.OperationalError:
        return 0  # not created yet


def wait_for_ticks(ledger: Path, ticks: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if ticks_booked(ledger) >= ticks:
            return
        time.sleep(0.002)


def run_to_the_end(files: list[Path], ledger: Path, cwd: Path) -> None:
    result = subprocess.run(
        command(files), env=environment(ledger), cwd=cwd, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]


async def check_consistent(ledger: Path) -> int:
    """Open the ledger as a restart would: it refuses if positions or cash disagree with the
    fills. Also: every fill belongs to a known order, and ids are unique."""
    database = await Database.open(ledger)
    try:
        state = await TradingLedger(database).load()  # raises LedgerError on a mismatch
        assert state.portfolio.cash > 0

        def audit(c: sqlite3.Connection) -> int:
            orphans = c.execute(
                "SELECT count(*) FROM fills WHERE client_order_id NOT IN "
                "(SELECT client_order_id FROM orders)"
            ).fetchone()[0]
            assert orphans == 0
            for table, key in (("orders", "client_order_id"), ("fills", "fill_id")):
                total, distinct = c.execute(
                    f"SELECT count(*), count(DISTINCT {key}) FROM {table}"  # noqa: S608 - two fixed names
                ).fetchone()
                assert total == distinct
            overfilled = c.execute(
                "SELECT count(*) FROM orders o WHERE CAST(filled_amount AS REAL) > "
                "CAST(amount AS REAL) + 1e-12"
            ).fetchone()[0]
            assert overfilled == 0
            return int(c.execute("SELECT count(*) FROM ticks").fetchone()[0])

        return await database.run(audit)
    finally:
        await database.close()


def final_state(ledger: Path) -> dict[str, list[tuple]]:
    """Everything the run decided and booked (wall-clock timings left out)."""
    queries = {
        "account": "SELECT * FROM account",
        "positions": "SELECT * FROM positions ORDER BY symbol",
        "orders": "SELECT client_order_id, strategy, symbol, side, type, amount, limit_price, "
        "created_at, expires_at, status, filled_amount FROM orders ORDER BY client_order_id",
        "order_events": "SELECT client_order_id, at, status, detail FROM order_events "
        "ORDER BY client_order_id, at, status",
        "fills": "SELECT * FROM fills ORDER BY fill_id",
        "equity": "SELECT * FROM equity ORDER BY at",
        "decisions": "SELECT * FROM decisions ORDER BY tick, symbol",
        "forecasts": "SELECT * FROM forecasts ORDER BY tick, symbol",
        "ticks": "SELECT at, outcome, ready, skipped FROM ticks ORDER BY at",
        "trading_state": "SELECT * FROM trading_state",
        "market_cursor": "SELECT * FROM market_cursor ORDER BY symbol",
    }
    with sqlite3.connect(ledger) as c:
        return {name: c.execute(query).fetchall() for name, query in queries.items()}


@pytest.mark.timeout(900)  # 32 daemon start-ups: slow on a busy machine
def test_sigkill_at_random_points_never_corrupts_and_the_run_ends_as_if_uninterrupted(tmp_path):
    files = recordings(tmp_path)
    reference = tmp_path / "reference.sqlite3"
    run_to_the_end(files, reference, tmp_path)
    expected = final_state(reference)
    assert len(expected["fills"]) > 100  # the run trades: there is something to get wrong

    crashed = tmp_path / "crashed.sqlite3"
    rng = random.Random(20261122)  # noqa: S311 - a reproducible schedule, not a secret
    ticks_seen = [0]
    for _ in range(KILLS):
        process = subprocess.Popen(
            command(files), env=environment(crashed), cwd=tmp_path,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        # Kill a random number of ticks into the run (0: during start-up), at a random moment
        # inside a tick; the schedule does not depend on how fast this machine is.
        wait_for_ticks(crashed, ticks_seen[-1] + rng.randint(0, 30), process)
        time.sleep(rng.uniform(0, 0.005))
        assert process.poll() is None, "the run ended before it was killed: make it longer"
        process.send_signal(signal.SIGKILL)
        process.wait()
        ticks = asyncio.run(check_consistent(crashed))
        assert ticks >= ticks_seen[-1]  # a booked tick is never lost
        ticks_seen.append(ticks)
    assert ticks_seen[-1] < len(expected["ticks"])  # the kills landed mid-run
    assert len(set(ticks_seen)) > KILLS // 2  # and most of them after some progress

    run_to_the_end(files, crashed, tmp_path)
    asyncio.run(check_consistent(crashed))
    actual = final_state(crashed)
    for table, rows in expected.items():
        assert actual[table] == rows, f"{table} differs from the uninterrupted run"
