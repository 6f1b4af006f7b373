"""The liquidation model `liquidation_fills`, by hand and by property.

Sources: Binance "Liquidation Protocol" (mirror
https://docs.traderwagon.com/faq/futures-trading-introduction/liquidation-protocol): a fee "on
the amount liquidated", a user still margin deficient closed at the bankruptcy price, "a
portion of the remaining collateral (if any) will go to the Insurance Fund", a negative wallet
balanced back to 0 by the fund; Binance Insurance Fund FAQ
(https://www.binance.com/en/support/faq/360033525371): up to 0.5 % from liquidations that do not
end in bankruptcy. The rest (the close at the triggering mark, the fee capped by the margin
left, the cross deficit shared by notional) is our model, stated in the module's docstring;
the expected numbers here are worked by hand from that statement.
"""

from __future__ import annotations

from decimal import Decimal, localcontext

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trader.domain.errors import DomainError
from trader.domain.perp.liquidation_fill import Liquidated, liquidation_fills

D = Decimal
RATE = D("0.005")  # Binance's "up to 0.5 %"
STEP = D("1e-8")


def test_a_solvent_trigger_closes_at_the_mark_and_pays_the_whole_fee():
    # Long 2 valued at 95 with 1.5 of margin left: fee 0.5 % x 190 = 0.95, 0.55 stays.
    out = liquidation_fills([Liquidated("X", D(2), D(95))], D("1.5"), RATE)
    (fill,) = out.fills
    assert (fill.price, fill.fee, out.left, out.insurance_covers) == (
        D(95),
        D("0.95"),
        D("0.55"),
        0,
    )


def test_the_fee_takes_no_more_than_the_margin_left():
    out = liquidation_fills([Liquidated("X", D(2), D(95))], D("0.5"), RATE)
    assert (out.fills[0].fee, out.left) == (D("0.5"), 0)


@pytest.mark.parametrize(("size", "mark", "bankruptcy"), [(D(2), D(90), D(92)),
                                                          (D(-2), D(110), D(108))])  # fmt: skip
def test_a_gap_through_the_bankruptcy_price_closes_there_and_the_fund_takes_the_rest(
    size, mark, bankruptcy
):
    # Margin -4 at the mark: the bankruptcy price is 2 (= 4 / 2) back towards solvency.
    out = liquidation_fills([Liquidated("X", size, mark)], D(-4), RATE)
    (fill,) = out.fills
    assert (fill.price, fill.fee, out.left) == (bankruptcy, 0, 0)
    assert out.insurance_covers == 0  # closed at bankruptcy: the fund holds the position's loss


def test_a_cross_deficit_is_shared_by_notional():
    # Long 1 at 60 (notional 60) and short 2 at 20 (notional 40), margin -10: 6 and 4 of it.
    out = liquidation_fills(
        [Liquidated("A", D(1), D(60)), Liquidated("B", D(-2), D(20))], D(-10), RATE
    )
    assert [(f.symbol, f.price, f.fee) for f in out.fills] == [("A", D(66), 0), ("B", D(18), 0)]
    assert out.left == 0


def test_a_step_rounds_in_the_user_s_favour_and_the_fee_in_whole_steps():
    # Long 30 at a mark of 66, margin 1,000 + 30 (66 - 100) = -20: bankruptcy 66.666..., sold
    # at 66.66666667; that leaves 30 x 0.0000000033... = 0.0000001, which the fee takes.
    out = liquidation_fills([Liquidated("X", D(30), D(66))], D(-20), RATE, step=STEP)
    (fill,) = out.fills
    assert (fill.price, fill.fee, out.left) == (D("66.66666667"), D("0.0000001"), 0)


@pytest.mark.parametrize(
    ("positions", "balance", "rate", "step"),
    [
        ([], D(1), RATE, None),
        ([Liquidated("X", D(1), D(1))], D(1), D("-0.01"), None),
        ([Liquidated("X", D(1), D(1))], D(1), RATE, D(0)),
        ([Liquidated("X", D(1), D(1))], 1.5, RATE, None),
    ],
)
def test_bad_input_is_a_domain_error(positions, balance, rate, step):
    with pytest.raises(DomainError):
        liquidation_fills(positions, balance, rate, step=step)


@pytest.mark.parametrize(("size", "mark"), [(D(0), D(1)), (D(1), D(0)), (D(1), 1.0)])
def test_a_bad_position_is_a_domain_error(size, mark):
    with pytest.raises(DomainError):
        Liquidated("X", size, mark)


amounts = st.integers(1, 10**6).map(lambda n: D(n) / 1000)
prices = st.integers(1, 10**7).map(lambda n: D(n) / 100)


@given(
    wallet=amounts, entry=prices, size=amounts, long=st.booleans(), mark=prices,
    bps=st.integers(0, 100), cross=amounts, step=st.sampled_from([None, STEP]),
)  # fmt: skip
def test_an_isolated_liquidation_leaves_the_cross_wallet_as_it_was(
    wallet, entry, size, long, mark, bps, cross, step
):
    """Booked as the emulator does: the isolated wallet comes back to the cross wallet with the
    close's P&L against the entry, less the fee. The cross wallet ends where it was plus what
    the model leaves the user, never lower (a hair of the 50-digit quotient aside)."""
    signed = size if long else -size
    balance = wallet + signed * (mark - entry)  # the isolated margin at the mark
    out = liquidation_fills([Liquidated("X", signed, mark)], balance, D(bps) / 10_000, step=step)
    (fill,) = out.fills
    with localcontext(prec=200):  # the model's 50-digit prices, summed without rounding
        after = cross + wallet + signed * (fill.price - entry) - fill.fee
    assert out.left >= 0
    assert fill.fee >= 0
    assert out.insurance_covers >= 0
    assert after - cross == out.left - out.insurance_covers
    assert after - cross >= D("-1e-40")
    assert fill.fee <= (D(bps) / 10_000 * size * fill.price).quantize(STEP, "ROUND_CEILING")
    if balance >= 0 and step is None:
        assert fill.price == mark  # on the solvent side: the triggering mark
