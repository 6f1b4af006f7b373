"""The buffer rule in the orders stage (trader/engine/liquidation_guard.py): the engine's book
read as the perpetual account, a reduction replacing the symbol's plan (its resting orders
cancelled, the strategy's orders dropped), and the order judged as a reducing one.

The account: 1,000 cash, then a buy of 0.5 BTC at 30,000 (the engine books a perp like spot,
cash -14,000): as Binance counts it, wallet 1,000 and long 0.5 @ 30,000, cross. At a mark of
29,000 the liquidation price is 28,112.45 (1000 + 0.5 (P - 30000) = 0.5 P x 0.004, Binance's
FAQ formula), 3.06% away: inside a 5% buffer; 0.180 BTC sold at the mark restores it (worked
in test_liquidation_rule.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

import structlog

from tests.unit.domain.perp.tables import BTCUSDT_NOW
from tests.unit.engine.builders import T0
from tests.unit.risk.test_liquidation_rule import least_reduction
from trader.config.trading_settings import RiskSettings
from trader.domain import (
    Fill,
    Instrument,
    Liquidity,
    Order,
    OrderType,
    Portfolio,
    Quote,
    QuoteSource,
    Side,
)
from trader.domain.perp import LeverageBrackets, MarginMode
from trader.engine.liquidation_guard import LiquidationGuard
from trader.engine.planning import Book, Intent, OrderPlan
from trader.risk import OrderCheck, RiskEngine, TradingState, TradingStatus

BTC = "BTC/USDT"
D = Decimal
AT = T0 + timedelta(seconds=5)
INSTRUMENTS = {BTC: Instrument(BTC, D("0.1"), D("0.001"), kind="perp")}
LOG = structlog.get_logger("test")


@dataclass(frozen=True)
class Ready:
    quote: Quote


@dataclass(frozen=True)
class Data:
    ready: dict[str, Ready]


def risk(buffer: float = 0.05) -> RiskEngine:
    settings = RiskSettings(liquidation_buffer=buffer, max_leverage=20.0, min_edge_bps=0.0)
    return RiskEngine(
        settings, maker_fee_bps=2.0, taker_fee_bps=10.0, max_quote_age=timedelta(seconds=30),
        status=TradingStatus(TradingState.ACTIVE, "test", T0),
    )  # fmt: skip


def guard(engine: RiskEngine) -> LiquidationGuard:
    brackets = {BTC: LeverageBrackets.from_binance(BTC, BTCUSDT_NOW)}
    return LiquidationGuard(engine, brackets, 20, MarginMode.CROSS, {BTC: "simple"}, LOG)


def portfolio() -> Portfolio:
    fill = Fill("f1", "o1", BTC, Side.BUY, D(30000), D("0.5"), D(0), "USDT", Liquidity.TAKER, T0)
    return Portfolio("USDT", D(1000)).apply(fill)


BTC_QUOTE = Quote(BTC, D(28990), D(29010), T0, QuoteSource.REAL)
# Selling at the bid 28,990 with a mark of 29,000 costs 10 / 29,000 of the notional, and the
# taker fee 10 bps: the reduction covers both, so the buffer holds after the fill.
REDUCED = least_reduction(D(1000), D("0.5"), D(30000), D(29000), D("0.001") + D(10) / 29000)


def resting() -> Order:
    return Order.create(
        strategy="simple", symbol=BTC, side=Side.BUY, type=OrderType.LIMIT, amount=D("0.1"),
        limit_price=D(28000), tick_time=T0 - timedelta(hours=1), leg="buy",
    )  # fmt: skip


def test_a_reduction_replaces_the_strategys_plan_and_cancels_what_rests():
    engine = risk()
    adding = Intent(
        "simple", BTC, Side.BUY, OrderType.MARKET, D("0.1"), None, AT, "market", D(29010), 50.0
    )
    book = Book(D("0.5"), D(500), D(0), [resting()])
    plans, books = guard(engine).apply(
        {BTC: OrderPlan((resting(),), (adding,))}, {BTC: book},
        portfolio=portfolio(), marks={BTC: D(29000)}, instruments=INSTRUMENTS,
        data=Data({BTC: Ready(BTC_QUOTE)}), at=AT, open_orders=[resting()],  # type: ignore[arg-type]
    )  # fmt: skip
    [intent] = plans[BTC].intents
    assert plans[BTC].cancels == (resting(),)
    assert (intent.side, intent.type, intent.amount, intent.leg) == (
        Side.SELL, OrderType.MARKET, REDUCED, "liquidation_buffer"
    )  # fmt: skip
    assert intent.price == D(28990)  # the bid: a sell crosses to it
    assert intent.edge_bps is None
    assert engine.reductions == {BTC: 1}
    # Judged as any order: it reduces, so the size, leverage and edge rules let it go.
    check = OrderCheck(intent, intent.price, BTC_QUOTE, D("0.5"), D(29000), D(0), None)
    assert engine.judge(check, AT).accepted
    assert books[BTC] is book


def test_a_symbol_the_strategies_left_alone_gets_its_reduction_too():
    plans, books = guard(risk()).apply(
        {}, {}, portfolio=portfolio(), marks={BTC: D(29000)}, instruments=INSTRUMENTS,
        data=Data({BTC: Ready(BTC_QUOTE)}), at=AT, open_orders=[resting()],  # type: ignore[arg-type]
    )  # fmt: skip
    assert [i.amount for i in plans[BTC].intents] == [REDUCED]
    assert plans[BTC].cancels == (resting(),)
    assert books[BTC].position == D("0.5")


def test_nothing_changes_outside_the_buffer_or_with_the_rule_off():
    plan = OrderPlan((), ())
    for engine, mark in ((risk(), "31000"), (risk(buffer=0.0), "29000")):
        g = guard(engine)
        assert not g.pending(portfolio(), {BTC: D(mark)}, INSTRUMENTS)
        plans, _ = g.apply(
            {BTC: plan}, {}, portfolio=portfolio(), marks={BTC: D(mark)},
            instruments=INSTRUMENTS, data=Data({}), at=AT, open_orders=[],  # type: ignore[arg-type]
        )  # fmt: skip
        assert plans == {BTC: plan}
    assert guard(risk()).pending(portfolio(), {BTC: D(29000)}, INSTRUMENTS)
    assert risk().reductions == {}


def test_a_book_the_rule_cannot_read_is_said_and_left_alone():
    engine = risk()
    g = LiquidationGuard(engine, {}, 20, MarginMode.CROSS, {}, LOG)  # no brackets for BTC
    assert g.wanted(portfolio(), {BTC: D(29000)}, INSTRUMENTS) == []
    assert g.pending(portfolio(), {BTC: D(29000)}, INSTRUMENTS)  # the orders stage says why
