"""Engine.reconcile with the paper broker: the ledger checked against itself, every run
recorded; a disagreement halts trading, persisted with its reason."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

import pytest

from tests.integration.test_engine import engine, run
from trader.risk import TradingState

pytestmark = pytest.mark.integration


async def test_a_paper_reconciliation_is_ok_and_recorded(tmp_path):
    built, database, times = await engine(tmp_path)
    await run(built, times, 6)
    at = times[5][0]
    report = await built.reconcile(at)
    built.close()
    await database.close()
    assert report.ok, report.text
    assert report.broker == "paper"
    assert report.executions == ()
    assert "ok" in report.summary
    assert report.text.startswith(report.summary)
    assert built.risk.state is TradingState.ACTIVE
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as c:
        rows = c.execute("SELECT broker, ok, summary, report FROM reconciliations").fetchall()
    assert rows == [("paper", 1, report.summary, report.text)]


async def test_a_broker_that_disagrees_with_the_ledger_halts_trading(tmp_path):
    built, database, times = await engine(tmp_path)
    reports = await run(built, times, 6)
    assert built.broker.open_orders(), "maxdiff leaves orders resting: something to lose"
    # The broker's memory loses an order the ledger holds (what a bug would do).
    lost = built.broker.open_orders()[0]
    del built.broker._open[lost.client_order_id]
    report = await built.reconcile(reports[-1].at)
    later = await run(built, times[6:], 2)
    built.close()
    await database.close()
    assert not report.ok
    assert any(lost.client_order_id in p for p in report.problems)
    assert "MISMATCH" in report.summary
    assert built.risk.state is TradingState.HALTED
    assert built.risk.status.reason.startswith("reconciliation: ")
    assert all(v.rule == "halted" for r in later for _s, v in r.refusals)
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as c:
        state = c.execute("SELECT state, reason FROM trading_state").fetchone()
        events = c.execute("SELECT state FROM trading_state_events").fetchall()
        ok = c.execute("SELECT ok FROM reconciliations").fetchall()
    assert state == ("halted", built.risk.status.reason)
    assert ("halted",) in events
    assert ok == [(0,)]


async def test_an_engine_whose_memory_drifted_from_the_ledger_halts(tmp_path):
    built, database, times = await engine(tmp_path)
    await run(built, times, 3)
    built.portfolio = replace(built.portfolio, cash=built.portfolio.cash + 1)
    report = await built.reconcile(times[2][0])
    built.close()
    await database.close()
    assert report.problems == ("the engine's portfolio differs from the ledger's",)
    assert built.risk.state is TradingState.HALTED
