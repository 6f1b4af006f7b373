"""Reading a venue's orders and trades: the booked trades are a prefix, the rest are new;
an order's status follows the venue only as far as its visible trades allow."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from trader.broker.ccxt_orders import VenueMismatch, VenueOrder, advance, fill_from_trade, unbooked
from trader.domain import Liquidity, Order, OrderStatus, OrderType, Side

AT = datetime(2024, 3, 1, tzinfo=UTC)


def order(status: OrderStatus = OrderStatus.SUBMITTED) -> Order:
    o = Order.create(
        strategy="t", symbol="SOL/USDT", side=Side.BUY, type=OrderType.LIMIT,
        amount=Decimal(10), limit_price=Decimal(3), tick_time=AT, leg="x",
    )  # fmt: skip
    return o if status is OrderStatus.PENDING else o.transition(OrderStatus.SUBMITTED)


def trade(n: int, amount: float, fee: float = 0.001, currency: str = "SOL") -> dict:
    return {"id": str(n), "amount": amount, "price": 3.0, "timestamp": 1_700_000_000_000 + n,
            "takerOrMaker": "maker", "fee": {"cost": fee, "currency": currency}}  # fmt: skip


def fills(o: Order, *trades: dict):
    return [
        fill_from_trade(t, o, "SOLUSDT", str, default_at=AT, default_liquidity=Liquidity.TAKER)
        for t in trades
    ]


def venue(status: str, filled: float) -> VenueOrder:
    return VenueOrder.read(
        {"id": "7", "clientOrderId": "c", "symbol": "SOL/USDT", "side": "buy", "amount": 10.0,
         "price": 3.0, "status": status, "filled": filled, "timestamp": 1_700_000_000_000}
    )  # fmt: skip


def test_a_fill_is_the_venues_trade_with_its_fee_in_the_asset_charged():
    (fill,) = fills(order(), trade(12, 2.5, 0.0025))
    assert fill.fill_id == "SOLUSDT-12"
    assert (fill.amount, fill.price, fill.fee, fill.fee_currency) == (
        Decimal("2.5"), Decimal(3), Decimal("0.0025"), "SOL"
    )  # fmt: skip
    assert fill.liquidity is Liquidity.MAKER


def test_the_booked_trades_are_a_prefix_and_the_rest_are_new():
    o = order()
    first, second, third = fills(o, trade(1, 2), trade(2, 3), trade(3, 1))
    booked = o.with_fill(first).with_fill(second)
    assert unbooked(booked, [third, second, first]) == [third]
    assert unbooked(o, [second, first]) == [first, second]
    assert unbooked(booked, [second, first]) == []
    with pytest.raises(VenueMismatch, match="no prefix matches"):
        unbooked(o.with_fill(third), [first, second])


def test_the_status_follows_the_venue_as_far_as_the_trades_go():
    o = order()
    assert advance(o, venue("open", 0), []).status is OrderStatus.OPEN
    part = fills(o, trade(1, 4))
    assert advance(o, venue("open", 4), part).status is OrderStatus.PARTIALLY_FILLED
    # The venue says closed before all its trades are visible: not FILLED yet.
    assert advance(o, venue("closed", 10), part).status is OrderStatus.PARTIALLY_FILLED
    whole = fills(o, trade(1, 4), trade(2, 6))
    assert advance(o, venue("closed", 10), whole).status is OrderStatus.FILLED
    assert advance(o, venue("canceled", 4), part).status is OrderStatus.CANCELED
    assert advance(o, venue("canceled", 6), part).status is OrderStatus.PARTIALLY_FILLED
    assert advance(o, venue("expired", 0), []).status is OrderStatus.EXPIRED
    with pytest.raises(VenueMismatch, match=r"venue says 2\.0 filled"):
        advance(o, venue("open", 2), part)
    # Recorded, sent, then the process died: found at the venue it takes the venue's state.
    assert advance(order(OrderStatus.PENDING), venue("open", 0), []).status is OrderStatus.OPEN


@pytest.mark.parametrize("raw", [{}, {"id": "1"}, {"id": "1", "symbol": "SOL/USDT", "amount": "x"}])
def test_an_answer_that_is_not_an_order_is_a_mismatch(raw):
    with pytest.raises(VenueMismatch):
        VenueOrder.read(raw)
