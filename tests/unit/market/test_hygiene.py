"""Corrupted bar streams and quotes: each corruption is caught and counted, and nothing
downstream of the check ever sees it."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from trader.domain import Bar, QuoteSource, Timeframe
from trader.market.hygiene import (
    RawQuote,
    SkipReason,
    check_quote,
    check_rows,
    parse_row,
    parse_rows,
)

TF = Timeframe("1h")
T0 = datetime(2024, 3, 1, tzinfo=UTC)
HOUR_MS = 3_600_000
T0_MS = int(T0.timestamp() * 1000)


@st.composite
def clean_rows(draw: st.DrawFn, min_size: int = 3) -> list[list[object]]:
    """Contiguous valid rows starting one hour after the window's last bar (at T0)."""
    n = draw(st.integers(min_size, 30))
    price = draw(st.floats(1.0, 1000.0))
    rows = []
    for i in range(n):
        o = price
        c = price * draw(st.floats(0.97, 1.03))
        h = max(o, c) * draw(st.floats(1.0, 1.02))
        lo = min(o, c) * draw(st.floats(0.98, 1.0))
        rows.append([T0_MS + (i + 1) * HOUR_MS, o, h, lo, c, draw(st.floats(0.0, 1e6))])
        price = c
    return rows


def now_after(rows: list[list[object]]) -> datetime:
    """A tick just after the last row closed."""
    return T0 + timedelta(hours=len(rows) + 1, seconds=5)


def check(rows, now):
    return check_rows(rows, "SOL/USDT", TF, now, after=T0)


def starts(bars: list[Bar]) -> list[int]:
    return [int(b.start.timestamp() * 1000) for b in bars]


@given(clean_rows())
def test_a_clean_stream_is_accepted_whole(rows):
    result = check(rows, now_after(rows))
    assert not result.problems
    assert starts(result.bars) == [r[0] for r in rows]
    assert [b.close for b in result.bars] == [r[4] for r in rows]


VALUE_CORRUPTIONS = {
    "nan": (float("nan"), SkipReason.INVALID_BAR),
    "inf": (float("inf"), SkipReason.INVALID_BAR),
    "none": (None, SkipReason.INVALID_BAR),
    "text": ("abc", SkipReason.INVALID_BAR),
    "bool": (True, SkipReason.INVALID_BAR),
    "zero": (0.0, SkipReason.NON_POSITIVE_PRICE),
    "negative": (-5.0, SkipReason.NON_POSITIVE_PRICE),
}


@given(clean_rows(), st.data(), st.sampled_from(sorted(VALUE_CORRUPTIONS)), st.integers(1, 4))
def test_a_bad_price_is_dropped_and_counted_and_the_rest_judged_on_their_own(
    rows, data, kind, field
):
    i = data.draw(st.integers(0, len(rows) - 1))
    value, reason = VALUE_CORRUPTIONS[kind]
    rows[i][field] = value
    result = check(rows, now_after(rows))
    assert result.problems == {reason: 1}
    assert starts(result.bars) == [r[0] for j, r in enumerate(rows) if j != i]
    assert all(math.isfinite(b.close) and b.low > 0 for b in result.bars)
    # Every row was judged, the bad one too: none of them is read again.
    assert [int(t.timestamp() * 1000) for t in result.judged] == [r[0] for r in rows]
    assert result.dropped == {T0 + timedelta(milliseconds=rows[i][0] - T0_MS): reason}


@given(clean_rows(), st.data())
def test_inconsistent_high_low_and_negative_volume_are_caught(rows, data):
    i = data.draw(st.integers(0, len(rows) - 1))
    kind = data.draw(st.sampled_from(["high_below", "low_above", "volume"]))
    if kind == "high_below":
        rows[i][2] = min(rows[i][1], rows[i][4]) * 0.5
    elif kind == "low_above":
        rows[i][3] = max(rows[i][1], rows[i][4]) * 1.5
        rows[i][2] = rows[i][3] * 1.1
    else:
        rows[i][5] = -1.0
    reason = SkipReason.NEGATIVE_VOLUME if kind == "volume" else SkipReason.INCONSISTENT_BAR
    result = check(rows, now_after(rows))
    assert result.problems == {reason: 1}
    assert len(result.bars) == len(rows) - 1


