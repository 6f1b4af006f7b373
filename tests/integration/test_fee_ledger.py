"""Posted fees in the real SQLite ledger: a fill booked with an estimated fee keeps it, the
posting is kept beside it as a correction, the portfolio moves by the difference in the asset
charged, a posting is booked once, and a restart derives the same portfolio from the fills
and corrections in the order they were booked (a later fill after the correction).

Reference values: Alpaca's documented CFEE (https://alpaca.markets/docs/crypto/activities/)
posts "-0.000195" ETH for a 0.078 ETH buy at 1884.5 (25 bps, tier 1); a maker's fill at tier 1
pays 15 bps (Alpaca Crypto LLC's fee disclosure)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from trader.domain import Fill, Liquidity, Order, OrderStatus, OrderType, Side
from trader.domain.execution import Execution
from trader.domain.fee_posting import FeePosting, match
from trader.domain.reconciliation import ReconcileReport, portfolio_after
from trader.ledger import Database
from trader.ledger.reconciliation import ReconciliationLedger
from trader.ledger.trading import TradingLedger

pytestmark = pytest.mark.integration
AT = datetime(2022, 8, 12, 15, tzinfo=UTC)
SYMBOL = "ETH/USD"


def bought(n: int, price: str, amount: str, fee: str, at: datetime) -> Execution:
    order = Order.create(
        strategy="simple", symbol=SYMBOL, side=Side.BUY, type=OrderType.MARKET,
        amount=Decimal(amount), limit_price=None, tick_time=at, leg=f"market{n}",
    ).transition(OrderStatus.SUBMITTED)  # fmt: skip
    fill = Fill(
        f"ETHUSD-{n}", order.client_order_id, SYMBOL, Side.BUY, Decimal(price), Decimal(amount),
        Decimal(fee), "ETH", Liquidity.MAKER, at, fee_estimated=True,
    )  # fmt: skip
    return Execution(order.with_fill(fill), (fill,), "test")


async def test_a_posted_fee_corrects_its_estimate_once_and_a_restart_derives_the_same(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    database = await Database.open(path)
    try:
        ledger = TradingLedger(database)
        reconciliation = ReconciliationLedger(database)
        state = await ledger.open("USD", Decimal(1000))
        # Day one: a buy, its fee estimated at 25 bps (a taker's), booked.
        first = bought(1, "1884.5", "0.078", "0.000195", AT)
        report = ReconcileReport(AT, "alpaca", executions=(first,))
        await reconciliation.book(report, portfolio_after(state.portfolio, report.executions))
        state = await ledger.load()
        book = await reconciliation.book_view(state, AT - timedelta(days=1))
        assert [f.fill_id for f in book.pending_fees] == ["ETHUSD-1"]
        # Day two: Alpaca posted 0.000117 ETH (15 bps: the fill rested); a second buy.
        posted = FeePosting(
            "20220812000000000::53be51ba", "CFEE", SYMBOL, "ETH", Decimal("0.000117"),
            date(2022, 8, 12), Decimal("1884.5"),
        )  # fmt: skip
        corrections, _ = match([posted], book.pending_fees, lambda at: at.date())
        later = AT + timedelta(days=1)
        second = bought(2, "1900", "0.05", "0.000125", later)
        report = ReconcileReport(
            later, "alpaca", executions=(second,), fee_corrections=tuple(corrections)
        )
        after = portfolio_after(state.portfolio, report.executions, report.fee_corrections)
        await reconciliation.book(report, after)
        state = await ledger.load()  # raises where stored and derived portfolios differ
        assert state.portfolio == after
        # The estimate gave 0.000078 ETH too little: the position holds it again.
        assert state.portfolio.amount(SYMBOL) == Decimal("0.078") - Decimal("0.000117") + (
            Decimal("0.05") - Decimal("0.000125")
        )
        book = await reconciliation.book_view(state, later - timedelta(days=1))
        assert [f.fill_id for f in book.pending_fees] == ["ETHUSD-2"]
        assert book.booked_postings == {posted.posting_id}
        assert book.posted_fees == {"ETH": Decimal("0.000117")}
        # The same posting again is refused whole: the portfolio would count it twice.
        again = ReconcileReport(later, "alpaca", fee_corrections=tuple(corrections))
        with pytest.raises(Exception, match="booked already"):
            await reconciliation.book(
                again, portfolio_after(state.portfolio, (), again.fee_corrections)
            )
        assert (await ledger.load()).portfolio == after
    finally:
        await database.close()
    # The ledger keeps both: the estimate on the fill, the posted fee beside it.
    with sqlite3.connect(path) as c:
        fee, estimated = c.execute(
            "SELECT fee, fee_estimated FROM fills WHERE fill_id = 'ETHUSD-1'"
        ).fetchone()
        kept = c.execute("SELECT estimated, posted, fills FROM fee_corrections").fetchall()
    assert (fee, estimated) == ("0.000195", 1)
    assert kept == [("0.000195", "0.000117", '["ETHUSD-1"]')]
