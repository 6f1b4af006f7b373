"""The risk limits' marks survive a restart in the ledger (real SQLite), and a ledger written
before they were kept opens with the marks its own equity history implies."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from trader.config.trading_settings import RiskSettings
from trader.domain import Portfolio
from trader.engine.booking import settle
from trader.engine.report import TickReport
from trader.ledger import Database
from trader.ledger.migrations import MIGRATIONS
from trader.ledger.trading import TradingLedger
from trader.risk import DayMarks, RiskEngine, TradingState, TradingStatus

pytestmark = pytest.mark.integration
AT = datetime(2024, 3, 1, 22, tzinfo=UTC)


def engine(day: DayMarks | None, status: TradingStatus | None) -> RiskEngine:
    return RiskEngine(
        RiskSettings(max_daily_loss=0.05, max_drawdown=0.10),
        maker_fee_bps=2.0,
        taker_fee_bps=10.0,
        max_quote_age=timedelta(seconds=30),
        status=status or TradingStatus(TradingState.ACTIVE, "started", AT),
        day=day,
        opening=Decimal(10_000),
    )


async def test_a_restart_measures_the_next_days_loss_from_the_equity_booked_before_it(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    database = await Database.open(path)
    ledger = TradingLedger(database)
    await ledger.open("USDT", Decimal(10_000))
    risk = engine(None, None)
    # A day that ends up 5% on cash alone (a paper account credited: no fills needed).
    for hours, cash in ((0, Decimal(10_200)), (1, Decimal(10_500))):
        report = TickReport(AT + timedelta(hours=hours))
        record, change = settle(report, {}, Portfolio("USDT", cash), risk)
        await ledger.commit_tick([], Portfolio("USDT", Decimal(10_000)), {}, record, change)
    await database.close()

    database = await Database.open(path)
    state = await TradingLedger(database).load()
    await database.close()
    assert state.day == DayMarks(
        (AT + timedelta(hours=1)).date(), Decimal(10_000), Decimal(10_500), Decimal(10_500),
        Decimal(10_500),
    )  # fmt: skip
    restarted = engine(state.day, state.status)
    # The next day's first tick loses 6% of the 10,500 booked last: the limit halts.
    change = restarted.observe_equity(AT + timedelta(hours=2), Decimal(9_870))
    assert change is not None
    assert change.state is TradingState.HALTED
    assert change.reason.startswith("daily loss 6.00% > 5.00% since equity 10500.00")


async def test_a_ledger_of_schema_6_takes_its_last_and_highest_booked_equity(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    with sqlite3.connect(path) as connection:
        connection.executescript("".join(MIGRATIONS[:6]))
        connection.execute("INSERT INTO account VALUES (1, 'USDT', '10000', '10000', '0')")
        connection.executemany(
            "INSERT INTO equity VALUES (?, ?, '0', '0', 0.0)",
            [
                ("2024-03-01T10:00:00.000000Z", "10999.123456789"),
                ("2024-03-01T11:00:00.000000Z", "9000"),  # "9000" > "10999..." as text
                ("2024-03-01T12:00:00.000000Z", "9500.5"),
            ],
        )
        connection.execute(
            "INSERT INTO trading_state VALUES (1, 'active', 'started', "
            "'2024-03-01T10:00:00.000000Z', '2024-03-01', '10999.123456789', '10999.123456789')"
        )
        connection.execute("PRAGMA user_version = 6")
    database = await Database.open(path)
    state = await TradingLedger(database).load()
    await database.close()
    assert state.day is not None
    assert state.day.last == Decimal("9500.5")
    assert state.day.high == Decimal("10999.123456789")  # exact, the highest by value
    assert (state.day.start, state.day.peak) == (Decimal("10999.123456789"),) * 2


async def test_a_resume_is_recorded_with_the_equity_the_limits_measure_from_now(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    database = await Database.open(path)
    ledger = TradingLedger(database)
    await ledger.open("USDT", Decimal(10_000))
    risk = engine(None, None)
    halted = risk.observe_equity(AT, Decimal(9_000))  # 10% down in the first bar
    assert halted is not None
    await ledger.record_status(halted, risk.day)
    resumed = risk.resume("resumed by ops", AT + timedelta(minutes=5))
    assert resumed is not None
    await ledger.record_status(resumed, risk.day)
    state = await ledger.load()
    events = await database.run(
        lambda c: c.execute("SELECT state, reason FROM trading_state_events ORDER BY id").fetchall()
    )
    await database.close()
    assert [state for state, _ in events] == ["halted", "active"]
    assert events[1][1] == "resumed by ops; limits measured from equity 9000.00"
    assert state.day is not None
    assert (state.day.start, state.day.peak, state.day.high) == (
        Decimal(9_000),
        Decimal(9_000),
        Decimal(10_000),
    )
    # After the restart, the next tick measures from the resume: 3% more is no stop.
    assert engine(state.day, state.status).observe_equity(AT, Decimal(8_730)) is None
