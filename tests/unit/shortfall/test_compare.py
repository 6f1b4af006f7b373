"""The order-by-order comparison's verdicts, on hand-made orders and fills: what the venue gave
against what the model gave (missed, partial, extra, the same or different fills), and an order
placed with other terms."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from trader.domain import Fill, Liquidity, Order, OrderStatus, OrderType, Side
from trader.shortfall.compare import Filled, FillOutcome, OrderComparison

AT = datetime(2024, 1, 31, 12, tzinfo=UTC)
ORDER = Order("c1", "simple", "SOL/USDT", Side.BUY, OrderType.LIMIT, Decimal(2), Decimal(20), AT,
              OrderStatus.OPEN)  # fmt: skip


def fill(n: int, amount: str, price: str = "20", fee: str = "0.04", minutes: int = 60) -> Fill:
    return Fill(f"f{n}", "c1", "SOL/USDT", Side.BUY, Decimal(price), Decimal(amount),
                Decimal(fee), "USDT", Liquidity.MAKER, AT + timedelta(minutes=minutes))  # fmt: skip


def compared(
    actual: tuple[Fill, ...],
    modelled: tuple[Fill, ...],
    actual_order: Order | None = ORDER,
    modelled_order: Order | None = ORDER,
) -> OrderComparison:
    return OrderComparison(
        "c1", "SOL/USDT", Side.BUY, OrderType.LIMIT, AT, actual_order, modelled_order,
        Filled(actual), Filled(modelled), None, None,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("actual", "modelled", "outcome"),
    [
        ((fill(1, "2"),), (fill(2, "2"),), FillOutcome.SAME),
        ((fill(1, "1"), fill(2, "1")), (fill(3, "2"),), FillOutcome.DIFFERENT),
        ((fill(1, "2", price="20.01"),), (fill(2, "2"),), FillOutcome.DIFFERENT),
        ((fill(1, "2", minutes=61),), (fill(2, "2"),), FillOutcome.DIFFERENT),
        ((fill(1, "2", fee="0.05"),), (fill(2, "2"),), FillOutcome.DIFFERENT),
        ((fill(1, "0.5"),), (fill(2, "2"),), FillOutcome.PARTIAL),
        ((fill(1, "2"),), (fill(2, "0.5"),), FillOutcome.OVERFILLED),
        ((), (fill(2, "2"),), FillOutcome.MISSED),
        ((fill(1, "2"),), (), FillOutcome.EXTRA),
        ((), (), FillOutcome.NEITHER),
    ],
)
def test_what_the_venue_gave_against_the_model(actual, modelled, outcome):
    assert compared(actual, modelled).outcome is outcome


def test_an_order_only_one_run_placed():
    assert compared((), (fill(2, "2"),), actual_order=None).outcome is FillOutcome.ONLY_MODELLED
    assert compared((fill(1, "2"),), (), modelled_order=None).outcome is FillOutcome.ONLY_ACTUAL


def test_the_sums_are_exact():
    filled = Filled((fill(1, "0.3", price="20.1", fee="0.01"), fill(2, "0.7", price="19.9")))
    assert filled.amount == Decimal("1.0")
    assert filled.notional == Decimal("6.03") + Decimal("13.93")
    assert filled.fee == Decimal("0.05")
    assert (filled.first_at, filled.last_at) == (AT + timedelta(minutes=60),) * 2


def test_other_terms_are_told_apart_from_other_fills():
    cheaper = replace(ORDER, limit_price=Decimal("19.5"))
    assert compared((), (), modelled_order=cheaper).terms_differ
    assert not compared((fill(1, "1"),), ()).terms_differ  # a fill is not a term
