"""The loss limit halts the same on daily bars as on hourly ones, and the ledger's drawdown is
the report's: backtests of real recorded bars (GOOG daily, the `backtesting` package's
GOOG.csv; SOL/USDT hourly, tests/data), each checked against what its own booked equity
series says, tick by tick."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import backtesting
import pytest

from tests.recorded import SOLUSDT_1H_2022
from trader.backtest.run import run_backtest
from trader.config.schema import Settings
from trader.market.replay import read_recording

pytestmark = pytest.mark.integration

GOOG_1D = Path(backtesting.__file__).parent / "test" / "GOOG.csv"  # backtesting 0.x's sample
LIMIT = 0.002  # low, so that a held position's ordinary day trips it


def settings(tmp_path: Path, policy: str) -> Settings:
    return Settings(
        market={"context_bars": 64, "min_contiguous_bars": 16},
        forecast={"model": "baseline", "baseline_lookback": 32},
        backtest={"cache_dir": tmp_path / "cache", "on_halt": policy},
        risk={"max_daily_loss": LIMIT, "max_drawdown": 1.0, "min_edge_bps": 0.0},
        strategy={"position_fraction": 1.0},
    )


def booked(ledger: Path) -> tuple[Decimal, list[tuple[datetime, Decimal, float]], list[tuple]]:
    with sqlite3.connect(ledger) as c:
        (starting,) = c.execute("SELECT starting_cash FROM account").fetchone()
        rows = c.execute("SELECT at, equity, drawdown FROM equity ORDER BY at").fetchall()
        events = c.execute("SELECT at, state, reason FROM trading_state_events ORDER BY id")
        changes = [(datetime.fromisoformat(at), state, reason) for at, state, reason in events]
    series = [(datetime.fromisoformat(at), Decimal(e), dd) for at, e, dd in rows]
    return Decimal(starting), series, changes


def expected_stops(
    starting: Decimal, series: list[tuple[datetime, Decimal, float]]
) -> tuple[set[datetime], set[datetime], list[float]]:
    """From the equity series alone: the ticks where the limit stops trading (the first tick of
    each UTC day whose loss from the last equity before that day passes the limit), the ticks
    where trading resumes (the first tick of a day after a day with a stop, unless it stops
    again at once), and each tick's drawdown from the highest equity so far."""
    stops: set[datetime] = set()
    resumes: set[datetime] = set()
    drawdowns: list[float] = []
    reference, high, last = starting, starting, starting
    day, stopped_today, stopped_before = None, False, False
    for at, equity, _ in series:
        if at.date() != day:
            day, reference = at.date(), last
            stopped_before, stopped_today = stopped_today, False
            if stopped_before and (reference - equity) / reference <= Decimal(str(LIMIT)):
                resumes.add(at)
        if not stopped_today and (reference - equity) / reference > Decimal(str(LIMIT)):
            stops.add(at)
            stopped_today = True
        high = max(high, equity)
        drawdowns.append(float((high - equity) / high))
        last = equity
    return stops, resumes, drawdowns


@pytest.mark.parametrize(
    ("recording", "policy"),
    [
        ("goog_1d", "reduce_only"),
        ("goog_1d", "resume_next_day"),
        ("sol_1h", "reduce_only"),
        ("sol_1h", "resume_next_day"),
    ],
)
def test_the_loss_limit_stops_trading_the_same_on_daily_and_hourly_bars(
    tmp_path, recording, policy
):
    source = (
        read_recording(GOOG_1D, "GOOG/USD")
        if recording == "goog_1d"
        else read_recording(SOLUSDT_1H_2022)
    )
    result = asyncio.run(
        run_backtest(
            settings(tmp_path, policy), {source.symbol: source}, strategies=["simple"],
            ledgers=tmp_path / "ledgers",
        )
    )  # fmt: skip
    starting, series, changes = booked(tmp_path / "ledgers" / "ledger-simple.sqlite3")
    stops, resumes, drawdowns = expected_stops(starting, series)
    stopped = {at for at, state, reason in changes if reason.startswith("daily loss")}
    resumed = {at for at, state, reason in changes if reason == "a new trading day"}
    assert len(stops) > 10, "the limit must be hit for this test to mean anything"
    assert stopped == stops
    assert resumed == resumes
    assert {state for at, state, _ in changes if at in stops} == {
        "reducing" if policy == "reduce_only" else "halted"
    }
    # The case: the loss of a day's first tick stops it (every tick, on daily bars).
    firsts = {
        at for i, (at, _, _) in enumerate(series) if i == 0 or series[i - 1][0].date() < at.date()
    }
    assert len(stops & firsts) >= 3
    # The ledger's drawdown is from the running peak, the report's max drawdown its maximum.
    assert [dd for _, _, dd in series] == pytest.approx(drawdowns, abs=1e-12)
    assert max(dd for _, _, dd in series) > 0.02
    (line,) = [x for x in result.lines if x.strategy == "simple"]
    # The run does not end in its deepest drawdown, so the report's closing out cannot move it.
    assert line.performance.max_drawdown == pytest.approx(max(drawdowns), rel=1e-9)
