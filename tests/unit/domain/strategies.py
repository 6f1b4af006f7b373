"""Hypothesis strategies for valid domain values, and the corruptions each type must refuse."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

from hypothesis import strategies as st

SYMBOLS = st.sampled_from(["SOL/USDT", "BTC/USDT", "ETH/USDT", "BTC/USDT:USDT"])
TIMEFRAMES = st.sampled_from(["1m", "5m", "15m", "1h", "4h", "1d", "1w"])

aware_times = st.datetimes(
    min_value=datetime(2000, 1, 1),
    max_value=datetime(2100, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=8)), timezone(timedelta(hours=-5))]),
)
naive_times = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1))

positive_floats = st.floats(min_value=1e-8, max_value=1e9, allow_nan=False, allow_infinity=False)
bad_prices = st.sampled_from([0.0, -0.0, -1.0, -1e-9, float("nan"), float("inf"), float("-inf")])

# Money as exchanges send it: up to 8 decimals, positive.
amounts = st.decimals(min_value=Decimal("0.00000001"), max_value=Decimal(10_000), places=8)
prices = st.decimals(min_value=Decimal("0.0001"), max_value=Decimal(100_000), places=4)
fees = st.decimals(min_value=Decimal(-1), max_value=Decimal(50), places=8)
bad_decimals = st.sampled_from(
    [Decimal(0), Decimal(-1), Decimal("-0.00000001"), Decimal("NaN"), Decimal("Infinity")]
)


@st.composite
def ohlc(draw: st.DrawFn) -> dict[str, float]:
    """Consistent open/high/low/close: low <= open, close <= high."""
    values = sorted(draw(st.lists(positive_floats, min_size=4, max_size=4)))
    low, a, b, high = values
    open_, close = (a, b) if draw(st.booleans()) else (b, a)
    return {"open": open_, "high": high, "low": low, "close": close}
