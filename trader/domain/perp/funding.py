"""Funding of a linear perpetual: the payment at a funding time and a symbol's funding times.

Binance, "Introduction to Binance Futures Funding Rates": funding amount = nominal value of the
position x funding rate, the nominal value being mark price x size for USDⓈ-M contracts; a
positive rate means longs pay shorts, a negative one shorts pay longs; only positions open at the
funding time pay or receive. Funding times are 00:00/08:00/16:00 UTC by default, but
`GET /fapi/v1/fundingInfo` lists symbols with another `fundingIntervalHours` (4, 1, ...) and a
symbol's interval changes over time, so the schedule here comes from the recorded funding times
(`GET /fapi/v1/fundingRate`'s `fundingTime`) and never assumes 8 hours.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from itertools import pairwise

from trader.domain.errors import DomainError
from trader.domain.money import exact, positive_decimal, to_decimal
from trader.domain.time import ensure_utc

# Recorded funding times can sit a few milliseconds off the hour; gaps are read to the minute so
# that jitter never reads as a change of interval.
_GAP_RESOLUTION = timedelta(minutes=1)


def funding_payment(mark: Decimal, size: Decimal, rate: Decimal) -> Decimal:
    """What the holder of signed `size` pays at a funding time: mark x size x rate, exactly.
    Positive: paid (a long at a positive rate); negative: received."""
    mark = positive_decimal(mark, "mark price")
    size = to_decimal(size, "position size")
    rate = to_decimal(rate, "funding rate")
    with exact():
        return mark * size * rate


def _whole_minutes(gap: timedelta) -> timedelta:
    return round(gap / _GAP_RESOLUTION) * _GAP_RESOLUTION


def next_funding_time(
    last: datetime, interval: timedelta, after: datetime | None = None
) -> datetime:
    """The funding time after the last recorded one at the current interval; with `after`, the
    first such time (last + k x interval) strictly later than `after`."""
    last = ensure_utc(last, "last funding time")
    if interval <= timedelta(0):
        raise DomainError(f"a funding interval must be positive, got {interval}")
    if after is None:
        return last + interval
    after = ensure_utc(after, "time")
    if after < last:
        return last + interval
    return last + (((after - last) // interval) + 1) * interval


@dataclass(frozen=True, slots=True)
class FundingSchedule:
    """A symbol's funding times as recorded, and the interval it funds at now (from fundingInfo,
    or None: the last recorded gap)."""

    symbol: str
    times: tuple[datetime, ...]
    current_interval: timedelta | None = None

    def __post_init__(self) -> None:
        times = tuple(ensure_utc(at, f"{self.symbol} funding time") for at in self.times)
        if any(later <= earlier for earlier, later in pairwise(times)):
            raise DomainError(f"{self.symbol}: funding times must be strictly increasing")
        object.__setattr__(self, "times", times)
        if self.current_interval is not None and self.current_interval <= timedelta(0):
            raise DomainError(f"{self.symbol}: a funding interval must be positive")

    @classmethod
    def from_times(
        cls, symbol: str, times: Iterable[datetime], current_interval: timedelta | None = None
    ) -> FundingSchedule:
        """From funding times in any order, duplicates dropped (pages of history overlap)."""
        unique = sorted({ensure_utc(at, f"{symbol} funding time") for at in times})
        return cls(symbol, tuple(unique), current_interval)

    def intervals(self) -> tuple[tuple[datetime, timedelta], ...]:
        """Where the interval changed: (first funding time at the new interval, interval)."""
        changes: list[tuple[datetime, timedelta]] = []
        for earlier, later in pairwise(self.times):
            gap = _whole_minutes(later - earlier)
            if not changes or changes[-1][1] != gap:
                changes.append((later, gap))
        return tuple(changes)

    def interval(self) -> timedelta:
        """The interval it funds at now: the stated one, else the last recorded gap."""
        if self.current_interval is not None:
            return self.current_interval
        if len(self.times) < 2:
            raise DomainError(
                f"{self.symbol}: the funding interval is unknown (fewer than two recorded funding "
                "times and none stated)"
            )
        return _whole_minutes(self.times[-1] - self.times[-2])

    def times_within(self, start: datetime, end: datetime) -> tuple[datetime, ...]:
        """Recorded funding times in [start, end); past the last recorded one, the times the
        current interval projects from it."""
        start = ensure_utc(start, "span start")
        end = ensure_utc(end, "span end")
        if end < start:
            raise DomainError("a span ends after it starts")
        recorded = self.times[bisect_left(self.times, start) : bisect_left(self.times, end)]
        if not self.times or end <= self.times[-1]:
            return recorded
        projected: list[datetime] = []
        at = next_funding_time(self.times[-1], self.interval())
        while at < end:
            if at >= start:
                projected.append(at)
            at += self.interval()
        return recorded + tuple(projected)

    def next_after(self, at: datetime) -> datetime:
        """The first funding time strictly after `at`: recorded, else projected."""
        at = ensure_utc(at, "time")
        index = bisect_right(self.times, at)
        if index < len(self.times):
            return self.times[index]
        if not self.times:
            raise DomainError(f"{self.symbol}: no recorded funding time to project from")
        return next_funding_time(self.times[-1], self.interval(), at)
