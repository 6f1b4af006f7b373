"""The venue's funding and liquidations booked into the ledger by reconciliation, through the
real ccxt `binanceusdm` on helper B's futures emulator, and the engine's own
`reconcile_ledger` (the report booked in one transaction with its fills).

Sources: Binance USDⓈ-M "Get Income History" (GET /fapi/v1/income: incomeType FUNDING_FEE and
INSURANCE_CLEAR, income, tranId, tradeId); "Introduction to Binance Futures Funding Rates"
(FAQ 360033525031: funding = position value at the mark x rate, longs pay shorts when it is
positive; the interval may change, fundingInfo's fundingIntervalHours); the "Liquidation
Protocol" (docs.traderwagon.com/faq/futures-trading-introduction/liquidation-protocol): a
position whose margin balance falls to the maintenance margin on the mark is closed at the
bankruptcy price (where its margin balance is zero), with a liquidation fee to the insurance
fund; Binance's user data stream (ORDER_TRADE_UPDATE): a liquidation order's client id starts
"autoclose-". ccxt 4.5.90 binance.py `fetch_funding_history` (its `incomeType` replaced by
params), `fetch_my_trades`, `fetch_order`. The expected figures are computed here from the
series the test gives, not read from our code.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from tests.integration.futures_setup import ETH, START, at, spec, with_bar
from tests.integration.perp_live_setup import PerpLive, fresh_broker, perp_live
from trader.domain import Portfolio, Side
from trader.domain.execution import Execution
from trader.domain.reconciliation import VenueFunding, funded
from trader.emulator.futures_market import FundingEvent
from trader.engine.reconciling import reconcile_ledger
from trader.ledger import Database
from trader.ledger.funding import FundingRow, LiquidationRow, read_funding, read_liquidations
from trader.ledger.reconciliation import ReconciliationLedger, unbooked
from trader.ledger.trading import TickRecord, TradingLedger
from trader.risk import TradingState
from trader.risk.state import TradingStatus
from trader.telemetry.perp_metrics import PerpMetrics

pytestmark = pytest.mark.integration
WALLET = Decimal(1000)
DUST = Decimal("1e-8")  # the venue writes its figures to 8 decimals
# Three settlements: 4 hours apart, then the interval changes to 1 hour.
FUNDING = [
    FundingEvent(at(12, 0), Decimal("0.0001"), Decimal("100")),
    FundingEvent(at(16, 0), Decimal("-0.0003"), Decimal("100.5")),
    FundingEvent(at(17, 0), Decimal("0.0002"), Decimal("99")),
]


@dataclass
class Booked:
    """The daemon's ledger beside the broker: fills booked as a tick books them."""

    live: PerpLive
    path: Path
    database: Database
    ledger: TradingLedger

    async def submit(self, side: Side, amount: str) -> Execution:
        done = await self.live.submit(self.live.order(side, amount))
        state = await self.ledger.load()
        portfolio = state.portfolio
        for fill in done.fills:
            portfolio = portfolio.apply(fill)
        await self.ledger.commit_tick([done], portfolio, {}, record(self.live.now, portfolio), None)
        return done

    async def funding(self) -> list[FundingRow]:
        return await self.database.run(read_funding)

    async def liquidations(self) -> list[LiquidationRow]:
        return await self.database.run(read_liquidations)

    async def restart(self) -> None:
        """A new process: the ledger read again from its file, a new broker and client."""
        await self.database.close()
        self.database = await Database.open(self.path)
        self.ledger = TradingLedger(self.database)
        await fresh_broker(self.live)


def record(moment: datetime, portfolio: Portfolio) -> TickRecord:
    status = TradingStatus(TradingState.ACTIVE, "started", moment)
    return TickRecord(
        at=moment, outcome="ok", ready=1, skipped={}, timings={}, forecasts=[], decisions=[],
        equity=portfolio.cash, cash=portfolio.cash, exposure=Decimal(0), drawdown=0.0,
        status=status, day=None,
    )  # fmt: skip


@asynccontextmanager
async def booked(
    tmp_path: Path, funding: list[FundingEvent], max_leverage: float = 5
) -> AsyncIterator[Booked]:
    async with perp_live(spec("ETH", funding=funding), max_leverage=max_leverage) as live:
        path = tmp_path / "ledger.sqlite3"
        database = await Database.open(path)
        ledger = TradingLedger(database)
        await ledger.open("USDT", WALLET)
        await ReconciliationLedger(database).set_baseline({"USDT": WALLET}, START)
        made = Booked(live, path, database, ledger)
        try:
            yield made
        finally:
            await made.database.close()


