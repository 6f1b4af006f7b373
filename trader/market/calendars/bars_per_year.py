"""Annualisation: the bars a timeframe expects a year on a calendar, with the arithmetic that
gives the figure spelled out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from trader.domain import Timeframe
from trader.market.calendars.bar_grid import BarStarts
from trader.market.calendars.units import DAY_MS, YEAR_DAYS, Int64s, iso


@dataclass(frozen=True, slots=True)
class BarsPerYear:
    periods: float
    explanation: str


def bars_per_year(
    name: str,
    timeframe: Timeframe,
    grid: BarStarts,
    labels: Int64s,
    span: tuple[int, int] | None,
    has_breaks: bool,
) -> BarsPerYear:
    """Expected bars a year: 24/7 arithmetic (no span), or the average over the whole calendar
    years of the span (a short file still gets its exchange's full-year figure)."""
    step = timeframe.seconds * 1000
    if span is None:
        periods = YEAR_DAYS * DAY_MS / step
        if step <= DAY_MS:
            shape = f"{YEAR_DAYS} days x {_trim(DAY_MS / step)} bars of {timeframe} a day"
        else:
            shape = f"{YEAR_DAYS} days / {_trim(step / DAY_MS)} days a bar of {timeframe}"
        return BarsPerYear(periods, f"24/7 market: {shape} = {_number(periods)} bars a year")
    begin, end = span
    first_year = datetime.fromtimestamp(begin / 1000, UTC).year
    if _year_start(first_year) < begin:
        first_year += 1
    last_year = datetime.fromtimestamp(end / 1000, UTC).year - 1
    if last_year >= first_year:
        lo, hi = _year_start(first_year), _year_start(last_year + 1)
        years = float(last_year - first_year + 1)
        when = str(first_year) if years == 1 else f"{first_year}-{last_year}"
    else:  # a span clipped short of a whole year (an exchange's bound): extrapolate
        lo, hi = begin, end
        years = (end - begin) / (YEAR_DAYS * DAY_MS)
        when = f"extrapolated from {iso(begin)[:10]} .. {iso(end)[:10]}"
    bars = grid.below(hi) - grid.below(lo)
    sessions = int(np.searchsorted(labels, hi) - np.searchsorted(labels, lo))
    periods = bars / years
    if timeframe.text.endswith("w"):
        shape = f"{periods:.1f} weeks a year with a session x 1 bar of {timeframe}"
    else:
        per_session = _trim(bars / sessions) if sessions else "0"
        breaks = " (lunch break excluded)" if has_breaks and step < DAY_MS else ""
        plural = "bar" if per_session == "1" else "bars"
        shape = (
            f"{sessions / years:.1f} sessions a year x {per_session} {plural} of {timeframe}"
            f"{breaks}"
        )
    return BarsPerYear(periods, f"{name}: {shape} = {_number(periods)} bars a year ({when})")


def _number(value: float) -> str:
    """11,630 or 251.7: whole numbers once the fraction stops mattering."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:,.1f}"


def _trim(value: float) -> str:
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _year_start(year: int) -> int:
    return int(datetime(year, 1, 1, tzinfo=UTC).timestamp()) * 1000
