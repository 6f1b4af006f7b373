"""The liquidation buffer rule in the tick's orders stage, on a real SQLite ledger and the paper
broker: a position whose mark is inside the buffer of its liquidation price is reduced by a
market sell before (and instead of) what the strategy wanted, the reduced position holds the
buffer again, and with the rule off (`risk.liquidation_buffer = 0`) nothing is sent.

The account: 1,000 USDT of margin, then a buy of 0.5 BTC at 30,000 (the engine books a perp
like spot: cash -14,000). As Binance counts it: wallet 1,000, long 0.5 @ 30,000, cross 20x. At
a mark of 29,000 its liquidation price is 28,112.45 (Binance's FAQ formula: 1000 + 0.5 (P -
30000) = 0.5 P x 0.004, BTCUSDT bracket 1), 3.06% away; 0.180 BTC sold at the mark brings it
back to 5% at the mark, a few steps more once the fill's costs are paid (the arithmetic is in
tests/unit/risk/test_liquidation_rule.py). The check below is the liquidation condition
itself: margin balance above maintenance margin at the price 5% below the mark, on the book
after the real fill (at the bid, with the fee).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from tests.unit.domain.perp.tables import BTCUSDT_NOW
from tests.unit.engine.builders import T0
from trader.broker import PaperBroker
from trader.clock import SimulatedClock
from trader.config.schema import Settings
from trader.domain import (
    Direction,
    Fill,
    Instrument,
    Liquidity,
    Portfolio,
    Quote,
    QuoteSource,
    Side,
    Signal,
)
from trader.domain.order import client_order_id
from trader.domain.perp import LeverageBrackets, MarginMode
from trader.engine.account import Account
from trader.engine.admission import Admission
from trader.engine.liquidation_guard import LiquidationGuard
from trader.engine.planning import Planner
from trader.engine.report import TickReport
from trader.engine.routing import OrderRouting
from trader.ledger import Database
from trader.ledger.trading import TradingLedger
from trader.logging import get_logger
from trader.market.quotes import FixedSpread
from trader.market.replay import ReplayMarketData
from trader.market.step import MarketDataStep, SymbolData, TickData
from trader.risk import RiskEngine, TradingState, TradingStatus
from trader.strategy.base import AtMarket, Decision

pytestmark = pytest.mark.integration
BTC = "BTC/USDT"
D = Decimal
AT = T0 + timedelta(seconds=5)
BTC_PERP = Instrument(BTC, D("0.1"), D("0.001"), kind="perp")
BRACKETS = {BTC: LeverageBrackets.from_binance(BTC, BTCUSDT_NOW)}


def settings(buffer: float) -> Settings:
    return Settings(
        market={"symbols": [BTC], "context_bars": 16, "kind": "perp"},
        risk={"liquidation_buffer": buffer, "max_leverage": 20.0, "min_edge_bps": 0.0,
              "max_order_notional": 100_000, "max_position_notional": 100_000,
              "max_total_exposure": 100_000},
        broker={"slippage_bps": 0},
    )  # fmt: skip


@dataclass
class Parts:
    account: Account
    routing: OrderRouting
    risk: RiskEngine
    planner: Planner


async def parts_for(tmp_path: Path, buffer: float) -> tuple[Database, Parts]:
    config = settings(buffer)
    database = await Database.open(tmp_path / "ledger.sqlite3")
    state = await TradingLedger(database).open("USDT", D(1000))
    broker = PaperBroker(config.broker, {BTC: BTC_PERP})
    market = MarketDataStep(ReplayMarketData({}, SimulatedClock(T0), FixedSpread(5)), config.market)
    risk = RiskEngine(
        config.risk, maker_fee_bps=2.0, taker_fee_bps=10.0, max_quote_age=timedelta(seconds=30),
        status=TradingStatus(TradingState.ACTIVE, "started", T0),
    )  # fmt: skip
    log = get_logger("trader.engine")
    account = Account(state, broker, log)
    fill = Fill("f0", "o0", BTC, Side.BUY, D(30000), D("0.5"), D(0), "USDT", Liquidity.TAKER, T0)
    account.portfolio = Portfolio("USDT", D(1000)).apply(fill)
    guard = LiquidationGuard(risk, BRACKETS, 20, MarginMode.CROSS, {BTC: "simple"}, log)
    routing = OrderRouting(
        market=market, broker=broker, ledger=TradingLedger(database), instruments={BTC: BTC_PERP},
        account=account, admission=Admission(risk, log, perp=True), log=log, guard=guard,
    )  # fmt: skip
    return database, Parts(account, routing, risk, Planner.of(config))


def tick(mid: str) -> TickData:
    half = D(5)
    q = Quote(BTC, D(mid) - half, D(mid) + half, T0, QuoteSource.REAL)
    return TickData(AT, {BTC: SymbolData(BTC, (), q)}, {})


def buy_more() -> dict[str, Decision]:
    signal = Signal("simple", BTC, AT, Direction.LONG, "median forecast return +80 bps", {})
    return {BTC: Decision(signal, AtMarket(Direction.LONG), 80.0)}


def holds_buffer(portfolio: Portfolio, mark: Decimal) -> bool:
    """Margin balance above maintenance margin at the price 5% below the mark (one long)."""
    size = portfolio.amount(BTC)
    wallet = portfolio.cash + portfolio.positions[BTC].cost  # cash + size x entry
    entry = portfolio.positions[BTC].cost / size
    price = mark * D("0.95")
    return wallet + size * (price - entry) >= size * price * D("0.004")  # bracket 1: cum 0


@pytest.fixture
async def on(tmp_path: Path) -> AsyncIterator[Parts]:
    database, parts = await parts_for(tmp_path, 0.05)
    yield parts
    await database.close()


async def test_a_position_inside_the_buffer_is_reduced_instead_of_added_to(on):
    report = TickReport(AT)
    assert not holds_buffer(on.account.portfolio, D(29000))
    await on.routing.run(buy_more(), tick("29000"), AT, report, on.planner, True)
    [order] = report.orders
    # More than the 0.180 that restores the buffer at the mark: the fill's costs (half the
    # 10-wide spread and the 10 bps taker fee) are covered too.
    assert order.side is Side.SELL
    assert order.amount > D("0.180")
    assert order.client_order_id == client_order_id("simple", BTC, AT, "liquidation_buffer")
    assert report.refusals == []
    [fill] = report.fills
    assert fill.price == D(28995)  # the bid, no slippage
    assert on.account.portfolio.amount(BTC) == D("0.5") - order.amount
    assert holds_buffer(on.account.portfolio, D(29000))
    # One step less, sold at the same price and fee, would not have held it.
    less = order.amount - D("0.001")
    fee = (less * fill.price * D("0.001")).quantize(D("0.00000001"))
    undone = Fill("f9", "o9", BTC, Side.SELL, fill.price, less, fee, "USDT", Liquidity.TAKER, AT)
    start = Portfolio("USDT", D(1000)).apply(
        Fill("f0", "o0", BTC, Side.BUY, D(30000), D("0.5"), D(0), "USDT", Liquidity.TAKER, T0)
    )
    assert not holds_buffer(start.apply(undone), D(29000))
    assert on.risk.reductions == {BTC: 1}


async def test_with_the_rule_off_nothing_is_reduced(tmp_path):
    database, parts = await parts_for(tmp_path, 0.0)
    try:
        report = TickReport(AT)
        await parts.routing.run({}, tick("29000"), AT, report, parts.planner, True)
        assert report.orders == []
        assert parts.account.portfolio.amount(BTC) == D("0.5")
        assert parts.risk.reductions == {}
    finally:
        await database.close()
