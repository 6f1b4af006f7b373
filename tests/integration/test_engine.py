"""The engine on replay data, in process: every stage can fail without taking it down, and a
decision is one log line with its reason."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Sequence
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from tests.recorded import SOLUSDT_1H
from trader.clock import SimulatedClock
from trader.config.daemon_settings import LogSettings
from trader.config.schema import Settings
from trader.domain import Forecast, from_epoch_ms
from trader.engine import Engine
from trader.forecast import BaselineForecaster, ForecastRequest
from trader.ledger import Database
from trader.ledger.trading import TradingLedger
from trader.logging import configure_logging
from trader.market.quotes import FixedSpread
from trader.market.replay import Recording, ReplayMarketData, read_recording
from trader.risk import TradingState
from trader.runner import build_engine, tick_times

pytestmark = pytest.mark.integration
SYMBOLS = ("SOL/USDT", "BTC/USDT")


class Flaky:
    """The baseline, except on the calls it was told to fail."""

    def __init__(self, fail_on: set[int]) -> None:
        self.inner, self.calls, self.fail_on = BaselineForecaster(32), 0, fail_on
        self.name = "baseline"

    def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        self.calls += 1
        if self.calls in self.fail_on:
            raise RuntimeError("the GPU fell over")
        return self.inner.forecast(requests)


def recordings() -> dict[str, Recording]:
    sol = read_recording(SOLUSDT_1H)
    rows = sol.rows[:400]
    btc = [(t, o * 10, h * 10, lo * 10, c * 10, v, q) for t, o, h, lo, c, v, q in rows]
    return {
        "SOL/USDT": Recording("SOL/USDT", sol.timeframe, rows, sol.path),
        "BTC/USDT": Recording("BTC/USDT", sol.timeframe, btc, sol.path),
    }


async def engine(tmp_path: Path, forecaster=None, **strategy) -> tuple[Engine, Database, list]:
    settings = Settings(
        market={"symbols": list(SYMBOLS), "context_bars": 32, "replay_amount_step": "0.001"},
        strategy={"name": "maxdiff", "allow_short": True, "position_fraction": 0.1} | strategy,
        ledger={"path": tmp_path / "ledger.sqlite3"},
    )
    recs = recordings()
    times = tick_times(recs, 32)
    clock = SimulatedClock(times[0])
    feed = ReplayMarketData(recs, clock, FixedSpread(5))
    database = await Database.open(settings.ledger.path)
    forecasters = [forecaster or BaselineForecaster(32)]
    built = await build_engine(settings, feed, database, times[0], forecasters=forecasters)
    return built, database, [(t, clock) for t in times]


async def run(built: Engine, times: list, n: int):
    reports = []
    for at, clock in times[:n]:
        await clock.sleep_until(at)
        reports.append(await built.tick(at))
    return reports


async def test_a_failing_forecaster_costs_its_ticks_only(tmp_path):
    built, database, times = await engine(tmp_path, Flaky(fail_on={3, 4}))
    reports = await run(built, times, 8)
    built.close()
    await database.close()
    assert [r.outcome for r in reports] == ["ok"] * 2 + ["degraded"] * 2 + ["ok"] * 4
    assert reports[2].failed_stages == ["forecast:baseline"]
    assert reports[2].decisions == []
    assert all(len(r.decisions) == 2 for r in reports[4:])


async def test_a_strategy_that_raises_skips_only_its_symbol(tmp_path):
    built, database, times = await engine(tmp_path)

    class Broken:
        name = "broken"

        def decide(self, ctx):
            raise ZeroDivisionError("bug")

    built.strategies = {"SOL/USDT": Broken(), "BTC/USDT": built.strategies["BTC/USDT"]}
    (report,) = await run(built, times, 1)
    built.close()
    await database.close()
    assert report.skipped == {"SOL/USDT": "strategy_error"}
    assert [d.symbol for d in report.decisions] == ["BTC/USDT"]
    assert report.outcome == "ok"


async def test_a_broker_failing_mid_tick_books_nothing_of_that_tick(tmp_path):
    built, database, times = await engine(tmp_path)
    await run(built, times, 5)
    before = await TradingLedger(database).load()
    real_submit = built.broker.submit
    sent = []

    async def submit(order, quote, at):
        if sent:
            raise ConnectionError("broker down")
        sent.append(order)
        return await real_submit(order, quote, at)

    built.broker.submit = submit  # type: ignore[method-assign]
    (failed,) = await run(built, times[5:], 1)
    built.broker.submit = real_submit  # type: ignore[method-assign]
    after = await TradingLedger(database).load()
    in_memory = (built.portfolio, {o.client_order_id for o in built.broker.open_orders()})
    later = await run(built, times[6:], 3)
    built.close()
    await database.close()
    assert "orders" in failed.failed_stages
    assert failed.outcome == "degraded"
    # Nothing of the half-sent tick was booked, and memory went back to what the ledger holds.
    assert after.portfolio == before.portfolio
    assert after.last_tick == failed.at
    assert in_memory == (after.portfolio, {o.client_order_id for o in after.open_orders})
    assert all(r.outcome == "ok" for r in later)


async def test_a_ledger_that_cannot_write_halts_trading_and_the_engine_keeps_ticking(tmp_path):
    built, database, times = await engine(tmp_path)
    await run(built, times, 3)
    # Something outside the daemon breaks the file's schema: commits now fail.
    await database.run(lambda c: c.execute("DROP TABLE equity"))
    reports = await run(built, times[3:], 2)
    built.close()
    await database.close()
    assert [r.outcome for r in reports] == ["failed", "failed"]
    assert built.risk.state is TradingState.HALTED
    assert built.risk.status.reason == "the ledger could not book a tick"
    assert reports[1].refusals == [] or all(v.rule == "halted" for _s, v in reports[1].refusals)


async def test_every_decision_is_one_log_line_with_its_reason_and_the_tick(tmp_path):
    stream = io.StringIO()
    configure_logging(LogSettings(level="INFO", format="json"), stream=stream)
    built, database, times = await engine(tmp_path)
    reports = await run(built, times, 3)
    built.close()
    await database.close()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    decisions = [line for line in lines if line["event"] == "decision"]
    assert len(decisions) == sum(len(r.decisions) for r in reports) == 6
    for line in decisions:
        assert line["symbol"] in SYMBOLS
        assert line["reason"]
        assert line["tick"] in {r.at.isoformat() for r in reports}
        assert line["strategy"] == "maxdiff"
    assert {stage for r in reports for stage in r.timings} >= {
        "data",
        "forecast",
        "strategy",
        "ledger",
    }


async def test_the_record_holds_every_tick_decision_and_forecast(tmp_path):
    built, database, times = await engine(tmp_path)
    reports = await run(built, times, 4)
    built.close()
    await database.close()
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as c:
        ticks = c.execute("SELECT at, outcome, ready FROM ticks ORDER BY at").fetchall()
        decisions = c.execute("SELECT count(*) FROM decisions").fetchone()[0]
        forecasts = c.execute("SELECT count(*) FROM forecasts").fetchone()[0]
        equity = c.execute("SELECT count(*) FROM equity").fetchone()[0]
    assert [t[1] for t in ticks] == ["ok"] * 4
    assert decisions == forecasts == 8
    assert equity == 4
    assert reports[-1].equity > Decimal(0)
    assert from_epoch_ms(0) < reports[0].at < reports[0].at + timedelta(hours=4)
