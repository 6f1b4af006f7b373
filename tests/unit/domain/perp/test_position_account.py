"""Positions and the account: entry price on adding, realised P&L on reducing and reversing,
and the balances Binance reports.

Sources: Binance USDⓈ-M positionRisk (one average `entryPrice` per position in one-way mode;
`isolatedWallet`; `initialMargin` on the mark price), and Binance's "What Is the Available
Balance, Margin Balance, and Total Balance on Binance Futures?": margin balance = wallet balance +
unrealised P&L; available balance = wallet balance - initial margin + unrealised P&L; margin
ratio = maintenance margin / margin balance (the USDⓈ-M liquidation FAQ: liquidation at 100%).
freqtrade's users hit a wrong liquidation price after adding to a position (a price kept from
the first entry): the add tests below hold the price after adding to a fresh position's.
"""

from __future__ import annotations

from decimal import Decimal, localcontext
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.domain.perp.tables import BTCUSDT_NOW, ETHUSDT_FAQ_ERA
from trader.domain.errors import DomainError
from trader.domain.perp import (
    LeverageBrackets,
    MarginMode,
    MarginState,
    PerpAccount,
    PerpPosition,
    apply_trade,
    liquidation_price,
    open_position,
    parse_margin_mode,
)

D = Decimal
BTC = LeverageBrackets.from_binance("BTC/USDT:USDT", BTCUSDT_NOW)
ETH = LeverageBrackets.from_binance("ETH/USDT:USDT", ETHUSDT_FAQ_ERA)
TABLES = {"BTC/USDT:USDT": BTC, "ETH/USDT:USDT": ETH}
TIGHT = Fraction(1, 10**40)

amounts = st.integers(1, 100_000).map(lambda n: Decimal(n) / 1000)
prices = st.integers(1_000_000, 10_000_000).map(lambda n: Decimal(n) / 100)


def test_adding_weights_the_entry_price() -> None:
    position = open_position("BTC/USDT:USDT", D(1), D(30000), 10, MarginMode.CROSS)
    added = apply_trade(position, D(3), D(34000))
    assert added.realised_pnl == 0
    assert added.position is not None
    # (1 x 30,000 + 3 x 34,000) / 4 = 33,000
    assert added.position.entry_price == D(33000)
    assert added.position.size == D(4)


def test_reducing_realises_against_the_entry_and_keeps_it() -> None:
    short = open_position("BTC/USDT:USDT", D(-2), D(30000), 10, MarginMode.CROSS)
    reduced = apply_trade(short, D("0.5"), D(28000))
    # A short closing 0.5 at 28,000 from 30,000: -1 x 0.5 x (28,000 - 30,000) = +1,000
    assert reduced.realised_pnl == D(1000)
    assert reduced.position is not None
    assert (reduced.position.size, reduced.position.entry_price) == (D("-1.5"), D(30000))


def test_reversing_closes_then_opens_the_rest_at_the_fill_price() -> None:
    long = open_position("BTC/USDT:USDT", D(1), D(30000), 5, MarginMode.ISOLATED)
    assert long.isolated_wallet == D(6000)  # 30,000 / 5
    reversed_ = apply_trade(long, D(-3), D(29000))
    assert reversed_.realised_pnl == D(-1000)  # 1 x (29,000 - 30,000)
    assert reversed_.position is not None
    assert (reversed_.position.size, reversed_.position.entry_price) == (D(-2), D(29000))
    assert reversed_.position.isolated_wallet == D(11600)  # 2 x 29,000 / 5


def test_closing_leaves_no_position() -> None:
    long = open_position("BTC/USDT:USDT", D(1), D(30000), 5, MarginMode.CROSS)
    closed = apply_trade(long, D(-1), D(31000))
    assert closed.position is None
    assert closed.realised_pnl == D(1000)


def test_isolated_reduction_releases_margin_in_proportion() -> None:
    long = open_position("BTC/USDT:USDT", D(4), D(30000), 10, MarginMode.ISOLATED)
    reduced = apply_trade(long, D(-1), D(30000))
    assert reduced.position is not None
    assert reduced.position.isolated_wallet == D(9000)  # 12,000 x 3/4


