from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.domain.strategies import SYMBOLS, amounts, aware_times, bad_decimals, naive_times
from trader.domain import (
    DomainError,
    Fill,
    Liquidity,
    Order,
    OrderStatus,
    OrderType,
    Side,
    client_order_id,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)
names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20)


def limit_order(**overrides: object) -> Order:
    fields: dict[str, object] = {
        "strategy": "maxdiff",
        "symbol": "SOL/USDT",
        "side": Side.BUY,
        "type": OrderType.LIMIT,
        "amount": Decimal(2),
        "limit_price": Decimal("100.5"),
        "tick_time": T0,
        "leg": "entry",
    }
    return Order.create(**(fields | overrides))  # type: ignore[arg-type]


def fill_for(order: Order, amount: Decimal, n: int = 0) -> Fill:
    return Fill(
        f"f{n}",
        order.client_order_id,
        order.symbol,
        order.side,
        Decimal(100),
        amount,
        Decimal("0.01"),
        "USDT",
        Liquidity.MAKER,
        T0,
    )


@given(names, SYMBOLS, aware_times, names)
def test_client_order_ids_are_deterministic_short_and_venue_safe(strategy, symbol, tick, leg):
    first = client_order_id(strategy, symbol, tick, leg)
    assert first == client_order_id(strategy, symbol, tick.astimezone(UTC), leg)
    assert re.fullmatch(r"t[0-9a-f]{31}", first)


@given(st.tuples(names, SYMBOLS, aware_times, names), st.tuples(names, SYMBOLS, aware_times, names))
def test_different_decisions_get_different_client_order_ids(a, b):
    same_decision = (a[0], a[1], a[2].astimezone(UTC), a[3]) == (
        b[0],
        b[1],
        b[2].astimezone(UTC),
        b[3],
    )
    assert (client_order_id(*a) == client_order_id(*b)) == same_decision


def test_the_fields_of_a_client_order_id_cannot_run_into_each_other():
    assert client_order_id("ab", "SOL/USDT", T0, "c") != client_order_id("a", "SOL/USDT", T0, "bc")


def test_client_order_id_refuses_naive_times_and_empty_parts():
    with pytest.raises(DomainError, match="timezone-aware"):
        client_order_id("s", "SOL/USDT", datetime(2024, 1, 1), "leg")
    with pytest.raises(DomainError, match="leg"):
        client_order_id("s", "SOL/USDT", T0, "")


@given(bad_decimals)
def test_an_order_with_a_non_positive_or_non_finite_amount_is_refused(bad):
    with pytest.raises(DomainError, match="amount"):
        limit_order(amount=bad)


@given(bad_decimals)
def test_a_limit_order_with_a_bad_limit_price_is_refused(bad):
    with pytest.raises(DomainError, match="limit price"):
        limit_order(limit_price=bad)


@given(naive_times)
def test_an_order_with_a_naive_time_is_refused(tick):
    with pytest.raises(DomainError, match="timezone-aware"):
        limit_order(tick_time=tick)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"limit_price": None}, "needs a limit price"),
        ({"type": OrderType.MARKET}, "has no limit price"),
        ({"amount": 1.5}, "floats drift"),
        ({"side": "buy"}, "Side"),
        ({"symbol": "SOLUSDT"}, "symbol"),
        ({"strategy": ""}, "strategy"),
        ({"expires_at": T0}, "expires before"),
        ({"expires_at": datetime(2024, 1, 2)}, "timezone-aware"),
    ],
)
def test_a_malformed_order_is_refused(overrides, message):
    with pytest.raises(DomainError, match=message):
        limit_order(**overrides)


@pytest.mark.parametrize("client_id", ["", "a" * 37, "has space", "semi;colon", None])
def test_an_order_with_a_malformed_client_id_is_refused(client_id):
    order = limit_order()
    with pytest.raises(DomainError, match="client order id"):
        Order(
            client_id,
            *[
                getattr(order, f)
                for f in (
                    "strategy",
                    "symbol",
                    "side",
                    "type",
                    "amount",
                    "limit_price",
                    "created_at",
                )
            ],
        )


