"""Fees posted after the fills: matching postings that name no order to the estimated fills of
their symbol, currency and day; the portfolio moved by the difference in the asset charged;
balances compared within the estimates still to be posted.

Reference values: Alpaca's documented CFEE (https://alpaca.markets/docs/crypto/activities/):
"qty": "-0.000195" ETH at "price": "1884.5" on 2022-08-12, 25 bps of a 0.078 ETH buy at tier
1; a maker's fill at tier 1 pays 15 bps (Alpaca Crypto LLC's fee disclosure).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

from trader.domain import Fill, Liquidity, Portfolio, Side
from trader.domain.fee_posting import (
    FeePosting,
    corrected,
    match,
    pending_by_asset,
)
from trader.domain.reconciliation import BalanceCheck, compare_balances

DAY = date(2022, 8, 12)
AT = datetime(2022, 8, 12, 15, tzinfo=UTC)


def day_of(at: datetime) -> date:
    return at.date()


def buy(n: int, price: str, amount: str, fee: str, at: datetime = AT) -> Fill:
    return Fill(
        f"ETHUSD-{n}", f"c{n}", "ETH/USD", Side.BUY, Decimal(price), Decimal(amount),
        Decimal(fee), "ETH", Liquidity.TAKER, at, fee_estimated=True,
    )  # fmt: skip


def cfee(n: int, price: str, qty: str, day: date = DAY) -> FeePosting:
    return FeePosting(f"p{n}", "CFEE", "ETH/USD", "ETH", Decimal(qty), day, Decimal(price))


def test_one_posting_per_fill_corrects_the_fill_of_its_price():
    fills = [buy(1, "1884.5", "0.078", "0.000195"), buy(2, "1890", "0.1", "0.00025")]
    # The second fill rested: Alpaca charged a maker's 15 bps, not the 25 estimated.
    postings = [cfee(2, "1890", "0.00015"), cfee(1, "1884.5", "0.000195")]
    corrections, unmatched = match(postings, fills, day_of)
    assert not unmatched
    assert {(c.posting_ids, c.fill_ids, c.difference) for c in corrections} == {
        (("p1",), ("ETHUSD-1",), Decimal(0)),
        (("p2",), ("ETHUSD-2",), Decimal("-0.00010")),
    }


def test_postings_that_cannot_be_told_apart_correct_their_day_together():
    fills = [buy(1, "1884.5", "0.078", "0.000195"), buy(2, "1890", "0.1", "0.00025")]
    # One posting for the day (no price): both fills, together.
    day_total = FeePosting("d1", "CFEE", "ETH/USD", "ETH", Decimal("0.000345"), DAY)
    [correction], unmatched = match([day_total], fills, day_of)
    assert not unmatched
    assert correction.fill_ids == ("ETHUSD-1", "ETHUSD-2")
    assert correction.estimated == Decimal("0.000445")
    assert correction.difference == Decimal("-0.000100")


def test_a_posting_of_another_day_or_currency_meets_no_fill():
    fills = [buy(1, "1884.5", "0.078", "0.000195")]
    other_day = cfee(1, "1884.5", "0.000195", date(2022, 8, 13))
    in_dollars = FeePosting("u", "CFEE", "ETH/USD", "USD", Decimal("0.37"), DAY, Decimal(1))
    corrections, unmatched = match([other_day, in_dollars], fills, day_of)
    assert corrections == []
    assert sorted(p.posting_id for p in unmatched) == ["p1", "u"]


def test_the_portfolio_moves_by_the_difference_in_the_coin_or_in_cash():
    fill = buy(1, "1890", "0.1", "0.00025")
    before = Portfolio("USD", Decimal(1000)).apply(fill)
    assert before.amount("ETH/USD") == Decimal("0.09975")
    [coin], _ = match([cfee(1, "1890", "0.00015")], [fill], day_of)
    after = corrected(before, coin)
    # 0.0001 ETH given back: the position is what Alpaca holds, cash untouched.
    assert after.amount("ETH/USD") == Decimal("0.09985")
    assert after.cash == before.cash
    assert after.fees_paid == before.fees_paid - Decimal("0.0001") * Decimal(1890)
    sell = Fill(
        "ETHUSD-9", "c9", "ETH/USD", Side.SELL, Decimal(1900), Decimal("0.05"), Decimal("0.2375"),
        "USD", Liquidity.TAKER, AT, fee_estimated=True,
    )  # fmt: skip
    sold = after.apply(sell)
    usd = FeePosting("u", "CFEE", "ETH/USD", "USD", Decimal("0.1425"), DAY, Decimal(1900))
    [cash], _ = match([usd], [sell], day_of)
    assert corrected(sold, cash).cash == sold.cash + Decimal("0.095")


def test_balances_differ_within_the_estimates_still_to_be_posted_and_no_further():
    pending = pending_by_asset([buy(1, "1890", "0.1", "0.00025")])
    assert pending == {"ETH": Decimal("0.00025")}
    within, beyond = compare_balances(
        {"ETH": Decimal("0.09975"), "USD": Decimal(100)},
        {"ETH": Decimal("0.09985"), "USD": Decimal("100.01")},
        pending,
    )
    assert within.ok
    assert "within the 0.00025 ETH of fee estimates" in str(within.explained)
    assert not beyond.ok
    assert beyond.explained is None
    assert BalanceCheck("ETH", Decimal(1), Decimal(1)).explained is None  # equal: nothing to say
