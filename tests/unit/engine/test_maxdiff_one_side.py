"""maxdiff on a venue that forbids resting both sides of a symbol (Alpaca: an order opposite a
resting one is refused 422 {"code": 42210000, "message": "potential wash trade detected. use
complex orders"}, github.com/Petersoj/alpaca-java issue #145; "reject any order where there is
an existing open order having the opposite side", forum.alpaca.markets/t/wash-trade-rules/18200):
one side at a time, chosen by the forecast, and the settings that say which venue forbids it."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.unit.engine.builders import context, forecast
from trader.config.market_settings import ExchangeSettings
from trader.config.trading_settings import StrategySettings
from trader.domain import Direction
from trader.strategy import RestingLimits
from trader.strategy.maxdiff import MaxDiffStrategy
from trader.strategy.select import strategies_for

ONE_SIDE = MaxDiffStrategy(both_sides=False)


def limits(median: float, *, position: str = "0") -> tuple[RestingLimits, str, Direction]:
    f = forecast(median, width=0.1, high=103.0, low=97.0)
    decision = ONE_SIDE.decide(context(f, allow_short=True, position=position))
    assert isinstance(decision.plan, RestingLimits)
    return decision.plan, decision.signal.reason, decision.signal.direction


def test_flat_it_rests_the_buy_when_the_median_forecast_is_above_the_last_close():
    plan, reason, direction = limits(100.5)  # the last close is 100
    assert plan.buy_price == Decimal(repr(96.97))
    assert plan.sell_price is None
    assert direction is Direction.LONG
    assert reason == (
        "rest a buy at 96.97 (one side at a time, as the venue requires: median +50.0 bps)"
    )


def test_flat_it_rests_the_sell_when_the_median_forecast_is_below():
    plan, reason, direction = limits(99.5)
    assert plan.buy_price is None
    assert plan.sell_price == Decimal(repr(103.03))
    assert direction is Direction.SHORT
    assert reason.startswith("rest a sell at 103.03 (one side at a time")
    assert "median -50.0 bps" in reason


def test_no_drift_rests_the_buy():
    plan, reason, _ = limits(100.0)
    assert plan.buy_price is not None
    assert plan.sell_price is None
    assert reason.endswith("(one side at a time, as the venue requires: no drift)")


@pytest.mark.parametrize(("position", "buy", "sell"), [("2", False, True), ("-2", True, False)])
def test_holding_only_the_side_that_reduces_the_position_rests_whatever_the_forecast(
    position, buy, sell
):
    # The median favours a buy, but a long position takes its profit with the sell alone.
    for median in (99.5, 100.5):
        plan, _, _ = limits(median, position=position)
        assert (plan.buy_price is not None, plan.sell_price is not None) == (buy, sell)


def test_only_one_side_in_reach_rests_that_side_even_against_the_forecast():
    # The buy at the low is not below the bid: only the short entry straddles the market.
    f = forecast(99.0, width=0.1, high=103.0, low=100.5)
    decision = ONE_SIDE.decide(context(f, allow_short=True))
    assert isinstance(decision.plan, RestingLimits)
    assert decision.plan.buy_price is None
    assert decision.plan.sell_price is not None
    assert "one side at a time" not in decision.signal.reason  # nothing had to be dropped


def test_where_both_sides_may_rest_it_still_rests_both():
    f = forecast(100.5, width=0.1, high=103.0, low=97.0)
    decision = MaxDiffStrategy().decide(context(f, allow_short=True))
    assert isinstance(decision.plan, RestingLimits)
    assert decision.plan.buy_price is not None
    assert decision.plan.sell_price is not None
    assert decision.signal.direction is Direction.FLAT


@pytest.mark.parametrize(
    ("venue", "setting", "both"),
    [
        ("alpaca", "auto", False),
        ("ccxt", "auto", True),
        ("ccxt", "forbidden", False),  # a backtest "as Alpaca"
        ("alpaca", "allowed", True),
    ],
)
def test_the_venue_capability_reaches_the_engines_strategies(venue, setting, both):
    exchange = ExchangeSettings(venue=venue, resting_both_sides=setting)
    assert exchange.rests_both_sides is both
    built = strategies_for(
        StrategySettings(name="maxdiff", allow_short=True),
        ["SOL/USDT"],
        both_sides=exchange.rests_both_sides,
    )
    f = forecast(100.5, width=0.1, high=103.0, low=97.0)
    plan = built["SOL/USDT"].decide(context(f, allow_short=True)).plan
    assert isinstance(plan, RestingLimits)
    assert (plan.sell_price is not None) is both
