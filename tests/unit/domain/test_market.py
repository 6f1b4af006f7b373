from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.unit.domain.strategies import (
    SYMBOLS,
    TIMEFRAMES,
    aware_times,
    bad_decimals,
    bad_prices,
    naive_times,
    ohlc,
    positive_floats,
    prices,
)
from trader.domain import Bar, DomainError, Quote, QuoteSource, Timeframe

PRICE_FIELDS = ["open", "high", "low", "close"]


@given(SYMBOLS, TIMEFRAMES, aware_times, ohlc(), positive_floats)
def test_a_consistent_bar_is_kept_exactly_and_stamped_utc(symbol, tf, start, prices_, volume):
    bar = Bar(symbol, Timeframe(tf), start, volume=volume, **prices_)
    assert (bar.open, bar.high, bar.low, bar.close, bar.volume) == (
        prices_["open"],
        prices_["high"],
        prices_["low"],
        prices_["close"],
        volume,
    )
    assert bar.start == start
    assert bar.start.tzinfo is UTC
    assert bar.end - bar.start == Timeframe(tf).duration


@given(ohlc(), st.sampled_from(PRICE_FIELDS), bad_prices)
def test_a_bar_with_a_nan_infinite_or_non_positive_price_is_refused(prices_, field, bad):
    prices_[field] = bad
    with pytest.raises(DomainError, match=f"bar {field}"):
        Bar("SOL/USDT", Timeframe("1h"), datetime(2024, 1, 1, tzinfo=UTC), volume=1.0, **prices_)


@given(ohlc(), st.sampled_from(["open", "close", "low"]), st.floats(1.0001, 10.0))
def test_a_bar_whose_high_is_not_the_highest_is_refused(prices_, field, factor):
    prices_[field] = prices_["high"] * factor
    assume(prices_[field] > prices_["high"])
    with pytest.raises(DomainError, match=r"high|low"):
        Bar("SOL/USDT", Timeframe("1h"), datetime(2024, 1, 1, tzinfo=UTC), volume=1.0, **prices_)


@given(ohlc(), st.sampled_from(["open", "close"]), st.floats(0.1, 0.9999))
def test_a_bar_whose_low_is_above_open_or_close_is_refused(prices_, field, factor):
    prices_[field] = prices_["low"] * factor
    assume(prices_[field] < prices_["low"])
    with pytest.raises(DomainError, match="low"):
        Bar("SOL/USDT", Timeframe("1h"), datetime(2024, 1, 1, tzinfo=UTC), volume=1.0, **prices_)


@given(ohlc(), st.sampled_from([-1.0, -1e-12, float("nan"), float("inf")]))
def test_a_bar_with_negative_or_non_finite_volume_is_refused(prices_, volume):
    with pytest.raises(DomainError, match="volume"):
        Bar("SOL/USDT", Timeframe("1h"), datetime(2024, 1, 1, tzinfo=UTC), volume=volume, **prices_)


@given(ohlc(), naive_times)
def test_a_bar_with_a_naive_timestamp_is_refused(prices_, start):
    with pytest.raises(DomainError, match="timezone-aware"):
        Bar("SOL/USDT", Timeframe("1h"), start, volume=1.0, **prices_)


@pytest.mark.parametrize("symbol", ["", "SOLUSDT", "SOL/", "/USDT", "SOL USDT/X", None, 5])
def test_a_bar_with_a_malformed_symbol_is_refused(symbol):
    with pytest.raises(DomainError, match="symbol"):
        Bar(symbol, Timeframe("1h"), datetime(2024, 1, 1, tzinfo=UTC), 1, 1, 1, 1, 1)


@pytest.mark.parametrize("value", ["1", None, True, Decimal("NaN")])
def test_a_bar_price_that_is_not_a_float_is_refused(value):
    with pytest.raises(DomainError):
        Bar("SOL/USDT", Timeframe("1h"), datetime(2024, 1, 1, tzinfo=UTC), value, 2, 0.5, 1, 1)


@pytest.mark.parametrize("text", ["", "1M", "0h", "h", "1.5h", "60", "-1m", "01h", "1H"])
def test_a_malformed_timeframe_is_refused(text):
    with pytest.raises(DomainError, match="timeframe"):
        Timeframe(text)


