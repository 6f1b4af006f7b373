"""The engine's portfolio read as a `PerpAccount`: one model of the money.

The identity held: Binance's margin balance = wallet balance + unrealised P&L on the mark
(Binance, "What Is the Available Balance, Margin Balance, and Total Balance on Binance
Futures?"), and the engine's equity = cash + signed size x mark. With wallet = cash + Σ size x
entry and entry = cost / size they are the same sum, whatever the fills.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trader.domain import DomainError, Fill, Liquidity, Portfolio, Side
from trader.domain.perp import MarginMode
from trader.domain.perp.default_brackets import default_brackets
from trader.domain.perp.from_portfolio import perp_account, whole_leverage

T0 = datetime(2024, 1, 1, tzinfo=UTC)
SYMBOLS = ("SOL/USDT", "ETH/USDT")
BRACKETS = {s: default_brackets(s) for s in SYMBOLS}
TINY = Decimal("1e-30")

prices = st.decimals("0.5", "500", places=2)
amounts = st.decimals("0.001", "50", places=3)
trades = st.lists(
    st.tuples(st.sampled_from(SYMBOLS), st.sampled_from([Side.BUY, Side.SELL]), amounts, prices),
    max_size=12,
)


def portfolio_of(cash: Decimal, fills: list[tuple[str, Side, Decimal, Decimal]]) -> Portfolio:
    portfolio = Portfolio("USDT", cash)
    for n, (symbol, side, amount, price) in enumerate(fills):
        fee = (amount * price / 1000).quantize(Decimal("0.00000001"))
        fill = Fill(f"f{n}", f"o{n}", symbol, side, price, amount, fee, "USDT", Liquidity.TAKER, T0)
        portfolio = portfolio.apply(fill)
    return portfolio


@settings(max_examples=150, deadline=None)
@given(trades, st.decimals("100", "100000", places=2), prices, prices)
def test_margin_balance_on_the_mark_is_the_engine_s_equity(fills, cash, sol_mark, eth_mark):
    portfolio = portfolio_of(cash, fills)
    marks = {"SOL/USDT": sol_mark, "ETH/USDT": eth_mark}
    account = perp_account(portfolio, BRACKETS, leverage=5, margin_mode=MarginMode.CROSS)
    # Exact but for the entry price's quotient (50 significant digits).
    assert abs(account.margin_balance(marks) - portfolio.equity(marks)) < TINY
    for symbol, position in account.positions.items():
        held = portfolio.positions[symbol]
        assert position.size == held.amount
        assert abs(position.entry_price * held.amount - held.cost) < TINY


def test_isolated_positions_hold_their_initial_margin_less_the_funding_they_paid():
    portfolio = portfolio_of(Decimal(10_000), [("SOL/USDT", Side.BUY, Decimal(10), Decimal(100))])
    account = perp_account(
        portfolio, BRACKETS, leverage=4, margin_mode="isolated",
        isolated_funding={"SOL/USDT": Decimal("1.5")},
    )  # fmt: skip
    position = account.positions["SOL/USDT"]
    assert position.isolated_wallet == Decimal(250) - Decimal("1.5")  # 1,000 / 4 - 1.5
    # The wallet is the cash put back with the position's cost: 10,000 less the 1 fee.
    assert account.wallet_balance == Decimal(9999)


def test_a_symbol_without_brackets_is_named():
    portfolio = portfolio_of(Decimal(1000), [("SOL/USDT", Side.BUY, Decimal(1), Decimal(10))])
    with pytest.raises(DomainError, match="SOL/USDT: no leverage brackets"):
        perp_account(portfolio, {}, leverage=1, margin_mode="cross")


@pytest.mark.parametrize(("given", "expected"), [(1, 1), (1.0, 1), (2.5, 3), (10, 10)])
def test_the_leverage_set_is_max_leverage_rounded_up(given, expected):
    assert whole_leverage(given) == expected


def test_a_leverage_below_one_is_refused():
    with pytest.raises(DomainError, match="at least 1"):
        whole_leverage(0.5)
