"""The tick's parts on their own, on a real SQLite ledger and the paper broker: a stage that
fails is counted and swallowed, a broker halt is booked with the tick, a tick is committed or
rolled back whole, orders a restart left unsent are forgotten once their tick is gone, and
sizing sees only the orders that rested before the tick."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from tests.unit.engine.builders import T0, TF, quote
from trader.broker import PaperBroker
from trader.broker.protocol import BrokerHalt
from trader.clock import SimulatedClock
from trader.config.schema import Settings
from trader.domain import Bar, Instrument, Order, OrderStatus, OrderType, Quote, Side
from trader.engine.account import Account
from trader.engine.admission import Admission
from trader.engine.booking import TickBooking
from trader.engine.planning import Planner
from trader.engine.report import TickReport
from trader.engine.routing import OrderRouting
from trader.engine.sizing import books_for
from trader.engine.stages import StageRunner
from trader.engine.valuation import current_marks
from trader.engine.write_outage import WriteOutage
from trader.ledger import Database
from trader.ledger.trading import TradingLedger
from trader.logging import get_logger
from trader.market.quotes import FixedSpread
from trader.market.replay import ReplayMarketData
from trader.market.step import MarketDataStep, SymbolData, TickData
from trader.risk import RiskEngine, TradingState, TradingStatus

pytestmark = pytest.mark.integration
SOL = Instrument("SOL/USDT", Decimal("0.01"), Decimal("0.001"))
AT = T0 + timedelta(seconds=5)
SETTINGS = Settings(market={"symbols": ["SOL/USDT"], "context_bars": 16})


@dataclass
class Hooks:
    states: list[TradingStatus] = field(default_factory=list)

    def on_tick(self, report: TickReport) -> None:
        return None

    def on_state(self, status: TradingStatus) -> None:
        self.states.append(status)


@dataclass
class Parts:
    database: Database
    ledger: TradingLedger
    broker: PaperBroker
    market: MarketDataStep
    risk: RiskEngine
    account: Account
    stage: StageRunner
    booking: TickBooking
    routing: OrderRouting


@pytest.fixture
async def parts(tmp_path: Path) -> AsyncIterator[Parts]:
    database = await Database.open(tmp_path / "ledger.sqlite3")
    ledger = TradingLedger(database)
    state = await ledger.open("USDT", Decimal(10_000))
    broker = PaperBroker(SETTINGS.broker, {"SOL/USDT": SOL})
    feed = ReplayMarketData({}, SimulatedClock(T0), FixedSpread(5))
    market = MarketDataStep(feed, SETTINGS.market)
    risk = RiskEngine(
        SETTINGS.risk,
        maker_fee_bps=float(SETTINGS.broker.maker_fee_bps),
        taker_fee_bps=float(SETTINGS.broker.taker_fee_bps),
        max_quote_age=timedelta(seconds=30),
        status=TradingStatus(TradingState.ACTIVE, "started", T0),
    )
    log = get_logger("trader.engine")
    account = Account(state, broker, log)
    outage = WriteOutage(risk, database.path, log)
    yield Parts(
        database, ledger, broker, market, risk, account,
        StageRunner(risk, account, outage, log),
        TickBooking(
            market=market, risk=risk, ledger=ledger, account=account, outage=outage, log=log
        ),
        OrderRouting(
            market=market, broker=broker, ledger=ledger, instruments={"SOL/USDT": SOL},
            account=account, admission=Admission(risk, log), log=log,
        ),
    )  # fmt: skip
    await database.close()


def order(side: Side, amount: str, limit: str | None = None, *, at=AT, leg="x") -> Order:
    return Order.create(
        strategy="t", symbol="SOL/USDT", side=side,
        type=OrderType.LIMIT if limit else OrderType.MARKET, amount=Decimal(amount),
        limit_price=Decimal(limit) if limit else None, tick_time=at, leg=leg,
    )  # fmt: skip


def ready(at: datetime, q: Quote | None = None) -> TickData:
    return TickData(at, {"SOL/USDT": SymbolData("SOL/USDT", (), q or quote())}, {})


async def test_a_failing_stage_is_timed_counted_and_swallowed_but_cancellation_is_not(parts):
    report = TickReport(AT)
    with parts.stage(report, "forecast"):
        raise RuntimeError("the GPU fell over")
    with pytest.raises(asyncio.CancelledError), parts.stage(report, "ledger"):
        raise asyncio.CancelledError
    with parts.stage(report, "fills"):
        pass
    assert report.failed_stages == ["forecast"]
    assert set(report.timings) == {"forecast", "ledger", "fills"}
    assert parts.risk.state is TradingState.ACTIVE
    assert parts.account.halted_by is None


async def test_a_broker_halt_halts_trading_and_is_booked_with_the_tick(parts):
    report, hooks = TickReport(AT), Hooks()
    with parts.stage(report, "orders"):
        raise BrokerHalt("the venue refused our credentials")
    assert parts.risk.state is TradingState.HALTED
    await parts.booking.commit(None, AT, report, hooks)
    state = await parts.ledger.load()
    assert report.failed_stages == ["orders"]
    assert parts.account.halted_by is None
    assert state.status is not None
    assert state.status.state is TradingState.HALTED
    assert state.status.reason == "the venue refused our credentials"
    assert [s.reason for s in hooks.states] == ["the venue refused our credentials"]
    events = await parts.database.run(
        lambda c: c.execute("SELECT state, reason FROM trading_state_events").fetchall()
    )
    assert events == [("halted", "the venue refused our credentials")]


async def test_a_committed_tick_books_its_fills_and_cursor_and_a_rollback_forgets_them(parts):
    report, hooks = TickReport(AT), Hooks()
    parts.account.begin_tick()
    bought = await parts.broker.submit(order(Side.BUY, "2"), quote("99.99", "100.01"), AT)
    parts.account.book([bought], report)
    parts.account.cursor_moves["SOL/USDT"] = T0
    assert parts.account.portfolio.amount("SOL/USDT") == Decimal(2)
    await parts.booking.commit(ready(AT), AT, report, hooks)
    booked = await parts.ledger.load()
    assert booked.portfolio == parts.account.portfolio == report.portfolio
    assert booked.cursor == parts.account.cursor == {"SOL/USDT": T0}
    assert report.fills == list(bought.fills)
    assert hooks.states == []

    later = AT + TF.duration
    parts.account.begin_tick()
    sold = await parts.broker.submit(order(Side.SELL, "2", at=later), quote(), later)
    parts.account.book([sold], TickReport(later))
    assert parts.account.portfolio.amount("SOL/USDT") == 0
    await parts.booking.roll_back(later)
    assert parts.account.portfolio == booked.portfolio
    assert parts.account.executions == []


async def test_orders_a_restart_left_unsent_are_cancelled_once_their_tick_is_gone(parts):
    pending = order(Side.BUY, "1", "90")
    await parts.ledger.record_orders([pending], AT, "created")
    parts.account.recover(await parts.ledger.load())
    assert set(parts.account.unsent) == {pending.client_order_id}
    later, report = AT + TF.duration, TickReport(AT + TF.duration)
    parts.account.begin_tick()
    data = TickData(later, {}, {})
    await parts.routing.run(
        {}, data, later, report, Planner(SETTINGS.strategy, SETTINGS.risk), True
    )
    assert parts.account.unsent == {}
    assert parts.account.recent == {}
    assert [(o.client_order_id, o.status) for o in report.orders] == [
        (pending.client_order_id, OrderStatus.CANCELED)
    ]
    await parts.booking.commit(data, later, report, Hooks())
    assert (await parts.ledger.load()).open_orders == []


async def test_sizing_values_at_the_quote_and_leaves_the_ticks_own_orders_alone(parts):
    window = parts.market.windows["SOL/USDT"]
    window.add(Bar("SOL/USDT", TF, T0 - TF.duration, 100, 101, 99, 100.5, 10), after_hole=False)
    assert current_marks(parts.market.windows, None) == {"SOL/USDT": Decimal("100.5")}
    bought = await parts.broker.submit(order(Side.BUY, "2", leg="m"), quote(), AT)
    parts.account.book([bought], TickReport(AT))
    data = ready(AT, quote("99", "101"))
    marks = current_marks(parts.market.windows, data)
    assert marks == {"SOL/USDT": Decimal(100)}
    earlier = await parts.broker.submit(order(Side.BUY, "1", "90", at=T0), quote(), T0)
    await parts.broker.submit(order(Side.BUY, "1", "91"), quote(), AT)
    books = books_for(["SOL/USDT"], AT, parts.account.portfolio, marks, parts.broker.open_orders())
    (book,) = books.values()
    assert book.position == Decimal(2)
    assert book.equity == parts.account.portfolio.equity(marks)
    assert book.others_exposure == 0
    assert [o.client_order_id for o in book.resting] == [earlier.order.client_order_id]