@settings(max_examples=200, deadline=None)
@given(amounts, prices, amounts, prices, st.integers(1, 50), st.sampled_from([1, -1]))
def test_isolated_add_then_liquidation_equals_a_fresh_position_at_the_weighted_entry(
    first: Decimal, first_price: Decimal, more: Decimal, more_price: Decimal, lev: int, side: int
) -> None:
    opened = open_position("BTC/USDT:USDT", side * first, first_price, lev, MarginMode.ISOLATED)
    added = apply_trade(opened, side * more, more_price).position
    assert added is not None
    # The fresh position, computed here: weighted entry and the two initial margins.
    entry = (Fraction(first) * Fraction(first_price) + Fraction(more) * Fraction(more_price)) / (
        Fraction(first) + Fraction(more)
    )
    wallet = (Fraction(first) * Fraction(first_price) + Fraction(more) * Fraction(more_price)) / lev
    assert abs(Fraction(added.entry_price) - entry) <= TIGHT * entry
    assert abs(Fraction(added.isolated_wallet) - wallet) <= TIGHT * wallet
    with localcontext(prec=50):  # the module's quotient precision
        fresh = MarginState(
            side * (first + more),
            Decimal(entry.numerator) / Decimal(entry.denominator),
            Decimal(wallet.numerator) / Decimal(wallet.denominator),
        )
    ours = liquidation_price(MarginState(added.size, added.entry_price, added.isolated_wallet), BTC)
    theirs = liquidation_price(fresh, BTC)
    if ours is None or theirs is None:
        assert ours is theirs
        return
    assert abs(Fraction(ours) - Fraction(theirs)) <= Fraction(1, 10**30) * Fraction(theirs)


@settings(max_examples=200, deadline=None)
@given(amounts, prices, amounts, prices, st.sampled_from([1, -1]))
def test_cross_add_then_liquidation_equals_a_fresh_position(
    first: Decimal, first_price: Decimal, more: Decimal, more_price: Decimal, side: int
) -> None:
    wallet = D(50000)
    account = PerpAccount(wallet, TABLES)
    account = account.fill(
        "BTC/USDT:USDT", side * first, first_price, leverage=20, margin_mode=MarginMode.CROSS
    )
    account = account.fill("BTC/USDT:USDT", side * more, more_price)
    position = account.positions["BTC/USDT:USDT"]
    fresh = PerpAccount.with_positions(
        wallet,
        TABLES,
        [
            PerpPosition(
                "BTC/USDT:USDT", side * (first + more), position.entry_price, 20, MarginMode.CROSS
            )
        ],
    )
    marks = {"BTC/USDT:USDT": more_price}
    assert account.liquidation_price("BTC/USDT:USDT", marks) == fresh.liquidation_price(
        "BTC/USDT:USDT", marks
    )
    entry = (Fraction(first) * Fraction(first_price) + Fraction(more) * Fraction(more_price)) / (
        Fraction(first) + Fraction(more)
    )
    assert abs(Fraction(position.entry_price) - entry) <= TIGHT * entry


def test_adding_moves_the_liquidation_price_unlike_a_stale_entry() -> None:
    # The freqtrade symptom: after adding, a liquidation price from the first fill alone.
    account = PerpAccount(D(10000), TABLES).fill(
        "BTC/USDT:USDT", D(1), D(30000), leverage=10, margin_mode=MarginMode.ISOLATED
    )
    marks = {"BTC/USDT:USDT": D(30000)}
    first = account.liquidation_price("BTC/USDT:USDT", marks)
    added = account.fill("BTC/USDT:USDT", D(1), D(20000))
    after = added.liquidation_price("BTC/USDT:USDT", marks)
    # Isolated, 10x: wallet 3,000 + 2,000 = 5,000, 2 BTC at entry 25,000, bracket 1 (0.4%):
    # LP = (5,000 + 0 - 50,000) / (2 x 0.004 - 2) = 22,590.36...
    assert after is not None
    assert after.quantize(D("0.01")) == D("22590.36")
    assert first != after


def _account() -> tuple[PerpAccount, dict[str, Decimal]]:
    # Wallet 10,000. Cross long 1 BTC @ 30,000 (10x), mark 29,000. Isolated short 10 ETH
    # @ 2,000 (5x, wallet 4,000), mark 1,900.
    account = PerpAccount(D(10000), TABLES)
    account = account.fill(
        "BTC/USDT:USDT", D(1), D(30000), leverage=10, margin_mode=MarginMode.CROSS
    )
    account = account.fill(
        "ETH/USDT:USDT", D(-10), D(2000), leverage=5, margin_mode=MarginMode.ISOLATED
    )
    return account, {"BTC/USDT:USDT": D(29000), "ETH/USDT:USDT": D(1900)}


def test_balances_as_binance_defines_them() -> None:
    account, marks = _account()
    assert account.cross_wallet_balance == D(6000)  # 10,000 - 4,000 isolated
    assert account.unrealised_pnl(marks) == D(-1000) + D(1000)
    assert account.margin_balance(marks) == D(10000)  # wallet + all unrealised P&L
    # Available: cross wallet 6,000 + cross P&L -1,000 - cross IM 29,000 / 10 = 2,100.
    assert account.available_balance(marks) == D(2100)
    assert account.available_balance(marks, open_order_margin=D(3000)) == 0
    # Cross margin ratio: BTC MM 29,000 x 0.4% = 116 over cross balance 5,000.
    assert account.margin_ratio(marks) == D("0.0232")
    # Isolated ETH: MM 19,000 x 0.65% - 15 = 108.5 over 4,000 + 1,000.
    assert account.position_margin_ratio("ETH/USDT:USDT", marks) == D("0.0217")


