"""Funding payments and a symbol's funding schedule.

Sources: Binance, "Introduction to Binance Futures Funding Rates": funding amount = nominal value
of positions (mark price x size, USDⓈ-M) x funding rate; positive rate: longs pay shorts; only
positions open at the funding time pay or receive. `GET /fapi/v1/fundingInfo`
(https://developers.binance.com/docs/derivatives/usds-margined-futures/market-data/rest-api/Get-Funding-Rate-Info)
gives `fundingIntervalHours` per adjusted symbol (8, 4, ...), so intervals are read, never assumed.
freqtrade's `Exchange.calculate_funding_fees` (freqtrade/exchange/exchange.py, commit c9ae5e1e)
sums rate x mark x amount over the funding times in the trade and negates it for longs: the same
sign as `-funding_payment` here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.domain.perp.tables import BTCUSDT_NOW
from trader.domain.errors import DomainError
from trader.domain.perp import (
    FundingSchedule,
    LeverageBrackets,
    MarginMode,
    PerpAccount,
    funding_payment,
    next_funding_time,
)

D = Decimal
T0 = datetime(2024, 1, 1, tzinfo=UTC)
H = timedelta(hours=1)
TABLES = {"BTC/USDT:USDT": LeverageBrackets.from_binance("BTC/USDT:USDT", BTCUSDT_NOW)}


def test_positive_rate_longs_pay_shorts_receive() -> None:
    # 2 BTC at mark 40,000, rate 0.01%: nominal 80,000 x 0.0001 = 8.
    assert funding_payment(D(40000), D(2), D("0.0001")) == D(8)
    assert funding_payment(D(40000), D(-2), D("0.0001")) == D(-8)
    assert funding_payment(D(40000), D(2), D("-0.0003")) == D(-24)


def test_freqtrades_sign_matches() -> None:
    # freqtrade: fees = rate x mark x amount; `return fees if is_short else -fees` (income).
    rate, mark, amount = 0.0001, 40000.0, 2.0
    fees = rate * mark * amount
    assert -fees == pytest.approx(float(-funding_payment(D(40000), D(2), D("0.0001"))))
    assert fees == pytest.approx(float(-funding_payment(D(40000), D(-2), D("0.0001"))))


def test_refuses_floats() -> None:
    with pytest.raises(DomainError, match="floats drift"):
        funding_payment(D(1), D(1), 0.0001)  # type: ignore[arg-type]


def _changing_schedule() -> FundingSchedule:
    # 8h until Jan 2 00:00, then 4h until Jan 2 16:00, then 1h; a few ms of jitter on two.
    times = [T0 + i * 8 * H for i in range(4)]  # Jan 1 00, 08, 16, Jan 2 00
    times += [times[-1] + i * 4 * H for i in range(1, 5)]  # 04, 08, 12, 16
    times += [times[-1] + i * H for i in range(1, 4)]  # 17, 18, 19
    times[2] += timedelta(milliseconds=3)
    times[9] += timedelta(milliseconds=1)
    return FundingSchedule.from_times("BTC/USDT:USDT", reversed(times + times[:3]))


def test_intervals_are_read_from_the_recorded_times() -> None:
    schedule = _changing_schedule()
    assert [gap for _, gap in schedule.intervals()] == [8 * H, 4 * H, H]
    assert schedule.intervals()[1][0] == datetime(2024, 1, 2, 4, tzinfo=UTC)
    assert schedule.interval() == H
    stated = FundingSchedule(schedule.symbol, schedule.times, current_interval=4 * H)
    assert stated.interval() == 4 * H


def test_times_within_a_span_are_recorded_then_projected() -> None:
    schedule = _changing_schedule()
    start, end = datetime(2024, 1, 2, 10, tzinfo=UTC), datetime(2024, 1, 2, 22, tzinfo=UTC)
    within = schedule.times_within(start, end)
    assert [at.hour for at in within] == [12, 16, 17, 18, 19, 20, 21]
    assert within[-1] == schedule.times[-1] + 2 * H  # projected at the 1h interval
    assert schedule.times_within(T0, T0) == ()  # [start, end): nothing in an empty span


def test_next_funding_time() -> None:
    schedule = _changing_schedule()
    assert schedule.next_after(T0) == T0 + 8 * H
    assert schedule.next_after(datetime(2024, 1, 2, 1, tzinfo=UTC)) == datetime(
        2024, 1, 2, 4, tzinfo=UTC
    )
    last = schedule.times[-1]
    assert schedule.next_after(last + 90 * timedelta(minutes=1)) == last + 2 * H
    assert next_funding_time(T0, 4 * H) == T0 + 4 * H
    assert next_funding_time(T0, 4 * H, after=T0 + 4 * H) == T0 + 8 * H
    assert next_funding_time(T0, 4 * H, after=T0 - H) == T0 + 4 * H


def test_schedule_refuses_what_it_cannot_know() -> None:
    with pytest.raises(DomainError, match="interval is unknown"):
        FundingSchedule("BTC/USDT:USDT", (T0,)).interval()
    with pytest.raises(DomainError, match="strictly increasing"):
        FundingSchedule("BTC/USDT:USDT", (T0 + H, T0))
    with pytest.raises(DomainError, match="timezone-aware"):
        FundingSchedule("BTC/USDT:USDT", (datetime(2024, 1, 1),))
    with pytest.raises(DomainError, match="must be positive"):
        next_funding_time(T0, timedelta(0))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from([8, 4, 1]), min_size=2, max_size=40),
    st.data(),
    st.integers(-50, 50).map(lambda n: D(n) / 10),
)
def test_funding_booked_over_a_schedule_is_the_sum_of_rate_mark_size(
    gaps: list[int], data: st.DataObject, size: Decimal
) -> None:
    size = size or D(1)
    times = [T0]
    for hours in gaps:
        times.append(times[-1] + hours * H)
    schedule = FundingSchedule.from_times("BTC/USDT:USDT", times)
    start = times[data.draw(st.integers(0, len(times) - 1))]
    end = start + data.draw(st.integers(0, 200)) * H
    rates = {at: D(data.draw(st.integers(-300, 300))) / 10**6 for at in times}
    marks = {at: D(data.draw(st.integers(20000_00, 60000_00))) / 100 for at in times}
    account = PerpAccount(D(100000), TABLES).fill(
        "BTC/USDT:USDT", size, D(40000), leverage=5, margin_mode=MarginMode.CROSS
    )
    wallet = account.wallet_balance
    booked = 0
    for at in schedule.times_within(start, end):
        if at in rates:  # projected times past the record have no recorded rate yet
            account = account.book_funding("BTC/USDT:USDT", rates[at], marks[at])
            booked += 1
    # Summed here, independently: every recorded time in [start, end), rate x mark x size.
    expected = sum((rates[at] * marks[at] * size for at in times if start <= at < end), start=D(0))
    assert booked == sum(1 for at in times if start <= at < end)
    assert account.funding_paid == expected
    assert account.wallet_balance == wallet - expected
