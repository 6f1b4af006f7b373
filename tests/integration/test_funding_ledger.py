"""A perpetual's funding in the ledger (migration 11): rows written with the tick, cash that a
restart derives from the fills and the funding rows, one row per symbol, time and source."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from trader.domain import Fill, Liquidity, Order, OrderType, Portfolio, Side
from trader.domain.execution import Execution
from trader.domain.order import OrderStatus
from trader.ledger import Database
from trader.ledger.funding import FundingRow, PerpRows, read_funding, record_funding
from trader.ledger.trading import TickRecord, TradingLedger
from trader.risk import TradingState
from trader.risk.state import TradingStatus

pytestmark = pytest.mark.integration
AT = datetime(2024, 3, 1, 8, tzinfo=UTC)
SYMBOL = "SOL/USDT"


def record(at: datetime, portfolio: Portfolio) -> TickRecord:
    status = TradingStatus(TradingState.ACTIVE, "started", at)
    return TickRecord(
        at=at, outcome="ok", ready=1, skipped={}, timings={}, forecasts=[], decisions=[],
        equity=portfolio.cash, cash=portfolio.cash, exposure=Decimal(0), drawdown=0.0,
        status=status, day=None,
    )  # fmt: skip


def bought() -> tuple[Execution, Portfolio]:
    order = Order.create(
        strategy="s", symbol=SYMBOL, side=Side.BUY, type=OrderType.MARKET, amount=Decimal(10),
        limit_price=None, tick_time=AT, leg="a",
    ).transition(OrderStatus.SUBMITTED)  # fmt: skip
    fill = Fill(
        f"{order.client_order_id}-1", order.client_order_id, SYMBOL, Side.BUY, Decimal(100),
        Decimal(10), Decimal("0.5"), "USDT", Liquidity.TAKER, AT,
    )  # fmt: skip
    return Execution(order.with_fill(fill), (fill,)), Portfolio("USDT", Decimal(10_000)).apply(fill)


def paid(portfolio: Portfolio, amount: Decimal) -> Portfolio:
    return Portfolio(
        portfolio.currency, portfolio.cash - amount, portfolio.positions,
        portfolio.realized_pnl, portfolio.fees_paid,
    )  # fmt: skip


async def test_funding_rows_move_the_cash_a_restart_derives(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    database = await Database.open(path)
    ledger = TradingLedger(database)
    await ledger.open("USDT", Decimal(10_000))
    execution, portfolio = bought()
    await ledger.commit_tick([execution], portfolio, {}, record(AT, portfolio), None)
    # Funding at the next two funding times: a long at a positive rate pays, then receives.
    later = AT + timedelta(hours=8)
    first = FundingRow(SYMBOL, later, Decimal("0.0001"), Decimal(101), Decimal(10),
                       Decimal("0.101"))  # fmt: skip
    portfolio = paid(portfolio, first.paid)
    rows = PerpRows([first])
    await ledger.commit_tick([], portfolio, {}, record(later, portfolio), None, rows)
    last = later + timedelta(hours=8)
    second = FundingRow(SYMBOL, last, Decimal("-0.0002"), Decimal(99), Decimal(10),
                        Decimal("-0.198"))  # fmt: skip
    portfolio = paid(portfolio, second.paid)
    await ledger.commit_tick([], portfolio, {}, record(last, portfolio), None, PerpRows([second]))
    await database.close()

    database = await Database.open(path)
    state = await TradingLedger(database).load()  # checks stored cash against the record
    # 10,000 less the 1,000 bought and the 0.5 fee, less 0.101 paid, plus 0.198 received.
    assert state.portfolio.cash == Decimal("8999.597")
    assert state.portfolio.amount(SYMBOL) == 10
    booked = await database.run(read_funding)
    await database.close()
    assert booked == [first, second]


async def test_a_funding_time_is_booked_once_per_source(tmp_path):
    database = await Database.open(tmp_path / "ledger.sqlite3")
    await TradingLedger(database).open("USDT", Decimal(1000))
    await database.close()
    row = FundingRow(SYMBOL, AT, Decimal("0.0001"), Decimal(100), Decimal(1), Decimal("0.01"))
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as c:
        record_funding(c, [row])
        with pytest.raises(sqlite3.IntegrityError):
            record_funding(c, [row])
        # The venue's own record of the same time is another source: kept beside it.
        venue = FundingRow(SYMBOL, AT, row.rate, row.mark, row.position, row.paid, "venue", "77")
        record_funding(c, [venue])
        assert [r.source for r in read_funding(c, SYMBOL)] == ["modelled", "venue"]
