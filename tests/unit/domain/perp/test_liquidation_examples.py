"""Liquidation prices on worked examples.

Formula: Binance's FAQ "How to Calculate Liquidation Price of USDⓈ-M Futures Contracts"
(https://www.binance.com/en/support/faq/b3c689c1f50a44cabb3a84e663b81d93):
    LP = (WB - TMM1 + UPNL1 + cumB - Side1 x Position1 x EP1)
         / (Position1 x MMR_B - Side1 x Position1)

The example figures (wallet 1,535,443.01 USDT; BTCUSDT long 109.488 @ 32,481.98, mark 31,967.27,
MMR 2.5%, cum 16,300; ETHUSDT long 3,683.979 @ 1,456.84, mark 1,335.18, MMR 10%, cum 135,365;
answers 26,316.89 / 1,153.26 cross and 18,778.73 / 1,114.78 isolated) are those freqtrade's
tests take "from calc example" for this FAQ (freqtrade/freqtrade tests/exchange/test_binance.py,
test_liquidation_price_binance, commit c9ae5e1e). The FAQ's own page, as stored for this session,
has the formula only as an image and no example text, so the figures come through freqtrade.
A copy of the FAQ's example (midiamania.com/summer-of-lkfkp/binance-futures-liquidation-formula,
pages corpus) gives its intermediate figures: "Maintenance Margin of BTCUSDT = 71200.81144
(3500032.458 * 2.50% - 16300)", "Maintenance Margin of ETHUSDT = 356,512.508 (4918775.081 * 10.00%
- 135365)": both asserted below. The same copy quotes ETH's UPNL as -447,482.100, where size x
(mark - entry) from freqtrade's figures is -448,192.885 (a difference of 0.193 in ETH's entry or
mark): the answers below are freqtrade's, and the copy's final prices are not in the excerpt.
Short positions and the bracket change have no documented example there: those are built by hand
from the formula, the arithmetic written out beside each.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.unit.domain.perp.tables import BTCUSDT_FAQ_ERA, BTCUSDT_NOW, ETHUSDT_FAQ_ERA
from trader.domain.perp import (
    Bracket,
    LeverageBrackets,
    MarginMode,
    MarginState,
    PerpAccount,
    PerpPosition,
    bankruptcy_price,
    liquidation_bracket,
    liquidation_price,
    liquidation_price_in_bracket,
)

D = Decimal
WALLET = D("1535443.01")
BTC_SIZE, BTC_ENTRY, BTC_MARK = D("109.488"), D("32481.98"), D("31967.27")
ETH_SIZE, ETH_ENTRY, ETH_MARK = D("3683.979"), D("1456.84"), D("1335.18")
BTC = LeverageBrackets.from_binance("BTC/USDT:USDT", BTCUSDT_FAQ_ERA)
ETH = LeverageBrackets.from_binance("ETH/USDT:USDT", ETHUSDT_FAQ_ERA)
NOW = LeverageBrackets.from_binance("BTC/USDT:USDT", BTCUSDT_NOW)


def _bracket(mmr: str, cum: str) -> Bracket:
    return Bracket(1, 1, D(0), D(10) ** 12, D(mmr), D(cum))


def _cents(price: Decimal | None) -> Decimal:
    assert price is not None
    return price.quantize(D("0.01"))


@pytest.mark.parametrize(
    ("size", "entry", "mmr", "cum", "expected"),
    [
        (ETH_SIZE, ETH_ENTRY, "0.10", "135365", "1114.78"),
        (BTC_SIZE, BTC_ENTRY, "0.025", "16300", "18778.73"),
    ],
)
def test_isolated_long_faq_figures(
    size: Decimal, entry: Decimal, mmr: str, cum: str, expected: str
) -> None:
    # Isolated: WB = the position's isolated wallet (here the example's 1,535,443.01), TMM=UPNL=0.
    price = liquidation_price_in_bracket(MarginState(size, entry, WALLET), _bracket(mmr, cum))
    assert _cents(price) == D(expected)


def test_cross_faq_figures_with_the_other_position_at_its_mark() -> None:
    # TMM1 and UPNL1 of the *other* position, on its mark price:
    btc_mm = BTC_SIZE * BTC_MARK * D("0.025") - 16300  # 71,200.81144400
    btc_upnl = BTC_SIZE * (BTC_MARK - BTC_ENTRY)  # -56,354.56848
    eth_mm = ETH_SIZE * ETH_MARK * D("0.10") - 135365  # 356,512.5081220
    eth_upnl = ETH_SIZE * (ETH_MARK - ETH_ENTRY)  # -448,192.88514
    eth = MarginState(ETH_SIZE, ETH_ENTRY, WALLET, btc_mm, btc_upnl)
    btc = MarginState(BTC_SIZE, BTC_ENTRY, WALLET, eth_mm, eth_upnl)
    assert _cents(liquidation_price_in_bracket(eth, _bracket("0.10", "135365"))) == D("1153.26")
    assert _cents(liquidation_price_in_bracket(btc, _bracket("0.025", "16300"))) == D("26316.89")


def test_cross_faq_figures_through_the_account_and_bracket_tables() -> None:
    # The same example from positions, marks and the era's tables: the account finds each
    # bracket (BTC 3.50M notional: 2.5% / 16,300; ETH 4.92M: 10% / 135,365) by itself.
    account = PerpAccount.with_positions(
        WALLET,
        {"BTC/USDT:USDT": BTC, "ETH/USDT:USDT": ETH},
        [
            PerpPosition("BTC/USDT:USDT", BTC_SIZE, BTC_ENTRY, 20, MarginMode.CROSS),
            PerpPosition("ETH/USDT:USDT", ETH_SIZE, ETH_ENTRY, 4, MarginMode.CROSS),
        ],
    )
    marks = {"BTC/USDT:USDT": BTC_MARK, "ETH/USDT:USDT": ETH_MARK}
    assert account.maintenance_margin("ETH/USDT:USDT", marks) == D("356512.5081220")
    assert account.maintenance_margin("BTC/USDT:USDT", marks) == D("71200.811444")
    assert _cents(account.liquidation_price("BTC/USDT:USDT", marks)) == D("26316.89")
    assert _cents(account.liquidation_price("ETH/USDT:USDT", marks)) == D("1153.26")


def test_isolated_short_by_hand() -> None:
    # Short 1 BTC @ 50,000 at 20x isolated: wallet 50,000 / 20 = 2,500. Notional 50,000 is
    # bracket 2 of today's BTCUSDT table (floor 50,000 inclusive): MMR 0.5%, cum 50.
    # LP = (2,500 + 50 - (-1)(1)(50,000)) / (1 x 0.005 - (-1)(1)) = 52,550 / 1.005 = 52,288.557...
    # Notional at LP 52,288.56: still bracket 2. Bankruptcy: 50,000 + 2,500 / 1 = 52,500.
    state = MarginState(D(-1), D(50000), D(2500))
    assert liquidation_bracket(state, NOW) == NOW.brackets[1]
    assert _cents(liquidation_price(state, NOW)) == D("52288.56")
    assert bankruptcy_price(state) == D(52500)


def test_cross_short_with_another_position_by_hand() -> None:
    # Cross wallet 10,000. Long 20 ETH @ 2,000, mark 1,900: notional 38,000, ETH bracket 2
    # (0.65%, cum 15): TMM = 38,000 x 0.0065 - 15 = 232; UPNL = 20 x (1,900 - 2,000) = -2,000.
    # Short 2 BTC @ 40,000, today's BTCUSDT table: try bracket 2 (0.5%, cum 50):
    # LP = (10,000 - 232 - 2,000 + 50 + 2 x 40,000) / (2 x 0.005 + 2) = 87,818 / 2.01
    #    = 43,690.547...; notional 87,381.09: bracket 2, consistent.
    account = PerpAccount.with_positions(
        D(10000),
        {"BTC/USDT:USDT": NOW, "ETH/USDT:USDT": ETH},
        [
            PerpPosition("BTC/USDT:USDT", D(-2), D(40000), 5, MarginMode.CROSS),
            PerpPosition("ETH/USDT:USDT", D(20), D(2000), 5, MarginMode.CROSS),
        ],
    )
    marks = {"BTC/USDT:USDT": D(40000), "ETH/USDT:USDT": D(1900)}
    state = account.margin_state("BTC/USDT:USDT", marks)
    assert (state.other_maintenance, state.other_unrealised) == (D(232), D(-2000))
    assert _cents(account.liquidation_price("BTC/USDT:USDT", marks)) == D("43690.55")
    # Bankruptcy: 10,000 - 2,000 + (-2)(P - 40,000) = 0  ->  P = 44,000.
    assert account.bankruptcy_price("BTC/USDT:USDT", marks) == D(44000)


def test_long_whose_liquidation_falls_into_a_lower_bracket() -> None:
    # Long 10 BTC @ 61,000 at 10x isolated: wallet 61,000; notional 610,000 is bracket 3
    # (0.65%, cum 950). With it: LP = (61,000 + 950 - 610,000) / (10 x 0.0065 - 10)
    # = -548,050 / -9.935 = 55,163.56; notional 551,635.6 < 600,000: bracket 2, so recompute
    # with 0.5%, cum 50: LP = (61,000 + 50 - 610,000) / (0.05 - 10) = -548,950 / -9.95
    # = 55,170.854...; notional 551,708.5: bracket 2, consistent.
    state = MarginState(D(10), D(61000), D(61000))
    first = liquidation_price_in_bracket(state, NOW.brackets[2])
    assert _cents(first) == D("55163.56")
    assert liquidation_bracket(state, NOW) == NOW.brackets[1]
    assert _cents(liquidation_price(state, NOW)) == D("55170.85")


def test_short_whose_liquidation_falls_into_a_higher_bracket() -> None:
    # Short 11.9 BTC @ 50,000 at 10x isolated: wallet 59,500; notional 595,000 is bracket 2.
    # With it: LP = (59,500 + 50 + 595,000) / (11.9 x 1.005) = 654,550 / 11.9595 = 54,730.55;
    # notional 651,293.5 >= 600,000: bracket 3 (0.65%, cum 950): LP = (59,500 + 950 + 595,000)
    # / (11.9 x 1.0065) = 655,450 / 11.97735 = 54,724.13; notional 651,217: bracket 3, consistent.
    state = MarginState(D("-11.9"), D(50000), D(59500))
    assert _cents(liquidation_price_in_bracket(state, NOW.brackets[1])) == D("54730.55")
    assert liquidation_bracket(state, NOW) == NOW.brackets[2]
    assert _cents(liquidation_price(state, NOW)) == D("54724.13")


def test_no_liquidation_price_for_a_fully_covered_long() -> None:
    # A 1x long with extra margin: the wallet covers the position down to zero; the FAQ shows
    # "--" for a negative LP: (12,000 + 0 - 10,000) / (1 x 0.004 - 1) < 0.
    state = MarginState(D(1), D(10000), D(12000))
    assert liquidation_price(state, NOW) is None
    assert bankruptcy_price(state) is None
