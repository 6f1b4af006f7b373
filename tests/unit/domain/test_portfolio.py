"""Ledger arithmetic is exact: checked against rational (Fraction) arithmetic, not floats."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, Inexact
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.domain.strategies import amounts, fees, prices
from trader.domain import DomainError, Fill, Liquidity, Portfolio, Position, Side, exact

T0 = datetime(2024, 1, 1, tzinfo=UTC)
SYMBOLS = ["SOL/USDT", "BTC/USDT"]
START = Decimal("10000.00")


def fill(symbol: str, side: Side, amount: Decimal, price: Decimal, fee: Decimal, n: int) -> Fill:
    return Fill(f"f{n}", f"t{n}", symbol, side, price, amount, fee, "USDT", Liquidity.TAKER, T0)


fills = st.lists(
    st.builds(
        fill,
        st.sampled_from(SYMBOLS),
        st.sampled_from(list(Side)),
        amounts,
        prices,
        fees,
        st.integers(0, 10**9),
    ),
    max_size=40,
)
marks = st.fixed_dictionaries(dict.fromkeys(SYMBOLS, prices))


@given(fills, marks)
def test_cash_positions_and_equity_equal_the_rational_sums_of_the_fills(fill_list, mark):
    portfolio = Portfolio.from_fills("USDT", START, fill_list)
    cash = Fraction(START)
    held = dict.fromkeys(SYMBOLS, Fraction(0))
    for f in fill_list:
        sign = 1 if f.side is Side.BUY else -1
        cash -= sign * Fraction(f.price) * Fraction(f.amount) + Fraction(f.fee)
        held[f.symbol] += sign * Fraction(f.amount)
    assert Fraction(portfolio.cash) == cash
    for symbol in SYMBOLS:
        position = portfolio.position(symbol)
        assert Fraction(position.amount) == held[symbol]
        # The incrementally kept totals equal a full re-validation of the lots.
        assert Position(symbol, position.lots) == position
    assert Fraction(portfolio.fees_paid) == sum((Fraction(f.fee) for f in fill_list), Fraction(0))
    equity = cash + sum((held[s] * Fraction(mark[s]) for s in SYMBOLS), Fraction(0))
    assert Fraction(portfolio.equity(mark)) == equity
    # Every unit of equity is explained: start + realised + unrealised - fees.
    explained = (
        START
        + sum(portfolio.realized_pnl.values(), Decimal(0))
        + sum(portfolio.unrealized_pnl(mark).values(), Decimal(0))
        - portfolio.fees_paid
    )
    assert portfolio.equity(mark) == explained


@given(fills)
def test_a_flat_symbol_has_realised_exactly_its_trading_cash_flow(fill_list):
    portfolio = Portfolio.from_fills("USDT", START, fill_list)
    for symbol in SYMBOLS:
        if portfolio.position(symbol).amount != 0:
            continue
        flow = sum(
            (
                -(1 if f.side is Side.BUY else -1) * f.notional
                for f in fill_list
                if f.symbol == symbol
            ),
            Decimal(0),
        )
        assert portfolio.realized_pnl.get(symbol, Decimal(0)) == flow
        assert symbol not in portfolio.positions


@given(fills, st.data())
def test_splitting_a_fill_changes_nothing(fill_list, data):
    if not fill_list:
        return
    i = data.draw(st.integers(0, len(fill_list) - 1))
    whole = fill_list[i]
    part = data.draw(st.decimals(Decimal("0.00000001"), whole.amount, places=8))
    pieces = [whole]
    if part < whole.amount:
        pieces = [
            fill(whole.symbol, whole.side, part, whole.price, whole.fee, 1),
            fill(whole.symbol, whole.side, whole.amount - part, whole.price, Decimal(0), 2),
        ]
    split = fill_list[:i] + pieces + fill_list[i + 1 :]
    a = Portfolio.from_fills("USDT", START, fill_list)
    b = Portfolio.from_fills("USDT", START, split)
    assert (a.cash, a.fees_paid, dict(a.realized_pnl)) == (
        b.cash,
        b.fees_paid,
        dict(b.realized_pnl),
    )
    for symbol in SYMBOLS:
        assert a.position(symbol).amount == b.position(symbol).amount
        assert a.position(symbol).cost == b.position(symbol).cost


def test_lots_close_first_in_first_out():
    position, realized = Position("SOL/USDT").apply(Side.BUY, Decimal(1), Decimal(100))
    position, _ = position.apply(Side.BUY, Decimal(1), Decimal(110))
    position, realized = position.apply(Side.SELL, Decimal("1.5"), Decimal(120))
    assert realized == Decimal(20) + Decimal("0.5") * 10
    assert position.amount == Decimal("0.5")
    assert position.cost == Decimal(55)
    # Selling through zero opens a short lot at the trade price.
    position, realized = position.apply(Side.SELL, Decimal(2), Decimal(90))
    assert realized == Decimal("0.5") * (90 - 110)
    assert position.amount == Decimal("-1.5")
    assert position.unrealized_pnl(Decimal(80)) == Decimal(15)


def test_a_hundred_thousand_tiny_fees_sum_exactly():
    portfolio = Portfolio("USDT", START)
    buy = fill("SOL/USDT", Side.BUY, Decimal("0.001"), Decimal("0.1"), Decimal("0.00000001"), 0)
    sell = fill("SOL/USDT", Side.SELL, Decimal("0.001"), Decimal("0.1"), Decimal("0.00000001"), 1)
    for _ in range(50_000):
        portfolio = portfolio.apply(buy).apply(sell)
    assert portfolio.cash == START - Decimal("0.001")


def test_arithmetic_that_would_round_raises_instead_of_drifting():
    with exact(), pytest.raises(Inexact):
        _ = Decimal(1) / Decimal(3)


def test_a_fill_in_another_currency_or_without_a_mark_is_refused():
    portfolio = Portfolio("USDT", START)
    with pytest.raises(DomainError, match="not quoted"):
        portfolio.apply(
            Fill(
                "1",
                "t1",
                "SOL/EUR",
                Side.BUY,
                Decimal(1),
                Decimal(1),
                Decimal(0),
                "EUR",
                Liquidity.TAKER,
                T0,
            )
        )
    with pytest.raises(DomainError, match="fee in BNB"):
        portfolio.apply(
            Fill(
                "1",
                "t1",
                "SOL/USDT",
                Side.BUY,
                Decimal(1),
                Decimal(1),
                Decimal(0),
                "BNB",
                Liquidity.TAKER,
                T0,
            )
        )
    held = portfolio.apply(fill("SOL/USDT", Side.BUY, Decimal(1), Decimal(10), Decimal(0), 0))
    with pytest.raises(DomainError, match="no mark price"):
        held.equity({})
    with pytest.raises(DomainError, match="cash"):
        Portfolio("USDT", 10000.0)  # type: ignore[arg-type]


def test_a_fee_in_the_base_asset_comes_out_of_the_position_and_counts_at_the_fill_price():
    portfolio = Portfolio("USDT", START)
    bought = portfolio.apply(
        Fill("b", "t1", "SOL/USDT", Side.BUY, Decimal(100), Decimal(1), Decimal("0.001"), "SOL",
             Liquidity.TAKER, T0)
    )  # fmt: skip
    # What the venue holds: 0.999 SOL, and the whole price paid in cash.
    assert bought.amount("SOL/USDT") == Decimal("0.999")
    assert bought.cash == START - 100
    assert bought.fees_paid == Decimal("0.1")
    assert bought.equity({"SOL/USDT": Decimal(100)}) == START - Decimal("0.1")
    sold = bought.apply(
        Fill("s", "t2", "SOL/USDT", Side.SELL, Decimal(110), Decimal("0.999"), Decimal("0.10989"),
             "USDT", Liquidity.TAKER, T0)
    )  # fmt: skip
    assert sold.positions == {}
    assert sold.realized_pnl["SOL/USDT"] == Decimal("9.99")
    assert sold.fees_paid == Decimal("0.20989")
    # start + realised - fees: every unit of equity explained, exactly.
    assert sold.cash == START + Decimal("9.99") - Decimal("0.20989")
    # A rebate in the base asset adds to the position.
    rebated = portfolio.apply(
        Fill("r", "t3", "SOL/USDT", Side.BUY, Decimal(100), Decimal(1), Decimal("-0.001"), "SOL",
             Liquidity.MAKER, T0)
    )  # fmt: skip
    assert rebated.amount("SOL/USDT") == Decimal("1.001")
    assert rebated.fees_paid == Decimal("-0.1")