def venue_income(live: PerpLive, kind: str) -> list[tuple[str, datetime, Decimal]]:
    """The emulator's own income rows of a kind (not read through ccxt): id, time, income."""
    return [
        (str(i.tran_id), i.time, i.income) for i in live.p.account.incomes if i.income_type == kind
    ]


async def test_venue_funding_is_booked_once_with_the_cash_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    async with booked(tmp_path, FUNDING) as b:
        await b.submit(Side.BUY, "2")  # long 2 ETH through every settlement
        await b.live.advance(6.5)  # past 12:00 and 16:00 (start 10:00:05)
        first = await reconcile_ledger(b.live.broker, b.ledger, b.live.now)
        assert first.ok, first.text
        assert len(first.funding) == 2
        await b.live.advance(1)  # past 17:00: the interval is now one hour
        second = await reconcile_ledger(b.live.broker, b.ledger, b.live.now)
        assert second.ok, second.text
        assert len(second.funding) == 1
        # The ledger's venue rows are the emulator's income rows, and the test's own sums:
        # paid = mark x size x rate (the long pays a positive rate).
        rows = await b.funding()
        venue = venue_income(b.live, "FUNDING_FEE")
        assert [(r.venue_id, r.at, -r.paid) for r in rows] == venue
        assert [r.paid for r in rows] == [e.mark * 2 * e.rate for e in FUNDING]  # type: ignore[operator]
        assert {(r.symbol, r.source) for r in rows} == {(ETH, "venue")}
        # A third reconciliation, nothing new: nothing booked twice, and the same rows offered
        # again to the ledger are not booked twice either (nor is the cash moved again).
        third = await reconcile_ledger(b.live.broker, b.ledger, b.live.now)
        assert third.ok, third.text
        assert third.funding == ()
        cash = (await b.ledger.load()).portfolio.cash
        again = replace(second, executions=(), fee_corrections=())
        await ReconciliationLedger(b.database).book(again, (await b.ledger.load()).portfolio)
        assert len(await b.funding()) == len(FUNDING)
        assert (await b.ledger.load()).portfolio.cash == cash
        # Closed, the ledger's cash is the venue's wallet (to its 8-decimal rounding).
        await b.submit(Side.SELL, "2")
        closing = await reconcile_ledger(b.live.broker, b.ledger, b.live.now)
        assert closing.ok, closing.text
        state = await b.ledger.load()
        assert abs(state.portfolio.cash - b.live.p.account.wallet) <= 4 * DUST
        # The cash holds the funding: the fills alone would be off by exactly its sum.
        fills_only = Portfolio.from_fills("USDT", WALLET, await b.ledger.fills()).cash
        assert state.portfolio.cash - fills_only == sum((i for _, _, i in venue), Decimal(0))
        # A restart reads the same cash back (load checks it against fills and funding), and
        # its reconciliation agrees and books nothing.
        await b.restart()
        assert (await b.ledger.load()).portfolio.cash == state.portfolio.cash
        after = await reconcile_ledger(b.live.broker, b.ledger, b.live.now)
        assert after.ok, after.text
        assert after.funding == ()
        assert after.executions == ()
        assert len(await b.funding()) == len(FUNDING)


async def test_the_venues_funding_is_counted_in_the_metrics_when_it_is_booked(
    tmp_path: Path,
) -> None:
    """The funding counters move at the reconciliation that books the venue's rows, not at the
    next start-up; a reconciliation that books nothing new counts nothing, and a failing
    counter never fails the reconciliation. Expected sums from the series (mark x size x rate:
    a long pays a positive rate, receives a negative one)."""
    registry = CollectorRegistry()
    metrics = PerpMetrics(registry, [ETH])

    def counted(name: str) -> float | None:
        return registry.get_sample_value(name, {"symbol": ETH})

    async with booked(tmp_path, FUNDING) as b:
        await b.submit(Side.BUY, "2")
        await b.live.advance(7.5)  # past every settlement
        report = await reconcile_ledger(
            b.live.broker, b.ledger, b.live.now, on_funding=metrics.funding_booked
        )
        assert report.ok, report.text
        paid = sum((e.mark * 2 * e.rate for e in FUNDING if e.rate > 0), Decimal(0))  # type: ignore[operator]
        received = -sum((e.mark * 2 * e.rate for e in FUNDING if e.rate < 0), Decimal(0))  # type: ignore[operator]
        assert counted("trader_perp_funding_paid_total") == pytest.approx(float(paid))
        assert counted("trader_perp_funding_received_total") == pytest.approx(float(received))
        again = await reconcile_ledger(
            b.live.broker, b.ledger, b.live.now, on_funding=metrics.funding_booked
        )
        assert again.ok, again.text
        assert counted("trader_perp_funding_paid_total") == pytest.approx(float(paid))

    def broken(rows: object) -> None:
        raise RuntimeError("the registry is gone")

    async with booked(tmp_path / "second", FUNDING) as b:
        await b.submit(Side.BUY, "2")
        await b.live.advance(7.5)
        report = await reconcile_ledger(b.live.broker, b.ledger, b.live.now, on_funding=broken)
        assert report.ok, report.text
        assert len(await b.funding()) == len(FUNDING)  # booked all the same


