"""From decisions to orders: sizes, caps, top-ups, exits and replacement of resting orders."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from tests.unit.engine.builders import T0, quote
from trader.config.trading_settings import RiskSettings, StrategySettings
from trader.domain import (
    Direction,
    Instrument,
    Order,
    OrderType,
    Side,
    Signal,
    client_order_id,
)
from trader.engine.planning import Book, Planner
from trader.strategy import AtMarket, Decision, RestingLimits

AT = T0 + timedelta(seconds=5)
SOL = Instrument("SOL/USDT", Decimal("0.01"), Decimal("0.001"), Decimal("0.001"), Decimal(5))
PLANNER = Planner(
    StrategySettings(position_fraction=0.2),
    RiskSettings(max_order_notional=Decimal(1500), max_position_notional=Decimal(5000),
                 max_total_exposure=Decimal(8000)),
)  # fmt: skip


def decide(plan, direction=Direction.LONG, edge=40.0) -> Decision:
    return Decision(Signal("simple", "SOL/USDT", AT, direction, "test"), plan, edge)


def book(position="0", equity="10000", resting=(), others="0") -> Book:
    return Book(Decimal(position), Decimal(equity), Decimal(others), list(resting))


def plan(decision, b):
    return PLANNER.plan(decision, at=AT, quote=quote("99.99", "100.01"), instrument=SOL, book=b)


def test_an_entry_is_a_share_of_equity_capped_at_the_largest_order():
    result = plan(decide(AtMarket(Direction.LONG)), book())
    (intent,) = result.intents
    assert intent.order.type is OrderType.MARKET
    assert intent.order.side is Side.BUY
    # Target 2000 / 100 = 20, but one order is at most 1500 / ask 100.01 = 14.998.
    assert intent.order.amount == Decimal("14.998")
    assert intent.price == Decimal("100.01")
    assert intent.edge_bps == 40.0


def test_a_held_position_is_topped_up_but_never_trimmed():
    (top_up,) = plan(decide(AtMarket(Direction.LONG)), book(position="14.998")).intents
    assert top_up.order.amount == Decimal("5.002")
    assert plan(decide(AtMarket(Direction.LONG)), book(position="25")).intents == ()


def test_flat_closes_the_position_and_a_reversal_goes_through_zero_to_the_target():
    (close,) = plan(decide(AtMarket(Direction.FLAT), Direction.FLAT), book(position="3.5")).intents
    assert (close.order.side, close.order.amount) == (Side.SELL, Decimal("3.5"))
    (flip,) = plan(decide(AtMarket(Direction.SHORT), Direction.SHORT), book(position="3.5")).intents
    assert flip.order.side is Side.SELL
    assert flip.order.amount == Decimal("15.001")  # 23.5 wanted; one order: 1500 / bid 99.99


def test_resting_limits_replace_earlier_resting_orders_but_never_this_ticks_own():
    old = Order.create(
        strategy="maxdiff", symbol="SOL/USDT", side=Side.BUY, type=OrderType.LIMIT,
        amount=Decimal(1), limit_price=Decimal(90), tick_time=T0 - timedelta(hours=1), leg="buy",
    )  # fmt: skip
    limits = RestingLimits(Decimal("97.123"), Decimal("103.456"), AT + timedelta(hours=1))
    result = plan(decide(limits), book(resting=[old], position="2"))
    assert result.cancels == (old,)
    buy, sell = result.intents
    assert buy.order.limit_price == Decimal("97.12")  # a buy rounds down
    assert buy.order.amount == Decimal("15.444")  # entry: 1500 / 97.12, capped
    assert buy.edge_bps == 40.0
    assert sell.order.limit_price == Decimal("103.46")  # a sell rounds up
    assert sell.order.amount == Decimal(2)  # the take-profit closes what is held
    assert sell.edge_bps is None
    assert sell.order.expires_at == AT + timedelta(hours=1)
    # Ids come from (strategy, symbol, tick, leg) alone.
    assert {buy.order.client_order_id, sell.order.client_order_id} == {
        client_order_id("simple", "SOL/USDT", AT, leg) for leg in ("buy", "sell")
    }


def test_no_order_below_the_markets_minimums():
    tiny = plan(decide(AtMarket(Direction.LONG)), book(equity="20"))
    assert tiny.intents == ()
