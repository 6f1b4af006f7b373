"""`broker.live_capital_fraction` and its ramp bound what live sizing takes from the equity;
paper and backtests size from all of it. Exact sizes, through the engine's own planner."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from pydantic import ValidationError

from tests.unit.engine.builders import T0, quote
from trader.config.schema import Settings
from trader.domain import Direction, Instrument, Signal
from trader.engine.planning import Book, Planner, live_capital
from trader.strategy import AtMarket, Decision, RestingLimits

SOL = Instrument("SOL/USDT", Decimal("0.01"), Decimal("0.001"), Decimal("0.001"), Decimal(5))
RISK = {"max_order_notional": 100000, "max_position_notional": 100000,
        "max_total_exposure": 100000}  # fmt: skip
PROMOTED = T0 - timedelta(days=3)


def settings(mode: str = "live", **broker: object) -> Settings:
    return Settings(
        strategy={"position_fraction": 0.5},
        risk=RISK,
        broker={"mode": mode, **broker},
        promotion={"at": PROMOTED} if "live_ramp" in broker else {},
    )


def market_amount(s: Settings, at=T0) -> Decimal:
    decision = Decision(
        Signal("simple", "SOL/USDT", at, Direction.LONG, "t"), AtMarket(Direction.LONG), 50.0
    )
    plan = Planner.of(s).plan(
        decision, at=at, quote=quote("99.99", "100.01"), instrument=SOL,
        book=Book(Decimal(0), Decimal(10000), Decimal(0), []),
    )  # fmt: skip
    (intent,) = plan.intents
    return intent.order.amount


def test_live_sizes_from_the_fraction_of_equity_and_paper_from_all_of_it():
    # 50% of 10,000 at the mid 100: 50; live with 10%: 5.
    assert market_amount(settings("paper", live_capital_fraction=0.1)) == Decimal("50.000")
    assert market_amount(settings("live")) == Decimal("50.000")
    assert market_amount(settings("live", live_capital_fraction=0.1)) == Decimal("5.000")
    assert live_capital(settings("paper", live_capital_fraction=0.1)) is None


def test_the_ramp_raises_the_share_with_the_days_since_the_promotion():
    s = settings("live", live_capital_fraction=0.1, live_ramp="0.1:7d,0.25:14d,1")
    assert market_amount(s, T0) == Decimal("5.000")  # day 3
    assert market_amount(s, PROMOTED + timedelta(days=7)) == Decimal("12.500")
    assert market_amount(s, PROMOTED + timedelta(days=30)) == Decimal("50.000")


def test_resting_limits_are_sized_from_the_bounded_equity_too():
    s = settings("live", live_capital_fraction=0.2)
    decision = Decision(
        Signal("maxdiff", "SOL/USDT", T0, Direction.FLAT, "t"),
        RestingLimits(Decimal(90), None, T0 + timedelta(hours=4)), 50.0,
    )  # fmt: skip
    plan = Planner.of(s).plan(
        decision, at=T0, quote=quote("99.99", "100.01"), instrument=SOL,
        book=Book(Decimal(0), Decimal(10000), Decimal(0), []),
    )  # fmt: skip
    (buy,) = plan.intents
    assert buy.order.amount == Decimal("11.111")  # 20% x 50% x 10,000 / 90, rounded down


def test_a_ramp_must_start_at_the_fraction_and_count_from_a_promotion():
    with pytest.raises(ValidationError, match=r"promotion\.at"):
        Settings(broker={"live_ramp": "0.1:7d,1", "live_capital_fraction": 0.1})
    with pytest.raises(ValidationError, match=r"starts at 0\.1, not at broker\.live_capital"):
        Settings(broker={"live_ramp": "0.1:7d,1", "live_capital_fraction": 0.2},
                 promotion={"at": PROMOTED})  # fmt: skip
    with pytest.raises(ValidationError, match="a ramp never falls"):
        Settings(broker={"live_ramp": "0.5:7d,0.1"}, promotion={"at": PROMOTED})
    with pytest.raises(ValidationError, match="with its zone"):
        Settings(promotion={"at": "2026-01-05T14:30:00"})