@given(clean_rows(), st.data())
def test_a_second_row_for_a_time_is_dropped_and_the_first_kept(rows, data):
    i = data.draw(st.integers(0, len(rows) - 1))
    changed = list(rows[i])
    changed[4] = changed[4] * 1.01  # a conflicting copy: the first stays
    rows.insert(i + 1, changed)
    result = check(rows, now_after(rows))
    assert result.problems == {SkipReason.DUPLICATE_BAR: 1}
    assert starts(result.bars) == [r[0] for j, r in enumerate(rows) if j != i + 1]
    assert result.bars[i].close == rows[i][4]


@given(clean_rows(), st.data())
def test_rows_out_of_order_are_put_in_order(rows, data):
    i = data.draw(st.integers(0, len(rows) - 2))
    swapped = list(rows)
    swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
    result = check(swapped, now_after(rows))
    assert not result.problems
    assert starts(result.bars) == [r[0] for r in rows]


@given(clean_rows(), st.data())
def test_a_missing_row_is_no_problem_of_the_rows(rows, data):
    # Whether a bar is missing is the market's calendar's to say (the data step asks it).
    i = data.draw(st.integers(0, len(rows) - 2))
    rows.pop(i)
    result = check(rows, now_after(rows) + timedelta(hours=1))
    assert not result.problems
    assert starts(result.bars) == [r[0] for r in rows]


@given(clean_rows(), st.data())
def test_several_corruptions_are_each_counted(rows, data):
    bad = data.draw(st.sets(st.integers(0, len(rows) - 1), min_size=1))
    for i in bad:
        rows[i][4] = float("nan")
    result = check(rows, now_after(rows))
    assert result.problems == {SkipReason.INVALID_BAR: len(bad)}
    assert len(result.bars) == len(rows) - len(bad)


@given(clean_rows())
def test_the_still_forming_bar_and_known_bars_are_passed_over_quietly(rows):
    now = now_after(rows) - timedelta(hours=1)  # the last row is still forming
    stale = [[T0_MS - HOUR_MS, float("nan"), 1, 1, 1, 1]]  # before the window's end: known
    result = check(stale + rows, now)
    assert not result.problems
    assert starts(result.bars) == [r[0] for r in rows[:-1]]


@pytest.mark.parametrize(
    "row", [[], [T0_MS], [T0_MS, 1, 2, 0.5, 1], ["x", 1, 2, 0.5, 1, 1], [1.5, 1, 2, 0.5, 1, 1]]
)
def test_rows_of_the_wrong_shape_are_invalid(row):
    assert parse_row(row, "SOL/USDT", TF) is SkipReason.INVALID_BAR


# --- quotes --------------------------------------------------------------------------------

NOW = T0 + timedelta(hours=5)
MAX_AGE = timedelta(seconds=30)


def raw(bid, ask, age_s=1.0, source=QuoteSource.REAL, exchange_time=True):
    at = NOW - timedelta(seconds=age_s)
    return RawQuote(bid, ask, NOW, at if exchange_time else None, source=source)


@given(
    st.decimals(Decimal("0.01"), Decimal(10_000), places=2),
    st.decimals(Decimal("0.01"), Decimal(50), places=2),
)
def test_a_sound_quote_becomes_a_quote_with_the_same_prices(bid, spread):
    quote = check_quote(raw(bid, bid + spread), "SOL/USDT", NOW, MAX_AGE)
    assert not isinstance(quote, SkipReason)
    assert (quote.bid, quote.ask, quote.source) == (bid, bid + spread, QuoteSource.REAL)


@pytest.mark.parametrize(
    ("quote", "reason"),
    [
        (None, SkipReason.NO_QUOTE),
        (raw(None, 101), SkipReason.NO_QUOTE),
        (raw(100, None), SkipReason.NO_QUOTE),
        (raw(float("nan"), 101), SkipReason.INVALID_QUOTE),
        (raw(100, float("inf")), SkipReason.INVALID_QUOTE),
        (raw("abc", 101), SkipReason.INVALID_QUOTE),
        (raw(0, 101), SkipReason.INVALID_QUOTE),
        (raw(-1, 101), SkipReason.INVALID_QUOTE),
        (raw(True, 101), SkipReason.INVALID_QUOTE),
        (raw(102, 101), SkipReason.CROSSED_QUOTE),
        (raw(101, 101), SkipReason.CROSSED_QUOTE),
        (raw(100, 101, age_s=31), SkipReason.STALE_QUOTE),
    ],
)
def test_a_corrupt_quote_is_refused_with_its_reason(quote, reason):
    assert check_quote(quote, "SOL/USDT", NOW, MAX_AGE) is reason


