"""Alpaca's account rules, checked before an order leaves: each refusal says why."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from trader.market.alpaca.rules import OrderFacts, refusal, time_in_force

STOCK = OrderFacts(
    symbol="AAPL/USD", side="buy", amount=Decimal(2), price=Decimal(190), limit=False,
    stock=True, asset={"tradable": True, "status": "active", "fractionable": False,
                       "shortable": False, "easy_to_borrow": False},
    held=Decimal(0), cash_available=Decimal(1000), market_open=True, extended=False,
    equity=Decimal(10_000), day_trades=0, other_side_today=False,
)  # fmt: skip


def test_an_order_within_every_rule_may_go():
    assert refusal(STOCK) is None


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"asset": STOCK.asset | {"tradable": False}}, "not tradable"),
        ({"amount": Decimal("1.5")}, "whole shares only"),
        ({"market_open": False}, "market for AAPL/USD is closed"),
        ({"side": "sell", "held": Decimal(1)}, "not shortable"),
        ({"side": "sell", "held": Decimal(2), "other_side_today": True, "day_trades": 3},
         "pattern-day-trader"),
        ({"amount": Decimal(6)}, "buying power 1000 is short of 1140"),
        ({"stock": False, "side": "sell", "held": Decimal(1)}, "does not short crypto"),
    ],
)  # fmt: skip
def test_each_rule_refuses_with_its_reason(change, words):
    why = refusal(replace(STOCK, **change))
    assert why is not None
    assert words in why


def test_a_fourth_day_trade_is_fine_above_the_equity_threshold_and_extended_hours_need_limits():
    fourth = replace(STOCK, side="sell", held=Decimal(2), other_side_today=True, day_trades=3)
    assert refusal(replace(fourth, equity=Decimal(30_000))) is None
    closed = replace(STOCK, market_open=False, extended=True)
    assert "limit orders only" in str(refusal(closed))
    assert refusal(replace(closed, limit=True)) is None


def test_time_in_force_follows_the_asset_class():
    assert time_in_force(stock=True, limit=False, fractional=False, extended=False) == "day"
    assert time_in_force(stock=True, limit=True, fractional=False, extended=False) == "gtc"
    assert time_in_force(stock=True, limit=True, fractional=True, extended=False) == "day"
    assert time_in_force(stock=False, limit=True, fractional=True, extended=False) == "gtc"
