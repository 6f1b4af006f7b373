"""The trading ledger on real SQLite: atomic ticks, and a restart that refuses an inconsistent
record rather than trading on it."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from tests.unit.engine.builders import TF, forecast
from trader.domain import Fill, Liquidity, Order, OrderStatus, OrderType, Portfolio, Side
from trader.domain.execution import Execution
from trader.ledger import Database
from trader.ledger.database import LedgerError, transaction
from trader.ledger.forecast_rows import read_forecast
from trader.ledger.trading import TickRecord, TradingLedger
from trader.risk import DayMarks, TradingState, TradingStatus

pytestmark = pytest.mark.integration
AT = datetime(2024, 3, 1, 12, tzinfo=UTC)


def filled_order() -> tuple[Order, Fill]:
    order = Order.create(
        strategy="simple", symbol="SOL/USDT", side=Side.BUY, type=OrderType.MARKET,
        amount=Decimal(2), limit_price=None, tick_time=AT, leg="market",
    ).transition(OrderStatus.SUBMITTED)  # fmt: skip
    fill = Fill(
        f"{order.client_order_id}-1", order.client_order_id, "SOL/USDT", Side.BUY,
        Decimal("100.5"), Decimal(2), Decimal("0.201"), "USDT", Liquidity.TAKER, AT,
    )  # fmt: skip
    return order.with_fill(fill), fill


def marks(equity: Decimal) -> DayMarks:
    """Each mark its own value, so that each column is seen to come back."""
    return DayMarks(AT.date(), Decimal(10_000), Decimal(10_050), equity, Decimal(10_100))


def record(status: TradingStatus, equity: Decimal) -> TickRecord:
    return TickRecord(
        at=AT, outcome="ok", ready=1, skipped={}, timings={"data": 0.001}, forecasts=[],
        decisions=[], equity=equity, cash=equity, exposure=Decimal(0), drawdown=0.0,
        status=status, day=marks(equity),
    )  # fmt: skip


async def booked(tmp_path) -> tuple[Database, TradingLedger, Order, Fill]:
    database = await Database.open(tmp_path / "ledger.sqlite3")
    ledger = TradingLedger(database)
    await ledger.open("USDT", Decimal(10_000))
    order, fill = filled_order()
    portfolio = Portfolio("USDT", Decimal(10_000)).apply(fill)
    status = TradingStatus(TradingState.REDUCING, "drawdown", AT)
    await ledger.commit_tick(
        [Execution(order, (fill,))],
        portfolio,
        {"SOL/USDT": AT},
        record(status, Decimal(9_999)),
        status,
    )
    return database, ledger, order, fill


async def test_a_committed_tick_is_restored_whole(tmp_path):
    database, ledger, order, _fill = await booked(tmp_path)
    state = await ledger.load()
    await database.close()
    assert state.portfolio.cash == Decimal(10_000) - Decimal("201") - Decimal("0.201")
    assert state.portfolio.position("SOL/USDT").amount == Decimal(2)
    assert state.fill_counts == {order.client_order_id: 1}
    assert state.cursor == {"SOL/USDT": AT}
    assert state.status is not None
    assert (state.status.state, state.status.reason) == (TradingState.REDUCING, "drawdown")
    assert state.day == marks(Decimal(9_999))
    assert state.last_tick == AT
    assert state.open_orders == []


async def test_a_write_that_fails_half_way_leaves_nothing(tmp_path):
    database = await Database.open(tmp_path / "ledger.sqlite3")

    def half(c: sqlite3.Connection) -> None:
        with transaction(c):
            c.execute("INSERT INTO account VALUES (1, 'USDT', '1', '1', '0')")
            c.execute("INSERT INTO no_such_table VALUES (1)")

    with pytest.raises(sqlite3.OperationalError):
        await database.run(half)
    count = await database.run(lambda c: c.execute("SELECT count(*) FROM account").fetchone()[0])
    await database.close()
    assert count == 0


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        ("UPDATE account SET cash = '10000'", "cash 10000 but the fills imply"),
        ("DELETE FROM positions", "SOL/USDT position 0 but the fills imply 2"),
        ("DELETE FROM fills", "cash"),
        ("UPDATE orders SET filled_amount = '1'", "says 1 filled, its fills add up to 2"),
    ],
)
async def test_a_ledger_that_disagrees_with_its_fills_is_refused(tmp_path, tamper, message):
    database, ledger, _order, _fill = await booked(tmp_path)
    await database.run(lambda c: c.execute(tamper))
    with pytest.raises(LedgerError, match=message):
        await ledger.load()
    await database.close()


async def test_another_currency_needs_another_ledger(tmp_path):
    database, ledger, _order, _fill = await booked(tmp_path)
    with pytest.raises(LedgerError, match="in USDT, the settings say EUR"):
        await ledger.open("EUR", Decimal(1))
    await database.close()


async def test_forecasts_are_stored_exactly(tmp_path):
    database = await Database.open(tmp_path / "ledger.sqlite3")
    ledger = TradingLedger(database)
    await ledger.open("USDT", Decimal(10_000))
    original = forecast(101.123456789, width=0.37, steps=3)
    status = TradingStatus(TradingState.ACTIVE, "started", AT)
    tick = replace(record(status, Decimal(10_000)), forecasts=[original])
    await ledger.commit_tick([], Portfolio("USDT", Decimal(10_000)), {}, tick, None)
    row = await database.run(lambda c: c.execute("SELECT * FROM forecasts").fetchone()[1:])
    await database.close()
    assert read_forecast(row, TF) == original