@given(TIMEFRAMES, aware_times)
def test_timeframe_floor_is_the_start_of_the_containing_bar(tf, when):
    timeframe = Timeframe(tf)
    start = timeframe.floor(when)
    assert start <= when < start + timeframe.duration
    assert timeframe.floor(start) == start
    if tf.endswith("w"):
        assert start.weekday() == 0  # exchanges start weekly bars on Monday


# --- quotes --------------------------------------------------------------------------------


@given(SYMBOLS, prices, prices, aware_times)
def test_a_real_quote_keeps_its_prices_and_a_non_negative_spread(symbol, a, b, at):
    bid, ask = min(a, b), max(a, b)
    quote = Quote(symbol, bid, ask, at, QuoteSource.REAL)
    assert (quote.bid, quote.ask) == (bid, ask)
    assert quote.spread == ask - bid
    assert quote.spread_bps is not None
    assert quote.spread_bps >= 0
    assert quote.bid <= quote.mid <= quote.ask
    assert quote.at.tzinfo is UTC


@given(prices, prices)
def test_a_crossed_quote_is_refused(a, b):
    assume(a != b)
    with pytest.raises(DomainError, match="crossed"):
        Quote("SOL/USDT", max(a, b), min(a, b), datetime(2024, 1, 1, tzinfo=UTC), QuoteSource.REAL)


@given(bad_decimals, st.sampled_from(["bid", "ask"]))
def test_a_quote_with_a_non_positive_or_non_finite_price_is_refused(bad, side):
    values = {"bid": Decimal(100), "ask": Decimal(101), side: bad}
    with pytest.raises(DomainError, match=side):
        Quote("SOL/USDT", at=datetime(2024, 1, 1, tzinfo=UTC), source=QuoteSource.REAL, **values)


@pytest.mark.parametrize("value", [100.5, float("nan"), True, None])
def test_a_quote_price_given_as_a_float_is_refused(value):
    with pytest.raises(DomainError, match="bid"):
        Quote("SOL/USDT", value, Decimal(101), datetime(2024, 1, 1, tzinfo=UTC), QuoteSource.REAL)


@given(naive_times)
def test_a_quote_with_a_naive_timestamp_is_refused(at):
    with pytest.raises(DomainError, match="timezone-aware"):
        Quote("SOL/USDT", Decimal(1), Decimal(2), at, QuoteSource.REAL)


@given(prices, aware_times)
def test_a_synthetic_quote_has_an_unknown_spread_never_zero(close, at):
    quote = Quote.synthetic("SOL/USDT", close, at)
    assert quote.source is QuoteSource.SYNTHETIC
    assert quote.bid == quote.ask == close
    assert quote.spread is None
    assert quote.spread_bps is None


def test_a_synthetic_quote_with_a_spread_is_refused():
    with pytest.raises(DomainError, match="synthetic"):
        Quote("SOL/USDT", Decimal(1), Decimal(2), datetime.now(UTC), QuoteSource.SYNTHETIC)


def test_quote_sizes_must_not_be_negative_and_the_source_must_be_named():
    at = datetime.now(UTC)
    with pytest.raises(DomainError, match="bid_size"):
        Quote("SOL/USDT", Decimal(1), Decimal(2), at, QuoteSource.REAL, bid_size=Decimal(-1))
    with pytest.raises(DomainError, match="source"):
        Quote("SOL/USDT", Decimal(1), Decimal(2), at, "real")  # type: ignore[arg-type]


def test_quote_age_is_measured_from_its_exchange_timestamp():
    at = datetime(2024, 1, 1, tzinfo=UTC)
    quote = Quote("SOL/USDT", Decimal(1), Decimal(2), at, QuoteSource.REAL)
    assert quote.age(at + timedelta(seconds=7)) == timedelta(seconds=7)


def test_frozen_types_cannot_be_mutated_into_malformed_values():
    bar = Bar("SOL/USDT", Timeframe("1h"), datetime(2024, 1, 1, tzinfo=UTC), 1, 2, 0.5, 1, 1)
    with pytest.raises(AttributeError):
        bar.close = math.nan  # type: ignore[misc]
    with pytest.raises(DomainError):
        replace(bar, low=3.0)
