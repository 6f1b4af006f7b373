"""Distance to liquidation and the helpers a risk rule calls to restore a buffer.

The distance is the fraction of the mark price the mark may move against the position before it
reaches the liquidation price (freqtrade's `liquidation_buffer` is the same kind of fraction,
docs "Leverage": a buffer between the liquidation price and the stop). The liquidation price is
Binance's (see test_liquidation_examples.py); what follows checks the helpers against it.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.unit.domain.perp.tables import BTCUSDT_NOW
from trader.domain.errors import DomainError
from trader.domain.perp import (
    LeverageBrackets,
    MarginMode,
    MarginState,
    PerpAccount,
    distance_to_liquidation,
    holds_buffer,
    liquidation_price,
    margin_to_restore_buffer,
    reduction_for_buffer,
)

D = Decimal
BTC = LeverageBrackets.from_binance("BTC/USDT:USDT", BTCUSDT_NOW)
STEP = D("0.001")


def test_distance_is_a_fraction_of_the_mark_against_the_position() -> None:
    assert distance_to_liquidation(1, D(100), D(90)) == D("0.1")
    assert distance_to_liquidation(-1, D(100), D(110)) == D("0.1")
    assert distance_to_liquidation(1, D(100), D(105)) == D("-0.05")  # past it
    assert distance_to_liquidation(1, D(100), None) is None
    with pytest.raises(DomainError, match="side must be"):
        distance_to_liquidation(0, D(100), D(90))


def _distance(state: MarginState, mark: Decimal) -> Decimal | None:
    return distance_to_liquidation(state.side, mark, liquidation_price(state, BTC))


@st.composite
def cross_cases(draw: st.DrawFn) -> tuple[PerpAccount, Decimal, Decimal]:
    """A cross account with one BTC position and a mark that moved against it."""
    side = draw(st.sampled_from([1, -1]))
    size = D(draw(st.integers(1, 30_000))) / 1000
    entry = D(draw(st.integers(20_000, 80_000)))
    leverage = draw(st.integers(2, 50))
    wallet = size * entry / leverage + D(draw(st.integers(0, 5_000)))
    move = D(draw(st.integers(0, 40))) / 1000
    mark = entry * (1 - side * move)
    buffer = D(draw(st.integers(1, 300))) / 1000
    account = PerpAccount(wallet, {"BTC/USDT:USDT": BTC}).fill(
        "BTC/USDT:USDT", side * size, entry, leverage=leverage, margin_mode=MarginMode.CROSS
    )
    return account, mark, buffer


@settings(max_examples=150, deadline=None)
@given(cross_cases())
def test_reducing_by_the_answer_restores_the_buffer_and_one_step_less_does_not(
    case: tuple[PerpAccount, Decimal, Decimal],
) -> None:
    account, mark, buffer = case
    marks = {"BTC/USDT:USDT": mark}
    state = account.margin_state("BTC/USDT:USDT", marks)
    distance = _distance(state, mark)
    assume(distance is None or distance > 0)  # not already past liquidation
    amount = reduction_for_buffer(state, BTC, mark=mark, buffer=buffer, step=STEP, isolated=False)
    assert 0 <= amount <= state.quantity
    assert amount % STEP == 0 or amount == state.quantity
    if amount == 0:
        assert distance is None or distance >= buffer
        return
    # Reduce through the account (a fill at the mark, no fee) and measure again.
    after = account.fill("BTC/USDT:USDT", -state.side * amount, mark)
    if "BTC/USDT:USDT" in after.positions:
        new = after.margin_state("BTC/USDT:USDT", marks)
        remaining = _distance(new, mark)
        assert remaining is None or remaining >= buffer
    less = amount - STEP
    if less > 0:
        before = account.fill("BTC/USDT:USDT", -state.side * less, mark)
        short_of = _distance(before.margin_state("BTC/USDT:USDT", marks), mark)
        assert short_of is not None
        assert short_of < buffer


@settings(max_examples=150, deadline=None)
@given(cross_cases())
def test_adding_the_margin_asked_for_restores_the_buffer(
    case: tuple[PerpAccount, Decimal, Decimal],
) -> None:
    account, mark, buffer = case
    state = account.margin_state("BTC/USDT:USDT", {"BTC/USDT:USDT": mark})
    margin = margin_to_restore_buffer(state, BTC, mark=mark, buffer=buffer)
    assert margin >= 0
    topped = MarginState(state.size, state.entry_price, state.wallet_balance + margin)
    assert holds_buffer(topped, BTC, mark, buffer)
    distance = _distance(topped, mark)
    assert distance is None or distance >= buffer - D("1e-40")
    if margin > 0:
        # Exactly enough: a cent less and the distance is short of the buffer.
        short = MarginState(state.size, state.entry_price, topped.wallet_balance - D("0.01"))
        assert not holds_buffer(short, BTC, mark, buffer)


def test_isolated_reduction_by_hand() -> None:
    # Isolated long 10 BTC @ 61,000 at 10x (wallet 61,000): LP 55,170.85 (see the examples).
    # Mark 58,000, buffer 5%: the buffer price is 58,000 x 0.95 = 55,100. Reducing keeps 6,100 of
    # margin per BTC left, so with Q left the surplus at 55,100 is
    #   6,100 Q + Q (55,100 - 61,000) - MM(55,100 Q) = 200 Q - MM(55,100 Q);
    # bracket 1 (notional < 50,000): 200 Q - 220.4 Q < 0; bracket 2 (Q >= 0.9075):
    # 200 Q - (275.5 Q - 50) >= 0 only for Q <= 0.662, outside it. No size left holds the
    # buffer: close it all. Adding margin instead: 200 x 10 - (551,000 x 0.005 - 50) = -705,
    # so 705 USDT restores it.
    state = MarginState(D(10), D(61000), D(61000))
    mark, buffer = D(58000), D("0.05")
    assert not holds_buffer(state, BTC, mark, buffer)
    amount = reduction_for_buffer(state, BTC, mark=mark, buffer=buffer, step=STEP, isolated=True)
    assert amount == D(10)
    assert margin_to_restore_buffer(state, BTC, mark=mark, buffer=buffer) == D(705)
    restored = MarginState(D(10), D(61000), D(61705))
    distance = distance_to_liquidation(1, mark, liquidation_price(restored, BTC))
    assert distance is not None
    assert distance.quantize(D("0.0000001")) == D("0.0500000")


def test_isolated_reduction_that_a_lower_bracket_makes_enough() -> None:
    # Isolated long 2 BTC @ 30,000 at 20x (wallet 3,000), mark 29,500, buffer 3%: buffer price
    # 29,500 x 0.97 = 28,615. With Q left (1,500 Q of margin) the surplus there is
    #   1,500 Q + Q (28,615 - 30,000) - MM(28,615 Q) = 115 Q - MM(28,615 Q);
    # bracket 2 (0.5%, cum 50; Q >= 50,000 / 28,615 = 1.7473): 115 Q - 143.075 Q + 50 >= 0 for
    # Q <= 50 / 28.075 = 1.78094: Q = 1.780 holds, 1.781 does not (-0.0016): close 0.220.
    state = MarginState(D(2), D(30000), D(3000))
    amount = reduction_for_buffer(
        state, BTC, mark=D(29500), buffer=D("0.03"), step=STEP, isolated=True
    )
    assert amount == D("0.220")


def test_buffer_arguments_are_checked() -> None:
    state = MarginState(D(1), D(100), D(10))
    with pytest.raises(DomainError, match="must not be negative"):
        reduction_for_buffer(state, BTC, mark=D(100), buffer=D(-1), step=STEP, isolated=False)
    with pytest.raises(DomainError, match="amount step must be positive"):
        reduction_for_buffer(state, BTC, mark=D(100), buffer=D("0.1"), step=D(0), isolated=False)


def test_an_insolvent_short_has_no_price_but_does_not_hold_a_buffer() -> None:
    # Cross short 1 BTC @ 30,000 with a wallet of 1,000 and another position losing 40,000:
    # cover 1,000 - 40,000 = -39,000, so even at price 0 the short's +30,000 leaves the margin
    # balance negative: the formula's LP is negative ("--"), yet the account is past saving.
    state = MarginState(D(-1), D(30000), D(1000), D(0), D(-40000))
    assert liquidation_price(state, BTC) is None
    assert not holds_buffer(state, BTC, D(30000), D("0.05"))
