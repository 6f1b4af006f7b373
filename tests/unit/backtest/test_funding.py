"""A perpetual's funding in the backtest, record by record.

The rule (Binance, USDⓈ-M futures FAQ "Introduction to Funding Rates": funding amount =
position value x funding rate, position value = mark price x position size; a positive rate:
longs pay shorts, negative: shorts pay longs) and which mark: Binance's funding history gives
"markPrice: mark price associated with a particular funding fee charge" (GET /fapi/v1/
fundingRate); where the record lacks it (Aster), the last mark-price candle closed by then.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trader.backtest.funding import (
    ASSUME_ZERO_FLAG,
    FROM_CANDLE,
    FROM_CLOSE,
    FROM_RECORD,
    Closes,
    MissingFunding,
    PerpSymbol,
    book_funding,
    hold_funding,
    load_perp_data,
    paid_by_tick,
    totals,
)
from trader.domain import Fill, Liquidity, Side
from trader.domain.perp import funding_payment
from trader.market.files.funding import FundingRate, MarkCandle, MarkPrices
from trader.market.replay import read_recording

HOUR = 3_600_000
T0 = datetime(2024, 3, 1, tzinfo=UTC)
MS0 = int(T0.timestamp() * 1000)
PERP = Path(__file__).parents[2] / "data" / "perp"


def fill(hours: float, side: Side, amount: str, liquidity: Liquidity = Liquidity.TAKER) -> Fill:
    at = T0 + timedelta(hours=hours)
    return Fill(f"f{hours}{side}", f"o{hours}", "SOL/USDT", side, Decimal(100), Decimal(amount),
                Decimal(0), "USDT", liquidity, at)  # fmt: skip


def perp(rates: list[FundingRate], marks: MarkPrices | None = None) -> PerpSymbol:
    return PerpSymbol("SOL/USDT", tuple(rates), marks, None, None)


CLOSES = Closes.of({MS0 + h * HOUR: 100.0 + h for h in range(0, 48)})


@pytest.mark.parametrize(
    ("position", "rate", "paid"),
    [("2", "0.0001", "0.02"), ("-2", "0.0001", "-0.02"), ("2", "-0.0001", "-0.02"),
     ("-2", "-0.0001", "0.02")],
)  # fmt: skip
def test_positive_rates_longs_pay_shorts_receive(position, rate, paid):
    assert funding_payment(Decimal(100), Decimal(position), Decimal(rate)) == Decimal(paid)


def test_a_market_order_at_a_funding_time_comes_after_it_a_resting_fill_before():
    rates = [FundingRate(MS0 + 8 * HOUR, Decimal("0.001"), Decimal(50))]
    taker = book_funding([fill(8, Side.BUY, "1")], perp(rates), CLOSES, MS0, MS0 + 20 * HOUR)
    assert taker == []  # bought once the bar closing at 8h was seen: after the settlement
    maker = [fill(8, Side.BUY, "1", Liquidity.MAKER)]  # filled during the bar ending at 8h
    (booked,) = book_funding(maker, perp(rates), CLOSES, MS0, MS0 + 20 * HOUR)
    assert (booked.position, booked.paid) == (Decimal(1), Decimal("0.05"))
    early = [fill(7, Side.BUY, "3"), fill(7.5, Side.SELL, "1")]
    (booked,) = book_funding(early, perp(rates), CLOSES, MS0, MS0 + 20 * HOUR)
    assert (booked.position, booked.mark, booked.mark_from) == (Decimal(2), 50, FROM_RECORD)


def test_a_funding_time_milliseconds_off_the_hour_is_the_tick_s_instant():
    # Recorded funding times may sit a few ms past the hour: the order at that tick still
    # followed the bar's close, so it missed the settlement; the payment counts at the tick.
    rates = [FundingRate(MS0 + 8 * HOUR + 4, Decimal("0.001"), Decimal(50))]
    fills = [fill(1, Side.BUY, "2"), fill(8, Side.SELL, "2")]
    (booked,) = book_funding(fills, perp(rates), CLOSES, MS0, MS0 + 20 * HOUR)
    assert booked.position == Decimal(2)
    ticks = np.array([MS0 + h * HOUR for h in range(7, 10)])
    assert paid_by_tick([booked], ticks).tolist() == [0, 0, 0.1, 0.1]


def test_the_mark_is_the_record_s_then_the_last_closed_mark_candle_then_the_bar_close():
    candles = tuple(MarkCandle(MS0 + h * HOUR, *(Decimal(f"{90 + h}"),) * 4) for h in range(10))
    marks = MarkPrices(candles, HOUR)
    rates = [FundingRate(MS0 + 4 * HOUR, Decimal("0.001")),  # the candle opened at 3h: 93
             FundingRate(MS0 + 30 * HOUR, Decimal("0.001"))]  # fmt: skip
    held = [fill(1, Side.SELL, "2")]
    first, late = book_funding(held, perp(rates, marks), CLOSES, MS0, MS0 + 40 * HOUR)
    assert (first.mark, first.mark_from) == (Decimal(93), FROM_CANDLE)
    assert first.paid == Decimal("-0.186")  # short 2 at 93 x 0.1%: received
    assert (late.mark, late.mark_from) == (Decimal(99), FROM_CANDLE)  # the last one recorded
    (closed,) = book_funding(held, perp(rates[:1]), CLOSES, MS0, MS0 + 40 * HOUR)
    assert (closed.mark, closed.mark_from) == (Decimal(104), FROM_CLOSE)  # the bar closed at 4h


def test_only_funding_times_within_the_run_and_with_a_position_are_booked():
    rates = [FundingRate(MS0 + h * HOUR, Decimal("0.0001"), Decimal(100)) for h in (0, 4, 8, 12)]
    fills = [fill(0, Side.BUY, "1"), fill(5, Side.SELL, "1"), fill(9, Side.BUY, "1")]
    booked = book_funding(fills, perp(rates), CLOSES, MS0, MS0 + 11 * HOUR)
    assert [b.at_ms for b in booked] == [MS0 + 4 * HOUR]  # 0h: the first tick; 8h flat; 12h after


def test_payments_count_from_the_first_tick_at_or_after_them():
    rates = [FundingRate(MS0 + HOUR + HOUR // 2, Decimal("0.01"), Decimal(10)),
             FundingRate(MS0 + 3 * HOUR, Decimal("-0.01"), Decimal(10))]  # fmt: skip
    booked = book_funding([fill(0, Side.BUY, "1")], perp(rates), CLOSES, MS0, MS0 + 3 * HOUR)
    ticks = np.array([MS0 + h * HOUR for h in range(4)])
    assert paid_by_tick(booked, ticks).tolist() == [0, 0, 0, 0.1, 0.0]
    found = totals(booked)
    assert (found.times, found.paid, found.received, found.net) == (2, Decimal("0.1"),
                                                                    Decimal("0.1"), 0)  # fmt: skip


def test_buy_and_hold_pays_on_what_it_held_before_each_funding_time():
    rates = [FundingRate(MS0 + h * HOUR, Decimal("0.001"), Decimal(200)) for h in (1, 2, 3)]
    ticks = np.array([MS0 + h * HOUR for h in range(4)])
    positions = np.array([0.0, 2.0, 2.0, 2.0])  # bought at the second tick (1h)
    paid = hold_funding(positions, ticks, perp(rates), CLOSES)
    assert paid.tolist() == pytest.approx([0, 0, 0, 0.4, 0.8])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 40), st.sampled_from([Side.BUY, Side.SELL]),
                       st.integers(1, 500), st.sampled_from(list(Liquidity))), max_size=12),
    st.lists(st.tuples(st.integers(1, 47), st.integers(-300, 300), st.sampled_from([0, 4, 30_000])),
             max_size=12, unique_by=lambda r: r[0]),
)  # fmt: skip
def test_booked_funding_is_the_sum_of_mark_x_position_x_rate(trades, rows):
    """Fills at whole hours (ticks); funding times on the hour or a few ms to 30 s past it."""
    fills = [fill(h, s, str(Decimal(a) / 100), liq) for h, s, a, liq in trades]
    rates = sorted(
        (FundingRate(MS0 + h * HOUR + late, Decimal(r) / 10**6, Decimal(h) + Decimal("0.5"))
         for h, r, late in rows), key=lambda r: r.at_ms,
    )  # fmt: skip
    booked = book_funding(fills, perp(rates), CLOSES, MS0, MS0 + 48 * HOUR)
    expected = Decimal(0)
    for hour, r, _ in rows:
        settled = T0 + timedelta(hours=hour)  # the tick whose instant it is
        signed = [
            f.amount if f.side is Side.BUY else -f.amount
            for f in fills
            if f.at < settled or (f.at == settled and f.liquidity is Liquidity.MAKER)
        ]
        mark = Decimal(hour) + Decimal("0.5")
        expected += mark * sum(signed, Decimal(0)) * Decimal(r) / 10**6
    assert sum((b.paid for b in booked), Decimal(0)) == expected
    for b in booked:  # who pays: the long when the rate is positive, the short when negative
        assert (b.paid > 0) == ((b.position > 0) == (b.rate > 0)) or b.rate == 0


def test_bars_without_funding_are_refused_unless_assumed_zero(tmp_path):
    shutil.copy(PERP / "SOLUSDT_1h.csv.gz", tmp_path / "SOLUSDT_1h.csv.gz")
    recording = read_recording(tmp_path / "SOLUSDT_1h.csv.gz")
    with pytest.raises(MissingFunding) as refused:
        load_perp_data([recording], HOUR)
    said = str(refused.value)
    assert str(tmp_path / "funding" / "SOLUSDT_1h.parquet") in said
    assert ASSUME_ZERO_FLAG in said
    assumed = load_perp_data([recording], HOUR, assume_zero=True)
    assert assumed.assumed_zero == ("SOL/USDT",)
    assert assumed.symbols["SOL/USDT"].rates == ()
    assert any("funding assumed zero" in w for w in assumed.warnings())
    recorded = load_perp_data([read_recording(PERP / "SOLUSDT_1h.csv.gz")], HOUR)
    assert recorded.assumed_zero == ()
    assert len(recorded.symbols["SOL/USDT"].rates) == 56