def test_filled_amount_stays_within_the_order_and_filled_means_fully_filled():
    order = limit_order()
    with pytest.raises(DomainError, match="outside"):
        Order(**{**_fields(order), "filled_amount": Decimal(3)})
    with pytest.raises(DomainError, match="whole amount"):
        Order(**{**_fields(order), "status": OrderStatus.FILLED})


def _fields(order: Order) -> dict[str, object]:
    return {f: getattr(order, f) for f in Order.__dataclass_fields__}


_EVENTS = st.lists(
    st.one_of(
        st.sampled_from(list(OrderStatus)), st.decimals(Decimal("0.1"), Decimal(2), places=1)
    ),
    max_size=12,
)


@given(_EVENTS)
def test_the_order_state_machine_never_overfills_and_never_leaves_a_terminal_state(events):
    order = limit_order()
    for n, event in enumerate(events):
        before = order
        try:
            if isinstance(event, Decimal):
                order = order.with_fill(fill_for(order, event, n))
            else:
                order = order.transition(event)
        except DomainError:
            assert order is before
            continue
        assert order.filled_amount <= order.amount
        if before.status.is_terminal:
            # Only a late fill may change an ended order, and it keeps its final status.
            assert isinstance(event, Decimal)
            assert order.status is before.status
            assert before.status in {OrderStatus.CANCELED, OrderStatus.EXPIRED}
        if order.status is OrderStatus.FILLED:
            assert order.filled_amount == order.amount


def test_an_order_fills_partially_then_fully_and_refuses_an_overfill():
    order = limit_order().transition(OrderStatus.SUBMITTED).transition(OrderStatus.OPEN)
    order = order.with_fill(fill_for(order, Decimal("0.5")))
    assert order.status is OrderStatus.PARTIALLY_FILLED
    assert order.remaining == Decimal("1.5")
    order = order.with_fill(fill_for(order, Decimal("1.5"), 1))
    assert order.status is OrderStatus.FILLED
    with pytest.raises(DomainError, match="overfills"):
        order.with_fill(fill_for(order, Decimal("0.1"), 2))


def test_a_timed_out_order_is_unknown_until_looked_up():
    order = limit_order().transition(OrderStatus.SUBMITTED).transition(OrderStatus.UNKNOWN)
    assert order.transition(OrderStatus.OPEN).status is OrderStatus.OPEN
    with pytest.raises(DomainError, match="not allowed"):
        order.transition(OrderStatus.PENDING)


def test_a_fill_reported_after_a_cancel_is_still_booked():
    order = limit_order().transition(OrderStatus.SUBMITTED).transition(OrderStatus.CANCELED)
    late = order.with_fill(fill_for(order, Decimal(1)))
    assert late.status is OrderStatus.CANCELED
    assert late.filled_amount == Decimal(1)


def test_a_fill_for_another_order_or_a_rejected_order_is_refused():
    order = limit_order().transition(OrderStatus.SUBMITTED)
    other = limit_order(leg="exit")
    with pytest.raises(DomainError, match="applied to"):
        order.with_fill(fill_for(other, Decimal(1)))
    rejected = order.transition(OrderStatus.REJECTED)
    with pytest.raises(DomainError, match="cannot fill"):
        rejected.with_fill(fill_for(rejected, Decimal(1)))


@given(amounts, bad_decimals)
def test_a_fill_with_a_bad_price_or_amount_is_refused(amount, bad):
    base = {
        "fill_id": "1",
        "client_order_id": "t1",
        "symbol": "SOL/USDT",
        "side": Side.BUY,
        "price": Decimal(10),
        "amount": amount,
        "fee": Decimal(0),
        "fee_currency": "USDT",
        "liquidity": Liquidity.TAKER,
        "at": T0,
    }
    Fill(**base)  # type: ignore[arg-type]
    for field in ("price", "amount"):
        with pytest.raises(DomainError, match=field):
            Fill(**base | {field: bad})  # type: ignore[arg-type]
    with pytest.raises(DomainError, match="fee"):
        Fill(**base | {"fee": Decimal("NaN")})  # type: ignore[arg-type]
    with pytest.raises(DomainError, match="timezone-aware"):
        Fill(**base | {"at": T0.replace(tzinfo=None) + timedelta(0)})  # type: ignore[arg-type]