async def test_a_liquidation_at_the_venue_is_booked_and_recorded(tmp_path: Path) -> None:
    async with booked(tmp_path, [], max_leverage=10) as b:
        opened = await b.submit(Side.BUY, "1")  # 1 ETH long at 10x isolated
        entry = opened.fills[0].price
        ready = await reconcile_ledger(b.live.broker, b.ledger, b.live.now)
        assert ready.ok, ready.text
        # The mark goes 2 cents past the liquidation price the venue shows, in the 12:00 bar.
        (shown,) = ready.positions
        assert shown.liquidation_price is not None
        trigger = shown.liquidation_price - Decimal("0.02")
        listing = b.live.p.venue.perps.listing("ETHUSDT")
        assert listing is not None
        listing.mark_bars = with_bar(listing.mark_bars, 12, float(trigger), 100.2, 100.0)
        listing.__post_init__()
        await b.live.advance(3.5)  # past the close of that mark bar
        report = await reconcile_ledger(b.live.broker, b.ledger, b.live.now)
        assert b.live.position() == 0  # the venue closed it
        assert report.ok, report.text
        # Closed no lower than the bankruptcy price (isolated margin = notional / leverage:
        # zero margin at entry x (1 - 1/10)), with a clearance fee (INSURANCE_CLEAR).
        (trade,) = [t for t in b.live.p.account.trades if t.price != entry]
        (clearance,) = venue_income(b.live, "INSURANCE_CLEAR")
        assert entry * Decimal("0.9") <= trade.price < entry
        assert clearance[2] < 0
        (row,) = await b.liquidations()
        assert row.fill_id == f"ETHUSDT-{trade.trade_id}"
        assert (row.symbol, row.position, row.close_price) == (ETH, Decimal(1), trade.price)
        assert row.fee == -clearance[2]
        assert row.margin_mode == "isolated"
        assert "liquidation" in "\n".join(report.notes)
        state = await b.ledger.load()
        assert state.portfolio.amount(ETH) == 0
        (liquidated,) = [f for f in await b.ledger.fills() if f.fill_id == row.fill_id]
        assert (liquidated.side, liquidated.amount) == (Side.SELL, Decimal(1))
        assert abs(state.portfolio.cash - b.live.p.account.wallet) <= 4 * DUST
        # Once booked, it is not booked again, also after a restart.
        await b.restart()
        after = await reconcile_ledger(b.live.broker, b.ledger, b.live.now)
        assert after.ok, after.text
        assert after.liquidations == ()
        assert len(await b.liquidations()) == 1


_rows = st.lists(
    st.builds(
        VenueFunding,
        venue_id=st.text("0123456789", min_size=1, max_size=3),
        symbol=st.sampled_from([ETH, "SOL/USDT:USDT"]),
        amount=st.decimals(-10, 10, places=8),
        at=st.sampled_from([at(h, 0) for h in (8, 12, 16)]),
    ),
    max_size=8,
)


@given(booked=_rows, offered=_rows)
def test_rows_offered_again_are_booked_once(
    booked: list[VenueFunding], offered: list[VenueFunding]
) -> None:
    """The ledger's key is (symbol, time, source): of what is offered, each symbol and time
    the ledger does not hold is booked once, and the cash moves by exactly those rows."""
    new = unbooked(booked, offered)
    keys = [(r.symbol, r.at) for r in new]
    assert len(keys) == len(set(keys))
    assert set(keys) == {(r.symbol, r.at) for r in offered} - {(r.symbol, r.at) for r in booked}
    assert all(r in offered for r in new)
    portfolio = Portfolio("USDT", WALLET)
    assert funded(portfolio, new).cash == WALLET + sum((r.amount for r in new), Decimal(0))
