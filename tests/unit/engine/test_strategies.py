"""Each strategy's decision, pinned on hand-built forecasts (costs: taker 10, maker 2 bps)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from tests.unit.engine.builders import T0, context, forecast, quote
from trader.domain import Direction, QuoteSource
from trader.strategy import AtMarket, RestingLimits
from trader.strategy.ci_guard import CiGuardStrategy
from trader.strategy.consensus import ConsensusGate
from trader.strategy.maxdiff import MaxDiffStrategy
from trader.strategy.simple import SimpleStrategy


@pytest.mark.parametrize(
    ("median", "allow_short", "direction", "reason"),
    [
        (100.5, False, Direction.LONG, "median forecast return +50.0 bps > 0"),
        (99.5, False, Direction.FLAT, "no trade: median forecast return -50.0 bps (long only)"),
        (99.5, True, Direction.SHORT, "median forecast return -50.0 bps < 0"),
        (100.0, True, Direction.FLAT, "no trade: median forecast return +0.0 bps (no move)"),
    ],
)
def test_simple_follows_the_sign_of_the_median(median, allow_short, direction, reason):
    decision = SimpleStrategy().decide(context(forecast(median), allow_short=allow_short))
    assert decision.signal.direction is direction
    assert decision.signal.reason == reason
    assert decision.plan == AtMarket(direction)
    assert decision.signal.inputs["median_return_bps"] == pytest.approx((median - 100) * 100)
    if direction is not Direction.FLAT:
        assert decision.edge_bps == pytest.approx(50.0)


def test_ci_guard_trades_only_past_its_band_and_its_costs():
    strategy = CiGuardStrategy(0.4, 0.6, multiplier=1.0)
    # Band: q0.6 - q0.4 = 2 * width (1.0 -> 2.0 price = 200 bps); costs 2*10 + 2 bps spread.
    wide = strategy.decide(context(forecast(101.0, width=1.0)))
    assert wide.signal.direction is Direction.FLAT
    assert wide.signal.reason == "no trade: forecast +100.0 bps inside its band 200.0 bps"
    narrow = strategy.decide(context(forecast(101.0, width=0.05)))
    assert narrow.signal.direction is Direction.LONG
    assert narrow.signal.reason == "forecast +100.0 bps clears band 10.0 and costs 22.0"
    assert narrow.edge_bps == pytest.approx(100.0)
    cheap = strategy.decide(context(forecast(100.15, width=0.01)))
    assert cheap.signal.reason == "no trade: forecast +15.0 bps does not cover costs 22.0 bps"
    short = strategy.decide(context(forecast(99.0, width=0.05), allow_short=True))
    assert short.signal.direction is Direction.SHORT
    assert strategy.decide(context(forecast(99.0, width=0.05))).signal.reason == (
        "no trade: forecast -100.0 bps is short-side and shorting is off"
    )


def test_ci_guard_treats_an_unknown_spread_as_no_trade_never_as_zero():
    synthetic = quote("100", source=QuoteSource.SYNTHETIC)
    decision = CiGuardStrategy().decide(context(forecast(105.0, width=0.01), q=synthetic))
    assert decision.signal.direction is Direction.FLAT
    assert decision.signal.reason == "no trade: spread unknown (synthetic quote)"


def test_the_band_multiplier_widens_the_band():
    assert (
        CiGuardStrategy(multiplier=1.0).decide(context(forecast(101, width=0.4))).signal.direction
        is Direction.LONG
    )
    assert (
        CiGuardStrategy(multiplier=2.0).decide(context(forecast(101, width=0.4))).signal.direction
        is Direction.FLAT
    )


def test_maxdiff_rests_a_buy_near_the_forecast_low_when_flat():
    f = forecast(100.0, width=0.1, high=103.0, low=97.0, steps=3)
    decision = MaxDiffStrategy(0.2, 0.8).decide(context(f))
    plan = decision.plan
    assert isinstance(plan, RestingLimits)
    assert plan.buy_price == Decimal(repr(97.0 - 0.03))  # q0.2 of the low: 97 + (0.2-0.5)*0.1
    assert plan.sell_price is None  # long only
    assert plan.expires_at == T0 + timedelta(seconds=5) + timedelta(hours=3)
    assert decision.signal.direction is Direction.LONG
    assert decision.signal.reason == "rest a buy at 96.97"
    assert decision.edge_bps == pytest.approx((103.03 - 96.97) / 96.97 * 10_000)


def test_maxdiff_flat_with_shorting_rests_both_sides():
    f = forecast(100.0, width=0.1, high=103.0, low=97.0)
    decision = MaxDiffStrategy().decide(context(f, allow_short=True))
    assert isinstance(decision.plan, RestingLimits)
    assert decision.plan.buy_price is not None
    assert decision.plan.sell_price == Decimal(repr(103.0 + 0.03))
    assert decision.signal.reason == "rest a buy at 96.97 and a sell at 103.03"


def test_maxdiff_holding_takes_profit_at_the_forecast_high_or_exits_past_it():
    f = forecast(100.0, width=0.1, high=103.0, low=97.0)
    long = MaxDiffStrategy().decide(context(f, position="2"))
    assert long.plan == RestingLimits(None, Decimal(repr(103.03)), long.plan.expires_at)  # type: ignore[union-attr]
    assert long.signal.reason == "take profit at the forecast high"
    assert long.edge_bps is None
    below = forecast(100.0, width=0.1, high=99.0, low=97.0)
    exit_now = MaxDiffStrategy().decide(context(below, position="2"))
    assert exit_now.plan == AtMarket(Direction.FLAT)
    assert exit_now.signal.reason == "forecast high is below the bid: exit"
    short = MaxDiffStrategy().decide(context(f, position="-2", allow_short=True))
    assert short.plan == RestingLimits(Decimal(repr(96.97)), None, short.plan.expires_at)  # type: ignore[union-attr]


def test_maxdiff_stands_aside_when_the_range_does_not_pay_or_does_not_straddle():
    tight = forecast(100.0, width=0.001, high=100.02, low=99.99)
    assert (
        MaxDiffStrategy()
        .decide(context(tight))
        .signal.reason.startswith("no trade: forecast range")
    )
    above = forecast(102.0, width=0.1, high=104.0, low=101.0)
    assert MaxDiffStrategy().decide(context(above)).signal.reason == (
        "no trade: the forecast range does not straddle the market"
    )


def test_the_consensus_gate_needs_every_model_to_agree():
    gate = ConsensusGate(SimpleStrategy())
    up, down = forecast(101, model="toto"), forecast(99, model="kronos")
    assert gate.name == "simple+consensus"
    disagree = gate.decide(context(up, others={"kronos": down}))
    assert disagree.signal.direction is Direction.FLAT
    assert (
        disagree.signal.reason == "no trade: models disagree (kronos -100.0 bps, toto +100.0 bps)"
    )
    agree = gate.decide(context(up, others={"kronos": forecast(100.2, model="kronos")}))
    assert agree.signal.direction is Direction.LONG
    alone = gate.decide(context(up))
    assert alone.signal.reason == "no trade: consensus needs two models, has toto"
