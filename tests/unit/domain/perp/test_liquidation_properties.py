"""Properties of the liquidation and bankruptcy prices.

The reference formula is written out here with Fractions (exact), from Binance's FAQ "How to
Calculate Liquidation Price of USDⓈ-M Futures Contracts"
(https://www.binance.com/en/support/faq/b3c689c1f50a44cabb3a84e663b81d93), and the bracket is
found the way the FAQ says: compute at the current position's level, and where the notional at
the liquidation price is at another level, substitute that level's rate and amount and
recalculate. freqtrade's `Binance.dry_run_liquidation_price` (freqtrade/exchange/binance.py,
commit c9ae5e1e) is copied below as a second, float reference.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.unit.domain.perp.tables import BTCUSDT_NOW, ETHUSDT_FAQ_ERA
from trader.domain.perp import (
    Bracket,
    LeverageBrackets,
    MarginMode,
    MarginState,
    PerpAccount,
    PerpPosition,
    bankruptcy_price,
    liquidation_price,
    liquidation_price_in_bracket,
)

BTC = LeverageBrackets.from_binance("BTC/USDT:USDT", BTCUSDT_NOW)
ETH = LeverageBrackets.from_binance("ETH/USDT:USDT", ETHUSDT_FAQ_ERA)
TIGHT = Fraction(1, 10**40)

sizes = st.integers(1, 2_000_000).map(lambda n: Decimal(n) / 1000)  # 0.001 .. 2,000
prices = st.integers(100, 20_000_000).map(lambda n: Decimal(n) / 100)  # 1 .. 200,000
wallets = st.integers(1, 10**9).map(lambda n: Decimal(n) / 100)
sides = st.sampled_from([1, -1])


def reference_lp(
    wallet: Fraction,
    tmm: Fraction,
    upnl: Fraction,
    side: int,
    quantity: Fraction,
    entry: Fraction,
    bracket: Bracket,
) -> Fraction:
    """Binance's LP formula, term for term, exact."""
    mmr, cum = Fraction(bracket.maint_margin_ratio), Fraction(bracket.cum)
    return (wallet - tmm + upnl + cum - side * quantity * entry) / (
        quantity * mmr - side * quantity
    )


def faq_liquidation_price(state: MarginState, table: LeverageBrackets) -> Fraction | None:
    """The FAQ's procedure: the opening level first, then the level at LP until they agree."""
    wallet, tmm, upnl = (
        Fraction(state.wallet_balance),
        Fraction(state.other_maintenance),
        Fraction(state.other_unrealised),
    )
    quantity, entry = Fraction(state.quantity), Fraction(state.entry_price)
    bracket = table.bracket_for(state.quantity * state.entry_price)
    for _ in range(2 * len(table.brackets)):
        lp = reference_lp(wallet, tmm, upnl, state.side, quantity, entry, bracket)
        notional = max(lp, Fraction(0)) * quantity
        at_lp = table.bracket_for(Decimal(notional.numerator) / Decimal(notional.denominator))
        if at_lp == bracket:
            return lp if lp > 0 else None
        bracket = at_lp
    raise AssertionError("the FAQ's iteration did not settle")


def margin_gap_at(state: MarginState, table: LeverageBrackets, price: Decimal) -> Fraction:
    """Margin balance minus total maintenance margin when this position's mark is `price`."""
    p = Fraction(price)
    balance = (
        Fraction(state.wallet_balance)
        + Fraction(state.other_unrealised)
        + state.side * Fraction(state.quantity) * (p - Fraction(state.entry_price))
    )
    notional = Fraction(state.quantity) * p  # exact: Decimal's default context would round
    bracket = table.bracket_for(Decimal(notional.numerator) / Decimal(notional.denominator))
    own = notional * Fraction(bracket.maint_margin_ratio) - Fraction(bracket.cum)
    return balance - Fraction(state.other_maintenance) - own


@st.composite
def states(draw: st.DrawFn) -> MarginState:
    size = draw(sizes) * draw(sides)
    entry = draw(prices)
    # Margin from a leverage of 1..125 on the entry notional, plus or minus a cross remainder.
    leverage = draw(st.integers(1, 125))
    wallet = abs(size) * entry / leverage + draw(st.integers(-(10**6), 10**6)) / Decimal(100)
    other_mm = draw(st.integers(0, 10**7)) / Decimal(100)
    other_pnl = draw(st.integers(-(10**7), 10**7)) / Decimal(100)
    return MarginState(size, entry, wallet, other_mm, other_pnl)


@settings(max_examples=300, deadline=None)
@given(states())
def test_margin_balance_equals_maintenance_margin_at_the_liquidation_price(
    state: MarginState,
) -> None:
    price = liquidation_price(state, BTC)
    if price is None:
        # No positive price where they meet: a long covered down to zero, or an insolvent short.
        # (Or one below 1e-30 of the entry: the rounding of a zero price.)
        gap_at_zero = margin_gap_at(state, BTC, Decimal(0)) * state.side
        assert gap_at_zero >= -Fraction(state.quantity * state.entry_price) / 10**29
        return
    notional = Fraction(state.quantity) * Fraction(price)
    assert abs(margin_gap_at(state, BTC, price)) <= TIGHT * (1 + notional)


@settings(max_examples=300, deadline=None)
@given(states())
def test_the_bracket_search_agrees_with_the_faqs_iteration(state: MarginState) -> None:
    ours = liquidation_price(state, BTC)
    faq = faq_liquidation_price(state, BTC)
    if faq is None or ours is None:
        assert faq is None
        assert ours is None
        return
    assert abs(Fraction(ours) - faq) <= TIGHT * (1 + faq)