def test_fees_and_funding_are_booked_in_the_wallet() -> None:
    account = PerpAccount(D(10000), TABLES).fill(
        "BTC/USDT:USDT", D(1), D(30000), fee=D(12), leverage=10, margin_mode=MarginMode.CROSS
    )
    account = account.book_funding("BTC/USDT:USDT", D("0.0001"), D(31000))  # long pays 3.1
    account = account.fill("BTC/USDT:USDT", D(-1), D(32000), fee=D("12.8"))
    assert account.positions == {}
    assert account.realised_pnl == D(2000)
    assert account.fees_paid == D("24.8")
    assert account.funding_paid == D("3.1")
    assert account.wallet_balance == D(10000) + 2000 - D("24.8") - D("3.1")


def test_isolated_funding_comes_out_of_the_isolated_wallet() -> None:
    account = PerpAccount(D(10000), TABLES).fill(
        "BTC/USDT:USDT", D(-1), D(30000), leverage=10, margin_mode=MarginMode.ISOLATED
    )
    account = account.book_funding("BTC/USDT:USDT", D("0.0002"), D(30000))  # short receives 6
    assert account.positions["BTC/USDT:USDT"].isolated_wallet == D(3006)
    assert account.wallet_balance == D(10006)
    assert account.funding_paid == D(-6)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a: a.fill("BTC/USDT:USDT", D(1), D(1)), "needs its leverage and margin mode"),
        (
            lambda a: a.fill("SOL/USDT:USDT", D(1), D(1), leverage=1, margin_mode="cross"),
            "no leverage brackets",
        ),
        (lambda a: a.liquidation_price("BTC/USDT:USDT", {}), "no open position"),
        (lambda a: a.book_funding("BTC/USDT:USDT", D(0), D(1)), "no open position"),
    ],
)
def test_bad_requests_are_domain_errors(call: object, message: str) -> None:
    account = PerpAccount(D(1000), TABLES)
    with pytest.raises(DomainError, match=message):
        call(account)  # type: ignore[operator]


def test_positions_refuse_bad_values() -> None:
    with pytest.raises(DomainError, match="non-zero size"):
        PerpPosition("BTC/USDT:USDT", D(0), D(1), 1, MarginMode.CROSS)
    with pytest.raises(DomainError, match="leverage must be at least 1"):
        PerpPosition("BTC/USDT:USDT", D(1), D(1), 0, MarginMode.CROSS)
    with pytest.raises(DomainError, match="no isolated wallet"):
        PerpPosition("BTC/USDT:USDT", D(1), D(1), 1, MarginMode.CROSS, D(5))
    with pytest.raises(DomainError, match="floats drift"):
        PerpPosition("BTC/USDT:USDT", 1.5, D(1), 1, MarginMode.CROSS)  # type: ignore[arg-type]
    account, marks = _account()
    with pytest.raises(DomainError, match="no mark price"):
        account.margin_balance({"BTC/USDT:USDT": D(1)})
    assert marks


def test_margin_modes_and_leverage_are_checked() -> None:
    assert parse_margin_mode("ISOLATED") is MarginMode.ISOLATED  # Binance's marginType spelling
    with pytest.raises(DomainError, match="margin mode must be"):
        parse_margin_mode("portfolio")
    with pytest.raises(DomainError, match="leverage must be a whole number"):
        open_position("BTC/USDT:USDT", D(1), D(1), 0, MarginMode.ISOLATED)
    with pytest.raises(DomainError, match="map each symbol"):
        PerpAccount(D(1), TABLES, [])  # type: ignore[arg-type]


def test_removable_isolated_margin_by_binances_formula() -> None:
    # Binance FAQ "How to Adjust Margin Balance in Isolated Margin Mode" (USDⓈ-M):
    # max(0, min(isolatedWallet, isolatedWallet + size x (mark - entry) - mark x |size| x IMR)).
    # Long 1 BTC @ 30,000 at 10x, wallet 3,000 + 1,000 added: at mark 31,000:
    # min(4,000, 4,000 + 1,000 - 3,100) = 1,900; at mark 27,000: 4,000 - 3,000 - 2,700 < 0 -> 0.
    long = PerpPosition("BTC/USDT:USDT", D(1), D(30000), 10, MarginMode.ISOLATED, D(4000))
    assert long.removable_margin(D(31000)) == D(1900)
    assert long.removable_margin(D(27000)) == 0
    with pytest.raises(DomainError, match="only an isolated position"):
        PerpPosition("BTC/USDT:USDT", D(1), D(1), 1, MarginMode.CROSS).removable_margin(D(1))
