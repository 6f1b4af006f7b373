"""The futures emulator's margin arithmetic: brackets, positions, and the liquidation price it
finds by bisection on its direct margin check.

Sources: Binance "Leverage and Margin of USDⓈ-M Futures" (FAQ 360033162192): maintenance
margin = notional x rate - cum, cum_n = floor_n x (mmr_n - mmr_{n-1}) + cum_{n-1}, its example
250,000 x (1% - 0.5%) + 50 = 1,300; liquidation when margin balance <= maintenance margin.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from trader.domain import Bar, Timeframe
from trader.emulator.futures_account import (
    ISOLATED,
    Position,
    margin_balance_and_maintenance,
)
from trader.emulator.futures_market import (
    DEFAULT_BRACKETS,
    FundingEvent,
    PerpListing,
    PerpMarket,
    bracket_for,
    brackets_from,
    maintenance_margin,
)
from trader.emulator.futures_orders import FuturesVenue
from trader.emulator.futures_settle import liquidation_price
from trader.emulator.market import EmulatedMarket, Instrument

START = datetime(2024, 1, 1, tzinfo=UTC)


def test_cum_follows_binances_recurrence_and_its_worked_figure() -> None:
    assert [b.cum for b in DEFAULT_BRACKETS[:3]] == [Decimal(0), Decimal(50), Decimal(1300)]


@given(
    st.lists(
        st.tuples(
            st.integers(min_value=1_000, max_value=10**9), st.integers(min_value=1, max_value=499)
        ),
        min_size=2,
        max_size=8,
        unique_by=lambda t: t[0],
    )
)
def test_maintenance_margin_is_continuous_across_brackets(raw: list[tuple[int, int]]) -> None:
    caps = sorted(cap for cap, _ in raw)
    rates = sorted(Decimal(r) / 1000 for _, r in raw)
    brackets = brackets_from([(Decimal(c), r, 10) for c, r in zip(caps, rates, strict=True)])
    for lower, upper in itertools.pairwise(brackets):
        floor = upper.notional_floor
        assert floor * lower.maint_margin_ratio - lower.cum == maintenance_margin(brackets, floor)


prices = st.decimals(min_value=1, max_value=10_000, places=2)
sizes = st.decimals(min_value=Decimal("0.001"), max_value=100, places=3)


@given(sizes, prices, sizes, prices, prices)
def test_a_round_trip_realises_what_was_paid_and_received(
    q1: Decimal, p1: Decimal, q2: Decimal, p2: Decimal, exit_price: Decimal
) -> None:
    position = Position("X")
    assert position.apply(1, q1, p1) == (Decimal(0), Decimal(0))
    assert position.apply(1, q2, p2) == (Decimal(0), Decimal(0))
    realised, closed = position.apply(-1, q1 + q2, exit_price)
    assert closed == q1 + q2
    assert position.size == 0
    paid, received = q1 * p1 + q2 * p2, (q1 + q2) * exit_price
    assert abs(realised - (received - paid)) < Decimal("1e-12")


def _venue(mark: float) -> FuturesVenue:
    hour = Timeframe("1h")
    bars = [
        Bar("X/USDT", hour, START + n * hour.duration, mark, mark, mark, mark, 1000.0)
        for n in range(3)
    ]
    market = EmulatedMarket(lambda: START + timedelta(hours=2, seconds=1))
    perps = PerpMarket(market)
    funding = [FundingEvent(START, Decimal(0), Decimal(mark))]
    perps.list_perp(PerpListing(Instrument("X/USDT"), bars, funding), bars)
    return FuturesVenue(perps)


@settings(deadline=None, max_examples=60)
@given(
    st.sampled_from([1, -1]),
    st.decimals(min_value=10, max_value=5000, places=2),
    st.decimals(min_value=Decimal("0.01"), max_value=5000, places=2),
    st.integers(min_value=2, max_value=100),
)
def test_at_the_liquidation_price_the_margin_balance_meets_the_maintenance_margin(
    side: int, entry: Decimal, size: Decimal, leverage: int
) -> None:
    """In any bracket (large positions fall in higher ones, with their own rate and cum), for
    a leverage the position's bracket allows (Binance refuses more: -2027)."""
    assume(leverage <= bracket_for(DEFAULT_BRACKETS, size * entry).initial_leverage)
    venue = _venue(float(entry))
    account = venue.open_account("k", Decimal(10**9))
    account.setting("XUSDT").margin_type = ISOLATED
    account.setting("XUSDT").leverage = leverage
    position = account.position("XUSDT")
    position.size, position.entry = side * size, entry
    position.isolated_wallet = size * entry / leverage
    price = liquidation_price(venue, account, "XUSDT")
    assert price is not None
    brackets = {"XUSDT": DEFAULT_BRACKETS}
    balance, maintenance = margin_balance_and_maintenance(
        account, brackets, {"XUSDT": price}, "XUSDT"
    )
    assert abs(balance - maintenance) <= size * entry * Decimal("1e-12")
    # Just on the safe side of it, the position is not liquidated.
    safe = price + side * entry * Decimal("1e-6")
    balance, maintenance = margin_balance_and_maintenance(
        account, brackets, {"XUSDT": safe}, "XUSDT"
    )
    assert balance > maintenance