@settings(max_examples=300, deadline=None)
@given(states())
def test_margin_balance_is_zero_at_the_bankruptcy_price(state: MarginState) -> None:
    price = bankruptcy_price(state)
    if price is None:
        return
    balance = (
        Fraction(state.wallet_balance)
        + Fraction(state.other_unrealised)
        + state.side * Fraction(state.quantity) * (Fraction(price) - Fraction(state.entry_price))
    )
    assert abs(balance) <= TIGHT * (1 + Fraction(state.quantity) * Fraction(price))


@settings(max_examples=200, deadline=None)
@given(states())
def test_bankruptcy_lies_beyond_liquidation(state: MarginState) -> None:
    # Maintenance margin is positive, so the balance reaches it before it reaches zero.
    liquidation, bankruptcy = liquidation_price(state, BTC), bankruptcy_price(state)
    assume(liquidation is not None and bankruptcy is not None)
    assert liquidation is not None
    assert bankruptcy is not None
    assert (liquidation >= bankruptcy) if state.side > 0 else (liquidation <= bankruptcy)


def freqtrade_dry_run_liquidation_price(
    open_rate: float,
    is_short: bool,
    amount: float,
    wallet_balance: float,
    mm_ratio: float,
    maintenance_amt: float,
    mm_ex_1: float,
    upnl_ex_1: float,
) -> float:
    """Copied from freqtrade/exchange/binance.py `dry_run_liquidation_price` (futures branch),
    with its cross-margin sums (mm_ex_1, upnl_ex_1) passed in."""
    cross_vars = upnl_ex_1 - mm_ex_1
    side_1 = -1 if is_short else 1
    return ((wallet_balance + cross_vars + maintenance_amt) - (side_1 * amount * open_rate)) / (
        (amount * mm_ratio) - (side_1 * amount)
    )


@settings(max_examples=300, deadline=None)
@given(states(), st.sampled_from(BTC.brackets))
def test_agrees_with_freqtrades_formula_in_one_bracket(
    state: MarginState, bracket: Bracket
) -> None:
    ours = liquidation_price_in_bracket(state, bracket)
    theirs = freqtrade_dry_run_liquidation_price(
        float(state.entry_price),
        state.side < 0,
        float(state.quantity),
        float(state.wallet_balance),
        float(bracket.maint_margin_ratio),
        float(bracket.cum),
        float(state.other_maintenance),
        float(state.other_unrealised),
    )
    if ours is None:
        assert theirs <= 1e-6 * float(state.entry_price)
        return
    assert abs(float(ours) - theirs) <= 1e-9 * max(1.0, float(ours), abs(theirs))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 50).map(Decimal),  # BTC size (whole coins: notional across brackets)
    sides,
    st.integers(2_000_000, 8_000_000).map(lambda n: Decimal(n) / 100),  # BTC entry
    st.integers(1, 400).map(Decimal),  # ETH long size
    st.integers(1_000, 4_000).map(Decimal),  # ETH entry
    st.integers(1, 300).map(Decimal),  # ETH mark fall
)
def test_cross_loss_on_one_position_moves_the_others_liquidation_toward_its_mark(
    btc_size: Decimal,
    side: int,
    btc_entry: Decimal,
    eth_size: Decimal,
    eth_entry: Decimal,
    fall: Decimal,
) -> None:
    wallet = btc_size * btc_entry / 4 + eth_size * eth_entry / 4
    account = PerpAccount.with_positions(
        wallet,
        {"BTC/USDT:USDT": BTC, "ETH/USDT:USDT": ETH},
        [
            PerpPosition("BTC/USDT:USDT", side * btc_size, btc_entry, 10, MarginMode.CROSS),
            PerpPosition("ETH/USDT:USDT", eth_size, eth_entry, 10, MarginMode.CROSS),
        ],
    )
    before = {"BTC/USDT:USDT": btc_entry, "ETH/USDT:USDT": eth_entry}
    after = {"BTC/USDT:USDT": btc_entry, "ETH/USDT:USDT": eth_entry - fall}
    lp_before = account.liquidation_price("BTC/USDT:USDT", before)
    lp_after = account.liquidation_price("BTC/USDT:USDT", after)
    assume(lp_before is not None and lp_after is not None)
    assert lp_before is not None
    assert lp_after is not None
    # Toward the BTC mark: up for a long, down for a short.
    assert (lp_after > lp_before) if side > 0 else (lp_after < lp_before)
    # By as much as the formula says: ETH's UPNL falls by size x fall and its maintenance
    # margin by size x fall x MMR (same ETH bracket); in BTC's bracket at LP,
    # dLP = (dUPNL - dTMM) / (Q x MMR - Side x Q).
    eth_before = ETH.bracket_for(eth_size * eth_entry)
    eth_after = ETH.bracket_for(eth_size * (eth_entry - fall))
    btc_bracket = BTC.bracket_for(btc_size * lp_before)
    assume(eth_before == eth_after and btc_bracket == BTC.bracket_for(btc_size * lp_after))
    d_upnl = -Fraction(eth_size * fall)
    d_tmm = -Fraction(eth_size * fall * eth_before.maint_margin_ratio)
    q = Fraction(btc_size)
    expected = (d_upnl - d_tmm) / (q * Fraction(btc_bracket.maint_margin_ratio) - side * q)
    assert abs(Fraction(lp_after) - Fraction(lp_before) - expected) <= TIGHT * Fraction(lp_after)
