"""The ledger's funding cursor of a perpetual (`trader.ledger.perp_cursor`): when the position
held now opened (from flat, or by a reversal: Binance's one-way mode closes the old position
and opens a new one), the last funding time booked, and the funding paid since the opening
(an isolated position pays its funding out of its own margin: Binance "Isolated margin")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from tests.integration.test_funding_ledger import record
from trader.domain import Fill, Liquidity, Order, OrderType, Portfolio, Side
from trader.domain.execution import Execution
from trader.domain.order import OrderStatus
from trader.ledger import Database
from trader.ledger.funding import FundingRow, PerpRows
from trader.ledger.perp_cursor import funding_cursors
from trader.ledger.trading import TradingLedger

pytestmark = pytest.mark.integration
AT = datetime(2024, 3, 1, 8, tzinfo=UTC)
SYMBOL = "SOL/USDT"


def trade(
    side: Side, amount: int, at: datetime, portfolio: Portfolio
) -> tuple[Execution, Portfolio]:
    order = Order.create(
        strategy="s", symbol=SYMBOL, side=side, type=OrderType.MARKET, amount=Decimal(amount),
        limit_price=None, tick_time=at, leg="a",
    ).transition(OrderStatus.SUBMITTED)  # fmt: skip
    fill = Fill(
        f"{order.client_order_id}-1", order.client_order_id, SYMBOL, side, Decimal(100),
        Decimal(amount), Decimal(0), "USDT", Liquidity.TAKER, at,
    )  # fmt: skip
    return Execution(order.with_fill(fill), (fill,)), portfolio.apply(fill)


def funded(at: datetime, held: int, paid: str) -> FundingRow:
    return FundingRow(SYMBOL, at, Decimal("0.0001"), Decimal(100), Decimal(held), Decimal(paid))


@pytest.mark.parametrize(
    ("moves", "held", "opened_hour", "paid_since"),
    [
        # long 10 at 0h, funding at 8h, flat at 9h, short 5 at 10h, funding at 16h
        ([(Side.BUY, 10), (Side.SELL, 10), (Side.SELL, 5)], -5, 2, "-0.05"),
        # long 10 at 0h, funding at 8h, reversed to short 5 at 9h, funding at 16h
        ([(Side.BUY, 10), (Side.SELL, 15)], -5, 1, "-0.05"),
        # long 10 at 0h, funding at 8h, added 5 at 9h, funding at 16h: one position
        ([(Side.BUY, 10), (Side.BUY, 5)], 15, 0, "0.25"),
    ],
    ids=["closed_and_reopened", "reversed", "added_to"],
)
async def test_the_cursor_counts_the_funding_since_the_position_held_now_opened(
    tmp_path: Path,
    moves: list[tuple[Side, int]],
    held: int,
    opened_hour: int,
    paid_since: str,
) -> None:
    database = await Database.open(tmp_path / "ledger.sqlite3")
    ledger = TradingLedger(database)
    await ledger.open("USDT", Decimal(10_000))
    portfolio = Portfolio("USDT", Decimal(10_000))
    # The trades at 0h, 9h (and 10h); funding rows at 8h and 16h on the position then.
    times = [AT, AT + timedelta(hours=9), AT + timedelta(hours=10)]
    for n, (side, amount) in enumerate(moves):
        if n == 1:
            row = funded(AT + timedelta(hours=8), 10, "0.1")
            await ledger.commit_tick([], portfolio, {}, record(row.at, portfolio), None,
                                     PerpRows([row]))  # fmt: skip
        execution, portfolio = trade(side, amount, times[n], portfolio)
        await ledger.commit_tick([execution], portfolio, {}, record(times[n], portfolio), None)
    late = funded(AT + timedelta(hours=16), held, str(Decimal(held) / 100))
    await ledger.commit_tick([], portfolio, {}, record(late.at, portfolio), None, PerpRows([late]))
    cursors = await database.run(lambda c: funding_cursors(c, [SYMBOL, "ETH/USDT"]))
    await database.close()
    cursor = cursors[SYMBOL]
    assert cursor.held == held
    assert cursor.opened_at == [AT, AT + timedelta(hours=9), AT + timedelta(hours=10)][opened_hour]
    assert cursor.funded_through == AT + timedelta(hours=16)
    # the 8h row counts only where the position then is the one held now
    with_8h = Decimal("0.1") if opened_hour == 0 else Decimal(0)
    assert cursor.paid_since_open == with_8h + Decimal(held) / 100
    assert cursor.paid_since_open == Decimal(paid_since)
    assert cursor.after(timedelta(seconds=60)) == AT + timedelta(hours=16)
    # The size at a time, from the fills: the last position only (before it opened: none).
    assert cursor.held_at(AT + timedelta(hours=8)) == (10 if opened_hour == 0 else 0)
    assert cursor.held_at(AT + timedelta(hours=9, minutes=30)) == {0: 15, 1: -5, 2: 0}[opened_hour]
    none = cursors["ETH/USDT"]
    assert none.held == 0
    assert (none.opened_at, none.funded_through, none.after(timedelta(0))) == (None, None, None)


async def test_a_closed_position_s_sizes_stay_readable_for_a_funding_time_booked_late(
    tmp_path: Path,
) -> None:
    database = await Database.open(tmp_path / "ledger.sqlite3")
    ledger = TradingLedger(database)
    await ledger.open("USDT", Decimal(10_000))
    portfolio = Portfolio("USDT", Decimal(10_000))
    for side, amount, hours in [(Side.BUY, 10, 0), (Side.BUY, 5, 9), (Side.SELL, 15, 10)]:
        when = AT + timedelta(hours=hours)
        execution, portfolio = trade(side, amount, when, portfolio)
        await ledger.commit_tick([execution], portfolio, {}, record(when, portfolio), None)
    (cursor,) = (await database.run(lambda c: funding_cursors(c, [SYMBOL]))).values()
    await database.close()
    assert cursor.held == 0
    assert cursor.paid_since_open == 0
    assert cursor.opened_at is None
    assert cursor.last is not None
    assert (cursor.last.opened_at, cursor.last.closed_at) == (AT, AT + timedelta(hours=10))
    assert cursor.held_at(AT + timedelta(hours=8)) == 10
    assert cursor.held_at(AT + timedelta(hours=9, minutes=30)) == 15
    assert cursor.held_at(AT + timedelta(hours=11)) == 0
    assert cursor.after(timedelta(seconds=60)) == AT + timedelta(seconds=60)