def test_without_an_exchange_timestamp_a_quote_is_as_old_as_its_receipt():
    quote = check_quote(raw(100.5, 101.25, exchange_time=False), "SOL/USDT", NOW, MAX_AGE)
    assert not isinstance(quote, SkipReason)
    assert quote.at == NOW
    assert quote.bid == Decimal("100.5")


def test_a_synthetic_quote_passes_but_its_spread_stays_unknown():
    quote = check_quote(raw(100, 100, source=QuoteSource.SYNTHETIC), "SOL/USDT", NOW, MAX_AGE)
    assert not isinstance(quote, SkipReason)
    assert quote.source is QuoteSource.SYNTHETIC
    assert quote.spread_bps is None


CORRUPT_PRICES = st.one_of(
    st.none(),
    st.just(float("nan")),
    st.just(float("inf")),
    st.floats(max_value=0.0, allow_nan=False),
    st.decimals(max_value=Decimal(0), allow_nan=False, allow_infinity=False),
    st.text(alphabet="abcxyz-", min_size=1, max_size=5),
    st.booleans(),
)


@given(
    st.decimals(Decimal("0.01"), Decimal(1000), places=2),
    st.sampled_from(["bid", "ask"]),
    CORRUPT_PRICES,
)
def test_any_corrupt_price_on_either_side_refuses_the_quote(price, side, bad):
    values = {"bid": price, "ask": price + 1, side: bad}
    result = check_quote(raw(values["bid"], values["ask"]), "SOL/USDT", NOW, MAX_AGE)
    assert result in {SkipReason.NO_QUOTE, SkipReason.INVALID_QUOTE}


@given(
    st.decimals(Decimal("0.01"), Decimal(1000), places=2),
    st.decimals(Decimal(0), Decimal(10), places=2),
    st.floats(30.001, 1e6),
)
def test_crossed_locked_and_stale_quotes_are_refused(bid, below, age):
    assume(bid - below > 0)
    assert check_quote(raw(bid, bid - below), "SOL/USDT", NOW, MAX_AGE) is SkipReason.CROSSED_QUOTE
    assert check_quote(raw(bid, bid + 1, age_s=age), "SOL/USDT", NOW, MAX_AGE) is (
        SkipReason.STALE_QUOTE
    )


_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5), st.booleans(),
    st.none(), st.just("1.5"), st.sampled_from([0.0, -0.0, 1.0, 2.0, 3.0]),
)  # fmt: skip


@given(
    st.lists(
        st.tuples(
            st.one_of(st.just(T0_MS), st.just(float(T0_MS)), st.booleans(), st.just(math.nan)),
            st.lists(_VALUES, min_size=4, max_size=7),
        ),
        max_size=12,
    )
)
def test_rows_judged_in_bulk_as_one_by_one(drawn):
    """parse_rows's fast way gives what parse_row gives, row by row: valid and bad rows,
    short ones, bools, strings, NaN and infinities, ints for floats, a missing quote volume."""
    rows = [(start, *values) for start, values in drawn]
    rows += [
        (T0_MS, 2.0, 3.0, 1.0, 2.5, 10.0, None),
        (T0_MS, 2.0, 3.0, 1.0, 2.5, 10.0),
        (T0_MS, 2.0, 3.0, 1.0, 2.5, 10.0, 25.0),
        (T0_MS, 2.0, 2.0, 2.0, 2.0, 0.0, 0.0),
    ]
    one_by_one = [parse_row(row, "SOL/USDT", TF) for row in rows]
    assert parse_rows(rows, "SOL/USDT", TF) == one_by_one
    assert sum(isinstance(b, Bar) for b in one_by_one) >= 4
