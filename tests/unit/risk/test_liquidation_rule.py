"""The liquidation buffer rule and the leverage check (trader/risk/liquidation.py, wired into
the risk engine).

The oracle here is the liquidation condition itself, written from its definitions and not
from the code under test: a position is liquidated when its margin balance falls to its
maintenance margin (Binance FAQ "How to Calculate Liquidation Price of USDⓈ-M Futures
Contracts", https://www.binance.com/en/support/faq/b3c689c1f50a44cabb3a84e663b81d93: margin
balance = wallet + unrealised P&L; maintenance = |notional| x MMR - cum of the notional's
bracket). The buffer holds when that condition is not yet met at the price `buffer` away from
the mark against the position. The bracket table is Binance's BTCUSDT as freqtrade's snapshot
keeps it (tests/unit/domain/perp/tables.py). The least reduction is found by trying every
amount step in turn, not by the code's bisection.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.domain.perp.tables import BTCUSDT_NOW
from tests.unit.engine.builders import T0, quote
from trader.config.trading_settings import RiskSettings
from trader.domain import DomainError, Order, OrderType, Side
from trader.domain.perp import LeverageBrackets, MarginMode, PerpAccount, PerpPosition
from trader.risk import OrderCheck, RiskEngine, TradingState, TradingStatus
from trader.risk.liquidation import PerpExposure, buffer_reductions, leverage_refusal

BTC = "BTC/USDT"
BRACKETS = {BTC: LeverageBrackets.from_binance(BTC, BTCUSDT_NOW)}
STEP = Decimal("0.001")
BUFFER = Decimal("0.05")
D = Decimal
ZERO_COST = Decimal(0)


def maintenance(notional: Decimal) -> Decimal:
    """|notional| x MMR - cum in the bracket whose [floor, cap) holds it (the last past it)."""
    for row in BTCUSDT_NOW:
        if abs(notional) < D(row["notionalCap"]) or row is BTCUSDT_NOW[-1]:
            return abs(notional) * D(row["maintMarginRatio"]) - D(row["cum"])
    raise AssertionError("unreachable")


def safe_at(wallet: Decimal, size: Decimal, entry: Decimal, price: Decimal) -> bool:
    """A lone cross position: margin balance above its maintenance margin at `price`."""
    return wallet + size * (price - entry) >= maintenance(size * price)


def least_reduction(
    wallet: Decimal, size: Decimal, entry: Decimal, mark: Decimal, cost: Decimal = ZERO_COST
) -> Decimal:
    """The fewest whole steps to close at the mark, paying `cost` x the notional closed (the
    realised P&L and the cost stay in the wallet), so the position is safe at the buffer
    price; the whole position if no fewer will do."""
    side = 1 if size > 0 else -1
    buffer_price = mark * (1 - side * BUFFER)
    closed = D(0)
    while closed < abs(size):
        left = size - side * closed
        after = wallet + side * closed * (mark - entry) - closed * mark * cost
        if safe_at(after, left, entry, buffer_price):
            return closed
        closed += STEP
    return abs(size)


def cross(wallet: str, size: str, entry: str) -> PerpAccount:
    position = PerpPosition(BTC, D(size), D(entry), 20, MarginMode.CROSS)
    return PerpAccount.with_positions(D(wallet), BRACKETS, [position])


def reductions(account: PerpAccount, mark: str, buffer: Decimal = BUFFER):
    return buffer_reductions(account, {BTC: D(mark)}, buffer=buffer, steps={BTC: STEP})


def test_a_cross_long_near_its_liquidation_price_is_reduced_just_enough():
    # 1,000 wallet, long 0.5 @ 30,000, mark 29,000: 1000 + 0.5 (P - 30000) = 0.5 P x 0.004
    # gives LP 28,112.45, 3.06% below the mark: inside 5%. At the buffer price 27,550 the
    # condition after closing q at 29,000 is -280.1 + 1560.2 q >= 0: q >= 0.17953, so 0.180.
    [reduction] = reductions(cross("1000", "0.5", "30000"), "29000")
    assert reduction.side is Side.SELL
    assert reduction.amount == D("0.180")
    assert reduction.amount == least_reduction(D(1000), D("0.5"), D(30000), D(29000))
    assert reduction.liquidation_price is not None
    assert abs(reduction.liquidation_price - D("28112.45")) < D("0.01")
    assert reduction.distance is not None
    assert reduction.distance < BUFFER
    assert not reduction.closes
    assert "inside the buffer 5.00%" in reduction.reason
    assert "reduce by 0.180 of 0.5 (reduce-only)" in reduction.reason


def test_a_cross_short_near_its_liquidation_price_is_reduced_by_a_buy():
    # Short 0.5 @ 30,000, mark 31,000: 1000 - 0.5 (P - 30000) = 0.5 P x 0.004: LP 31,872.51.
    [reduction] = reductions(cross("1000", "-0.5", "30000"), "31000")
    assert reduction.side is Side.BUY
    assert reduction.amount == least_reduction(D(1000), D("-0.5"), D(30000), D(31000))
    assert reduction.amount > 0
    assert reduction.liquidation_price is not None
    assert abs(reduction.liquidation_price - D("31872.51")) < D("0.01")


def test_the_fills_costs_are_covered_so_the_buffer_holds_after_the_fill():
    # Closing costs 0.12% of the notional (a taker fee and half the spread): 1,560.2 q - 280.1
    # - 0.0012 x 29,000 q >= 0 gives q >= 0.18357: 0.184, not 0.180.
    cost = D("0.0012")
    account = cross("1000", "0.5", "30000")
    [reduction] = buffer_reductions(
        account, {BTC: D(29000)}, buffer=BUFFER, steps={BTC: STEP}, costs={BTC: cost}
    )
    assert reduction.amount == D("0.184")
    assert reduction.amount == least_reduction(D(1000), D("0.5"), D(30000), D(29000), cost)


def test_an_isolated_position_in_one_bracket_is_closed_whole():
    # An isolated position keeps its margin per unit when reduced: LP = EP - WB / size (one
    # bracket) does not move, so no partial reduction restores the buffer.
    position = PerpPosition(BTC, D("0.5"), D(30000), 10, MarginMode.ISOLATED, D(1500))
    account = PerpAccount.with_positions(D(10000), BRACKETS, [position])
    [reduction] = reductions(account, "27500")
    assert (reduction.side, reduction.amount, reduction.closes) == (Side.SELL, D("0.5"), True)
    assert "close it (reduce-only)" in reduction.reason


def test_a_position_outside_the_buffer_or_the_rule_off_wants_nothing():
    far = cross("10000", "0.5", "30000")  # LP about 10,040: far below
    assert reductions(far, "29000") == []
    near = cross("1000", "0.5", "30000")
    assert reductions(near, "29000", buffer=D(0)) == []  # 0 turns the rule off


def test_the_rule_refuses_to_guess_a_missing_mark_or_step():
    account = cross("1000", "0.5", "30000")
    with pytest.raises(DomainError, match="no mark price"):
        buffer_reductions(account, {}, buffer=BUFFER, steps={BTC: STEP})
    with pytest.raises(DomainError, match="no amount step"):
        buffer_reductions(account, {BTC: D(29000)}, buffer=BUFFER, steps={})
    with pytest.raises(DomainError, match="must not be negative"):
        buffer_reductions(account, {BTC: D(29000)}, buffer=D("-0.1"), steps={BTC: STEP})


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(min_value=10, max_value=5000),  # thousandths of a BTC
    short=st.booleans(),
    entry=st.integers(min_value=20_000, max_value=60_000),
    leverage=st.integers(min_value=3, max_value=60),
    move=st.integers(min_value=-600, max_value=600),  # the mark's move, in bps of the entry
    cost_bps=st.sampled_from([0, 5, 12, 30]),
)
def test_the_reduction_is_the_least_whole_step_that_restores_the_buffer(
    size, short, entry, leverage, move, cost_bps
):
    quantity = D(size) * STEP
    signed = -quantity if short else quantity
    wallet = (quantity * entry / leverage).quantize(D("0.01"))
    mark = (D(entry) * (1 + D(move) / 10_000)).quantize(D("0.1"))
    side = -1 if short else 1
    if not safe_at(wallet, signed, D(entry), mark):
        return  # already past liquidation: the exchange's, not the rule's
    cost = D(cost_bps) / 10_000
    wanted = buffer_reductions(
        cross(str(wallet), str(signed), str(entry)), {BTC: mark}, buffer=BUFFER,
        steps={BTC: STEP}, costs={BTC: cost},
    )  # fmt: skip
    buffer_price = mark * (1 - side * BUFFER)
    if safe_at(wallet, signed, D(entry), buffer_price):
        assert wanted == []
        return
    [reduction] = wanted
    assert reduction.amount == least_reduction(wallet, signed, D(entry), mark, cost)
    assert reduction.side is (Side.BUY if short else Side.SELL)


# --- the leverage check -------------------------------------------------------------------

LIMITS = RiskSettings(
    max_order_notional=D(10**6),
    max_position_notional=D(10**6),
    max_total_exposure=D(10**6),
    min_edge_bps=0.0,
    max_leverage=3.0,
    liquidation_buffer=0.05,
)
AT = T0 + timedelta(seconds=5)


def engine() -> RiskEngine:
    return RiskEngine(
        LIMITS, maker_fee_bps=2.0, taker_fee_bps=10.0, max_quote_age=timedelta(seconds=30),
        status=TradingStatus(TradingState.ACTIVE, "test", T0),
    )  # fmt: skip


def perp_check(
    side: Side, amount: str, *, position: str = "0", balance: str = "1000", perp: bool = True
) -> OrderCheck:
    order = Order.create(
        strategy="simple", symbol="SOL/USDT", side=side, type=OrderType.MARKET,
        amount=D(amount), limit_price=None, tick_time=AT, leg="market",
    )  # fmt: skip
    exposure = PerpExposure(others_notional=D(1000), margin_balance=D(balance))
    return OrderCheck(
        order, D(100), quote(), D(position), D(100), D(0), 500.0,
        perp=exposure if perp else None,
    )  # fmt: skip


def test_an_order_past_max_leverage_is_refused_with_its_reason():
    # Margin balance 1,000 at 3x allows 3,000 of notional; 1,000 is held elsewhere.
    assert engine().judge(perp_check(Side.BUY, "20"), AT).accepted  # 2,000 + 1,000
    verdict = engine().judge(perp_check(Side.SELL, "21"), AT)  # a short of 2,100 + 1,000
    assert (verdict.accepted, verdict.rule) == (False, "leverage")
    assert "positions' notional 3100.00 at the mark > max_leverage 3.0 x margin balance " in (
        verdict.reason
    )


def test_reducing_stays_possible_past_max_leverage_and_spot_is_not_checked():
    # Long 40 (4,000) is past 3x already: selling 10 reduces and goes.
    assert engine().judge(perp_check(Side.SELL, "10", position="40"), AT).accepted
    # A spot order (no perpetual account) is not put to the leverage check.
    assert engine().judge(perp_check(Side.BUY, "50", perp=False), AT).accepted


def test_no_margin_balance_backs_no_position():
    why = leverage_refusal(
        position=D(0), order=D(1), mark=D(100),
        exposure=PerpExposure(D(0), D(-5)), max_leverage=D(3),
    )  # fmt: skip
    assert why == "no margin balance (-5.00) to back a position"


def test_the_engine_says_and_counts_each_reduction():
    risk = engine()
    account = cross("1000", "0.5", "30000")
    marks, steps = {BTC: D(29000)}, {BTC: STEP}
    # The engine adds its taker fee (10 bps) to what closing costs.
    wanted = least_reduction(D(1000), D("0.5"), D(30000), D(29000), D("0.001"))
    assert [r.amount for r in risk.buffer_reductions(account, marks, steps)] == [wanted]
    risk.buffer_reductions(account, marks, steps)
    assert risk.reductions == {BTC: 2}
    risk.settings = LIMITS.model_copy(update={"liquidation_buffer": 0.0})
    assert risk.buffer_reductions(account, marks, steps) == []
    assert risk.reductions == {BTC: 2}
