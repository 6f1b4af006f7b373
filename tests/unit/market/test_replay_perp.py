"""A perpetual's recorded funding and marks as the engine asks for them tick by tick.

The property that keeps funding paid once: over any run of ticks, each recorded funding time
after the first tick falls due at exactly one tick, the first one at or after it less the
60 s tolerance (recorded times sit milliseconds off the hour); none falls due at the first
tick, when nothing was held yet.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from trader.market.files.funding import FundingRate, MarkCandle, MarkPrices
from trader.market.replay_perp import PerpTape

T0 = datetime(2024, 1, 1, tzinfo=UTC)
MS0 = int(T0.timestamp() * 1000)
HOUR_MS = 3_600_000


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 12), min_size=1, max_size=40),  # gaps between ticks, hours
    st.lists(st.integers(0, 400 * HOUR_MS), max_size=60, unique=True),  # funding times, ms
)
def test_each_funding_time_falls_due_once(gaps, offsets):
    ticks = [T0]
    for gap in gaps:
        ticks.append(ticks[-1] + timedelta(hours=gap))
    rates = tuple(FundingRate(MS0 + o, Decimal(1)) for o in sorted(offsets))
    tape = PerpTape("SOL/USDT", rates, None)
    due = [
        r.at_ms for a, b in zip([None, *ticks], ticks, strict=False) for r in tape.funding_due(a, b)
    ]
    assert len(due) == len(set(due))
    first, last = ticks[0], ticks[-1]
    window = 60_000
    expected = [
        r.at_ms
        for r in rates
        if int(first.timestamp() * 1000) + window < r.at_ms <= int(last.timestamp() * 1000) + window
    ]
    assert due == expected


def test_the_adverse_mark_is_the_low_for_a_long_and_the_high_for_a_short():
    candles = tuple(
        MarkCandle(
            MS0 + n * HOUR_MS, Decimal(100), Decimal(100 + n), Decimal(100 - n), Decimal(100)
        )
        for n in range(6)
    )
    tape = PerpTape("SOL/USDT", (), MarkPrices(candles, HOUR_MS))
    after, until = T0 + timedelta(hours=2), T0 + timedelta(hours=5)
    # Candles closed in (2h, 5h]: those opened at 2h, 3h and 4h.
    assert tape.adverse_mark(after, until, long=True) == Decimal(96)
    assert tape.adverse_mark(after, until, long=False) == Decimal(104)
    assert tape.mark(until) == Decimal(100)
    assert tape.adverse_mark(until, until + timedelta(minutes=5), long=True) is None
